"""Following a run live over the local stack's WebSocket API (ADR 0143) with a real WebSocket client (`websockets`):
a run created, followed from its first event, resolved over HTTP and followed to its end, every event once in
order (the replay and the batches `dispatch` sends); a handshake refused as the SSE route refuses a request."""

from __future__ import annotations

import json
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.support.local_stack import wire

RUN_ENDS = {"run.completed", "run.failed", "run.cancelled"}
# Long enough for a batch to cross the stream, the outbox queue and dispatch on a loaded machine; no assertion is timed.
RECEIVE_S = 60


def following(url: str, key: str) -> ClientConnection:
    return connect(url, additional_headers={"Authorization": f"Bearer {key}"}, open_timeout=RECEIVE_S)


def events_until(live: ClientConnection, last_type: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every message received, the events they held) up to the first event of type `last_type`."""
    messages: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    while not events or events[-1]["type"] != last_type:
        message = json.loads(live.recv(timeout=RECEIVE_S))
        messages.append(message)
        events += message.get("events", [])
    return messages, events


def test_a_client_follows_a_run_from_its_creation_through_its_decision_to_its_end(api, stack_info):
    workflow = api.fixture("conformance-approval")
    reader = api.new_key(["runs:read"])
    run_id = api.start(workflow)["runId"]
    with following(stack_info["liveUrl"], reader) as live:
        live.send(json.dumps({"action": "subscribe", "runId": wire(run_id)}))
        messages, replayed = events_until(live, "node.suspended")
        assert messages[0] == {
            "type": "subscribed",
            "runId": wire(run_id),
            "after": -1,
            "following": True,
            "lastSequence": replayed[-1]["sequence"],
            "more": False,
        }
        assert [e["sequence"] for e in replayed] == list(range(len(replayed)))

        assert api.resolve(run_id, "gate", {"action": "accept"}).status_code == 200
        _, pushed = events_until(live, "run.completed")
    # At least once, in order: a batch sent by the replay and by dispatch both is skipped by its sequence.
    seen: dict[int, dict[str, Any]] = {}
    for event in replayed + pushed:
        seen.setdefault(event["sequence"], event)
    assert sorted(seen) == list(range(len(seen)))
    assert [seen[n] for n in sorted(seen)] == api.events(run_id)
    assert seen[max(seen)]["type"] == "run.completed"


@pytest.mark.parametrize(("scopes", "status"), [(None, 401), (["workflows:read"], 403)])
def test_a_handshake_is_refused_as_the_sse_route_refuses_a_request(api, stack_info, scopes, status):
    key = api.new_key(scopes) if scopes else "not-a-key"
    with pytest.raises(InvalidStatus) as refused:
        following(stack_info["liveUrl"], key)
    assert refused.value.response.status_code == status
    assert json.loads(refused.value.response.body)["error"] in {"unauthenticated", "forbidden"}
