"""Callback delivery records in the run's partition (the only DynamoDB access of callback delivery).

Items (pk is the run's, T#{tenant}#R#{run}, so a tenant's deliveries live with its runs):
  notice state   N#{noticeId}               status pending|delivered|dead, attempts, type (delivering and leaseUntil:
                                            an attempt the release before claimed, honoured until its lease ends);
                                            sequence (the event it reports) and webhookId (a subscription's
                                            delivery), written by the claim that creates it, so a replay can queue
                                            it again (app.replay); reopenedFrom, reopens, reopenedAt once replayed;
                                            history: the records of its last KEPT_ATTEMPTS attempts (packed), and
                                            of a dead letter made on its message's last receive: a record without
                                            an attempt number (`errorClass` RECEIVES_EXHAUSTED, `final`)
  notice bundle  N#{noticeId}+              (format 10, ADR 0155) the notices of one transition to one receiver, under
                                            its first notice's id and a "+" no id holds (so a message of that notice
                                            alone, queued by a release that writes no bundles, keeps its own notice
                                            state beside it and neither is read for the other): the notice state's
                                            attributes, with `v` 10 and `notices` (packed, in order): each one's
                                            id, type, sequence, tries (its attempts), since (its tries before its
                                            round) and status (delivered|dead; absent: pending); `status` and
                                            `attempts` are the bundle's (settled once every notice is), `history`
                                            every notice's last KEPT_ATTEMPTS records
  attempt        D#{noticeId}#{attempt:03}  status succeeded|failed, httpStatus, errorClass, at, elapsedMs: written by
                                            releases before issue 31 (one item per attempt), read still, never written

The notice state is a leased-work ledger item (store.leases) that is never claimed (ADR 0129): a worker reads it
(consistently) before it dials, and a notice settled already is not dialled again; after the attempt one conditional
update records it (attempts + 1, the new status, its record appended to `history`), under the condition that the
attempts and status it read still stand, so the history it read is the history it extends and no record is lost.
Two copies of a notice's message taken at the same moment may both dial (the receiver deduplicates by `webhook-id`);
the second to record is recorded after the first, and a notice delivered stays delivered. Neither item starts with
"E#", so the stream filter never passes them.

A message that fails on the last receive its queue allows before its attempts run out (a crash each time, invocations
without time for the dial) is dead-lettered by its worker without another attempt (`dead_unattempted`): the notice
state dead, its attempts as they were, and, after its attempts' records, one saying so, which numbers no attempt
(ADR 0190). Its tenant reads it dead, and replays it as any dead letter.

A bundle's attempt dials its notices in order, each only once the ones before it are settled (delivered, or dead after
their own round of attempts): a notice delivered is not dialled again by a later attempt, and each notice's attempts,
round and dead letter are its own, as a notice's alone are. Its record applies each POST's record to the notices as
the write reads them (rules/notice_bundles.applied), so a record written after another copy's extends it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from interlude import wiring
from interlude.domain import formats
from interlude.rules import notice_bundles
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store.layout import FIRST, run_pk
from interlude.store.leases import Claim, Ledger, Writes

# The attempts a delivery keeps on its item: a whole round of them (a replay's round included), the newest last.
KEPT_ATTEMPTS = wiring.CALLBACK_MAX_ATTEMPTS
HISTORY = "history"
NOTICE_SK_PREFIX = "N#"
BUNDLE = "notices"
# The error class of the record a dead letter made on its message's last receive leaves (it numbers no attempt).
RECEIVES_EXHAUSTED = "receives_exhausted"
# After a bundle's first notice's id in its key: a character no notice id has ([A-Za-z0-9_-]).
BUNDLE_SK_SUFFIX = "+"


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
    # The notices of one transition delivered together under the first one's id (format 10): (id, type, sequence)
    # of each, in order; () for a notice delivered alone.
    bundled: tuple[tuple[str, str, int | None], ...] = ()
    # The table its record is in (store/layout.py: its message's mark, format 11; FIRST without one).
    where: str = FIRST
    # What its record is created with to expire, as its message says (`(ttl,)`, or `()`: none); None: its message does
    # not say, and the record's ledger reads the run's head for it (ADR 0178).
    created_expiry: tuple[int, ...] | None = field(default=None, compare=False)


class DeliveryStore(Ledger[Notice]):
    LEASED = "delivering"
    SETTLED = ("delivered", "dead")
    DEAD = notice_bundles.DEAD

    def key(self, ref: Notice) -> a.Item:
        return a.key(run_pk(ref.run_id), notice_sk(ref.notice_id) + (BUNDLE_SK_SUFFIX if ref.bundled else ""))

    def run_of(self, ref: Notice) -> str:
        return ref.run_id

    def expiring(self, ref: Notice) -> a.Item:
        if ref.created_expiry is None:
            return super().expiring(ref)
        return {wiring.TTL_ATTRIBUTE: a.n(ref.created_expiry[0])} if ref.created_expiry else {}

    def table_of(self, ref: Notice) -> str:
        return self.store.table_named(ref.where)

    def claiming(self, ref: Notice, attempt: int, now: float) -> Writes:
        created: dict[str, Any] = {}
        if ref.sequence is not None:
            created["sequence"] = a.n(ref.sequence)
        if ref.webhook_id is not None:
            created["webhookId"] = a.s(ref.webhook_id)
        if ref.bundled:
            created[formats.FORMAT_FIELD] = a.n(formats.NOTICE_BUNDLES)
        return Writes(sets={"type": a.s(ref.type)}, created=created)

    def settling(
        self, ref: Notice, attempt: int, status: str, kept: dict[str, Any], now: float, held: Mapping[str, Any]
    ) -> Writes:
        """The attempt's record (under the number it is recorded as) appended to the item's bounded history, in the
        write that records the attempt; a bundle's: each of its POSTs' records, and its notices as they left."""
        if ref.bundled:
            notices, records = notice_bundles.applied(bundle_parts(ref, held), kept["records"])
            history = notice_bundles.latest_per_notice([*held.get(HISTORY, ()), *records], KEPT_ATTEMPTS)
            return Writes(sets={BUNDLE: a.packed(notices), HISTORY: a.packed(history)})
        return Writes(sets={HISTORY: a.packed([*held.get(HISTORY, ()), {**kept, "attempt": attempt}][-KEPT_ATTEMPTS:])})

    def dead_unattempted(self, ref: Notice, seen: Claim, ended: list[dict[str, Any]], now: float) -> bool:
        """The delivery `seen` found open (`look`) dead without another attempt, `ended` appended to its history (the
        record saying so of each of its notices still pending, RECEIVES_EXHAUSTED); a bundle's pending notices dead
        with it. One write, conditional on the attempts and status it read: False when another copy of its message
        recorded an attempt meanwhile."""
        held = seen.held
        created = self.claiming(ref, seen.attempt, now)
        if ref.bundled:
            parts = [p if p.get("status") else {**p, "status": self.DEAD} for p in bundle_parts(ref, held)]
            history = notice_bundles.latest_per_notice([*held.get(HISTORY, ()), *ended], KEPT_ATTEMPTS)
            kept = {BUNDLE: a.packed(parts), HISTORY: a.packed(history)}
        else:
            kept = {HISTORY: a.packed([*held.get(HISTORY, ()), *ended][-KEPT_ATTEMPTS:])}
        attempts = seen.attempt - 1
        sets = {"status": a.s(self.DEAD), "attempts": a.n(attempts), **created.sets, **kept}
        condition = "#attempts = :previous AND #status = :was"
        values = {":previous": a.n(attempts), ":was": a.s(str(held.get("status", "")))}
        return self._write_expiring(ref, held, sets, Writes(created=created.created), ("leaseUntil",), condition, values)

    def read(self, ref: Notice) -> dict[str, Any] | None:
        held = super().read(ref)
        if held is not None:
            check_format(held)
        return held

    def bundle_of(self, run_id: str, notice_id: str) -> tuple[Notice, dict[str, Any]] | None:
        """The bundle (format 10) a notice of the run was delivered in, and its item (plain); None: in none. Its key
        names its first notice with a suffix, and a later notice not at all: the run's notice items are read, in every
        table a record may be in."""
        for where in layout.DELIVERY_RECORDS.read():
            for item in self._query(a.s(run_pk(run_id)), NOTICE_SK_PREFIX, where):
                held = a.plain(item)
                check_format(held)
                parts = held.get(BUNDLE) or []
                if any(p["id"] == notice_id for p in parts):
                    return bundle_ref(run_id, parts, where), held
        return None

    def located(self, ref: Notice) -> tuple[Notice, dict[str, Any]] | None:
        """The record of a delivery whose table is not known (a replay names a notice by its id alone), with `ref`
        naming the table it was found in; None: in neither."""
        for where in layout.DELIVERY_RECORDS.read():
            here = replace(ref, where=where)
            held = self.read(here)
            if held is not None:
                return here, held
        return None

    def attempts(self, run_id: str, notice_id: str | None = None) -> list[dict[str, Any]]:
        """Attempt records of a run (or of one notice), ordered by notice id and attempt number: each delivery's
        kept history, and the attempt items of the releases before (a delivery's earlier attempts may be there)."""
        pk = a.s(run_pk(run_id))
        states: list[dict[str, Any]] = []
        for where in layout.DELIVERY_RECORDS.read():
            if notice_id is None:
                states += self._query(pk, NOTICE_SK_PREFIX, where)
            else:
                key = a.key(run_pk(run_id), notice_sk(notice_id))
                got = self.client.get_item(TableName=self.store.table_named(where), Key=key)
                states += [got["Item"]] if "Item" in got else []
        for item in states:
            check_format(a.plain(item))
        found = {
            (r.get("noticeId", ""), int(r.get("attempt", 0))): r
            for r in [a.unpacked(item["record"]) for item in self._query(pk, attempt_sk_prefix(notice_id))]
            + [r for item in states if HISTORY in item for r in a.unpacked(item[HISTORY])]
        }
        return [found[k] for k in sorted(found)]

    def _query(self, pk: dict[str, str], prefix: str, where: str = FIRST) -> list[dict[str, Any]]:
        pages = self.client.get_paginator("query").paginate(
            TableName=self.store.table_named(where),
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": pk, ":prefix": a.s(prefix)},
        )
        return [item for page in pages for item in page.get("Items") or []]


def check_format(held: Mapping[str, Any]) -> None:
    """Refuse a delivery record (plain) in a format this release does not read (a bundle's is 10)."""
    formats.check("callback delivery", held.get(formats.FORMAT_FIELD))


def bundle_ref(
    run_id: str, parts: list[dict[str, Any]], where: str = FIRST, created_expiry: tuple[int, ...] | None = None
) -> Notice:
    """The delivery of a bundle's notices (`parts`: its item's `notices`, or its message's notices), by its first;
    `where`: the table its record is in."""
    bundled = tuple((str(p["id"]), str(p["type"]), p.get("sequence")) for p in parts)
    return Notice(run_id, bundled[0][0], bundled[0][1], bundled[0][2], bundled=bundled, where=where, created_expiry=created_expiry)


def bundle_parts(ref: Notice, held: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A bundle's notices as its item `held` keeps them (new ones for an item not written yet), each its own copy."""
    if held.get(BUNDLE):
        return [dict(p) for p in held[BUNDLE]]
    return [
        {"id": notice_id, "type": kind, **({"sequence": sequence} if sequence is not None else {}), "tries": 0, "since": 0}
        for notice_id, kind, sequence in ref.bundled
    ]


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
