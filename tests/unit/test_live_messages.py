"""What a live follower is sent for a batch of events (interlude.app.live.event_messages): every event once, in order,
in messages of at most what API Gateway bills as one (32 KB), an event too large for a frame announced instead."""

from __future__ import annotations

import json

from interlude import wiring
from interlude.app.live import event_messages


def event(sequence: int, text_bytes: int) -> dict:
    return {"sequence": sequence, "type": "log.appended", "payload": {"text": "x" * text_bytes}}


def test_a_batch_goes_in_as_few_messages_as_are_billed_each_event_once_in_order():
    events = [event(n, 9_000) for n in range(10)]
    messages = [json.loads(data) for data in event_messages("t~2Fr1", events)]
    assert all(len(data) <= wiring.LIVE_API.message_bytes for data in event_messages("t~2Fr1", events))
    assert len(messages) == 4  # three 9 KB events a message
    assert [e for m in messages for e in m["events"]] == events
    assert {(m["type"], m["runId"]) for m in messages} == {("events", "t~2Fr1")}


def test_an_event_larger_than_a_message_goes_alone_and_one_larger_than_a_frame_is_announced_by_its_sequence():
    events = [event(0, 10), event(1, 40_000), event(2, 200_000), event(3, 10)]
    messages = [json.loads(data) for data in event_messages("r", events)]
    assert [(m["type"], [e["sequence"] for e in m.get("events", [])]) for m in messages] == [
        ("events", [0]),
        ("events", [1]),
        ("tooLarge", []),
        ("events", [3]),
    ]
    assert messages[2] == {"type": "tooLarge", "runId": "r", "sequence": 2}
