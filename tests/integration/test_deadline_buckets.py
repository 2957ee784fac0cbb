"""Deadlines due in one second share schedules (ADR 0132): each listed in the due index, one bucket schedule per second
and shard, fired through the local stack's schedule pump into the real timeouts handler. The runs' own deadline
records are not dispatched here, so no schedule of one deadline exists beside the buckets."""

from __future__ import annotations

import json

import pytest

from interlude import wiring
from interlude.adapters.scheduler.buckets import bucket_input
from interlude.adapters.scheduler.names import bucket_schedule_name, occurrence, parse_at
from interlude.adapters.scheduler.scheduler import from_env
from interlude.domain import clock
from interlude.domain.errors import DomainError
from interlude.domain.models.requests import CreateRunRequest
from interlude.engine import deadlines
from interlude.local import lambda_runtime
from interlude.local.schedules import SchedulePump
from interlude.store.due_index import DueIndex, due_pk, due_second
from interlude.store.item_formats import check_item
from tests.integration.test_deadlines import GROUP, PAST_LONG_S, TIMED_OUT
from tests.integration.test_deadlines import world as world  # noqa: F401, PLC0414 (the fixture)
from tests.support.moto_world import TABLE


def gated_runs(world, count: int) -> list:
    workflow = world.register_long("conformance-approval-timeout")
    return [
        world.services.lifecycle.create_run(world.admin, CreateRunRequest.model_validate({"workflowId": workflow}))
        for _ in range(count)
    ]


def listed(world, state) -> tuple[int, int]:
    """What dispatch does for a new deadline (the writer, ADR 0132): its due item, then its bucket's schedule."""
    (deadline,) = deadlines.pending(state)
    index = DueIndex(TABLE, world.services.store.client)
    bucket = index.put(state.runId, occurrence(deadline, state.runId), deadline.as_input(state.runId))
    from_env().ensure_bucket(*bucket)
    return bucket


def test_many_gates_due_in_one_second_fire_from_one_invocation_per_shard(world):
    runs = gated_runs(world, 12)
    buckets = {listed(world, state) for state in runs}
    # Each bucket's schedule is made once: a second create is a ConflictException
    assert all(from_env().ensure_bucket(*bucket) is False for bucket in buckets)
    schedules = world.schedules()
    assert sorted(s["Name"] for s in schedules) == sorted(bucket_schedule_name(*b) for b in buckets)
    for schedule in schedules:
        second, shard = (int(part) for part in schedule["Name"].rsplit("-", 2)[1:])
        # at the bucket's second, never before a deadline in it; the input names the partition, in format 8
        assert parse_at(schedule["ScheduleExpression"]) == second
        assert json.loads(schedule["Target"]["Input"]) == bucket_input(second, shard) == {"v": 8, "dueSecond": second, "shard": shard}
        assert schedule["ActionAfterCompletion"] == "DELETE"
        assert schedule["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == wiring.SCHEDULES.max_retry_attempts
    # 12 deadlines created within a second or two share at most 2 seconds × the shards' schedules
    assert len(buckets) <= 2 * wiring.DUE_INDEX_SHARDS

    pump = SchedulePump(GROUP)
    assert pump.pump_once() == 0  # not due yet
    world.advance(PAST_LONG_S)
    assert pump.pump_once() == len(buckets)
    world.settle()

    for state in runs:
        interrupt_id = state.interrupts["gate"].interruptId
        assert world.resolved(state.runId) == [{**TIMED_OUT, "interruptId": interrupt_id}]
        assert world.services.runs.load_run(world.tenant, state.runId)[0].error["code"] == "approval_rejected"
    assert world.schedules() == []


def test_a_bucket_never_fires_a_deadline_before_it_is_due(world):
    (state,) = gated_runs(world, 1)
    second, _ = listed(world, state)
    due = state.interrupts["gate"].deadline
    assert second == due_second(due)
    assert 0 <= second - due < 1
    pump = SchedulePump(GROUP)
    world.advance(due - clock.now().timestamp() - 0.5)
    assert pump.pump_once() == 0
    assert world.resolved(state.runId) == []
    world.advance(1.5)
    assert pump.pump_once() == 1
    assert [r["reason"] for r in world.resolved(state.runId)] == ["timeout"]


def test_a_gate_closed_first_is_not_timed_out_when_its_bucket_fires(world):
    decided, waiting = gated_runs(world, 2)
    for state in (decided, waiting):
        listed(world, state)
    accepted = world.services.decisions.resolve_interrupt(world.admin, decided.runId, "gate", {"action": "accept"})
    assert accepted["status"] == "completed"
    before = world.events(decided.runId)

    world.advance(PAST_LONG_S)
    SchedulePump(GROUP).pump_once()

    # the decided gate's deadline is found settled: no event; the other one timed out
    assert world.events(decided.runId) == before
    assert [r["decision"] for r in world.resolved(decided.runId)] == ["granted"]
    assert [r["reason"] for r in world.resolved(waiting.runId)] == ["timeout"]


def test_a_bucket_invoked_again_fires_nothing_twice(world):
    runs = gated_runs(world, 3)
    buckets = {listed(world, state) for state in runs}
    world.advance(PAST_LONG_S)
    first = [lambda_runtime.invoke("timeouts", bucket_input(*bucket)) for bucket in buckets]
    again = [lambda_runtime.invoke("timeouts", bucket_input(*bucket)) for bucket in buckets]
    # (other tests' deadlines may share a bucket: the counts are this test's runs' events)
    assert sum(outcome["events"] for outcome in first) >= 3
    assert all(outcome["events"] == 0 for outcome in again)
    for state in runs:
        assert len(world.resolved(state.runId)) == 1


def test_a_failing_deadline_fails_the_invocation_after_the_others_fired_and_the_retry_fires_it(world, monkeypatch):
    runs = gated_runs(world, 4)
    buckets = {state.runId: listed(world, state) for state in runs}
    world.advance(PAST_LONG_S)
    broken = runs[0].runId
    real = type(world.services.runs).fire_deadline

    def flaky(self, body):
        if body["runId"] == broken:
            raise RuntimeError("the table is throttling")
        return real(self, body)

    monkeypatch.setattr(type(world.services.runs), "fire_deadline", flaky)
    pump = SchedulePump(GROUP)
    pump.pump_once()
    assert world.resolved(broken) == []
    assert all(len(world.resolved(state.runId)) == 1 for state in runs[1:])
    # the failed bucket's schedule stays, to be invoked again (Scheduler's retry policy)
    assert {s["Name"] for s in world.schedules()} == {bucket_schedule_name(*buckets[broken])}

    monkeypatch.setattr(type(world.services.runs), "fire_deadline", real)
    pump.pump_once()
    assert all(len(world.resolved(state.runId)) == 1 for state in runs)
    assert world.schedules() == []


def test_a_bucket_or_a_due_item_in_a_newer_format_is_refused_not_misread(world):
    with pytest.raises(DomainError) as refused:
        lambda_runtime.invoke("timeouts", {"v": 99, "dueSecond": 1, "shard": 0})
    assert refused.value.code == "interlude.item_too_new"
    with pytest.raises(DomainError):
        check_item({"pk": {"S": due_pk(1, 0)}, "v": {"N": "99"}})
    check_item({"pk": {"S": due_pk(1, 0)}, "v": {"N": "8"}})
