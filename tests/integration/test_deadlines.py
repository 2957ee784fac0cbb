"""Deadlines end to end in-process: moto's DynamoDB, Streams, Scheduler and SQS; the real dispatch and
timeouts handlers; the process clock moved by the offset file instead of sleeping."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import boto3
import pytest

from interlude import wiring
from interlude.adapters.scheduler.buckets import bucket_input
from interlude.adapters.scheduler.names import (
    LEGACY_PREFIXES,
    bucket_schedule_name,
    legacy_schedule_name,
    occurrence,
    parse_at,
)
from interlude.adapters.scheduler.scheduler import from_env
from interlude.composition import Services
from interlude.domain import clock
from interlude.domain.errors import Conflict, DomainError
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import deadlines
from interlude.local import lambda_runtime
from interlude.local.schedules import SchedulePump
from interlude.store.due_index import DueIndex, bucket_of
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.stream import Stream, dispatch

GROUP = wiring.LOCAL_SCHEDULE_GROUP
LONG_MS = 600_000
PAST_LONG_S = 602  # past LONG_MS and the whole second at() rounds the deadline up to


class World:
    """The table, the stream delivered to the real dispatch handler, the scheduler, the clock, and the tenant."""

    def __init__(self, clock_file: Path, tenant: str) -> None:
        self.clock_file = clock_file
        self.tenant = tenant
        self.services = Services(Store(TABLE, ENTRIES_TABLE))
        self.scheduler = boto3.client("scheduler")
        self.stream = Stream(TABLE)
        self.admin = signed_in(self.services)
        self.bob = signed_in(self.services, "bob")

    def register(self, name: str, **overrides) -> str:
        definition = json.loads((FIXTURES / f"{name}.json").read_text())
        definition.update(overrides)
        self.services.workflows.put_workflow(self.admin, definition["id"], WorkflowDefinition.model_validate(definition))
        return definition["id"]

    def register_long(self, name: str) -> str:
        """A timeout fixture with its gate's timeoutMs raised to LONG_MS, so no real time spent by a test
        (however loaded the machine) reaches the deadline; the tests move the clock instead."""
        definition = json.loads((FIXTURES / f"{name}.json").read_text())
        definition["nodes"][0]["config"]["timeoutMs"] = LONG_MS
        self.services.workflows.put_workflow(self.admin, definition["id"], WorkflowDefinition.model_validate(definition))
        return definition["id"]

    def advance(self, seconds: float) -> None:
        clock.advance(self.clock_file, seconds)

    def dispatch(self) -> int:
        """Deliver every stream record not delivered yet to the real dispatch handler (the mapping's job)."""
        fresh = self.stream.take()
        if fresh:
            assert dispatch(fresh) == {"batchItemFailures": []}
        return len(fresh)

    def settle(self) -> None:
        while self.dispatch():
            pass

    def schedules(self) -> list[dict]:
        listed = self.scheduler.list_schedules(GroupName=GROUP)["Schedules"]
        return [self.scheduler.get_schedule(Name=s["Name"], GroupName=GROUP) for s in listed]

    def listed(self, run_id: str) -> list[dict]:
        """The run's deadlines in the due index, of every bucket that has a schedule now."""
        index = DueIndex(TABLE, self.services.store.client)
        return [
            body
            for schedule in self.schedules()
            if "dueSecond" in (named := json.loads(schedule["Target"]["Input"]))
            for body in index.due(named["dueSecond"], named["shard"])
            if body["runId"] == run_id
        ]

    def events(self, run_id: str) -> list[dict]:
        return self.services.store.read_events(run_id)

    def resolved(self, run_id: str) -> list[dict]:
        return [e["payload"] for e in self.events(run_id) if e["type"] == "interrupt.resolved"]


@pytest.fixture
def world(world, monkeypatch, tmp_path):
    clock_file = tmp_path / "clock"
    clock.reset(clock_file)
    monkeypatch.setenv(clock.CLOCK_FILE_ENV, str(clock_file))
    # The handlers read their settings again, this clock file among them, whatever read them before it was named.
    lambda_runtime.fresh_instances()
    return World(clock_file, world.tenant)


TIMED_OUT = {"nodeId": "gate", "kind": "approval", "action": "timeout", "decision": "rejected", "reason": "timeout"}


def test_a_timed_gate_is_listed_in_the_due_index_under_one_bucket_schedule_with_the_declared_target_and_dead_letters(world):
    # Given a run of the 1500 ms timeout fixture
    workflow = world.register_long("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    interrupt = state.interrupts["gate"]

    # When the outbox sees its records — twice, as at-least-once delivery may
    world.settle()
    world.stream.seen.clear()
    world.settle()

    # Then the deadline is listed once, under its second and shard, and that bucket has exactly one schedule
    deadline = deadlines.Deadline("interrupt", interrupt.deadline, "gate", interrupt_id=interrupt.interruptId)
    second, shard = bucket_of(state.runId, occurrence(deadline, state.runId), interrupt.deadline)
    assert DueIndex(TABLE, world.services.store.client).due(second, shard).count(deadline.as_input(state.runId)) == 1
    (schedule,) = world.schedules()
    assert schedule["Name"] == bucket_schedule_name(second, shard)
    assert schedule["GroupName"] == GROUP
    # a one-time, UTC, precise schedule that deletes itself after it fired, never before the deadline
    assert schedule["ScheduleExpression"].startswith("at(")
    assert parse_at(schedule["ScheduleExpression"]) == second
    assert 0 <= second - interrupt.deadline < 1
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    # targeting the timeouts function through the scheduler role, with retries and a dead-letter queue
    target = schedule["Target"]
    env = dict(zip(wiring.SCHEDULES.environment, [None] * 4, strict=True))
    for key in env:
        env[key] = __import__("os").environ[key]
    assert target["Arn"] == env["TIMEOUTS_FUNCTION_ARN"]
    assert target["Arn"].endswith(":function:interlude-timeouts")
    assert target["RoleArn"] == env["SCHEDULER_ROLE_ARN"]
    assert target["DeadLetterConfig"] == {"Arn": env["SCHEDULE_DLQ_ARN"]}
    assert target["RetryPolicy"] == {
        "MaximumRetryAttempts": wiring.SCHEDULES.max_retry_attempts,
        "MaximumEventAgeInSeconds": wiring.SCHEDULES.max_event_age_s,
    }
    # and an input naming the bucket; the listed deadline names the run and the exact interrupt occurrence
    assert json.loads(target["Input"]) == bucket_input(second, shard)
    assert world.listed(state.runId) == [
        {"runId": state.runId, "purpose": "interrupt", "nodeId": "gate", "interruptId": interrupt.interruptId, "due": interrupt.deadline}
    ]


def test_the_gate_rejects_on_time_through_the_schedule_and_routes_as_approval_rejected(world):
    workflow = world.register_long("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.settle()
    pump = SchedulePump(GROUP)

    # When the deadline passes (at() rounds it up to the whole second), the pump fires the schedule into
    # the real timeouts handler
    world.advance(PAST_LONG_S)
    assert pump.pump_once() == 1
    world.settle()

    # Then the gate resolved rejected by timeout with the exact payload, and the run failed naming the gate
    interrupt_id = state.interrupts["gate"].interruptId
    assert world.resolved(state.runId) == [{**TIMED_OUT, "interruptId": interrupt_id}]
    after, _ = world.services.runs.load_run(world.tenant, state.runId)
    assert after.status == "failed"
    assert after.failedNodeId == "gate"
    assert after.error["code"] == "approval_rejected"
    failed = [e for e in world.events(state.runId) if e["type"] == "node.failed"]
    assert failed[0]["payload"]["error"]["code"] == "approval_rejected"
    # And ActionAfterCompletion DELETE removed the schedule
    assert world.schedules() == []


def test_on_timeout_approve_still_rejects(world):
    workflow = world.register_long("conformance-approval-timeout-approve")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.settle()
    world.advance(PAST_LONG_S)
    assert SchedulePump(GROUP).pump_once() == 1
    (resolved,) = world.resolved(state.runId)
    assert resolved["decision"] == "rejected"
    assert resolved["action"] == "timeout"
    approval_events = [e["type"] for e in world.events(state.runId) if e["type"].startswith("approval.")]
    assert approval_events == ["approval.requested", "approval.rejected"]
    assert world.services.runs.load_run(world.tenant, state.runId)[0].status == "failed"


def test_firing_twice_resolves_once(world):
    workflow = world.register_long("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.settle()
    (schedule,) = world.schedules()
    body = json.loads(schedule["Target"]["Input"])
    world.advance(PAST_LONG_S)

    first = lambda_runtime.invoke("timeouts", body)
    second = lambda_runtime.invoke("timeouts", body)

    # (the bucket may list other tests' deadlines due in the same second: the run's own events are what count)
    assert first["events"] > 0
    assert second["events"] == 0
    assert len(world.resolved(state.runId)) == 1


def test_a_fire_after_a_human_decision_is_a_no_op_without_an_event(world):
    workflow = world.register_long("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.settle()
    (schedule,) = world.schedules()
    body = json.loads(schedule["Target"]["Input"])

    # A person accepts in time; the bucket's schedule stays (nothing is deleted: ADR 0132)
    assert (
        world.services.decisions.resolve_interrupt(world.admin, state.runId, "gate", {"action": "accept"})["status"] == "completed"
    )
    world.settle()
    assert len(world.schedules()) == 1
    events_before = world.events(state.runId)

    # When the bucket fires anyway (and again: a duplicate)
    world.advance(PAST_LONG_S)
    lambda_runtime.invoke("timeouts", body)
    lambda_runtime.invoke("timeouts", body)

    # Then nothing changed: no event, the decision stands
    assert world.events(state.runId) == events_before
    (resolved,) = world.resolved(state.runId)
    assert resolved["decision"] == "granted"


def test_a_resolve_after_the_deadline_before_the_schedule_fired_is_409_and_records_the_timeout(world):
    workflow = world.register("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.settle()
    world.advance(1.6)  # past the deadline; the pump is not running

    with pytest.raises(Conflict) as refused:
        world.services.decisions.resolve_interrupt(world.admin, state.runId, "gate", {"action": "accept"})
    assert refused.value.code == "interrupt_already_resolved"

    # The timeout was recorded (once), in one transaction, and the run failed — never granted
    assert world.resolved(state.runId) == [{**TIMED_OUT, "interruptId": state.interrupts["gate"].interruptId}]
    after, _ = world.services.store.get_run(state.runId)
    assert after.status == "failed"
    assert after.error["code"] == "approval_rejected"
    # And the (late) schedule, when it fires, changes nothing
    world.settle()
    world.advance(1)
    SchedulePump(GROUP).pump_once()
    assert len(world.resolved(state.runId)) == 1
    assert world.schedules() == []


def test_a_read_after_the_deadline_sees_the_gate_timed_out(world):
    workflow = world.register("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.advance(1.5)
    snapshot, _ = world.services.runs.load_run(world.tenant, state.runId)
    assert snapshot.status == "failed"
    assert snapshot.interrupts == {}
    assert len(world.resolved(state.runId)) == 1


def test_a_human_decision_racing_the_timeout_has_exactly_one_winner_either_order(world):
    workflow = world.register("conformance-approval-timeout")

    # Order 1: the person read the run in time, the timeout commits first, the person's commit loses
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    stale, version = world.services.store.get_run(state.runId)
    world.advance(2)
    assert world.services.runs.fire_deadline({"runId": state.runId}) > 0
    early = Services(world.services.store, clock=lambda: clock.now().replace(year=2000))  # a clock before the deadline
    with pytest.raises(DomainError) as lost:
        early.decisions.resolve(stale, version, "gate", {"action": "accept"}, resolver_of(world.admin))
    assert lost.value.code == "interrupt_already_resolved"
    assert lost.value.details["resolution"]["action"] == "timeout"
    assert [r["decision"] for r in world.resolved(state.runId)] == ["rejected"]

    # Order 2: the person commits first (with a clock before the deadline), the timeout then finds nothing
    state2 = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    got = world.services.store.get_run(state2.runId)
    early.decisions.resolve(*got, "gate", {"action": "accept"}, resolver_of(world.admin))
    world.advance(2)
    assert world.services.runs.fire_deadline({"runId": state2.runId}) == 0
    assert [r["decision"] for r in world.resolved(state2.runId)] == ["granted"]


def test_threads_racing_the_timeout_worker_produce_one_resolution(world, monkeypatch):
    # moto is not thread-safe: serialise every call into it, as the local stack does, so this tests our logic
    lock = threading.RLock()
    original = world.services.store.client._make_api_call

    def serialised(*args, **kwargs):
        with lock:
            return original(*args, **kwargs)

    monkeypatch.setattr(world.services.store.client, "_make_api_call", serialised)
    workflow = world.register("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.advance(1.5)
    outcomes: list[str] = []

    def human() -> None:
        try:
            world.services.decisions.resolve_interrupt(world.admin, state.runId, "gate", {"action": "accept"})
            outcomes.append("human")
        except DomainError as exc:
            outcomes.append(exc.code)

    def timer() -> None:
        outcomes.append("timer" if world.services.runs.fire_deadline({"runId": state.runId}) else "timer-noop")

    threads = [threading.Thread(target=f) for f in (human, timer, human, timer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # The deadline had passed: no person may win, and exactly one timeout resolution exists
    assert "human" not in outcomes
    assert len(world.resolved(state.runId)) == 1
    assert world.resolved(state.runId)[0]["action"] == "timeout"


def resolver_of(principal):
    from interlude.rules.interrupts.decide import Resolver

    return Resolver(subject=principal.subject, surface="run", groups=principal.groups, roles=principal.roles)


# --- delays and run timeouts ---------------------------------------------------------------------------


def test_delay_fixture_sleeps_durably_and_wakes_through_its_schedule(world):
    workflow = world.register("conformance-delay")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow, "inputs": {"delayMs": 60_000}}))
    assert state.status == "running"
    world.settle()
    assert [body["purpose"] for body in world.listed(state.runId)] == ["delay"]
    pump = SchedulePump(GROUP)
    # Half-way (by the injected clock; real time spent here is far below the margin) nothing fires
    world.advance(30)
    assert pump.pump_once() == 0
    assert world.services.store.get_run(state.runId)[0].status == "running"
    world.advance(31)  # past the deadline and the whole second at() rounds it up to
    assert pump.pump_once() == 1
    after, _ = world.services.store.get_run(state.runId)
    assert after.status == "completed"
    assert after.outputs["wait"] == {"delayMs": 60_000}
    assert world.schedules() == []


def test_cancel_mid_delay_leaves_the_wake_up_to_find_nothing(world):
    workflow = world.register("conformance-cancellable")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.settle()
    assert [body["purpose"] for body in world.listed(state.runId)] == ["delay"]
    assert world.services.lifecycle.cancel_run(world.admin, state.runId, CancelRunRequest.model_validate({"reason": "enough"})).status == "cancelled"
    world.settle()
    before = world.events(state.runId)
    # When the wake-up's bucket fires after the cancel, the run stays cancelled and gets no event
    world.advance(2 * 24 * 3600)
    assert SchedulePump(GROUP).pump_once() == 1
    world.settle()
    assert world.events(state.runId) == before
    assert world.services.store.get_run(state.runId)[0].status == "cancelled"
    assert world.schedules() == []


def test_run_timeout_fails_the_run_and_cancels_its_gate_and_gate_schedule(world):
    workflow = world.register(
        "conformance-approval-timeout",
        nodes=[
            {
                "id": "gate",
                "typeId": "core.approvalGate",
                "config": {"title": "Long gate", "timeoutMs": 3_600_000},
            }
        ],
    )
    state = world.services.lifecycle.create_run(
        world.admin, CreateRunRequest.model_validate({"workflowId": workflow, "configurable": {"version": 1, "run": {"runTimeoutMs": 60_000}}})
    )
    world.settle()
    assert sorted(body["purpose"] for body in world.listed(state.runId)) == ["interrupt", "run"]
    world.advance(61)
    assert SchedulePump(GROUP).pump_once() == 1
    world.settle()
    after, _ = world.services.store.get_run(state.runId)
    assert after.status == "failed"
    assert after.error["code"] == "run_timeout"
    types = [e["type"] for e in world.events(state.runId)]
    assert "node.cancelled" in types
    assert types[-1] == "run.failed"
    # the run's bucket deleted itself after firing; the gate's fires at its time and finds nothing
    assert [body["purpose"] for body in world.listed(state.runId)] == ["interrupt"]
    world.advance(3600)
    assert SchedulePump(GROUP).pump_once() == 1
    world.settle()
    assert [e["type"] for e in world.events(state.runId)][-1] == "run.failed"
    assert world.schedules() == []


def test_a_deadline_already_due_when_its_record_arrives_is_applied_by_the_outbox(world):
    workflow = world.register("conformance-approval-timeout")
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.advance(5)  # the stream lagged past the deadline
    world.settle()
    assert world.services.store.get_run(state.runId)[0].status == "failed"
    assert world.schedules() == []
    assert len(world.resolved(state.runId)) == 1


def test_a_schedule_whose_target_keeps_failing_goes_to_the_dead_letter_queue(world, monkeypatch):
    workflow = world.register_long("conformance-approval-timeout")
    world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.settle()
    (schedule,) = world.schedules()
    pump = SchedulePump(GROUP)

    def broken(name, event):
        raise RuntimeError("target down")

    monkeypatch.setattr("interlude.local.schedules.invoke", broken)
    world.advance(PAST_LONG_S)
    for _ in range(wiring.SCHEDULES.max_retry_attempts + 1):
        pump.pump_once()
    assert pump.dead_lettered == 1
    assert world.schedules() == []
    sqs = boto3.client("sqs")
    url = sqs.get_queue_url(QueueName=f"{GROUP}-dlq")["QueueUrl"]
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(message["Body"]) == json.loads(schedule["Target"]["Input"])


def test_a_timed_out_gate_is_already_resolved_while_its_run_goes_on_and_a_plain_node_is_not_found(world):
    # Given a timed clarification whose failure routes on (any_failed) to a second gate, so the run goes on
    workflow = "timeout-then-gate"
    definition = {
        "id": workflow,
        "nodes": [
            {
                "id": "ask",
                "typeId": "core.clarificationGate",
                "config": {"questions": [{"id": "q", "question": "Why?"}], "timeoutMs": 1000},
            },
            {"id": "fallback", "typeId": "core.noop"},
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Go on?"}},
        ],
        "edges": [
            {"sourceNodeId": "ask", "targetNodeId": "fallback", "triggerRule": "any_failed"},
            {"sourceNodeId": "fallback", "targetNodeId": "gate"},
        ],
    }
    world.services.workflows.put_workflow(world.admin, workflow, WorkflowDefinition.model_validate(definition))
    state = world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    world.advance(1.1)

    # When the timeout is applied (any read applies it), the clarification failed with the vendor code
    after, _ = world.services.runs.load_run(world.tenant, state.runId)
    assert after.status == "waiting-approval"
    failed = [e["payload"] for e in world.events(state.runId) if e["type"] == "node.failed"]
    assert failed[0]["error"]["code"] == "interlude.interrupt_timeout"

    # Then answering the timed-out gate is 409, answering the plain node that ran after it is 404
    for node, code in (("ask", "interrupt_already_resolved"), ("fallback", "not_found")):
        with pytest.raises(DomainError) as refused:
            world.services.decisions.resolve_interrupt(world.admin, state.runId, node, {"q": "late"})
        assert refused.value.code == code
    assert world.services.runs.load_run(world.tenant, state.runId)[0].status == "waiting-approval"


def as_made_before_the_tenant_hash(world, run_id: str, deadline: deadlines.Deadline) -> str:
    """The deadline's schedule as a release before 0.2.0 made it (one per deadline, no tenant in its name); that name."""
    scheduler = from_env()
    assert scheduler is not None
    legacy = legacy_schedule_name(run_id, deadline)
    world.scheduler.create_schedule(**{**scheduler.request(run_id, deadline), "Name": legacy, "ClientToken": legacy})
    return legacy


def test_schedules_earlier_releases_made_for_one_deadline_still_fire_and_the_tenants_deletion_finds_them(world):
    workflow = world.register_long("conformance-approval-timeout")
    start = CreateRunRequest.model_validate({"workflowId": workflow})
    state = world.services.lifecycle.create_run(world.admin, start)
    world.settle()
    # Given the gate's schedules as the releases before this one made them, beside its bucket's: one named without the
    # tenant (before 0.2.0), one named with it (0.2.0)
    (deadline,) = deadlines.pending(state)
    legacy = as_made_before_the_tenant_hash(world, state.runId, deadline)
    assert legacy.startswith(LEGACY_PREFIXES)
    assert len(legacy) == len("il-i-") + 40
    scheduler = from_env()
    assert scheduler is not None
    assert scheduler.ensure(state.runId, deadline)
    (bucket,) = [s["Name"] for s in world.schedules() if "dueSecond" in json.loads(s["Target"]["Input"])]
    # When the deadline passes, all three fire: the gate times out once
    world.advance(PAST_LONG_S)
    assert SchedulePump(GROUP).pump_once() == 3
    world.settle()
    assert [r["reason"] for r in world.resolved(state.runId)] == ["timeout"]
    assert world.schedules() == []
    # And a legacy schedule of the tenant's is found and deleted by the tenant's deletion; another tenant's deletion
    # finds none, and no deletion touches a bucket (every tenant's)
    other = world.services.lifecycle.create_run(world.admin, start)
    world.settle()
    (other_deadline,) = deadlines.pending(other)
    as_made_before_the_tenant_hash(world, other.runId, other_deadline)
    assert scheduler.tenant_schedules(f"{world.tenant}-other") == []
    assert len(world.schedules()) == 2
    assert scheduler.delete_schedules(scheduler.tenant_schedules(world.tenant)) == 1
    assert [s["Name"] for s in world.schedules()] == [bucket_schedule_name(*bucket_of(other.runId, occurrence(other_deadline, other.runId), other_deadline.due))]
    assert bucket.startswith("il-due-")
