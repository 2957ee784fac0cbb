"""Work handed to a worker for a tenant that may not act now (issue 30 item 6): every queue worker's and the deadline
worker's entry point asks `admitted` before it acts. Work of a suspended tenant is held in the table for its resume
(handed back then to `queue:{name}`, or to the scheduler for a `deadline`: interlude.adapters.tenant_outside); work of
a tenant being deleted is dropped. Either way the message (or the schedule's invocation) succeeds: nothing waits in a
queue for a resume that may come after the queue's retention."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

from interlude.adapters import metrics
from interlude.domain import formats
from interlude.domain.ids import tenant_of
from interlude.store.layout import tenant_of_pk
from interlude.store.tenant_standing import TenantStanding

log = logging.getLogger(__name__)

QUEUE_DESTINATION = "queue:"
DEADLINE_DESTINATION = "deadline"


def queue_destination(queue: str) -> str:
    return f"{QUEUE_DESTINATION}{queue}"


def message_body(raw: str) -> dict[str, Any]:
    """A queued message's JSON object ({} when it is none: its worker refuses it as it would anyway)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def read_message(raw: str, kind: str) -> dict[str, Any]:
    """A queued message of `kind` as its worker reads it: a JSON object in a format this release reads. Anything else
    raises (its message fails, and after its queue's receives waits in its dead letters): a later release's message is
    refused by name (interlude.item_too_new), never taken for the one this release would have written."""
    body = json.loads(raw)
    if not isinstance(body, dict):
        raise ValueError(f"not a message of the {kind} queue: its body is JSON but no object")
    formats.check(f"{kind} message", body.get(formats.FORMAT_FIELD))
    return body


def message_tenant(body: dict[str, Any]) -> str | None:
    """The tenant a queued message or a schedule's input is for: named (callbacks, notifications), or its run's
    (actions, deadlines), or its item's partition (the outbox)."""
    if isinstance(body.get("tenant"), str):
        return str(body["tenant"])
    run_id = body.get("runId")
    if isinstance(run_id, str) and "/" in run_id:
        return tenant_of(run_id)
    pk = body.get("pk")
    if isinstance(pk, str) and pk.startswith("T#"):
        return tenant_of_pk(pk)
    return None


def admitted(standing: TenantStanding, destination: str, body: dict[str, Any]) -> bool:
    """Whether the worker acts on `body` now; if not, it was held (or dropped) here, and the worker is done with it.
    Held under a digest of the body: the same work delivered again (SQS and the stream deliver at least once, a
    scheduler retries) is held once."""
    tenant = message_tenant(body)
    if tenant is None:
        return True
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()).hexdigest()
    outcome = standing.admit(tenant, destination, digest[:40], body)
    if outcome == "act":
        return True
    log.info("work for a tenant that may not act now", extra={"tenant": tenant, "outcome": outcome, "to": destination})
    metrics.count("TenantWork", outcome=outcome)
    return False


def deadline_admitted(standing: TenantStanding, event: dict[str, Any]) -> bool:
    """`admitted` for a schedule's input (a deadline, a reminder, a task check)."""
    return admitted(standing, DEADLINE_DESTINATION, event)


def upkeep_time(standing: TenantStanding, tenant: str, remaining_ms: Callable[[], int]) -> Callable[[], bool] | None:
    """The time of a turn of upkeep of `tenant`'s data on the migrations queue (`remaining_ms`: the invocation's): pages
    while a minute is left and its data is kept up (it is active or suspended); None when it is not (being deleted, or
    deleted: the turn is dropped, its message taken, and a turn that saw the deletion begin stops at its next page:
    docs/adr/0201)."""
    if not standing.keeps_data(tenant):
        log.info("a turn of a tenant's data dropped: the tenant is being deleted", extra={"tenant": tenant})
        metrics.count("TenantWork", outcome="dropped")
        return None
    margin = min(60_000, remaining_ms() // 4)
    return lambda: remaining_ms() > margin and standing.keeps_data(tenant)
