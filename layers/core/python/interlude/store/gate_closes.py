"""What became of gates whose interrupt item is in format 3 (written once: domain/formats.GATE_STATUS_ON_HEAD).

Such an item holds no status and no resolution (docs/adr/0126). A gate is open while the run head's state holds it
(its open interrupts: `open_ids`); once closed, how it closed is the close's event in the run's log, written
by the transaction that closed it, from the item's `raisedSeq` on: `interrupt.resolved` naming its interruptId
(status "resolved"; the resolution is that event's payload, and `at` its timestamp), or `node.cancelled` of its node
(status "cancelled": its reason, and `at`). Readers that see the head use it; those that do not read the log
(`closes`): an item with no close there is open. A format-1 item keeps its own `status` and `resolution`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from interlude.domain import formats
from interlude.store import attributes as a
from interlude.store.layout import LAST_EVENT_SK, event_sk, run_pk

# A format-3 item's attribute: the first sequence of the events of the transition that opened it.
RAISED_SEQ = "raisedSeq"
# Event batches a Query page reads while looking for closes: a gate's close is nearly always within a few batches.
CLOSE_PAGE_BATCHES = 16
# The close events' payload fields that name the gate rather than tell how it closed.
_IDS = ("nodeId", "interruptId")


def written_once(doc: dict[str, Any]) -> bool:
    """Whether an interrupt item (as plain JSON) is in format 3, or 12 (format 3 with its payload held against its
    node: store/gate_payloads.py); an item in a format this release does not read is refused (item_too_new), never
    read as another."""
    written_in = doc.get(formats.FORMAT_FIELD)
    formats.check("interrupt", written_in)
    return written_in in (formats.GATE_STATUS_ON_HEAD, formats.GATE_PAYLOAD_AGAINST_DEFINITION)


def open_ids(head: a.Item) -> set[str]:
    """The interruptIds of the gates a run head item holds open (its word on every format-3 item's status)."""
    # The run model (and pydantic) loads with the first head read here: a function that imports the inbox's keys and
    # reads no head (migrate's steady turn) never builds it.
    from interlude.domain.models.run import state_from_json

    state = state_from_json(a.unpacked_json(head["state"]))
    return {interrupt.interruptId for interrupt in state.interrupts.values()}


def close_of(event: dict[str, Any], doc: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(status, resolution) when `event` closed the gate whose item is `doc`; None when it did not."""
    if event["sequence"] < int(doc[RAISED_SEQ]):
        return None
    payload = event.get("payload") or {}
    if event["type"] == "interrupt.resolved" and payload.get("interruptId") == doc["interruptId"]:
        resolution = {k: v for k, v in payload.items() if k not in _IDS}
        return "resolved", {**resolution, "at": event["timestamp"]}
    if event["type"] == "node.cancelled" and payload.get("nodeId") == doc["nodeId"]:
        return "cancelled", {"reason": payload.get("reason"), "at": event["timestamp"]}
    return None


def with_close(doc: dict[str, Any], close: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    """`doc` with the status (and resolution) a format-3 item's gate has: `close`'s, or open when there is none."""
    if close is None:
        return {**doc, "status": "open"}
    return {**doc, "status": close[0], "resolution": close[1]}


def closes(client: Any, table: str, run_id: str, docs: Iterable[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """The closes of the format-3 gates `docs` name (plain items), by interruptId, read from the run's events from the
    earliest one's `raisedSeq` on, no further than the last close found; a gate still open has none."""
    wanted = {doc["interruptId"]: doc for doc in docs}
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    if not wanted:
        return found
    start = min(int(doc[RAISED_SEQ]) for doc in wanted.values())
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
        "ExpressionAttributeValues": {":pk": a.s(run_pk(run_id)), ":lo": a.s(event_sk(start)), ":hi": a.s(LAST_EVENT_SK)},
        "ProjectionExpression": "events",
        "Limit": CLOSE_PAGE_BATCHES,
    }
    while True:
        page = client.query(**kwargs)
        for batch in page.get("Items") or []:
            for event in a.unpacked(batch["events"]):
                for interrupt_id, doc in list(wanted.items()):
                    close = close_of(event, doc)
                    if close is not None:
                        found[interrupt_id] = close
                        del wanted[interrupt_id]
            if not wanted:
                return found
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
