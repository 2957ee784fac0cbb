"""The audit log's items: one hash chain per tenant, its head, its signed checkpoints.

  entry       T#{tenant}#AUDIT       A#{seq:012}   entry: the JSON document that is hashed (rules/audit.py)
  checkpoint  T#{tenant}#AUDIT       C#{at:012}    checkpoint id, atSequence, merkleRoot, signature, at
  head        T#{tenant}#AUDITHEAD   AUDITHEAD     seq, hash (of entry seq), checkpointSeq, pendingSince;
                                                   on the inbox index (gsi1pk AUDIT#PENDING#{shard}, gsi1sk
                                                   {tenant}) while an entry waits for a checkpoint

The head is the chain's single writer: an append writes the entry (never over an existing one) and moves the head
on condition that it still names the entry it read, in the same TransactWriteItems as the action it records, so
an action and its entry land together or not at all. A concurrent append that moved the head first makes the
transaction fail on the head alone; the append reads the head again and retries (APPEND_RETRIES). Entries live in
a partition of their own that is only ever Put into (every deployed role is denied UpdateItem and DeleteItem on it:
wiring.APPEND_ONLY_PARTITIONS); docs/scale.md has what the single head costs.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Iterator
from typing import Any

from interlude import wiring
from interlude.domain.audit import AuditDraft
from interlude.rules.audit import Head, canonical, entry_hash
from interlude.store import attributes as a

ENTRY_SK_PREFIX = "A#"
CHECKPOINT_SK_PREFIX = "C#"
HEAD_SK = "AUDITHEAD"
# How an append's two items are labelled among a transaction's items (a failed condition names its label).
ENTRY_LABEL = "AUDIT#ENTRY"
APPEND_LABELS = frozenset({HEAD_SK, ENTRY_LABEL})
# Heads waiting for a checkpoint are spread over this many index partitions (the sweep reads each).
PENDING_SHARDS = 8
# Appends that lose the head to a concurrent one are sent again this often before the action is refused as busy.
APPEND_RETRIES = 8


def log_pk(tenant: str) -> str:
    return f"T#{tenant}#AUDIT"


def head_pk(tenant: str) -> str:
    return f"T#{tenant}#AUDITHEAD"


def entry_sk(seq: int) -> str:
    return f"{ENTRY_SK_PREFIX}{seq:012d}"


def checkpoint_sk(at: int) -> str:
    return f"{CHECKPOINT_SK_PREFIX}{at:012d}"


def pending_shard(tenant: str) -> str:
    return f"AUDIT#PENDING#{zlib.crc32(tenant.encode()) % PENDING_SHARDS}"


def head_of(item: dict[str, Any] | None) -> Head:
    if not item:
        return Head()
    return Head(
        seq=int(item["seq"]["N"]),
        hash=item["hash"]["S"],
        checkpoint_seq=int(item["checkpointSeq"]["N"]) if "checkpointSeq" in item else 0,
        pending_since=float(item["pendingSince"]["N"]) if "pendingSince" in item else None,
    )


def append_items(draft: AuditDraft, head: Head, now_epoch: float) -> tuple[list[tuple[str, dict[str, Any]]], Head]:
    """The entry after `head` and the head's move to it, as labelled TransactWriteItems, and the head written."""
    seq = head.seq + 1
    entry = draft.entry(seq, head.hash)
    digest = entry_hash(entry)
    index = wiring.INBOX_INDEX
    values: dict[str, Any] = {
        ":seq": a.n(seq),
        ":hash": a.s(digest),
        ":now": a.n(round(now_epoch, 3)),
        ":gpk": a.s(pending_shard(draft.tenant)),
        ":gsk": a.s(draft.tenant),
    }
    if head.seq == 0:
        condition = "attribute_not_exists(seq)"
    else:
        condition = "seq = :prev"
        values[":prev"] = a.n(head.seq)
    move = {
        "Key": a.key(head_pk(draft.tenant), HEAD_SK),
        "UpdateExpression": "SET seq = :seq, #hash = :hash, pendingSince = if_not_exists(pendingSince, :now), "
        f"{index.partition_key} = :gpk, {index.sort_key} = :gsk",
        "ConditionExpression": condition,
        "ExpressionAttributeNames": {"#hash": "hash"},
        "ExpressionAttributeValues": values,
    }
    put = {
        "Item": {**a.key(log_pk(draft.tenant), entry_sk(seq)), "entry": a.s(canonical(entry).decode("utf-8"))},
        "ConditionExpression": "attribute_not_exists(sk)",
    }
    written = Head(seq, digest, head.checkpoint_seq, head.pending_since if head.pending_since is not None else now_epoch)
    return [(HEAD_SK, {"Update": move}), (ENTRY_LABEL, {"Put": put})], written


class AuditLog:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def head(self, tenant: str) -> Head:
        got = self.client.get_item(TableName=self.table, Key=a.key(head_pk(tenant), HEAD_SK), ConsistentRead=True)
        return head_of(got.get("Item"))

    def entries(self, tenant: str, first: int, last: int) -> Iterator[tuple[int, dict[str, Any]]]:
        """(sequence, entry) of the stored entries in [first, last], ascending, the sequence read from the item's key
        (a missing one is simply absent; one whose text is not JSON is {"unreadable": text})."""
        if last < first:
            return
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant)),
                ":lo": a.s(entry_sk(max(first, 0))),
                ":hi": a.s(entry_sk(last)),
            },
            ConsistentRead=True,
        )
        for page in pages:
            for item in page.get("Items") or []:
                yield int(item[wiring.SORT_KEY]["S"].removeprefix(ENTRY_SK_PREFIX)), _entry(item)

    def page(self, tenant: str, limit: int, before: int | None) -> tuple[list[dict[str, Any]], int | None]:
        """Newest first: up to `limit` entries below sequence `before` (all when None), and the next `before`."""
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant)),
                ":lo": a.s(entry_sk(0)),
                ":hi": a.s(entry_sk((before if before is not None else 10**12) - 1)),
            },
            ScanIndexForward=False,
            Limit=limit,
        )
        items = got.get("Items") or []
        entries = [_entry(item) for item in items]
        last = int(items[-1][wiring.SORT_KEY]["S"].removeprefix(ENTRY_SK_PREFIX)) if items else None
        return entries, (last if "LastEvaluatedKey" in got else None)

    def checkpoints(self, tenant: str, first: int, last: int) -> list[dict[str, Any]]:
        """Checkpoints with atSequence in [first, last], ascending."""
        if last < first:
            return []
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant)),
                ":lo": a.s(checkpoint_sk(max(first, 0))),
                ":hi": a.s(checkpoint_sk(last)),
            },
            ConsistentRead=True,
        )
        return [_checkpoint(item) for page in pages for item in page.get("Items") or []]

    def checkpoint_before(self, tenant: str, at: int) -> int:
        """The atSequence of the last checkpoint below `at`; 0 when there is none."""
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={
                ":pk": a.s(log_pk(tenant)),
                ":lo": a.s(checkpoint_sk(0)),
                ":hi": a.s(checkpoint_sk(max(at - 1, 0))),
            },
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items = got.get("Items") or []
        return int(items[0]["atSequence"]["N"]) if items else 0

    def put_checkpoint(self, tenant: str, head: Head, checkpoint: dict[str, Any], pending_since: float | None) -> bool:
        """Store a checkpoint and move the head's checkpointSeq to it; False when the head moved meanwhile (another
        checkpoint, or an append that this checkpoint would leave waiting without a pendingSince)."""
        at = int(checkpoint["atSequence"])
        values: dict[str, Any] = {":at": a.n(at), ":p": a.n(head.checkpoint_seq)}
        condition = "(checkpointSeq = :p OR attribute_not_exists(checkpointSeq))" if head.checkpoint_seq == 0 else "checkpointSeq = :p"
        index = wiring.INBOX_INDEX
        if pending_since is None:
            # Every entry anchored: the head leaves the pending index, unless an entry was appended meanwhile.
            update = f"SET checkpointSeq = :at REMOVE pendingSince, {index.partition_key}, {index.sort_key}"
            condition += " AND seq = :at"
        else:
            update = "SET checkpointSeq = :at, pendingSince = :since"
            values[":since"] = a.n(round(pending_since, 3))
        item = {
            **a.key(log_pk(tenant), checkpoint_sk(at)),
            "checkpoint": a.s(checkpoint["checkpoint"]),
            "atSequence": a.n(at),
            "merkleRoot": a.s(checkpoint["merkleRoot"]),
            "signature": a.s(checkpoint["signature"]),
            "at": a.s(checkpoint["at"]),
        }
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(sk)"}},
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": a.key(head_pk(tenant), HEAD_SK),
                            "UpdateExpression": update,
                            "ConditionExpression": condition,
                            "ExpressionAttributeValues": values,
                        }
                    },
                ]
            )
        except self.client.exceptions.TransactionCanceledException:
            return False
        return True

    def pending_tenants(self) -> Iterator[str]:
        """Tenants with an entry no checkpoint anchors yet (the periodic sweep's work list)."""
        index = wiring.INBOX_INDEX
        for shard in range(PENDING_SHARDS):
            pages = self.client.get_paginator("query").paginate(
                TableName=self.table,
                IndexName=index.name,
                KeyConditionExpression="#gpk = :gpk",
                ExpressionAttributeNames={"#gpk": index.partition_key},
                ExpressionAttributeValues={":gpk": a.s(f"AUDIT#PENDING#{shard}")},
            )
            for page in pages:
                for item in page.get("Items") or []:
                    yield item[index.sort_key]["S"]


def _entry(item: dict[str, Any]) -> dict[str, Any]:
    text = item["entry"]["S"]
    try:
        entry = json.loads(text)
    except ValueError:
        return {"unreadable": text}
    return entry if isinstance(entry, dict) else {"unreadable": text}


def _checkpoint(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "checkpoint": item["checkpoint"]["S"],
        "atSequence": int(item["atSequence"]["N"]),
        "merkleRoot": item["merkleRoot"]["S"],
        "signature": item["signature"]["S"],
        "at": item["at"]["S"],
    }


def encode_before(seq: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"before": seq}, allow_nan=False).encode()).decode().rstrip("=")


def decode_before(cursor: str) -> int | None:
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError):
        return None
    if not isinstance(plain, dict) or set(plain) != {"before"} or type(plain["before"]) is not int or plain["before"] < 1:
        return None
    return int(plain["before"])
