"""A moto table's stream, delivered to the real dispatch handler as the outbox queue would deliver it.

Deployed, the `stream` function forwards each new event-log item to the outbox queue, whose messages invoke
`dispatch` (interlude.adapters.outbox_feed). `outbox_event` makes the SQS event those messages make, with the real
message of each record, so a test drives dispatch exactly as the queue would, without the hop through SQS
(tests/integration/test_outbox_fairness.py covers the hop and its fairness)."""

from __future__ import annotations

import functools
import json
from typing import Any

import boto3

from interlude.adapters.outbox_feed import message_group, queued
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import to_event_record
from interlude.store.stream import is_event_insert, record_run_id

OUTBOX_ARN = "arn:aws:sqs:us-east-1:123456789012:outbox"


def outbox_event(records: list[dict]) -> dict:
    """The SQS event the outbox queue hands dispatch for these stream records (the new event-log items among them):
    each message as the `stream` function queues it, its MessageId the record's sequence number (so a batch item
    failure names the record)."""
    messages = []
    for record in records:
        if not is_event_insert(record):
            continue
        body = queued(record)
        seq = record["dynamodb"]["SequenceNumber"]
        message = {
            "MessageId": seq,
            "ReceiptHandle": f"receipt-{seq}",
            "Body": json.dumps(body, separators=(",", ":")),
            "Attributes": {"MessageGroupId": message_group(body), "ApproximateReceiveCount": "1"},
        }
        messages.append(to_event_record(message, OUTBOX_ARN))
    return {"Records": messages}


def dispatch(records: list[dict]) -> dict:
    """Invoke the real dispatch handler with these stream records, as the outbox queue would; its answer (the queue
    invokes nothing for no message)."""
    event = outbox_event(records)
    return lambda_runtime.invoke("dispatch", event) if event["Records"] else {"batchItemFailures": []}


def stream_records(table: str, after: str | None = None, clients: tuple[Any, Any] | None = None) -> list[dict]:
    """Every record on the table's stream so far (only those after sequence number `after`, when given), shaped as
    the mapping hands them to dispatch. `clients`: (dynamodbstreams, dynamodb) to reuse instead of making new ones."""
    streams, dynamodb = clients or (boto3.client("dynamodbstreams"), boto3.client("dynamodb"))
    arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        records += shard_records(streams, arn, shard["ShardId"], after)
    return records


def shard_records(streams: Any, arn: str, shard_id: str, after: str | None) -> list[dict]:
    """The shard's records (after sequence number `after`, when given), shaped as the mapping hands them to dispatch."""
    position = (
        {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
        if after
        else {"ShardIteratorType": "TRIM_HORIZON"}
    )
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard_id, **position)["ShardIterator"]
    records = []
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
        assert dispatch(fresh) == {"batchItemFailures": []}
        return fresh

    def settle(self, rounds: int = 20) -> None:
        """Deliver every new record, then every record again (at-least-once), until no new event-log item appears (what
        else the outbox writes, such as delivery records, reaches no dispatch)."""
        for _ in range(rounds):
            fresh = self.take()
            if not any(is_event_insert(record) for record in fresh):
                return
            for records in (fresh, self.take(again=True)):
                assert dispatch(records) == {"batchItemFailures": []}
        raise AssertionError("the runs did not settle")


# What `dispatch_runs` read of each stream shard and has not handed over yet (records of runs no call named so far), and
# the last sequence number it read there, so that each call reads only what is new: moto answers slowly per record.
# Keyed by the shard's first sequence number too: the shared world drops a test's records by moving it on.
_unhanded: dict[tuple[str, str, str], tuple[str, list[dict]]] = {}


@functools.cache
def _stream_clients() -> tuple[Any, Any]:
    # A boto3 client costs ≈ 20 ms of CPU to build; moto serves each call from the account current at the call.
    return boto3.client("dynamodbstreams"), boto3.client("dynamodb")


def dispatch_runs(table: str, *run_ids: str) -> None:
    """Hand the runs' stream records not handed over yet by this function to the real dispatch handler, as one outbox
    batch; it must fail none. Its audit appender chains the decisions' and votes' entries they carry (docs/adr/0128):
    a test reads an action's entry after this, as a client reads it once its record is processed."""
    streams, dynamodb = _stream_clients()
    arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    fresh: list[dict] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        key = (arn, shard["ShardId"], shard["SequenceNumberRange"]["StartingSequenceNumber"])
        last, pending = _unhanded.get(key, ("", []))
        read = shard_records(streams, arn, shard["ShardId"], last or None)
        pending = pending + read
        last = read[-1]["dynamodb"]["SequenceNumber"] if read else last
        fresh += [r for r in pending if record_run_id(r) in run_ids]
        for stale in [k for k in _unhanded if k[:2] == key[:2] and k != key]:
            del _unhanded[stale]
        _unhanded[key] = (last, [r for r in pending if record_run_id(r) not in run_ids])
    assert dispatch(fresh) == {"batchItemFailures": []}
