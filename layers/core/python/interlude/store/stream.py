"""The table's stream records, read back through the store's key layout (what `dispatch` consumes).

The `stream` function hands each new event-log item to the outbox queue as a message naming it (its key and sequence
number, never its events, so nothing of a run's data sits in SQS: interlude.adapters.outbox_feed); `dispatch` reads
the items of a batch back as the records the stream carried, with their runs' heads (`OutboxRecords.records_of`).
Event-log items are written once and never changed, so the item read is the image the stream held.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude import wiring
from interlude.domain import formats
from interlude.domain.clock import epoch_of
from interlude.store import attributes as a
from interlude.store import audit as audit_log
from interlude.store.inbox import closed_entry_keys
from interlude.store.item_formats import check_item
from interlude.store.layout import RETAINED, RUN_SK, run_id_of, run_pk
from interlude.store.live import followers_key, followers_of
from interlude.store.table import batch_get
from interlude.store.tenants import HANDED_BACK_AT, handed_back_at

if TYPE_CHECKING:
    from interlude.domain.audit import AuditDraft
    from interlude.domain.models.run import RunState

# What `OutboxRecords.records_of` adds to the record of a format-9 event batch: the gate payloads its events hold
# elsewhere, by interrupt key, which `stream_events` puts back.
HELD_PAYLOADS = "heldPayloads"
# The record's run's live followers as read with its head (store/live.py), where the deployment has a WebSocket API.
HELD_FOLLOWERS = "heldFollowers"
# The record's run head's expiry as read with the batch: its `ttl` and its `retentionStamped` (store/expiry.py), each
# None where the head has none; absent when the head was not read (app/retention.py decides on them whether a run's end
# leaves its retention turn anything to write).
HELD_HEAD_EXPIRY = "heldHeadExpiry"


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
    events: list[dict[str, Any]] = a.unpacked(image["events"]) if "events" in image else []
    if _holds_gate_texts(image):
        from interlude.domain.head_parts import events_filled  # the run model loads with the first such batch

        events_filled(run_id, events, record.get(HELD_PAYLOADS) or {})
    return run_id, events


def new_run_batch_stamped(record: dict[str, Any]) -> float | None:
    """When (epoch seconds) the events of a new run's first event batch (from sequence 0: the one its creation wrote)
    were stamped; None for any other record. The only batch a writer may put before its run's head (docs/adr/0165)."""
    if not is_event_insert(record) or new_image(record).get("first") != a.n(0):
        return None
    found = stream_events(record)
    return epoch_of(found[1][0]["timestamp"]) if found and found[1] else None


def _holds_gate_texts(image: a.Item) -> bool:
    """Whether an event batch holds gate payloads elsewhere (format 9: domain/head_parts.py)."""
    return (image.get(formats.FORMAT_FIELD) or {}).get("N") == str(formats.GATE_TEXT_OFF_EVENTS)


def carried_audit_draft(record: dict[str, Any]) -> tuple[str, AuditDraft] | None:
    """(its source, the draft) of the audit entry a new event-log item carries for the appender (format 5); None
    for any other record."""
    if not is_event_insert(record):
        return None
    draft = audit_log.carried_draft(new_image(record))
    if draft is None:
        return None
    return audit_log.draft_source(*record_key(record)), draft


def closed_inbox_entries(record: dict[str, Any]) -> list[tuple[str, a.Item]]:
    """The inbox index keys a new event-log item names for deletion, each with its table: the entries of the interrupts
    its transition closed (store/inbox.py, CLOSED_ENTRIES); none for any other record."""
    if not is_event_insert(record):
        return []
    return closed_entry_keys(new_image(record))


def new_image(record: dict[str, Any]) -> a.Item:
    """The record's new image, refused if its item is in a format this release does not read (a call's answers are
    checked by interlude.store.item_formats; a stream record reaches `dispatch` without one)."""
    image: a.Item = record["dynamodb"].get("NewImage") or {}
    check_item(image)
    return image


def record_key(record: dict[str, Any]) -> tuple[str, str]:
    """(pk, sk) of a stream record's item."""
    keys = record["dynamodb"]["Keys"]
    return keys[wiring.PARTITION_KEY]["S"], keys[wiring.SORT_KEY]["S"]


def record_run_id(record: dict[str, Any]) -> str | None:
    """The run a stream record's item belongs to; None for an item of no run."""
    keys = (record.get("dynamodb") or {}).get("Keys") or {}
    return run_id_of((keys.get(wiring.PARTITION_KEY) or {}).get("S", ""))


class OutboxRecords:
    """The stream records the outbox queue's messages name, read back from the table."""

    def __init__(self, client: Any, table: str, followers: bool = False) -> None:
        self.client = client
        self.table = table
        # Read each run's live followers with its head (the deployment has a WebSocket API: wiring.LIVE_API).
        self.followers = followers

    def records_of(
        self, messages: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any] | None], dict[str, tuple[RunState, int]]]:
        """The stream record (INSERT, keys, new image, sequence number) of the item each of `messages` names (None where
        it is gone: its run was deleted since), and the heads of their runs (a run that is gone is left out). One
        strongly consistent BatchGetItem (100 keys a call) for an outbox batch, read after every item it names was
        committed: each head is at least as new as its run's items. A format-4 head's gate payloads are put back; its
        large inputs only where the batch read the event batch that holds them (else they stay there, `inputsDigest`
        set: app/dispatch.py HeldRuns.get_run reads them for a handler that asks for the whole run)."""
        # The run model loads with the first batch, not at a cold start.
        from interlude.store import head_parts
        from interlude.store.runs import head_of

        keys = [a.key(m["pk"], m["sk"]) for m in messages]
        runs = list(dict.fromkeys(r for r in (run_id_of(m["pk"]) for m in messages) if r is not None))
        wanted = list({(k["pk"]["S"], k["sk"]["S"]): k for k in keys}.values()) + [
            a.key(run_pk(r), RUN_SK) for r in runs
        ]
        if self.followers:
            wanted += [followers_key(r) for r in runs]
        found = {
            (item[wiring.PARTITION_KEY]["S"], item[wiring.SORT_KEY]["S"]): item
            for item in batch_get(self.client, self.table, wanted, ConsistentRead=True)
        }
        records: list[dict[str, Any] | None] = []
        for message, key in zip(messages, keys, strict=True):
            item = found.get((key["pk"]["S"], key["sk"]["S"]))
            records.append(
                None
                if item is None
                else {
                    "eventName": "INSERT",
                    "dynamodb": {"Keys": key, "NewImage": item, "SequenceNumber": message.get("seq", "")},
                }
            )
        heads = {r: head_of(found[(run_pk(r), RUN_SK)]) for r in runs if (run_pk(r), RUN_SK) in found}
        for message, record in zip(messages, records, strict=True):
            handed_back = handed_back_at(message)
            if record is not None and handed_back is not None:
                record[HANDED_BACK_AT] = handed_back
        for record in records:
            run_id = record_run_id(record) if record is not None else None
            if record is None or run_id is None:
                continue
            if run_id in heads:
                head = found[(run_pk(run_id), RUN_SK)]
                record[HELD_HEAD_EXPIRY] = (a.integer(head, wiring.TTL_ATTRIBUTE), a.integer(head, RETAINED))
            if self.followers:
                key = followers_key(run_id)
                record[HELD_FOLLOWERS] = followers_of(found.get((key["pk"]["S"], key["sk"]["S"])))
        head_parts.complete(self.client, self.table, (state for state, _ in heads.values()), found, inputs=False)
        self._hold_gate_texts(records, {r: state for r, (state, _) in heads.items()})
        return records, heads

    def _hold_gate_texts(self, records: list[dict[str, Any] | None], heads: dict[str, RunState]) -> None:
        """Add to each record of a format-9 batch the gate payloads its events hold elsewhere (HELD_PAYLOADS): its run's
        head holds an open gate's (no read); a closed gate's are read, one BatchGetItem for the records together."""
        from interlude.store import head_parts

        holding = [
            (record, run_id, a.unpacked(image["events"]))
            for record in records
            if record is not None
            and _holds_gate_texts(image := record["dynamodb"]["NewImage"])
            and (run_id := record_run_id(record)) is not None
        ]
        if not holding:
            return
        payloads = head_parts.event_payloads(self.client, self.table, [(r, events) for _, r, events in holding], heads)
        for record, run_id, _ in holding:
            record[HELD_PAYLOADS] = payloads.get(run_id, {})
