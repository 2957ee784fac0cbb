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


def _may_decide(kind: str, payload: dict[str, Any], votes: list[dict[str, Any]], resolver: Resolver) -> bool:
    if kind != "approval":
        return True
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
    # The key's groups and roles with the directory's for its subject (issue 14), read once per page request.
    resolver = with_membership(service.directory, principal.tenant, run_resolver(principal))
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
            if not _may_decide(entry["kind"], entry["payload"], entry["votes"], resolver):
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
