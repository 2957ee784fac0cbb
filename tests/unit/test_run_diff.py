"""The diff of two runs' logs (rules/run_diff.py, OpenWOP diffRun): what names a run is not a difference; each
sequence that differs is one entry, in order; the state diff names only what the logs leave differently; a diff
past its byte bound says it was cut short. The answer is valid against run-diff-response.schema.json."""

from __future__ import annotations

from typing import Any

from interlude.domain import schemas
from interlude.rules.run_diff import diff_runs

A, B = "t1/AAAAAAAAAAAAAAAAAAAA", "t1/BBBBBBBBBBBBBBBBBBBB"


def log(run_id: str, *events: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"eventId": f"{run_id}-{i}", "runId": run_id, "type": t, "timestamp": f"2026-12-05T10:00:0{i}Z", "sequence": i,
         "payload": p}
        for i, (t, p) in enumerate(events)
    ]


STARTED = ("run.started", {"workflowId": "wf"})
ASKED = ("node.suspended", {"nodeId": "g", "interruptId": "x", "key": "k", "kind": "approval"})


def valid(answer: dict[str, Any]) -> dict[str, Any]:
    assert schemas.validator("run-diff-response.schema.json").is_valid(answer), schemas.errors_of(
        schemas.validator("run-diff-response.schema.json"), answer
    )
    return answer


def test_logs_that_differ_only_in_what_names_their_run_are_identical():
    a = log(A, STARTED, ASKED)
    b = log(B, STARTED, ("node.suspended", {**ASKED[1], "interruptId": "y", "key": "other"}))

    assert valid(diff_runs(A, a, B, b)) == {"a": A, "b": B, "divergedAtSeq": None, "eventDiffs": [], "stateDiff": {}}


def test_each_differing_sequence_is_one_entry_in_order_and_the_state_diff_names_what_ended_differently():
    a = log(A, STARTED, ("node.completed", {"nodeId": "g", "outputs": {"ok": True}}), ("run.completed", {}))
    b = log(B, STARTED, ("node.failed", {"nodeId": "g", "error": {"code": "approval_rejected"}}), ("run.failed", {"error": {"code": "approval_rejected"}}), ("interlude.note", {}))

    answer = valid(diff_runs(A, a, B, b))

    assert answer["divergedAtSeq"] == 1
    assert [(d["seq"], d["op"]) for d in answer["eventDiffs"]] == [(1, "changed"), (2, "changed"), (3, "added")]
    assert "aEvent" not in answer["eventDiffs"][2]
    assert answer["stateDiff"] == {
        "end": {"a": {"status": "completed"}, "b": {"status": "failed", "error": {"code": "approval_rejected"}}},
        "nodes": {"g": {"a": {"status": "completed", "outputs": {"ok": True}}, "b": {"status": "failed", "error": {"code": "approval_rejected"}}}},
    }
    assert [d["op"] for d in diff_runs(B, b, A, a)["eventDiffs"]] == ["changed", "changed", "removed"]


def test_a_diff_past_its_byte_bound_keeps_the_first_entries_and_says_it_was_cut_short():
    a = log(A, STARTED, *[("node.completed", {"nodeId": f"n{i}", "outputs": {"v": i}}) for i in range(5)])
    b = log(B, STARTED, *[("node.completed", {"nodeId": f"n{i}", "outputs": {"v": -i}}) for i in range(5)])

    answer = valid(diff_runs(A, a, B, b, max_bytes=700))

    assert answer["truncated"] is True
    assert answer["divergedAtSeq"] == 2  # n0's output is 0 either way
    assert 0 < len(answer["eventDiffs"]) < 4
