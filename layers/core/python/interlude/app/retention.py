"""Retention of finished runs (issue 30 item 4): every item of a run that ended (completed, failed, cancelled) gets
the table's TTL attribute, its end plus the tenant's `retentionDays`, after which DynamoDB deletes it. The audit
chain is never given one (docs/operations.md, "Retention").

The job's first turn is taken by dispatch, in the batch of the event-log item that ends a run or runs one again
(`on_events`, interlude.composition); a run that needs more turns has them from the migrations queue (functions/
migrate). A turn stamps the head first (the transaction that ends a run has done so already, with every item it
wrote), then pages through the run's partition stamping each item whose ttl is not the head's (and the effect records
its ledger names, the tasks its event batches requested), and checks after each page that the run has not moved
meanwhile (else it starts over). A turn out of time answers where it stopped; the next turn goes on from there (and a
turn repeated does no write twice: an item already carrying the ttl is left as it is). The run's search entries, its
listing entry and its own items written before its end carry a provisional expiry from their creation: the job
writes them again only for a run that ends too late for it (rules/run_search.stamped_at_end, listing_stamped_at_end,
items_stamped_at_end), the entries first; a run that ends within it has no item written but those without one (as an
earlier release wrote them). What an item of the partition names (a task, an effect record, its gates' search
entries) is stamped before the item, so a finished run whose items all have an expiry has had its turn whole: one
with an item without it has a turn to finish, which the retention sweep finds (their message dead-lettered, a deploy
cut them short). A turn that gives every item the run's expiry whatever it carries (a re-stamp; a run that ended too
late for its items' provisional expiry, whose ending transaction says so) is told by the head's `retentionStamped`:
0 while it is under way, the expiry it gave every item once it finished. Reasons: ADRs 0115, 0118, 0131, 0133.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from interlude.domain.clock import iso
from interlude.engine.effect_names import ACTION_REQUESTED, TASK, task_id
from interlude.engine.events import ends_run, reruns_run
from interlude.rules import run_search
from interlude.rules.retention import run_expiry
from interlude.store.layout import interrupt_sk
from interlude.store.retention import RESTAMPING

if TYPE_CHECKING:
    from typing import Any

    from interlude.domain.clock import Clock
    from interlude.store.retention import RetainedRun, RetentionStore, RunItem

# Run listing entries a page of a re-stamp job reads (each run: its head read, and if its expiry changes, its turn).
RESTAMP_PAGE = 50


class RunMoved(Exception):
    """The run moved while its turn read it (it ended, or ran again): the turn is taken again (its message)."""


class RunRetention:
    def __init__(
        self,
        store: RetentionStore,
        retention_days: Callable[[str], int],
        clock: Clock,
        searchable: Callable[[str], Iterable[str]] = lambda tenant: (),
        queue_turn: Callable[[str, str | None], None] | None = None,
        held: Callable[[str], RetainedRun | None] | None = None,
    ) -> None:
        self.store = store
        # A tenant's retentionDays (app/limits.py: read with its limits, cached briefly).
        self.retention_days = retention_days
        self.clock = clock
        # The metadata keys it declares searchable now: a run created before one was declared has its entries under
        # it from the search-keys job (app/search_keys.py), and they expire with it too.
        self.searchable = searchable
        # Queues a turn on the migrations queue (run id, the key to go on after): where a turn begun in dispatch ends.
        self.queue_turn = queue_turn
        # The run's head as dispatch read it with the record's batch, with its expiry (app/dispatch.py HeldRuns); None
        # where it was not read so.
        self.held = held

    def on_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        """The outbox handler of an event batch that ends a run or runs it again (issue 31): the run's first turn is
        taken here, in the dispatch batch that holds the record, one page of its items (PAGE_ITEMS, every item of
        nearly every run), so retention costs no invocation of its own. A run with more items goes on from the
        migrations queue where this page stopped; one that moved meanwhile is taken there from the start."""
        if self.queue_turn is None:
            raise RuntimeError("a retention taken in dispatch is composed with the migrations queue")
        held = self.held(run_id) if self.held is not None else None
        if held is not None and ended_with_nothing_to_write(held, events):
            return
        try:
            after = self.turn(run_id, None, lambda: False)
        except RunMoved:
            self.queue_turn(run_id, None)
            return
        if after is not None:
            self.queue_turn(run_id, after)

    def turn(self, run_id: str, after: str | None, has_time: Callable[[], bool], listing: bool = False) -> str | None:
        """Retain the run's items from sort key `after` on while `has_time()`; None once the run is done with, else
        the key to go on after. Raises RunMoved when the run moved meanwhile (the turn is taken again). `listing`: its
        listing entry and tasks are written whatever their provisional expiry (the daily sweep found the entry without
        one: written so by a build before ADR 0131, whose tasks had none either)."""
        # A turn from the start reads its first page before the head: nearly always the page holds the head.
        first = self.store.items_page(run_id, None) if after is None else None
        run = first.head if first is not None and first.head is not None else self.store.retained_run(run_id)
        if run is None:
            return None  # gone: deleted, or expired already
        target = self._target(run_id, run)
        if target is not None and run.ttl is None and run.stamped is None:
            # `_target` gave the head its expiry, and its mark when the turn writes every item.
            late = run.provisional is not None and run_search.items_stamped_at_end(run.provisional, target)
            run = replace(run, stamped=RESTAMPING if late else None)
        if first is not None and (first.head is None or target != run.ttl):
            # A page is stamped only if it was read with the head, or after it and after any change of its expiry (a
            # late writer that confirmed against the head before that change wrote before the page: it is read).
            first = None
        # The run's items keep the provisional expiry they were written with when the run ended soon enough for it
        # (ADR 0133: an item is written only if it has none, or one before the run's); else every item takes the
        # run's, and the head says the turn is under way until it is whole (RETAINED: the ending transaction wrote 0).
        whole = self._whole(run_id, run, target)
        wanted, later_kept = self._wanted(run, target)
        searched = run_search.stamped_at_end(run.state, target)
        # The listing entry keeps the provisional expiry it was written with unless the run ended too late for it (or
        # ended before it had one, or runs again: rules/run_search.listing_stamped_at_end).
        outside = target is None or listing or run.ttl is None or run_search.listing_stamped_at_end(run.state, target)
        expiry = run_search.listing_expiry(run.state, target, self.clock().timestamp()) if outside else None
        # The tasks keep the provisional expiry they were written with, the run's items' (ADR 0142), as those items
        # do; a task may have none where an item would say so by its attribute, so they are written too when the run
        # ended with that expiry near (rules/run_search.tasks_stamped_at_end).
        tasks = listing or run.ttl is None or run_search.tasks_stamped_at_end(run.provisional, later_kept, run.state.completedAt)
        if after is None:
            # First, what lies outside the run's partition and is the run's as a whole: its items, stamped after,
            # say the turn is whole (the daily sweep looks for a finished run's items without an expiry:
            # interlude.migrations.sweeps).
            if searched:
                later = run_search.metadata_families(run.state, self.searchable(run.state.tenant))
                self.store.put_search_entries(run.state, run_search.creation_families(run.state) + later, target)
            if outside:
                self.store.set_listing_ttl(run.state, expiry)
        # A run that runs again keeps, on each gate it holds open, the expiry that gate's opening gave it and its inbox
        # entries (store/transitions.gates_expiry): taken off the gate alone, it would leave the entries to expire
        # while no daily sweep finds the gate (docs/adr/0154). The sweep takes it off both once near.
        open_gates = {interrupt_sk(i.key) for i in run.state.interrupts.values()} if target is None else set()
        while True:
            page = first or self.store.items_page(run_id, after)
            first = None
            items, last = page.items, page.last
            for item in items:
                # What an item names before the item itself: once every item of the partition has the run's expiry,
                # so has everything they name.
                for task in requested_tasks(run_id, item.events) if tasks else ():
                    self.store.set_task_ttl(task, wanted)
                # The search entries of the words of the gates this batch opened (the run's own: above), when their
                # provisional expiry does not do (rules/run_search.stamped_at_end).
                if searched and (gates := run_search.gate_families(run.state, requested_gates(item.events))):
                    self.store.put_search_entries(run.state, gates, target)
                # A gate opened after the head was read (by the transition at its next sequence) is not known open
                # or closed: left as its opening wrote it, with its inbox entries; the check below finds the move, and
                # the turn taken again knows it.
                opened_since = item.raised is not None and item.raised >= run.state.nextSeq
                if item.sk not in open_gates and not opened_since:
                    self._retain(run_id, item, target, wanted, run.provisional if later_kept else None)
            # The run moved (it ran again, or ended anew): its next turn starts over with what it is now.
            self._unmoved(run_id, run)
            if last is None:
                break
            after = last
            if not has_time():
                return after
        if target is not None and whole:
            # A re-stamped head, or a run ended too late for its items' provisional expiry: the head says its turn is
            # whole. A run that moved meanwhile is left unmarked; its move queued its own turn.
            self.store.mark_retained(run_id, run.version, target)
        return None

    def _whole(self, run_id: str, run: RetainedRun, target: int | None) -> bool:
        """Whether the turn marks the head once it is whole: a turn that writes every item whatever it carries (a
        re-stamp, or a run that ended too late for its items' provisional expiry). The head of such a turn says it is
        under way from before its first write (the ending transaction's 0, or a re-stamp's); one that does not yet (the
        run ended under an earlier release) is marked now, so that a turn cut short is found by the daily sweep."""
        if target is None or run.stamped == target:
            return False
        if run.stamped is not None:
            return True
        if run.provisional is None or not run_search.items_stamped_at_end(run.provisional, target):
            return False
        if not self.store.expire_head(run_id, run.version, target, restamped=True):
            raise RunMoved(run_id)
        return True

    def _wanted(self, run: RetainedRun, target: int | None) -> tuple[int | None, bool]:
        """The expiry the turn gives an item of the run, and whether an item that carries a later one keeps it."""
        if target is None:
            # The run runs again: its items take the provisional expiry back, or none when it is near (the sweep's).
            return run_search.open_expiry(run.provisional, self.clock().timestamp()), False
        # A run that ended soon enough: an item written with the provisional expiry (never before the run's) keeps it.
        soon = run.provisional is not None and not run_search.items_stamped_at_end(run.provisional, target)
        return target, soon and run.stamped is None

    def _unmoved(self, run_id: str, run: RetainedRun) -> None:
        now = self.store.retained_run(run_id)
        if now is None or now.version != run.version:
            raise RunMoved(run_id)

    def _target(self, run_id: str, run: RetainedRun) -> int | None:
        """The ttl every item of the run is to carry: the head's, set now if the finished run has none yet; None for a
        run that is not finished (it runs again)."""
        if not run.state.terminal:
            return None
        if run.ttl is not None:
            return run.ttl
        ttl = run_expiry(run.state.completedAt, self.retention_days(run.state.tenant), self.clock())
        # Ended too late for its items' provisional expiry: the head says the turn is under way (`_whole`).
        late = run.provisional is not None and run_search.items_stamped_at_end(run.provisional, ttl)
        if not self.store.expire_head(run_id, run.version, ttl, restamped=late):
            raise RunMoved(run_id)
        return ttl

    def _retain(self, run_id: str, item: RunItem, target: int | None, wanted: int | None, kept_to: int | None) -> None:
        """`kept_to`: the latest expiry an item keeps rather than `wanted` (the provisional one it was written with, when
        the run ended soon enough for it); a later one (a gate written with its search entries' expiry while the
        provisional one was near, store/transitions.gates_expiry) takes `wanted`."""
        if item.effect_id is not None:
            # A ledger entry (and its effect record) keeps its own expiry when that is later: never less than 14 days
            # past its effect (OpenWOP idempotency.md), and written while the run was open, its items' provisional one
            # when later (ADR 0142). Its effect record expires no sooner than it (written in the same transaction, or
            # kept by a reusing run's worker: store/effects.py), so an entry that outlives the run says both do. A run
            # that runs again leaves them as they are.
            if target is not None and (item.ttl is None or item.ttl < target):
                self.store.raise_effect_ttl(item.effect_id, target)
                self.store.raise_ttl(run_id, item.sk, target)
            return
        if item.ttl == wanted or (kept_to is not None and item.ttl is not None and wanted is not None and wanted < item.ttl <= kept_to):
            return
        self.store.set_item_ttl(run_id, item.sk, wanted, item.where)


def ended_with_nothing_to_write(run: RetainedRun, events: list[dict[str, Any]]) -> bool:
    """Whether the end these events record leaves the run's retention turn nothing to write, decided on the head read
    with them, without reading the run's items (ADR 0176): the run ended in this transition (not one that also ran it
    again) and has not moved since; its ending transaction gave the head its expiry, no later than its items'
    provisional one, and no mark that a turn must write every item. Then every item written before the end keeps the
    provisional expiry it was written with, every one written after takes the head's (store/expiry.py), an effect's
    ledger entry keeps its own later one, and the run's search entries, listing entry and tasks keep theirs: what a turn
    would write is an item with no expiry at all (written by a release before 0.3.0), which the daily sweep finds
    (migrations/sweeps.py)."""
    state, target = run.state, run.ttl
    if not state.terminal or target is None or run.stamped is not None:
        return False
    if run_search.items_stamped_at_end(run.provisional, target):
        return False
    if not ends_run(events) or reruns_run(events) or state.nextSeq != max(e["sequence"] for e in events) + 1:
        return False
    # Past the run's creation + retentionDays, the search entries' expiry lies 90 days, the listing entry's 60 (less
    # LISTING_KEPT_DAYS), the items' 7: a run that ended within the items' margin leaves the first two as they are
    # already. They are asked still, so that a change of those margins cannot make this answer wrong.
    return not (
        run_search.stamped_at_end(state, target)
        or run_search.listing_stamped_at_end(state, target)
        or run_search.tasks_stamped_at_end(run.provisional, True, state.completedAt)
    )


class Restamp:
    """A change of a tenant's `retentionDays` given to its runs finished before it (ADR 0118): a job per tenant
    (store/retention.py's `RESTAMP` item, started by the settings change's own transaction, replaced by a later
    change) that reads the tenant's run listing shard by shard, a page a step, and for each finished run whose expiry
    is not its end plus the new period sets the head's and takes the run's retention turn. Each page is recorded
    (where the job goes on, runs seen and re-stamped: its progress, shown with the settings); a turn out of time stops
    after a page, and the next goes on from the record. A page taken twice re-stamps nothing twice."""

    def __init__(self, store: RetentionStore, retention: RunRetention, clock: Clock, shards: int) -> None:
        self.store = store
        self.retention = retention
        self.clock = clock
        self.shards = shards

    def turn(self, tenant: str, generation: str | None, has_time: Callable[[], bool]) -> bool:
        """Pages of the tenant's job while `has_time()`: True once it is done (or replaced by a later change than
        `generation`; None: whichever job stands), False when the next turn is to go on."""
        while True:
            job = self.store.restamp_job(tenant)
            if job is None or job["state"] != "running" or generation not in (None, job["generation"]):
                return True
            shard, after = int(job["shard"]), job.get("after")
            runs, last = self.store.listing_page(tenant, shard, after, RESTAMP_PAGE)
            restamped = sum(self._restamp(run_id, int(job["days"])) for run_id in runs)
            next_shard, next_after = (shard, last) if last is not None else (shard + 1, None)
            # Not recorded: another copy of this turn recorded the page first, or a later change replaced the job.
            self.store.record_restamp(tenant, job, next_shard, next_after, len(runs), restamped, iso(self.clock()))
            if next_shard >= self.shards:
                return True
            if not has_time():
                return False

    def _restamp(self, run_id: str, days: int) -> bool:
        """The finished run's expiry made its end plus `days`, every item of it with it; whether it changed. A turn
        that found the run moved (it ran again, or ended anew) may have written the expiry after the turn its move
        queued was taken: the run's turn is taken again, whatever the run is now (running: its items get their open
        expiry back)."""
        changed = moved = False
        for _ in range(3):
            run = self.store.retained_run(run_id)
            if run is None:
                return changed  # gone
            if run.state.terminal:
                target = run_expiry(run.state.completedAt, days, self.clock())
                if run.ttl != target:
                    if not self.store.expire_head(run_id, run.version, target, restamped=True):
                        continue  # it moved before anything was written: read again
                    changed = True
                elif not moved:
                    return changed
            elif not moved:
                return changed  # running: it takes the period in force when it ends
            try:
                self.retention.turn(run_id, None, lambda: True)
            except RunMoved:
                moved = True
                continue
            return changed
        return changed  # it kept moving: its moves queued its turns, and the daily sweep finds what they left


def requested_gates(events: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The payloads of the gates an event batch opened (`interrupt.requested`: their kind and data, the title there; a
    format-9 batch keeps all of them but a large text: domain/head_parts.py lean_events)."""
    return [e["payload"] for e in events if e.get("type") == "interrupt.requested" and isinstance(e.get("payload"), dict)]


def requested_tasks(run_id: str, events: tuple[dict[str, Any], ...]) -> list[str]:
    """The tasks an event batch requested (engine.tasks: an action requested of kind `task`), by id."""
    return [
        task_id(run_id, e["payload"]["nodeId"], e["payload"]["visit"])
        for e in events
        if e.get("type") == ACTION_REQUESTED and (e.get("payload") or {}).get("kind") == TASK
    ]
