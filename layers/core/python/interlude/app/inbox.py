"""The approver inbox: pending interrupts a principal may decide, newest first, with their public votes.
Rules and their reasons: docs/adr/0007; the index it reads: store/inbox.py, docs/scale.md."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from interlude.app.facts import delegators_of, with_membership
from interlude.app.tenant_facts import tenant_settings
from interlude.domain import schemas
from interlude.domain.errors import DomainError, Forbidden, Invalid
from interlude.domain.ids import principal_subject, tenant_of
from interlude.domain.models.run import PUBLIC_VOTE_FIELDS
from interlude.rules.auth import Principal, run_resolver
from interlude.rules.interrupts.decide import Resolver, eligible, named_by, resolver_families
from interlude.rules.interrupts.delegation import NOT_A_VOTE, Delegator
from interlude.store import sharded
from interlude.store.inbox import EntryFilter, kind_family
from interlude.store.layout import run_pk

if TYPE_CHECKING:
    from interlude.app.ports import DirectoryRecords, InboxPages, RunInterrupts, RunLedger, TenantRecords
    from interlude.domain.clock import Clock


INTERRUPT_KINDS = tuple(schemas.load("suspend-request.schema.json")["properties"]["kind"]["enum"])
MAX_INBOX_LIMIT = 100
DEFAULT_INBOX_LIMIT = 25
# GET /interrupts `sort`: newest or oldest raised first, or soonest due first (then those with no deadline, newest
# first), each across the whole inbox (store/inbox.py); `claim`: the gates the caller works, or those nobody works.
ORDERS = ("newest", "oldest", "due")
CLAIMS = ("mine", "unclaimed")


def _vote_view(votes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in vote.items() if k in PUBLIC_VOTE_FIELDS} for vote in votes]


class _Membership:
    """The key's resolver, joined with its subject's directory entry the first time it is needed (issue 14): at
    most one read per request; none when the page is filtered by a key and no listed gate names a group or a role.
    Likewise the principals whose out-of-office delegate the caller is (one Query), and whether the tenant allows
    delegation (one read, only when a gate offers the caller someone's vote)."""

    def __init__(self, inbox: Inbox, tenant: str, resolver: Resolver) -> None:
        self.inbox, self.tenant, self.key_resolver = inbox, tenant, resolver
        self._joined: Resolver | None = None
        self._delegators: tuple[Delegator, ...] | None = None
        self._allowed: bool | None = None

    def joined(self) -> Resolver:
        if self._joined is None:
            self._joined = with_membership(self.inbox.directory, self.tenant, self.key_resolver)
        return self._joined

    def for_gate(self, data: dict[str, Any]) -> Resolver:
        if not (data.get("approverGroupRefs") or data.get("approverRoleRefs")):
            return self.key_resolver
        return self.joined()

    def delegators(self) -> tuple[Delegator, ...]:
        if self._delegators is None:
            found = delegators_of(self.inbox.directory, self.tenant, self.key_resolver.subject_id, self.inbox.clock())
            self._delegators = tuple(d for d in found if d.principal != self.key_resolver.principal)
        return self._delegators

    def delegation_allowed(self) -> bool:
        if self._allowed is None:
            self._allowed = bool(tenant_settings(self.inbox.tenants, self.tenant).allowDelegation)
        return self._allowed


def _on_behalf_of(
    kind: str, payload: dict[str, Any], votes: list[dict[str, Any]], membership: _Membership
) -> list[str] | None:
    """None when the gate is not the caller's to decide; else the principals (subjectIds) whose votes the caller may
    cast on it by delegation, in the order they would be cast (after the caller's own, when that is open)."""
    if kind != "approval":
        return []
    data = payload["data"]
    resolver = membership.for_gate(data)
    cast = {v["principal"] for v in votes if v["action"] not in NOT_A_VOTE}
    own = eligible(data, resolver) and resolver.principal not in cast
    # Handed on this gate (issue 14 item 4), then standing out-of-office delegations the gate names: `_voter`'s order.
    offered = [
        (v["principal"], (v.get("subject") or {}).get("subjectId") or principal_subject(v["principal"]))
        for v in votes
        if v["action"] == "delegate" and v.get("delegate") == resolver.subject_id
    ]
    offered += [(d.principal, d.subject["subjectId"]) for d in membership.delegators() if named_by(data, d)]
    handed = list(
        dict.fromkeys(sid for principal, sid in offered if principal not in cast and principal != resolver.principal)
    )
    if handed and not membership.delegation_allowed():
        handed = []
    if not own and not handed:
        return None
    return handed


def families(filters: dict[str, str], membership: _Membership) -> list[str]:
    """The index families a page reads: the filter's own key when there is one (`kind=approval` has none:
    store/inbox.kind_family), else every family the caller may be eligible through (its key's and its directory
    entry's groups and roles) and, where the tenant allows delegation, those of each principal whose out-of-office
    delegate the caller is. Whatever the key does not decide is checked on the page's few entries."""
    if "workflowId" in filters:
        return [f"WF#{filters['workflowId']}"]
    if "kind" in filters and (family := kind_family(filters["kind"])) is not None:
        return [family]
    own = resolver_families(membership.joined())
    if not membership.delegators() or not membership.delegation_allowed():
        return own
    standing = [
        family
        for d in membership.delegators()
        for family in resolver_families(Resolver(subject=d.subject, surface="run", groups=d.groups, roles=d.roles))
    ]
    return list(dict.fromkeys(own + standing))


class Inbox:
    def __init__(
        self,
        runs: RunLedger,
        index: InboxPages,
        run_interrupts: RunInterrupts,
        directory: DirectoryRecords,
        tenants: TenantRecords,
        clock: Clock,
    ) -> None:
        self.runs = runs
        self.index = index
        self.run_interrupts = run_interrupts
        self.directory = directory
        self.tenants = tenants
        self.clock = clock

    def inbox(self, principal: Principal, limit: int, filters: dict[str, str], cursor: str | None) -> dict[str, Any]:
        """Pending interrupts the principal may decide, in the order `filters["sort"]` names (ORDERS: newest first
        unless asked), across the whole inbox. `filters`: kind, workflowId, runId, claim (CLAIMS: the gates the caller
        works, or those nobody works), sort.

        One page reads a bounded number of index entries, whatever the tenant's pending count (docs/scale.md): it
        may hold fewer than `limit` interrupts (even none) and still carry a nextCursor."""
        if "runId" in filters and tenant_of(filters["runId"]) != principal.tenant:
            raise Forbidden("the run id belongs to another tenant", code="id_tenant_mismatch")
        if "runId" in filters and ("claim" in filters or "sort" in filters):
            # One run's gates are few and read from its own partition, where who works them is not kept.
            raise Invalid("runId lists one run's open gates: it takes no claim or sort", {"field": "runId"})
        claim = filters.get("claim")
        wanted = EntryFilter(
            kind=filters.get("kind"),
            workflow_id=filters.get("workflowId"),
            assignee=str(principal.subject["subjectId"]) if claim == "mine" else None,
            unclaimed=claim == "unclaimed",
        )
        membership = _Membership(self, principal.tenant, run_resolver(principal))
        try:
            if "runId" in filters:
                found, next_cursor = self._run_page(principal.tenant, filters, limit, cursor)
            else:
                page = self.index.page(
                    principal.tenant,
                    families(filters, membership),
                    limit,
                    cursor,
                    sharded.fingerprint(f"{name}={value}" for name, value in sorted(filters.items())),
                    wanted,
                    self.clock().timestamp(),
                    filters.get("sort", "newest"),
                )
                found, next_cursor = page.interrupts, page.cursor
        except ValueError:
            raise Invalid("cursor is not one this inbox issued", {"field": "cursor"}) from None
        out: list[dict[str, Any]] = []
        for doc in found:
            if doc.get("deadline") is not None and float(doc["deadline"]) <= self.clock().timestamp():
                # Past its deadline: timed out, not pending. Reading the run records the timeout if nobody has.
                with contextlib.suppress(DomainError):
                    self.runs.load_run(principal.tenant, doc["runId"])
                continue
            on_behalf_of = _on_behalf_of(doc["kind"], doc["payload"], doc["votes"], membership)
            if on_behalf_of is None:
                continue
            item = {
                **{k: doc[k] for k in ("interruptId", "runId", "nodeId", "workflowId", "kind", "raisedAt", "payload")},
                "votes": _vote_view(doc["votes"]),
            }
            if on_behalf_of:
                item["onBehalfOf"] = on_behalf_of
            out.append(item)
        return {"interrupts": out, "nextCursor": next_cursor}

    def _run_page(
        self, tenant: str, filters: dict[str, str], limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of one run's open interrupts (its own partition; a run holds few at once)."""
        stream = run_pk(filters["runId"])
        query = sharded.fingerprint([stream, f"kind={filters.get('kind', '')}", f"wf={filters.get('workflowId', '')}"])
        after = None
        if cursor is not None:
            after = sharded.decode_cursor(cursor, tenant, query, [stream]).after[stream]
        docs, _ = self.run_interrupts(filters["runId"])
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
