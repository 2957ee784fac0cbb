"""The ModuleX listen stream (`GET /workflows/listen/{run_id}`) as the contract's SDKs read it, on the real local stack
(the real handler behind the local HTTP gateway on 127.0.0.1, over moto).

modulex-python 1.0 and modulex-js 1.0 send no Last-Event-ID: each `listen()` reads one response from its first frame,
skips heartbeats (Python), stops after `done`, `error`, `cancelled` or `interrupted`, and otherwise stops where the
response ends. One response carries at most 4 MiB of events and lasts a bounded time. What such a client must get:
every response reaches the present (a run whose history is larger than one response included), and one that ends
while the run waits says so with a frame the SDKs stop on. A client that sends Last-Event-ID still reads every frame,
in order, none twice, a response at a time.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from interlude.domain.budgets import MAX_ANSWER_BYTES
from interlude.faces.modulex.definition import START_NODE
from interlude.faces.modulex.references import engine_id
from tests.support.local_stack import Api, running_stack, until
from tests.support.modulex_example import node
from tests.support.modulex_sdk import SHORT_STREAM_BOUNDS

# What modulex-python 1.0's stream parser skips and stops after (modulex/_streaming.py).
HEARTBEATS = frozenset({"heartbeat", "keepalive"})
TERMINAL = frozenset({"done", "error", "cancelled", "interrupted"})
# The OpenWOP events a ModuleX frame stands for (interlude.faces.modulex.frames).
PROJECTED = frozenset(
    {
        "run.started",
        "run.completed",
        "run.failed",
        "run.cancelled",
        "node.started",
        "node.completed",
        "node.failed",
        "node.retried",
        "interrupt.requested",
        "interrupt.resolved",
    }
)
# A history past one response: each round of the loop below records three outputs of 64,000 characters.
CHUNK = "x" * 2_000
BIG = "{{input.chunk}}" * 32


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("modulex-listen"), SHORT_STREAM_BOUNDS) as info:
        yield info


@pytest.fixture(scope="module")
def api(stack) -> Api:
    return Api.of(stack)


# -- a client that reads the stream as the SDKs do ------------------------------------------------------------------


@dataclass
class Frame:
    type: str
    data: dict[str, Any]
    id: str
    retry: int | None


@dataclass
class Listened:
    """One response as an SDK's `listen()` yields it."""

    frames: list[Frame]
    bytes: int
    # The frames on the wire, heartbeats and those after a terminal frame included.
    wire: list[Frame] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        return [f.type for f in self.frames]

    @property
    def stopped_on(self) -> str | None:
        """The terminal frame the SDK stopped on, None when the response simply ended."""
        return self.frames[-1].type if self.frames and self.frames[-1].type in TERMINAL else None


def sse_events(text: str) -> list[Frame]:
    """The events of an SSE body, parsed as the HTML standard's event-stream interpretation says (httpx-sse follows
    it): lines end at CRLF, LF or CR; `:` starts a comment; a blank line dispatches the event, if it has data; the last
    event id carries on to events without an `id:`. The data is JSON with the type inside (the SDKs' convention B)."""
    out: list[Frame] = []
    data: list[str] = []
    event = ""
    last_id = ""
    retry: int | None = None
    for line in re.split(r"\r\n|\r|\n", text):
        if line == "":
            if data:
                payload = json.loads("\n".join(data))
                out.append(Frame(payload.get("type") or event or "message", payload, last_id, retry))
            data, event, retry = [], "", None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isdigit():
            retry = int(value)
    return out


def sdk_listen(api: Api, run_id: str, last_event_id: int | None = None) -> Listened:
    """`executions.listen(run_id)` as modulex-python 1.0 runs it (no Last-Event-ID unless a test sends one)."""
    headers = {"Authorization": f"Bearer {api.api_key}", "Accept": "text/event-stream", "Cache-Control": "no-store"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    got = requests.get(f"{api.base_url}/workflows/listen/{run_id}", headers=headers, timeout=60)
    assert got.status_code == 200, got.text[:500]
    assert got.headers["Content-Type"].startswith("text/event-stream")
    wire = sse_events(got.content.decode())
    yielded: list[Frame] = []
    for frame in wire:
        if frame.type in HEARTBEATS:
            continue
        yielded.append(frame)
        if frame.type in TERMINAL:
            break
    return Listened(yielded, len(got.content), wire)


# -- runs -------------------------------------------------------------------------------------------------------


def template(node_id: str, x: int, text: str) -> dict[str, Any]:
    return node(node_id, "transformer", x, operations=[{"type": "template", "params": {"template": text}}])


# Three large outputs, then a question; "more" loops back to the first, anything else finishes.
LOOP = {
    "metadata": {"name": "rounds", "version": "1.0.0"},
    "entry_point": "big_a",
    "nodes": [
        template("big_a", 0, BIG),
        template("big_b", 100, BIG),
        template("big_c", 200, BIG),
        node("ask", "interrupt", 300, message="Round {{ask.round}} recorded. Another?"),
        node(
            "route",
            "conditional",
            400,
            expression_branches=[{"source": "{{ask.more}}", "operator": "equals", "value": True, "target": "big_a"}],
            default_target="finish",
        ),
        template("finish", 500, "finished"),
    ],
    "edges": [
        {"source": "big_a", "target": "big_b"},
        {"source": "big_b", "target": "big_c"},
        {"source": "big_c", "target": "ask"},
        {"source": "ask", "target": "route"},
    ],
}
GATED = {
    "metadata": {"name": "one question", "version": "1.0.0"},
    "nodes": [node("ask", "interrupt", 0, message="Go on?"), template("after", 100, "ok")],
    "edges": [{"source": "ask", "target": "after"}],
}


def start(api: Api, workflow: dict[str, Any], inputs: dict[str, Any] | None = None) -> str:
    got = api.call("POST", "/workflows/run", {"workflow": workflow, "input": inputs or {}})
    assert got.status_code == 200, got.text
    return str(got.json()["run_id"])


def state(api: Api, run_id: str) -> dict[str, Any]:
    got = api.call("GET", f"/workflows/state/{run_id}")
    assert got.status_code == 200, got.text
    return dict(got.json())


def waiting_after(api: Api, run_id: str, checkpoint: int) -> dict[str, Any]:
    """The run's state once it waits on an interrupt opened after `checkpoint`."""
    return until(
        lambda: (
            (s := state(api, run_id))["metadata"]["status"] == "interrupted"
            and int(s["checkpoint_id"]) > checkpoint
            and s
        ),
        60,
    )


def resume(api: Api, run_id: str, value: Any) -> None:
    got = api.call("POST", f"/workflows/resume/{run_id}", {"run_id": run_id, "resume_value": value})
    assert got.status_code == 200, got.text


def read_to(api: Api, run_id: str, events: list[dict[str, Any]], checkpoint: int) -> list[dict[str, Any]]:
    """`events` (the run's, from its first) read on to the event `checkpoint`, page by page from the OpenWOP poll."""
    while not events or events[-1]["sequence"] < checkpoint:
        events = events + api.events(run_id, events[-1]["sequence"] if events else None)
    return events


def framed(events: list[dict[str, Any]]) -> list[int]:
    """The sequences of the events a ModuleX frame stands for: not those of the start node the translation adds (an
    entry that a loop enters again needs one), which is not the author's."""
    return [e["sequence"] for e in events if e["type"] in PROJECTED and e.get("nodeId") != engine_id(START_NODE)]


def history_bytes(events: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(e, separators=(",", ":"), ensure_ascii=False).encode()) + 1 for e in events)


@pytest.fixture(scope="module")
def long_run(api) -> dict[str, Any]:
    """A run waiting on its question whose history is larger than one response: the rounds it took, its run id."""
    began = time.monotonic()
    run_id = start(api, LOOP, {"chunk": CHUNK})
    checkpoint = int(waiting_after(api, run_id, -1)["checkpoint_id"])
    events = read_to(api, run_id, [], checkpoint)
    rounds = 0
    while history_bytes(events) <= MAX_ANSWER_BYTES * 1.05:
        rounds += 1
        resume(api, run_id, {"more": True, "round": rounds})
        checkpoint = int(waiting_after(api, run_id, checkpoint)["checkpoint_id"])
        events = read_to(api, run_id, events, checkpoint)
    print(
        f"\nlong run: {rounds} rounds, {len(events)} events, {history_bytes(events)} bytes of history "
        f"(one response: {MAX_ANSWER_BYTES}), built in {time.monotonic() - began:.1f} s"
    )
    return {"run_id": run_id, "rounds": rounds, "events": events}


# -- a history larger than one response ----------------------------------------------------------------------------


def test_an_sdk_listen_on_a_history_past_one_response_reaches_the_question_the_run_waits_on(api, long_run):
    run_id, rounds = long_run["run_id"], long_run["rounds"]
    for _ in range(2):  # and again: a second listen does not start over where the first stopped
        got = sdk_listen(api, run_id)
        print(f"sdk listen: {len(got.frames)} frames, {got.bytes} bytes, {got.types[:2]} ... {got.types[-2:]}")
        assert got.bytes < 6 * 1024 * 1024  # what API Gateway hands back from a Lambda
        assert got.types[:2] == ["metadata", "history_skipped"]
        skipped = got.frames[1].data["data"]
        assert skipped["last_event_id"] == int(got.frames[0].id)
        assert skipped["skipped_frames"] > 0
        assert "Last-Event-ID" in skipped["message"]
        # It reaches the present: the question the run asks now, then the frame the SDKs stop on, which says what to do.
        assert got.types[-2:] == ["interrupt", "interrupted"]
        assert got.frames[-2].data["data"]["message"] == f"Round {rounds} recorded. Another?"
        closing = got.frames[-1]
        assert got.stopped_on == "interrupted"
        assert closing.data["data"]["node_ids"] == ["ask"]
        assert "resume" in closing.data["data"]["message"]
        assert closing.retry == 100
        # Nothing is missing between the first frame and the last but the skipped frames and the questions answered
        # since (their `resumed` frames are there): only the question the run waits on is asked.
        ids = [int(f.id) for f in got.frames[2:-1]]
        assert ids == sorted(set(ids))
        whole = framed(long_run["events"])
        asked = [e["sequence"] for e in long_run["events"] if e["type"] == "interrupt.requested"]
        assert ids == [sequence for sequence in whole if sequence not in asked[:-1]][-len(ids) :]
        assert [f.type for f in got.frames].count("interrupt") == 1
        # What a client that sends the Last-Event-ID it is given reads before this response's frames, it is told.
        assert whole.index(ids[0]) == 1 + skipped["skipped_frames"]


def test_a_client_that_sends_last_event_id_reads_the_skipped_frames_a_response_at_a_time(api, long_run):
    run_id = long_run["run_id"]
    start_after = int(sdk_listen(api, run_id).frames[1].data["data"]["last_event_id"])
    expected = [sequence for sequence in framed(long_run["events"]) if sequence > start_after]
    seen: list[int] = []
    responses = 0
    cursor = start_after
    while not seen or seen[-1] < expected[-1]:
        got = sdk_listen(api, run_id, last_event_id=cursor)
        responses += 1
        assert got.bytes < 6 * 1024 * 1024
        assert "history_skipped" not in got.types
        page = [int(f.id) for f in got.frames if f.type not in TERMINAL]
        assert page, "every response makes progress"
        seen += page
        cursor = page[-1]
        assert responses < 10
    assert seen == expected  # in order, none lost, none twice
    assert responses >= 2
    print(f"last-event-id: {len(seen)} frames over {responses} responses")


def test_the_run_s_end_reaches_an_sdk_listen_however_long_its_history(api, long_run):
    # The last of the three on the long run: it ends it.
    run_id = long_run["run_id"]
    resume(api, run_id, {"more": False, "round": long_run["rounds"] + 1})
    until(lambda: state(api, run_id)["metadata"]["status"] == "completed", 60)
    got = sdk_listen(api, run_id)
    assert got.types[:2] == ["metadata", "history_skipped"]
    assert got.types[-3:] == ["node_started", "node_update", "done"]
    assert got.stopped_on == "done"
    assert got.wire[-1].type == "done"  # the run's end ends the response: no retry hint, no heartbeat after it
    assert got.wire[-1].retry is None


# -- a response cut by its time budget ------------------------------------------------------------------------------


def test_an_sdk_listen_that_ends_while_the_run_waits_stops_on_interrupted_saying_what_to_do(api):
    run_id = start(api, GATED)
    waiting_after(api, run_id, -1)
    got = sdk_listen(api, run_id)
    assert got.types == ["metadata", "node_started", "interrupt", "interrupted"]
    closing = got.frames[-1].data
    assert closing["run_id"] == closing["thread_id"] == run_id
    assert closing["data"]["message"] == (
        "The run is waiting for an answer at “ask”: resume it to answer, then listen again to follow the run."
    )
    # A client that sends Last-Event-ID at the present is held, then told the same.
    held = sdk_listen(api, run_id, last_event_id=int(got.frames[-2].id))
    assert held.types == ["interrupted"]
    resume(api, run_id, {"ok": True})
    until(lambda: state(api, run_id)["metadata"]["status"] == "completed", 60)
    assert sdk_listen(api, run_id).types[-1] == "done"


def test_an_sdk_listen_that_ends_while_the_run_runs_ends_on_a_heartbeat_with_the_retry_hint(api):
    # A task node no worker takes: the run is running, not waiting on a person.
    worker_bound = {
        "metadata": {"name": "a task", "version": "1.0.0"},
        "nodes": [node("draft", "llm", 0, queue=f"nobody-{uuid.uuid4().hex[:6]}"), template("after", 100, "ok")],
        "edges": [{"source": "draft", "target": "after"}],
    }
    run_id = start(api, worker_bound)
    got = sdk_listen(api, run_id)
    assert got.stopped_on is None  # the SDK's listen ends with the response: listen again to follow the run
    assert got.types[0] == "metadata"
    assert got.wire[-1].type == "heartbeat"
    assert got.wire[-1].retry == 100
    assert state(api, run_id)["metadata"]["status"] == "running"
