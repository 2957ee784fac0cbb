"""`core.subWorkflow` (issue 15 item 3): a node that starts a child run of another workflow and waits for it. Pure.

A visit names its child run (derived from run, node and visit, so a redelivered request starts the same child
once) and waits like an action node (PendingAction of kind "subWorkflow"); the `interlude.child-requested` event
is the outbox's cue to start the child (interlude.app.subworkflows). The child's terminal transition is the cue
to land its outcome on the parent (engine.run.finish_action, which ignores a visit that no longer waits, so the
parent hears it exactly once): completed -> the node's output is the child's outputs; failed or cancelled on its
own -> the node fails. Cancelling (or failing) the parent cancels its unfinished children, with reason
"parent-cancelled" and the parent's runId on their `run.cancelled`.

Limits (README): a child sits at most MAX_DEPTH levels under its root run, and a run starts at most
MAX_CHILDREN_PER_RUN children over its life. A visit past either fails its node
(interlude.subworkflow_limit_exceeded), so no run waits on a child that could not start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from interlude.domain.errors import run_error
from interlude.domain.ids import derive_opaque, tenant_bound, tenant_of
from interlude.domain.models import FrozenClosed
from interlude.domain.models.run import RunState
from interlude.engine.actions import ActionSpec
from interlude.engine.nodetypes import NodeType, bind_inputs

SUBWORKFLOW = "subWorkflow"
CHILD_REQUESTED = "interlude.child-requested"
MAX_DEPTH = 5
MAX_CHILDREN_PER_RUN = 50
PARENT_CANCELLED = "parent-cancelled"


class SubWorkflowConfig(FrozenClosed):
    workflowId: str = Field(min_length=1, max_length=256)
    # Cancelling the parent cancels the child (the only policy this host has; false is refused at registration,
    # since a detached child would outlive the run that waits on it).
    propagateCancellation: bool = True
    # The child's inputs: an object whose string leaves are templates over the parent's scope.
    inputs: dict[str, Any] = Field(default_factory=dict)


def child_run_id(run_id: str, node_id: str, visit: int) -> str:
    return tenant_bound(tenant_of(run_id), derive_opaque("child", run_id, node_id, str(visit)))


def _sub_workflow(node_id: str, cfg: SubWorkflowConfig, scope: Mapping[str, Any]) -> ActionSpec | str:
    if not cfg.propagateCancellation:
        return f"node {node_id!r}: propagateCancellation false (a detached child) is not supported by this host"
    run = scope.get("$run") or {}
    child = child_run_id(run.get("runId", "probe/probe"), node_id, int(run.get("visit", 1)))
    inputs = bind_inputs(cfg.inputs, scope)
    return ActionSpec(SUBWORKFLOW, child, "activity-recipe", {"workflowId": cfg.workflowId, "inputs": inputs})


def limit_error(state: RunState, node_id: str) -> dict[str, Any] | None:
    """The error a visit fails with when starting one more child would pass a limit; None when it may start."""
    if state.depth + 1 > MAX_DEPTH:
        return run_error(
            "interlude.subworkflow_limit_exceeded",
            f"node {node_id!r}: a child would sit deeper than {MAX_DEPTH} levels under its root run",
            {"nodeId": node_id, "limit": MAX_DEPTH, "budget": "depth"},
        )
    if len(state.children) >= MAX_CHILDREN_PER_RUN:
        return run_error(
            "interlude.subworkflow_limit_exceeded",
            f"node {node_id!r}: the run has started {MAX_CHILDREN_PER_RUN} children already",
            {"nodeId": node_id, "limit": MAX_CHILDREN_PER_RUN, "budget": "children"},
        )
    return None


def child_outcome(child: RunState) -> dict[str, Any]:
    """What a terminal child lands on its parent's node: `{"output": ...}` or `{"error": ...}`."""
    details: dict[str, Any] = {"childRunId": child.runId}
    if child.status == "completed":
        return {"output": dict(child.outputs)}
    if child.status == "failed":
        details["childError"] = {k: v for k, v in (child.error or {}).items() if k in ("code", "message")}
        return {"error": run_error("interlude.subworkflow_failed", f"child run {child.runId} failed", details)}
    return {"error": run_error("interlude.subworkflow_cancelled", f"child run {child.runId} was cancelled", details)}


SUBWORKFLOW_TYPES: tuple[NodeType, ...] = (NodeType("core.subWorkflow", SubWorkflowConfig, act=_sub_workflow),)
