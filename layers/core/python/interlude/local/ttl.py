"""The local stack's DynamoDB TTL: deletes the items whose TTL attribute has passed, which moto stores but never
deletes.

What the real service does (docs: "Using time to live"): an item whose `ttl` (epoch seconds, wiring.TTL_ATTRIBUTE)
lies in the past is deleted some time later, by the service, without consuming write capacity; the deletion reaches the
table's stream as a REMOVE record. Here the time is the process clock (interlude.domain.clock, so `interlude clock
advance` and a test's clock file count), and the table is swept a bounded slice at a time: each tick reads at most
PAGES_PER_TICK pages of PAGE_ITEMS items of a Scan, going on where the last tick stopped and starting over at the
table's end, so a large local table costs each tick the same (a pass over it takes more ticks: an item is deleted
within a pass, as the service deletes within days). A deployment's two tables (wiring.TABLES) are swept one after the
other, a pass being one over both. Each expired item is deleted conditionally (an item whose ttl was
renewed meanwhile stays, as it would), and moto's stream records the REMOVE. The stream's filter (wiring.STREAM_FILTER)
passes INSERTs only, so no function sees it, as deployed.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.domain import clock
from interlude.local.pump import Pump

# How often the local stack sweeps: the real service deletes within days; a minute is prompt enough to watch.
SWEEP_EVERY_S = 60.0
# What one tick reads at most: PAGES_PER_TICK Scan pages of PAGE_ITEMS items (issue 30: bounded, whatever the table).
PAGE_ITEMS = 500
PAGES_PER_TICK = 4
_NAMES = {"#pk": wiring.PARTITION_KEY, "#sk": wiring.SORT_KEY, "#ttl": wiring.TTL_ATTRIBUTE}


class TtlPump(Pump):
    """Sweeps each of `table_names` (a deployment's tables: wiring.TABLES) in turn; a pass is one over all of them."""

    def __init__(self, *table_names: str, interval_s: float = SWEEP_EVERY_S) -> None:
        super().__init__("ttl-pump", interval_s)
        self.table_names = table_names
        self.client = boto3.client("dynamodb")
        self.deleted = 0
        # The table the next tick's Scan reads and where in it it goes on (None: at its start), and the items read so
        # far.
        self.current = 0
        self.position: dict[str, Any] | None = None
        self.scanned = 0

    def pump_once(self) -> int:
        self.tick()
        return 0  # a tick a period, whatever it found (a pump that moved something would poll again at once)

    def tick(self, pages: int = PAGES_PER_TICK) -> int:
        """At most `pages` pages of the tables swept, from where the last tick stopped; how many items were deleted."""
        deleted = 0
        for _ in range(pages):
            found, more = self._page()
            deleted += found
            if not more:
                break  # the pass is whole: the next tick starts over
        return deleted

    def sweep(self) -> int:
        """A whole pass of the tables from the first's start (after a test moved the clock); how many were deleted."""
        self.current, self.position = 0, None
        deleted, more = self._page()
        while more:
            found, more = self._page()
            deleted += found
        return deleted

    def _page(self) -> tuple[int, bool]:
        """A page of the Scan from `position`, its expired items deleted: (how many, whether the pass goes on)."""
        now = {":now": {"N": str(int(clock.now().timestamp()))}}
        table = self.table_names[self.current]
        kwargs: dict[str, Any] = {
            "TableName": table,
            "FilterExpression": "#ttl < :now",
            "ProjectionExpression": "#pk, #sk",
            "ExpressionAttributeNames": _NAMES,
            "ExpressionAttributeValues": now,
            "Limit": PAGE_ITEMS,
        }
        if self.position is not None:
            kwargs["ExclusiveStartKey"] = self.position
        got = self.client.scan(**kwargs)
        self.position = got.get("LastEvaluatedKey")
        self.scanned += int(got.get("ScannedCount", 0))
        deleted = 0
        for item in got.get("Items") or []:
            try:
                self.client.delete_item(
                    TableName=table,
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
        if self.position is not None:
            return deleted, True
        self.current = (self.current + 1) % len(self.table_names)
        return deleted, self.current != 0
