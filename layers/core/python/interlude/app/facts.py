"""What a decision, a page and a notification read from the principal directory at the time they need it: entries,
membership and recipients (app/directory.py keeps them), and the delegations a caller may act on (app/delegation.py).
A leaf the services share, so none imports another's module (the tenant's own facts: app/tenant_facts.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from interlude.app.tenant_facts import tenant_settings
from interlude.rules import auth
from interlude.rules.interrupts.decide import binding_refs, eligible, named_by
from interlude.rules.interrupts.delegation import Delegator, has_cast

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from interlude.app.ports import DirectoryRecords, TenantRecords
    from interlude.domain.models.principals import PrincipalEntry
    from interlude.domain.models.run import OpenInterrupt
    from interlude.rules.interrupts.decide import Resolver

# The most principals one interrupt visit notifies (docs/limits.md): refs naming more are cut at this many,
# in the order the gate names them, and the notification log says so.
MAX_RECIPIENTS = 100


# -- the directory --------------------------------------------------------------------------------------------
# The directory's models (domain/models/principals.py) are imported where an entry or a delegation is read: a decision
# on a gate that names no group, role or delegate reads none, and its route module then defines none (ADR 0151).


def entry_of(directory: DirectoryRecords, tenant: str, principal_id: str) -> PrincipalEntry | None:
    """The directory entry of a principal, or None (what the approval page and notifications read)."""
    from interlude.domain.models.principals import PrincipalEntry

    record = directory.get(tenant, principal_id)
    return PrincipalEntry.model_validate(record["entry"]) if record else None


def display_name(directory: DirectoryRecords, tenant: str, principal_id: str) -> str:
    """A person as pages name them: their directory display name, else their principal (key subject) id."""
    entry = entry_of(directory, tenant, principal_id)
    return entry.displayName if entry is not None and entry.displayName else principal_id


def display_names(directory: DirectoryRecords, tenant: str, principal_ids: Iterable[str]) -> dict[str, str]:
    """`display_name` of each of these principals, with one BatchGetItem per 100 of them."""
    from interlude.domain.models.principals import PrincipalEntry

    ids = sorted(set(principal_ids))
    found = directory.get_many(tenant, ids) if ids else {}
    names = {pid: PrincipalEntry.model_validate(entry).displayName for pid, entry in found.items()}
    return {pid: names.get(pid) or pid for pid in ids}


def delegators_of(
    directory: DirectoryRecords, tenant: str, delegate: str | None, now: datetime
) -> tuple[Delegator, ...]:
    """The principals whose out-of-office delegate `delegate` is now (one Query of the delegation items keyed by
    the delegate), each with the membership their entry records, in principal id order."""
    if delegate is None:
        return ()
    from interlude.domain.models.principals import MAX_DELEGATORS_PER_DELEGATE, OutOfOffice

    found = []
    for record in directory.delegations(tenant, delegate, MAX_DELEGATORS_PER_DELEGATE):
        period = OutOfOffice.model_validate(
            {"delegate": delegate, **{k: record[k] for k in ("from", "until") if k in record}}
        )
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
    return resolver._replace(groups=groups, roles=roles)


def recipients(directory: DirectoryRecords, tenant: str, data: dict[str, Any]) -> tuple[list[str], bool]:
    """(principal ids to tell, in the gate's order, and whether MAX_RECIPIENTS cut the list).

    `audience` ({subjects, groups, roles}) when the gate names one: a hint, never eligibility; else the union of
    approversList and the members of the group and role refs. A subject may be `issuer|subjectId` or
    `issuer:subjectId`; the subjectId is the principal.
    """
    subjects, groups, roles = _asked(data)
    named = [_subject_of(ref) for ref in subjects or ()]
    for group in groups or ():
        named += directory.members(tenant, "G", group, MAX_RECIPIENTS + 1)
    for role in roles or ():
        named += directory.members(tenant, "R", role, MAX_RECIPIENTS + 1)
    ordered = list(dict.fromkeys(n for n in named if n))
    return ordered[:MAX_RECIPIENTS], len(ordered) > MAX_RECIPIENTS


def asks_nobody(data: Mapping[str, Any]) -> bool:
    """Whether `recipients` finds nobody in `data` whatever the directory holds: it names no subject, group or role."""
    return not any(_asked(data))


def _asked(data: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The subjects, groups and roles `data` names to tell: its `audience`'s, else its approvers'."""
    audience = data.get("audience")
    if audience:
        return audience.get("subjects"), audience.get("groups"), audience.get("roles")
    return data.get("approversList"), data.get("approverGroupRefs"), data.get("approverRoleRefs")


def asked_of(payload: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Where a gate names whom it asks, in the shape `recipients` reads: an approval in its interrupt's data (its
    approvers, or its `audience`); a gate answered with a form (clarification, custom, low-confidence) in its node's
    `audience` ({subjects, groups, roles}), which its payload's data cannot carry (OpenWOP closes those objects)."""
    if payload.get("kind") == "approval":
        return dict(payload.get("data") or {})
    audience = config.get("audience")
    return {"audience": audience} if isinstance(audience, Mapping) else {}


def _subject_of(ref: Any) -> str:
    if not isinstance(ref, str):
        return ""
    if "|" in ref:
        return ref.rsplit("|", 1)[1]
    # `urn:interlude:api-key:alice` names alice; a bare id names itself.
    return ref.rsplit(":", 1)[1] if ref.startswith("urn:") else ref


# -- delegation ---------------------------------------------------------------------------------------------------


def with_delegations(
    tenants: TenantRecords,
    directory: DirectoryRecords,
    tenant: str,
    interrupt: OpenInterrupt,
    resolver: Resolver,
    now: datetime,
) -> Resolver:
    """The resolver with what delegation needs, read only when the caller cannot simply cast their own vote."""
    if interrupt.kind != "approval":
        return resolver
    data = interrupt.payload["data"]
    if eligible(data, resolver) and not has_cast(interrupt, resolver.principal):
        return resolver
    if not tenant_settings(tenants, tenant).allowDelegation:
        return resolver
    standing = standing_delegators(directory, tenant, data, resolver, now)
    return resolver._replace(delegation_allowed=True, standing_delegators=standing)


def standing_delegators(
    directory: DirectoryRecords, tenant: str, data: dict[str, Any], resolver: Resolver, now: datetime
) -> tuple[Delegator, ...]:
    """The gate's named principals now out of office with the caller as their delegate: the delegation items keyed
    by the caller (one Query, at most MAX_DELEGATORS_PER_DELEGATE), those the gate names."""
    return tuple(d for d in delegators_of(directory, tenant, resolver.subject_id, now) if named_by(data, d))
