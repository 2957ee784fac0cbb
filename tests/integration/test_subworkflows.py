"""core.subWorkflow in-process: moto (DynamoDB and its stream) and the real dispatch handler, every stream record
delivered twice. The child starts once, its outcome lands on the parent once, the parent's end cascades."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import boto3
import pytest

from interlude import wiring
from interlude.adapters import metrics
from interlude.adapters.outbox_feed import forward
from interlude.app.retries import MAX_RACE_RETRIES
from interlude.app.snapshots import snapshot
from interlude.composition import Services
from interlude.config import Settings
from interlude.domain.clock import instant
from interlude.domain.errors import Forbidden, NotFound
from interlude.domain.ids import tenant_of
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.subworkflows import MAX_DEPTH, child_run_id
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.store.facade import Store
from interlude.store.inbox import InboxIndex
from interlude.store.stream import is_event_insert
from tests.integration.conftest import new_api_key, state_of
from tests.support.emf import as_function, of, written
from tests.support.local_stack import wire
from tests.support.logs import function_log
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.queues import mapped, queued
from tests.support.stream import Stream, dispatch


@pytest.fixture
def services(world, monkeypatch):
    env = {"PUBLIC_BASE_URL": "https://interlude.example.com", "INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Services(Store(TABLE, ENTRIES_TABLE))


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


def parent(workflow_id: str = "child", got: str = "{{spawn.answer.order}}", **config: Any) -> dict:
    return {
        "id": "parent",
        "name": "parent",
        "nodes": [
            {
                "id": "spawn",
                "typeId": "core.subWorkflow",
                "config": {"workflowId": workflow_id, "inputs": {"order": "{{inputs.orderId}}"}, **config},
            },
            {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": got}}},
        ],
        "edges": [{"id": "e", "sourceNodeId": "spawn", "targetNodeId": "after"}],
        "variables": [{"name": "orderId", "type": "string"}],
    }


def started(services, admin, child: dict | None = CHILD, workflow_id: str = "child", definition: dict | None = None) -> str:
    if child is not None:
        services.workflows.put_workflow(admin, child["id"], WorkflowDefinition.model_validate(child))
    definition = definition or parent(workflow_id)
    services.workflows.put_workflow(admin, "parent", WorkflowDefinition.model_validate(definition))
    request = CreateRunRequest.model_validate({"workflowId": "parent", "inputs": {"orderId": "o-1"}})
    return services.lifecycle.create_run(admin, request).runId


def test_the_child_starts_once_and_its_outputs_complete_the_node_once(services, admin):
    run_id = started(services, admin)
    stream = Stream(TABLE)
    stream.settle()

    child_id = child_run_id(run_id, "spawn", 1)
    child = state_of(services, child_id)
    assert (child.status, child.parentRunId, child.inputs) == ("waiting-approval", run_id, {"order": "o-1"})
    assert snapshot(child)["parentRunId"] == run_id
    assert snapshot(child)["extensions"]["interlude.run"]["parentNodeId"] == "spawn"
    assert snapshot(state_of(services, run_id))["extensions"]["interlude.run"]["childRunIds"] == [child_id]
    assert state_of(services, run_id).status == "running"

    services.decisions.resolve_interrupt(admin, child_id, "gate", {"action": "accept"})
    stream.settle()

    done = state_of(services, run_id)
    assert done.status == "completed"
    assert done.outputs["after"] == {"got": "o-1"}
    landed = [e for e in services.store.read_events(run_id) if e["type"] == "node.completed" and e["nodeId"] == "spawn"]
    assert len(landed) == 1


def test_a_rejected_child_fails_the_parents_node(services, admin):
    run_id = started(services, admin)
    stream = Stream(TABLE)
    stream.settle()

    services.decisions.resolve_interrupt(admin, child_run_id(run_id, "spawn", 1), "gate", {"action": "reject"})
    stream.settle()

    failed = state_of(services, run_id)
    assert failed.status == "failed"
    assert failed.error["code"] == "interlude.subworkflow_failed"
    assert failed.error["details"]["childError"]["code"] == "approval_rejected"


def test_a_child_of_a_missing_workflow_fails_the_node_instead_of_waiting(services, admin):
    run_id = started(services, admin, child=None, workflow_id="nowhere")
    Stream(TABLE).settle()

    failed = state_of(services, run_id)
    assert (failed.status, failed.error["code"]) == ("failed", "interlude.subworkflow_unavailable")
    assert services.store.get_run(child_run_id(run_id, "spawn", 1)) is None


def test_cancelling_the_parent_cancels_the_child_and_closes_its_gate(services, admin):
    run_id = started(services, admin)
    stream = Stream(TABLE)
    stream.settle()

    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest.model_validate({}))
    stream.settle()

    child = state_of(services, child_run_id(run_id, "spawn", 1))
    assert child.status == "cancelled"
    assert child.interrupts == {}
    assert state_of(services, run_id).status == "cancelled"


def child_keeps_changing(monkeypatch, child_id: str, times: int | None) -> dict[str, int | None]:
    """A concurrent writer moves the child (its head, written at its next version, as a fork's record of itself is)
    between each read of a cancel and its commit, `times` times (None: every time): the cancel loses to the real
    table's condition. Answers the writer's count of times left, to stop it (0)."""
    commit = Store.commit
    left = {"times": times}

    def racing(self, transition, expected_version, *args, **kwargs):
        if transition.state.runId == child_id and left["times"] != 0:
            left["times"] = None if left["times"] is None else left["times"] - 1
            state, version = self.get_run(child_id)
            self.rewrite_head(state, version)
        return commit(self, transition, expected_version, *args, **kwargs)

    # On the class: the dispatch function's own services (its process's composition) commit through it too.
    monkeypatch.setattr(Store, "commit", racing)
    return left


def cancelled_by_parent(services, child_id: str) -> list[dict]:
    return [e for e in services.store.read_events(child_id) if e["type"] == "run.cancelled"]


def test_a_child_that_keeps_changing_through_the_cascade_is_cancelled_when_the_record_comes_again(
    services, admin, monkeypatch
):
    # Given a parent waiting on its child, and a writer that moves the child more often than a cascade retries
    run_id = started(services, admin)
    stream = Stream(TABLE)
    stream.settle()
    child_id = child_run_id(run_id, "spawn", 1)
    child_keeps_changing(monkeypatch, child_id, MAX_RACE_RETRIES + 2)
    function = as_function(monkeypatch, "cascade-test", "dispatch")

    # When the parent is cancelled and dispatch is handed its end
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest.model_validate({}))
    records = stream.take()
    with function_log("dispatch", level="ERROR") as lines, written("dispatch") as points:
        answer = dispatch(records)

    # Then the record of the parent's end fails, to come again (the child is not left running silently): one
    # RecordFailures point, what the dispatch alarm reads, and one ERROR line naming the child
    failed = [f["itemIdentifier"] for f in answer["batchItemFailures"]]
    assert len(failed) == 1
    assert of(points, metrics.RECORD_FAILURES) == [{"deployment": "cascade-test", "FunctionName": function}]
    (line,) = lines
    assert (line["message"], line["runId"]) == ("record failed; the mapping retries it", run_id)
    assert line["exception_name"] == "ChildrenNotCancelled"
    assert child_id in line["exception"]
    assert state_of(services, child_id).status == "waiting-approval"

    # And when the queue hands the record out again, the child is cancelled, by its parent, its gate closed
    again = [r for r in records if r["dynamodb"]["SequenceNumber"] in failed]
    assert dispatch(again) == {"batchItemFailures": []}
    child = state_of(services, child_id)
    assert (child.status, child.interrupts) == ("cancelled", {})
    assert cancelled_by_parent(services, child_id)[0]["payload"]["parentRunId"] == run_id

    # And a further delivery leaves the cancelled child alone
    assert dispatch(records) == {"batchItemFailures": []}
    assert len(cancelled_by_parent(services, child_id)) == 1


# A world of its own: it plays the outbox queue's mapping and reads its dead letters.
@pytest.mark.private_world
def test_a_cascade_that_keeps_losing_waits_in_the_outbox_dead_letters_and_cancels_the_child_when_sent_back(
    services, admin, world, monkeypatch
):
    # Given a parent waiting on its child, and a writer that moves the child at every cancel
    run_id = started(services, admin)
    stream = Stream(TABLE)
    stream.settle()
    child_id = child_run_id(run_id, "spawn", 1)
    writer = child_keeps_changing(monkeypatch, child_id, None)
    outbox, dead_letters = world.queues[wiring.OUTBOX_QUEUE], world.queues["outbox-dlq"]

    # When the parent is cancelled, its end is queued on the outbox and its mapping hands it out until SQS gives up
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest.model_validate({}))
    forward(outbox, [r for r in stream.take() if is_event_insert(r)])
    handed = mapped(outbox, "dispatch", wiring.OUTBOX_MAX_RECEIVES + 5)

    # Then dispatch tried it as often as the queue allows, and the message waits in the outbox's dead letters (what the
    # dlq-outbox-dlq alarm reads), the child still running
    assert len(handed) == wiring.OUTBOX_MAX_RECEIVES
    (kept,) = queued(dead_letters)
    assert kept["Body"] == handed[0]
    assert state_of(services, child_id).status == "waiting-approval"

    # And when the writer is done and the operator sends it back to the outbox (docs/operations.md), the child is
    # cancelled, once however often it comes
    writer["times"] = 0
    boto3.client("sqs").send_message(QueueUrl=outbox, MessageBody=kept["Body"], MessageGroupId=tenant_of(run_id))
    assert mapped(outbox, "dispatch", 5) == [kept["Body"]]
    assert state_of(services, child_id).status == "cancelled"
    assert dispatch(stream.take(again=True)) == {"batchItemFailures": []}
    assert len(cancelled_by_parent(services, child_id)) == 1


def test_two_deliveries_racing_to_start_the_child_leave_the_winners_gate_item(services, admin, monkeypatch):
    run_id = started(services, admin)
    Stream(TABLE).settle()
    child_id = child_run_id(run_id, "spawn", 1)
    gate = state_of(services, child_id).interrupts["gate"]
    # A second delivery of the request that read no child before the first committed: it builds the same child (its
    # id is derived from the parent's step) a moment later, and loses the head's condition.
    sub_workflows = services.sub_workflows
    read = sub_workflows.records.get_run
    monkeypatch.setattr(sub_workflows.records, "get_run", lambda r: None if r == child_id else read(r))
    monkeypatch.setattr(sub_workflows, "clock", lambda: instant(gate.raisedAt) + timedelta(seconds=5))
    # and stops after its refusal, before it takes back its entries (put with its own time): they name the winner's gate
    puts = InboxIndex.batch_write
    monkeypatch.setattr(InboxIndex, "batch_write", lambda self, requests, *where: puts(self, [r for r in requests if "PutRequest" in r], *where))
    sub_workflows.start_child(run_id, {"nodeId": "spawn", "visit": 1, "childRunId": child_id})
    monkeypatch.setattr(InboxIndex, "batch_write", puts)
    # The gate's item is the winner's, put in its transaction: the loser's never overwrote it nor took it back.
    item = services.store.closed_interrupt(child_id, gate.key)
    assert item is not None
    assert (item["raisedAt"], item["status"]) == (gate.raisedAt, "open")
    assert services.inbox.inbox(admin, 25, {"runId": child_id}, None)["interrupts"][0]["raisedAt"] == gate.raisedAt
    # and the page that reads the gate's entries, the winner's and the loser's, lists it once (BatchGetItem refuses a
    # repeated key); the child is in the run listing
    key = new_api_key(services)
    _, inbox = http(key, "GET", "/interrupts?limit=100")
    assert [i["runId"] for i in inbox["interrupts"]].count(child_id) == 1
    _, listing = http(key, "GET", "/runs?limit=100")
    assert child_id in [r["runId"] for r in listing["runs"]]


def test_ancestry_names_the_immediate_parent_and_refuses_foreign_or_unknown_runs(services, admin, tenant):
    run_id = started(services, admin)
    Stream(TABLE).settle()
    child_id = child_run_id(run_id, "spawn", 1)

    assert services.sub_workflows.run_ancestry(admin, child_id)["parent"] == {
        "runId": run_id,
        "hostId": "interlude",
        "cause": "core.subWorkflow",
    }
    assert services.sub_workflows.run_ancestry(admin, run_id)["parent"] is None
    with pytest.raises(NotFound):
        services.sub_workflows.run_ancestry(admin, f"{tenant}/nosuchrun0000000000000")
    with pytest.raises(Forbidden) as refused:
        services.sub_workflows.run_ancestry(admin, "other/nosuchrun0000000000000")
    assert refused.value.code == "id_tenant_mismatch"


def http(key: str | None, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A request through the real api handler, as the gateway hands it over."""
    headers = {"content-type": "application/json"} | ({"authorization": f"Bearer {key}"} if key else {})
    raw = b"" if body is None else json.dumps(body).encode()
    got = lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))
    return got["statusCode"], json.loads(got["body"]) if got.get("body") else None


def test_discovery_and_the_ancestry_route_agree_from_one_switch(services, admin, monkeypatch, tenant):
    key = new_api_key(services)
    run_id = started(services, admin)
    Stream(TABLE).settle()
    child_id = child_run_id(run_id, "spawn", 1)

    _, caps = http(None, "GET", "/.well-known/openwop")
    assert caps["subWorkflow"] == {
        "status": "experimental",
        "since": "2.0",
        "until": "2.1",
        "witness": "claims-check",
        "inputMapping": True,
    }
    causation = caps["multiAgent"]["executionModel"]["crossHostCausation"]
    assert causation["ancestryEndpointSupported"] is True
    status, ancestry = http(key, "GET", f"/runs/{wire(child_id)}/ancestry")
    assert status == 200
    assert ancestry["hostId"] == ancestry["parent"]["hostId"] == causation["hostId"]

    monkeypatch.setenv("INTERLUDE_ANCESTRY_ENDPOINT", "off")
    lambda_runtime.fresh_instances()
    _, caps = http(None, "GET", "/.well-known/openwop")
    assert "multiAgent" not in caps
    assert "subWorkflow" in caps
    for run in (child_id, f"{tenant}/nosuchrun0000000000000"):
        status, refused = http(key, "GET", f"/runs/{wire(run)}/ancestry")
        assert (status, refused["error"]) == (404, "not_found")


def test_a_switch_is_read_by_its_words(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", TABLE)
    monkeypatch.setenv("ENTRIES_TABLE_NAME", ENTRIES_TABLE)
    for word, served in (("off", False), ("FALSE", False), ("0", False), ("on", True), ("true", True)):
        monkeypatch.setenv("INTERLUDE_ANCESTRY_ENDPOINT", word)
        assert Settings.from_env().ancestry_endpoint is served
    monkeypatch.setenv("INTERLUDE_ANCESTRY_ENDPOINT", "maybe")
    with pytest.raises(RuntimeError, match="a switch is one of"):
        Settings.from_env()


def test_a_late_resolve_answers_the_same_409_for_a_cascaded_child_and_a_cancelled_run(services, admin):
    """v2 errors.md, one code per state (RFC 0213 §C): a resolve on a cancelled run is 409 interrupt_already_resolved
    on both surfaces; 410 interrupt_gone is v1's, unregistered in v2 (docs/adr/0033)."""
    key = new_api_key(services)
    run_id = started(services, admin)
    stream = Stream(TABLE)
    stream.settle()
    child_id = child_run_id(run_id, "spawn", 1)
    plain = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "child", "inputs": {"order": "o-2"}}))
    tokens = {}
    for run in (child_id, plain.runId):
        status, minted = http(key, "POST", f"/runs/{wire(run)}/interrupts/gate/tokens", {"intent": "resolve"})
        assert status == 201, minted
        tokens[run] = minted["token"]

    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest.model_validate({}))
    services.lifecycle.cancel_run(admin, plain.runId, CancelRunRequest.model_validate({}))
    stream.settle()

    assert state_of(services, child_id).status == state_of(services, plain.runId).status == "cancelled"
    for run in (child_id, plain.runId):
        by_run = http(key, "POST", f"/runs/{wire(run)}/interrupts/gate", {"resumeValue": {"action": "accept"}})
        by_token = http(None, "POST", f"/interrupts/{tokens[run]}", {"resumeValue": {"action": "accept"}})
        for status, refused in (by_run, by_token):
            assert (status, refused["error"]) == (409, "interrupt_already_resolved")
            assert refused["details"]["runStatus"] == "cancelled"


def test_mappings_carry_parent_variables_in_and_chosen_child_outputs_out(services, admin):
    mapped = parent(got="{{spawn.order}}", inputs={}, inputMapping={"order": "orderId"})
    mapped["nodes"][0]["config"]["outputMapping"] = {"order": "answer.order"}
    run_id = started(services, admin, definition=mapped)
    stream = Stream(TABLE)
    stream.settle()
    child_id = child_run_id(run_id, "spawn", 1)
    assert state_of(services, child_id).inputs == {"order": "o-1"}

    services.decisions.resolve_interrupt(admin, child_id, "gate", {"action": "accept"})
    stream.settle()

    done = state_of(services, run_id)
    assert done.status == "completed"
    assert done.outputs["spawn"] == {"order": "o-1"}
    assert done.outputs["after"] == {"got": "o-1"}


def test_a_mapping_to_an_undeclared_parent_variable_is_refused_at_registration_over_http(services):
    key = new_api_key(services)
    refused = parent(inputs={}, inputMapping={"order": "nosuch"})

    status, body = http(key, "PUT", "/workflows/parent", refused)

    assert (status, body["error"]) == (400, "validation_error")
    assert body["details"]["errors"] == [
        {"path": "nodes/0/config/inputMapping/order", "message": "'nosuch' is not a variable this workflow declares"}
    ]


def test_a_failed_child_fails_the_node_which_routes_like_any_failure(services, admin):
    routed = parent()
    routed["nodes"].append({"id": "handled", "typeId": "core.transform", "config": {"outputs": {"why": "{{spawn}}"}}})
    routed["edges"].append({"id": "f", "sourceNodeId": "spawn", "targetNodeId": "handled", "triggerRule": "any_failed"})
    run_id = started(services, admin, definition=routed)
    stream = Stream(TABLE)
    stream.settle()

    services.decisions.resolve_interrupt(admin, child_run_id(run_id, "spawn", 1), "gate", {"action": "reject"})
    stream.settle()

    state = state_of(services, run_id)
    failed = [e for e in services.store.read_events(run_id) if e["type"] == "node.failed"]
    assert [(e["nodeId"], e["payload"]["error"]["code"]) for e in failed] == [("spawn", "interlude.subworkflow_failed")]
    assert (state.status, state.nodes["handled"].status, state.nodes["after"].status) == ("completed", "completed", "skipped")


def test_a_child_cancelled_on_its_own_fails_the_parents_node_and_names_no_parent(services, admin):
    run_id = started(services, admin)
    stream = Stream(TABLE)
    stream.settle()
    child_id = child_run_id(run_id, "spawn", 1)

    services.lifecycle.cancel_run(admin, child_id, CancelRunRequest.model_validate({}))
    stream.settle()

    failed = state_of(services, run_id)
    assert (failed.status, failed.error["code"]) == ("failed", "interlude.subworkflow_cancelled")
    assert failed.error["details"]["childRunId"] == child_id
    cancelled = [e for e in services.store.read_events(child_id) if e["type"] == "run.cancelled"]
    assert len(cancelled) == 1
    assert "parentRunId" not in cancelled[0]["payload"]


def test_a_workflow_that_starts_itself_stops_at_the_depth_limit_and_every_level_fails(services, admin):
    recursive = {
        "id": "again",
        "name": "again",
        "nodes": [{"id": "spawn", "typeId": "core.subWorkflow", "config": {"workflowId": "again"}}],
        "edges": [],
    }
    services.workflows.put_workflow(admin, "again", WorkflowDefinition.model_validate(recursive))
    root = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "again"})).runId
    Stream(TABLE).settle(rounds=40)

    chain = [state_of(services, root)]
    while chain[-1].children:
        chain.append(state_of(services, chain[-1].children[0]))
    assert [run.depth for run in chain] == list(range(MAX_DEPTH + 1))
    assert {run.status for run in chain} == {"failed"}
    deepest = chain[-1].error
    assert (deepest["code"], deepest["details"]["budget"]) == ("interlude.subworkflow_limit_exceeded", "depth")
    assert {run.error["code"] for run in chain[:-1]} == {"interlude.subworkflow_failed"}
