"""The outbox consumer: every new event-log item on the table's stream comes here.

For each item it runs the outbox handlers (side effects of the events it holds: schedules, callback
notices), then continues the run if a transition left it runnable (a step budget was reached). Everything
is keyed on state or on derived names, so a record delivered twice, or out of order, changes nothing the
second time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import wiring
from .delivery.outbox import callback_notices
from .hitl import resolve_kept_events
from .service import Service
from .store.attributes import unpacked
from .timeouts import outbox as deadline_schedules

# (service, run id, the RunEventDocs of one transition) -> None. Each must be idempotent.
OutboxHandler = Callable[[Service, str, list[dict[str, Any]]], None]

# Declared once, in order. Features add their handler here.
OUTBOX: tuple[OutboxHandler, ...] = (deadline_schedules.on_events, callback_notices, resolve_kept_events)


def run_id_of(pk: str) -> str | None:
    # pk is T#{tenant}#R#{opaque}
    parts = pk.split("#")
    if len(parts) != 4 or parts[0] != "T" or parts[2] != "R":
        return None
    return f"{parts[1]}/{parts[3]}"


def is_event_insert(record: dict[str, Any]) -> bool:
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    sk = (keys.get(wiring.SORT_KEY) or {}).get("S", "")
    return record.get("eventName") == "INSERT" and sk.startswith(wiring.EVENT_ITEM_PREFIX)


def events_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    image = (record.get("dynamodb") or {}).get("NewImage") or {}
    return unpacked(image["events"]) if "events" in image else []


def handle_record(service: Service, record: dict[str, Any], outbox: tuple[OutboxHandler, ...] = OUTBOX) -> None:
    if not is_event_insert(record):
        return
    run_id = run_id_of(record["dynamodb"]["Keys"][wiring.PARTITION_KEY]["S"])
    if run_id is None:
        return
    events = events_of(record)
    for handler in outbox:
        handler(service, run_id, events)
    service.advance_run(run_id)
