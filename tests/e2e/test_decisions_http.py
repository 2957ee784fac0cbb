"""A decision means what it says, over HTTP on the local stack (issue 28, item 4): the refund example's refine goes
back to its draft and requests no payment, its rejection reaches the reject branch with comment and decider, and
registration refuses, naming them, a refine no edge routes, a condition that does not parse and a reference to what
does not exist, on both faces. (The payment receiver's side: tests/e2e/test_actions_http.py.)"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.e2e.test_api_errors import refused
from tests.support.engine import refund_definition
from tests.support.local_stack import Api
from tests.support.modulex_example import worked_example

REFINE = {"action": "refine", "refineFeedback": {"scope": "whole", "text": "make it 30, not 40"}}


@pytest.fixture(scope="module")
def refund(api: Api) -> str:
    workflow_id = f"refund-{uuid.uuid4().hex[:8]}"
    got = api.put_workflow(workflow_id, {**refund_definition(), "id": workflow_id})
    assert got.status_code == 201, got.text
    return workflow_id


def waiting_refund(api: Api, refund: str) -> str:
    run_id = api.start(refund, inputs={"orderId": "o-7", "amount": 40})["runId"]
    assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    return run_id


def test_refine_goes_back_to_the_draft_with_its_feedback_and_asks_for_no_payment(api: Api, refund: str) -> None:
    run_id = waiting_refund(api, refund)
    answered = api.resolve(run_id, "review", REFINE)
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "waiting-approval"  # asked again, about the new draft

    snap = api.run(run_id)
    assert snap["variables"]["draft"]["changesAsked"] == "make it 30, not 40"
    assert snap["nodeStates"]["draft"]["visits"] == 2
    assert snap["variables"]["review"]["action"] == "refine"
    assert snap["variables"]["review"]["decision"] is None
    assert snap["nodeStates"]["pay"]["visits"] == 0
    types = [e["type"] for e in api.events(run_id)]
    assert "interlude.action-requested" not in types
    assert types.count("interrupt.requested") == 2


def test_a_rejection_reaches_its_branch_with_comment_and_decider(api: Api, refund: str) -> None:
    run_id = waiting_refund(api, refund)
    ana = api.new_key(["approvals:respond", "runs:read"], subject="ana")
    answered = api.resolve(run_id, "review", {"action": "reject", "comment": "outside the policy"}, key=ana)
    assert answered.status_code == 200, answered.text

    snap = api.wait_status(run_id, {"completed"})
    assert snap["variables"]["tell-requester"] == {
        "orderId": "o-7",
        "outcome": "reject",
        "refusedBy": "ana",
        "why": "outside the policy",
    }
    # The status is the protocol's: the gate failed (approval_rejected), routed to its branch
    assert snap["nodeStates"]["review"]["status"] == "failed"
    assert snap["nodeStates"]["pay"]["status"] == "skipped"
    failed = next(e for e in api.events(run_id) if e["type"] == "node.failed")
    assert failed["payload"]["error"]["code"] == "approval_rejected"


def test_the_comment_is_sent_once(api: Api, refund: str) -> None:
    run_id = waiting_refund(api, refund)
    body = refused(api.resolve(run_id, "review", {"action": "reject", "comment": "a", "feedback": "b"}), 400, "validation_error")
    assert body["details"] == {"field": "resumeValue.feedback"}
    assert api.run(run_id)["status"] == "waiting-approval"


def registration_problems(api: Api, definition: dict[str, Any]) -> list[dict[str, str]]:
    workflow_id = f"refused-{uuid.uuid4().hex[:8]}"
    body = refused(api.put_workflow(workflow_id, {**definition, "id": workflow_id}), 400, "validation_error")
    assert api.call("GET", f"/workflows/{workflow_id}").status_code == 404  # nothing was stored
    return body["details"]["errors"]


def test_a_refine_no_edge_routes_is_refused_naming_the_gate(api: Api) -> None:
    definition = refund_definition()
    definition["edges"] = [e for e in definition["edges"] if e["id"] != "review-changes"]
    (problem,) = registration_problems(api, definition)
    assert problem["path"] == "nodes/2/config/actions"
    assert "'review' offers refine, but no edge out of it routes a refine" in problem["message"]


def test_a_condition_that_does_not_parse_is_refused_naming_the_edge(api: Api) -> None:
    definition = refund_definition()
    pay = next(e for e in definition["edges"] if e["id"] == "review-pay")
    pay["condition"] = {"type": "expression", "expression": "decision == 'granted' and"}
    (problem,) = registration_problems(api, definition)
    assert problem["path"] == "edges/3/condition/expression"
    assert problem["message"].startswith("edge 'review-pay' (review -> pay): the expression does not parse")


def test_a_reference_to_what_does_not_exist_is_refused_naming_it(api: Api) -> None:
    definition = refund_definition()
    tell = next(n for n in definition["nodes"] if n["id"] == "tell-requester")
    tell["config"]["outputs"]["why"] = "{{review.reason_given}}"
    tell["config"]["outputs"]["who"] = "{{reviewer.decidedBy}}"
    problems = registration_problems(api, definition)
    assert [p["path"] for p in problems] == ["nodes/4/config/outputs/who", "nodes/4/config/outputs/why"]
    assert problems[0]["message"].startswith("{{reviewer.decidedBy}} names no step of this workflow")
    assert problems[1]["message"].startswith("{{review.reason_given}} reads 'reason_given', which step 'review'")


def test_a_modulex_reference_to_no_node_is_refused_naming_it(api: Api) -> None:
    schema = worked_example()
    schema["nodes"][1]["interrupt_config"]["message"] = "Approve sending this draft?\n\n{{node_drfat}}"
    got = api.call("POST", "/workflows", {"name": "typo", "workflow_schema": schema})
    assert got.status_code == 422, got.text
    (error,) = got.json()["detail"]
    assert error["loc"][-2:] == ["config", "message"]
    assert error["msg"].startswith("{{node_drfat}} names no step of this workflow")
