"""Deadlines in the real local stack over HTTP: its schedule pump fires moto's stored schedules into the real
timeouts handler. The stack's clock is moved with `interlude clock advance` (an offset file), never slept.

A stack of its own (not the session one), so moving its clock cannot disturb other tests.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path

import pytest

from interlude import wiring
from interlude.local.stack import TABLE_NAME
from interlude.store.due_index import DueIndex
from interlude.store.layout import RUN_SK, run_pk
from tests.support.local_stack import FIXTURES, Api, cli, running_stack, stack_client, until, wire

GROUP = wiring.LOCAL_SCHEDULE_GROUP
WAIT_S = 60.0


@pytest.fixture(scope="module")
def deadline_stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("deadline-stack")) as info:
        yield info


@pytest.fixture(scope="module")
def api(deadline_stack) -> Api:
    return Api.of(deadline_stack)


@pytest.fixture(scope="module")
def scheduler(deadline_stack):
    return stack_client(deadline_stack, "scheduler")


def advance(stack: dict, seconds: float) -> None:
    """Move the running stack's clock forward with the CLI, as a developer would."""
    cli(stack, "clock", "advance", str(seconds))


def schedule_inputs(scheduler) -> list[str]:
    """Every schedule's input; for a bucket's (ADR 0132), the deadlines its partition of the due index lists."""
    listed = scheduler.list_schedules(GroupName=GROUP)["Schedules"]
    table = stack_client({"motoEndpoint": scheduler.meta.endpoint_url}, "dynamodb")
    out = []
    for summary in listed:
        with contextlib.suppress(scheduler.exceptions.ResourceNotFoundException):
            body = scheduler.get_schedule(Name=summary["Name"], GroupName=GROUP)["Target"]["Input"]
            named = json.loads(body)
            if "dueSecond" in named:
                out += [json.dumps(d) for d in DueIndex(TABLE_NAME, table).due(named["dueSecond"], named["shard"])]
            else:
                out.append(body)
    return out


def schedule_for(scheduler, run_id: str) -> bool:
    return any(run_id in body for body in schedule_inputs(scheduler))


@pytest.fixture(scope="module")
def table(deadline_stack):
    return stack_client(deadline_stack, "dynamodb")


def stored_status(table, run_id: str) -> str:
    """The run head's status straight from the table: observing it this way applies no deadline."""
    key = {"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}
    return table.get_item(TableName=TABLE_NAME, Key=key)["Item"]["status"]["S"]


def long_gate(api: Api, timeout_ms: int = 600_000) -> str:
    """The timeout fixture with a deadline far beyond any real time a test spends (the clock is moved instead)."""
    definition = json.loads((FIXTURES / "conformance-approval-timeout.json").read_text())
    definition["nodes"][0]["config"]["timeoutMs"] = timeout_ms
    workflow_id = f"long-gate-{uuid.uuid4().hex[:8]}"
    definition["id"] = workflow_id
    assert api.put_workflow(workflow_id, definition).status_code == 201
    return workflow_id


@pytest.mark.parametrize("fixture", ["conformance-approval-timeout", "conformance-approval-timeout-approve"])
def test_conformance_timeout_fixtures_reject_on_time_through_the_schedule_pump(
    api, deadline_stack, scheduler, table, fixture
):
    # Given a run of the fixture: it waits at its gate with a 1500 ms timeout
    started = api.start(api.fixture(fixture))
    run_id = started["runId"]
    assert started["status"] == "waiting-approval"

    # When the stack's clock passes the deadline, and nobody reads the run through the API
    advance(deadline_stack, 3)

    # Then the stack applies the timeout by itself (its schedule pump, or the outbox if it saw the record
    # late) and no schedule is left behind
    assert until(lambda: stored_status(table, run_id) == "failed", WAIT_S), "the timeout was never applied"
    assert until(lambda: not schedule_for(scheduler, run_id), WAIT_S), "a schedule was left behind"
    # And the gate resolved rejected by timeout — never granted — and the run failed naming the gate
    snapshot = api.run(run_id)
    assert snapshot["status"] == "failed"
    assert snapshot["error"]["code"] == "approval_rejected"
    events = api.events(run_id)
    (requested,) = [e for e in events if e["type"] == "interrupt.requested"]
    assert requested["payload"]["timeoutMs"] == 1500
    (resolved,) = [e for e in events if e["type"] == "interrupt.resolved"]
    assert resolved["nodeId"] == "gate"
    assert {k: v for k, v in resolved["payload"].items() if k != "interruptId"} == {
        "nodeId": "gate",
        "kind": "approval",
        "action": "timeout",
        "decision": "rejected",
        "reason": "timeout",
    }
    (failed,) = [e for e in events if e["type"] == "node.failed"]
    assert failed["payload"]["error"]["code"] == "approval_rejected"
    assert failed["payload"]["error"]["retryable"] is False
    (run_failed,) = [e for e in events if e["type"] == "run.failed"]
    assert run_failed["payload"]["failedNodeId"] == "gate"
    assert not [e for e in events if e["type"] == "approval.granted"]


def test_a_resolve_after_the_deadline_is_409_and_the_gate_is_timed_out(api, deadline_stack):
    run_id = api.start(api.fixture("conformance-approval-timeout"))["runId"]
    advance(deadline_stack, 2)
    late = api.resolve(run_id, "gate", {"action": "accept"})
    assert late.status_code == 409
    assert late.json()["error"] == "interrupt_already_resolved"
    resolved = [e for e in api.events(run_id) if e["type"] == "interrupt.resolved"]
    assert [e["payload"]["action"] for e in resolved] == ["timeout"]
    assert api.run(run_id)["status"] == "failed"


def test_the_pump_fires_the_schedule_when_the_clock_passes_it(api, deadline_stack, scheduler, table):
    run_id = api.start(long_gate(api))["runId"]
    assert until(lambda: schedule_for(scheduler, run_id), WAIT_S), "the outbox did not create the schedule"
    advance(deadline_stack, 300)
    assert stored_status(table, run_id) == "waiting-approval"
    advance(deadline_stack, 301)
    # No API read meanwhile: only the schedule pump can apply it, and the schedule deletes itself after firing
    assert until(lambda: stored_status(table, run_id) == "failed", WAIT_S), "the schedule never fired"
    assert until(lambda: not schedule_for(scheduler, run_id), WAIT_S)
    assert [e["payload"]["action"] for e in api.events(run_id) if e["type"] == "interrupt.resolved"] == ["timeout"]


def test_a_decision_in_time_wins_and_its_deadline_fires_into_nothing(api, deadline_stack, scheduler):
    run_id = api.start(long_gate(api))["runId"]
    assert until(lambda: schedule_for(scheduler, run_id), WAIT_S)
    accepted = api.resolve(run_id, "gate", {"action": "accept"})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["status"] == "completed"
    # Its bucket's schedule stays (ADR 0132), fires when the deadline passes, and finds the gate decided
    advance(deadline_stack, 601)
    assert until(lambda: not schedule_for(scheduler, run_id), WAIT_S), "the deadline's bucket never fired"
    assert api.run(run_id)["status"] == "completed"
    resolved = [e for e in api.events(run_id) if e["type"] == "interrupt.resolved"]
    assert [e["payload"]["decision"] for e in resolved] == ["granted"]


def test_conformance_delay_runs_then_completes_after_its_delay(api, deadline_stack, scheduler):
    run_id = api.start(api.fixture("conformance-delay"), inputs={"delayMs": 600_000})["runId"]
    # In flight: running, the node sleeping, a wake-up scheduled
    snapshot = api.run(run_id)
    assert snapshot["status"] == "running"
    assert snapshot["nodeStates"]["wait"]["status"] == "running"
    assert until(lambda: schedule_for(scheduler, run_id), WAIT_S)
    advance(deadline_stack, 601)
    assert until(lambda: not schedule_for(scheduler, run_id), WAIT_S), "the wake-up never fired"
    done = api.run(run_id)
    assert done["status"] == "completed"
    assert done["variables"]["wait"] == {"delayMs": 600_000}


def test_conformance_cancellable_cancels_mid_delay(api, deadline_stack, scheduler):
    run_id = api.start(api.fixture("conformance-cancellable"))["runId"]
    assert api.run(run_id)["status"] == "running"
    assert until(lambda: schedule_for(scheduler, run_id), WAIT_S)
    cancelled = api.call("POST", f"/runs/{wire(run_id)}/cancel", {"reason": "enough"})
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    # The wake-up's bucket stays (ADR 0132) and, fired, finds the run cancelled
    advance(deadline_stack, 2 * 24 * 3600)
    assert until(lambda: not schedule_for(scheduler, run_id), WAIT_S), "the wake-up's bucket never fired"
    assert api.run(run_id)["status"] == "cancelled"


def test_the_clock_file_is_advertised_in_the_state_file(deadline_stack):
    # Beside the state file, where `interlude clock advance` finds it (docs/adr/0008)
    assert Path(deadline_stack["clockFile"]) == Path(deadline_stack["stateFile"]).parent / "clock"


def test_the_inbox_never_lists_a_gate_past_its_deadline(api, deadline_stack):
    run_id = api.start(long_gate(api))["runId"]
    query = f"/interrupts?status=pending&runId={wire(run_id)}"
    listed = api.call("GET", query)
    assert listed.status_code == 200, listed.text
    assert [i["nodeId"] for i in listed.json()["interrupts"]] == ["gate"]
    advance(deadline_stack, 601)
    assert api.call("GET", query).json()["interrupts"] == []
    assert api.run(run_id)["status"] == "failed"
