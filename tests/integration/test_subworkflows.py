"""core.subWorkflow in-process: moto (DynamoDB and its stream) and the real dispatch handler, every stream record
delivered twice. The child starts once, its outcome lands on the parent once, the parent's end cascades."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from interlude import wiring
from interlude.adapters.keyring_store import ensure_key_ring
from interlude.app.service import Service
from interlude.app.subworkflows import run_ancestry
from interlude.domain.errors import Forbidden, NotFound
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.subworkflows import child_run_id
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import create_queues, export_queue_urls
from interlude.store import Store, create_table
from tests.integration.conftest import signed_in
from tests.support.stream import Stream

TABLE = "interlude-test"
TENANT = "t1"


@pytest.fixture
def service(monkeypatch):
    env = {
        "TABLE_NAME": TABLE,
        "PUBLIC_BASE_URL": "https://interlude.example.com",
        "KEY_RING_SECRET": "interlude-test/token-keys",
        "INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        create_table(boto3.client("dynamodb"), TABLE)
        urls = create_queues(boto3.client("sqs"), TABLE)
        for queue in wiring.QUEUES:
            monkeypatch.setenv(queue.url_env, urls[queue.name])
        export_queue_urls(urls)
        ensure_key_ring(env["KEY_RING_SECRET"])
        yield Service(Store(TABLE))


@pytest.fixture
def admin(service):
    return signed_in(service, tenant=TENANT)


CHILD = {
    "id": "child",
    "name": "child",
    "nodes": [
        {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Approve {{inputs.order}}?"}},
        {"id": "answer", "typeId": "core.transform", "config": {"outputs": {"order": "{{inputs.order}}"}}},
    ],
    "edges": [{"id": "e", "sourceNodeId": "gate", "targetNodeId": "answer"}],
    "variables": [{"name": "order", "type": "string"}],
}


def parent(workflow_id: str = "child") -> dict:
    return {
        "id": "parent",
        "name": "parent",
        "nodes": [
            {
                "id": "spawn",
                "typeId": "core.subWorkflow",
                "config": {"workflowId": workflow_id, "inputs": {"order": "{{inputs.orderId}}"}},
            },
            {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{spawn.answer.order}}"}}},
        ],
        "edges": [{"id": "e", "sourceNodeId": "spawn", "targetNodeId": "after"}],
        "variables": [{"name": "orderId", "type": "string"}],
    }


def started(service, admin, child: dict | None = CHILD, workflow_id: str = "child") -> str:
    if child is not None:
        service.put_workflow(admin, child["id"], WorkflowDefinition.model_validate(child))
    service.put_workflow(admin, "parent", WorkflowDefinition.model_validate(parent(workflow_id)))
    request = CreateRunRequest.model_validate({"workflowId": "parent", "inputs": {"orderId": "o-1"}})
    return service.create_run(admin, request).runId


def settle_twice(stream: Stream, rounds: int = 20) -> None:
    """Deliver every new stream record, then all of them again, until nothing new appears."""
    for _ in range(rounds):
        fresh = stream.take()
        if not fresh:
            return
        for records in (fresh, stream.take(again=True)):
            assert lambda_runtime.invoke("dispatch", {"Records": records}) == {"batchItemFailures": []}
    raise AssertionError("the runs did not settle")


def state_of(service, run_id: str):
    got = service.store.get_run(run_id)
    assert got is not None
    return got[0]


def test_the_child_starts_once_and_its_outputs_complete_the_node_once(service, admin):
    run_id = started(service, admin)
    stream = Stream(TABLE)
    settle_twice(stream)

    child_id = child_run_id(run_id, "spawn", 1)
    child = state_of(service, child_id)
    assert (child.status, child.parentRunId, child.inputs) == ("waiting-approval", run_id, {"order": "o-1"})
    assert service.snapshot(child)["parentRunId"] == run_id
    assert state_of(service, run_id).status == "running"

    service.resolve_interrupt(admin, child_id, "gate", {"action": "accept"})
    settle_twice(stream)

    done = state_of(service, run_id)
    assert done.status == "completed"
    assert done.outputs["after"] == {"got": "o-1"}
    landed = [e for e in service.store.read_events(run_id) if e["type"] == "node.completed" and e["nodeId"] == "spawn"]
    assert len(landed) == 1


def test_a_rejected_child_fails_the_parents_node(service, admin):
    run_id = started(service, admin)
    stream = Stream(TABLE)
    settle_twice(stream)

    service.resolve_interrupt(admin, child_run_id(run_id, "spawn", 1), "gate", {"action": "reject"})
    settle_twice(stream)

    failed = state_of(service, run_id)
    assert failed.status == "failed"
    assert failed.error["code"] == "interlude.subworkflow_failed"
    assert failed.error["details"]["childError"]["code"] == "approval_rejected"


def test_a_child_of_a_missing_workflow_fails_the_node_instead_of_waiting(service, admin):
    run_id = started(service, admin, child=None, workflow_id="nowhere")
    settle_twice(Stream(TABLE))

    failed = state_of(service, run_id)
    assert (failed.status, failed.error["code"]) == ("failed", "interlude.subworkflow_unavailable")
    assert service.store.get_run(child_run_id(run_id, "spawn", 1)) is None


def test_cancelling_the_parent_cancels_the_child_and_closes_its_gate(service, admin):
    run_id = started(service, admin)
    stream = Stream(TABLE)
    settle_twice(stream)

    service.cancel_run(admin, run_id, CancelRunRequest.model_validate({}))
    settle_twice(stream)

    child = state_of(service, child_run_id(run_id, "spawn", 1))
    assert child.status == "cancelled"
    assert child.interrupts == {}
    assert state_of(service, run_id).status == "cancelled"


def test_ancestry_names_the_immediate_parent_and_refuses_foreign_or_unknown_runs(service, admin):
    run_id = started(service, admin)
    settle_twice(Stream(TABLE))
    child_id = child_run_id(run_id, "spawn", 1)

    assert run_ancestry(service, admin, child_id)["parent"] == {
        "runId": run_id,
        "hostId": "interlude",
        "cause": "core.subWorkflow",
    }
    assert run_ancestry(service, admin, run_id)["parent"] is None
    with pytest.raises(NotFound):
        run_ancestry(service, admin, f"{TENANT}/nosuchrun0000000000000")
    with pytest.raises(Forbidden) as refused:
        run_ancestry(service, admin, "other/nosuchrun0000000000000")
    assert refused.value.code == "id_tenant_mismatch"
