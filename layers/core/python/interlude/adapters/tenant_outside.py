"""What a tenant holds outside the table, for its lifecycle (issue 30 item 6; interlude.app.tenant_lifecycle.Outside):
where the work held while it was suspended goes back at its resume, and its schedules, secrets and open live
connections, which its deletion removes.

Held work names its destination: `queue:{name}` (a wiring.QUEUES message, sent again under the tenant's group) or
`deadline` (a schedule's input, handed back to the scheduler due at once, under a name of its own per deferral; or, in
the timeouts function, which the schedules invoke, fired there). A callbacks message was held without its notices'
decision links (interlude.adapters.delivery.worker): it goes back with links minted anew for the gates still open,
living from the resume (ADR 0190).
A tenant's secrets are found under each prefix of wiring.TENANT_SECRET_PREFIXES by name (`{prefix}{tenant}` and
`{prefix}{tenant}/…`, the tenant written as domain.ids.secret_name writes it), and its webhook subscriptions' by the
names their items record (a subscription from before names were recorded kept its secret elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlude import wiring
from interlude.adapters.delivery.notices import add_link
from interlude.adapters.delivery.outbox import link_minter
from interlude.adapters.delivery.retry import dropped_links, notices_of
from interlude.adapters.held_work import DEADLINE_DESTINATION, QUEUE_DESTINATION
from interlude.adapters.queues import send_grouped
from interlude.adapters.scheduler.names import handed_back_name
from interlude.adapters.scheduler.scheduler import Scheduler
from interlude.adapters.subscription_secrets import subscription_secrets
from interlude.app.ports import Connections
from interlude.config.actions import ACTION_SECRET_PREFIX_ENV, action_settings
from interlude.config.delivery import SUBSCRIPTION_SECRET_PREFIX_ENV, WEBHOOK_SECRET_PREFIX_ENV, delivery_settings
from interlude.config.notify import SLACK_SECRET_PREFIX_ENV, SLACK_SIGNING_SECRET_PREFIX_ENV, notify_settings
from interlude.config.queues import queue_settings
from interlude.domain.clock import Clock
from interlude.domain.ids import secret_name
from interlude.store.facade import Store
from interlude.store.tenants import HANDED_BACK_AT, Held
from interlude.store.webhooks import WebhookStore

# A deferred deadline handed back is due this long after the resume (a schedule due in the past is not one a
# deployment ever makes; Scheduler fires within a minute of its time).
HAND_BACK_DELAY_S = 5


def secret_prefixes() -> tuple[str, ...]:
    """The deployment's name prefix of each kind of secret a tenant may hold, one per wiring.TENANT_SECRET_PREFIXES
    (a kind declared there that no setting here reads fails the deletion, rather than keep that kind's secrets)."""
    delivery, notify = delivery_settings(), notify_settings()
    configured = {
        WEBHOOK_SECRET_PREFIX_ENV: delivery.secret_prefix,
        SUBSCRIPTION_SECRET_PREFIX_ENV: delivery.subscription_secret_prefix,
        SLACK_SECRET_PREFIX_ENV: notify.slack_secret_prefix,
        SLACK_SIGNING_SECRET_PREFIX_ENV: notify.slack_signing_secret_prefix,
        ACTION_SECRET_PREFIX_ENV: action_settings().secret_prefix,
    }
    return tuple(configured[kind] for kind in wiring.TENANT_SECRET_PREFIXES)


def queue_url(queue: str) -> str:
    """The URL of a queue held work goes back to (the admin function is given each: wiring's `sends_to`)."""
    urls = {
        wiring.OUTBOX_QUEUE: queue_settings().outbox_url,
        "callbacks": delivery_settings().queue_url,
        "actions": action_settings().queue_url,
        "notifications": notify_settings().queue_url,
    }
    if not urls.get(queue):
        raise RuntimeError(f"no URL of the {queue} queue is set: held work cannot go back to it")
    return urls[queue]


class TenantOutside:
    def __init__(
        self,
        store: Store,
        scheduler: Scheduler | None,
        secrets: Any,
        clock: Clock,
        connections: Connections | None,
        fire: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        self.store = store
        self.scheduler = scheduler
        self.secrets = secrets
        self.clock = clock
        # The WebSocket API's management API (None: the deployment has no WebSocket API).
        self.connections = connections
        # Where the schedules' target hands a deferred deadline back: fired in the function itself (it cannot be a
        # manager of the schedules that invoke it: its role's grants would name its own ARN).
        self.fire = fire

    def hand_back(self, tenant: str, held: Held) -> None:
        if held.destination == DEADLINE_DESTINATION:
            if self.fire is not None:
                self.fire(held.body)
                return
            if self.scheduler is None:
                raise RuntimeError("this deployment has no scheduler to hand a deferred deadline back to")
            due = self.clock().timestamp() + HAND_BACK_DELAY_S
            self.scheduler.hand_back(handed_back_name(tenant, f"{held.sk}@{held.held_at}"), held.body, due)
            return
        queue = held.destination.removeprefix(QUEUE_DESTINATION)
        body = held.body
        if queue == "callbacks":
            body = self.linked(body)
        elif queue in (wiring.OUTBOX_QUEUE, "notifications"):
            # Its notices' links, or its notification's personal link, live from now, as the held callbacks' do
            # (adapters/delivery/outbox.link_minter, adapters/notify/worker): minted from the gate's raise, they could
            # have expired during the suspension.
            body = {**body, HANDED_BACK_AT: self.clock().timestamp()}
        send_grouped(queue_url(queue), [(tenant, body)], "held message")

    def linked(self, message: dict[str, Any]) -> dict[str, Any]:
        """A held callbacks message, each notice of a gate still open with a decision link minted now (as the outbox
        mints one, for the key that created the run), living from now: however long the suspension, it works. A
        notice of a gate decided meanwhile goes without one; a link held by a release before this one is replaced."""
        message = dropped_links(message)
        asked = [n for n in notices_of(message) if n.get("type") == "interrupt.requested" and n.get("interruptId")]
        got = self.store.get_run(asked[0]["runId"]) if asked else None
        if got is None:
            return message
        state = got[0]
        mint = link_minter(self.store, self.clock, state, since=self.clock().timestamp())
        for notice in asked:
            interrupt = state.interrupts.get(notice.get("nodeId", ""))
            if interrupt is not None and interrupt.interruptId == notice["interruptId"]:
                add_link(notice, interrupt, mint, delivery_settings().public_base_url)
        return message

    def tenant_schedules(self, tenant: str) -> list[str]:
        return [] if self.scheduler is None else self.scheduler.tenant_schedules(tenant)

    def delete_schedules(self, names: list[str]) -> None:
        if self.scheduler is not None:
            self.scheduler.delete_schedules(names)

    def tenant_secrets(self, tenant: str) -> list[str]:
        """The names of the tenant's secrets."""
        recorded = subscription_secrets()
        names = {recorded.name_of(subscription) for subscription in WebhookStore(self.store.table, self.store.client).of_tenant(tenant)}
        for prefix in secret_prefixes():
            own = secret_name(prefix, tenant)
            pages = self.secrets.get_paginator("list_secrets").paginate(
                Filters=[{"Key": "name", "Values": [own]}], IncludePlannedDeletion=True
            )
            found = (entry["Name"] for page in pages for entry in page.get("SecretList") or [])
            names.update(name for name in found if name == own or name.startswith(f"{own}/"))
        return sorted(names)

    def delete_secrets(self, names: list[str]) -> None:
        """Delete the secrets named at once, without a recovery window: a deletion removes the tenant's data."""
        for name in names:
            try:
                self.secrets.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
            except self.secrets.exceptions.ResourceNotFoundException:
                continue

    def close_connections(self, connection_ids: list[str]) -> None:
        """Close each connection still open (a deleted tenant's)."""
        if self.connections is not None:
            for connection_id in connection_ids:
                self.connections.close(connection_id)
