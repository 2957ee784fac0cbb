"""API keys: one item per key, found by its id; listed per tenant on the inbox GSI."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from interlude import wiring
from interlude.domain.audit import AuditDraft
from interlude.domain.clock import epoch_of
from interlude.store import attributes as a
from interlude.store.idempotency import AnsweredRecord
from interlude.store.layout import API_KEY_PK_PREFIX, API_KEY_SK, api_key_pk, keys_index_pk, tenant_keys_query
from interlude.store.table import conditionally
from interlude.store.transactions import LostRace, TransactionalTable

# A revoked or expired key's item is swept this long after (it still answers 401 until then, and lists as such).
KEY_RETENTION_S = 30 * 24 * 3600


def api_key_put(key_id: str, record: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(label, Put) of a new key's item: its record, its tenant, its place in the tenant's listing, its expiry (a
    transaction's labelled write: the operator surface makes a tenant's first key with its record)."""
    key_item: a.Item = {
        **a.key(api_key_pk(key_id), API_KEY_SK),
        "record": a.as_json(record),
        "tenant": a.s(record["tenant"]),
        **_key_listing(key_id, record),
    }
    if record.get("expiresAt"):
        key_item[wiring.TTL_ATTRIBUTE] = a.n(int(epoch_of(record["expiresAt"])) + KEY_RETENTION_S)
    return API_KEY_SK, {"Put": {"Item": key_item, "ConditionExpression": "attribute_not_exists(pk)"}}


class ApiKeyStore(TransactionalTable):
    def put_api_key(
        self,
        key_id: str,
        record: dict[str, Any],
        answered: AnsweredRecord | None = None,
        audit: AuditDraft | None = None,
    ) -> None:
        label, put = api_key_put(key_id, record)
        if answered is None and audit is None:
            self.client.put_item(TableName=self.table, **put["Put"])
            return
        self._transact([(label, put)], answered, audit=audit)

    def list_api_key(self, key_id: str, record: dict[str, Any]) -> bool:
        """Give a key made before keys were listed its place in the listing (a backfill: interlude.migrations);
        whether it had none."""
        listing = _key_listing(key_id, record)
        names = {f"#i{i}": name for i, name in enumerate(listing)}
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(api_key_pk(key_id), API_KEY_SK),
            UpdateExpression="SET " + ", ".join(f"#i{i} = :i{i}" for i in range(len(listing))),
            ConditionExpression="attribute_exists(pk) AND attribute_not_exists(#i0)",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={f":i{i}": value for i, value in enumerate(listing.values())},
        ) is not None

    def get_api_key(self, key_id: str) -> dict[str, Any] | None:
        # Strongly consistent: a key revoked before this read is seen revoked.
        got = self.client.get_item(
            TableName=self.table, Key=a.key(api_key_pk(key_id), API_KEY_SK), ConsistentRead=True
        )
        item = got.get("Item")
        return _key_record(item) if item else None

    def list_api_keys(self, tenant: str, limit: int, cursor: str | None) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """One page of the tenant's keys, oldest first, as (keyId, record), and the cursor after it. A cursor
        this tenant's listing did not issue raises ValueError."""
        index = wiring.INBOX_INDEX
        kwargs: dict[str, Any] = {**tenant_keys_query(self.table, tenant), "Limit": limit}
        if cursor is not None:
            start = decode_cursor(cursor)
            if start is None or start[index.partition_key]["S"] != keys_index_pk(tenant):
                raise ValueError("cursor is not one this listing issued")
            kwargs["ExclusiveStartKey"] = start
        got = self.client.query(**kwargs)
        last = got.get("LastEvaluatedKey")
        keys = [
            (item[wiring.PARTITION_KEY]["S"].removeprefix(API_KEY_PK_PREFIX), _key_record(item))
            for item in got.get("Items") or []
        ]
        return keys, encode_cursor(last) if last else None

    def revoke_api_key(
        self, tenant: str, key_id: str, at: str, audit: AuditDraft | None = None
    ) -> dict[str, Any] | None:
        """Mark the tenant's key revoked (once: a second revocation keeps the first instant, and records nothing);
        None when the tenant has no such key, whether it does not exist or is another tenant's. `audit`: the entry
        recording the revocation, in the same transaction."""
        record = self.get_api_key(key_id)
        if record is None or record.get("tenant") != tenant:
            return None
        if record.get("revokedAt"):
            return record
        update: dict[str, Any] = {
            "Key": a.key(api_key_pk(key_id), API_KEY_SK),
            "UpdateExpression": "SET revokedAt = :at, #ttl = :ttl",
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(revokedAt)",
            "ExpressionAttributeNames": {"#ttl": wiring.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":at": a.s(at), ":ttl": a.n(int(epoch_of(at)) + KEY_RETENTION_S)},
        }
        try:
            if audit is not None:
                self._transact([(API_KEY_SK, {"Update": update})], audit=audit)
            elif conditionally(self.client.update_item, TableName=self.table, **update) is None:
                return self.get_api_key(key_id)  # revoked meanwhile, as below
        except LostRace:
            return self.get_api_key(key_id)  # revoked meanwhile: report the instant that won
        return {**record, "revokedAt": at}



def _key_listing(key_id: str, record: Mapping[str, Any]) -> a.Item:
    """The attributes that list a key among its tenant's (GET /keys): the inbox GSI, under a partition value of the
    tenant's own (the index is overloaded)."""
    index = wiring.INBOX_INDEX
    return {
        index.partition_key: a.s(keys_index_pk(record["tenant"])),
        index.sort_key: a.s(f"{record['createdAt']}#{key_id}"),
    }


def _key_record(item: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = a.unpacked(item["record"])
    if "revokedAt" in item:
        record["revokedAt"] = item["revokedAt"]["S"]
    return record


def encode_cursor(key: dict[str, Any]) -> str:
    raw = json.dumps({k: v["S"] for k, v in key.items()}, separators=(",", ":"), sort_keys=True, allow_nan=False)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


# The attributes of a cursor of the listing: the table's key and the `inbox` GSI's key.
CURSOR_KEYS = (wiring.PARTITION_KEY, wiring.SORT_KEY, wiring.INBOX_INDEX.partition_key, wiring.INBOX_INDEX.sort_key)


def decode_cursor(cursor: str) -> dict[str, Any] | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        plain = json.loads(raw)
    except (ValueError, TypeError):
        return None
    if (
        not isinstance(plain, dict)
        or set(plain) != set(CURSOR_KEYS)
        or not all(isinstance(v, str) for v in plain.values())
    ):
        return None
    return {k: a.s(v) for k, v in plain.items()}
