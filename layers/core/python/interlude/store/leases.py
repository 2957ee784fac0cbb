"""The ledger of leased work: one item per unit of queued work (a callback or webhook delivery, a notification, an
action's effect) that makes it succeed at most once however many copies of its message arrive, and lets another
worker take it over when the one holding it dies.

The item holds `status`, `attempts` and, while an attempt runs, `leaseUntil` (epoch seconds). A worker claims the
next attempt before it acts: one conditional write (attempts + 1, the leased status, a lease), allowed when the item
is new, or pending, or leased under a lease that ran out, and only if no one claimed it since it was read. It
settles the attempt (pending again, or a final status) under the condition that its claim still stands: the same
attempt, still leased. Once settled, every later claim finds it settled and attempts nothing.

A unit dead-lettered (settled as its ledger's DEAD status) may be reopened once the cause is fixed (`reopen`: one
conditional write, from dead only): pending again, its attempts kept, so its next claim is a new attempt of the same
unit, and a new round of attempts (`reopenedFrom` records where the round starts; `round_attempt`). A unit is
reopened at most a bounded number of times (the caller's), so its attempts stay bounded.

A ledger whose work may be done twice at the same moment without harm (a delivery: its receiver deduplicates by the
delivery's id) may skip the claim: `look` reads what a claim would, and `record` writes the attempt, once made, with
its outcome in one conditional write (the attempts and status it read unchanged). Its item holds a lease only if the
release before this one claimed it, and a lease it finds running is honoured as a claim's would be.

Each ledger keeps its own item: its key, its status names, what a claim and a settle write besides the three
attributes above (a delivery's settle: the attempt's record, in a bounded list on the item), and any companion
write (the run's ledger entry of an effect), which makes the write a transaction. The status names are data, not
this module's: an item written by the release before this code was shared, in flight or settled, is read as it was
written, and the items this code writes are the same ones.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.store import attributes as a
from interlude.store import expiry
from interlude.store.table import Table

PENDING = "pending"
# A plain conditional write fails with the first; with the second when a transaction holds the item at that moment.
# A transaction fails with the third, whichever of its writes' conditions failed.
LOST = frozenset({"ConditionalCheckFailedException", "TransactionConflictException", "TransactionCanceledException"})

# Attributes a reopen writes: the attempts made before the round it opens, how many rounds were reopened, when.
REOPENED_FROM = "reopenedFrom"
REOPENS = "reopens"
REOPENED_AT = "reopenedAt"
# Rounds of a record that lost its write to another copy's (each round reads the item again): three copies of one
# message at the same moment.
RECORD_ROUNDS = 3

Ref = TypeVar("Ref")


@dataclass(frozen=True)
class Claim:
    # open: nothing holds it (what `look` finds; `claim` then claims it).
    outcome: Literal["claimed", "open", "settled", "busy"]
    # claimed, open: the attempt this worker holds or is to make; settled: the attempts made.
    attempt: int = 0
    # busy: seconds until the lease that holds it runs out.
    retry_in_s: int = 0
    # The item as the claim read it (plain; {} when the claim created it): what settled it, or what earlier attempts kept.
    held: Mapping[str, Any] = field(default_factory=dict)


def round_attempt(claim: Claim) -> int:
    """The claimed attempt's number within its round: a reopened unit's attempts count from its reopen."""
    return claim.attempt - int(claim.held.get(REOPENED_FROM, 0))


@dataclass(frozen=True)
class Reopened:
    outcome: Literal["reopened", "missing", "not_dead", "limit"]
    # reopened: the attempt its next claim makes; not_dead: the status it holds; limit: the reopens made.
    attempt: int = 0
    status: str = ""
    reopens: int = 0
    # The item as the reopen read it (plain; {} when missing).
    held: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Writes:
    """What a claim or a settle writes besides the ledger's own attributes."""

    sets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Written by the claim that creates the item only.
    created: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Companion writes (TransactWriteItems entries), made in one transaction with the item's.
    also: Sequence[Any] = ()


class Ledger(ABC, Generic[Ref]):
    """The ledger items of one kind of work; `Ref` is what the ledger knows one unit by."""

    # The status of an item while an attempt holds its lease, and the statuses that end it.
    LEASED: ClassVar[str]
    SETTLED: ClassVar[tuple[str, ...]]
    # The settled status of a unit that failed for good (its dead letter): the one a reopen starts from.
    DEAD: ClassVar[str]

    def __init__(self, store: Table) -> None:
        self.client = store.client
        self.table = store.table
        self.store = store

    def table_of(self, ref: Ref) -> str:
        """The table the unit's item is in (a ledger of a moved family's: the one its ref names, store/layout.py)."""
        return self.table

    @abstractmethod
    def key(self, ref: Ref) -> a.Item: ...

    def claiming(self, ref: Ref, attempt: int, now: float) -> Writes:
        return Writes()

    def settling(
        self, ref: Ref, attempt: int, status: str, kept: dict[str, Any], now: float, held: Mapping[str, Any]
    ) -> Writes:
        return Writes()

    def run_of(self, ref: Ref) -> str | None:
        """The run whose partition holds the unit's item, for a ledger whose items expire with their run
        (store/expiry.py); None for a ledger whose items keep their own expiry."""
        return None

    def expiring(self, ref: Ref) -> a.Item:
        """What a new item of this ledger is created with to expire: its run's expiry when the run has finished, else
        its items' provisional one (store/expiry.created_expiry)."""
        run_id = self.run_of(ref)
        return {} if run_id is None else expiry.created_expiry(self.client, self.table, run_id)

    def confirm_expiry(self, ref: Ref, written: a.Item) -> None:
        """The item, just written with `written` as its expiry, made to carry its run's as the head holds it now
        (store/expiry.confirm: no item of a finished run is left without one)."""
        run_id = self.run_of(ref)
        if run_id is not None:
            expiry.confirm(self.client, self.table, run_id, self.key(ref), written, self.table_of(ref))

    def read(self, ref: Ref) -> dict[str, Any] | None:
        got = self.client.get_item(TableName=self.table_of(ref), Key=self.key(ref), ConsistentRead=True)
        item = got.get("Item")
        return a.plain(item) if item else None

    def look(self, ref: Ref, now: float) -> Claim:
        """What a claim finds, without claiming: settled, busy (a lease that has not run out), or open (the attempt to
        make next, and the item as read: {} when there is none)."""
        held = self.read(ref)
        if held is not None:
            if held.get("status") in self.SETTLED:
                return Claim("settled", attempt=int(held.get("attempts", 0)), held=held)
            lease = float(held.get("leaseUntil", 0))
            if held.get("status") == self.LEASED and lease > now:
                return Claim("busy", retry_in_s=int(lease - now) + 1)
        return Claim("open", attempt=int(held.get("attempts", 0)) + 1 if held else 1, held=held or {})

    def claim(self, ref: Ref, now: float, lease_s: float) -> Claim:
        seen = self.look(ref, now)
        if seen.outcome != "open":
            return seen
        writes = self.claiming(ref, seen.attempt, now)
        sets = {
            "status": a.s(self.LEASED),
            "attempts": a.n(seen.attempt),
            "leaseUntil": a.n(round(now + lease_s, 3)),
            **writes.sets,
        }
        condition = "#attempts = :previous AND #status IN (:pending, :leased)"
        values = {":previous": a.n(seen.attempt - 1), ":pending": a.s(PENDING), ":leased": a.s(self.LEASED)}
        if not self._write_expiring(ref, seen.held, sets, writes, (), condition, values):
            # Another copy of the message claimed it between this read and this write.
            return Claim("busy", retry_in_s=1)
        return Claim("claimed", attempt=seen.attempt, held=seen.held)

    def record(self, ref: Ref, seen: Claim, status: str, kept: dict[str, Any], now: float) -> str | None:
        """The attempt `seen` opened (`look`), made already, recorded with its outcome `status` and what it `kept`, in
        one conditional write. Another copy of the unit's message may have recorded an attempt of its own meanwhile:
        then this one is recorded after it (the item read again, the next attempt's number), and a unit that copy
        settled stays settled unless this attempt succeeded. Returns the status the item holds; None if it could not
        be recorded (a copy won every round, or the item is gone)."""
        held, attempt = seen.held, seen.attempt
        for _ in range(RECORD_ROUNDS):
            was = str(held.get("status", ""))
            ends = was if was in self.SETTLED and (status not in self.SETTLED or status == self.DEAD) else status
            created = self.claiming(ref, attempt, now)
            settled = self.settling(ref, attempt, ends, kept, now, held)
            sets = {"status": a.s(ends), "attempts": a.n(attempt), **created.sets, **settled.sets}
            writes = Writes(created=created.created, also=(*created.also, *settled.also))
            condition = "#attempts = :previous AND #status = :was"
            values = {":previous": a.n(attempt - 1), ":was": a.s(was)}
            if self._write_expiring(ref, held, sets, writes, ("leaseUntil",), condition, values):
                return ends
            again = self.read(ref)
            if again is None:
                return None
            held, attempt = again, int(again.get("attempts", 0)) + 1
        return None

    def _write_expiring(
        self,
        ref: Ref,
        held: Mapping[str, Any],
        sets: Mapping[str, Mapping[str, Any]],
        writes: Writes,
        removes: Sequence[str],
        condition: str,
        values: Mapping[str, Any],
    ) -> bool:
        """The write of a claim or a record: when `held` is {} it creates the item (with `writes.created` and its run's
        expiry) unless it exists by now, else it is under `condition`; then the item's expiry is confirmed (created,
        or found without one)."""
        if not held:
            created = f"attribute_not_exists({wiring.SORT_KEY})"
            expires = self.expiring(ref)
            written = self._write(ref, {**sets, **writes.created, **expires}, (), created, {}, writes.also)
        else:
            written = self._write(ref, sets, removes, condition, values, writes.also)
            # An item left without an expiry (its creator stopped before confirming it) is confirmed by a later write.
            expires = {} if wiring.TTL_ATTRIBUTE not in held else {wiring.TTL_ATTRIBUTE: a.n(held[wiring.TTL_ATTRIBUTE])}
        if written and (not held or not expires):
            self.confirm_expiry(ref, expires)
        return written

    def settle(
        self, ref: Ref, attempt: int, status: str, kept: dict[str, Any], now: float, held: Mapping[str, Any] | None = None
    ) -> bool:
        """Attempt `attempt` ends as `status` (pending: another may follow), with what it `kept`. False, and nothing
        written, when this worker's claim no longer stands (its lease ran out and another attempt was claimed).
        `held`: the item as the claim read it (`Claim.held`), unchanged since by the condition the write is under."""
        writes = self.settling(ref, attempt, status, kept, now, held or {})
        condition = "#attempts = :attempt AND #status = :leased"
        values = {":attempt": a.n(attempt), ":leased": a.s(self.LEASED)}
        return self._write(ref, {"status": a.s(status), **writes.sets}, ("leaseUntil",), condition, values, writes.also)

    def reopen(
        self, ref: Ref, held: Mapping[str, Any] | None, now_iso: str, max_reopens: int, writes: Writes | None = None
    ) -> Reopened:
        """A dead-lettered unit pending again for a new round of attempts, with `writes` in the same write (a
        companion's delete, a renewed expiry): unless it is not dead (delivered, sent, or reopened already by
        someone else), or was reopened `max_reopens` times. `held`: its item as the caller read it (`read`)."""
        if held is None:
            return Reopened("missing")
        if held.get("status") != self.DEAD:
            return Reopened("not_dead", status=str(held.get("status")), held=held)
        reopens = int(held.get(REOPENS, 0))
        if reopens >= max_reopens:
            return Reopened("limit", reopens=reopens, held=held)
        attempts = int(held.get("attempts", 0))
        writes = writes or Writes()
        sets = {
            "status": a.s(PENDING),
            REOPENED_FROM: a.n(attempts),
            REOPENS: a.n(reopens + 1),
            REOPENED_AT: a.s(now_iso),
            **writes.sets,
        }
        condition = "#attempts = :previous AND #status = :dead"
        values = {":previous": a.n(attempts), ":dead": a.s(self.DEAD)}
        if not self._write(ref, sets, (), condition, values, writes.also):
            # Another reopen (or a worker) moved it between this read and this write.
            again = self.read(ref) or {}
            return Reopened("not_dead", status=str(again.get("status", "")), held=again)
        return Reopened("reopened", attempt=attempts + 1, reopens=reopens + 1, held=held)

    def undo_reopen(self, ref: Ref, reopened: Reopened, writes: Writes | None = None) -> bool:
        """Dead again, as before `reopened` (its message could not be queued, so no attempt would ever come): only
        while no attempt has claimed it, with `writes` (a companion put back) in the same write."""
        writes = writes or Writes()
        condition = "#attempts = :previous AND #status = :pending"
        values = {":previous": a.n(reopened.attempt - 1), ":pending": a.s(PENDING)}
        return self._write(ref, {"status": a.s(self.DEAD), **writes.sets}, (), condition, values, writes.also)

    def _write(
        self,
        ref: Ref,
        sets: Mapping[str, Mapping[str, Any]],
        removes: Sequence[str],
        condition: str,
        condition_values: Mapping[str, Any],
        also: Sequence[Any],
    ) -> bool:
        names = {f"#{name}": name for name in (*sets, *removes)}
        if "#attempts" in condition:
            names.update({"#attempts": "attempts", "#status": "status"})
        expression = "SET " + ", ".join(f"#{name} = :{name}" for name in sets)
        if removes:
            expression += " REMOVE " + ", ".join(f"#{name}" for name in removes)
        update: Any = {
            "TableName": self.table_of(ref),
            "Key": self.key(ref),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {**{f":{name}": value for name, value in sets.items()}, **condition_values},
        }
        try:
            if also:
                self.client.transact_write_items(TransactItems=[{"Update": update}, *also])
            else:
                self.client.update_item(**update)
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in LOST:
                raise
            return False
        return True
