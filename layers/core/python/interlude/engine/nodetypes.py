"""The node types Interlude runs, each with a closed config model.

A task node computes its output at once; a gate node raises an interrupt and suspends the run.
"""


import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import Field

from interlude.domain.budgets import MAX_REMINDER_MS, MAX_REMINDERS, Meter
from interlude.domain.models import FieldLabels, FrozenStored, new_list
from interlude.domain.outcomes import APPROVAL_OUTPUT_FIELDS, approval_outcome
from interlude.domain.templates import Dialect, referenced_nodes, render
from interlude.rules.interrupts.payloads import approval_resume_schema

Action = Literal["accept", "reject", "refine", "edit-accept", "ask"]
DEFAULT_ACTIONS: tuple[Action, ...] = ("accept", "reject")


class NoopConfig(FrozenStored):
    pass


class TransformConfig(FrozenStored):
    # Output object whose string leaves are `{{node_id.field}}` / `{{inputs.x}}` templates.
    outputs: dict[str, Any] = Field(default_factory=dict)


class ApprovalGateConfig(FrozenStored):
    title: str = Field(min_length=1, max_length=500)
    description: str | None = Field(default=None, max_length=10000)
    actions: list[Action] = Field(default_factory=lambda: list(DEFAULT_ACTIONS), min_length=1)
    artifactId: str | None = Field(default=None, min_length=1)
    artifactType: str | None = Field(default=None, min_length=1)
    artifactData: Any = None
    requiredApprovals: int = Field(default=1, ge=1, le=100)
    rejectionPolicy: Literal["single-veto", "majority"] = "single-veto"
    approversList: list[str] = Field(default_factory=new_list)
    overrideBypassesQuorum: bool = False
    overridePrincipals: list[str] = Field(default_factory=new_list)
    approverGroupRefs: list[str] = Field(default_factory=new_list)
    approverRoleRefs: list[str] = Field(default_factory=new_list)
    audience: dict[str, list[str]] | None = None
    onTimeout: Literal["reject", "approve", "escalate"] | None = None
    timeoutMs: int = Field(default=0, ge=0)
    # Interrupt profile name carried by some conformance fixtures; informational.
    profile: str | None = None
    # Issue 14: reminders to those who have not voted, this long after the gate asks (else the tenant's settings),
    # and whom `onTimeout: escalate` notifies (else the tenant's override principals).
    remindersMs: list[Annotated[int, Field(ge=1000, le=MAX_REMINDER_MS)]] | None = Field(default=None, max_length=MAX_REMINDERS)
    escalationPrincipals: list[str] = Field(default_factory=new_list, max_length=100)
    # What a person reads for each field of artifactData, on the approval page, in the console and when editing it.
    fieldLabels: FieldLabels = Field(default_factory=dict)


# Longest a core.delay may sleep (30 days); EventBridge Scheduler one-time schedules have no nearer limit.
MAX_DELAY_MS = 30 * 24 * 3600 * 1000


class DelayConfig(FrozenStored):
    # Or the node's `inputs.delayMs` binding ({"type": "variable", "variableName": ...} or a literal).
    delayMs: int | None = Field(default=None, ge=0, le=MAX_DELAY_MS)


class GateSpec(NamedTuple):
    """What a gate asks: the InterruptPayload without its key."""

    kind: str
    data: dict[str, Any]
    resume_schema: dict[str, Any] | None
    timeout_ms: int
    # node.suspended `reason` (e.g. "low-confidence"), and effects applied once the interrupt is raised
    # (engine/gates.py documents them).
    reason: str | None = None
    effects: tuple[tuple[Any, ...], ...] = ()

    def payload(self, key: str) -> dict[str, Any]:
        """The InterruptPayload this gate raises under `key` (suspend-request.schema.json)."""
        payload: dict[str, Any] = {"kind": self.kind, "key": key, "data": self.data}
        if self.resume_schema is not None:
            payload["resumeSchema"] = self.resume_schema
        if self.timeout_ms:
            payload["timeoutMs"] = self.timeout_ms
        return payload


Effect = tuple[Any, ...]


class Passed(NamedTuple):
    """The gate lets the node complete without asking anyone (engine/gates.py)."""

    output: dict[str, Any]
    effects: tuple[Effect, ...] = ()


class Failed(NamedTuple):
    """The gate fails the node (engine/gates.py)."""

    error: dict[str, Any]


Keying = Literal["business-identity", "activity-recipe"]


class ActionSpec(NamedTuple):
    """What an action node's visit asks the worker to do: the rendered request and the effect's identity
    (engine/actions.py, engine/tasks.py, engine/subworkflows.py)."""

    kind: str
    effect_id: str
    keying: Keying
    request: dict[str, Any]


class NodeType(NamedTuple):
    type_id: str
    config_model: type[FrozenStored]
    # Exactly one of compute, ask, wait and act is set.
    compute: Callable[[Any, Mapping[str, Any]], dict[str, Any]] | None = None
    ask: Callable[[str, Any, Mapping[str, Any]], GateSpec] | None = None
    # A timer node (core.delay): (config, scope, bound inputs) -> milliseconds to sleep, or an error message.
    wait: Callable[[Any, Mapping[str, Any], Mapping[str, Any]], int | str] | None = None
    # An action node (core.http, engine/actions.py): (node id, config, scope) -> an ActionSpec the worker performs
    # outside the run, or an error message.
    act: Callable[[str, Any, Mapping[str, Any]], Any] | None = None
    # A routing node (modulex.conditional): (config, output) -> engine ids of the targets the run continues to;
    # its other outgoing edges count it as skipped, so the branches not taken are skipped (engine/run.py).
    route: Callable[[Any, Any], list[str]] | None = None
    # A node whose output is built from what its templates reference: (config, node ids) -> the node each
    # reference reads, once per reference (engine/growth.py refuses loops that multiply through them).
    reads: Callable[[Any, set[str]], list[str]] | None = None
    # Registration-time problems that need the whole definition: (config, workflow) -> [{path, message}], the path
    # under the node's config (engine.run.check_config).
    check: Callable[[Any, Any], list[dict[str, str]]] | None = None
    # The fields its output holds: config -> names (None: not known before it runs). Registration refuses a reference
    # or an edge condition that reads another field (engine/references.py, engine/conditions.py).
    fields: Callable[[Any], frozenset[str] | None] | None = None
    # Outcomes that go on only over an edge whose condition holds for them (an approval's `refine`): config -> a
    # sample of each, [name, outcome]; registration needs such an edge for every one.
    routed_only: Callable[[Any], list[tuple[str, Any]]] | None = None
    # How its config writes references (None: OpenWOP's `{{node.field}}`, domain/templates.OPENWOP).
    dialect: Dialect | None = None


def _approval(node_id: str, cfg: ApprovalGateConfig, scope: Mapping[str, Any]) -> GateSpec:
    meter = Meter(what="the interrupt's data")
    data: dict[str, Any] = {
        "artifactId": cfg.artifactId or node_id,
        "artifactType": cfg.artifactType or "interlude.gate",
        "title": render(cfg.title, scope, meter=meter),
        "actions": list(cfg.actions),
    }
    if cfg.description is not None:
        data["description"] = render(cfg.description, scope, meter=meter)
    if cfg.artifactData is not None:
        data["artifactData"] = render(cfg.artifactData, scope, meter=meter)
    if cfg.onTimeout is not None:
        data["onTimeout"] = cfg.onTimeout
    if cfg.requiredApprovals != 1:
        data["requiredApprovals"] = cfg.requiredApprovals
    if cfg.rejectionPolicy != "single-veto":
        data["rejectionPolicy"] = cfg.rejectionPolicy
    if cfg.overrideBypassesQuorum:
        data["overrideBypassesQuorum"] = True
    for field in ("approversList", "approverGroupRefs", "approverRoleRefs"):
        if getattr(cfg, field):
            data[field] = list(getattr(cfg, field))
    if cfg.audience is not None:
        data["audience"] = cfg.audience
    return GateSpec("approval", data, approval_resume_schema(list(cfg.actions)), cfg.timeoutMs)


def _refine_routed(cfg: ApprovalGateConfig) -> list[tuple[str, Any]]:
    if "refine" not in cfg.actions:
        return []
    return [("refine", approval_outcome({"refineFeedback": {"scope": "whole", "text": ""}}, "refine"))]


def _noop(cfg: NoopConfig, scope: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def _transform(cfg: TransformConfig, scope: Mapping[str, Any]) -> dict[str, Any]:
    return render(cfg.outputs, scope)


def bind_inputs(bindings: Mapping[str, Any], scope: Mapping[str, Any]) -> dict[str, Any]:
    """A node's `inputs`: `{"type": "variable", "variableName": v}` reads the run input (or variable default) v;
    `{"type": "literal"|"value", "value": x}` is x; anything else is rendered as a template."""
    inputs = scope.get("inputs") or {}
    meter = Meter(what="the node's inputs")
    bound: dict[str, Any] = {}
    for name, binding in bindings.items():
        if isinstance(binding, Mapping) and binding.get("type") == "variable":
            if binding.get("variableName") in inputs:
                bound[name] = inputs[binding["variableName"]]
        elif isinstance(binding, Mapping) and binding.get("type") in ("literal", "value"):
            bound[name] = binding.get("value")
        else:
            bound[name] = render(binding, scope, meter=meter)
    return bound


# A step's declared inputs as bound when it started, kept on its node.started event (the console's step panel, the
# export): under OpenWOP's extension pattern of that closed payload (`x-`, RFC 0185 §B). Up to MAX_STEP_INPUT_BYTES
# of compact JSON is kept whole; a larger binding is kept as its size and digest only (docs/adr/0108: what it costs,
# bench/step_inputs.py).
STEP_INPUTS = "x-interlude-inputs"
STEP_INPUTS_DIGEST = "x-interlude-inputs-digest"
MAX_STEP_INPUT_BYTES = 1024


def recorded_inputs(bound: Mapping[str, Any]) -> dict[str, Any]:
    """What node.started keeps of a step's bound inputs: them, or `{bytes, sha256}` of their compact JSON."""
    text = json.dumps(bound, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=str, allow_nan=False).encode()
    if len(text) <= MAX_STEP_INPUT_BYTES:
        return {STEP_INPUTS: dict(bound)}
    return {STEP_INPUTS_DIGEST: {"bytes": len(text), "sha256": hashlib.sha256(text).hexdigest()}}


def _delay(cfg: DelayConfig, scope: Mapping[str, Any], inputs: Mapping[str, Any]) -> int | str:
    value = cfg.delayMs if cfg.delayMs is not None else inputs.get("delayMs")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_MS:
        return f"delayMs must be an integer from 0 to {MAX_DELAY_MS} (config.delayMs or inputs.delayMs), got {value!r}"
    return value


# engine/registry.py joins these with the sub-workflow's into NODE_TYPES, and registers the gates', actions' and tasks'
# for their first lookup; faces register theirs there.
CORE_TYPES: tuple[NodeType, ...] = (
    NodeType("core.noop", NoopConfig, compute=_noop, fields=lambda cfg: frozenset()),
    NodeType(
        "core.transform",
        TransformConfig,
        compute=_transform,
        reads=lambda cfg, node_ids: referenced_nodes(cfg.outputs, node_ids),
        fields=lambda cfg: frozenset(cfg.outputs),
    ),
    NodeType(
        "core.approvalGate",
        ApprovalGateConfig,
        ask=_approval,
        fields=lambda cfg: APPROVAL_OUTPUT_FIELDS,
        routed_only=_refine_routed,
    ),
    NodeType("core.delay", DelayConfig, wait=_delay, fields=lambda cfg: frozenset({"delayMs"})),
)
