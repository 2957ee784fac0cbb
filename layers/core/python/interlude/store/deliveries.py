"""Callback delivery records in the run's partition (the only DynamoDB access of callback delivery).

Items (pk is the run's, T#{tenant}#R#{run}, so a tenant's deliveries live with its runs):
  notice state   N#{noticeId}               status pending|delivering|delivered|dead, attempts, leaseUntil
  attempt        D#{noticeId}#{attempt:03}  status succeeded|failed, httpStatus, errorClass, at, elapsedMs

A worker claims an attempt (one conditional update: attempts + 1, a lease) before it dials, and finishes it
in one conditional transaction (the attempt record and the new notice status). `delivered` is written only under
the condition that this worker's claim still stands, so one notice has at most one successful delivery, however
many copies of its SQS message exist. Neither item starts with "E#", so the stream filter never passes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from interlude.store import attributes as a
from interlude.store.dynamo import Store, run_pk

FINAL_STATUSES = ("delivered", "dead")


def notice_sk(notice_id: str) -> str:
    return f"N#{notice_id}"


def attempt_sk(notice_id: str, attempt: int) -> str:
    return f"{attempt_sk_prefix(notice_id)}{attempt:03d}"


def attempt_sk_prefix(notice_id: str | None) -> str:
    """Every attempt of a notice, or of the run when `notice_id` is None."""
    return f"D#{notice_id}#" if notice_id else "D#"


@dataclass(frozen=True)
class Claim:
    outcome: str  # "claimed" | "done" (delivered or dead already) | "busy" (another worker holds it)
    attempt: int = 0
    retry_in_s: int = 0


class DeliveryStore:
    def __init__(self, store: Store) -> None:
        self.client = store.client
        self.table = store.table

    def notice(self, run_id: str, notice_id: str) -> dict[str, Any] | None:
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(run_pk(run_id), notice_sk(notice_id)),
            ConsistentRead=True,
        )
        item = got.get("Item")
        return a.plain(item) if item else None

    def claim(self, run_id: str, notice_id: str, notice_type: str, now: float, lease_s: float) -> Claim:
        current = self.notice(run_id, notice_id)
        if current is not None:
            if current.get("status") in FINAL_STATUSES:
                return Claim("done", attempt=int(current.get("attempts", 0)))
            lease = float(current.get("leaseUntil", 0))
            if current.get("status") == "delivering" and lease > now:
                return Claim("busy", retry_in_s=int(lease - now) + 1)
        previous = int(current.get("attempts", 0)) if current else 0
        attempt = previous + 1
        update: dict[str, Any] = {
            "TableName": self.table,
            "Key": a.key(run_pk(run_id), notice_sk(notice_id)),
            "UpdateExpression": "SET #st = :delivering, attempts = :attempt, leaseUntil = :lease, #ty = :type",
            "ExpressionAttributeNames": {"#st": "status", "#ty": "type"},
            "ExpressionAttributeValues": {
                ":delivering": a.s("delivering"),
                ":attempt": a.n(attempt),
                ":lease": a.n(round(now + lease_s, 3)),
                ":type": a.s(notice_type),
            },
        }
        if current is None:
            update["ConditionExpression"] = "attribute_not_exists(sk)"
        else:
            update["ConditionExpression"] = "attempts = :previous AND #st IN (:pending, :delivering)"
            update["ExpressionAttributeValues"].update({":previous": a.n(previous), ":pending": a.s("pending")})
        try:
            self.client.update_item(**update)
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in ("ConditionalCheckFailedException", "TransactionConflictException"):
                raise
            # Another copy of the message claimed it between our read and our write (the condition failed), or
            # a worker's finishing transaction holds the notice item at this very moment.
            return Claim("busy", retry_in_s=1)
        return Claim("claimed", attempt=attempt)

    def finish(self, run_id: str, notice_id: str, attempt: int, record: dict[str, Any], status: str) -> None:
        """Record attempt `attempt` and move the notice to `status` (pending, delivered or dead).

        Writes nothing when this worker's claim no longer stands (its lease ran out and another attempt was claimed).
        """
        pk = run_pk(run_id)
        item = {**a.key(pk, attempt_sk(notice_id, attempt)), "record": a.as_json(record)}
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self.table,
                            "Item": item,
                            "ConditionExpression": "attribute_not_exists(sk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self.table,
                            "Key": a.key(pk, notice_sk(notice_id)),
                            "UpdateExpression": "SET #st = :status REMOVE leaseUntil",
                            "ConditionExpression": "attempts = :attempt AND #st = :delivering",
                            "ExpressionAttributeNames": {"#st": "status"},
                            "ExpressionAttributeValues": {
                                ":status": a.s(status),
                                ":attempt": a.n(attempt),
                                ":delivering": a.s("delivering"),
                            },
                        }
                    },
                ]
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise

    def attempts(self, run_id: str, notice_id: str | None = None) -> list[dict[str, Any]]:
        """Attempt records of a run (or of one notice), ordered by notice id and attempt number."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":prefix": a.s(attempt_sk_prefix(notice_id))},
        )
        return [a.unpacked(item["record"]) for page in pages for item in page.get("Items") or []]


# The fields of an attempt record a tenant sees (GET deliveries, the dead letter); the rest is bookkeeping.
PUBLIC_ATTEMPT_FIELDS = (
    "noticeId",
    "webhookId",
    "type",
    "nodeId",
    "attempt",
    "at",
    "status",
    "httpStatus",
    "errorClass",
    "elapsedMs",
    "final",
)


def public_attempts(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: a[k] for k in PUBLIC_ATTEMPT_FIELDS if k in a} for a in history]
