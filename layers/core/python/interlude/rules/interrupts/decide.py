"""Decide what a resume value does to an open interrupt: refuse it, record a vote, complete or fail the gate.

Rules: shared/reference/openwop-notes.md §1.1 (Approval, Approver enforcement, §Rejection).
"""

import functools
import json
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from interlude.domain import schemas
from interlude.domain.errors import Conflict, Forbidden, Invalid, run_error
from interlude.domain.models.run import OpenInterrupt, Vote
from interlude.domain.outcomes import approval_outcome
from interlude.rules.interrupts.approvers import ANYONE, REF_KINDS, binding_refs
from interlude.rules.interrupts.delegation import NOT_A_VOTE, Delegator, delegated_to, has_cast, has_delegated
from interlude.rules.interrupts.payloads import approval_resume_schema


class Resolver(NamedTuple):
    """Who is answering, as authenticated, and through which surface."""

    subject: dict[str, Any] | None
    surface: Literal["run", "token", "timeout", "event", "console", "slack"]
    groups: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    # Principals configured as override principals for the tenant.
    tenant_override_principals: tuple[str, ...] = ()
    # For a `credential` interrupt: the scopes the tenant's credential store grants for its provider
    # (None: no grant at all). Looked up by the service at decision time.
    granted_scopes: frozenset[str] | None = None
    # Delegation (issue 14 item 4): whether the tenant allows it, and the principals whose active out-of-office
    # delegate the caller is (found by the service in the directory at decision time).
    delegation_allowed: bool = False
    standing_delegators: tuple[Delegator, ...] = ()

    @property
    def principal(self) -> str:
        if not self.subject:
            return f"{self.surface}:anonymous"
        return f"{self.subject['issuer']}|{self.subject['subjectId']}"

    @property
    def subject_id(self) -> str | None:
        return self.subject["subjectId"] if self.subject else None


class Decision(NamedTuple):
    # complete: the gate's node completes with resume_value; fail: it fails with error;
    # record: a vote (or `ask`) is stored and the gate stays open.
    outcome: Literal["complete", "fail", "record"]
    resume_value: Any
    # interrupt.resolved (or, for `record`, approval.received) payload fields besides nodeId/interruptId.
    event: dict[str, Any]
    error: dict[str, Any] | None = None
    vote: Vote | None = None
    # Events recorded after the decision's own, in order.
    extra_events: Sequence[tuple[str, dict[str, Any]]] = ()
    # The node's output when it completes; None: the resume value itself. When it fails: the outcome the steps after
    # it read (an approval's, domain/outcomes.py); None: none.
    output: Any = None
    # The outcome travels only over edges whose condition holds for it, never over an edge without one: a `refine`
    # sends the artifact back and grants nothing, so it must not flow on to what an approval releases.
    routed_only: bool = False


def _schema_errors(schema: dict[str, Any], value: Any) -> list[dict[str, str]]:
    return schemas.errors_of(_validator_of(json.dumps(schema, allow_nan=False)), value)


@functools.lru_cache(maxsize=256)
def _validator_of(schema_text: str) -> Any:
    """A resume schema's validator, built once per schema text (a gate's schema is the same for every decision on it;
    building the validator was most of a check). Built from its own copy of the schema, in the same key order."""
    from jsonschema import Draft202012Validator  # first use only (cold starts)

    return Draft202012Validator(json.loads(schema_text), format_checker=Draft202012Validator.FORMAT_CHECKER)


def _check_resume_schema(interrupt: OpenInterrupt, value: Any) -> None:
    schema = interrupt.payload.get("resumeSchema")
    if not schema:
        return
    errors = _schema_errors(schema, value)
    if errors:
        raise Invalid(
            "resumeValue does not match the interrupt's resumeSchema",
            {"field": "resumeValue", "errors": errors},
        )


def eligible(data: dict[str, Any], resolver: Resolver, ref_kinds: tuple[str, ...] = REF_KINDS) -> bool:
    """May this resolver decide the approval? The union of the binding refs; no binding ref: anyone.

    Group and role membership is what the resolver's credential carries at decision time; it is recorded on
    the vote and never resolved again (a replay reads the recorded decision).
    """
    fields = binding_refs(data, ref_kinds)
    if not fields:
        return True
    approvers = data.get("approversList") or []
    sid = resolver.subject_id
    if sid is not None and (sid in approvers or resolver.principal.replace("|", ":") in approvers):
        return True
    if "approverGroupRefs" in fields and set(data["approverGroupRefs"]) & set(resolver.groups):
        return True
    return "approverRoleRefs" in fields and bool(set(data["approverRoleRefs"]) & set(resolver.roles))


def named_by(data: dict[str, Any], delegator: Delegator) -> bool:
    """Whether a gate names `delegator` (their subject in its approversList, or one of their directory groups or
    roles in its refs): a standing (out-of-office) delegation hands over the vote on such gates only, never on a
    gate open to anyone."""
    if not binding_refs(data):
        return False
    as_voter = Resolver(subject=delegator.subject, surface="run", groups=delegator.groups, roles=delegator.roles)
    return eligible(data, as_voter)


def resolver_families(resolver: Resolver) -> list[str]:
    """The families whose interrupts `resolver` may be eligible for: `eligible`'s matches, as approver_families
    writes them."""
    families = [ANYONE]
    if resolver.subject_id is not None:
        families += [f"P#{resolver.subject_id}", f"P#{resolver.principal.replace('|', ':')}"]
    families += [f"G#{g}" for g in resolver.groups] + [f"ROLE#{r}" for r in resolver.roles]
    return list(dict.fromkeys(families))


def _resolved_event(interrupt: OpenInterrupt, value: Any, resolver: Resolver) -> dict[str, Any]:
    """The interrupt.resolved payload fields every kind carries (besides nodeId/interruptId)."""
    event: dict[str, Any] = {"kind": interrupt.kind, "resumeValue": value}
    if resolver.subject:
        event["resolvedBy"] = resolver.subject
    return event


def _refuse_credential_material(value: Any) -> None:
    # Its patterns compile with the first decision: the dispatch function reads these rules (a raised approval's
    # eligible approvers) and never decides.
    from interlude.rules.interrupts.secrets import credential_material

    path = credential_material(value)
    if path is not None:
        raise Invalid(
            "an interrupt never accepts credential material; grant credentials out of band",
            {"field": "resumeValue", "path": path},
        )


def decide(
    interrupt: OpenInterrupt, resume_value: Any, resolver: Resolver, now_iso: str, config: dict[str, Any]
) -> Decision:
    """`config` is the gate node's validated config (as a dict) for rules not carried by the payload."""
    _refuse_credential_material(resume_value)
    if interrupt.kind == "approval":
        return _decide_approval(interrupt, resume_value, resolver, now_iso, config)
    if interrupt.kind in KIND_DECIDERS:
        return KIND_DECIDERS[interrupt.kind](interrupt, resume_value, resolver)
    _check_resume_schema(interrupt, resume_value)
    return Decision("complete", resume_value, _resolved_event(interrupt, resume_value, resolver))


# The field each action needs in its resume value besides `action`.
_ACTION_REQUIRES = {"refine": "refineFeedback", "edit-accept": "editedArtifactData"}
_ACCEPTS = ("accept", "edit-accept")


def _check_eligible(data: dict[str, Any], resolver: Resolver) -> None:
    if eligible(data, resolver):
        return
    fields = binding_refs(data)
    details: dict[str, Any] = {"field": fields[0]}
    if len(fields) > 1:
        details["fields"] = fields
    raise Forbidden("this principal is not an eligible approver for the gate", details)


def _comment_named_once(value: Any) -> Any:
    """`feedback`, the approval page's former name for the comment, is recorded as `comment`: one name everywhere."""
    if not isinstance(value, dict) or "feedback" not in value:
        return value
    if "comment" in value:
        raise Invalid(
            "send the comment once, as comment (feedback is its former name)", {"field": "resumeValue.feedback"}
        )
    return {("comment" if k == "feedback" else k): v for k, v in value.items()}


def _valid_action(interrupt: OpenInterrupt, value: Any, actions: list[str]) -> str:
    """The action a resume value takes, once the value is one the gate accepts."""
    if isinstance(value, dict) and value.get("action") == "timeout":
        raise Invalid("a resume may not carry action 'timeout'", {"field": "resumeValue.action"})
    if not isinstance(value, dict) or not isinstance(value.get("action"), str):
        raise Invalid("resumeValue must be an object with an 'action'", {"field": "resumeValue"})
    action: str = value["action"]
    if action not in actions:
        raise Invalid(
            f"action {action!r} is not one this gate allows; it allows {', '.join(actions)}",
            {"field": "resumeValue.action", "actions": actions},
        )
    required = _ACTION_REQUIRES.get(action)
    if required is not None and required not in value:
        raise Invalid(
            f"action {action!r} requires {required}",
            {"field": f"resumeValue.{required}"},
        )
    if not _valid_by_construction(interrupt, value, actions):
        _check_resume_schema(interrupt, value)
    return action


def _valid_by_construction(interrupt: OpenInterrupt, value: dict[str, Any], actions: list[str]) -> bool:
    """A bare action (found above among the gate's) on the resume schema Interlude gives an approval gate for those
    actions is valid by that schema's construction: `action` required and in its enum, no other property. Its
    validator, and jsonschema's import on a cold start's first decision (≈ 45 ms of CPU), are not needed. Any other
    value, or a gate whose stored schema differs (raised by another release), is checked by the validator."""
    return value.keys() == {"action"} and interrupt.payload.get("resumeSchema") == approval_resume_schema(actions)


class _Ballot(NamedTuple):
    """A valid vote on an approval gate, before the quorum rules say what it does."""

    action: str
    value: dict[str, Any]  # the resume value as recorded: decidedAt/decidedBy set by the host
    event: dict[str, Any]
    vote: Vote

    def decision(
        self, outcome: Literal["complete", "fail", "record"], error: dict[str, Any] | None = None, **event: Any
    ) -> Decision:
        """`event`: action, and decision and reason where they apply; a gate that closes exposes them all
        (domain/outcomes.py)."""
        output = None
        if outcome != "record":
            output = approval_outcome(self.value, event["action"], event.get("decision"), event.get("reason"))
        return Decision(
            outcome,
            self.value,
            {**self.event, **event},
            error=error,
            vote=self.vote,
            output=output,
            routed_only=event["action"] == "refine",
        )


def _ballot(
    interrupt: OpenInterrupt,
    value: dict[str, Any],
    action: str,
    resolver: Resolver,
    now_iso: str,
    delegator: Delegator | None = None,
) -> _Ballot:
    """Records the vote; a principal's vote counts once per gate, cast by them or for them (`ask` is not a vote).

    A vote cast for a `delegator` is the delegator's (its principal, subject and membership) and records the
    caller as `castBy`; the resume value names both (`decidedBy` the caller, `onBehalfOf` the delegator)."""
    principal = delegator.principal if delegator else resolver.principal
    if has_cast(interrupt, principal) and action != "ask":
        raise Conflict("this principal has already voted on this gate", code="interlude.vote_already_cast")
    normalized = dict(value)
    normalized.pop("onBehalfOf", None)
    normalized["decidedAt"] = now_iso
    if resolver.subject_id is not None:
        normalized["decidedBy"] = resolver.subject_id
    else:
        normalized.pop("decidedBy", None)
    voter: dict[str, Any] = {
        "subject": resolver.subject,
        "groups": list(resolver.groups),
        "roles": list(resolver.roles),
    }
    if delegator is not None:
        normalized["onBehalfOf"] = delegator.subject.get("subjectId", delegator.principal)
        voter = {
            "subject": delegator.subject,
            "groups": list(delegator.groups),
            "roles": list(delegator.roles),
            "castBy": resolver.principal,
            "delegation": delegator.via,
        }
    vote = Vote(principal=principal, action=action, at=now_iso, surface=resolver.surface, resumeValue=normalized, **voter)
    event = _resolved_event(interrupt, normalized, resolver)
    event.update({extra: value[extra] for extra in _ACTION_REQUIRES.values() if extra in value})
    return _Ballot(action, normalized, event, vote)


def _is_override(data: dict[str, Any], config: dict[str, Any], resolver: Resolver) -> bool:
    overrides = set(config.get("overridePrincipals") or []) | set(resolver.tenant_override_principals)
    return bool(data.get("overrideBypassesQuorum")) and (
        resolver.principal in overrides or (resolver.subject_id or "") in overrides
    )


def _quorum_outcome(
    interrupt: OpenInterrupt, ballot: _Ballot, data: dict[str, Any], config: dict[str, Any], resolver: Resolver
) -> Decision:
    """What a vote (not `ask`) does to the gate, given the votes before it."""
    action = ballot.action
    required = int(data.get("requiredApprovals", 1))
    cast = [v.action for v in interrupt.votes if v.action not in NOT_A_VOTE] + [action]
    if action == "reject":
        policy = data.get("rejectionPolicy", "single-veto")
        if policy != "single-veto" and cast.count("reject") <= required / 2:
            return ballot.decision("record", action="reject")
        reason = {"reason": "quorum-reject"} if required > 1 and policy == "majority" else {}
        error = run_error("approval_rejected", f"approval gate {interrupt.nodeId!r} was rejected")
        return ballot.decision("fail", error, action="reject", decision="rejected", **reason)
    # An override is the override principal's own act: a vote cast for someone else never releases the gate alone.
    if action in _ACCEPTS and ballot.vote.castBy is None and _is_override(data, config, resolver):
        return ballot.decision("complete", action=action, decision="overridden")
    if action == "refine":
        # A refine sends the artifact back: it exits the suspend but grants nothing, so it carries no decision, and it
        # goes on only where an edge's condition routes it (Decision.routed_only).
        return ballot.decision("complete", action=action)
    if sum(1 for a in cast if a in _ACCEPTS) >= required:
        return ballot.decision("complete", action=action, decision="granted")
    return ballot.decision("record", action=action)


def _decide_approval(
    interrupt: OpenInterrupt, value: Any, resolver: Resolver, now_iso: str, config: dict[str, Any]
) -> Decision:
    data = interrupt.payload["data"]
    # Eligibility first: an ineligible resolver learns nothing about the gate from validation messages.
    delegator = _voter(interrupt, data, resolver)
    value = _comment_named_once(value)
    action = _valid_action(interrupt, value, data["actions"])
    ballot = _ballot(interrupt, value, action, resolver, now_iso, delegator)
    if action == "ask":
        return Decision("record", ballot.value, ballot.event, vote=ballot.vote)
    return _quorum_outcome(interrupt, ballot, data, config, resolver)


def _voter(interrupt: OpenInterrupt, data: dict[str, Any], resolver: Resolver) -> Delegator | None:
    """Whose vote the caller casts: None for their own; else the first principal who delegated to them (for this
    gate, then out of office) whose vote is not in yet. Refused as not eligible when neither applies."""
    own = eligible(data, resolver)
    if own and not has_cast(interrupt, resolver.principal):
        return None
    if resolver.delegation_allowed:
        offered = [*delegated_to(interrupt, resolver.subject_id), *resolver.standing_delegators]
        for delegator in offered:
            if delegator.principal != resolver.principal and not has_cast(interrupt, delegator.principal):
                return delegator
        if offered:
            raise Conflict(
                "every vote delegated to this principal on this gate has been cast", code="interlude.vote_already_cast"
            )
    _check_eligible(data, resolver)
    return None  # their own vote again: the ballot refuses it (interlude.vote_already_cast)


def delegation(interrupt: OpenInterrupt, resolver: Resolver, delegate: str, now_iso: str) -> Vote:
    """The gate's record that the caller hands their vote to `delegate` (a subjectId): it casts nothing.

    Only where the tenant allows delegation; only an eligible approver whose vote is not in, once per gate."""
    if not resolver.delegation_allowed:
        raise Forbidden("this tenant does not allow approvers to delegate", code="interlude.delegation_not_allowed")
    if interrupt.kind != "approval":
        raise Invalid("only an approval gate's vote can be delegated", {"field": "nodeId", "kind": interrupt.kind})
    _check_eligible(interrupt.payload["data"], resolver)
    if delegate == resolver.subject_id:
        raise Invalid("a principal cannot delegate to themselves", {"field": "delegate"})
    if has_cast(interrupt, resolver.principal) or has_delegated(interrupt, resolver.principal):
        raise Conflict("this principal has already voted or delegated on this gate", code="interlude.vote_already_cast")
    return Vote(
        principal=resolver.principal,
        action="delegate",
        at=now_iso,
        surface=resolver.surface,
        subject=resolver.subject,
        groups=list(resolver.groups),
        roles=list(resolver.roles),
        delegate=delegate,
    )


# -- the other kinds ------------------------------------------------------------------------------


def _decide_credential(interrupt: OpenInterrupt, value: Any, resolver: Resolver) -> Decision:
    """Resume `{outcome}` only; `authorized` needs a grant in the tenant's credential store (oauth.md)."""
    _check_resume_schema(interrupt, value)  # the fixed resumeSchema: {outcome: authorized|declined}, closed
    data = interrupt.payload["data"]
    event = _resolved_event(interrupt, value, resolver)
    if value["outcome"] == "declined":
        error = run_error("connector_auth_declined", f"authorization for provider {data['provider']!r} was declined")
        return Decision("fail", value, event, error=error)
    missing = sorted(set(data["scopes"]) - (resolver.granted_scopes or frozenset()))
    if resolver.granted_scopes is None or missing:
        raise Invalid(
            f"no credential for provider {data['provider']!r} covering the requested scopes is held for this tenant",
            {"field": "resumeValue", "provider": data["provider"], "missingScopes": missing or list(data["scopes"])},
        )
    output = {"outcome": "authorized", "provider": data["provider"], "scopes": list(data["scopes"])}
    return Decision("complete", value, event, output=output)


def _decide_low_confidence(interrupt: OpenInterrupt, value: Any, resolver: Resolver) -> Decision:
    """An operator ratifies (accept) or overrules (reject) a decision taken below the confidence threshold."""
    _check_resume_schema(interrupt, value)
    data = interrupt.payload["data"]
    action = value["action"]
    event = {**_resolved_event(interrupt, value, resolver), "action": action}
    if action == "reject":
        event["decision"] = "rejected"
        error = run_error("approval_rejected", f"the low-confidence decision at {interrupt.nodeId!r} was rejected")
        return Decision("fail", value, event, error=error)
    event["decision"] = "granted"
    output = {
        "escalated": True,
        "ratified": True,
        "observed": data["observed"],
        "threshold": data["threshold"],
        "decision": value.get("decision", data.get("decision")),
    }
    return Decision("complete", value, event, output=output)


def _decide_conversation(interrupt: OpenInterrupt, value: Any, resolver: Resolver) -> Decision:
    data = interrupt.payload["data"]
    cid = data["conversationId"]
    event = _resolved_event(interrupt, value, resolver)
    if interrupt.kind == "conversation.exchange":
        schema = data.get("outcomeSchema") or interrupt.payload.get("resumeSchema")
        errors = _schema_errors(schema, value) if schema else []
        if errors:
            raise Invalid(
                "resumeValue does not match the turn's outcomeSchema",
                {"field": "resumeValue", "errors": errors},
            )
        exchanged: dict[str, Any] = {"conversationId": cid, "prompt": data["prompt"], "response": value}
        if "turnIndex" in data:
            exchanged["turnIndex"] = data["turnIndex"]
        output = {"conversationId": cid, "response": value}
        return Decision("complete", value, event, output=output, extra_events=[("conversation.exchanged", exchanged)])
    _check_resume_schema(interrupt, value)
    if interrupt.kind == "conversation.close":
        closed: dict[str, Any] = {"conversationId": cid}
        if "reason" in data:
            closed["reason"] = data["reason"]
        output = {"conversationId": cid, "closed": True}
        return Decision("complete", value, event, output=output, extra_events=[("conversation.closed", closed)])
    return Decision("complete", value, event, output={"conversationId": cid, "response": value})


KIND_DECIDERS = {
    "credential": _decide_credential,
    "low-confidence": _decide_low_confidence,
    "conversation.start": _decide_conversation,
    "conversation.exchange": _decide_conversation,
    "conversation.close": _decide_conversation,
}
