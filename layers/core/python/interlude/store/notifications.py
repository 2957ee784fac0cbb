"""Notification records in the run's partition (issue 14): the log behind `GET /runs/{runId}/notifications`.

  notification   T#{tenant}#R#{run}   NT#{notificationId}   status queued|sending|pending|sent|skipped|dead,
                                                             attempts, leaseUntil, record (JSON: who, what, each
                                                             channel's outcome)

One item per (interrupt visit, recipient, purpose): the notification id is derived from them, so a stream record or
a schedule delivered twice names the same item, and a notification already settled is not sent again. A worker
claims an attempt (attempts + 1 and a lease, conditionally) before it sends, and settles it conditionally on its
claim still standing, like callback deliveries (store/deliveries.py). The item never starts with "E#", so the
stream filter never passes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from interlude.store import attributes as a
from interlude.store.dynamo import Store, run_pk

PREFIX = "NT#"
SETTLED = ("sent", "skipped", "dead")


@dataclass(frozen=True)
class NotificationClaim:
    outcome: str  # "claimed" | "done" (settled already) | "busy" (another worker holds it)
    attempt: int = 0
    retry_in_s: int = 0
    # The record as the previous attempt left it (channels already sent are not sent again).
    record: dict[str, Any] | None = None


class NotificationStore:
    def __init__(self, store: Store) -> None:
        self.client = store.client
        self.table = store.table

    def get(self, run_id: str, notification_id: str) -> dict[str, Any] | None:
        got = self.client.get_item(
            TableName=self.table, Key=a.key(run_pk(run_id), PREFIX + notification_id), ConsistentRead=True
        )
        item = got.get("Item")
        if not item:
            return None
        plain = a.plain({k: v for k, v in item.items() if k != "record"})
        plain["record"] = a.unpacked(item["record"]) if "record" in item else {}
        return plain

    def claim(self, run_id: str, notification_id: str, record: dict[str, Any], now: float, lease_s: float) -> NotificationClaim:
        current = self.get(run_id, notification_id)
        if current is not None:
            if current.get("status") in SETTLED:
                return NotificationClaim("done", attempt=int(current.get("attempts", 0)))
            lease = float(current.get("leaseUntil", 0))
            if current.get("status") == "sending" and lease > now:
                return NotificationClaim("busy", retry_in_s=int(lease - now) + 1)
        previous = int(current.get("attempts", 0)) if current else 0
        kept = current["record"] if current and current.get("record") else record
        update: dict[str, Any] = {
            "TableName": self.table,
            "Key": a.key(run_pk(run_id), PREFIX + notification_id),
            "UpdateExpression": "SET #st = :sending, attempts = :attempt, leaseUntil = :lease, #rec = :record",
            "ExpressionAttributeNames": {"#st": "status", "#rec": "record"},
            "ExpressionAttributeValues": {
                ":sending": a.s("sending"),
                ":attempt": a.n(previous + 1),
                ":lease": a.n(round(now + lease_s, 3)),
                ":record": a.as_json(kept),
            },
        }
        if current is None:
            update["ConditionExpression"] = "attribute_not_exists(sk)"
        else:
            update["ConditionExpression"] = "attempts = :previous AND #st IN (:pending, :sending)"
            update["ExpressionAttributeValues"].update({":previous": a.n(previous), ":pending": a.s("pending")})
        try:
            self.client.update_item(**update)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return NotificationClaim("busy", retry_in_s=1)
        return NotificationClaim("claimed", attempt=previous + 1, record=kept)

    def settle(self, run_id: str, notification_id: str, attempt: int, record: dict[str, Any], status: str) -> bool:
        """Write the attempt's record and status (pending, sent, skipped or dead) if this worker's claim stands."""
        try:
            self.client.update_item(
                TableName=self.table,
                Key=a.key(run_pk(run_id), PREFIX + notification_id),
                UpdateExpression="SET #st = :status, #rec = :record REMOVE leaseUntil",
                ConditionExpression="attempts = :attempt AND #st = :sending",
                ExpressionAttributeNames={"#st": "status", "#rec": "record"},
                ExpressionAttributeValues={
                    ":status": a.s(status),
                    ":record": a.as_json(record),
                    ":attempt": a.n(attempt),
                    ":sending": a.s("sending"),
                },
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def of_run(self, run_id: str) -> list[dict[str, Any]]:
        """Every notification of a run (status, attempts, record), in notification-id order."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":prefix": a.s(PREFIX)},
            ConsistentRead=True,
        )
        out = []
        for page in pages:
            for item in page.get("Items") or []:
                out.append(
                    {
                        "status": item["status"]["S"],
                        "attempts": int(item["attempts"]["N"]),
                        "record": a.unpacked(item["record"]),
                    }
                )
        return out
