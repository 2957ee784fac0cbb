"""The gates that complete the interrupt kinds: clarifications, custom and external-event interrupts, conversations,
low confidence and credentials (an approval's is engine/nodetypes.py's, beside the run rules that every decision loads).

Each `ask` returns what the node does on this visit: a GateSpec (suspend), a `Passed` (complete at once, e.g.
a confidence at or above the threshold) or a `Failed` (e.g. an exchange on a conversation that is not open).
`scope["$run"]` carries the run facts a gate may need (run id, visit, run options, conversations) under a key
no template can reference; `scope[PROBE]` is set when registration probes the gate for the payload it
would raise (engine.check_config), so every probe answers a GateSpec.

Gate effects (`effects`): ("event", type, payload) appends an event; ("conversation", id, status) records a
conversation of the run ("open" also claims the id tenant-wide in the same transaction).
"""


from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from interlude.domain.budgets import Meter
from interlude.domain.errors import run_error
from interlude.domain.ids import AUTHOR_ID, derive_opaque
from interlude.domain.models import FieldLabels, FrozenStored, new_list
from interlude.domain.templates import PROBE, references, render
from interlude.engine.nodetypes import Effect, Failed, GateSpec, NodeType, Passed
from interlude.rules.interrupts.payloads import clarification_resume_schema

# The fixed resumeSchema of a credential interrupt (suspend-request.schema.json, RFC 0199): exactly this.
CREDENTIAL_RESUME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["outcome"],
    "properties": {"outcome": {"enum": ["authorized", "declined"]}},
}
LOW_CONFIDENCE_RESUME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["action"],
    "properties": {
        "action": {"enum": ["accept", "reject"]},
        "decision": {},
        "comment": {"type": "string", "maxLength": 10000},
    },
}
DEFAULT_ESCALATION_THRESHOLD = 0.7


def _check_schema(schema: dict[str, Any] | None) -> None:
    if schema is not None:
        # jsonschema loads on first use: a cold start that checks no gate schema does not pay for it.
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from None


def _run(scope: Mapping[str, Any]) -> Mapping[str, Any]:
    return scope.get("$run") or {}


def _mint_conversation_id(node_id: str, scope: Mapping[str, Any]) -> str:
    run = _run(scope)
    if not run:
        return "conv-probe"
    # Derived from (run, node, visit): unique across the tenant because run ids are; the conversation item
    # written with the transition (attribute_not_exists) makes the uniqueness a checked invariant.
    return "conv-" + derive_opaque("conversation", run["runId"], node_id, str(run["visit"]))


# -- core.clarificationGate and core.interrupt ------------------------------------------------------


class Question(FrozenStored):
    id: str = Field(min_length=1, max_length=128)
    question: str = Field(min_length=1, max_length=10000)
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class ClarificationGateConfig(FrozenStored):
    questions: list[Question] = Field(min_length=1, max_length=100)
    contextType: str | None = None
    timeoutMs: int = Field(default=0, ge=0)
    fieldLabels: FieldLabels = Field(default_factory=dict)
    # Whom the gate asks (notified like an approval's recipients): {subjects, groups, roles}, the approval's `audience`.
    audience: dict[str, list[str]] | None = None


class InterruptConfig(FrozenStored):
    kind: Literal["custom", "external-event"]
    data: dict[str, Any]
    resumeSchema: dict[str, Any] | None = None
    timeoutMs: int = Field(default=0, ge=0)
    fieldLabels: FieldLabels = Field(default_factory=dict)
    # Whom the gate asks (notified like an approval's recipients): {subjects, groups, roles}, the approval's `audience`.
    audience: dict[str, list[str]] | None = None


def _clarification(node_id: str, cfg: ClarificationGateConfig, scope: Mapping[str, Any]) -> GateSpec:
    meter = Meter(what="the interrupt's data")
    questions = []
    for q in cfg.questions:
        item: dict[str, Any] = {"id": q.id, "question": render(q.question, scope, meter=meter)}
        if q.schema_ is not None:
            item["schema"] = q.schema_
        questions.append(item)
    data: dict[str, Any] = {"questions": questions}
    if cfg.contextType:
        data["contextType"] = cfg.contextType
    return GateSpec("clarification", data, clarification_resume_schema(questions), cfg.timeoutMs)


def _interrupt(node_id: str, cfg: InterruptConfig, scope: Mapping[str, Any]) -> GateSpec:
    return GateSpec(cfg.kind, render(cfg.data, scope), cfg.resumeSchema, cfg.timeoutMs)


# -- core.conversationGate ------------------------------------------------------------------------


class ConversationGateConfig(FrozenStored):
    # One turn of a conversation per node: start (the host mints conversationId), exchange, close.
    turn: Literal["start", "exchange", "close"] | None = None
    # The conformance fixture's whole lifecycle in one node, answered by the host's mock (mockAutoResume).
    lifecycle: Literal["open-exchange-close"] | None = None
    mockAutoResume: bool = False
    conversationId: str | None = Field(default=None, min_length=1, max_length=256)
    title: str | None = None
    initialPrompt: str | None = None
    prompt: str | None = Field(default=None, min_length=1)
    outcomeSchema: dict[str, Any] | None = None
    turnIndex: int | None = Field(default=None, ge=0)
    reason: str | None = None
    timeoutMs: int = Field(default=0, ge=0)
    fieldLabels: FieldLabels = Field(default_factory=dict)

    @model_validator(mode="after")
    def _coherent(self) -> Self:
        if (self.turn is None) == (self.lifecycle is None):
            raise ValueError("set exactly one of turn (start|exchange|close) and lifecycle")
        if self.lifecycle is not None and not self.mockAutoResume:
            raise ValueError("lifecycle runs only under the conformance mock (mockAutoResume: true)")
        if self.turn is not None and self.mockAutoResume:
            raise ValueError("mockAutoResume applies to lifecycle only")
        if self.turn == "start" and self.conversationId is not None:
            raise ValueError("conversation.start mints its conversationId; do not set one")
        if self.turn in ("exchange", "close") and self.conversationId is None:
            raise ValueError(f"turn {self.turn} needs conversationId (e.g. '{{{{start-node.conversationId}}}}')")
        if self.turn == "exchange" and self.prompt is None:
            raise ValueError("turn exchange needs a prompt")
        _check_schema(self.outcomeSchema)
        return self


def _conversation(node_id: str, cfg: ConversationGateConfig, scope: Mapping[str, Any]) -> Any:
    if cfg.lifecycle is not None:
        return _conversation_lifecycle(node_id, cfg, scope)
    if cfg.turn == "start":
        return _conversation_start(node_id, cfg, scope)
    cid = render(cfg.conversationId, scope)
    if not scope.get(PROBE):
        refused = _turn_refused(cfg, cid, _run(scope))
        if refused is not None:
            return refused
    if cfg.turn == "exchange":
        data: dict[str, Any] = {"conversationId": cid, "prompt": render(cfg.prompt, scope)}
        if cfg.outcomeSchema is not None:
            data["outcomeSchema"] = cfg.outcomeSchema
        if cfg.turnIndex is not None:
            data["turnIndex"] = cfg.turnIndex
        return GateSpec("conversation.exchange", data, None, cfg.timeoutMs)
    data = {"conversationId": cid}
    if cfg.reason is not None:
        data["reason"] = render(cfg.reason, scope)
    # Closing: no exchange may be raised on this conversation from here on.
    return GateSpec("conversation.close", data, None, cfg.timeoutMs, effects=(("conversation", cid, "closing"),))


def _conversation_lifecycle(node_id: str, cfg: ConversationGateConfig, scope: Mapping[str, Any]) -> Any:
    """The conformance mock's whole conversation in one visit: opened, one exchange answered, closed."""
    cid = _mint_conversation_id(node_id, scope)
    if scope.get(PROBE):
        return GateSpec("conversation.start", {"conversationId": cid}, None, 0)
    opened: dict[str, Any] = {"conversationId": cid}
    if cfg.title:
        opened["title"] = render(cfg.title, scope)
    effects: tuple[Effect, ...] = (
        ("conversation", cid, "open"),
        ("event", "conversation.opened", opened),
        (
            "event",
            "conversation.exchanged",
            {"conversationId": cid, "turnIndex": 0, "prompt": cfg.prompt or "", "response": {"mock": True}},
        ),
        ("event", "conversation.closed", {"conversationId": cid, "reason": "mock-auto-resume"}),
        ("conversation", cid, "closed"),
    )
    return Passed({"conversationId": cid, "turns": 1, "closed": True}, effects)


def _conversation_start(node_id: str, cfg: ConversationGateConfig, scope: Mapping[str, Any]) -> GateSpec:
    cid = _mint_conversation_id(node_id, scope)
    data: dict[str, Any] = {"conversationId": cid}
    if cfg.title is not None:
        data["title"] = render(cfg.title, scope)
    if cfg.initialPrompt is not None:
        data["initialPrompt"] = render(cfg.initialPrompt, scope)
    opened = {k: v for k, v in data.items() if k != "initialPrompt"}
    effects = (("conversation", cid, "open"), ("event", "conversation.opened", opened))
    return GateSpec("conversation.start", data, None, cfg.timeoutMs, effects=effects)


def _turn_refused(cfg: ConversationGateConfig, cid: Any, run: Mapping[str, Any]) -> Failed | None:
    """Why an exchange or close cannot go ahead: the conversation is not open in this run, or an exchange is."""
    conversations = run.get("conversations") or {}
    if not isinstance(cid, str) or conversations.get(cid) != "open":
        return Failed(
            run_error(
                "validation_error",
                f"conversation {cid!r} is not open in this run (start it with a conversation.start turn)",
            )
        )
    if cfg.turn == "close" and cid in (run.get("exchanging") or ()):
        return Failed(run_error("validation_error", f"conversation {cid!r} has an open exchange"))
    return None


# -- core.confidenceGate --------------------------------------------------------------------------


class ConfidenceGateConfig(FrozenStored):
    agentId: str = Field(pattern=AUTHOR_ID)
    # A number from 0 to 1, or a template that resolves to one ("{{agent.confidence}}", "{{inputs.c}}").
    observed: float | str
    threshold: float | None = Field(default=None, ge=0, le=1)
    decision: Any = None
    timeoutMs: int = Field(default=0, ge=0)
    fieldLabels: FieldLabels = Field(default_factory=dict)
    # Whom the gate asks (notified like an approval's recipients): {subjects, groups, roles}, the approval's `audience`.
    audience: dict[str, list[str]] | None = None


def resolved_threshold(cfg: ConfidenceGateConfig, run_options: Mapping[str, Any] | None) -> float:
    """configurable.run.escalationThreshold (per run, in `run_options`) wins, then the gate's threshold, then 0.7.

    The configurable schema types escalationThreshold as an integer (openwop-notes §1.12 #3): 0 and 1 are
    read as they are, larger integers as percent (70 → 0.7).
    """
    per_run = (run_options or {}).get("escalationThreshold")
    if isinstance(per_run, int | float) and not isinstance(per_run, bool):
        return min(1.0, float(per_run) if per_run <= 1 else per_run / 100)
    return cfg.threshold if cfg.threshold is not None else DEFAULT_ESCALATION_THRESHOLD


def _confidence(node_id: str, cfg: ConfidenceGateConfig, scope: Mapping[str, Any]) -> Any:
    threshold = resolved_threshold(cfg, _run(scope).get("runOptions"))
    observed = render(cfg.observed, scope) if isinstance(cfg.observed, str) else cfg.observed
    decision = render(cfg.decision, scope)
    if scope.get(PROBE):
        observed = observed if _is_confidence(observed) else 0.0
    elif not _is_confidence(observed):
        return Failed(
            run_error("validation_error", f"observed confidence must be a number from 0 to 1, got {observed!r}")
        )
    if scope.get(PROBE) or observed < threshold:
        data: dict[str, Any] = {"agentId": cfg.agentId, "threshold": threshold, "observed": observed}
        if decision is not None:
            data["decision"] = decision
        return GateSpec("low-confidence", data, LOW_CONFIDENCE_RESUME_SCHEMA, cfg.timeoutMs, reason="low-confidence")
    return Passed({"escalated": False, "observed": observed, "threshold": threshold, "decision": decision})


def _is_confidence(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


# -- core.credentialGate --------------------------------------------------------------------------


class CredentialGateConfig(FrozenStored):
    provider: str = Field(pattern=AUTHOR_ID)
    scopes: list[str] = Field(default_factory=new_list, max_length=100)
    reason: Literal["missing", "expired", "insufficient_scope"] = "missing"
    # Host-owned https URL that begins the authorization-code grant; never pre-authenticated, no token in it.
    connectUrl: str = Field(min_length=9, max_length=2048)
    timeoutMs: int = Field(default=0, ge=0)
    fieldLabels: FieldLabels = Field(default_factory=dict)


def _credential(node_id: str, cfg: CredentialGateConfig, scope: Mapping[str, Any]) -> GateSpec:
    url = render(cfg.connectUrl, scope)
    if scope.get(PROBE) and references(cfg.connectUrl) and str(url).startswith("{{"):
        url = "https://connect.probe.invalid/"  # known at run time only; checked when raised
    data = {
        "provider": cfg.provider,
        "scopes": list(dict.fromkeys(cfg.scopes)),
        "reason": cfg.reason,
        "connectUrl": url,
    }
    return GateSpec("credential", data, dict(CREDENTIAL_RESUME_SCHEMA), cfg.timeoutMs)


GATES: tuple[NodeType, ...] = (
    NodeType(
        "core.clarificationGate",
        ClarificationGateConfig,
        ask=_clarification,
        fields=lambda cfg: frozenset(q.id for q in cfg.questions),
    ),
    NodeType("core.interrupt", InterruptConfig, ask=_interrupt),
    NodeType("core.conversationGate", ConversationGateConfig, ask=_conversation),
    NodeType(
        "core.confidenceGate",
        ConfidenceGateConfig,
        ask=_confidence,
        fields=lambda cfg: frozenset({"escalated", "ratified", "observed", "threshold", "decision"}),
    ),
    NodeType(
        "core.credentialGate",
        CredentialGateConfig,
        ask=_credential,
        fields=lambda cfg: frozenset({"outcome", "provider", "scopes"}),
    ),
)


__all__ = ["GATES", "Failed", "Passed"]
