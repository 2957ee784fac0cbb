"""How one response of the ModuleX listen stream is made (interlude.faces.modulex.listen), over an event log in memory:
what a client that never pages gets of a long history, and how a response ends. Pure: no store, no HTTP."""

from __future__ import annotations

import json
from typing import Any

from interlude.app import streams as streaming
from interlude.domain.budgets import answer_bytes, last_page
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.faces.modulex.frames import RunView
from interlude.faces.modulex.listen import catch_up, closed_gates, response

BOUNDS = streaming.Bounds(hold_s=0.05, linger_s=0.0, retry_ms=7)
VIEW = RunView(
    "t1/runrunrunrunrunrun01",
    "flow",
    "1",
    {node: {"id": node, "type": "interrupt", "name": node.title()} for node in ("ask", "check")},
)


def doc(sequence: int, kind: str, node: str | None = None, size: int = 10) -> dict[str, Any]:
    event: dict[str, Any] = {"sequence": sequence, "type": kind, "timestamp": "2026-12-07T12:00:00Z", "payload": {}}
    if node is not None:
        event["nodeId"] = node
        event["payload"] = {"outputs": {"text": "x" * size}}
    return event


def log(rounds: int, size: int = 1000) -> list[dict[str, Any]]:
    """run.started, then `rounds` of (ask started, ask completed with `size` characters), then the question."""
    events = [doc(0, "run.started")]
    for _ in range(rounds):
        events.append(doc(len(events), "node.started", "ask"))
        events.append(doc(len(events), "node.completed", "ask", size))
    events.append(doc(len(events), "interrupt.requested", "ask"))
    return events


def state(events: list[dict[str, Any]], status: str = "waiting-approval") -> RunState:
    """The run's head as of the last of `events`: waiting on the question, or `status` (running, completed)."""
    interrupts = {}
    if status.startswith("waiting"):
        interrupts["ask"] = OpenInterrupt(
            nodeId="ask",
            key="ask",
            interruptId="i-ask",
            kind="custom",
            visit=1,
            payload={},
            raisedAt="2026-12-07T12:00:00Z",
        )
    return RunState.model_validate(
        {
            "runId": VIEW.run_id,
            "tenant": "t1",
            "workflowId": "flow",
            "workflowVersion": 1,
            "owner": {},
            "createdAt": "2026-12-07T12:00:00Z",
            "status": status,
            "interrupts": interrupts,
            "nextSeq": events[-1]["sequence"] + 1,
        }
    )


def frames_of(parts: list[str]) -> list[dict[str, Any]]:
    out = []
    for block in "".join(parts).split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        if fields:
            out.append({**fields, "data": json.loads(fields["data"])})
    return out


def listen(events: list[dict[str, Any]], head: RunState, last: int | None = None, budget: int = 10_000, **kw: Any):
    reads: list[int] = []

    def read(after: int) -> list[dict[str, Any]]:
        reads.append(after)
        return [e for e in events if e["sequence"] > after]

    now = kw.get("now", "now")
    parts = response(read, head, VIEW, last, BOUNDS, lambda: now, kw.get("reload", lambda: head), budget)
    return frames_of(parts), reads


def test_a_history_that_fits_is_sent_whole_and_one_that_does_not_as_its_first_event_and_its_newest():
    events = log(20)
    assert catch_up(events, answer_bytes(events)) == (events, [])
    budget = answer_bytes(events) // 3
    sent, skipped = catch_up(events, budget)
    assert sent[0] == events[0]
    assert sent[1:] == last_page(events[1:], budget - answer_bytes(events[:1]))
    assert sent[-1] == events[-1]  # the present
    assert [e["sequence"] for e in sent[:1] + skipped + sent[1:]] == list(range(len(events)))
    assert answer_bytes(sent) <= budget


def test_a_client_without_last_event_id_gets_the_skip_said_then_the_present_then_interrupted():
    events = log(20)
    frames, reads = listen(events, state(events), budget=answer_bytes(events) // 3)
    kinds = [f["data"]["type"] for f in frames]
    assert kinds[:2] == ["metadata", "history_skipped"]
    assert kinds[-2:] == ["interrupt", "interrupted"]
    skipped = frames[1]["data"]["data"]
    shown = [int(f["id"]) for f in frames if "id" in f]
    assert skipped["last_event_id"] == 0
    assert skipped["skipped_frames"] == len(events) - len(shown)  # every event here has a frame
    assert "Last-Event-ID: 0" in skipped["message"]
    # Neither the notice nor the close moves a client's cursor.
    assert "id" not in frames[1]
    assert "id" not in frames[-1]
    assert frames[-1]["retry"] == "7"
    assert frames[-1]["data"]["data"]["message"].startswith("The run is waiting for an answer at “Ask”")
    assert reads[0] == -1  # the history is read once, from its start


def test_a_client_with_last_event_id_reads_on_after_it_a_page_at_a_time_and_is_never_told_to_stop_early():
    events = log(20)
    budget = answer_bytes(events) // 3
    cursor, seen, pages = 0, [], 0
    while cursor < events[-1]["sequence"]:
        frames, reads = listen(events, state(events), last=cursor, budget=budget)
        pages += 1
        assert reads[0] == cursor
        page = [int(f["id"]) for f in frames if "id" in f]
        # Not at the present yet: a heartbeat, not `interrupted`, ends the page.
        closing = frames[-1]["data"]["type"]
        assert closing == ("interrupted" if page[-1] == events[-1]["sequence"] else "heartbeat")
        assert "history_skipped" not in [f["data"]["type"] for f in frames]
        seen += page
        cursor = page[-1]
    assert seen == list(range(1, len(events)))
    assert pages >= 3


def test_a_response_ends_on_interrupted_only_when_the_run_waits_as_of_its_last_frame():
    events = log(1)
    # The run moved on after the request loaded it: its head is read again, and says it runs now.
    moved = [*events, doc(len(events), "interrupt.resolved", "ask"), doc(len(events) + 1, "node.started", "ask")]
    running = state(moved, "running")
    frames, _ = listen(moved, state(events), reload=lambda: running)
    assert frames[-1]["data"]["type"] == "heartbeat"
    assert frames[-1]["retry"] == "7"
    # ... or that it waits again.
    frames, _ = listen(moved, state(events), reload=lambda: state(moved))
    assert frames[-1]["data"]["type"] == "interrupted"
    # A run that waits on nothing (a task its worker has) ends on a heartbeat; a cursor past the end too.
    assert listen(events, state(events, "running"))[0][-1]["data"]["type"] == "heartbeat"
    assert [f["data"]["type"] for f in listen(events, state(events), last=10**6)[0]] == ["heartbeat"]


def test_the_run_s_end_ends_the_response_without_a_closing_frame():
    events = log(20)
    events.append(doc(len(events), "run.completed"))
    frames, _ = listen(events, state(events, "completed"), budget=answer_bytes(events) // 3)
    assert [f["data"]["type"] for f in frames][-1] == "done"
    assert "retry" not in frames[-1]


def test_two_listens_of_a_run_that_did_not_move_are_the_same_frame_for_frame():
    # What a response adds to the log is stamped with the log's times (the skipped events', the pause's), not the
    # response's: a client comparing two listens sees no change where none happened.
    events = log(20)
    first, _ = listen(events, state(events), budget=answer_bytes(events) // 3, now="12:00")
    again, _ = listen(events, state(events), budget=answer_bytes(events) // 3, now="12:05")
    assert first == again
    assert first[-1]["data"]["timestamp"] == "2026-12-07T12:00:00Z"  # when the run paused


def answered(rounds: int) -> list[dict[str, Any]]:
    """run.started, then `rounds` of (ask started, its question, its answer, ask completed), then the question again."""
    events = [doc(0, "run.started")]
    for _ in range(rounds):
        for kind in ("node.started", "interrupt.requested", "interrupt.resolved", "node.completed"):
            events.append(doc(len(events), kind, "ask"))
    events.append(doc(len(events), "node.started", "ask"))
    events.append(doc(len(events), "interrupt.requested", "ask"))
    return events


def test_a_gate_is_closed_by_its_node_s_next_answer_or_cancel_or_the_run_s_end():
    events = answered(2)
    assert closed_gates(events) == {2, 6}  # the question asked now (10) is open
    cancelled = [*events, doc(11, "interrupt.requested", "check"), doc(12, "node.cancelled", "check")]
    assert closed_gates(cancelled) == {2, 6, 11}  # check's gate, cancelled with its node; ask's still open
    assert closed_gates([*cancelled, doc(13, "run.cancelled")]) == {2, 6, 10, 11}
    # A question asked after the run's end (a node of a finished run retried) is open.
    assert closed_gates([doc(0, "run.failed"), doc(1, "interrupt.requested", "ask")]) == set()


def test_a_listen_without_last_event_id_asks_only_the_question_the_run_waits_on():
    events = answered(3)
    frames, _ = listen(events, state(events))
    kinds = [f["data"]["type"] for f in frames]
    assert kinds.count("interrupt") == 1
    assert kinds.count("resumed") == 3  # what was answered is still told
    assert kinds[-2:] == ["interrupt", "interrupted"]
    assert int(frames[-2]["id"]) == events[-1]["sequence"]
    # A client that sends Last-Event-ID reads every frame after it, the questions answered since included, in order.
    frames, _ = listen(events, state(events), last=0)
    assert [int(f["id"]) for f in frames if "id" in f] == list(range(1, len(events)))
    assert [f["data"]["type"] for f in frames].count("interrupt") == 4


def test_a_listen_of_a_run_that_ended_asks_nothing():
    events = [*answered(1), doc(7, "interrupt.resolved", "ask"), doc(8, "run.completed")]
    kinds = [f["data"]["type"] for f in listen(events, state(events, "completed"))[0]]
    assert "interrupt" not in kinds
    assert kinds[-1] == "done"


def test_the_skip_counts_what_a_read_from_its_last_event_id_sends_before_the_frames_shown():
    events = answered(30)
    frames, _ = listen(events, state(events), budget=answer_bytes(events) // 3)
    skipped = frames[1]["data"]["data"]
    first_shown = int(frames[2]["id"])
    paged, _ = listen(events, state(events), last=skipped["last_event_id"])
    before = [int(f["id"]) for f in paged if "id" in f and int(f["id"]) < first_shown]
    assert skipped["skipped_frames"] == len(before) > 0
