"""The tenant's principal directory (issue 14).

  principal     T#{tenant}#DIR              P#{principalId}   entry (JSON), updatedAt, updatedBy
  group member  T#{tenant}#DIR#G#{group}    P#{principalId}   (one item per membership)
  role member   T#{tenant}#DIR#R#{role}     P#{principalId}
  delegation    T#{tenant}#DIR#D#{delegate} P#{principalId}   from?, until?, groups, roles (an outOfOffice naming them)
  delegators    T#{tenant}#DIR#D#{delegate} COUNT             n (how many entries name this delegate)
  slack user    T#{tenant}#DIR#S#{slackId}  SLACK             principalId (whose entry names this Slack user id)
  size          T#{tenant}                  USAGE             principals (the directory's size, store/limits.py)

An entry and its membership items are written in one transaction, so "who is in group g" (one Query) never
disagrees with the entries. A new entry claims a place in the usage counter on condition that the directory
stays within its limit; a delete releases it. An entry whose `outOfOffice` names a delegate writes, in the same
transaction, a delegation item keyed by that delegate (what the delegate's inbox page and decisions read with one
Query) and claims a place in the delegate's count (at most `max_delegators`). An out-of-office period that has
ended holds its place only until it is in the way: a new entry that finds the delegate's count full first removes
the ended periods naming that delegate (`_sweep_ended`), each from its entry, with its delegation item and place.
An entry naming a `slackUserId` claims that id's item in the same transaction, on condition that no other entry
holds it: a click in Slack (issue 28 item 6) finds its principal with one GetItem, and one Slack user is one principal.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from interlude.rules.limits import quota_exceeded
from interlude.store import attributes as a
from interlude.store import limits as counters
from interlude.store.table import Table, batch_get

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

PRINCIPALS = "principals"
DELEGATORS = "delegatorsPerDelegate"
ENTRY_PREFIX = "P#"
COUNT_SK = "COUNT"
SLACK_SK = "SLACK"
# Retries when another writer changed the same entry between our read and our transaction.
WRITE_ATTEMPTS = 4
# Who an entry's last change names when Interlude removed its ended out-of-office period to make room.
ENDED_PERIOD_REMOVER = "interlude:out-of-office-ended"


def directory_pk(tenant: str) -> str:
    return f"T#{tenant}#DIR"


def member_pk(tenant: str, kind: str, name: str) -> str:
    """`kind`: "G" (group) or "R" (role)."""
    return f"T#{tenant}#DIR#{kind}#{name}"


class EntryChanged(Exception):
    """Another writer changed the entry between the read and the write."""


class SlackUserTaken(Exception):
    """Another entry of the tenant's directory already names this Slack user id."""


class DelegateFull(Exception):
    """The delegate's count has no place left (before any ended period was removed)."""


class DirectoryStore:
    def __init__(self, store: Table) -> None:
        self.store = store
        self.table = store.table
        self.client = store.client

    def get(self, tenant: str, principal_id: str) -> dict[str, Any] | None:
        """{entry, updatedAt, updatedBy} or None."""
        got = self.client.get_item(
            TableName=self.table, Key=a.key(directory_pk(tenant), ENTRY_PREFIX + principal_id), ConsistentRead=True
        )
        item = got.get("Item")
        if not item:
            return None
        return {"entry": a.unpacked(item["entry"]), "updatedAt": item["updatedAt"]["S"], "updatedBy": item["updatedBy"]["S"]}

    def _memberships(self, tenant: str, principal_id: str, entry: dict[str, Any] | None) -> set[tuple[str, str]]:
        if entry is None:
            return set()
        return {(member_pk(tenant, "G", g), ENTRY_PREFIX + principal_id) for g in entry.get("groups") or ()} | {
            (member_pk(tenant, "R", r), ENTRY_PREFIX + principal_id) for r in entry.get("roles") or ()
        }

    def put(
        self,
        tenant: str,
        principal_id: str,
        entry: dict[str, Any],
        at: str,
        by: str,
        limit: int,
        max_delegators: int = 2**31,
    ) -> tuple[bool, dict[str, Any]]:
        """Store the whole entry; (created, stored record). Raises the quota refusal past `limit` entries, or when
        its out-of-office delegate would be named by more than `max_delegators` entries whose period has not ended
        at `at` (ended ones are removed to make room)."""
        swept = False
        for _ in range(WRITE_ATTEMPTS):
            old = self.get(tenant, principal_id)
            try:
                self._write(tenant, principal_id, entry, old, at, by, (limit, max_delegators))
            except EntryChanged:
                continue
            except DelegateFull:
                delegate = _delegate_of(entry, principal_id)
                if swept or delegate is None or not self._sweep_ended(tenant, delegate, at, max_delegators):
                    raise quota_exceeded(
                        DELEGATORS,
                        max_delegators,
                        f"the out-of-office delegate already stands in for {max_delegators} principals",
                        field="outOfOffice.delegate",
                    ) from None
                swept = True
                continue
            return old is None, {"entry": entry, "updatedAt": at, "updatedBy": by}
        raise EntryChanged()

    def _sweep_ended(self, tenant: str, delegate: str, at: str, max_delegators: int) -> int:
        """Remove the out-of-office periods naming `delegate` that ended by `at`: each from its entry (rewritten
        without it, conditional on the entry read), with its delegation item and its place in the count, in one
        transaction per entry. Returns how many were removed (an entry changed meanwhile is left to its writer)."""
        now = datetime.fromisoformat(at)
        removed = 0
        for record in self.delegations(tenant, delegate, max_delegators):
            until = record.get("until")
            if until is None or datetime.fromisoformat(until) > now:
                continue
            pid = record["principalId"]
            old = self.get(tenant, pid)
            away = (old["entry"].get("outOfOffice") or {}) if old else {}
            if old is None or away.get("delegate") != delegate or away.get("until") != until:
                continue
            back = {k: v for k, v in old["entry"].items() if k != "outOfOffice"}
            try:
                self._write(tenant, pid, back, old, at, ENDED_PERIOD_REMOVER, (0, 0))
            except EntryChanged:
                continue
            removed += 1
        return removed

    def _write(
        self,
        tenant: str,
        principal_id: str,
        entry: dict[str, Any],
        old: dict[str, Any] | None,
        at: str,
        by: str,
        limits: tuple[int, int],
    ) -> None:
        limit, max_delegators = limits
        key = a.key(directory_pk(tenant), ENTRY_PREFIX + principal_id)
        put: dict[str, Any] = {
            "Item": {**key, "entry": a.as_json(entry), "updatedAt": a.s(at), "updatedBy": a.s(by)},
        }
        items: list[tuple[str, dict[str, Any]]] = []
        if old is None:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
            items.append(counters.claim(tenant, PRINCIPALS, limit))
        else:
            put["ConditionExpression"] = "updatedAt = :seen"
            put["ExpressionAttributeValues"] = {":seen": a.s(old["updatedAt"])}
        items.insert(0, (ENTRY_PREFIX, {"Put": put}))
        before = self._memberships(tenant, principal_id, old["entry"] if old else None)
        after = self._memberships(tenant, principal_id, entry)
        for pk, sk in sorted(before - after):
            items.append(("M", {"Delete": {"Key": a.key(pk, sk)}}))
        for pk, sk in sorted(after - before):
            items.append(("M", {"Put": {"Item": {**a.key(pk, sk), "since": a.s(at)}}}))
        items += _delegation_items(tenant, principal_id, old["entry"] if old else None, entry, max_delegators)
        items += _slack_items(tenant, principal_id, old["entry"] if old else None, entry)
        self._transact(items, limit)

    def delete(self, tenant: str, principal_id: str) -> dict[str, Any] | None:
        """Remove the entry and its memberships; the record removed, or None when there was none."""
        for _ in range(WRITE_ATTEMPTS):
            old = self.get(tenant, principal_id)
            if old is None:
                return None
            key = a.key(directory_pk(tenant), ENTRY_PREFIX + principal_id)
            delete = {
                "Key": key,
                "ConditionExpression": "updatedAt = :seen",
                "ExpressionAttributeValues": {":seen": a.s(old["updatedAt"])},
            }
            items: list[tuple[str, dict[str, Any]]] = [(ENTRY_PREFIX, {"Delete": delete})]
            items.append(counters.release(tenant, PRINCIPALS))
            for pk, sk in sorted(self._memberships(tenant, principal_id, old["entry"])):
                items.append(("M", {"Delete": {"Key": a.key(pk, sk)}}))
            items += _delegation_items(tenant, principal_id, old["entry"], None, 0)
            items += _slack_items(tenant, principal_id, old["entry"], None)
            try:
                self._transact(items, 0)
            except EntryChanged:
                continue
            return old
        raise EntryChanged()

    def _transact(self, items: list[tuple[str, dict[str, Any]]], limit: int) -> None:
        for _, op in items:
            next(iter(op.values()))["TableName"] = self.table
        try:
            # The items are built by hand in the low-level shape (store/attributes.py), as plain dicts.
            self.client.transact_write_items(TransactItems=cast("list[TransactWriteItemTypeDef]", [op for _, op in items]))
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            failed = {label for (label, _), r in zip(items, reasons, strict=False) if r.get("Code") not in (None, "None")}
            if counters.USAGE_SK in failed:
                raise quota_exceeded(
                    PRINCIPALS, limit, f"this tenant's directory holds its limit of {limit} principals"
                ) from None
            if COUNT_SK in failed:
                raise DelegateFull() from None
            if SLACK_SK in failed:
                raise SlackUserTaken() from None
            raise EntryChanged() from exc

    def link_slack_user(self, tenant: str, principal_id: str, slack_user_id: str, seen: str) -> bool:
        """Claim the Slack user id's item for an entry written before those items existed (migrations/0008), as the
        entry's next write would: only while the entry is still as read (`updatedAt` = `seen`, so a Slack id it no
        longer names is never linked to it) and no item names the id yet (so an entry that holds it, or a second old
        entry naming the same id, keeps what it has). Whether it was written."""
        entry_check = {
            "TableName": self.table,
            "Key": a.key(directory_pk(tenant), ENTRY_PREFIX + principal_id),
            "ConditionExpression": "updatedAt = :seen",
            "ExpressionAttributeValues": {":seen": a.s(seen)},
        }
        claim = {
            "TableName": self.table,
            "Item": {**a.key(member_pk(tenant, "S", slack_user_id), SLACK_SK), "principalId": a.s(principal_id)},
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        try:
            self.client.transact_write_items(
                TransactItems=cast("list[TransactWriteItemTypeDef]", [{"ConditionCheck": entry_check}, {"Put": claim}])
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            return False
        return True

    def members(self, tenant: str, kind: str, name: str, most: int) -> list[str]:
        """Principal ids in a group ("G") or role ("R"), at most `most` of them."""
        out: list[str] = []
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": a.s(member_pk(tenant, kind, name)), ":p": a.s(ENTRY_PREFIX)},
            PaginationConfig={"MaxItems": most, "PageSize": min(most, 1000)},
        )
        for page in pages:
            out += [item["sk"]["S"][len(ENTRY_PREFIX) :] for item in page.get("Items") or []]
        return out[:most]

    def delegations(self, tenant: str, delegate: str, most: int) -> list[dict[str, Any]]:
        """The out-of-office entries naming `delegate` (one Query of at most `most` small items), as
        {principalId, groups, roles, from?, until?}, whether or not their period is on now."""
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": a.s(member_pk(tenant, "D", delegate)), ":p": a.s(ENTRY_PREFIX)},
            Limit=most,
        )
        out = []
        for item in got.get("Items") or []:
            record = {"principalId": item["sk"]["S"][len(ENTRY_PREFIX) :], **a.unpacked(item["delegation"])}
            out.append(record)
        return out

    def get_many(self, tenant: str, principal_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Entries by principal id (those that exist), with one BatchGetItem per 100 ids."""
        keys = [a.key(directory_pk(tenant), ENTRY_PREFIX + pid) for pid in dict.fromkeys(principal_ids)]
        return {
            item["sk"]["S"][len(ENTRY_PREFIX) :]: a.unpacked(item["entry"])
            for item in batch_get(self.client, self.table, keys)
        }

    def by_slack_user(self, tenant: str, slack_user_id: str) -> str | None:
        """The principal whose entry names this Slack user id, if one does."""
        got = self.client.get_item(
            TableName=self.table, Key=a.key(member_pk(tenant, "S", slack_user_id), SLACK_SK), ConsistentRead=True
        )
        item = got.get("Item")
        return item["principalId"]["S"] if item else None

    def usage(self, tenant: str) -> int:
        got = self.client.get_item(TableName=self.table, Key=counters.usage_key(tenant), ConsistentRead=True)
        value = (got.get("Item") or {}).get(PRINCIPALS)
        return int(value["N"]) if value else 0


def _delegate_of(entry: dict[str, Any] | None, principal_id: str) -> str | None:
    away = (entry or {}).get("outOfOffice") or {}
    delegate = away.get("delegate")
    return delegate if isinstance(delegate, str) and delegate != principal_id else None


def _delegation_items(
    tenant: str, principal_id: str, old: dict[str, Any] | None, new: dict[str, Any] | None, max_delegators: int
) -> list[tuple[str, dict[str, Any]]]:
    """The transaction items that keep the delegation item keyed by the delegate equal to the entry's outOfOffice:
    put (with the entry's membership and period) while it names a delegate, deleted when it no longer does; the
    delegate's count claimed (conditionally) when it starts naming them, released when it stops."""
    before, after = _delegate_of(old, principal_id), _delegate_of(new, principal_id)
    items: list[tuple[str, dict[str, Any]]] = []
    if before is not None and before != after:
        items.append(("D", {"Delete": {"Key": a.key(member_pk(tenant, "D", before), ENTRY_PREFIX + principal_id)}}))
        items.append(("DR", {"Update": _count_update(tenant, before, -1)}))
    if after is not None and new is not None:
        away = new["outOfOffice"]
        record = {"groups": list(new.get("groups") or ()), "roles": list(new.get("roles") or ())}
        record.update({k: away[k] for k in ("from", "until") if away.get(k)})
        key = a.key(member_pk(tenant, "D", after), ENTRY_PREFIX + principal_id)
        items.append(("D", {"Put": {"Item": {**key, "delegation": a.as_json(record)}}}))
        if before != after:
            claim = _count_update(tenant, after, 1)
            claim["ConditionExpression"] = "attribute_not_exists(#n) OR #n < :limit"
            claim["ExpressionAttributeValues"][":limit"] = a.n(max_delegators)
            items.append((COUNT_SK, {"Update": claim}))
    return items


def _slack_items(
    tenant: str, principal_id: str, old: dict[str, Any] | None, new: dict[str, Any] | None
) -> list[tuple[str, dict[str, Any]]]:
    """The transaction items that keep the Slack user id's item naming the entry that names it: claimed (on
    condition that no other principal holds it) at every write of an entry naming it (so an entry written before
    the items existed gains its own when it is next written), removed when it stops naming it."""
    before, after = (old or {}).get("slackUserId"), (new or {}).get("slackUserId")
    items: list[tuple[str, dict[str, Any]]] = []
    if before and before != after:
        gone = {
            "Key": a.key(member_pk(tenant, "S", before), SLACK_SK),
            "ConditionExpression": "attribute_not_exists(pk) OR principalId = :me",
            "ExpressionAttributeValues": {":me": a.s(principal_id)},
        }
        items.append(("SD", {"Delete": gone}))
    if after:
        claim = {
            "Item": {**a.key(member_pk(tenant, "S", after), SLACK_SK), "principalId": a.s(principal_id)},
            "ConditionExpression": "attribute_not_exists(pk) OR principalId = :me",
            "ExpressionAttributeValues": {":me": a.s(principal_id)},
        }
        items.append((SLACK_SK, {"Put": claim}))
    return items


def _count_update(tenant: str, delegate: str, by: int) -> dict[str, Any]:
    return {
        "Key": a.key(member_pk(tenant, "D", delegate), COUNT_SK),
        "UpdateExpression": "ADD #n :by",
        "ExpressionAttributeNames": {"#n": "n"},
        "ExpressionAttributeValues": {":by": a.n(by)},
    }
