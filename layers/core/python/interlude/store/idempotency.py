"""Idempotency-Key records (OpenWOP idempotency.md Layer 1) in the single table (design §4).

Item: pk `T#{tenant}#IDEM#{endpoint}#{key}`, sk `IDEM`, attributes
  digest      sha256 of the request (operation, path parameters, raw body), hex
  status      `INPROGRESS` while the first request runs, `COMPLETED` once its final response is stored
  owner       random token of the request holding the claim (only the owner completes or releases it)
  leaseUntil  epoch milliseconds; an `INPROGRESS` claim past it belongs to a request that died
  response    JSON {status, headers, body} of the final response (COMPLETED only)
  ttl         epoch seconds (wiring.TTL_ATTRIBUTE); records are kept at least RETENTION_SECONDS

Two ways to write a record:
* committed with the effect (`record_put`): a route whose effect is one TransactWriteItems (create-run,
  resolve, cancel, key creation) puts the record, already `COMPLETED` with its final answer, in that same
  transaction. Its condition is the claim's, so of two concurrent duplicates exactly one commits; the other's
  transaction is cancelled and `_transact` raises `KeyAlreadyUsed` with the winner's record. An answer lost
  after the commit is therefore never lost: the record is there, and the retry replays it. No lease.
* claim, then store (`claim`/`complete`/`release`): for routes whose effect is not one transaction. The claim
  is one conditional PutItem: it wins when no live record exists (absent, past its TTL but not yet swept, or an
  in-flight claim whose lease ran out) and otherwise returns the existing record
  (`ReturnValuesOnConditionCheckFailure=ALL_OLD`) without another read.
Keys are never logged.
"""

import json
import secrets
from typing import Any, NamedTuple, cast

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.table import conditionally

RETENTION_SECONDS = 24 * 3600
SORT_KEY = "IDEM"
IN_PROGRESS = "INPROGRESS"
COMPLETED = "COMPLETED"


def record_pk(tenant: str, endpoint: str, key: str) -> str:
    return f"T#{tenant}#IDEM#{endpoint}#{key}"


# Who may write a record: nobody holds it, it is past its retention but not yet swept, or its holder's lease ran out.
_FREE = "attribute_not_exists(#pk) OR #ttl < :now_s OR (#status = :inprogress AND #lease < :now_ms)"
_FREE_NAMES = {"#pk": wiring.PARTITION_KEY, "#ttl": wiring.TTL_ATTRIBUTE, "#status": "status", "#lease": "leaseUntil"}


def _free_values(now_ms: int) -> dict[str, dict[str, str]]:
    return {":now_s": a.n(now_ms // 1000), ":now_ms": a.n(now_ms), ":inprogress": a.s(IN_PROGRESS)}


class CachedResponse(NamedTuple):
    status: int
    headers: dict[str, Any]
    body: str
    is_base64: bool = False
    # Each Set-Cookie the answer sent (a console sign-in's session, a sign-out's clearing), as sent; kept only when
    # there is one, and read as none from a record without (one 0.10.0 kept, or 0.10.0 reading this one: as before).
    cookies: tuple[str, ...] = ()
    # The body encrypted (base64 of nonce and ciphertext) under the key of the credential that asked: a credential
    # route's answer (api/idempotency.py, docs/adr/0188). Only records under a key's own namespace, which no earlier
    # release reads, are.
    encrypted: bool = False

    def to_json(self) -> str:
        doc: dict[str, Any] = {"status": self.status, "headers": self.headers, "body": self.body, "isBase64": self.is_base64}
        if self.cookies:
            doc["cookies"] = list(self.cookies)
        if self.encrypted:
            doc["encrypted"] = True
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)

    @staticmethod
    def from_json(text: str) -> "CachedResponse":
        doc = json.loads(text)
        cookies = tuple(str(c) for c in doc.get("cookies") or ())
        return CachedResponse(
            int(doc["status"]),
            dict(doc["headers"]),
            doc["body"],
            bool(doc.get("isBase64")),
            cookies,
            bool(doc.get("encrypted")),
        )


class Claim(NamedTuple):
    """This request holds the record and must complete or release it."""

    pk: str
    owner: str


class Existing(NamedTuple):
    """Another request holds (or held) the record."""

    digest: str
    completed: CachedResponse | None  # None while that request is still in flight


class IdempotencyKey(NamedTuple):
    """A request's Idempotency-Key in its namespace (tenant, or a token's capability), with its request digest."""

    namespace: str
    operation: str
    key: str
    digest: str

    @property
    def pk(self) -> str:
        return record_pk(self.namespace, self.operation, self.key)


class AnsweredRecord(NamedTuple):
    """A record and the final answer to its request, written once, together with the effect (or after a refusal)."""

    key: IdempotencyKey
    answer: CachedResponse
    now_ms: int

    def item(self) -> a.Item:
        return {
            **a.key(self.key.pk, SORT_KEY),
            "digest": a.s(self.key.digest),
            "status": a.s(COMPLETED),
            "response": a.s(self.answer.to_json()),
            wiring.TTL_ATTRIBUTE: a.n(self.now_ms // 1000 + RETENTION_SECONDS),
        }


def record_put(record: AnsweredRecord) -> dict[str, Any]:
    """The TransactWriteItem `Put` that commits a record with its answer, on the claim's condition."""
    return {
        "Item": record.item(),
        "ConditionExpression": _FREE,
        "ExpressionAttributeNames": dict(_FREE_NAMES),
        "ExpressionAttributeValues": _free_values(record.now_ms),
    }


def existing_of(old: dict[str, Any] | None, digest: str) -> Existing:
    """The record a lost condition returned (plain attributes); None (vanished meanwhile) reads as in flight."""
    if old is None:
        return Existing(digest=digest, completed=None)
    completed = (
        CachedResponse.from_json(old["response"]) if old.get("status") == COMPLETED and "response" in old else None
    )
    return Existing(digest=str(old["digest"]), completed=completed)


class KeyAlreadyUsed(Exception):
    """A transaction carrying a record lost to another request with the same key; `existing` is that request's."""

    def __init__(self, existing: Existing) -> None:
        super().__init__("the Idempotency-Key was taken by another request")
        self.existing = existing


class IdempotencyStore:
    def __init__(self, table_name: str, client: Any) -> None:
        self.table = table_name
        self.client = client

    def claim(
        self, tenant: str, endpoint: str, key: str, digest: str, *, now_ms: int, lease_ms: int
    ) -> Claim | Existing:
        pk = record_pk(tenant, endpoint, key)
        owner = secrets.token_urlsafe(12)
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    **a.key(pk, SORT_KEY),
                    "digest": a.s(digest),
                    "status": a.s(IN_PROGRESS),
                    "owner": a.s(owner),
                    "leaseUntil": a.n(now_ms + lease_ms),
                    wiring.TTL_ATTRIBUTE: a.n(now_ms // 1000 + RETENTION_SECONDS),
                },
                ConditionExpression=_FREE,
                ExpressionAttributeNames=_FREE_NAMES,
                ExpressionAttributeValues=_free_values(now_ms),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            # ReturnValuesOnConditionCheckFailure puts the old item in the error response; botocore-stubs'
            # ClientError response does not declare it.
            old = cast("dict[str, dict[str, str]] | None", exc.response.get("Item"))
            return existing_of(a.plain(old) if old else None, digest)
        return Claim(pk=pk, owner=owner)

    def find(self, key: IdempotencyKey, *, now_ms: int) -> Existing | None:
        """The live record under `key` (one strongly consistent GetItem), or None when the key is free."""
        got = self.client.get_item(TableName=self.table, Key=a.key(key.pk, SORT_KEY), ConsistentRead=True)
        item = got.get("Item")
        if not item:
            return None
        old = a.plain(item)
        if int(old.get(wiring.TTL_ATTRIBUTE, 0)) < now_ms // 1000:
            return None
        if old.get("status") == IN_PROGRESS and int(old.get("leaseUntil", 0)) < now_ms:
            return None
        return existing_of(old, key.digest)

    def store_answer(self, record: AnsweredRecord) -> Existing | None:
        """Store a final answer that had no effect to commit with (a refusal); the winner's record if one exists."""
        try:
            self.client.put_item(
                TableName=self.table, **record_put(record), ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            old = cast("dict[str, dict[str, str]] | None", exc.response.get("Item"))
            return existing_of(a.plain(old) if old else None, record.key.digest)
        return None

    def complete(self, claim: Claim, response: CachedResponse, *, now_ms: int) -> bool:
        """Store the final response; False if this request no longer owns the claim (its lease was taken)."""
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(claim.pk, SORT_KEY),
            UpdateExpression="SET #status = :completed, #response = :response, #ttl = :ttl REMOVE #lease",
            ConditionExpression="#owner = :owner AND #status = :inprogress",
            ExpressionAttributeNames={
                "#status": "status",
                "#response": "response",
                "#ttl": wiring.TTL_ATTRIBUTE,
                "#lease": "leaseUntil",
                "#owner": "owner",
            },
            ExpressionAttributeValues={
                ":completed": a.s(COMPLETED),
                ":inprogress": a.s(IN_PROGRESS),
                ":response": a.s(response.to_json()),
                ":ttl": a.n(now_ms // 1000 + RETENTION_SECONDS),
                ":owner": a.s(claim.owner),
            },
        ) is not None

    def release(self, claim: Claim) -> None:
        """Drop an in-flight claim whose outcome is not cached, so a retry with the same key executes."""
        conditionally(
            self.client.delete_item,
            TableName=self.table,
            Key=a.key(claim.pk, SORT_KEY),
            ConditionExpression="#owner = :owner AND #status = :inprogress",
            ExpressionAttributeNames={"#owner": "owner", "#status": "status"},
            ExpressionAttributeValues={":owner": a.s(claim.owner), ":inprogress": a.s(IN_PROGRESS)},
        )
