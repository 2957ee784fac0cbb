"""Webhook subscriptions (issue 14): their items in the table (their secrets, in Secrets Manager, are
adapters.subscription_secrets').

  subscription   T#{tenant}               WH#{opaque}                      record (url, events, tags, …, secretName), sv
  count          T#{tenant}               WEBHOOKS                         n: the tenant's subscriptions (the limit)
  dead letter    T#{tenant}#WH#{opaque}   DL#{deadLetteredAt}#{delivery}   content-free record; ttl = its expiresAt
  its index      T#{tenant}#WH#{opaque}   DLX#{delivery}                   at: the dead letter's sort key; ttl the same

A subscription and the count change in one transaction, conditional on the limit, so concurrent registrations
never pass it. One Query of the tenant partition (`WH#`) finds every subscription a transition may feed. The secret
(`{"current": …, "previous": [{"secret", "until"}]}`) is never stored in the table; the subscription item names
the secret's version in force (`sv`, a Secrets Manager VersionId), which a rotation moves conditionally, so whoever
reads the subscription signs with what it names, whatever a cache of the secret holds (an item written before
versions were kept has none: the secret's current version is meant).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.domain.clock import epoch_of
from interlude.domain.ids import tenant_of
from interlude.rules.limits import quota_exceeded
from interlude.store import attributes as a
from interlude.store.interactions import tenant_pk
from interlude.store.layout import event_sk, run_pk
from interlude.store.recoveries import count_up_to
from interlude.store.table import conditionally

SUBSCRIPTION_SK_PREFIX = "WH#"
SECRET_VERSION = "sv"
COUNT_SK = "WEBHOOKS"
DEAD_LETTER_SK_PREFIX = "DL#"
# A dead letter by its delivery's id (the retry route names it so): written with it, gone with it.
DEAD_LETTER_INDEX_PREFIX = "DLX#"
# A dead letter written before its index was (by the release before replays) is looked for among this many pages of
# its subscription's dead letters; none is older than their retention (14 days).
UNINDEXED_PAGES = 20


def subscription_key(webhook_id: str) -> dict[str, Any]:
    tenant, opaque = webhook_id.split("/", 1)
    return a.key(tenant_pk(tenant), f"{SUBSCRIPTION_SK_PREFIX}{opaque}")


def dead_letters_pk(webhook_id: str) -> str:
    tenant, opaque = webhook_id.split("/", 1)
    return f"T#{tenant}#WH#{opaque}"



def _code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


class WebhookStore:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def put(self, record: dict[str, Any], secret_version: str, limit: int) -> None:
        """Store a new subscription, unless the tenant already holds `limit` (403 interlude.quota_exceeded)."""
        webhook_id = record["webhookId"]
        tenant = tenant_of(webhook_id)
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": {
                                **subscription_key(webhook_id),
                                "record": a.as_json(record),
                                SECRET_VERSION: a.s(secret_version),
                            },
                            "ConditionExpression": "attribute_not_exists(sk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": a.key(tenant_pk(tenant), COUNT_SK),
                            "UpdateExpression": "ADD n :one",
                            "ConditionExpression": "attribute_not_exists(n) OR n < :limit",
                            "ExpressionAttributeValues": {":one": a.n(1), ":limit": a.n(limit)},
                        }
                    },
                ]
            )
        except ClientError as exc:
            if _code(exc) != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            if len(reasons) > 1 and reasons[1].get("Code") == "ConditionalCheckFailed":
                raise quota_exceeded(
                    "webhooks", limit, f"the tenant holds {limit} webhook subscriptions, its limit"
                ) from None
            raise

    def get(self, webhook_id: str) -> dict[str, Any] | None:
        """The subscription's record, with `secretVersion` (the secret's version in force) when the item names one."""
        got = self.client.get_item(TableName=self.table, Key=subscription_key(webhook_id), ConsistentRead=True)
        item = got.get("Item")
        if not item:
            return None
        record = dict(a.unpacked(item["record"]))
        if SECRET_VERSION in item:
            record["secretVersion"] = item[SECRET_VERSION]["S"]
        return record

    def move_secret_version(self, webhook_id: str, version: str, expected: str | None) -> bool:
        """Name `version` as the secret in force, if the subscription still names `expected` (None: none); False when
        it is gone or another rotation moved it first."""
        condition = f"attribute_exists(sk) AND {SECRET_VERSION} = :expected"
        values = {":version": a.s(version)}
        if expected is None:
            condition = f"attribute_exists(sk) AND attribute_not_exists({SECRET_VERSION})"
        else:
            values[":expected"] = a.s(expected)
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=subscription_key(webhook_id),
            UpdateExpression=f"SET {SECRET_VERSION} = :version",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        ) is not None

    def of_tenant(self, tenant: str, consistent: bool = False) -> list[dict[str, Any]]:
        """Every subscription of the tenant (at most the limit: one page); `consistent`: every one whose creation
        returned, none whose deletion did."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": a.s(tenant_pk(tenant)), ":prefix": a.s(SUBSCRIPTION_SK_PREFIX)},
            ConsistentRead=consistent,
        )
        return [a.unpacked(item["record"]) for page in pages for item in page.get("Items") or []]

    def delete(self, webhook_id: str) -> dict[str, Any] | None:
        """Remove the subscription (and count it out); None when there was none."""
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Delete": {
                            "TableName": self.table,
                            "Key": subscription_key(webhook_id),
                            "ConditionExpression": "attribute_exists(sk)",
                            "ReturnValuesOnConditionCheckFailure": "NONE",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": a.key(tenant_pk(tenant_of(webhook_id)), COUNT_SK),
                            "UpdateExpression": "ADD n :minus",
                            "ExpressionAttributeValues": {":minus": a.n(-1)},
                        }
                    },
                ]
            )
        except ClientError as exc:
            if _code(exc) == "TransactionCanceledException":
                return None
            raise
        return {"webhookId": webhook_id}

    def put_dead_letter(self, record: dict[str, Any]) -> None:
        """The listing's record, then its index by delivery id (a crash between leaves a record the retry finds by
        walking the listing, as one written before indexes were)."""
        for item in self._dead_letter_items(record):
            self.client.put_item(TableName=self.table, Item=item)

    def dead_letter_puts(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """The TransactWriteItems entries that put a dead letter and its index back (a replay undone)."""
        return [{"Put": {"TableName": self.table, "Item": item}} for item in self._dead_letter_items(record)]

    def _dead_letter_items(self, record: dict[str, Any]) -> list[a.Item]:
        pk = dead_letters_pk(record["webhookId"])
        opaque = record["deliveryId"].split("/", 1)[1]
        listed = f"{DEAD_LETTER_SK_PREFIX}{record['deadLetteredAt']}#{opaque}"
        ttl = a.n(int(epoch_of(record["expiresAt"])))
        item = {**a.key(pk, listed), "record": a.as_json(record), wiring.TTL_ATTRIBUTE: ttl}
        index = {**a.key(pk, DEAD_LETTER_INDEX_PREFIX + opaque), "at": a.s(listed), wiring.TTL_ATTRIBUTE: ttl}
        return [item, index]

    def dead_letter(self, webhook_id: str, delivery_id: str, now_iso: str) -> tuple[dict[str, Any], str] | None:
        """A dead letter of the subscription by its delivery id, and its listing's sort key; None when there is none
        (never dead-lettered, replayed since, or expired)."""
        pk = dead_letters_pk(webhook_id)
        opaque = delivery_id.split("/", 1)[1]
        got = self.client.get_item(
            TableName=self.table, Key=a.key(pk, DEAD_LETTER_INDEX_PREFIX + opaque), ConsistentRead=True
        ).get("Item")
        if got is not None:
            listed = self.client.get_item(TableName=self.table, Key=a.key(pk, got["at"]["S"]), ConsistentRead=True)
            item = listed.get("Item")
        else:
            item = self._unindexed(pk, delivery_id)
        if item is None:
            return None
        record = dict(a.unpacked(item["record"]))
        return (record, item[wiring.SORT_KEY]["S"]) if record["expiresAt"] > now_iso else None

    def _unindexed(self, pk: str, delivery_id: str) -> dict[str, Any] | None:
        query: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "FilterExpression": "contains(#record, :delivery)",
            "ExpressionAttributeNames": {"#record": "record"},
            "ExpressionAttributeValues": {
                ":pk": a.s(pk),
                ":prefix": a.s(DEAD_LETTER_SK_PREFIX),
                ":delivery": a.s(f'"deliveryId":"{delivery_id}"'),
            },
            "ScanIndexForward": False,
        }
        for _ in range(UNINDEXED_PAGES):
            got = self.client.query(**query)
            if got.get("Items"):
                return dict(got["Items"][0])
            if "LastEvaluatedKey" not in got:
                break
            query["ExclusiveStartKey"] = got["LastEvaluatedKey"]
        return None

    def dead_letter_deletes(self, webhook_id: str, listed_sk: str) -> list[dict[str, Any]]:
        """The TransactWriteItems entries that take a dead letter and its index out of the listing."""
        pk = dead_letters_pk(webhook_id)
        opaque = listed_sk.rsplit("#", 1)[1]
        return [
            {"Delete": {"TableName": self.table, "Key": a.key(pk, listed_sk)}},
            {"Delete": {"TableName": self.table, "Key": a.key(pk, DEAD_LETTER_INDEX_PREFIX + opaque)}},
        ]

    def dead_letters_between(
        self, webhook_id: str, since: str, until: str, after_sk: str | None, limit: int
    ) -> tuple[list[tuple[dict[str, Any], str]], str | None]:
        """Dead letters with since <= deadLetteredAt <= until, oldest first, after `after_sk`: (record, sort key)
        pairs and where the next page starts (None: none left)."""
        pk = dead_letters_pk(webhook_id)
        query = {**self._window(pk, since, until), "Limit": limit, "ConsistentRead": True}
        if after_sk is not None:
            query["ExclusiveStartKey"] = a.key(pk, after_sk)
        got = self.client.query(**query)
        items = [(dict(a.unpacked(i["record"])), i[wiring.SORT_KEY]["S"]) for i in got.get("Items") or []]
        last = got.get("LastEvaluatedKey")
        return items, (last[wiring.SORT_KEY]["S"] if last else None)

    def count_dead_letters(self, webhook_id: str, since: str, until: str, cap: int) -> int:
        """How many dead letters lie between since and until, counted up to `cap` + 1 (enough to refuse past it)."""
        return count_up_to(self.client, self._window(dead_letters_pk(webhook_id), since, until), cap)

    def _window(self, pk: str, since: str, until: str) -> dict[str, Any]:
        """A Query of the dead letters with since <= deadLetteredAt <= until (their sort keys start with it)."""
        return {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": a.s(pk),
                ":lo": a.s(DEAD_LETTER_SK_PREFIX + since),
                ":hi": a.s(DEAD_LETTER_SK_PREFIX + until + "~"),
            },
        }

    def dead_letters(
        self, webhook_id: str, limit: int, cursor: str | None, now_iso: str
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the subscription's dead letters, newest first; a cursor of another subscription: ValueError."""
        pk = dead_letters_pk(webhook_id)
        query: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": a.s(pk), ":prefix": a.s(DEAD_LETTER_SK_PREFIX)},
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if cursor is not None:
            query["ExclusiveStartKey"] = a.key(pk, _decode_cursor(cursor, pk))
        got = self.client.query(**query)
        # TTL deletes lag; a record past its expiresAt is no longer served.
        records = [
            r for r in (a.unpacked(item["record"]) for item in got.get("Items") or []) if r["expiresAt"] > now_iso
        ]
        last = got.get("LastEvaluatedKey")
        return records, (_encode_cursor(pk, last[wiring.SORT_KEY]["S"]) if last else None)

    def read_event(self, run_id: str, sequence: int) -> dict[str, Any] | None:
        """The persisted RunEventDoc of `sequence` (its batch is the first keyed at or after it), or None."""
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(run_pk(run_id)),
                ":lo": a.s(event_sk(sequence)),
                ":hi": a.s(event_sk(10**12 - 1)),
            },
            Limit=1,
        )
        for item in got.get("Items") or []:
            for event in a.unpacked(item["events"]):
                if event.get("sequence") == sequence:
                    # The run model loads with a replay's read, not at the callbacks worker's cold start.
                    from interlude.store.head_parts import filled_events

                    return filled_events(self.client, self.table, run_id, [dict(event)])[0]
        return None


def _encode_cursor(pk: str, sk: str) -> str:
    raw = json.dumps({"pk": pk, "sk": sk}, separators=(",", ":"), allow_nan=False)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, pk: str) -> str:
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError):
        raise ValueError("not a cursor") from None
    if not isinstance(plain, dict) or plain.get("pk") != pk or not isinstance(plain.get("sk"), str):
        raise ValueError("a cursor of another listing")
    return str(plain["sk"])
