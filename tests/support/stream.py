"""A moto table's stream, delivered to the real dispatch handler the way the event source mapping would."""

from __future__ import annotations

from typing import Any

import boto3

from interlude.local import lambda_runtime


def stream_records(table: str, after: str | None = None, clients: tuple[Any, Any] | None = None) -> list[dict]:
    """Every record on the table's stream so far (only those after sequence number `after`, when given), shaped as
    the mapping hands them to dispatch. `clients`: (dynamodbstreams, dynamodb) to reuse instead of making new ones."""
    streams, dynamodb = clients or (boto3.client("dynamodbstreams"), boto3.client("dynamodb"))
    arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        position = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
            if after
            else {"ShardIteratorType": "TRIM_HORIZON"}
        )
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], **position)
        iterator = it["ShardIterator"]
        # A read answers at most 1,000 records: follow the shard until it has no more.
        while iterator and (got := streams.get_records(ShardIterator=iterator, Limit=1000))["Records"]:
            records += got["Records"]
            iterator = got.get("NextShardIterator")
    return [{**r, "eventSourceARN": arn} for r in records]


class Stream:
    """Remembers which records it has handed over, so each pump delivers only what is new."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.seen: set[str] = set()
        self._clients: tuple[Any, Any] | None = None

    def clients(self) -> tuple[Any, Any]:
        # Made once per stream: a boto3 client costs ≈ 20 ms of CPU to build, and a pump reads the stream often.
        if self._clients is None:
            self._clients = (boto3.client("dynamodbstreams"), boto3.client("dynamodb"))
        return self._clients

    def take(self, again: bool = False) -> list[dict]:
        """The records not taken yet (every record when `again`), now marked as taken."""
        # Read on from the last record taken: moto answers slowly per record, and a world's stream grows long.
        after = None if again or not self.seen else max(self.seen, key=int)
        fresh = [r for r in stream_records(self.table, after, self.clients()) if again or r["dynamodb"]["SequenceNumber"] not in self.seen]
        self.seen.update(r["dynamodb"]["SequenceNumber"] for r in fresh)
        return fresh

    def pump(self, again: bool = False) -> list[dict]:
        """Deliver the new records (even none) to the real dispatch handler; it must fail none."""
        fresh = self.take(again)
        assert lambda_runtime.invoke("dispatch", {"Records": fresh}) == {"batchItemFailures": []}
        return fresh

    def settle(self, rounds: int = 20) -> None:
        """Deliver every new record, then every record again (at-least-once), until nothing new appears."""
        for _ in range(rounds):
            fresh = self.take()
            if not fresh:
                return
            for records in (fresh, self.take(again=True)):
                assert lambda_runtime.invoke("dispatch", {"Records": records}) == {"batchItemFailures": []}
        raise AssertionError("the runs did not settle")
