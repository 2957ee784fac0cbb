"""Play the DynamoDB stream → `stream` event source mapping that moto does not run.

Same filter and batch size as the deployed mapping (from wiring); records whose processing the handler
reports as failed are delivered again, up to the mapping's retry limit.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.local import LOCAL_REGION
from interlude.local.lambda_runtime import invoke
from interlude.local.pump import DYNAMODB, Pump
from interlude.store.stream import is_event_insert

# The function the table stream invokes (one only: interlude_cdk refuses two).
STREAM_READER = next(fn.name for fn in wiring.FUNCTIONS if fn.reads_stream)


# Only a write to the table makes a stream record, and moto's server wakes this pump on each: idle, it need not look
# twice a second (what time alone brings, a queue's message visible again or a schedule due, the other pumps find).
STREAM_IDLE_MAX_S = 10.0


class StreamPump(Pump):
    def __init__(self, table_name: str, interval_s: float = 0.05) -> None:
        super().__init__("stream-pump", interval_s, backs_off=True, carries=DYNAMODB, idle_max_s=STREAM_IDLE_MAX_S)
        self.table_name = table_name
        self.streams = boto3.client("dynamodbstreams")
        self.dynamodb = boto3.client("dynamodb")
        self._arn: str | None = None
        # The stream's shards, described once: a local table's stream keeps its one shard (described again if a
        # shard's iterator is refused).
        self._shards: list[str] = []
        self._iterators: dict[str, str | None] = {}
        self._retries: dict[str, int] = {}
        self.delivered = 0

    def pump_once(self) -> int:
        if self._arn is None:
            self._arn = self.dynamodb.describe_table(TableName=self.table_name)["Table"]["LatestStreamArn"]
        arn = self._arn
        if not self._shards:
            self._shards = [
                s["ShardId"] for s in self.streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
            ]
        moved = 0
        for sid in self._shards:
            # A fresh iterator after the last sequence seen, every poll: moto restores a deep copy of the table
            # (its stream shard included) when a transaction is cancelled, which orphans any iterator kept
            # from before, so a kept NextShardIterator would stop seeing records after the first lost race.
            last = self._iterators.get(sid)
            position = (
                {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": last}
                if last
                else {"ShardIteratorType": "TRIM_HORIZON"}
            )
            try:
                iterator = self.streams.get_shard_iterator(StreamArn=arn, ShardId=sid, **position)["ShardIterator"]
            except ClientError:
                self._shards = []
                raise
            got = self.streams.get_records(ShardIterator=iterator, Limit=wiring.STREAM_BATCH_SIZE)
            all_records = got.get("Records", [])
            records = [r for r in all_records if is_event_insert(r)]
            if records:
                self._deliver(arn, records)
                moved += len(records)
            if all_records:
                self._iterators[sid] = all_records[-1]["dynamodb"]["SequenceNumber"]
        return moved

    def _deliver(self, arn: str, records: list[dict[str, Any]]) -> None:
        pending = [
            {**r, "eventSourceARN": arn, "eventSource": "aws:dynamodb", "awsRegion": LOCAL_REGION} for r in records
        ]
        while pending:
            result = invoke(STREAM_READER, {"Records": pending}) or {}
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            self.delivered += len(pending) - len(failed)
            retry = []
            for record in pending:
                seq = record["dynamodb"].get("SequenceNumber", "")
                if seq in failed:
                    self._retries[seq] = self._retries.get(seq, 0) + 1
                    if self._retries[seq] <= wiring.STREAM_MAX_RETRIES:
                        retry.append(record)
            pending = retry
