"""The deadlines' due index (ADR 0132): the deadlines due in one second, spread over a few shards, each shard's in one
partition that one bucket schedule's invocation reads, so Scheduler invokes `timeouts` per second and shard, not per
deadline.

  due item   DL#{dueSecond}#{shard:02d}   {tenant}#{run}#{occurrence}   `deadline`: the input a schedule of the
                                                                       deadline's own would carry (Deadline.as_input),
                                                                       v 8, ttl past its schedule's last retry
                                                                       and dead-letter stay

`dueSecond` is the deadline rounded up to the second (never early: the bucket's schedule is `at(dueSecond)`), the shard
a stable hash of the sort key. An item is written once, a plain Put (1 WRU: rewriting it is harmless), and never
deleted: a deadline settled first (a person decided, the run ended) is found settled when its bucket fires, and
applying it is then a no-op (Runs.fire_deadline decides from the run head, conditionally). Its ttl outlasts the bucket
schedule's retries and its dead letter, so an invocation retried or sent again still finds every item.
"""

from __future__ import annotations

import math
from typing import Any

from interlude import wiring
from interlude.domain.formats import DEADLINE_BUCKETS, FORMAT_FIELD
from interlude.store import attributes as a
from interlude.store.item_index import shard_of

DUE_PK_PREFIX = "DL#"
DEADLINE_ATTRIBUTE = "deadline"
# A due item outlives its bucket's schedule's retries (Scheduler gives up after max_event_age_s) and then its input's
# stay in the dead-letter queue, so a bucket invoked again from there still finds every deadline it lists.
KEPT_PAST_DUE_S = wiring.SCHEDULE_INPUT_KEPT_S


def due_second(due: float) -> int:
    """The second a deadline's bucket fires at: its due time rounded up, so it never fires before the deadline."""
    return math.ceil(due)


def due_pk(second: int, shard: int) -> str:
    return f"{DUE_PK_PREFIX}{second}#{shard:02d}"


def due_sk(run_id: str, occurrence: str) -> str:
    tenant, run = run_id.split("/", 1)
    return f"{tenant}#{run}#{occurrence}"


def bucket_of(run_id: str, occurrence: str, due: float) -> tuple[int, int]:
    """(dueSecond, shard): the bucket a deadline is listed in."""
    return due_second(due), shard_of(due_sk(run_id, occurrence), wiring.DUE_INDEX_SHARDS)


class DueIndex:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def put(self, run_id: str, occurrence: str, deadline: dict[str, Any]) -> tuple[int, int]:
        """List a deadline (its schedule input, naming `run_id` and its `due`) under its second; answers the bucket it
        went in, (dueSecond, shard). `occurrence` names the deadline within its run (the same one always maps to the
        same item)."""
        second, shard = bucket_of(run_id, occurrence, float(deadline["due"]))
        self.client.put_item(
            TableName=self.table,
            Item={
                **a.key(due_pk(second, shard), due_sk(run_id, occurrence)),
                DEADLINE_ATTRIBUTE: a.as_json(deadline),
                FORMAT_FIELD: a.n(DEADLINE_BUCKETS),
                wiring.TTL_ATTRIBUTE: a.n(second + KEPT_PAST_DUE_S),
            },
        )
        return second, shard

    def due(self, second: int, shard: int) -> list[dict[str, Any]]:
        """The inputs of every deadline listed in a bucket, every page. A consistent read: an item written before the
        bucket's second came is seen by its invocation."""
        out: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": a.s(due_pk(second, shard))},
            # With its format, so an item a later release wrote in a format this one does not read is refused
            # (store/item_formats.py), never misread.
            "ProjectionExpression": "#deadline, #v",
            "ExpressionAttributeNames": {"#deadline": DEADLINE_ATTRIBUTE, "#v": FORMAT_FIELD},
            "ConsistentRead": True,
        }
        while True:
            got = self.client.query(**kwargs)
            out.extend(a.unpacked(item[DEADLINE_ATTRIBUTE]) for item in got.get("Items") or ())
            if not got.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = got["LastEvaluatedKey"]
