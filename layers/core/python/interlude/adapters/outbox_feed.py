"""The `stream` function's one job (issue 26, S5): every new event-log item on the table stream goes to the outbox
queue as a message naming it, under its tenant's MessageGroupId, and `dispatch` takes it from there.

The stream is one ordered lane per shard that every tenant shares, and a batch waits for the one before it. Run
there, the outbox (starting children, advancing runs, queueing deliveries) let one tenant's churn hold every other
tenant's records behind it; forwarded, a record costs a tenth of a SendMessageBatch in the lane, and SQS fair
queues order the real work across tenants (docs/scale.md, "Fairness across tenants").
"""

from __future__ import annotations

from typing import Any

from interlude import wiring
from interlude.adapters.queues import send_grouped

MESSAGE_VERSION = 1


def queued(record: dict[str, Any]) -> dict[str, Any]:
    """The outbox message of a stream record: the item's key and the record's sequence number (read back by
    interlude.store.stream.OutboxRecords)."""
    keys = record["dynamodb"]["Keys"]
    return {
        "v": MESSAGE_VERSION,
        "pk": keys[wiring.PARTITION_KEY]["S"],
        "sk": keys[wiring.SORT_KEY]["S"],
        "seq": record["dynamodb"].get("SequenceNumber", ""),
    }


def outbox_message(raw: str) -> dict[str, Any]:
    """An outbox message's body as dispatch reads it: the item it names, in a format this release reads (else it
    raises: the message fails alone, and after OUTBOX_MAX_RECEIVES waits in the outbox's dead letters)."""
    # Here, not at the top: the stream function, which only forwards, loads none of what reading one takes.
    from interlude.adapters.held_work import read_message

    message = read_message(raw, "outbox")
    # Only an event-log item: the batch's one read takes each named item with its run's head, so a message naming the
    # head itself (or any other item the stream never forwards) would fail that read, and with it the whole batch.
    if (
        not isinstance(message.get("pk"), str)
        or not isinstance(message.get("sk"), str)
        or not message["sk"].startswith(wiring.EVENT_ITEM_PREFIX)
    ):
        raise ValueError(f"not an outbox message: it names no event-log item ({wiring.EVENT_ITEM_PREFIX}…)")
    return message


def message_group(message: dict[str, Any]) -> str:
    """The tenant an outbox message is queued under (its MessageGroupId): the item's partition is `T#{tenant}#…`."""
    return str(message["pk"]).split("#", 2)[1]


def forward(queue_url: str, records: list[dict[str, Any]]) -> int:
    """Queue a message for each of `records` (the mapping's filter passes new event-log items only; dispatch ignores
    anything else); returns how many. Raises when any could not be queued: the whole batch is then delivered again,
    and an item queued twice is handled twice, which the outbox absorbs."""
    if not queue_url:
        raise RuntimeError(f"{wiring.queue(wiring.OUTBOX_QUEUE).url_env} is not set: the records cannot be forwarded")
    messages = [queued(r) for r in records]
    send_grouped(queue_url, [(message_group(m), m) for m in messages], "outbox message")
    return len(messages)
