"""The outbox consumer: every new event-log item on the table's stream comes here.

For each item it runs the outbox handlers (side effects of the events it holds: schedules, callback
notices), then continues the run if a transition left it runnable (a step budget was reached). Everything
is keyed on state or on derived names, so a record delivered twice, or out of order, changes nothing the
second time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlude.adapters.delivery.outbox import callback_notices
from interlude.adapters.scheduler import outbox as deadline_schedules
from interlude.app.interactions import resolve_kept_events
from interlude.app.service import Service
from interlude.store.stream import stream_events

# (service, run id, the RunEventDocs of one transition) -> None. Each must be idempotent.
OutboxHandler = Callable[[Service, str, list[dict[str, Any]]], None]

# Declared once, in order. Features add their handler here.
OUTBOX: tuple[OutboxHandler, ...] = (deadline_schedules.on_events, callback_notices, resolve_kept_events)


def handle_record(service: Service, record: dict[str, Any]) -> None:
    found = stream_events(record)
    if found is None:
        return
    run_id, events = found
    for handler in OUTBOX:
        handler(service, run_id, events)
    service.advance_run(run_id)
