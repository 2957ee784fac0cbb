"""The task item's key and fields, and how a run's ending transaction ends the task of a visit it stops waiting for
(store/tasks.py has the task's life and its ready index; this part travels in the run's transition, store/transitions.py,
where the dispatch function's records load no task store)."""

from __future__ import annotations

from typing import Any

from interlude import wiring
from interlude.domain.models.run import PendingAction
from interlude.store import attributes as a

TASK_SK = "TASK"


def task_pk(task_id: str) -> str:
    tenant, opaque = task_id.split("/", 1)
    return f"T#{tenant}#TK#{opaque}"


def task_fields(task_id: str, run_id: str, node_id: str, visit: int, request: dict[str, Any]) -> dict[str, Any]:
    return {
        "taskId": a.s(task_id),
        "tenant": a.s(task_id.split("/", 1)[0]),
        "runId": a.s(run_id),
        "nodeId": a.s(node_id),
        "visit": a.n(visit),
        "queue": a.s(request["queue"]),
        "attempt": a.n(1),
        "request": a.as_json(request),
    }


def abandoned_update(
    run_id: str, node_id: str, pending: PendingAction, expires: int | None = None
) -> tuple[str, dict[str, Any]]:
    """(label, TransactWriteItem) ending the task of a visit the run no longer waits for, in the transaction that
    ends the run: cancelled whatever it was (ready, claimed, or settled with an outcome that never landed). Written
    whole when the outbox has not made it yet (so it never will: the outbox makes no task for an ended run). No
    condition: a condition failing here would refuse the run's own transition. `expires`: the run's expiry (a run
    that ends) or its items' provisional one, which the task keeps (store/retention.py)."""
    fields = task_fields(pending.effectId, run_id, node_id, pending.visit, pending.request)
    if expires is not None:
        fields[wiring.TTL_ATTRIBUTE] = a.n(expires)
    names = {f"#{name}": name for name in fields}
    values = {f":{name}": value for name, value in fields.items()}
    kept = ", ".join(f"#{name} = if_not_exists(#{name}, :{name})" for name in fields)
    update = {
        "Key": a.key(task_pk(pending.effectId), TASK_SK),
        # The claim's nonce stays: its holder is told the task was cancelled (interlude.app.tasks).
        "UpdateExpression": f"SET #st = :cancelled, {kept}",
        "ExpressionAttributeNames": {"#st": "status", **names},
        "ExpressionAttributeValues": {":cancelled": a.s("cancelled"), **values},
    }
    return TASK_SK, {"Update": update}
