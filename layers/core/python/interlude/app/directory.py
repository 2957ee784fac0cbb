"""The principal directory (issue 14 item 1): its operations, and what it adds to a decision and a gate.

* Group and role eligibility resolve through it: a resolver's groups and roles are its credential's (a key's own
  groups and roles still count for the key's subject) together with the directory entry of its subjectId, read
  at decision time and recorded on the vote as before.
* A gate's recipients (who is told it asks) are the principals its `audience` names, else those its
  `approversList`, group and role refs make eligible (openwop-notes §1.1), found through the directory.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from interlude.app.retries import busy
from interlude.domain.clock import iso
from interlude.domain.errors import Invalid, NotFound
from interlude.domain.models import keeping_unknown
from interlude.domain.models.principals import (
    MAX_DELEGATORS_PER_DELEGATE,
    MAX_DIRECTORY_PRINCIPALS,
    OutOfOffice,
    PrincipalEntry,
)
from interlude.rules import auth
from interlude.rules.interrupts.decide import Resolver, binding_refs
from interlude.rules.interrupts.delegation import Delegator
from interlude.store.directory import EntryChanged

if TYPE_CHECKING:
    from datetime import datetime

    from interlude.app.ports import DirectoryRecords
    from interlude.domain.clock import Clock

# The most principals one interrupt visit notifies (README, "Limits"): refs naming more are cut at this many,
# in the order the gate names them, and the notification log says so.
MAX_RECIPIENTS = 100


def answer(principal_id: str, record: dict[str, Any]) -> dict[str, Any]:
    return {"principalId": principal_id, **record["entry"], "updatedAt": record["updatedAt"]}


class Directory:
    """The tenant's principals: entries put, read and removed (quotas and delegation checked by the store's write)."""

    def __init__(self, records: DirectoryRecords, clock: Clock) -> None:
        self.records = records
        self.clock = clock

    def put_principal(self, tenant: str, principal_id: str, entry: PrincipalEntry, by: str) -> tuple[bool, dict[str, Any]]:
        """(created, the entry as stored)."""
        if entry.outOfOffice is not None and entry.outOfOffice.delegate == principal_id:
            # As a gate's delegation (rules/interrupts/decide.py): a vote handed to its own holder decides nothing.
            raise Invalid("a principal cannot delegate to themselves", {"field": "outOfOffice.delegate"})
        stored = keeping_unknown(entry, entry_of(self.records, tenant, principal_id)).model_dump(mode="json", exclude_none=True)
        try:
            created, record = self.records.put(
                tenant, principal_id, stored, iso(self.clock()), by, MAX_DIRECTORY_PRINCIPALS, MAX_DELEGATORS_PER_DELEGATE
            )
        except EntryChanged:
            raise busy("the entry kept changing while writing it; retry") from None
        return created, answer(principal_id, record)

    def get_principal(self, tenant: str, principal_id: str) -> dict[str, Any]:
        record = self.records.get(tenant, principal_id)
        if record is None:
            raise NotFound(f"no principal {principal_id!r} in this tenant's directory")
        return answer(principal_id, record)

    def delete_principal(self, tenant: str, principal_id: str) -> dict[str, Any]:
        try:
            record = self.records.delete(tenant, principal_id)
        except EntryChanged:
            raise busy("the entry kept changing while removing it; retry") from None
        if record is None:
            raise NotFound(f"no principal {principal_id!r} in this tenant's directory")
        return answer(principal_id, record)


def entry_of(directory: DirectoryRecords, tenant: str, principal_id: str) -> PrincipalEntry | None:
    """The directory entry of a principal, or None (what the approval page and notifications read)."""
    record = directory.get(tenant, principal_id)
    return PrincipalEntry.model_validate(record["entry"]) if record else None


def display_name(directory: DirectoryRecords, tenant: str, principal_id: str) -> str:
    """A person as pages name them: their directory display name, else their principal (key subject) id."""
    entry = entry_of(directory, tenant, principal_id)
    return entry.displayName if entry is not None and entry.displayName else principal_id


def delegators_of(directory: DirectoryRecords, tenant: str, delegate: str | None, now: datetime) -> tuple[Delegator, ...]:
    """The principals whose out-of-office delegate `delegate` is now (one Query of the delegation items keyed by
    the delegate), each with the membership their entry records, in principal id order."""
    if delegate is None:
        return ()
    found = []
    for record in directory.delegations(tenant, delegate, MAX_DELEGATORS_PER_DELEGATE):
        period = OutOfOffice.model_validate({"delegate": delegate, **{k: record[k] for k in ("from", "until") if k in record}})
        if not period.active(now):
            continue
        pid = record["principalId"]
        subject = {"issuer": auth.ISSUER, "subjectId": pid, "tenant": tenant}
        found.append(
            Delegator(f"{auth.ISSUER}|{pid}", subject, tuple(record["groups"]), tuple(record["roles"]), "out-of-office")
        )
    return tuple(found)


def with_directory(directory: DirectoryRecords, tenant: str, data: dict[str, Any], resolver: Resolver) -> Resolver:
    """The resolver with its directory groups and roles added, when the gate's eligibility asks for them."""
    fields = binding_refs(data)
    if not ({"approverGroupRefs", "approverRoleRefs"} & set(fields)):
        return resolver
    return with_membership(directory, tenant, resolver)


def with_membership(directory: DirectoryRecords, tenant: str, resolver: Resolver) -> Resolver:
    """The resolver's groups and roles joined with its subject's directory entry (one read)."""
    if resolver.subject_id is None:
        return resolver
    record = directory.get(tenant, resolver.subject_id)
    if record is None:
        return resolver
    entry = record["entry"]
    groups = tuple(sorted(set(resolver.groups) | set(entry.get("groups") or ())))
    roles = tuple(sorted(set(resolver.roles) | set(entry.get("roles") or ())))
    return replace(resolver, groups=groups, roles=roles)


def recipients(directory: DirectoryRecords, tenant: str, data: dict[str, Any]) -> tuple[list[str], bool]:
    """(principal ids to tell, in the gate's order, and whether MAX_RECIPIENTS cut the list).

    `audience` ({subjects, groups, roles}) when the gate names one: a hint, never eligibility; else the union of
    approversList and the members of the group and role refs. A subject may be `issuer|subjectId` or
    `issuer:subjectId`; the subjectId is the principal.
    """
    audience = data.get("audience")
    if audience:
        subjects, groups, roles = audience.get("subjects"), audience.get("groups"), audience.get("roles")
    else:
        subjects, groups, roles = data.get("approversList"), data.get("approverGroupRefs"), data.get("approverRoleRefs")
    named = [_subject_of(ref) for ref in subjects or ()]
    for group in groups or ():
        named += directory.members(tenant, "G", group, MAX_RECIPIENTS + 1)
    for role in roles or ():
        named += directory.members(tenant, "R", role, MAX_RECIPIENTS + 1)
    ordered = list(dict.fromkeys(n for n in named if n))
    return ordered[:MAX_RECIPIENTS], len(ordered) > MAX_RECIPIENTS


def _subject_of(ref: Any) -> str:
    if not isinstance(ref, str):
        return ""
    if "|" in ref:
        return ref.rsplit("|", 1)[1]
    # `urn:interlude:api-key:alice` names alice; a bare id names itself.
    return ref.rsplit(":", 1)[1] if ref.startswith("urn:") else ref
