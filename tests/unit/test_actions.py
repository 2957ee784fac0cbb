"""core.http in the engine: its config's limits, the request a visit renders, the effect's identity, and the
outcome landing (engine/actions.py, engine/run.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from interlude.domain.models.run import RunState
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import run as engine
from interlude.engine.actions import (
    ACTION_REQUESTED,
    MAX_BODY_BYTES,
    MAX_RESPONSE_BUDGET_BYTES,
    effect_identity,
    provider_key,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def definition(**config: object) -> WorkflowDefinition:
    http = {"url": "https://api.example.com/refunds/{{inputs.orderId}}", **config}
    return WorkflowDefinition.model_validate(
        {
            "id": "w",
            "name": "w",
            "nodes": [{"id": "call", "typeId": "core.http", "config": http}, {"id": "after", "typeId": "core.noop"}],
            "edges": [{"id": "e", "sourceNodeId": "call", "targetNodeId": "after"}],
            "variables": [{"name": "orderId", "type": "string"}],
        }
    )


def started(wf: WorkflowDefinition, run_id: str = "t1/runrunrunrunrunrun01", **inputs: object) -> engine.Transition:
    state = RunState(
        runId=run_id,
        tenant="t1",
        workflowId="w",
        workflowVersion=1,
        owner={},
        inputs={"orderId": "o-1", **inputs},
        createdAt="2026-12-01T12:00:00Z",
    )
    return engine.start(state, wf, NOW)


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"headers": {"Idempotency-Key": "mine"}}, "headers"),
        ({"headers": {"Host": "elsewhere"}}, "headers"),
        ({"headers": {"bad header": "x"}}, "headers"),
        ({"secretHeaders": {"Authorization": "../other-tenant/key"}}, "secretHeaders"),
        ({"expectStatuses": [700]}, "expectStatuses"),
        ({"responseBudgetBytes": MAX_RESPONSE_BUDGET_BYTES + 1}, "responseBudgetBytes"),
        ({"timeoutMs": 60_000}, "timeoutMs"),
        ({"maxAttempts": 11}, "maxAttempts"),
        ({"method": "TRACE"}, "method"),
        ({"headers": {f"X-{i}": "v" for i in range(21)}}, "headers"),
        ({"url": "https://x.example/" + "a" * 2048}, "url"),
        ({"sendTo": "elsewhere"}, "sendTo"),
    ],
)
def test_a_config_outside_its_limits_is_refused_at_registration(config, path):
    problems = engine.check_config(definition(**config))
    assert problems
    assert problems[0]["path"].startswith(f"nodes/0/config/{path}")


def test_a_visit_renders_its_request_and_waits_running():
    t = started(definition(headers={"X-Order": "{{inputs.orderId}}"}, body={"order": "{{inputs.orderId}}"}))

    assert t.state.status == "running"
    assert t.state.nodes["call"].status == "running"
    pending = t.state.actions["call"]
    assert pending.request["url"] == "https://api.example.com/refunds/o-1"
    assert pending.request["headers"] == {"X-Order": "o-1"}
    assert pending.request["body"] == '{"order":"o-1"}'
    (requested,) = [e for e in t.events if e.type == ACTION_REQUESTED]
    assert requested.payload == {"nodeId": "call", "kind": "http", "effectId": pending.effectId, "visit": 1}


def test_a_url_that_renders_to_no_text_fails_the_node_with_validation_error():
    t = started(definition(url="{{inputs.target}}"), target={"not": "a url"})

    assert t.state.nodes["call"].status == "failed"
    failed = next(e for e in t.events if e.type == "node.failed")
    assert failed.payload["error"]["code"] == "validation_error"
    assert t.state.actions == {}


def test_a_body_over_its_budget_fails_the_node():
    t = started(definition(body="{{inputs.big}}"), big="x" * (MAX_BODY_BYTES + 1))

    failed = next(e for e in t.events if e.type == "node.failed")
    assert failed.payload["error"]["code"] == "validation_error"
    assert "request body" in failed.payload["error"]["message"]


def test_a_business_identity_names_the_operation_not_the_run():
    one, keying = effect_identity("t1/aaaaaaaaaaaaaaaaaaaaaaaa", "call", 1, "refund-o-1")
    two, _ = effect_identity("t1/bbbbbbbbbbbbbbbbbbbbbbbb", "other", 3, "refund-o-1")
    assert one == two
    assert keying == "business-identity"
    assert effect_identity("t2/aaaaaaaaaaaaaaaaaaaaaaaa", "call", 1, "refund-o-1")[0] != one  # per tenant
    recipe, keying = effect_identity("t1/aaaaaaaaaaaaaaaaaaaaaaaa", "call", 1, None)
    assert keying == "activity-recipe"
    assert recipe != effect_identity("t1/aaaaaaaaaaaaaaaaaaaaaaaa", "call", 2, None)[0]  # another visit
    assert provider_key(recipe) == recipe.split("/", 1)[1]


def test_the_effect_key_template_is_rendered_from_the_run():
    a = started(definition(effectKey="refund-{{inputs.orderId}}"), run_id="t1/runrunrunrunrunrun01")
    b = started(definition(effectKey="refund-{{inputs.orderId}}"), run_id="t1/runrunrunrunrunrun02")
    c = started(definition(effectKey="refund-{{inputs.orderId}}"), run_id="t1/runrunrunrunrunrun03", orderId="o-2")
    assert a.state.actions["call"].effectId == b.state.actions["call"].effectId != c.state.actions["call"].effectId


def test_an_outcome_completes_the_node_once_and_the_run_goes_on():
    wf = definition()
    t = started(wf)

    done = engine.finish_action(t.state, wf, "call", 1, {"output": {"status": 200}}, NOW)

    assert done.state.outputs["call"] == {"status": 200}
    assert done.state.status == "completed"
    assert engine.finish_action(done.state, wf, "call", 1, {"output": {"status": 500}}, NOW).events == []


def test_an_outcome_for_another_visit_changes_nothing():
    wf = definition()
    t = started(wf)
    assert engine.finish_action(t.state, wf, "call", 2, {"output": {}}, NOW).events == []


def test_an_error_outcome_fails_the_node_and_the_run_without_a_failure_route():
    wf = definition()
    t = started(wf)
    error = {"code": "interlude.http_failed", "message": "m", "retryable": False}

    done = engine.finish_action(t.state, wf, "call", 1, {"error": error}, NOW)

    assert done.state.status == "failed"
    assert done.state.error["code"] == "interlude.http_failed"


def test_cancelling_the_run_cancels_the_waiting_action():
    t = started(definition())

    cancelled = engine.cancel(t.state, NOW, None, None)

    assert cancelled.state.actions == {}
    assert cancelled.state.nodes["call"].status == "skipped"
    assert ("node.cancelled", "call") in [(e.type, e.node_id) for e in cancelled.events]
