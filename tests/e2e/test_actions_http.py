"""Gated core.http actions over HTTP on the local stack (development mode: loopback receivers admitted): the stack's
pumps run the outbox and the actions worker; GET /runs/{runId}/effects answers in its OpenWOP shape,
and both it and GET /host/effect-seams refuse as declared (the manifest itself: tests/integration/test_discovery.py)."""

from __future__ import annotations

import uuid

import pytest

from interlude.domain import schemas
from tests.support.engine import refund_definition
from tests.support.local_stack import Api, running_stack, until, wire
from tests.support.receiver import Receiver

LEDGER = schemas.validator("effect-ledger-projection.schema.json")


def workflow(url: str) -> dict:
    return {
        "name": "Refund after approval",
        "nodes": [
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Refund {{inputs.orderId}}?"}},
            {
                "id": "refund",
                "typeId": "core.http",
                "config": {"url": url, "body": {"order": "{{inputs.orderId}}"}, "effectKey": "refund-{{inputs.orderId}}"},
            },
        ],
        "edges": [{"id": "g-r", "sourceNodeId": "gate", "targetNodeId": "refund"}],
        "variables": [{"name": "orderId", "type": "string"}],
    }


@pytest.fixture(scope="module")
def receiver():
    started = Receiver(answer=b'{"refundId":"r-1"}', answer_type="application/json").start()
    yield started
    started.close()


@pytest.fixture(scope="module")
def api(tmp_path_factory, receiver):
    env = {"INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1", "INTERLUDE_ACTION_BACKOFF_BASE_S": "0"}
    with running_stack(tmp_path_factory.mktemp("actions"), env) as info:
        api = Api.of(info)
        assert api.put_workflow("refund", workflow(receiver.url("/refunds"))).status_code == 201
        yield api


def test_an_approved_action_runs_once_and_its_effect_is_listed(api, receiver):
    order = f"o-{uuid.uuid4().hex[:6]}"
    run_id = api.start("refund", inputs={"orderId": order})["runId"]
    assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    assert api.resolve(run_id, "gate", {"action": "accept"}).status_code == 200

    snap = api.wait_status(run_id, {"completed", "failed"}, timeout_s=60)

    assert snap["status"] == "completed"
    assert snap["variables"]["refund"]["body"] == {"refundId": "r-1"}
    hits = [h for h in receiver.hits if order.encode() in h.body]
    assert len(hits) == 1
    got = api.call("GET", f"/runs/{wire(run_id)}/effects")
    assert got.status_code == 200
    body = got.json()
    assert list(LEDGER.iter_errors(body)) == []
    (effect,) = body["effects"]
    assert effect["effectId"] == snap["variables"]["refund"]["effectId"]
    assert (effect["nodeId"], effect["state"], effect["keying"]) == ("refund", "completed", "business-identity")
    assert hits[0].headers["idempotency-key"] == effect["providerKey"]


def test_a_run_not_yet_acting_has_no_effects(api):
    run_id = api.start("refund", inputs={"orderId": "o-never"})["runId"]
    got = api.call("GET", f"/runs/{wire(run_id)}/effects")
    assert got.status_code == 200
    assert got.json() == {"runId": run_id, "effects": []}


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/runs/demo~2FN0-such-run-xxxxxxxxxxxx/effects", 404, "not_found"),
        ("/runs/other~2FN0-such-run-xxxxxxxxxxxx/effects", 403, "id_tenant_mismatch"),
        ("/runs/demo~2Fshort/effects", 400, "validation_error"),
    ],
)
def test_run_effects_refuse_as_declared(api, path, status, code):
    got = api.call("GET", path)
    assert got.status_code == status
    assert got.json()["error"] == code


@pytest.mark.parametrize("path", ["/runs/demo~2FN0-such-run-xxxxxxxxxxxx/effects", "/host/effect-seams"])
def test_effects_and_seams_need_a_key_with_runs_read(api, path):
    assert api.session.get(api.base_url + path, timeout=30).status_code == 401
    key = api.new_key(["events:write"])
    got = api.call("GET", path, key=key)
    assert got.status_code == 403
    assert got.json()["error"] == "forbidden"


def test_a_core_http_config_outside_its_limits_is_refused_at_registration(api):
    bad = workflow("https://api.example.com/x")
    bad["nodes"][1]["config"]["headers"] = {"Idempotency-Key": "mine"}
    got = api.put_workflow("refund-bad", bad)
    assert got.status_code == 400
    assert got.json()["error"] == "validation_error"
    assert "Idempotency-Key" in got.text


def test_a_pending_action_leaves_the_run_and_its_node_running(api, receiver):
    """While the call is in flight the run reads `running` (no waiting-* status: nobody is asked anything)."""
    slow = Receiver(script=[("sleep", 20)]).start()
    try:
        assert api.put_workflow("slow", workflow(slow.url())).status_code == 201
        run_id = api.start("slow", inputs={"orderId": "o-slow"})["runId"]
        api.wait_status(run_id, {"waiting-approval"})
        api.resolve(run_id, "gate", {"action": "accept"})
        assert until(lambda: slow.hits, 60)
        assert api.run(run_id)["status"] == "running"
        assert api.run(run_id)["nodeStates"]["refund"]["status"] == "running"
    finally:
        slow.close()


def test_the_refund_examples_refine_pays_nothing_and_its_approval_pays_once(api, receiver):
    """examples/refund-with-changes.json with its payment on this receiver (issue 28, item 4)."""
    definition = refund_definition()
    next(n for n in definition["nodes"] if n["id"] == "pay")["config"]["url"] = receiver.url("/refunds")
    assert api.put_workflow("refund-with-changes", definition).status_code == 201
    order = f"o-{uuid.uuid4().hex[:6]}"
    run_id = api.start("refund-with-changes", inputs={"orderId": order, "amount": 40})["runId"]
    api.wait_status(run_id, {"waiting-approval"})

    refine = {"action": "refine", "refineFeedback": {"scope": "whole", "text": "make it 30"}}
    assert api.resolve(run_id, "review", refine).json()["status"] == "waiting-approval"
    # Nothing to pay: the draft is asked about again, and no payment was requested
    assert api.run(run_id)["variables"]["draft"]["changesAsked"] == "make it 30"
    assert "interlude.action-requested" not in [e["type"] for e in api.events(run_id)]
    assert api.resolve(run_id, "review", {"action": "accept"}).status_code == 200
    snap = api.wait_status(run_id, {"completed", "failed"}, timeout_s=60)
    assert snap["status"] == "completed"
    # One payment, requested once (the effect key would also hide a second request: count the requests)
    assert [e["type"] for e in api.events(run_id)].count("interlude.action-requested") == 1
    assert len([h for h in receiver.hits if order.encode() in h.body]) == 1
