"""The outbox consumer: every new event-log item on the table's stream comes here, a batch at a time.

For each item it deletes the inbox entries of the interrupts the transition closed (named on the item), runs
the outbox handlers (side effects of the events it holds: schedules, callback notices), then continues the run
if a transition left it runnable (a step budget was reached). Everything
is keyed on state or on derived names, so a record delivered twice, or out of order, changes nothing the
second time. The handlers come from the composition (interlude.composition): the adapters that own those side
effects sit above this layer.

A batch (issue 31 item 2) is taken run by run: each run's records in the order they came, the runs side by side
(`concurrently`). A run's head is read once for the batch, with its records (interlude.store.stream.OutboxRecords),
and every handler is handed that head (HeldRuns) instead of reading its own: any head read after the record's
transition committed is one the handlers already meet when a record comes late, so the batch's is as good as theirs.
A record that fails is reported alone, and the records of its run after it with it (they go again in order).

Before any record's handlers, the audit drafts the batch's event batches carry (format 5) are appended, each chain's
in one write (`AuditAppender`: app/audit.py AuditTrail.append_drafts, docs/adr/0128): a record whose chain's append
failed fails as a handler's failure does, before its handlers run.

A new run's first event batch may be put before the transaction that writes its run's head (docs/adr/0165), so it can
come here before the head exists: while it is younger than wiring.NEW_RUN_BATCH_WAIT_S it is not ready
(HeadNotYetCommitted: it goes again, its run's later records after it), and once older it is an orphan, a create that
never committed: dropped, nothing of it dispatched, its audit draft never appended, with one `count_orphan()` (the
entry point's metric: operators alarm on it) and a WARNING line naming what an operator looks up (docs/operations.md
§7): the tenant, the run, the event item's key and how long after its events were stamped it was dropped (a run found
later is a create that committed after the wait). Any other batch read without its head is of a run
deleted since, handled as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from interlude.domain.ids import tenant_of
from interlude.store.inbox import ClosedGate, closed_gates
from interlude.store.stream import (
    HANDED_BACK_AT,
    HELD_FOLLOWERS,
    HELD_HEAD_EXPIRY,
    carried_audit_draft,
    closed_inbox_entries,
    new_run_batch_stamped,
    record_key,
    stream_events,
)
from interlude.wiring import NEW_RUN_BATCH_FIRST_RETRY_S, NEW_RUN_BATCH_WAIT_S

if TYPE_CHECKING:
    from interlude.app.ports import Concurrently, InboxEntries, RunRecords
    from interlude.domain.audit import AuditDraft
    from interlude.domain.models.run import RunState
    from interlude.engine.run import Transition
    from interlude.store.idempotency import AnsweredRecord
    from interlude.store.live import Follower
    from interlude.store.retention import RetainedRun

# (run id, the RunEventDocs of one transition) -> None. Each must be idempotent.
OutboxHandler = Callable[[str, list[dict[str, Any]]], None]
# Continues a run the dispatch found runnable (app/lifecycle.py RunLifecycle.advance_run, given the run as read).
Advance = Callable[[str, "tuple[RunState, int]"], int]
# Appends a batch's audit drafts ((record id, source, draft)); answers the records whose append failed.
AuditAppender = Callable[[list[tuple[str, str, "AuditDraft"]]], dict[str, BaseException]]

logger = logging.getLogger(__name__)
T = TypeVar("T")


class HeldBack(Exception):
    """A record not tried because an earlier record of its run in the batch failed: it goes again after that one."""


class HeadNotYetCommitted(Exception):
    """A new run's event batch read before the transaction that creates its run committed: it goes again shortly."""


_STALE = object()


# What a thread holds per run for the record being dispatched, each under its name (HeldRuns._per_thread).
_HELD_PER_RUN = ("held", "followers", "expiries", "closed", "handed_back")


class HeldRuns:
    """The run records the outbox handlers read: the head of the run a thread is dispatching is the one read for its
    batch (`hold`); every other read, and every read on another thread, goes to the store. A run this process moved
    (`stale`) is read again at the next read, once, and that head held. Whatever retries a lost race on a run reads it
    through the store (its ledger), never through this."""

    def __init__(self, store: RunRecords) -> None:
        self.store = store
        # Per thread: run id -> its head as read for the batch (None: the run is gone).
        self._local = threading.local()
        # For the whole batch, every thread: what `once` read, by key.
        self._batch: dict[Any, _Once] = {}
        self._batch_lock = threading.Lock()

    def begin_batch(self) -> None:
        with self._batch_lock:
            self._batch = {}

    def once(self, key: Any, read: Callable[[], T]) -> T:
        """`read()`'s answer, read once for the batch being dispatched (by `key`; a thread that asks while another
        reads it waits for that answer): each record of the batch was committed before the batch read it, so an
        answer read after that is as new for every record as one read for it alone."""
        with self._batch_lock:
            entry = self._batch.setdefault(key, _Once())
        answer: T = entry.answer(read)
        return answer

    def _per_thread(self, name: str) -> dict[str, Any]:
        """This thread's map of what it holds under `name`, by run id (its batch's: heads, followers, expiries)."""
        found: dict[str, Any] | None = getattr(self._local, name, None)
        if found is None:
            found = {}
            setattr(self._local, name, found)
        return found

    def _held(self) -> dict[str, Any]:
        return self._per_thread("held")

    def hold(self, run_id: str, head: tuple[RunState, int] | None) -> None:
        self._held()[run_id] = head

    def stale(self, run_id: str) -> None:
        held = self._held()
        if run_id in held:
            held[run_id] = _STALE

    def release(self, run_id: str) -> None:
        for name in _HELD_PER_RUN:
            self._per_thread(name).pop(run_id, None)

    def _keep(self, name: str, run_id: str, value: Any) -> None:
        """Hold `value` for the run under `name`; None: nothing held (what an earlier record held is dropped)."""
        if value is None:
            self._per_thread(name).pop(run_id, None)
        else:
            self._per_thread(name)[run_id] = value

    def _followers(self) -> dict[str, Any]:
        return self._per_thread("followers")

    def hold_followers(self, run_id: str, followers: list[Follower] | None) -> None:
        """The run's live followers as read with its batch (None: not read, the deployment has no WebSocket API)."""
        self._keep("followers", run_id, followers)

    def _expiries(self) -> dict[str, Any]:
        return self._per_thread("expiries")

    def hold_expiry(self, run_id: str, expiry: tuple[int | None, int | None] | None) -> None:
        """The run head's `ttl` and `retentionStamped` as read with its batch (store/stream.py HELD_HEAD_EXPIRY)."""
        self._keep("expiries", run_id, expiry)

    def _closed(self) -> dict[str, Any]:
        return self._per_thread("closed")

    def _handed_back(self) -> dict[str, Any]:
        return self._per_thread("handed_back")

    def hold_handed_back(self, run_id: str, at: float | None) -> None:
        """When a resume handed the record's message back (store/stream.py HANDED_BACK_AT); None: it was never held."""
        self._keep("handed_back", run_id, at)

    def handed_back_at(self, run_id: str) -> float | None:
        """When a resume handed back the message of the record being dispatched, held while its tenant was suspended;
        None: it was not held."""
        at: float | None = self._handed_back().get(run_id)
        return at

    def hold_closed(self, run_id: str, closed: dict[str, ClosedGate]) -> None:
        """The gates the record's transition closed, by interrupt id, as the inbox keys it names tell them
        (store/inbox.py closed_gates)."""
        self._closed()[run_id] = closed

    def closed_gate(self, run_id: str, interrupt_id: str) -> ClosedGate | None:
        """The gate the record being dispatched closed under `interrupt_id`, as its inbox keys tell it; None: it
        closed none such (or names no entry of it)."""
        held: ClosedGate | None = self._closed().get(run_id, {}).get(interrupt_id)
        return held

    def held_retained(self, run_id: str) -> RetainedRun | None:
        """The run's head as read with this thread's batch, with its expiry; None when it was not read with it, or this
        process moved the run since."""
        from interlude.store.retention import RetainedRun

        head, expiry = self._held().get(run_id), self._expiries().get(run_id)
        if head is None or head is _STALE or expiry is None:
            return None
        state, version = head
        return RetainedRun.of(state, version, *expiry)

    def held_followers(self, run_id: str) -> list[Follower] | None:
        """The run's live followers as read with this thread's batch; None: not read with it (read them yourself)."""
        held: list[Follower] | None = self._followers().get(run_id)
        return held

    def get_run(self, run_id: str) -> tuple[RunState, int] | None:
        """The whole run: the held head's inputs read back from their event batch first where the batch left them there
        (store/stream.py OutboxRecords.records_of), once."""
        head = self.run_head(run_id)
        if head is not None and head[0].inputsDigest is not None:  # only a held head can lack them
            head = self._held()[run_id] = self.store.complete(head)
        return head

    def run_head(self, run_id: str) -> tuple[RunState, int] | None:
        """The head as read for the batch, its large inputs perhaps still in their event batch (RunState.inputsDigest
        set): what reads none of the inputs takes it so, and only a record whose handlers build on them (`get_run`)
        pays for reading them back (one eventually consistent item)."""
        held = self._held()
        if run_id not in held:
            return self.store.get_run(run_id)
        if held[run_id] is _STALE:
            held[run_id] = self.store.get_run(run_id)
        head: tuple[RunState, int] | None = held[run_id]
        return head

    def complete(self, head: tuple[RunState, int]) -> tuple[RunState, int]:
        return self.store.complete(head)

    def get_runs(self, run_ids: list[str]) -> dict[str, tuple[RunState, int]]:
        return self.store.get_runs(run_ids)

    def commit(
        self,
        transition: Transition,
        expected_version: int | None,
        now_iso: str,
        answered: AnsweredRecord | None = None,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
        expires: int | None = None,
    ) -> list[dict[str, Any]]:
        self.stale(transition.state.runId)
        return self.store.commit(transition, expected_version, now_iso, answered, open_runs_limit, audit, expires)

    def rewrite_head(self, state: RunState, expected_version: int) -> None:
        self.stale(state.runId)
        self.store.rewrite_head(state, expected_version)

    def read_events(
        self,
        run_id: str,
        after_sequence: int = -1,
        limit: int | None = None,
        holder: RunState | None = None,
        consistent: bool = False,
    ) -> list[dict[str, Any]]:
        return self.store.read_events(run_id, after_sequence, limit, holder, consistent)

    def raised_any(self, run_id: str, keys: list[str]) -> bool:
        return self.store.raised_any(run_id, keys)

    def raised_at(self, run_id: str, key: str, interrupt_id: str | None = None) -> str | None:
        closed = self.closed_gate(run_id, interrupt_id) if interrupt_id is not None else None
        return closed.raised_at if closed is not None else self.store.raised_at(run_id, key)

    def closed_interrupt(self, run_id: str, key: str) -> dict[str, Any] | None:
        return self.store.closed_interrupt(run_id, key)

    def gate_close(
        self, run_id: str, node_id: str, interrupt_id: str, after_seq: int
    ) -> tuple[str, dict[str, Any]] | None:
        return self.store.gate_close(run_id, node_id, interrupt_id, after_seq)


class _Once:
    """One answer, read by the first caller (again by the next one if that read failed)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read = False
        self._answer: Any = None

    def answer(self, read: Callable[[], Any]) -> Any:
        with self._lock:
            if not self._read:
                self._answer = read()
                self._read = True
            return self._answer


def runs_of(batch: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """(record id, stream record) pairs grouped by run, each run's in the batch's order; records of no run apart
    (under "")."""
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for record_id, record in batch:
        found = stream_events(record)
        groups.setdefault(found[0] if found else "", []).append((record_id, record))
    return groups


def handle_batch(
    batch: Sequence[tuple[str, dict[str, Any]]],
    heads: dict[str, tuple[RunState, int]],
    inbox: InboxEntries,
    outbox: Sequence[OutboxHandler],
    held: HeldRuns,
    advance: Advance,
    concurrently: Concurrently[Any, Any],
    append_audit: AuditAppender,
    now_s: float,
    count_orphan: Callable[[], None],
) -> dict[str, BaseException]:
    """Dispatch `batch` ((record id, stream record) pairs); `heads`: the heads of its runs as read for it (a run
    missing is gone, or not created yet); `now_s`: the epoch seconds it is read at; `count_orphan`: called once for
    each orphan dropped. Answers the records that failed: each with its exception (HeldBack behind a failed one,
    HeadNotYetCommitted for a new run's batch without its head)."""
    groups = runs_of(batch)
    held.begin_batch()
    waiting, orphans = _without_head(groups, heads, now_s)
    unaudited = _append_drafts([(i, r) for i, r in batch if i not in waiting and i not in orphans], append_audit)

    def run_group(run_id: str) -> dict[str, BaseException]:
        failed: dict[str, BaseException] = {}
        held.hold(run_id, heads.get(run_id))
        try:
            for record_id, record in groups[run_id]:
                if failed:
                    failed[record_id] = HeldBack(f"an earlier record of run {run_id} failed in this batch")
                    continue
                if record_id in waiting:
                    failed[record_id] = HeadNotYetCommitted(f"run {run_id} is not created yet")
                    continue
                if record_id in orphans:
                    pk, sk = record_key(record)
                    logger.warning(
                        "a new run's event batch whose run head never came (its create crashed or was refused, or"
                        " committed after the wait); dropped",
                        extra={
                            "tenant": tenant_of(run_id),
                            "runId": run_id,
                            "pk": pk,
                            "sk": sk,
                            "waitedSeconds": round(orphans[record_id], 1),
                            "orphanBatch": record_id,
                        },
                    )
                    count_orphan()
                    continue
                if record_id in unaudited:
                    failed[record_id] = unaudited[record_id]
                    continue
                try:
                    handle_record(record, inbox, outbox, held, advance)
                except Exception as exc:  # reported for this record alone (and those of its run after it)
                    failed[record_id] = exc
        finally:
            held.release(run_id)
        return failed

    outcome: dict[str, BaseException] = {}
    for failed in concurrently(run_group, list(groups)):
        outcome.update(failed)
    return outcome


def _without_head(
    groups: dict[str, list[tuple[str, dict[str, Any]]]], heads: dict[str, tuple[RunState, int]], now_s: float
) -> tuple[set[str], dict[str, float]]:
    """Of the records whose run's head the batch did not find, the new runs' first batches still waiting for it (younger
    than NEW_RUN_BATCH_WAIT_S) and the orphans (older: the seconds since their events were stamped), by record id."""
    waiting: set[str] = set()
    orphans: dict[str, float] = {}
    for run_id, records in groups.items():
        if not run_id or run_id in heads:
            continue
        for record_id, record in records:
            stamped = new_run_batch_stamped(record)
            if stamped is None:
                continue
            if now_s - stamped < NEW_RUN_BATCH_WAIT_S:
                waiting.add(record_id)
            else:
                orphans[record_id] = now_s - stamped
    return waiting, orphans


def head_wait_retry_s(receives: int) -> int:
    """Seconds a new run's batch waiting for its head is hidden after its `receives`-th receive (SQS's
    ApproximateReceiveCount): doubling from NEW_RUN_BATCH_FIRST_RETRY_S, never past the whole wait."""
    return int(min(NEW_RUN_BATCH_FIRST_RETRY_S * 2 ** max(receives - 1, 0), NEW_RUN_BATCH_WAIT_S))


def _append_drafts(batch: Sequence[tuple[str, dict[str, Any]]], append_audit: AuditAppender) -> dict[str, BaseException]:
    """Append the audit drafts the batch's records carry; the records whose draft could not be read or appended."""
    failed: dict[str, BaseException] = {}
    drafts: list[tuple[str, str, AuditDraft]] = []
    for record_id, record in batch:
        try:
            carried = carried_audit_draft(record)
        except Exception as exc:  # noqa: BLE001 - this record alone fails (an item too new, a draft unreadable)
            failed[record_id] = exc
            continue
        if carried is not None:
            drafts.append((record_id, *carried))
    return {**failed, **append_audit(drafts)} if drafts else failed


def handle_record(
    record: dict[str, Any],
    inbox: InboxEntries,
    outbox: Sequence[OutboxHandler],
    records: HeldRuns,
    advance: Advance,
) -> None:
    found = stream_events(record)
    if found is None:
        return
    run_id, events = found
    closed = closed_inbox_entries(record)
    records.hold_followers(run_id, record.get(HELD_FOLLOWERS))
    records.hold_expiry(run_id, record.get(HELD_HEAD_EXPIRY))
    records.hold_handed_back(run_id, record.get(HANDED_BACK_AT))
    records.hold_closed(run_id, closed_gates(closed))
    # Off the resolve's request path (docs/adr/0048, "Closed interrupts leave the inbox by the stream"); a
    # failure raises, so the record is delivered again.
    inbox.delete_inbox_entries(closed)
    for handler in outbox:
        handler(run_id, events)
    got = records.run_head(run_id)
    if (
        got is not None
        and not got[0].terminal
        and got[0].queue
        and (whole := records.get_run(run_id)) is not None
        and advance(run_id, whole)
    ):
        # The run moved: the next record of its run in this batch reads it again.
        records.stale(run_id)
