"""The table's stream records, read back through the store's key layout (what `dispatch` consumes).

The `stream` function hands each new event-log item to the outbox queue as a message naming it (its key and sequence
number, never its events, so nothing of a run's data sits in SQS: interlude.adapters.outbox_feed); `dispatch` reads
the item back as the record the stream carried (`OutboxRecords.record_of`). Event-log items are written once and never changed, so
the item read is the image the stream held.
"""

from __future__ import annotations

from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.inbox import closed_entry_keys
from interlude.store.item_formats import check_item
from interlude.store.layout import run_id_of


def matches(pattern: Any, value: Any) -> bool:
    """Lambda event filtering, the part wiring.STREAM_FILTER uses: nested objects, and at a leaf a list of allowed
    values, each an exact value or `{"prefix": ...}`."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(k in value and matches(p, value[k]) for k, p in pattern.items())
    return any(_leaf(option, value) for option in pattern)


def _leaf(option: Any, value: Any) -> bool:
    if isinstance(option, dict):
        return isinstance(value, str) and value.startswith(option["prefix"])
    return bool(option == value)


def is_event_insert(record: dict[str, Any]) -> bool:
    """A record the deployed stream filter passes to `dispatch` (wiring.STREAM_FILTER): a new event-log item."""
    return matches(wiring.STREAM_FILTER, record)


def stream_events(record: dict[str, Any]) -> tuple[str, list[dict[str, Any]]] | None:
    """(run id, the RunEventDocs one transition wrote) of a new event-log item; None for any other record."""
    if not is_event_insert(record):
        return None
    run_id = record_run_id(record)
    if run_id is None:
        return None
    image = new_image(record)
    return run_id, a.unpacked(image["events"]) if "events" in image else []


def closed_inbox_entries(record: dict[str, Any]) -> list[a.Item]:
    """The inbox index keys a new event-log item names for deletion: the entries of the interrupts its
    transition closed (store/inbox.py, CLOSED_ENTRIES); none for any other record."""
    if not is_event_insert(record):
        return []
    return closed_entry_keys(new_image(record))


def new_image(record: dict[str, Any]) -> a.Item:
    """The record's new image, refused if its item is in a format this release does not read (a call's answers are
    checked by interlude.store.item_formats; a stream record reaches `dispatch` without one)."""
    image: a.Item = record["dynamodb"].get("NewImage") or {}
    check_item(image)
    return image


def record_run_id(record: dict[str, Any]) -> str | None:
    """The run a stream record's item belongs to; None for an item of no run."""
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    return run_id_of((keys.get(wiring.PARTITION_KEY) or {}).get("S", ""))


class OutboxRecords:
    """The stream records the outbox queue's messages name, read back from the table."""

    def __init__(self, client: Any, table: str) -> None:
        self.client = client
        self.table = table

    def record_of(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The stream record (INSERT, keys, new image, sequence number) of the item `message` names; None when the
        item is gone (its run was deleted since)."""
        key = a.key(message["pk"], message["sk"])
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        if item is None:
            return None
        return {
            "eventName": "INSERT",
            "dynamodb": {"Keys": key, "NewImage": item, "SequenceNumber": message.get("seq", "")},
        }
