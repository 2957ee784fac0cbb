"""The approver inbox: pending interrupts a principal may decide, newest first, with their public votes.
Rules and their reasons: docs/decisions.md, "Issue 3"."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from interlude.app.directory import with_membership
from interlude.domain import schemas
from interlude.domain.errors import DomainError, Forbidden, Invalid
from interlude.domain.ids import tenant_of
from interlude.domain.models.run import PUBLIC_VOTE_FIELDS
from interlude.rules.auth import Principal, run_resolver
from interlude.rules.interrupts.decide import Resolver, eligible

if TYPE_CHECKING:
    from interlude.app.service import Service


INTERRUPT_KINDS = tuple(schemas.load("suspend-request.schema.json")["properties"]["kind"]["enum"])
MAX_INBOX_LIMIT = 100
DEFAULT_INBOX_LIMIT = 25
MAX_INBOX_QUERIES = 10


def _vote_view(votes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in vote.items() if k in PUBLIC_VOTE_FIELDS} for vote in votes]


class _Membership:
    """The key's resolver, joined with its subject's directory entry the first time a gate's refs need it (issue 14):
    at most one read per request, none when no listed gate names a group or a role."""

    def __init__(self, service: Service, tenant: str, resolver: Resolver) -> None:
        self.service, self.tenant, self.key_resolver = service, tenant, resolver
        self._joined: Resolver | None = None

    def for_gate(self, data: dict[str, Any]) -> Resolver:
        if not (data.get("approverGroupRefs") or data.get("approverRoleRefs")):
            return self.key_resolver
        if self._joined is None:
            self._joined = with_membership(self.service.directory, self.tenant, self.key_resolver)
        return self._joined


def _may_decide(kind: str, payload: dict[str, Any], votes: list[dict[str, Any]], membership: _Membership) -> bool:
    if kind != "approval":
        return True
    resolver = membership.for_gate(payload["data"])
    if not eligible(payload["data"], resolver):
        return False
    # A principal who has cast a vote cannot cast another, so the gate is no longer theirs to decide.
    return not any(v["principal"] == resolver.principal and v["action"] != "ask" for v in votes)


def inbox(
    service: Service, principal: Principal, limit: int, filters: dict[str, str], cursor: str | None
) -> dict[str, Any]:
    """Pending interrupts the principal may decide, newest first. `filters`: kind, workflowId, runId."""
    if "runId" in filters and tenant_of(filters["runId"]) != principal.tenant:
        raise Forbidden("the run id belongs to another tenant", code="id_tenant_mismatch")
    membership = _Membership(service, principal.tenant, run_resolver(principal))
    hitl = service.hitl_store
    out: list[dict[str, Any]] = []
    for _ in range(MAX_INBOX_QUERIES):
        try:
            entries, next_cursor = hitl.inbox_page(principal.tenant, min(MAX_INBOX_LIMIT, limit * 2), cursor, filters)
        except ValueError:
            raise Invalid("cursor is not one this inbox issued", {"field": "cursor"}) from None
        for i, entry in enumerate(entries):
            if entry.get("deadline") is not None and float(entry["deadline"]) <= service.clock().timestamp():
                # Past its deadline: timed out, not pending. Reading the run records the timeout if nobody has.
                with contextlib.suppress(DomainError):
                    service.load_run(principal.tenant, entry["runId"])
                continue
            if not _may_decide(entry["kind"], entry["payload"], entry["votes"], membership):
                continue
            out.append(
                {
                    **{k: entry[k] for k in ("interruptId", "runId", "nodeId", "workflowId", "kind", "raisedAt", "payload")},
                    "votes": _vote_view(entry["votes"]),
                }
            )
            if len(out) == limit:
                more = i < len(entries) - 1 or next_cursor is not None
                return {"interrupts": out, "nextCursor": entry["cursor"] if more else None}
        if next_cursor is None:
            return {"interrupts": out, "nextCursor": None}
        cursor = next_cursor
    return {"interrupts": out, "nextCursor": cursor}
