"""`core.subWorkflow` (issue 15 item 3): a node that starts a child run of another workflow and waits for it. Pure.

A visit names its child run (derived from run, node and visit, so a redelivered request starts the same child
once) and waits like an action node (PendingAction of kind "subWorkflow"); the `interlude.child-requested` event
is the outbox's cue to start the child (interlude.app.subworkflows). The child's terminal transition is the cue
to land its outcome on the parent (engine.run.finish_action, which ignores a visit that no longer waits, so the
parent hears it exactly once): completed -> the node's output is the child's outputs; failed or cancelled on its
own -> the node fails. Cancelling (or failing) the parent cancels its unfinished children, with reason
"parent-cancelled" and the parent's runId on their `run.cancelled`.

Mappings (README, "Sub-workflows"): `inputMapping` {childVariable: parentVariable} seeds the child's inputs from
the parent's (RFC 0022 §B: over the child's variable defaults); `outputMapping` {outputField: "childNode.path"}
makes the node's output exactly those fields of the child's outputs instead of all of them. Both are checked when
the parent is registered (a parent variable it does not declare, a key also bound by `inputs`, an empty path);
a path the finished child does not have fails the node (interlude.subworkflow_output_missing).

Limits (README): a child sits at most MAX_DEPTH levels under its root run, and a run starts at most
MAX_CHILDREN_PER_RUN children over its life. A visit past either fails its node
(interlude.subworkflow_limit_exceeded), so no run waits on a child that could not start. A mapping holds at most
MAX_MAPPING_ENTRIES entries.
"""


from collections.abc import Mapping
from typing import Any, Self

from pydantic import Field, field_validator, model_validator

from interlude.domain.errors import run_error
from interlude.domain.ids import derive_opaque, tenant_bound, tenant_of
from interlude.domain.models import FrozenStored
from interlude.domain.models.run import RunState
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.templates import MISSING, lookup
from interlude.engine.effect_names import CHILD_REQUESTED as CHILD_REQUESTED
from interlude.engine.nodetypes import ActionSpec, NodeType, bind_inputs

SUBWORKFLOW = "subWorkflow"
MAX_DEPTH = 5
MAX_CHILDREN_PER_RUN = 50
PARENT_CANCELLED = "parent-cancelled"
MAX_MAPPING_ENTRIES = 100


class SubWorkflowConfig(FrozenStored):
    workflowId: str = Field(min_length=1, max_length=256)
    # Cancelling the parent cancels the child (the only policy this host has; false is refused at registration,
    # since a detached child would outlive the run that waits on it).
    propagateCancellation: bool = True
    # The child's inputs: an object whose string leaves are templates over the parent's scope.
    inputs: dict[str, Any] = Field(default_factory=dict)
    # {child variable: parent variable} (RFC 0022 §B; discovery subWorkflow.inputMapping).
    inputMapping: dict[str, str] = Field(default_factory=dict, max_length=MAX_MAPPING_ENTRIES)
    # {field of this node's output: "childNodeId.path" into the child's outputs}.
    outputMapping: dict[str, str] = Field(default_factory=dict, max_length=MAX_MAPPING_ENTRIES)

    @field_validator("propagateCancellation")
    @classmethod
    def _attached(cls, value: bool) -> bool:
        if not value:
            raise ValueError("false (a detached child) is not supported by this host: cancelling the parent cancels it")
        return value

    @field_validator("inputMapping", "outputMapping")
    @classmethod
    def _names(cls, mapping: dict[str, str]) -> dict[str, str]:
        for key, source in mapping.items():
            if not 0 < len(key) <= 128 or not 0 < len(source) <= 256:
                raise ValueError("every key (1-128 characters) and source (1-256 characters) must be non-empty")
        return mapping

    @field_validator("outputMapping")
    @classmethod
    def _paths(cls, mapping: dict[str, str]) -> dict[str, str]:
        for key, path in mapping.items():
            if any(part == "" for part in path.split(".")):
                raise ValueError(f"{key!r}: {path!r} is not a path into the child's outputs (childNodeId.field...)")
        return mapping

    @model_validator(mode="after")
    def _one_source_per_input(self) -> Self:
        both = sorted(set(self.inputs) & set(self.inputMapping))
        if both:
            raise ValueError(f"child inputs {both} are set by both `inputs` and `inputMapping`; keep one")
        return self


def child_run_id(run_id: str, node_id: str, visit: int) -> str:
    return tenant_bound(tenant_of(run_id), derive_opaque("child", run_id, node_id, str(visit)))


def _sub_workflow(node_id: str, cfg: SubWorkflowConfig, scope: Mapping[str, Any]) -> ActionSpec:
    run = scope.get("$run") or {}
    child = child_run_id(run.get("runId", "probe/probe"), node_id, int(run.get("visit", 1)))
    inputs = bind_inputs(cfg.inputs, scope)
    parent_inputs = scope.get("inputs") or {}
    # A parent variable the run was not given (and has no default for) leaves the child's own default in place.
    inputs.update(
        {child_var: parent_inputs[var] for child_var, var in cfg.inputMapping.items() if var in parent_inputs}
    )
    request: dict[str, Any] = {"workflowId": cfg.workflowId, "inputs": inputs}
    if cfg.outputMapping:
        request["outputMapping"] = dict(cfg.outputMapping)
    return ActionSpec(SUBWORKFLOW, child, "activity-recipe", request)


def check_sub_workflow(cfg: SubWorkflowConfig, workflow: WorkflowDefinition) -> list[dict[str, str]]:
    """Registration-time problems the config alone cannot show: inputMapping naming an undeclared parent variable."""
    declared = {v.name for v in workflow.variables}
    return [
        {"path": f"inputMapping/{child_var}", "message": f"{var!r} is not a variable this workflow declares"}
        for child_var, var in cfg.inputMapping.items()
        if var not in declared
    ]


def mapped_outcome(request: Mapping[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
    """A finished child's outcome as its node lands it: through the node's outputMapping when it has one."""
    mapping = request.get("outputMapping")
    if not mapping or "output" not in outcome:
        return outcome
    outputs = outcome["output"] if isinstance(outcome["output"], Mapping) else {}
    projected = {key: lookup(path, outputs) for key, path in mapping.items()}
    missing = sorted(path for key, path in mapping.items() if projected[key] is MISSING)
    if missing:
        return {
            "error": run_error(
                "interlude.subworkflow_output_missing",
                f"the child's outputs have no {', '.join(missing)}",
                {"missing": missing},
            )
        }
    return {"output": projected}


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


SUBWORKFLOW_TYPES: tuple[NodeType, ...] = (
    NodeType("core.subWorkflow", SubWorkflowConfig, act=_sub_workflow, check=check_sub_workflow),
)
