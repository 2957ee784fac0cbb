"""The local stack's DynamoDB TTL: deletes the items whose TTL attribute has passed, which moto stores but never
deletes.

What the real service does (docs: "Using time to live"): an item whose `ttl` (epoch seconds, wiring.TTL_ATTRIBUTE)
lies in the past is deleted some time later, by the service, without consuming write capacity; the deletion reaches the
table's stream as a REMOVE record. Here the time is the process clock (interlude.domain.clock, so `interlude clock
advance` and a test's clock file count), a sweep is a Scan of the table for expired items and a conditional
DeleteItem of each (an item whose ttl was renewed meanwhile stays, as it would), and moto's stream records the
REMOVE. The stream's filter (wiring.STREAM_FILTER) passes INSERTs only, so no function sees it, as deployed.
"""

from __future__ import annotations

import boto3
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.domain import clock
from interlude.local.pump import Pump

# How often the local stack sweeps: the real service deletes within days; a minute is prompt enough to watch.
SWEEP_EVERY_S = 60.0
_NAMES = {"#pk": wiring.PARTITION_KEY, "#sk": wiring.SORT_KEY, "#ttl": wiring.TTL_ATTRIBUTE}


class TtlPump(Pump):
    def __init__(self, table_name: str, interval_s: float = SWEEP_EVERY_S) -> None:
        super().__init__("ttl-pump", interval_s)
        self.table_name = table_name
        self.client = boto3.client("dynamodb")
        self.deleted = 0

    def pump_once(self) -> int:
        self.sweep()
        return 0  # a sweep a period, whatever it found (a pump that moved something would poll again at once)

    def sweep(self) -> int:
        """Every item expired by now deleted; how many were."""
        now = {":now": {"N": str(int(clock.now().timestamp()))}}
        deleted = 0
        pages = self.client.get_paginator("scan").paginate(
            TableName=self.table_name,
            FilterExpression="#ttl < :now",
            ProjectionExpression="#pk, #sk",
            ExpressionAttributeNames=_NAMES,
            ExpressionAttributeValues=now,
        )
        for item in (item for page in pages for item in page.get("Items") or []):
            try:
                self.client.delete_item(
                    TableName=self.table_name,
                    Key=item,
                    ConditionExpression="#ttl < :now",
                    ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE},
                    ExpressionAttributeValues=now,
                )
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                continue  # renewed since the scan read it
            deleted += 1
        self.deleted += deleted
        return deleted
