"""The outbox handler for deadlines: each deadline a transition introduced listed in the due index, and its bucket's
schedule made (ADR 0132). Nothing when a deadline is settled first: its bucket fires it and finds it settled.

Registered in interlude.composition (Services.outbox). It decides from the run head as it is now (one GetItem, only for
batches that hold an introducing event), never from the record alone, so a record delivered twice or out of order does
no harm: a deadline already settled is not listed, a due item written again is the same item, and a create that finds
the bucket's schedule is fine. A deadline already due when its record arrives is applied here at once (no schedule
needed); one due within DUE_SOON_S gets a schedule of its own, since its bucket may have fired before its item is
written. A deadline that a release before this one scheduled alone fires alone (and, settled first, finds nothing).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from interlude.adapters.scheduler import scheduler as scheduler_
from interlude.adapters.scheduler.names import occurrence
from interlude.engine import deadlines
from interlude.engine.deadlines import Deadline

if TYPE_CHECKING:
    from interlude.app.ports import DefinitionSource, RunLedger, RunRecords
    from interlude.domain.clock import Clock
    from interlude.store.due_index import DueIndex

log = logging.getLogger(__name__)

INTRODUCING = {"node.suspended", "node.started", "run.started"}
# A deadline due this soon after its record is read may fall in a bucket whose schedule has fired (or fires between
# the item's write and the schedule's create): it gets a schedule of its own, fired alone (clock skew and the calls'
# round trips are far below it).
DUE_SOON_S = 2.0


class DeadlineSchedules:
    def __init__(
        self, records: RunRecords, runs: RunLedger, definitions: DefinitionSource, clock: Clock, due_index: DueIndex
    ) -> None:
        self.records = records
        self.runs = runs
        self.definitions = definitions
        self.clock = clock
        self.due_index = due_index

    def on_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        if not {e["type"] for e in events} & INTRODUCING:
            return
        scheduler = scheduler_.from_env()
        if scheduler is None:
            return
        got = self.records.run_head(run_id)  # its deadlines alone, unless one is applied here
        if got is None:
            return
        state, _ = got
        new = introduced(state, events)
        now = self.clock().timestamp()
        if any(d.due <= now for d in new) and (whole := self.records.get_run(run_id)) is not None:
            # Already due (a short timeout, or a record processed late): apply it now, no schedule needed.
            state, _ = self.runs.apply_deadlines(*whole)
        for deadline in new:
            if not deadlines.is_pending(state, deadline):
                continue
            if deadline.due - now <= DUE_SOON_S:
                scheduler.ensure(run_id, deadline)
            else:
                # The item first: once its bucket's schedule exists, its invocation must find it.
                bucket = self.due_index.put(run_id, occurrence(deadline, run_id), deadline.as_input(run_id))
                scheduler.ensure_bucket(*bucket)


def introduced(state: Any, events: list[dict[str, Any]]) -> list[Deadline]:
    """Pending deadlines whose introducing event is in this batch."""
    suspended = {e["payload"].get("interruptId") for e in events if e["type"] == "node.suspended"}
    started = {e["payload"].get("nodeId") for e in events if e["type"] == "node.started"}
    run_started = any(e["type"] == "run.started" for e in events)
    out = []
    for deadline in deadlines.pending(state):
        if (
            (deadline.purpose == "interrupt" and deadline.interrupt_id in suspended)
            or (deadline.purpose == "delay" and deadline.node_id in started)
            or (deadline.purpose == "run" and run_started)
        ):
            out.append(deadline)
    return out


