"""Task workers in-process: moto (DynamoDB, its stream, SQS, Scheduler), the real api, dispatch and timeouts
handlers, and the local schedule pump. Time moves by the process clock's offset file, never by sleeping."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from interlude import wiring
from interlude.adapters.scheduler import scheduler as scheduler_
from interlude.app.tasks import issue_token, read_token
from interlude.composition import Services
from interlude.domain import clock
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.deadlines import NotDueYet
from interlude.engine.tasks import task_id
from interlude.faces.modulex.definition import translate
from interlude.faces.modulex.references import engine_id
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.local.schedules import SchedulePump
from interlude.store.facade import Store
from interlude.store.task_items import TASK_SK, task_pk
from interlude.store.tasks import Claim, TaskStore
from tests.integration.conftest import new_api_key, state_of
from tests.support.modulex_example import worked_example
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.stream import Stream


@pytest.fixture
def services(world, monkeypatch, clock_file):
    env = {"PUBLIC_BASE_URL": "https://interlude.example.com", "INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Services(Store(TABLE, ENTRIES_TABLE))


@pytest.fixture
def worker_key(services):
    return new_api_key(services, subject="worker", scopes=["tasks:work"])


class Answer:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.status = raw["statusCode"]
        self.body = json.loads(raw["body"]) if raw.get("body") else None

    @property
    def code(self) -> str | None:
        return (self.body or {}).get("error")


def call(key: str, method: str, path: str, body: Any = None) -> Answer:
    """`body`: a JSON value, or bytes sent as they are."""
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json", "host": "127.0.0.1"}
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    return Answer(lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1")))


def claim(key: str, *queues: str, wait: int = 0) -> Answer:
    return call(key, "POST", "/tasks:claim", {"queues": list(queues), "waitSeconds": wait})


def task_workflow(**config: Any) -> dict:
    return {
        "id": "drafts",
        "name": "drafts",
        "nodes": [
            {
                "id": "draft",
                "typeId": "core.task",
                "config": {"taskType": "summarise", "input": {"order": "{{inputs.order}}"}, **config},
            },
            {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{draft.summary}}"}}},
        ],
        "edges": [{"id": "e", "sourceNodeId": "draft", "targetNodeId": "after"}],
        "variables": [{"name": "order", "type": "string"}],
    }


def started(services, admin, definition: dict) -> str:
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    request = CreateRunRequest.model_validate({"workflowId": definition["id"], "inputs": {"order": "o-1"}})
    return services.lifecycle.create_run(admin, request).runId


def events_of(services, run_id: str, type_: str) -> list[dict]:
    return [e for e in services.store.read_events(run_id, -1) if e["type"] == type_]


def test_a_task_is_claimed_once_completed_once_and_its_output_continues_the_run(services, admin, worker_key):
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    assert state_of(services, run_id).status == "running"

    got = claim(worker_key, "other", "summarise")
    assert got.status == 200
    task = got.body
    assert (task["runId"], task["nodeId"], task["nodeType"], task["queue"]) == (
        run_id,
        "draft",
        "summarise",
        "summarise",
    )
    assert (task["input"], task["attempt"], task["heartbeatTimeoutSeconds"]) == ({"order": "o-1"}, 1, 60)
    # Delivered at least once, never to two claims at a time: the queue is empty now.
    assert claim(worker_key, "summarise").status == 204

    token = task["taskToken"]
    assert call(worker_key, "POST", f"/tasks/{token}/heartbeat").status == 200
    done = call(worker_key, "POST", f"/tasks/{token}/complete", {"output": {"summary": "short"}})
    assert (done.status, done.body["status"]) == (200, "completed")
    again = call(worker_key, "POST", f"/tasks/{token}/complete", {"output": {"summary": "other"}})
    assert (again.status, again.code) == (409, "interlude.task_not_claimed")
    late = call(worker_key, "POST", f"/tasks/{token}/fail", {"error": "too late"})
    assert (late.status, late.code) == (409, "interlude.task_not_claimed")
    beat = call(worker_key, "POST", f"/tasks/{token}/heartbeat")
    assert (beat.status, beat.code) == (409, "interlude.task_not_claimed")

    state = state_of(services, run_id)
    assert state.status == "completed"
    assert state.outputs["draft"] == {"summary": "short"}
    assert state.outputs["after"] == {"got": "short"}


def test_a_tasks_output_keeps_its_numbers_as_the_worker_wrote_them_for_the_pages(services, admin, worker_key):
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    token = claim(worker_key, "summarise").body["taskToken"]
    done = call(
        worker_key, "POST", f"/tasks/{token}/complete", b'{"output": {"summary": "s", "fee": 2.50, "rate": 1e3}}'
    )
    assert done.status == 200
    state = state_of(services, run_id)
    assert state.outputs["draft"]["fee"] == 2.5
    assert state.writtenNumbers == {"2.5": "2.50", "1000.0": "1e3"}


def test_a_fork_of_a_run_whose_task_completed_carries_its_result_and_offers_no_task(services, admin, worker_key):
    from interlude.domain.models.requests import ForkRunRequest

    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    task = claim(worker_key, "summarise").body
    call(worker_key, "POST", f"/tasks/{task['taskToken']}/complete", {"output": {"summary": "short"}})

    forked = services.forks.fork_run(admin, run_id, ForkRunRequest(mode="replay")).state
    Stream(TABLE).settle()

    # The fork completed with the task's result; no worker is asked again
    fork = state_of(services, forked.runId)
    assert (fork.status, fork.outputs["after"]) == ("completed", {"got": "short"})
    assert claim(worker_key, "summarise").status == 204
    (carried,) = events_of(services, forked.runId, "interlude.result-carried")
    assert (carried["payload"]["kind"], carried["payload"]["sourceRunId"]) == ("task", run_id)


# The seed page's llm node, as published.
SEED_DRAFT = {
    "id": "node_draft",
    "type": "llm",
    "x": 0,
    "y": 0,
    "llm_config": {
        "llm": {"integration_name": "modulexai", "model_id": "claude-haiku-4.5"},
        "system_prompt": "Draft a short customer email.",
        "user_prompt": "Write a reply to: {{input.request}}",
    },
}


def test_the_modulex_llm_node_is_a_task_and_its_text_is_what_the_interrupt_inlines(services, admin, worker_key):
    example = worked_example()
    example["nodes"][0] = SEED_DRAFT
    definition = WorkflowDefinition.model_validate({**translate(example), "id": "mx", "name": "mx"})
    services.workflows.put_workflow(admin, "mx", definition)

    run_id = services.lifecycle.create_run(
        admin, CreateRunRequest.model_validate({"workflowId": "mx", "inputs": {"request": "where is my order"}})
    ).runId
    stream = Stream(TABLE)
    stream.settle()
    task = claim(worker_key, "llm").body
    assert (task["nodeId"], task["nodeType"]) == ("node_draft", "llm")
    assert task["config"]["user_prompt"] == "Write a reply to: where is my order"
    assert task["input"] == {"request": "where is my order"}
    done = call(worker_key, "POST", f"/tasks/{task['taskToken']}/complete", {"output": {"text": "Dear customer"}})
    assert done.status == 200
    stream.settle()
    state = state_of(services, run_id)
    assert state.outputs[engine_id("node_draft")] == "Dear customer"
    (gate,) = state.interrupts.values()
    assert gate.payload["data"]["payload"]["message"] == "Approve sending this draft?\n\nDear customer"


def test_a_retryable_failure_goes_back_to_its_queue_after_the_backoff_with_node_retried(
    services, admin, worker_key, clock_file
):
    run_id = started(services, admin, task_workflow(retry_config={"max_attempts": 2, "initial_interval": 5000}))
    Stream(TABLE).settle()
    first = claim(worker_key, "summarise").body
    failed = call(worker_key, "POST", f"/tasks/{first['taskToken']}/fail", {"error": "busy", "retryable": True})
    assert failed.body == {
        "runId": run_id,
        "nodeId": "draft",
        "status": "retrying",
        "attempt": 2,
        "retryInSeconds": 5.0,
    }
    (retried,) = events_of(services, run_id, "node.retried")
    assert retried["payload"]["attempt"] == 2
    assert retried["payload"]["error"]["code"] == "interlude.task_failed"
    # Not before its backoff.
    assert claim(worker_key, "summarise").status == 204
    clock.advance(clock_file, 6)
    second = claim(worker_key, "summarise").body
    assert second["attempt"] == 2
    # The first attempt's token no longer holds anything.
    stale = call(worker_key, "POST", f"/tasks/{first['taskToken']}/complete", {"output": {}})
    assert (stale.status, stale.code) == (409, "interlude.task_not_claimed")
    # Attempts ran out: the node fails, and the run with it (no failure route).
    last = call(
        worker_key, "POST", f"/tasks/{second['taskToken']}/fail", {"error": {"message": "no"}, "retryable": True}
    )
    assert last.body["status"] == "failed"
    state = state_of(services, run_id)
    assert (state.status, state.error["code"], state.failedNodeId) == ("failed", "interlude.task_failed", "draft")


def test_a_worker_that_stops_heartbeating_loses_the_task_to_another_claim(services, admin, worker_key, clock_file):
    run_id = started(services, admin, task_workflow(heartbeatTimeoutSeconds=10, retry_config={"initial_interval": 0}))
    Stream(TABLE).settle()
    dead = claim(worker_key, "summarise").body
    pump = SchedulePump(wiring.LOCAL_SCHEDULE_GROUP)
    assert pump.pump_once() == 0  # nothing due yet
    clock.advance(clock_file, 11)
    assert pump.pump_once() >= 1  # the lease's check fired through the real timeouts handler

    taken = claim(worker_key, "summarise").body
    assert taken["attempt"] == 2
    (retried,) = events_of(services, run_id, "node.retried")
    assert retried["payload"]["error"]["code"] == "interlude.task_timeout"
    gone = call(worker_key, "POST", f"/tasks/{dead['taskToken']}/complete", {"output": {"summary": "late"}})
    assert (gone.status, gone.code) == (409, "interlude.task_not_claimed")
    assert call(worker_key, "POST", f"/tasks/{taken['taskToken']}/complete", {"output": {"summary": "s"}}).status == 200
    assert state_of(services, run_id).outputs["draft"] == {"summary": "s"}


def heartbeats(worker_key: str, token: str, clock_file, times: int) -> SchedulePump:
    """A worker heartbeating every 6 s, `times` times, the schedule pump firing what comes due meanwhile."""
    pump = SchedulePump(wiring.LOCAL_SCHEDULE_GROUP)
    for _ in range(times):
        clock.advance(clock_file, 6)
        assert call(worker_key, "POST", f"/tasks/{token}/heartbeat").status == 200
        pump.pump_once()
    return pump


def test_a_heartbeating_worker_keeps_its_task_past_the_heartbeat_timeout(services, admin, worker_key, clock_file):
    run_id = started(services, admin, task_workflow(heartbeatTimeoutSeconds=10))
    Stream(TABLE).settle()
    held = claim(worker_key, "summarise").body
    heartbeats(worker_key, held["taskToken"], clock_file, 4)
    assert events_of(services, run_id, "node.retried") == []
    assert call(worker_key, "POST", f"/tasks/{held['taskToken']}/complete", {"output": {"summary": "s"}}).status == 200


def schedules_of(run_id: str) -> list[str]:
    """The names of the run's pending schedules in the local group (what the schedule pump would fire)."""
    client = boto3.client("scheduler")
    group = wiring.LOCAL_SCHEDULE_GROUP
    names = [
        s["Name"]
        for page in client.get_paginator("list_schedules").paginate(GroupName=group)
        for s in page["Schedules"]
    ]
    inputs = {name: json.loads(client.get_schedule(Name=name, GroupName=group)["Target"]["Input"]) for name in names}
    return [name for name, body in inputs.items() if body.get("runId") == run_id]


@pytest.mark.parametrize("ends", ["complete", "fail"])
def test_a_task_that_ends_leaves_no_check_to_fire(services, admin, worker_key, clock_file, ends):
    # Given a claimed task whose worker heartbeated past its first checks (a check per heartbeat timeout or so)
    run_id = started(services, admin, task_workflow(heartbeatTimeoutSeconds=10, retry_config={"max_attempts": 1}))
    Stream(TABLE).settle()
    held = claim(worker_key, "summarise").body
    pump = heartbeats(worker_key, held["taskToken"], clock_file, 3)
    assert len(schedules_of(run_id)) == 2  # the last two heartbeats' (the first, the claim's, fired)

    # When its worker completes it (or fails it for good)
    if ends == "complete":
        done = call(worker_key, "POST", f"/tasks/{held['taskToken']}/complete", {"output": {"summary": "s"}})
    else:
        done = call(worker_key, "POST", f"/tasks/{held['taskToken']}/fail", {"error": "no", "retryable": False})
    assert done.status == 200

    # Then none of its checks is left to fire: the schedule pump finds nothing, now or a day on
    assert schedules_of(run_id) == []
    clock.advance(clock_file, 24 * 3600)
    assert pump.pump_once() == 0
    assert state_of(services, run_id).status == ("completed" if ends == "complete" else "failed")


def test_a_claim_schedules_one_check_and_a_heartbeating_worker_still_loses_the_task_at_its_deadline(
    services, admin, worker_key, clock_file
):
    # Given a task whose deadline comes 5 s after its first lease end
    definition = task_workflow(timeoutSeconds=15, heartbeatTimeoutSeconds=10, retry_config={"max_attempts": 1})
    run_id = started(services, admin, definition)
    Stream(TABLE).settle()

    # When a worker claims it: one check, at the lease's end (the deadline has none of its own)
    held = claim(worker_key, "summarise").body
    assert len(schedules_of(run_id)) == 1

    # And heartbeats past its deadline
    heartbeats(worker_key, held["taskToken"], clock_file, 2)
    clock.advance(clock_file, 4)

    # Then the chain of checks the heartbeats made reaches the deadline, and the node fails on time
    assert SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once() >= 1
    state = state_of(services, run_id)
    assert (state.status, state.error["code"], state.error["details"]["reason"]) == (
        "failed",
        "interlude.task_timeout",
        "timeout",
    )


def test_the_timeout_fails_the_node_with_task_timeout_when_no_attempt_is_left(services, admin, worker_key, clock_file):
    run_id = started(
        services, admin, task_workflow(timeoutSeconds=5, heartbeatTimeoutSeconds=60, retry_config={"max_attempts": 1})
    )
    Stream(TABLE).settle()
    held = claim(worker_key, "summarise").body
    clock.advance(clock_file, 6)
    assert SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once() >= 1
    state = state_of(services, run_id)
    assert (state.status, state.error["code"]) == ("failed", "interlude.task_timeout")
    assert state.error["details"]["reason"] == "timeout"
    assert call(worker_key, "POST", f"/tasks/{held['taskToken']}/heartbeat").code == "interlude.task_not_claimed"


def test_completion_is_single_winner_at_the_store(services, admin, tenant):
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    store = TaskStore(services.store)
    (entry,) = store.ready(tenant, "summarise", clock.now().timestamp())
    assert store.claim(entry, "n1", 1e12, 1e12, 1e12)
    assert not store.claim(entry, "n2", 1e12, 1e12, 1e12)  # a second claimant of the same entry loses at the task
    tid = task_id(run_id, "draft", 1)
    assert not store.settle(tid, Claim(1, "forged"), "completed", {"output": 1})
    assert store.settle(tid, Claim(1, "n1"), "completed", {"output": 1})
    assert not store.settle(tid, Claim(1, "n1"), "completed", {"output": 2})
    task = store.get(tid)
    assert task is not None
    assert (task.status, task.outcome) == ("completed", {"output": 1})


def test_an_entry_its_claim_left_behind_is_dropped_by_the_next_claim_and_hands_out_nothing(
    services, admin, worker_key, tenant
):
    # Given a claim that took its task and stopped before deleting the task's ready entry
    started(services, admin, task_workflow())
    Stream(TABLE).settle()
    store = TaskStore(services.store)
    (entry,) = store.ready(tenant, "summarise", clock.now().timestamp())
    assert store.claim(entry, "n1", 1e12, 1e12, 1e12)

    # When a worker claims, Then it gets nothing (the task is held) and the entry leaves the index
    assert claim(worker_key, "summarise").status == 204
    assert store.ready(tenant, "summarise", clock.now().timestamp()) == []


def test_a_cancelled_run_cancels_its_task_and_the_holder_hears_409(services, admin, worker_key):
    run_id = started(services, admin, task_workflow())
    stream = Stream(TABLE)
    stream.settle()
    held = claim(worker_key, "summarise").body
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
    stream.settle()
    beat = call(worker_key, "POST", f"/tasks/{held['taskToken']}/heartbeat")
    assert (beat.status, beat.code) == (409, "interlude.task_not_claimed")


def test_a_claim_whose_check_scheduler_throttles_is_a_retryable_503_and_hands_the_task_out_after(
    services, admin, worker_key
):
    # Given a ready task and a Scheduler that throttles the claim's check once the SDK's retries are spent (moto never
    # throttles: the answer replaces the request, so nothing is scheduled)
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    scheduler = scheduler_.from_env()
    assert scheduler is not None

    def throttled(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        answer = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}
        return AWSResponse("https://scheduler.us-east-1.amazonaws.com/", 400, {}, None), answer

    scheduler.client.meta.events.register("before-call.scheduler.CreateSchedule", throttled)
    # When a worker claims
    busy = claim(worker_key, "summarise")
    # Then it hears the registered retryable code and when to come back, not an error of this host (a 500); the check
    # is scheduled before the claim, so nothing was claimed
    assert (busy.status, busy.code) == (503, "runner_unavailable")
    # And once Scheduler has room the same task is handed out
    scheduler.client.meta.events.unregister("before-call.scheduler.CreateSchedule", throttled)
    got = claim(worker_key, "summarise")
    assert (got.status, got.body["runId"]) == (200, run_id)


def test_refusals_name_their_codes(services, admin, worker_key, world, tenant):
    other_tenant = new_api_key(services, subject="w", tenant=world.other_tenant, scopes=["tasks:work"])
    reader = new_api_key(services, subject="r", tenant=tenant, scopes=["runs:read"])
    assert claim(reader, "llm").code == "forbidden"
    for body in (
        {"queues": []},
        {"queues": [f"q{i}" for i in range(11)]},
        {"queues": ["bad queue"]},
        {"queues": ["llm"], "waitSeconds": 21},
        {"queues": ["llm"], "extra": 1},
    ):
        got = call(worker_key, "POST", "/tasks:claim", body)
        assert (got.status, got.code) == (400, "validation_error"), body
    for token in ("nonsense", "tt1.e30.x", "tt2.abc.def"):
        got = call(worker_key, "POST", f"/tasks/{token}/complete", {"output": 1})
        assert (got.status, got.code) == (400, "interlude.task_token_invalid"), token

    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    token = claim(worker_key, "summarise").body["taskToken"]
    prefix, body, _nonce = token.split(".")
    forged = f"{prefix}.{body}.forged-nonce"
    got = call(worker_key, "POST", f"/tasks/{forged}/complete", {"output": 1})
    assert (got.status, got.code) == (409, "interlude.task_not_claimed")
    assert call(other_tenant, "POST", f"/tasks/{token}/complete", {"output": 1}).code == "id_tenant_mismatch"
    too_big = call(worker_key, "POST", f"/tasks/{token}/complete", {"output": "x" * (64 * 1024 + 1)})
    assert (too_big.status, too_big.code) == (413, "payload_too_large")
    assert call(worker_key, "POST", f"/tasks/{token}/complete", {}).code == "validation_error"
    long_error = call(worker_key, "POST", f"/tasks/{token}/fail", {"error": "x" * 4097})
    assert long_error.code == "validation_error"
    assert state_of(services, run_id).status == "running"


def test_a_token_without_the_tasks_claim_learns_nothing_of_the_task_it_names(services, admin, worker_key, tenant):
    # Given a task another worker holds, and a worker of the tenant without its claim: the task's token with a nonce
    # of its own, and a token of the same shape naming a task that does not exist
    started(services, admin, task_workflow())
    Stream(TABLE).settle()
    held = claim(worker_key, "summarise").body["taskToken"]
    prefix, named, _ = held.split(".")
    other_nonce = f"{prefix}.{named}.{'n' * 22}"
    nothing = issue_token(SimpleNamespace(run_id=f"{tenant}/{'r' * 22}", node_id="draft", visit=1, attempt=1), "n" * 22)

    # When it heartbeats, completes and fails each
    calls = (("heartbeat", None), ("complete", {"output": {"summary": "forged"}}), ("fail", {"error": "no"}))
    for action, body in calls:
        without_claim = call(worker_key, "POST", f"/tasks/{other_nonce}/{action}", body)
        unknown = call(worker_key, "POST", f"/tasks/{nothing}/{action}", body)

        # Then the task it names is answered as one that does not exist: the same refusal, nothing of the task
        assert (without_claim.status, without_claim.body) == (unknown.status, unknown.body), action
        assert (unknown.status, unknown.code, unknown.body.get("details")) == (409, "interlude.task_not_claimed", None)

    # And the holder's claim stands: its completion lands, and a second one is told what became of the task
    assert call(worker_key, "POST", f"/tasks/{held}/complete", {"output": {"summary": "s"}}).status == 200
    again = call(worker_key, "POST", f"/tasks/{held}/complete", {"output": {"summary": "s"}})
    assert (again.status, again.code) == (409, "interlude.task_not_claimed")
    assert again.body["details"] == {"status": "completed", "attempt": 1}


def test_a_claim_reads_a_bounded_number_of_due_entries_whatever_the_queue_holds(services, tenant):
    store = TaskStore(services.store)
    now = clock.now().timestamp()
    request = {"queue": "busy", "heartbeatTimeoutSeconds": 60, "timeoutSeconds": 300}
    for i in range(40):
        assert store.create(task_id(f"{tenant}/run{i:04d}", "n", 1), f"{tenant}/run{i:04d}", "n", 1, request, now)
    store.create(task_id(f"{tenant}/later", "n", 1), f"{tenant}/later", "n", 1, request, now + 3600)
    queries: list[dict] = []
    store.client.meta.events.register(
        "provide-client-params.dynamodb.Query", lambda params, **_: queries.append(params)
    )
    due = store.ready(tenant, "busy", now)
    assert len(queries) == wiring.TASK_QUEUES.shards
    assert all(q["Limit"] == 5 for q in queries)
    assert len(due) <= wiring.TASK_QUEUES.shards * 5
    assert all(e.task_id != task_id(f"{tenant}/later", "n", 1) for e in due)  # not due: never read


def test_a_ready_task_of_a_cancelled_run_is_never_handed_out(services, admin, worker_key, tenant):
    run_id = started(services, admin, task_workflow())
    stream = Stream(TABLE)
    stream.settle()
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
    stream.settle()
    # The outbox took its entry out of the ready index: no claim meets it.
    assert TaskStore(services.store).ready(tenant, "summarise", clock.now().timestamp()) == []
    assert claim(worker_key, "summarise").status == 204
    task = TaskStore(services.store).get(task_id(run_id, "draft", 1))
    assert task is not None
    assert task.status == "cancelled"


def test_a_check_that_fires_early_is_tried_again_and_one_after_a_heartbeat_changes_nothing(services, admin, worker_key):
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    claim(worker_key, "summarise")
    tid, now = task_id(run_id, "draft", 1), clock.now().timestamp()
    with pytest.raises(NotDueYet):
        services.tasks.check({"runId": run_id, "purpose": "task", "interruptId": tid, "visit": 1, "due": now + 60})
    assert (
        services.tasks.check({"runId": run_id, "purpose": "task", "interruptId": tid, "visit": 1, "due": now - 1}) == 0
    )
    task = TaskStore(services.store).get(tid)
    assert task is not None
    assert (task.status, task.attempt) == ("claimed", 1)


# -- a run that no longer waits: the worker hears 409 and the task ends cancelled, whichever comes first ----------


def task_status(services, run_id: str) -> str:
    task = TaskStore(services.store).get(task_id(run_id, "draft", 1))
    assert task is not None
    return task.status


def assert_dropped(answer: Answer) -> None:
    assert (answer.status, answer.code) == (409, "interlude.task_not_claimed")
    assert answer.body["details"]["status"] == "cancelled"


@pytest.mark.parametrize(
    "call_",
    [
        ("complete", {"output": {"summary": "unused"}}),
        ("fail", {"error": "gave up", "retryable": False}),
        ("fail", {"error": "busy", "retryable": True}),
        ("heartbeat", None),
    ],
    ids=["complete", "fail", "fail-retryable", "heartbeat"],
)
def test_a_call_after_the_run_was_cancelled_but_before_the_outbox_hears_409_and_the_task_ends_cancelled(
    services, admin, worker_key, call_
):
    run_id = started(services, admin, task_workflow())
    stream = Stream(TABLE)
    stream.settle()
    held = claim(worker_key, "summarise").body
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())  # the outbox has not handled the cancel yet
    assert task_status(services, run_id) == "cancelled"  # by the run's own transaction

    verb, body = call_
    assert_dropped(call(worker_key, "POST", f"/tasks/{held['taskToken']}/{verb}", body))
    assert task_status(services, run_id) == "cancelled"
    stream.settle()  # the outbox's cancel comes second and changes nothing
    assert task_status(services, run_id) == "cancelled"
    assert claim(worker_key, "summarise").status == 204  # a retryable failure did not put it back for good
    state = state_of(services, run_id)
    assert (state.status, "draft" in state.outputs) == ("cancelled", False)
    assert events_of(services, run_id, "node.retried") == []


def test_a_completion_recorded_before_the_cancel_but_landing_after_it_hears_409(
    services, admin, worker_key, monkeypatch
):
    run_id = started(services, admin, task_workflow())
    stream = Stream(TABLE)
    stream.settle()
    held = claim(worker_key, "summarise").body
    recorded = TaskStore.settle

    def cancelled_meanwhile(self, *args, **kwargs):
        won = recorded(self, *args, **kwargs)
        services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())  # between the task's write and the run's
        return won

    monkeypatch.setattr(TaskStore, "settle", cancelled_meanwhile)
    assert_dropped(call(worker_key, "POST", f"/tasks/{held['taskToken']}/complete", {"output": {"summary": "late"}}))
    assert task_status(services, run_id) == "cancelled"
    stream.settle()
    assert task_status(services, run_id) == "cancelled"
    assert "draft" not in state_of(services, run_id).outputs


def test_a_recorded_outcome_that_never_landed_is_cancelled_by_the_outbox_and_its_check_lands_nothing(
    services, admin, tenant
):
    run_id = started(services, admin, task_workflow())
    stream = Stream(TABLE)
    stream.settle()
    store = TaskStore(services.store)
    (entry,) = store.ready(tenant, "summarise", clock.now().timestamp())
    assert store.claim(entry, "n1", 1e12, 1e12, 1e12)
    tid = task_id(run_id, "draft", 1)
    # A worker's completion recorded on the task, whose request died before landing it on the run.
    assert store.settle(tid, Claim(1, "n1"), "completed", {"output": {"summary": "s"}})
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
    stream.settle()
    assert task_status(services, run_id) == "cancelled"
    assert services.tasks.check({"runId": run_id, "purpose": "task", "interruptId": tid, "visit": 1}) == 0
    assert "draft" not in state_of(services, run_id).outputs


def test_a_check_that_finds_a_recorded_outcome_of_a_cancelled_run_cancels_the_task(services, admin, tenant):
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    store = TaskStore(services.store)
    (entry,) = store.ready(tenant, "summarise", clock.now().timestamp())
    assert store.claim(entry, "n1", 1e12, 1e12, 1e12)
    tid = task_id(run_id, "draft", 1)
    assert store.settle(tid, Claim(1, "n1"), "failed", {"error": {"code": "x", "message": "x"}})
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())  # the outbox has not run
    assert services.tasks.check({"runId": run_id, "purpose": "task", "interruptId": tid, "visit": 1}) == 0
    assert task_status(services, run_id) == "cancelled"


def test_a_completion_whose_outcome_a_check_landed_first_is_still_answered_200(
    services, admin, worker_key, monkeypatch
):
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    held = claim(worker_key, "summarise").body
    tid = task_id(run_id, "draft", 1)
    recorded = TaskStore.settle

    def check_landed_meanwhile(self, *args, **kwargs):
        won = recorded(self, *args, **kwargs)
        assert services.tasks.check({"runId": run_id, "purpose": "task", "interruptId": tid, "visit": 1}) > 0
        return won

    monkeypatch.setattr(TaskStore, "settle", check_landed_meanwhile)
    done = call(worker_key, "POST", f"/tasks/{held['taskToken']}/complete", {"output": {"summary": "s"}})
    assert (done.status, done.body["status"]) == (200, "completed")
    assert task_status(services, run_id) == "completed"
    assert state_of(services, run_id).outputs["draft"] == {"summary": "s"}


def test_a_completion_that_landed_before_the_run_ended_stays_completed(services, admin, worker_key):
    definition = task_workflow()
    definition["nodes"][1] = {"id": "after", "typeId": "core.approvalGate", "config": {"title": "Send it?"}}
    run_id = started(services, admin, definition)
    stream = Stream(TABLE)
    stream.settle()
    held = claim(worker_key, "summarise").body
    done = call(worker_key, "POST", f"/tasks/{held['taskToken']}/complete", {"output": {"summary": "s"}})
    assert done.status == 200
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
    stream.settle()
    assert task_status(services, run_id) == "completed"  # its output was used: the cancel came after
    assert state_of(services, run_id).outputs["draft"] == {"summary": "s"}


# -- a run cancelled before the outbox handled the cancel: the claim never hands its task out ------------------------


def test_a_task_of_a_run_cancelled_before_the_outbox_ran_is_not_handed_out_and_the_next_one_is(
    services, admin, worker_key, tenant
):
    stream = Stream(TABLE)
    cancelled = started(services, admin, task_workflow())
    stream.settle()
    waiting = started(services, admin, task_workflow())
    stream.settle()
    store = TaskStore(services.store)
    assert [e.task_id for e in store.ready(tenant, "summarise", clock.now().timestamp())] == [
        task_id(cancelled, "draft", 1),  # the older entry: a claim meets it first
        task_id(waiting, "draft", 1),
    ]
    services.lifecycle.cancel_run(admin, cancelled, CancelRunRequest())  # the outbox has not handled the cancel

    got = claim(worker_key, "summarise")
    assert (got.status, got.body["runId"]) == (200, waiting)
    assert task_status(services, cancelled) == "cancelled"
    assert store.ready(tenant, "summarise", clock.now().timestamp()) == []  # the claim dropped the stale entry
    assert claim(worker_key, "summarise").status == 204
    stream.settle()
    assert task_status(services, cancelled) == "cancelled"
    assert task_status(services, waiting) == "claimed"


def test_a_run_cancelled_before_the_outbox_made_its_task_leaves_a_cancelled_task_and_nothing_to_claim(
    services, admin, worker_key, tenant
):
    run_id = started(services, admin, task_workflow())
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())  # before the outbox saw the request
    task = TaskStore(services.store).get(task_id(run_id, "draft", 1))
    assert task is not None
    assert (task.status, task.attempt, task.queue, task.request["input"]) == (
        "cancelled",
        1,
        "summarise",
        {"order": "o-1"},
    )
    Stream(TABLE).settle()  # the request's record, then the cancel's: neither makes it ready
    assert task_status(services, run_id) == "cancelled"
    assert TaskStore(services.store).ready(tenant, "summarise", clock.now().timestamp()) == []
    assert claim(worker_key, "summarise").status == 204


def test_a_retried_task_of_a_cancelled_run_leaves_the_ready_index_with_its_new_entry(
    services, admin, worker_key, tenant
):
    run_id = started(services, admin, task_workflow(retry_config={"max_attempts": 3, "initial_interval": 600_000}))
    stream = Stream(TABLE)
    stream.settle()
    held = claim(worker_key, "summarise").body
    retried = call(worker_key, "POST", f"/tasks/{held['taskToken']}/fail", {"error": "busy", "retryable": True})
    assert (retried.status, retried.body["status"]) == (200, "retrying")
    store = TaskStore(services.store)
    later = clock.now().timestamp() + 3600
    assert [(e.task_id, e.attempt) for e in store.ready(tenant, "summarise", later)] == [
        (task_id(run_id, "draft", 1), 2)
    ]
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
    assert task_status(services, run_id) == "cancelled"
    stream.settle()
    assert store.ready(tenant, "summarise", later) == []


def stored_task(tid: str) -> dict[str, Any]:
    """The task's item as anyone who may read the table reads it."""
    item = boto3.client("dynamodb").get_item(TableName=TABLE, Key={"pk": {"S": task_pk(tid)}, "sk": {"S": TASK_SK}})
    return item["Item"]


def test_what_the_table_keeps_of_a_claim_does_not_hold_it(services, admin, worker_key):
    # Given a task a worker claimed through the API
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    held = claim(worker_key, "summarise").body["taskToken"]
    tid = task_id(run_id, "draft", 1)

    # When someone who can read the table (and not the worker's answer) makes a token of what the task keeps: its
    # run, node, visit and attempt, and what it keeps of the claim
    kept = stored_task(tid)
    named = base64.urlsafe_b64encode(json.dumps({"r": run_id, "n": "draft", "v": 1, "a": 1}).encode()).decode().rstrip("=")
    made = f"tt1.{named}.{kept['nonce']['S']}"

    # Then the token holds nothing: its heartbeat, completion and failure are refused as any other token without the claim
    for action, body in (("heartbeat", None), ("complete", {"output": {"summary": "forged"}}), ("fail", {"error": "no"})):
        got = call(worker_key, "POST", f"/tasks/{made}/{action}", body)
        assert (got.status, got.code, got.body.get("details")) == (409, "interlude.task_not_claimed", None), action
    # And the claim's secret is nowhere in the item
    secret = read_token(held)[1].secret
    assert secret
    assert secret not in json.dumps(kept)
    # And the worker's own token still holds the claim: its completion continues the run
    done = call(worker_key, "POST", f"/tasks/{held}/complete", {"output": {"summary": "mine"}})
    assert (done.status, done.body["status"]) == (200, "completed")
    assert state_of(services, run_id).outputs["draft"] == {"summary": "mine"}
    # And a second completion is still told what became of its task
    again = call(worker_key, "POST", f"/tasks/{held}/complete", {"output": {"summary": "mine"}})
    assert (again.status, again.body["details"]) == (409, {"status": "completed", "attempt": 1})


def test_a_claim_the_release_before_made_is_still_held_by_its_token(services, admin, worker_key, tenant):
    # Given a task claimed by the release before (0.11.0): the item keeps the nonce itself, the token carries only it
    run_id = started(services, admin, task_workflow())
    Stream(TABLE).settle()
    store = TaskStore(services.store)
    (entry,) = store.ready(tenant, "summarise", clock.now().timestamp())
    nonce = "AbCdEfGhIjKlMnOpQrStUv"
    assert store.claim(entry, nonce, 1e12, 1e12, 1e12)
    named = base64.urlsafe_b64encode(json.dumps({"r": run_id, "n": "draft", "v": 1, "a": 1}).encode()).decode().rstrip("=")
    before = f"tt1.{named}.{nonce}"

    # When its worker heartbeats and completes it after the upgrade, Then its claim holds and the run goes on
    assert call(worker_key, "POST", f"/tasks/{before}/heartbeat").status == 200
    done = call(worker_key, "POST", f"/tasks/{before}/complete", {"output": {"summary": "older"}})
    assert (done.status, done.body["status"]) == (200, "completed")
    assert state_of(services, run_id).outputs["draft"] == {"summary": "older"}
