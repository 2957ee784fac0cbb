"""The event types the outbox acts on beside the run's own (an action or a child requested) and a task's derived id.

Apart from the node types that write them (engine/actions.py, tasks.py, subworkflows.py), which build their config
models and the engine's node-type machinery: the dispatch function's outbox reads these names on every record and
loads those modules only when a record holds such a request (docs/adr/0058, "The worker functions' cold
imports").
"""

from __future__ import annotations

from interlude.domain.ids import derive_opaque, tenant_bound, tenant_of

ACTION_REQUESTED = "interlude.action-requested"
CHILD_REQUESTED = "interlude.child-requested"
# An action request's kind when a tenant's worker performs it (core.task) instead of the actions function.
TASK = "task"
# The event a retry records (OpenWOP's registered type; payload: nodeId, attempt (the next), delayMs, error), and the
# reason it gives when a failed run runs again (engine.run.retry_action: its items keep, app/retention.py).
NODE_RETRIED = "node.retried"
RERUN_REASON = "retried"
# A gate claimed, released or assigned (engine.run.assign): the store puts the gate's inbox entries again with who
# works it, in the same transaction (store/transitions.py).
GATE_ASSIGNED = "interlude.gate-assigned"


def task_id(run_id: str, node_id: str, visit: int) -> str:
    return tenant_bound(tenant_of(run_id), derive_opaque("task", run_id, node_id, str(visit)))
