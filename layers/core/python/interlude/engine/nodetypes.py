"""The node types Interlude runs, each with a closed config model.

A task node computes its output at once; a gate node raises an interrupt and suspends the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..interrupts.payloads import approval_resume_schema, clarification_resume_schema
from .templates import render

Action = Literal["accept", "reject", "refine", "edit-accept", "ask"]


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NoopConfig(Config):
    pass


class TransformConfig(Config):
    # Output object whose string leaves are `{{node_id.field}}` / `{{inputs.x}}` templates.
    outputs: dict[str, Any] = Field(default_factory=dict)


class ApprovalGateConfig(Config):
    title: str = Field(min_length=1, max_length=500)
    description: str | None = Field(default=None, max_length=10000)
    actions: list[Action] = Field(default_factory=lambda: ["accept", "reject"], min_length=1)
    artifactId: str | None = Field(default=None, min_length=1)
    artifactType: str | None = Field(default=None, min_length=1)
    artifactData: Any = None
    requiredApprovals: int = Field(default=1, ge=1, le=100)
    rejectionPolicy: Literal["single-veto", "majority"] = "single-veto"
    approversList: list[str] = Field(default_factory=list)
    overrideBypassesQuorum: bool = False
    overridePrincipals: list[str] = Field(default_factory=list)
    approverGroupRefs: list[str] = Field(default_factory=list)
    approverRoleRefs: list[str] = Field(default_factory=list)
    audience: dict[str, list[str]] | None = None
    onTimeout: Literal["reject", "approve", "escalate"] | None = None
    timeoutMs: int = Field(default=0, ge=0)
    # Interrupt profile name carried by some conformance fixtures; informational.
    profile: str | None = None


class Question(Config):
    id: str = Field(min_length=1, max_length=128)
    question: str = Field(min_length=1, max_length=10000)
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class ClarificationGateConfig(Config):
    questions: list[Question] = Field(min_length=1, max_length=100)
    contextType: str | None = None
    timeoutMs: int = Field(default=0, ge=0)


class InterruptConfig(Config):
    kind: Literal["custom", "external-event"]
    data: dict[str, Any]
    resumeSchema: dict[str, Any] | None = None
    timeoutMs: int = Field(default=0, ge=0)


@dataclass(frozen=True)
class GateSpec:
    """What a gate asks: the InterruptPayload without its key."""

    kind: str
    data: dict[str, Any]
    resume_schema: dict[str, Any] | None
    timeout_ms: int


@dataclass(frozen=True)
class NodeType:
    type_id: str
    config_model: type[Config]
    # Exactly one of the two is set.
    compute: Callable[[Any, Mapping[str, Any]], dict[str, Any]] | None = None
    ask: Callable[[str, Any, Mapping[str, Any]], GateSpec] | None = None

    @property
    def is_gate(self) -> bool:
        return self.ask is not None


def _approval(node_id: str, cfg: ApprovalGateConfig, scope: Mapping[str, Any]) -> GateSpec:
    data: dict[str, Any] = {
        "artifactId": cfg.artifactId or node_id,
        "artifactType": cfg.artifactType or "interlude.gate",
        "title": render(cfg.title, scope),
        "actions": list(cfg.actions),
    }
    if cfg.description is not None:
        data["description"] = render(cfg.description, scope)
    if cfg.artifactData is not None:
        data["artifactData"] = render(cfg.artifactData, scope)
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


def _clarification(node_id: str, cfg: ClarificationGateConfig, scope: Mapping[str, Any]) -> GateSpec:
    questions = []
    for q in cfg.questions:
        item: dict[str, Any] = {"id": q.id, "question": render(q.question, scope)}
        if q.schema_ is not None:
            item["schema"] = q.schema_
        questions.append(item)
    data: dict[str, Any] = {"questions": questions}
    if cfg.contextType:
        data["contextType"] = cfg.contextType
    return GateSpec("clarification", data, clarification_resume_schema(questions), cfg.timeoutMs)


def _interrupt(node_id: str, cfg: InterruptConfig, scope: Mapping[str, Any]) -> GateSpec:
    return GateSpec(cfg.kind, render(cfg.data, scope), cfg.resumeSchema, cfg.timeoutMs)


def _noop(cfg: NoopConfig, scope: Mapping[str, Any]) -> dict[str, Any]:
    return {}


def _transform(cfg: TransformConfig, scope: Mapping[str, Any]) -> dict[str, Any]:
    return render(cfg.outputs, scope)


NODE_TYPES: dict[str, NodeType] = {
    t.type_id: t
    for t in (
        NodeType("core.noop", NoopConfig, compute=_noop),
        NodeType("core.transform", TransformConfig, compute=_transform),
        NodeType("core.approvalGate", ApprovalGateConfig, ask=_approval),
        NodeType("core.clarificationGate", ClarificationGateConfig, ask=_clarification),
        NodeType("core.interrupt", InterruptConfig, ask=_interrupt),
    )
}
