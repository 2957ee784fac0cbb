"""Issue 13 / reliability: a run whose graph fans out wide can always be ended. One transition is one
TransactWriteItems, which DynamoDB (and moto) refuse past 100 items, and a transition writes an item (two for an
external-event gate: its waiter) per interrupt it opens or closes and per task it cancels. These runs go through the
real api, dispatch and timeouts handlers on moto; time moves by the process clock's offset file."""

from __future__ import annotations

import json
import os
import uuid
from typing import Any
from urllib.parse import quote

import boto3
import pytest

from interlude.domain import clock
from interlude.domain.budgets import MAX_OPEN_WAITS, OPEN_WAITS_BUDGET
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.store.inbox import run_interrupts
from interlude.store.task_items import TASK_SK, task_pk
from tests.integration.conftest import new_api_key
from tests.support.moto_world import TABLE
from tests.support.stream import Stream

# Wide enough that closing every gate or task in one transaction would pass DynamoDB's 100 items.
WIDE = 100


@pytest.fixture
def key(world, clock_file, monkeypatch) -> str:
    env = {"PUBLIC_BASE_URL": "https://interlude.example.com", "INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from interlude.composition import services

    return new_api_key(services())


def call(key: str, method: str, path: str, body: Any = None, idempotency_key: str | None = None) -> tuple[int, Any]:
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json", "host": "127.0.0.1"}
    if idempotency_key:
        headers["idempotency-key"] = idempotency_key
    raw = b"" if body is None else json.dumps(body).encode()
    answer = lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))
    return answer["statusCode"], json.loads(answer["body"]) if answer.get("body") else None


APPROVAL = {"typeId": "core.approvalGate", "config": {"title": "Approve?"}}
EXTERNAL = {
    "typeId": "core.interrupt",
    "config": {"kind": "external-event", "data": {"eventType": "order.paid", "correlation": {"orderId": "o-1"}}},
}
TASK = {"typeId": "core.task", "config": {"taskType": "summarise", "input": {"n": 1}}}


def fan_out(workflow_id: str, width: int, branch: dict[str, Any], join_rule: str = "all_success", then: dict | None = None) -> dict:
    """start -> `width` parallel copies of `branch` (each followed by `then` on failure, when given) -> join."""
    nodes: list[dict[str, Any]] = [
        {"id": "start", "typeId": "core.transform", "config": {"outputs": {"go": True}}},
        {"id": "join", "typeId": "core.transform", "config": {"outputs": {"done": True}}},
    ]
    edges: list[dict[str, Any]] = []
    for i in range(width):
        nodes.append({"id": f"b{i}", **branch})
        edges.append({"sourceNodeId": "start", "targetNodeId": f"b{i}"})
        if then is None:
            edges.append({"sourceNodeId": f"b{i}", "targetNodeId": "join", "triggerRule": join_rule})
        else:
            nodes.append({"id": f"then{i}", **then})
            edges.append({"sourceNodeId": f"b{i}", "targetNodeId": f"then{i}", "triggerRule": "any_failed"})
            edges.append({"sourceNodeId": f"then{i}", "targetNodeId": "join", "triggerRule": join_rule})
    return {"id": workflow_id, "name": workflow_id, "nodes": nodes, "edges": edges}


def started(key: str, definition: dict) -> dict:
    status, body = call(key, "PUT", f"/workflows/{definition['id']}", definition)
    assert status in (200, 201), body
    status, body = call(key, "POST", "/runs", {"workflowId": definition["id"]}, idempotency_key=uuid.uuid4().hex)
    assert status == 201, body
    return body


def snapshot(key: str, run_id: str) -> dict:
    status, body = call(key, "GET", f"/runs/{quote(run_id, safe='')}")
    assert status == 200, body
    return body


def interrupt_statuses(run_id: str) -> list[str]:
    """The status of each interrupt the run raised, as every reader takes it (its item's, or its close's event's)."""
    return [d["status"] for d in run_interrupts(boto3.client("dynamodb"), TABLE, run_id)]


def open_gates(body: dict) -> dict:
    return body["extensions"]["interlude.run"]["openInterrupts"]


def cancel(key: str, run_id: str) -> dict:
    status, body = call(key, "POST", f"/runs/{quote(run_id, safe='')}/cancel", {"reason": "too wide"}, idempotency_key=uuid.uuid4().hex)
    assert status == 200, body
    return body


def test_a_fan_out_past_the_limit_fails_the_node_that_would_open_one_wait_too_many(key):
    run = started(key, fan_out("gates", WIDE, APPROVAL))
    body = snapshot(key, run["runId"])
    assert body["status"] == "failed"
    assert body["error"]["code"] == "interlude.budget_exceeded"
    details = body["error"]["details"]
    assert details["budget"] == OPEN_WAITS_BUDGET
    assert details["limit"] == MAX_OPEN_WAITS
    assert details["unit"] == "waits"
    failed = details["nodeId"]
    assert body["nodeStates"][failed]["status"] == "failed"
    assert sum(1 for ns in body["nodeStates"].values() if ns["status"] == "skipped") >= MAX_OPEN_WAITS
    # The gates opened and cancelled in that same transaction were never written: nothing is left open.
    assert "open" not in interrupt_statuses(run["runId"])


def test_a_wide_fan_out_that_routes_the_failure_keeps_its_gates_and_can_be_cancelled(key):
    # External-event gates write two items each (the interrupt and its waiter): the heaviest wait there is.
    run = started(key, fan_out("external", WIDE, EXTERNAL, join_rule="all_complete"))
    body = snapshot(key, run["runId"])
    assert body["status"] == "waiting-external"
    assert len(open_gates(body)) == MAX_OPEN_WAITS
    failed = [nid for nid, ns in body["nodeStates"].items() if ns["status"] == "failed"]
    assert len(failed) == WIDE - MAX_OPEN_WAITS
    assert cancel(key, run["runId"])["status"] == "cancelled"
    statuses = interrupt_statuses(run["runId"])
    assert len(statuses) == MAX_OPEN_WAITS
    assert set(statuses) == {"cancelled"}


def test_deciding_one_gate_of_a_full_fan_out_ends_the_run_and_closes_every_other_gate(key):
    run = started(key, fan_out("decide", MAX_OPEN_WAITS, APPROVAL))
    assert len(open_gates(snapshot(key, run["runId"]))) == MAX_OPEN_WAITS
    status, answer = call(key, "POST", f"/runs/{quote(run['runId'], safe='')}/interrupts/b0", {"resumeValue": {"action": "reject"}})
    assert status == 200, answer
    body = snapshot(key, run["runId"])
    assert body["status"] == "failed"
    assert open_gates(body) == {}
    statuses = interrupt_statuses(run["runId"])
    assert sorted(set(statuses)) == ["cancelled", "resolved"]
    assert len(statuses) == MAX_OPEN_WAITS


def test_every_gate_of_a_full_fan_out_timing_out_at_once_opens_the_next_gates_over_several_writes(key):
    # Each timeout closes a gate (two items) and routes to another external-event gate (two more): written as
    # one transaction that would be 160 items, refused, and every later read of the run would fail the same way.
    timed = {**EXTERNAL, "config": {**EXTERNAL["config"], "timeoutMs": 1000}}
    run = started(key, fan_out("timeouts", MAX_OPEN_WAITS, timed, join_rule="all_complete", then=EXTERNAL))
    stream = Stream(TABLE)
    stream.settle()
    clock.advance(os.environ[clock.CLOCK_FILE_ENV], 5)
    body = snapshot(key, run["runId"])
    stream.settle()
    body = snapshot(key, run["runId"])
    assert body["status"] == "waiting-external"
    assert sorted(open_gates(body)) == sorted(f"then{i}" for i in range(MAX_OPEN_WAITS))
    assert all(body["nodeStates"][f"b{i}"]["status"] == "failed" for i in range(MAX_OPEN_WAITS))
    assert cancel(key, run["runId"])["status"] == "cancelled"


def test_a_wide_fan_out_of_tasks_runs_at_most_the_limit_and_cancelling_ends_every_task(key):
    run = started(key, fan_out("tasks", WIDE, TASK, join_rule="all_complete"))
    Stream(TABLE).settle()
    body = snapshot(key, run["runId"])
    assert body["status"] == "running"
    running = [nid for nid, ns in body["nodeStates"].items() if ns["status"] == "running"]
    assert len(running) == MAX_OPEN_WAITS
    assert cancel(key, run["runId"])["status"] == "cancelled"
    Stream(TABLE).settle()
    from interlude.engine.tasks import task_id

    dynamodb = boto3.client("dynamodb")
    statuses = set()
    for nid in running:
        item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": task_pk(task_id(run["runId"], nid, 1))}, "sk": {"S": TASK_SK}})
        statuses.add(item["Item"]["status"]["S"])
    assert statuses == {"cancelled"}
