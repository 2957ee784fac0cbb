"""The table's stream records, read back through the store's key layout (what `dispatch` consumes)."""

from __future__ import annotations

from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.dynamo import run_id_of


def is_event_insert(record: dict[str, Any]) -> bool:
    """A new event-log item: what the deployed stream filter passes (and the local stream pump too)."""
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    sk = (keys.get(wiring.SORT_KEY) or {}).get("S", "")
    return record.get("eventName") == "INSERT" and sk.startswith(wiring.EVENT_ITEM_PREFIX)


def stream_events(record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """(run id, the RunEventDocs one transition wrote) of a new event-log item; None for any other record."""
    if not is_event_insert(record):
        return None
    run_id = record_run_id(record)
    if run_id is None:
        return None
    image = record["dynamodb"].get("NewImage") or {}
    return run_id, a.unpacked(image["events"]) if "events" in image else []


def record_run_id(record: dict[str, Any]) -> str | None:
    """The run a stream record's item belongs to; None for an item of no run."""
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    return run_id_of((keys.get(wiring.PARTITION_KEY) or {}).get("S", ""))
