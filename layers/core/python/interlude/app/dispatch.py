"""The outbox consumer: every new event-log item on the table's stream comes here.

For each item it deletes the inbox entries of the interrupts the transition closed (named on the item), runs
the outbox handlers (side effects of the events it holds: schedules, callback notices), then continues the run
if a transition left it runnable (a step budget was reached). Everything
is keyed on state or on derived names, so a record delivered twice, or out of order, changes nothing the
second time. The handlers come from the composition (interlude.composition.outbox): the adapters that
own those side effects sit above this layer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from interlude.app.service import Service
from interlude.store.stream import closed_inbox_entries, stream_events

# (service, run id, the RunEventDocs of one transition) -> None. Each must be idempotent.
OutboxHandler = Callable[[Service, str, list[dict[str, Any]]], None]


def handle_record(service: Service, record: dict[str, Any], outbox: Sequence[OutboxHandler]) -> None:
    found = stream_events(record)
    if found is None:
        return
    run_id, events = found
    # Off the resolve's request path (docs/decisions.md, "Closed interrupts leave the inbox by the stream"); a
    # failure raises, so the record is delivered again.
    service.store.delete_inbox_entries(closed_inbox_entries(record))
    for handler in outbox:
        handler(service, run_id, events)
    service.advance_run(run_id)
