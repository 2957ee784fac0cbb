"""The approver inbox: pending interrupts a principal may decide, newest first, with their public votes.
Rules and their reasons: docs/decisions.md, "Issue 3"; the index it reads: store/inbox.py, docs/scale.md."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from interlude.app.directory import with_membership
from interlude.domain import schemas
from interlude.domain.errors import DomainError, Forbidden, Invalid
from interlude.domain.ids import tenant_of
from interlude.domain.models.run import PUBLIC_VOTE_FIELDS
from interlude.rules.auth import Principal, run_resolver
from interlude.rules.interrupts.decide import Resolver, eligible, resolver_families
from interlude.rules.interrupts.delegation import NOT_A_VOTE
from interlude.store import sharded
from interlude.store.inbox import InboxIndex, run_open_interrupts
from interlude.store.keys import run_pk

if TYPE_CHECKING:
    from interlude.app.service import Service


INTERRUPT_KINDS = tuple(schemas.load("suspend-request.schema.json")["properties"]["kind"]["enum"])
MAX_INBOX_LIMIT = 100
DEFAULT_INBOX_LIMIT = 25


def _vote_view(votes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in vote.items() if k in PUBLIC_VOTE_FIELDS} for vote in votes]


class _Membership:
    """The key's resolver, joined with its subject's directory entry the first time it is needed (issue 14): at
    most one read per request; none when the page is filtered by a key and no listed gate names a group or a role."""

    def __init__(self, service: Service, tenant: str, resolver: Resolver) -> None:
        self.service, self.tenant, self.key_resolver = service, tenant, resolver
        self._joined: Resolver | None = None

    def joined(self) -> Resolver:
        if self._joined is None:
            self._joined = with_membership(self.service.directory, self.tenant, self.key_resolver)
        return self._joined

    def for_gate(self, data: dict[str, Any]) -> Resolver:
        if not (data.get("approverGroupRefs") or data.get("approverRoleRefs")):
            return self.key_resolver
        return self.joined()


def _may_decide(kind: str, payload: dict[str, Any], votes: list[dict[str, Any]], membership: _Membership) -> bool:
    if kind != "approval":
        return True
    resolver = membership.for_gate(payload["data"])
    cast = {v["principal"] for v in votes if v["action"] not in NOT_A_VOTE}
    # A gate whose vote someone handed to this principal (issue 14 item 4) is theirs while that vote is not in.
    handed = any(
        v["action"] == "delegate" and v.get("delegate") == resolver.subject_id and v["principal"] not in cast
        for v in votes
    )
    if not eligible(payload["data"], resolver):
        return handed
    # A principal who has cast a vote cannot cast another, so the gate is no longer theirs to decide.
    return resolver.principal not in cast or handed


def families(filters: dict[str, str], membership: _Membership) -> list[str]:
    """The index families a page reads: the filter's own key when there is one, else every family the caller may
    be eligible through (its key's and its directory entry's groups and roles). Whatever the key does not decide
    is checked on the page's few entries."""
    if "workflowId" in filters:
        return [f"WF#{filters['workflowId']}"]
    if "kind" in filters:
        return [f"KIND#{filters['kind']}"]
    return resolver_families(membership.joined())


def inbox(
    service: Service, principal: Principal, limit: int, filters: dict[str, str], cursor: str | None
) -> dict[str, Any]:
    """Pending interrupts the principal may decide, newest first. `filters`: kind, workflowId, runId.

    One page reads a bounded number of index entries, whatever the tenant's pending count (docs/scale.md): it
    may hold fewer than `limit` interrupts (even none) and still carry a nextCursor."""
    if "runId" in filters and tenant_of(filters["runId"]) != principal.tenant:
        raise Forbidden("the run id belongs to another tenant", code="id_tenant_mismatch")
    membership = _Membership(service, principal.tenant, run_resolver(principal))
    try:
        if "runId" in filters:
            found, next_cursor = _run_page(service, principal.tenant, filters, limit, cursor)
        else:
            index = InboxIndex(service.store.table, service.store.client)
            page = index.page(
                principal.tenant,
                families(filters, membership),
                limit,
                cursor,
                sharded.fingerprint(f"{name}={value}" for name, value in sorted(filters.items())),
                kind=filters.get("kind") if "workflowId" in filters else None,
                now_epoch=service.clock().timestamp(),
            )
            found, next_cursor = page.interrupts, page.cursor
    except ValueError:
        raise Invalid("cursor is not one this inbox issued", {"field": "cursor"}) from None
    out: list[dict[str, Any]] = []
    for doc in found:
        if doc.get("deadline") is not None and float(doc["deadline"]) <= service.clock().timestamp():
            # Past its deadline: timed out, not pending. Reading the run records the timeout if nobody has.
            with contextlib.suppress(DomainError):
                service.load_run(principal.tenant, doc["runId"])
            continue
        if not _may_decide(doc["kind"], doc["payload"], doc["votes"], membership):
            continue
        out.append(
            {
                **{k: doc[k] for k in ("interruptId", "runId", "nodeId", "workflowId", "kind", "raisedAt", "payload")},
                "votes": _vote_view(doc["votes"]),
            }
        )
    return {"interrupts": out, "nextCursor": next_cursor}


def _run_page(
    service: Service, tenant: str, filters: dict[str, str], limit: int, cursor: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of one run's open interrupts (its own partition; a run holds few at once)."""
    stream = run_pk(filters["runId"])
    query = sharded.fingerprint([stream, f"kind={filters.get('kind', '')}", f"wf={filters.get('workflowId', '')}"])
    after = None
    if cursor is not None:
        after = sharded.decode_cursor(cursor, tenant, query, [stream]).after[stream]
    docs, _ = run_open_interrupts(service.store.client, service.store.table, filters["runId"])
    matching = [
        d
        for d in docs
        if all(d.get(name) == filters[name] for name in ("kind", "workflowId") if name in filters)
        and (after is None or sharded.entry_sk(d["raisedAt"], d["interruptId"]) < after)
    ]
    page = matching[:limit]
    if len(matching) <= limit:
        return page, None
    last = page[-1]
    positions = sharded.Positions(after={stream: sharded.entry_sk(last["raisedAt"], last["interruptId"])})
    return page, sharded.encode_cursor(tenant, query, positions)
