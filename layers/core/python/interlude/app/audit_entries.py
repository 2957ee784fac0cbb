"""What an audit entry says (a draft), made where an action happens: a leaf every service that records may import.

from interlude.app import audit_entries as audit
self.audit_log.append(audit.draft(principal, "token.minted", target, at))   # its own write (AuditTrail.append)
self.writes.transact(items, audit.draft(...))                              # with the action's items, all or nothing
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.domain.audit import MAX_DETAILS_BYTES, AuditDraft
from interlude.domain.budgets import BudgetExceeded, json_size

if TYPE_CHECKING:
    from interlude.rules.auth import Principal
    from interlude.rules.interrupts.decide import Decision, Resolver


def actor(principal: Principal, surface: str = "api") -> dict[str, Any]:
    return {"subjectId": principal.subject["subjectId"], "keyId": principal.key_id, "surface": surface}


# Who acts through the `interlude` CLI with the deployment's own credentials (no API key).
OPERATOR = {"subjectId": "operator", "surface": "cli"}


def draft(
    principal: Principal, action: str, target: dict[str, Any], at: str, details: dict[str, Any] | None = None
) -> AuditDraft:
    """An entry for what `principal` did through an API key."""
    return entry(principal.tenant, actor(principal), action, target, at, details)


def entry(
    tenant: str, by: dict[str, Any], action: str, target: dict[str, Any], at: str, details: dict[str, Any] | None = None
) -> AuditDraft:
    """An entry for what `by` (an `actor(...)`, or OPERATOR) did in `tenant`."""
    return bounded(AuditDraft(tenant, action, by, target, at, details or {}))


def bounded(entry: AuditDraft) -> AuditDraft:
    try:
        json_size(entry.details, MAX_DETAILS_BYTES, "the audit entry's details")
    except BudgetExceeded:
        return AuditDraft(entry.tenant, entry.action, entry.actor, entry.target, entry.at, {"truncated": True})
    return entry


def decision_draft(
    tenant: str,
    run_id: str,
    node_id: str,
    interrupt_id: str,
    kind: str,
    decision: Decision,
    resolver: Resolver,
    at: str,
) -> AuditDraft:
    """A decision (the gate closes) or a vote (it stays open), as the resolver made it."""
    value = decision.resume_value
    details: dict[str, Any] = {"kind": kind}
    if decision.outcome == "record":
        details["action"] = decision.vote.action if decision.vote is not None else None
    else:
        details["outcome"] = "completed" if decision.outcome == "complete" else "failed"
        if isinstance(value, dict) and isinstance(value.get("action"), str):
            details["action"] = value["action"]
    if isinstance(value, dict) and isinstance(value.get("comment"), str):
        details["comment"] = value["comment"][:500]
    who = {"subjectId": resolver.subject_id or resolver.principal, "surface": resolver.surface}
    action = "interrupt.voted" if decision.outcome == "record" else "interrupt.decided"
    target = {"runId": run_id, "nodeId": node_id, "interruptId": interrupt_id}
    return bounded(AuditDraft(tenant, action, who, target, at, details))
