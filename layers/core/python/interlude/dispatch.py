"""The outbox consumer: every new event-log item on the table's stream comes here.

It continues runs left runnable (a transition that hit its step budget) and is where side effects of
events hang (schedules, callback notices). Everything it does is keyed on state, so a record delivered
twice, or out of order, changes nothing the second time.
"""

from __future__ import annotations

from typing import Any

from . import wiring
from .service import Service


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


def handle_record(service: Service, record: dict[str, Any]) -> None:
    if not is_event_insert(record):
        return
    pk = record["dynamodb"]["Keys"][wiring.PARTITION_KEY]["S"]
    run_id = run_id_of(pk)
    if run_id is not None:
        service.advance_run(run_id)
