"""The dispatch outbox handler that puts callback notices on the SQS callback queue.

Runs for every event-log item of the table stream (at least once, in any order). Only transitions holding an
interrupt or run-end event of a run with a callbackUrl cost anything (one read of the run head, one SQS batch);
a record delivered twice sends the same notices again under the same ids, and the delivery worker's record of
success keyed by notice id turns the copy into a no-op.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from interlude.adapters.delivery.notices import TokenMinter, build_notices, queue_messages, wants_notices
from interlude.adapters.queues import send_messages
from interlude.config.delivery import delivery_settings
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.rules.auth import RESOLVE_SCOPE, active_key

if TYPE_CHECKING:
    from interlude.app.ports import DispatchedRuns, KeyLookup
    from interlude.domain.clock import Clock
    from interlude.rules.tokens.scheme import Intent


def link_minter(keys: KeyLookup, clock: Clock, state: RunState, since: float | None = None) -> TokenMinter:
    """Links minted for the key that created the run (issue 26, S3): they act for it, so a decision through one is
    that key's (`resolvedBy`), under its eligibility; and they inspect only when it may not decide through the API
    (it lacks approvals:respond, is revoked or expired) or is not known (a run created before keys were recorded).
    `since` (epoch seconds): when their life starts, where that is after their gate was raised: the resume of a tenant
    that was suspended when its notice was to go out (held by the callbacks worker and linked anew then, or its event
    item held by the outbox and handed back then: interlude.adapters.tenant_outside). Never past the gate's deadline."""
    from interlude.adapters.keyring_store import load_key_ring
    from interlude.config import settings
    from interlude.rules.tokens.issuer import interrupt_token

    cfg = settings()
    ring = load_key_ring(cfg.key_ring_secret, max_age_s=cfg.key_ring_cache_seconds)
    key_id = state.createdByKey
    creator = active_key(keys.get_api_key(key_id), key_id, state.tenant, clock()) if key_id else None
    intent: Intent = "resolve" if creator is not None and RESOLVE_SCOPE in creator.scopes else "inspect"

    def mint(interrupt: OpenInterrupt) -> tuple[str, int, str]:
        # The token's life starts when the gate was raised, not when this record is handled: a stream record
        # delivered twice queues the very same notice, token included (while the creating key stands as it was).
        raised = datetime.fromisoformat(interrupt.raisedAt.replace("Z", "+00:00")).timestamp()
        start = raised if since is None else max(raised, since)
        token, expires_at = interrupt_token(ring, state.runId, interrupt, start, intent, minter=key_id)
        return token, expires_at, intent

    return mint


def callback_notices(
    records: DispatchedRuns, keys: KeyLookup, clock: Clock, run_id: str, events: list[dict[str, Any]]
) -> None:
    if not wants_notices(events):
        return
    got = records.run_head(run_id)  # a notice carries none of the inputs
    if got is None:
        return
    state, _ = got
    if not state.callbackUrl:
        return
    cfg = delivery_settings()
    if not cfg.queue_url:
        raise RuntimeError("CALLBACK_QUEUE_URL is not set: callback notices cannot be queued")
    needs_token = any(e.get("type") == "interrupt.requested" and e.get("nodeId") in state.interrupts for e in events)
    # An item held while its tenant was suspended goes out at the resume: its links live from then (ADR 0198).
    mint = link_minter(keys, clock, state, since=records.handed_back_at(run_id)) if needs_token else None
    notices = build_notices(state, events, mint, cfg.public_base_url)
    messages = queue_messages(state.tenant, state.callbackUrl, notices, created_expiry(records, run_id))
    send_messages(cfg.queue_url, messages, "delivery message", state.tenant)


def created_expiry(records: DispatchedRuns, run_id: str) -> dict[str, int] | None:
    """What the deliveries' records are created with to expire, from the run's head as dispatch read it with the
    record's batch (CREATED_EXPIRY); None where it was not read so."""
    from interlude.store.expiry import created_expiry_of

    held = records.held_retained(run_id)
    if held is None:
        return None

    written = created_expiry_of(held.ttl, held.stamped, held.provisional)
    return {name: int(value["N"]) for name, value in written.items()}
