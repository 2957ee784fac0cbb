"""Callback delivery records in the run's partition (the only DynamoDB access of callback delivery).

Items (pk is the run's, T#{tenant}#R#{run}, so a tenant's deliveries live with its runs):
  notice state   N#{noticeId}               status pending|delivered|dead, attempts, type (delivering and leaseUntil:
                                            an attempt the release before claimed, honoured until its lease ends);
                                            sequence (the event it reports) and webhookId (a subscription's
                                            delivery), written by the claim that creates it, so a replay can queue
                                            it again (app.replay); reopenedFrom, reopens, reopenedAt once replayed;
                                            history: the records of its last KEPT_ATTEMPTS attempts (packed)
  attempt        D#{noticeId}#{attempt:03}  status succeeded|failed, httpStatus, errorClass, at, elapsedMs: written by
                                            releases before issue 31 (one item per attempt), read still, never written

The notice state is a leased-work ledger item (store.leases) that is never claimed (ADR 0129): a worker reads it
(consistently) before it dials, and a notice settled already is not dialled again; after the attempt one conditional
update records it (attempts + 1, the new status, its record appended to `history`), under the condition that the
attempts and status it read still stand, so the history it read is the history it extends and no record is lost.
Two copies of a notice's message taken at the same moment may both dial (the receiver deduplicates by `webhook-id`);
the second to record is recorded after the first, and a notice delivered stays delivered. Neither item starts with
"E#", so the stream filter never passes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import run_pk
from interlude.store.leases import Ledger, Writes

# The attempts a delivery keeps on its item: a whole round of them (a replay's round included), the newest last.
KEPT_ATTEMPTS = wiring.CALLBACK_MAX_ATTEMPTS
HISTORY = "history"
NOTICE_SK_PREFIX = "N#"


def notice_sk(notice_id: str) -> str:
    return NOTICE_SK_PREFIX + notice_id


def attempt_sk_prefix(notice_id: str | None) -> str:
    """Every attempt item of a notice, or of the run when `notice_id` is None (the releases before wrote them)."""
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

    def run_of(self, ref: Notice) -> str:
        return ref.run_id

    def claiming(self, ref: Notice, attempt: int, now: float) -> Writes:
        created: dict[str, Any] = {}
        if ref.sequence is not None:
            created["sequence"] = a.n(ref.sequence)
        if ref.webhook_id is not None:
            created["webhookId"] = a.s(ref.webhook_id)
        return Writes(sets={"type": a.s(ref.type)}, created=created)

    def settling(
        self, ref: Notice, attempt: int, status: str, kept: dict[str, Any], now: float, held: Mapping[str, Any]
    ) -> Writes:
        """The attempt's record (under the number it is recorded as) appended to the item's bounded history, in the
        write that records the attempt."""
        return Writes(sets={HISTORY: a.packed([*held.get(HISTORY, ()), {**kept, "attempt": attempt}][-KEPT_ATTEMPTS:])})

    def attempts(self, run_id: str, notice_id: str | None = None) -> list[dict[str, Any]]:
        """Attempt records of a run (or of one notice), ordered by notice id and attempt number: each delivery's
        kept history, and the attempt items of the releases before (a delivery's earlier attempts may be there)."""
        pk = a.s(run_pk(run_id))
        if notice_id is None:
            states = self._query(pk, NOTICE_SK_PREFIX)
        else:
            got = self.client.get_item(TableName=self.table, Key=a.key(run_pk(run_id), notice_sk(notice_id)))
            states = [got["Item"]] if "Item" in got else []
        found = {
            (r.get("noticeId", ""), int(r.get("attempt", 0))): r
            for r in [a.unpacked(item["record"]) for item in self._query(pk, attempt_sk_prefix(notice_id))]
            + [r for item in states if HISTORY in item for r in a.unpacked(item[HISTORY])]
        }
        return [found[k] for k in sorted(found)]

    def _query(self, pk: dict[str, str], prefix: str) -> list[dict[str, Any]]:
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": pk, ":prefix": a.s(prefix)},
        )
        return [item for page in pages for item in page.get("Items") or []]


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
