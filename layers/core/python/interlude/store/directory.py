"""The tenant's principal directory (issue 14).

  principal     T#{tenant}#DIR              P#{principalId}   entry (JSON), updatedAt, updatedBy
  group member  T#{tenant}#DIR#G#{group}    P#{principalId}   (one item per membership)
  role member   T#{tenant}#DIR#R#{role}     P#{principalId}
  size          T#{tenant}                  USAGE             principals (the directory's size, store/limits.py)

An entry and its membership items are written in one transaction, so "who is in group g" (one Query) never
disagrees with the entries. A new entry claims a place in the usage counter on condition that the directory
stays within its limit; a delete releases it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from interlude.rules.limits import quota_exceeded
from interlude.store import attributes as a
from interlude.store import limits as counters
from interlude.store.dynamo import Store

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

PRINCIPALS = "principals"
ENTRY_PREFIX = "P#"
# Retries when another writer changed the same entry between our read and our transaction.
WRITE_ATTEMPTS = 4


def directory_pk(tenant: str) -> str:
    return f"T#{tenant}#DIR"


def member_pk(tenant: str, kind: str, name: str) -> str:
    """`kind`: "G" (group) or "R" (role)."""
    return f"T#{tenant}#DIR#{kind}#{name}"


class EntryChanged(Exception):
    """Another writer changed the entry between the read and the write."""


class DirectoryStore:
    def __init__(self, store: Store) -> None:
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
        self, tenant: str, principal_id: str, entry: dict[str, Any], at: str, by: str, limit: int
    ) -> tuple[bool, dict[str, Any]]:
        """Store the whole entry; (created, stored record). Raises the quota refusal past `limit` entries."""
        for _ in range(WRITE_ATTEMPTS):
            old = self.get(tenant, principal_id)
            try:
                self._write(tenant, principal_id, entry, old, at, by, limit)
            except EntryChanged:
                continue
            return old is None, {"entry": entry, "updatedAt": at, "updatedBy": by}
        raise EntryChanged()

    def _write(
        self,
        tenant: str,
        principal_id: str,
        entry: dict[str, Any],
        old: dict[str, Any] | None,
        at: str,
        by: str,
        limit: int,
    ) -> None:
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
            raise EntryChanged() from exc

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

    def usage(self, tenant: str) -> int:
        got = self.client.get_item(TableName=self.table, Key=counters.usage_key(tenant), ConsistentRead=True)
        value = (got.get("Item") or {}).get(PRINCIPALS)
        return int(value["N"]) if value else 0
