"""Issue 11, findings 1, 2 and 4, over HTTP against the local stack: amplifying templates, expressions that
recursed out, and gates followed by what cannot be stored. Each answer is a clear 4xx or a failed run, the
server keeps answering, and no run answer grows past the budget."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from tests.support.local_stack import Api, wire

# What a Lambda (and API Gateway) can answer at most.
ANSWER_LIMIT = 6 * 1024 * 1024
SEED = "s" * 100


def amplifying_chain(levels: int) -> dict[str, Any]:
    """The finding's definition: each transform repeats the previous output ten times (~1.6 KB at 7 levels)."""
    nodes = [{"id": "t0", "typeId": "core.transform", "config": {"outputs": {"v": "{{inputs.seed}}" * 10}}}]
    nodes += [
        {"id": f"t{i}", "typeId": "core.transform", "config": {"outputs": {"v": f"{{{{t{i - 1}.v}}}}" * 10}}}
        for i in range(1, levels)
    ]
    edges = [{"sourceNodeId": f"t{i - 1}", "targetNodeId": f"t{i}"} for i in range(1, levels)]
    return {"nodes": nodes, "edges": edges, "variables": [{"name": "seed", "type": "string"}]}


def register(api: Api, definition: dict[str, Any]) -> str:
    workflow_id = f"budget-{uuid.uuid4().hex[:8]}"
    got = api.put_workflow(workflow_id, definition)
    assert got.status_code == 201, got.text
    return workflow_id


def assert_responsive(api: Api) -> None:
    assert api.session.get(api.base_url + "/.well-known/openwop", timeout=10).status_code == 200


@pytest.mark.parametrize("levels", [5, 7])
def test_template_amplification_fails_the_run_at_once_and_the_server_stays_responsive(api: Api, levels: int):
    definition = amplifying_chain(levels)
    assert len(json.dumps(definition)) < 2000
    workflow_id = register(api, definition)
    # Before: 7 levels hung past 120 s while the API grew past 10 GB (Api.call gives up after 30 s).
    run = api.start(workflow_id, inputs={"seed": SEED})
    assert run["status"] == "failed"
    got = api.call("GET", f"/runs/{wire(run['runId'])}")
    assert got.status_code == 200
    assert len(got.content) < ANSWER_LIMIT  # before: 11 MB at 5 levels
    snapshot = got.json()
    assert snapshot["error"]["code"] == "interlude.budget_exceeded"
    assert snapshot["extensions"]["interlude.run"]["failedNodeId"] == "t2"  # the first output past 64 KiB
    assert_responsive(api)


def test_a_loop_that_doubles_its_output_is_refused_at_registration_naming_the_node(api: Api):
    definition = {
        "nodes": [
            {"id": "start", "typeId": "core.noop"},
            {"id": "grow", "typeId": "core.transform", "config": {"outputs": {"v": "{{grow.v}}{{grow.v}}"}}},
        ],
        "edges": [
            {"sourceNodeId": "start", "targetNodeId": "grow", "triggerRule": "any_success"},
            {"sourceNodeId": "grow", "targetNodeId": "grow", "triggerRule": "any_success"},
        ],
    }
    got = api.put_workflow(f"grow-{uuid.uuid4().hex[:8]}", definition)
    assert got.status_code == 400, got.text
    body = got.json()
    assert body["error"] == "validation_error"
    assert [e["path"] for e in body["details"]["errors"]] == ["nodes/1/config"]
    assert "'grow'" in body["details"]["errors"][0]["message"]


def test_a_gate_before_a_node_past_its_budget_resolves_and_the_run_fails_clearly(api: Api):
    workflow_id = register(
        api,
        {
            "nodes": [
                {"id": "review", "typeId": "core.approvalGate", "config": {"title": "Go?"}},
                {"id": "blow", "typeId": "core.transform", "config": {"outputs": {"v": "{{inputs.seed}}" * 1000}}},
            ],
            "edges": [{"sourceNodeId": "review", "targetNodeId": "blow"}],
            "variables": [{"name": "seed", "type": "string"}],
        },
    )
    run = api.start(workflow_id, inputs={"seed": SEED})
    assert run["status"] == "waiting-approval"
    # Before: every resolve answered 413 payload_too_large and the run waited forever.
    answered = api.resolve(run["runId"], "review", {"action": "accept"})
    assert answered.status_code == 200, answered.text
    after = api.run(run["runId"])
    assert (after["status"], after["error"]["code"]) == ("failed", "interlude.budget_exceeded")
    assert after["nodeStates"]["review"]["status"] == "completed"


def test_a_resume_value_past_its_budget_is_413_and_the_gate_stays_open(api: Api):
    data = {"eventType": "order.paid", "correlation": {"orderId": "o-1"}}  # no resumeSchema: any value
    gate = {"id": "wait", "typeId": "core.interrupt", "config": {"kind": "external-event", "data": data}}
    run = api.start(register(api, {"nodes": [gate]}))
    got = api.resolve(run["runId"], "wait", {"blob": "c" * 70_000})
    assert got.status_code == 413, got.text
    assert got.json()["error"] == "payload_too_large"
    assert api.run(run["runId"])["status"] == "waiting-external"


# -- the ModuleX expression language -------------------------------------------------------------------


def conditional_workflow(condition: str) -> dict[str, Any]:
    return {
        "entry_point": "ask",
        "nodes": [
            {"id": "ask", "type": "interrupt", "x": 0, "y": 0, "interrupt_config": {"message": "Go on?"}},
            {
                "id": "route",
                "type": "conditional",
                "x": 0,
                "y": 0,
                "conditional_config": {
                    "expression_branches": [{"name": "sum", "condition": condition, "target": "done"}],
                },
            },
            {"id": "done", "type": "transformer", "x": 0, "y": 0, "transformer_config": {}},
        ],
        "edges": [{"source": "ask", "target": "route"}],
    }


@pytest.mark.parametrize(
    "condition",
    ["[" * 130 + "]" * 130 + " == []", "len(" * 130 + "'a'" + ")" * 130 + " > 0"],
    ids=["list-130-deep", "len-130-deep"],
)
def test_deeply_nested_conditions_are_422_naming_the_branch(api: Api, condition: str):
    got = api.call("POST", "/workflows/run", {"workflow": conditional_workflow(condition), "input": {}})
    # Before: 500 at validation (RecursionError).
    assert got.status_code == 422, got.text
    detail = got.json()["detail"]
    assert any("expression_branches[0].condition" in d["msg"] and "nests too deeply" in d["msg"] for d in detail)
    assert_responsive(api)


def test_a_990_term_condition_is_accepted_and_the_run_resumes_past_it(api: Api):
    condition = "+".join(["1"] * 990) + " == 990"
    assert len(condition) < 2000
    started = api.call("POST", "/workflows/run", {"workflow": conditional_workflow(condition), "input": {}})
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"]
    assert api.run(run_id)["status"] == "waiting-approval"
    # Before: every resume and run-scoped resolve answered 500 (RecursionError) and the run was stuck.
    resumed = api.call("POST", f"/workflows/resume/{run_id}", {"run_id": run_id, "resume_value": {"ok": True}})
    assert resumed.status_code == 200, resumed.text
    after = api.run(run_id)
    assert after["status"] == "completed"
    assert after["nodeStates"]["done"]["status"] == "completed"
