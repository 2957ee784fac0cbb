"""Decide what a resume value does to an open interrupt: refuse it, record a vote, complete or fail the gate.

Rules: shared/reference/openwop-notes.md §1.1 (Approval, Approver enforcement, §Rejection).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import Draft202012Validator

from .. import schemas
from ..errors import ApiError
from ..model.run import OpenInterrupt, Vote


@dataclass(frozen=True)
class Resolver:
    """Who is answering, as authenticated, and through which surface."""

    subject: dict[str, Any] | None
    surface: Literal["run", "token", "timeout", "event"]
    groups: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    # Principals configured as override principals for the tenant.
    tenant_override_principals: tuple[str, ...] = ()

    @property
    def principal(self) -> str:
        if not self.subject:
            return f"{self.surface}:anonymous"
        return f"{self.subject['issuer']}|{self.subject['subjectId']}"

    @property
    def subject_id(self) -> str | None:
        return self.subject["subjectId"] if self.subject else None


@dataclass(frozen=True)
class Decision:
    # complete: the gate's node completes with resume_value; fail: it fails with error;
    # record: a vote (or `ask`) is stored and the gate stays open.
    outcome: Literal["complete", "fail", "record"]
    resume_value: Any
    # interrupt.resolved (or, for `record`, approval.received) payload fields besides nodeId/interruptId.
    event: dict[str, Any]
    error: dict[str, Any] | None = None
    vote: Vote | None = None
    extra_events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def _schema_errors(schema: dict[str, Any], value: Any) -> list[dict[str, str]]:
    v = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    return schemas.errors_of(v, value)


def _check_resume_schema(interrupt: OpenInterrupt, value: Any) -> None:
    schema = interrupt.payload.get("resumeSchema")
    if not schema:
        return
    errors = _schema_errors(schema, value)
    if errors:
        raise ApiError(
            "validation_error",
            "resumeValue does not match the interrupt's resumeSchema",
            {"field": "resumeValue", "errors": errors},
        )


def _eligible(data: dict[str, Any], resolver: Resolver) -> bool:
    approvers = data.get("approversList") or []
    groups = data.get("approverGroupRefs") or []
    roles = data.get("approverRoleRefs") or []
    if not (approvers or groups or roles):
        return True
    sid = resolver.subject_id
    if sid is not None and (sid in approvers or resolver.principal.replace("|", ":") in approvers):
        return True
    return bool(set(groups) & set(resolver.groups)) or bool(set(roles) & set(resolver.roles))


def decide(
    interrupt: OpenInterrupt, resume_value: Any, resolver: Resolver, now_iso: str, config: dict[str, Any]
) -> Decision:
    """`config` is the gate node's validated config (as a dict) for rules not carried by the payload."""
    if interrupt.kind == "approval":
        return _decide_approval(interrupt, resume_value, resolver, now_iso, config)
    _check_resume_schema(interrupt, resume_value)
    event: dict[str, Any] = {"kind": interrupt.kind, "resumeValue": resume_value}
    if resolver.subject:
        event["resolvedBy"] = resolver.subject
    return Decision("complete", resume_value, event)


def _decide_approval(
    interrupt: OpenInterrupt, value: Any, resolver: Resolver, now_iso: str, config: dict[str, Any]
) -> Decision:
    data = interrupt.payload["data"]
    actions = data["actions"]
    if isinstance(value, dict) and value.get("action") == "timeout":
        raise ApiError("validation_error", "a resume may not carry action 'timeout'", {"field": "resumeValue.action"})
    if not isinstance(value, dict) or not isinstance(value.get("action"), str):
        raise ApiError("validation_error", "resumeValue must be an object with an 'action'", {"field": "resumeValue"})
    action = value["action"]
    if action not in actions:
        raise ApiError(
            "validation_error",
            f"action {action!r} is not one this gate allows",
            {"field": "resumeValue.action", "actions": actions},
        )
    if action == "refine" and "refineFeedback" not in value:
        raise ApiError(
            "validation_error", "action 'refine' requires refineFeedback", {"field": "resumeValue.refineFeedback"}
        )
    if action == "edit-accept" and "editedArtifactData" not in value:
        raise ApiError(
            "validation_error",
            "action 'edit-accept' requires editedArtifactData",
            {"field": "resumeValue.editedArtifactData"},
        )
    _check_resume_schema(interrupt, value)
    if not _eligible(data, resolver):
        raise ApiError(
            "forbidden", "this principal is not an eligible approver for the gate", {"field": "approversList"}
        )
    principal = resolver.principal
    if any(v.principal == principal and v.action != "ask" for v in interrupt.votes) and action != "ask":
        raise ApiError("interlude.vote_already_cast", "this principal has already voted on this gate")

    normalized = dict(value)
    normalized["decidedAt"] = now_iso
    if resolver.subject_id is not None:
        normalized["decidedBy"] = resolver.subject_id
    else:
        normalized.pop("decidedBy", None)
    vote = Vote(
        principal=principal,
        action=action,
        at=now_iso,
        surface=resolver.surface,
        subject=resolver.subject,
        groups=list(resolver.groups),
        roles=list(resolver.roles),
        resumeValue=normalized,
    )
    event: dict[str, Any] = {"kind": "approval", "resumeValue": normalized}
    if resolver.subject:
        event["resolvedBy"] = resolver.subject
    for extra in ("refineFeedback", "editedArtifactData"):
        if extra in value:
            event[extra] = value[extra]

    if action == "ask":
        return Decision("record", normalized, event, vote=vote)

    required = int(data.get("requiredApprovals", 1))
    policy = data.get("rejectionPolicy", "single-veto")
    overrides = set(config.get("overridePrincipals") or []) | set(resolver.tenant_override_principals)
    is_override = bool(data.get("overrideBypassesQuorum")) and (
        principal in overrides or (resolver.subject_id or "") in overrides
    )
    prior = [v for v in interrupt.votes if v.action != "ask"]
    accepts = sum(1 for v in prior if v.action in ("accept", "edit-accept")) + (action in ("accept", "edit-accept"))
    rejects = sum(1 for v in prior if v.action == "reject") + (action == "reject")

    if action == "reject":
        decisive = policy == "single-veto" or rejects > required / 2
        if not decisive:
            return Decision("record", normalized, {**event, "action": "reject"}, vote=vote)
        event.update(action="reject", decision="rejected")
        if required > 1 and policy == "majority":
            event["reason"] = "quorum-reject"
        error = {
            "code": "approval_rejected",
            "message": f"approval gate {interrupt.nodeId!r} was rejected",
            "retryable": False,
        }
        return Decision("fail", normalized, event, error=error, vote=vote)

    if action in ("accept", "edit-accept") and is_override:
        event.update(action=action, decision="overridden")
        return Decision("complete", normalized, event, vote=vote)
    if action == "refine" or accepts >= required:
        event.update(action=action, decision="granted")
        return Decision("complete", normalized, event, vote=vote)
    return Decision("record", normalized, {**event, "action": action}, vote=vote)
