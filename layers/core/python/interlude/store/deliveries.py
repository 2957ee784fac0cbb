"""Callback delivery records in the run's partition (the only DynamoDB access of callback delivery).

Items (pk is the run's, T#{tenant}#R#{run}, so a tenant's deliveries live with its runs):
  notice state   N#{noticeId}               status pending|delivering|delivered|dead, attempts, leaseUntil, type;
                                            sequence (the event it reports) and webhookId (a subscription's
                                            delivery), written by the claim that creates it, so a replay can queue
                                            it again (app.replay); reopenedFrom, reopens, reopenedAt once replayed
  attempt        D#{noticeId}#{attempt:03}  status succeeded|failed, httpStatus, errorClass, at, elapsedMs

The notice state is a leased-work ledger item (store.leases): a worker claims an attempt (one conditional update:
attempts + 1, a lease) before it dials, and settles it in one conditional transaction (the attempt record and the
new notice status). `delivered` is written only under the condition that this worker's claim still stands, so one
notice has at most one successful delivery, however many copies of its SQS message exist. Neither item starts with
"E#", so the stream filter never passes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interlude.store import attributes as a
from interlude.store.layout import run_pk
from interlude.store.leases import Ledger, Writes


def notice_sk(notice_id: str) -> str:
    return f"N#{notice_id}"


def attempt_sk(notice_id: str, attempt: int) -> str:
    return f"{attempt_sk_prefix(notice_id)}{attempt:03d}"


def attempt_sk_prefix(notice_id: str | None) -> str:
    """Every attempt of a notice, or of the run when `notice_id` is None."""
    return f"D#{notice_id}#" if notice_id else "D#"


@dataclass(frozen=True)
class Notice:
    """A delivery as its ledger knows it: a callback notice or a webhook subscription's delivery of an event."""

    run_id: str
    notice_id: str
    type: str
    # The sequence of the event it reports, and the subscription (None: a callback notice); kept on the item.
    sequence: int | None = None
    webhook_id: str | None = None


class DeliveryStore(Ledger[Notice]):
    LEASED = "delivering"
    SETTLED = ("delivered", "dead")
    DEAD = "dead"

    def key(self, ref: Notice) -> a.Item:
        return a.key(run_pk(ref.run_id), notice_sk(ref.notice_id))

    def claiming(self, ref: Notice, attempt: int, now: float) -> Writes:
        created: dict[str, Any] = {}
        if ref.sequence is not None:
            created["sequence"] = a.n(ref.sequence)
        if ref.webhook_id is not None:
            created["webhookId"] = a.s(ref.webhook_id)
        return Writes(sets={"type": a.s(ref.type)}, created=created)

    def settling(self, ref: Notice, attempt: int, status: str, kept: dict[str, Any], now: float) -> Writes:
        """The attempt's record, an item of its own (`delivered` is written only while this worker's claim stands)."""
        item = {**a.key(run_pk(ref.run_id), attempt_sk(ref.notice_id, attempt)), "record": a.as_json(kept)}
        return Writes(also=[{"Put": {"TableName": self.table, "Item": item, "ConditionExpression": "attribute_not_exists(sk)"}}])

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
