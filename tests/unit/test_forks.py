"""A fork's recorded history (interlude.engine.forks), through the engine alone: a run re-run under its source's
history reaches the same nodes and outputs without asking a decided gate again, whatever the decisions were (a
refine that loops back, a rejection routed on, a timeout); a branch asks again what came at or after its point."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import deadlines, forks
from interlude.engine import run as engine
from interlude.engine.events import to_docs
from tests.support.engine import NOW, answer, edge, gate, new_state, refund_definition, start, subject, wf_of

FORK_ID = "t1/BBBBBBBBBBBBBBBBBBBB"
INPUTS = {"orderId": "o-1", "amount": 20}


class Logged:
    """A run moved transition by transition, its event log kept as the store writes it."""

    def __init__(self, wf: WorkflowDefinition, t: engine.Transition) -> None:
        self.wf, self.t, self.log = wf, t, []
        self.keep(t)

    def keep(self, t: engine.Transition) -> None:
        self.log += to_docs(t.state.runId, t.events, len(self.log), engine.iso(NOW))
        t.state.nextSeq = len(self.log)
        self.t = t

    def answer(self, node: str, value: Any) -> Logged:
        self.keep(answer(self.t, self.wf, node, value))
        return self

    def fork(self, until: int | None) -> engine.Transition:
        recorded = forks.recorded_history(self.log, until)
        state = new_state(self.wf, runId=FORK_ID, inputs=self.t.state.inputs, recorded=recorded)
        return engine.start(state, self.wf, NOW)


def suspended(t: engine.Transition) -> list[str]:
    return [e.node_id for e in t.events if e.type == "node.suspended"]


def same_course(source: engine.Transition, fork: engine.Transition) -> None:
    assert fork.state.status == source.state.status
    assert fork.state.outputs == source.state.outputs
    assert {n: (s.status, s.visits) for n, s in fork.state.nodes.items()} == {
        n: (s.status, s.visits) for n, s in source.state.nodes.items()
    }


def test_a_replay_of_a_refined_then_approved_refund_takes_the_same_course_asking_nobody():
    wf = WorkflowDefinition.model_validate(refund_definition())
    source = Logged(wf, start(wf, inputs=INPUTS))
    source.answer("review", {"action": "refine", "refineFeedback": {"scope": "whole", "text": "shorter"}})
    source.answer("review", {"action": "accept"})

    fork = source.fork(None)

    same_course(source.t, fork)
    assert suspended(fork) == []
    assert fork.state.nodes["review"].visits == 2
    assert fork.state.recorded == {"gates": {}, "effects": {}, "votes": {}, "results": {}}


def http(i: str) -> dict[str, Any]:
    return {"id": i, "typeId": "core.http", "config": {"url": "https://example.com/" + i}}


def test_a_completed_call_is_requested_under_its_source_identity_and_a_failed_one_under_the_forks_own():
    wf = wf_of([gate("ok"), http("refund"), http("notify")], [edge("ok", "refund"), edge("refund", "notify")])
    source = Logged(wf, start(wf)).answer("ok", {"action": "accept"})
    refund = source.t.state.actions["refund"]
    source.keep(engine.finish_action(source.t.state, wf, "refund", refund.visit, {"output": {"status": 200}}, NOW))
    notify = source.t.state.actions["notify"]
    failure = {"error": {"code": "interlude.http_failed", "message": "503", "retryable": False}}
    source.keep(engine.finish_action(source.t.state, wf, "notify", notify.visit, failure, NOW))
    assert source.t.state.status == "failed"

    fork = source.fork(None)

    # The refund's record is the source's (the worker lands its outcome, no call); the failed notice is tried again.
    assert refund.keying == "activity-recipe"
    assert fork.state.actions["refund"].effectId == refund.effectId
    assert suspended(fork) == []
    finished = engine.finish_action(fork.state, wf, "refund", 1, {"output": {"status": 200}}, NOW)
    assert finished.state.actions["notify"].effectId not in (notify.effectId, refund.effectId)


def test_a_replay_of_a_rejection_routed_on_and_of_a_timeout_fails_or_routes_as_the_source_did():
    wf = WorkflowDefinition.model_validate(refund_definition())
    rejected = Logged(wf, start(wf, inputs=INPUTS)).answer("review", {"action": "reject", "comment": "no"})
    same_course(rejected.t, rejected.fork(None))

    timed = wf_of([gate("g", timeoutMs=1000)])
    source = Logged(timed, start(timed))
    source.keep(deadlines.expire(source.t.state, timed, NOW + timedelta(seconds=5)))
    assert source.t.state.status == "failed"
    fork = source.fork(None)
    same_course(source.t, fork)
    assert fork.state.error == source.t.state.error


def test_a_branch_asks_again_what_was_decided_at_or_after_its_point():
    wf = wf_of([gate("a"), gate("b")], [edge("a", "b")])
    source = Logged(wf, start(wf)).answer("a", {"action": "accept"})
    decided = next(e["sequence"] for e in source.log if e["type"] == "interrupt.resolved")

    assert suspended(source.fork(decided)) == ["a"]
    assert suspended(source.fork(decided + 1)) == ["b"]


def test_the_redrive_point_is_where_the_failed_visit_was_decided_or_the_run_failed():
    wf = wf_of([gate("a"), gate("b")], [edge("a", "b")])
    source = Logged(wf, start(wf)).answer("a", {"action": "accept"}).answer("b", {"action": "reject"})
    point = forks.redrive_point(source.log, "b")

    assert source.log[point]["type"] == "interrupt.resolved"
    assert source.log[point]["payload"]["nodeId"] == "b"
    assert suspended(source.fork(point)) == ["b"]
    run_failed = next(e["sequence"] for e in source.log if e["type"] == "run.failed")
    assert forks.redrive_point(source.log, None) == run_failed
    assert forks.redrive_point([], "b") is None


def test_votes_on_a_gate_open_at_the_fork_point_are_counted_with_their_events_and_a_decided_gates_are_not():
    wf = wf_of([gate("two", requiredApprovals=2), gate("one")], [edge("two", "one")])
    source = Logged(wf, start(wf)).answer("two", {"action": "accept", "comment": "ok"})
    voted_at = len(source.log) - 1
    key = source.t.state.interrupts["two"].key

    open_ = forks.recorded_history(source.log, None)["votes"]
    before_vote = forks.recorded_history(source.log, voted_at)["votes"]

    ((visit, held),) = open_.items()
    assert (visit, held["key"], held["count"]) == ("two#1", key, 1)
    assert [t for t, _ in held["events"]] == ["approval.received"]
    assert held["events"][0][1]["resumeValue"]["comment"] == "ok"
    assert before_vote == {}
    # Once the gate is decided, its votes are the decision's, not carried as votes
    source.keep(answer(source.t, wf, "two", {"action": "accept"}, subject("bob")))
    assert forks.recorded_history(source.log, None)["votes"] == {}


def conversation() -> WorkflowDefinition:
    """Open a conversation, one exchange on it, close it."""
    on = "{{open.conversationId}}"
    return wf_of(
        [
            {"id": "open", "typeId": "core.conversationGate", "config": {"turn": "start", "title": "Pick"}},
            {"id": "turn", "typeId": "core.conversationGate", "config": {"turn": "exchange", "conversationId": on, "prompt": "Which?"}},
            {"id": "close", "typeId": "core.conversationGate", "config": {"turn": "close", "conversationId": on}},
        ],
        [edge("open", "turn"), edge("turn", "close")],
    )


def test_a_conversation_forked_after_its_exchange_is_the_forks_own_with_the_turns_before_the_point_carried():
    wf = conversation()
    source = Logged(wf, start(wf)).answer("open", {"hello": True}).answer("turn", {"choice": "a"})
    source_cid = source.t.state.outputs["open"]["conversationId"]

    fork = source.fork(None)

    # The fork opened a conversation of its own (claimed tenant-wide: another id), answered as recorded, and asks
    # only what the source had not been answered yet: the close
    (cid,) = fork.claims
    assert cid != source_cid
    assert fork.state.conversations == {cid: "closing"}  # as the source's: its close is asked
    assert source.t.state.conversations == {source_cid: "closing"}
    assert suspended(fork) == ["close"]
    assert fork.state.interrupts["close"].payload["data"]["conversationId"] == cid
    exchanged = [e.payload for e in fork.events if e.type == "conversation.exchanged"]
    assert [(p["conversationId"], p["response"]) for p in exchanged] == [(cid, {"choice": "a"})]
    assert fork.state.outputs["turn"] == {"conversationId": cid, "response": {"choice": "a"}}
    assert [e.payload["conversationId"] for e in fork.events if e.type == "conversation.opened"] == [cid]
    closed = answer(fork, wf, "close", {})
    assert (closed.state.status, closed.state.conversations) == ("completed", {cid: "closed"})


def test_a_closed_conversation_replayed_ends_closed_and_a_branch_before_its_exchange_asks_it_again():
    wf = conversation()
    source = Logged(wf, start(wf)).answer("open", {"hello": True})
    exchange_asked = len(source.log)
    source.answer("turn", {"choice": "a"}).answer("close", {})

    replayed = source.fork(None)
    branch = source.fork(exchange_asked)

    assert replayed.state.status == "completed"
    assert list(replayed.state.conversations.values()) == ["closed"]
    assert suspended(branch) == ["turn"]
    assert list(branch.state.conversations.values()) == ["open"]


def test_a_completed_task_and_child_are_carried_as_their_results_and_neither_is_made_again():
    sub = {"workflowId": "child", "inputs": {"order": "{{inputs.orderId}}"}}
    wf = wf_of(
        [
            {"id": "summarise", "typeId": "core.task", "config": {"taskType": "summarise", "input": {}}},
            {"id": "spawn", "typeId": "core.subWorkflow", "config": sub},
            {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{spawn.answer}}", "said": "{{summarise.text}}"}}},
        ],
        [edge("summarise", "spawn"), edge("spawn", "after")],
        [{"name": "orderId", "type": "string"}],
    )
    source = Logged(wf, start(wf, inputs={"orderId": "o-1"}))
    for node, output in (("summarise", {"text": "short"}), ("spawn", {"answer": 42})):
        visit = source.t.state.actions[node].visit
        source.keep(engine.finish_action(source.t.state, wf, node, visit, {"output": output}, NOW))
    assert source.t.state.status == "completed"

    fork = source.fork(None)
    branch = source.fork(next(e["sequence"] for e in source.log if e["type"] == "interlude.child-requested"))

    # The replay completes with the same outputs: no task asked of a worker, no child started
    same_course(source.t, fork)
    assert (fork.state.actions, fork.state.children) == ({}, [])
    assert not [e for e in fork.events if e.type in ("interlude.action-requested", "interlude.child-requested")]
    carried = [(e.payload["nodeId"], e.payload["kind"]) for e in fork.events if e.type == "interlude.result-carried"]
    assert carried == [("summarise", "task"), ("spawn", "child")]
    # A branch before the child was requested carries the task's result and starts a child of its own
    assert (list(branch.state.actions), len(branch.state.children)) == (["spawn"], 1)
    assert branch.state.outputs["summarise"] == {"text": "short"}
