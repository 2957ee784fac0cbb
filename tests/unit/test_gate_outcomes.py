"""A decision means what it says (issue 28, item 4), in the engine alone: a gate's outcome reaches the steps after
it, whatever it was; a `refine` goes back where an edge's condition sends it and never on to what an approval
releases; edges route by condition; the refund example of examples/ does all of it."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from interlude.domain.errors import DomainError
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.outcomes import OUTCOME_FIELDS, in_words
from interlude.engine import deadlines
from interlude.engine import run as engine
from interlude.engine.actions import ACTION_REQUESTED
from tests.support.engine import NOW, answer, edge, gate, new_state, noop, refund_definition, subject, types, wf_of

ANA = subject("ana")
REFINE = {"action": "refine", "refineFeedback": {"scope": "whole", "text": "make it 30, not 40"}}


def refund() -> WorkflowDefinition:
    return WorkflowDefinition.model_validate(refund_definition())


def started(wf: WorkflowDefinition, **state) -> engine.Transition:
    return engine.start(new_state(wf, inputs={"orderId": "o-1", "amount": 40}, **state), wf, NOW)


def actions_requested(*transitions: engine.Transition) -> list[str]:
    return [e.node_id for t in transitions for e in t.events if e.type == ACTION_REQUESTED]


def test_the_refund_example_registers():
    assert engine.check_config(refund()) == []


def test_refine_loops_back_to_the_draft_with_its_feedback_and_nothing_is_paid():
    wf = refund()
    first = started(wf)
    assert first.state.interrupts["review"].payload["data"]["artifactData"]["changesAsked"] is None

    # When the approver asks for changes
    refined = answer(first, wf, "review", REFINE, ANA)

    # Then the draft ran again with the feedback, and the gate asks again about the new draft
    assert refined.state.nodes["draft"].visits == 2
    assert refined.state.outputs["draft"]["changesAsked"] == "make it 30, not 40"
    assert refined.state.status == "waiting-approval"
    assert refined.state.interrupts["review"].visit == 2
    assert refined.state.interrupts["review"].payload["data"]["artifactData"]["changesAsked"] == "make it 30, not 40"
    # And nothing was paid, nor told to the requester
    assert actions_requested(first, refined) == []
    assert refined.state.nodes["pay"].visits == 0
    assert refined.state.nodes["tell-requester"].visits == 0
    # And the refine's outcome says what it was, granting nothing
    outcome = refined.state.outputs["review"]
    assert {k: outcome[k] for k in ("action", "decision", "decidedBy", "comment", "reason")} == {
        "action": "refine",
        "decision": None,
        "decidedBy": "ana",
        "comment": None,
        "reason": None,
    }

    # When the new draft is approved, it is paid
    approved = answer(refined, wf, "review", {"action": "accept"}, ANA)
    assert actions_requested(approved) == ["pay"]
    assert json.loads(approved.state.actions["pay"].request["body"]) == {"orderId": "o-1", "amount": 40}
    assert approved.state.outputs["review"]["decision"] == "granted"


def test_a_rejection_reaches_the_reject_branch_with_its_comment_and_decider():
    wf = refund()
    rejected = answer(started(wf), wf, "review", {"action": "reject", "comment": "not covered by the policy"}, ANA)
    assert rejected.state.outputs["tell-requester"] == {
        "orderId": "o-1",
        "outcome": "reject",
        "refusedBy": "ana",
        "why": "not covered by the policy",
    }
    assert rejected.state.status == "completed"
    assert rejected.state.nodes["pay"].status == "skipped"
    assert actions_requested(rejected) == []
    # The API's status stays the protocol's: the gate failed with approval_rejected
    failed = next(e for e in rejected.events if e.type == "node.failed")
    assert failed.payload["error"]["code"] == "approval_rejected"
    assert in_words(rejected.state.outputs["review"], "Ana") == "Rejected by Ana: not covered by the policy"


def test_a_timed_out_gate_exposes_its_outcome_too():
    wf = refund()
    t = started(wf)
    expired = deadlines.expire(t.state, wf, NOW + timedelta(days=3, seconds=1))
    assert expired.state.outputs["review"] == {
        "action": "timeout",
        "decision": "rejected",
        "comment": None,
        "decidedBy": None,
        "reason": "timeout",
        "refineFeedback": None,
        "editedArtifactData": None,
    }
    assert expired.state.outputs["tell-requester"] == {
        "orderId": "o-1",
        "outcome": "timeout",
        "refusedBy": None,
        "why": None,
    }
    assert in_words(expired.state.outputs["review"]) == "Rejected automatically: nobody decided in time"


def test_every_decided_outcome_names_all_seven_fields():
    wf = wf_of([gate("g", actions=["accept", "reject"])])
    accepted = answer(engine.start(new_state(wf), wf, NOW), wf, "g", {"action": "accept", "comment": "fine"})
    outcome = accepted.state.outputs["g"]
    assert set(OUTCOME_FIELDS) <= set(outcome)
    assert (outcome["action"], outcome["decision"], outcome["comment"], outcome["decidedBy"]) == (
        "accept",
        "granted",
        "fine",
        "alice",
    )
    assert outcome["decidedAt"] == engine.iso(NOW)


def test_the_comment_has_one_name_feedback_is_recorded_as_comment():
    wf = wf_of([gate("g", actions=["accept", "reject"])])
    t = engine.start(new_state(wf), wf, NOW)
    answered = answer(t, wf, "g", {"action": "accept", "feedback": "ok by me"})
    assert answered.state.outputs["g"]["comment"] == "ok by me"
    resolved = next(e for e in answered.events if e.type == "interrupt.resolved")
    assert resolved.payload["resumeValue"]["comment"] == "ok by me"
    assert "feedback" not in resolved.payload["resumeValue"]
    with pytest.raises(DomainError) as refused:
        answer(t, wf, "g", {"action": "accept", "feedback": "a", "comment": "b"})
    assert refused.value.code == "validation_error"
    assert refused.value.details == {"field": "resumeValue.feedback"}


def test_edit_accept_goes_on_with_the_edited_artifact_by_its_own_edge():
    wf = wf_of(
        [
            gate("review", actions=["accept", "edit-accept"], artifactData={"amount": 40}),
            {"id": "as-asked", "typeId": "core.transform", "config": {"outputs": {"amount": "{{review.action}}"}}},
            {
                "id": "as-edited",
                "typeId": "core.transform",
                "config": {"outputs": {"amount": "{{review.editedArtifactData.amount}}"}},
            },
        ],
        [
            {**edge("review", "as-asked"), "condition": {"type": "equals", "left": "action", "right": "accept"}},
            {**edge("review", "as-edited"), "condition": {"type": "equals", "left": "action", "right": "edit-accept"}},
        ],
    )
    assert engine.check_config(wf) == []
    t = answer(engine.start(new_state(wf), wf, NOW), wf, "review", {"action": "edit-accept", "editedArtifactData": {"amount": 30}})
    assert t.state.outputs["as-edited"] == {"amount": 30}
    assert t.state.nodes["as-asked"].status == "skipped"
    assert t.state.status == "completed"


def test_a_refine_on_a_definition_registered_before_conditions_goes_nowhere():
    # A stored definition with no condition (registration now refuses it): refine completes the gate and nothing
    # after it runs, rather than releasing what an approval releases.
    wf = wf_of([gate("review", actions=["accept", "refine"]), noop("pay")], [edge("review", "pay")])
    t = answer(engine.start(new_state(wf), wf, NOW), wf, "review", REFINE)
    assert t.state.nodes["pay"].status == "skipped"
    assert t.state.status == "completed"


def test_refining_past_the_loop_budget_fails_the_run_naming_the_step():
    wf = refund()
    t = started(wf, configurable={"version": 1, "run": {"maxLoopIterations": 2}})
    t = answer(t, wf, "review", REFINE)
    assert t.state.status == "waiting-approval"
    t = answer(t, wf, "review", REFINE)
    assert t.state.status == "failed"
    assert t.state.error["code"] == "loop_limit_exceeded"
    assert t.state.failedNodeId == "draft"
    assert actions_requested(t) == []


# -- registration ----------------------------------------------------------------------------------------------------


def refused(wf: WorkflowDefinition) -> list[dict[str, str]]:
    problems = engine.check_config(wf)
    assert problems, "the definition was accepted"
    return problems


def test_a_gate_offering_refine_with_no_edge_routing_it_is_refused_naming_the_gate():
    wf = wf_of([gate("review", actions=["accept", "refine"]), noop("pay")], [edge("review", "pay")])
    (problem,) = refused(wf)
    assert problem["path"] == "nodes/0/config/actions"
    assert "'review' offers refine" in problem["message"]
    # An edge whose condition holds for another action does not route it either
    wf = wf_of(
        [gate("review", actions=["accept", "refine"]), noop("pay")],
        [{**edge("review", "pay"), "condition": {"type": "equals", "left": "action", "right": "accept"}}],
    )
    assert "'review' offers refine" in refused(wf)[0]["message"]


@pytest.mark.parametrize(
    ("condition", "path", "words"),
    [
        ({"type": "expression", "expression": "action == "}, "expression", "does not parse"),
        ({"expression": "action = 'refine'"}, "expression", "does not parse"),
        ({"type": "regex", "left": "comment", "right": "(a+)+$"}, "type", "regex conditions are not offered"),
        ({"type": "equals", "right": "refine"}, "left", "needs left"),
        ({"type": "expression"}, "expression", "needs an expression"),
        ({"left": "action"}, "type", "needs a type"),
        ({"type": "equals", "left": "actoin", "right": "refine"}, "left", "reads 'actoin'"),
        ({"type": "expression", "expression": "coment != null"}, "expression", "reads 'coment'"),
        ({"type": "truthy", "left": "output.coment"}, "left", "reads 'coment'"),
    ],
)
def test_a_condition_that_cannot_be_evaluated_is_refused_naming_the_edge(condition, path, words):
    wf = wf_of(
        [gate("review", actions=["accept", "reject"]), noop("after")],
        [{**edge("review", "after"), "id": "review-after", "condition": condition}],
    )
    (problem,) = refused(wf)
    assert problem["path"] == f"edges/0/condition/{path}"
    assert problem["message"].startswith("edge 'review-after' (review -> after): ")
    assert words in problem["message"]


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("{{nope.x}}", "{{nope.x}} names no step of this workflow"),
        ("Refund by {{review.decidedBY}}", "{{review.decidedBY}} reads 'decidedBY', which step 'review' does not output"),
        ("{{start.anything}}", "{{start.anything}} reads 'anything', which step 'start' does not output"),
    ],
)
def test_a_reference_to_a_step_or_field_that_does_not_exist_is_refused_naming_it(template, words):
    wf = wf_of(
        [noop("start"), gate("review"), {"id": "after", "typeId": "core.transform", "config": {"outputs": {"x": template}}}],
        [edge("start", "review"), {**edge("review", "after"), "triggerRule": "all_complete"}],
    )
    (problem,) = refused(wf)
    assert problem == {"path": "nodes/2/config/outputs/x", "message": problem["message"]}
    assert problem["message"].startswith(words)


def test_references_that_may_have_a_value_are_accepted():
    wf = wf_of(
        [
            gate("review", title="Refund {{inputs.amount}}?", artifactData={"by": "{{review.decidedBy}}"}),
            {
                "id": "after",
                "typeId": "core.transform",
                "config": {"outputs": {"x": "{{review.refineFeedback.text}} {{review}} {{inputs.anything.at.all}}"}},
            },
            # A schema is passed on as written, never rendered: its text is not a reference
            {
                "id": "ask",
                "typeId": "core.clarificationGate",
                "config": {"questions": [{"id": "q", "question": "Why?", "schema": {"type": "string", "description": "{{x}}"}}]},
            },
        ],
        [edge("review", "after"), edge("after", "ask")],
    )
    assert engine.check_config(wf) == []


def test_a_deeply_nested_config_is_checked_without_reaching_the_recursion_limit():
    # The walk is iterative, so nesting deeper than Python's recursion limit is still checked, and the reference found
    deep: dict = {"x": "{{nope}}"}
    for _ in range(5000):
        deep = {"d": deep}
    wf = wf_of([{"id": "t", "typeId": "core.transform", "config": {"outputs": deep}}])
    assert any("{{nope}} names no step" in p["message"] for p in engine.check_config(wf))


def test_status_and_events_stay_as_the_protocol_says():
    wf = refund()
    refined = answer(started(wf), wf, "review", REFINE)
    assert types(refined)[:3] == ["interrupt.resolved", "node.resumed", "node.completed"]
    resolved = refined.events[0].payload
    assert resolved["action"] == "refine"
    assert "decision" not in resolved
