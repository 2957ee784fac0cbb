"""The dispatch outbox handler that queues webhook subscription deliveries on the callbacks queue (issue 14).

Runs for every event-log item of the table stream. One Query of the tenant's subscriptions per outbox batch (its
records were all committed before the batch read them, so the subscriptions found after that are those each record
would find alone: every one created before it committed, none deleted before; HeldRuns.once); the run head (held for
the batch by the dispatch: no read of its own) is consulted when a subscription wants one of the
events, for its tags and for whether the run is a replay fork, whose events are its source's history run again and
are never delivered (OpenWOP webhooks.md; a branch's, a redrive's included, are: docs/adr/0108). A record handled
twice queues the same deliveries again under the same ids; the worker's record of success turns the copy into a
no-op.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.adapters.delivery.subscriptions import webhook_message
from interlude.adapters.queues import send_messages
from interlude.config.delivery import delivery_settings
from interlude.domain.ids import tenant_of
from interlude.rules.webhooks import wants

if TYPE_CHECKING:
    from interlude.app.ports import DispatchedRuns, WebhookRecords


def webhook_deliveries(
    subscriptions_of: WebhookRecords, records: DispatchedRuns, run_id: str, events: list[dict[str, Any]]
) -> None:
    """The dispatch outbox handler: one queued delivery per (subscription that wants it, event)."""
    tenant = tenant_of(run_id)
    # Strongly consistent: a subscription whose creation returned before an event was committed receives it (an
    # eventually consistent read may miss one created a moment before).
    read = partial(subscriptions_of.of_tenant, tenant, consistent=True)
    subscriptions = records.once(("subscriptions", tenant), read)
    types = {e.get("type") for e in events}
    wanted = [s for s in subscriptions if types & set(s["events"])]
    if not wanted:
        return
    got = records.run_head(run_id)  # its tags and fork alone
    if got is not None and got[0].fork is not None and got[0].fork.mode == "replay":
        return
    run_tags = list(got[0].tags) if got else []
    messages = [
        webhook_message(s["webhookId"], run_id, event)
        for event in events
        for s in wanted
        if wants(s, event["type"], run_tags)
    ]
    if not messages:
        return
    cfg = delivery_settings()
    if not cfg.queue_url:
        raise RuntimeError("CALLBACK_QUEUE_URL is not set: webhook deliveries cannot be queued")
    send_messages(cfg.queue_url, messages, "delivery message", tenant)
