"""Notification records in the run's partition (issue 14): the log behind `GET /runs/{runId}/notifications`.

  notification   T#{tenant}#R#{run}   NT#{notificationId}   status queued|sending|pending|sent|skipped|dead,
                                                             attempts, leaseUntil, record (JSON: who, what, each
                                                             channel's outcome), message (JSON: the queued message,
                                                             identity only: what a replay queues again)

One item per (interrupt visit, recipient, purpose): the notification id is derived from them, so a stream record or
a schedule delivered twice names the same item, and a notification already settled is not sent again. A worker
claims an attempt (attempts + 1 and a lease, conditionally) before it sends, and settles it conditionally on its
claim still standing: a leased-work ledger item (store.leases), like callback deliveries'. The item never starts
with "E#", so the stream filter never passes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlude.store import attributes as a
from interlude.store.layout import run_pk
from interlude.store.leases import Claim, Ledger, Writes

PREFIX = "NT#"


@dataclass(frozen=True)
class Notification:
    """A notification as its ledger knows it, with the record its first claim writes (who, what, no channel yet)."""

    run_id: str
    notification_id: str
    record: dict[str, Any]
    # The queued message (identity only, no link or secret), kept for a replay (app.replay).
    message: dict[str, Any] | None = None


def kept_record(claim: Claim) -> dict[str, Any] | None:
    """The record as the attempts before this claim left it (channels already sent are not sent again)."""
    held = claim.held.get("record")
    return json.loads(held) if held else None


class NotificationStore(Ledger[Notification]):
    LEASED = "sending"
    SETTLED = ("sent", "skipped", "dead")
    DEAD = "dead"

    def key(self, ref: Notification) -> a.Item:
        return a.key(run_pk(ref.run_id), PREFIX + ref.notification_id)

    def run_of(self, ref: Notification) -> str:
        return ref.run_id

    def claiming(self, ref: Notification, attempt: int, now: float) -> Writes:
        created = {"record": a.as_json(ref.record)}
        if ref.message is not None:
            created["message"] = a.as_json(ref.message)
        return Writes(created=created)

    def settling(
        self, ref: Notification, attempt: int, status: str, kept: dict[str, Any], now: float, held: Mapping[str, Any]
    ) -> Writes:
        return Writes(sets={"record": a.as_json(kept)})

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
