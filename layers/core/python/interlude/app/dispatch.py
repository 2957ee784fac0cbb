"""The outbox consumer: every new event-log item on the table's stream comes here.

For each item it deletes the inbox entries of the interrupts the transition closed (named on the item), runs
the outbox handlers (side effects of the events it holds: schedules, callback notices), then continues the run
if a transition left it runnable (a step budget was reached). Everything
is keyed on state or on derived names, so a record delivered twice, or out of order, changes nothing the
second time. The handlers come from the composition (interlude.composition): the adapters that own those side
effects sit above this layer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from interlude.store.stream import closed_inbox_entries, stream_events

if TYPE_CHECKING:
    from interlude.app.ports import InboxEntries, RunRecords
    from interlude.domain.models.run import RunState

# (run id, the RunEventDocs of one transition) -> None. Each must be idempotent.
OutboxHandler = Callable[[str, list[dict[str, Any]]], None]
# Continues a run the dispatch found runnable (app/lifecycle.py RunLifecycle.advance_run, given the run as read).
Advance = Callable[[str, "tuple[RunState, int]"], int]


def handle_record(
    record: dict[str, Any],
    inbox: InboxEntries,
    outbox: Sequence[OutboxHandler],
    records: RunRecords,
    advance: Advance,
) -> None:
    found = stream_events(record)
    if found is None:
        return
    run_id, events = found
    # Off the resolve's request path (docs/adr/0048, "Closed interrupts leave the inbox by the stream"); a
    # failure raises, so the record is delivered again.
    inbox.delete_inbox_entries(closed_inbox_entries(record))
    for handler in outbox:
        handler(run_id, events)
    got = records.get_run(run_id)
    if got is not None and not got[0].terminal and got[0].queue:
        advance(run_id, got)
