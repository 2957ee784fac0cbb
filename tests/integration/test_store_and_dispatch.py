"""The store and the stream consumer against moto's DynamoDB and DynamoDB Streams, with the real handlers."""

from __future__ import annotations

import json
import random
from datetime import datetime
from typing import Any

import boto3
import pytest

from interlude.app.snapshots import snapshot
from interlude.composition import Services
from interlude.domain import schemas
from interlude.domain.errors import DomainError
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules.auth import Principal
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.stream import dispatch, stream_records


def register(services, admin, name: str) -> str:
    definition = json.loads((FIXTURES / f"{name}.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    return definition["id"]


def all_items() -> list[dict]:
    # A scan is fine in a test: it checks that nothing else was written.
    return boto3.client("dynamodb").scan(TableName=TABLE)["Items"]


# A world of its own: it counts every event item of the table.
@pytest.mark.private_world
def test_lifecycle_events_are_contiguous_schema_valid_and_one_item_per_transition(services, admin):
    workflow = register(services, admin, "conformance-approval")
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    services.decisions.resolve_interrupt(admin, state.runId, "gate", {"action": "accept"})
    events = services.store.read_events(state.runId)
    assert [e["type"] for e in events] == [
        "run.started",
        "node.started",
        "interrupt.requested",
        "approval.requested",
        "node.suspended",
        "interrupt.resolved",
        "approval.granted",
        "node.resumed",
        "node.completed",
        "run.completed",
    ]
    assert [e["sequence"] for e in events] == list(range(10))
    envelope = schemas.validator("run-event.schema.json")
    for e in events:
        assert envelope.is_valid(e)
        payload = schemas.payload_validator(e["type"])
        assert payload is None or payload.is_valid(e["payload"])
    event_items = [i for i in all_items() if i["sk"]["S"].startswith("E#")]
    assert len(event_items) == 2  # one per transition: create, resolve
    assert services.store.read_events(state.runId, after_sequence=5) == events[6:]
    assert services.store.read_events(state.runId, after_sequence=7) == events[8:]


def budgeted_chain_run() -> tuple[Services, Any]:
    """Seven noops in a row under a step budget of two: only dispatch can finish the run."""
    services = Services(Store(TABLE, ENTRIES_TABLE), step_budget=2)
    admin = signed_in(services)
    chain = {
        "nodes": [{"id": f"n{i}", "typeId": "core.noop"} for i in range(7)],
        "edges": [{"sourceNodeId": f"n{i}", "targetNodeId": f"n{i + 1}"} for i in range(6)],
    }
    services.workflows.put_workflow(admin, "chain", WorkflowDefinition.model_validate(chain))
    return services, services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "chain"}))


# A world of its own: it reads every item of the table.
@pytest.mark.private_world
def test_stream_records_delivered_twice_and_out_of_order_change_nothing(world):
    # Given a run that only dispatch can finish: a transition stops after two nodes (its step budget)
    services, state = budgeted_chain_run()
    # When every stream record so far reaches the real dispatch handler twice, shuffled, until nothing is new
    shuffler = random.Random(7)
    for _ in range(10):
        doubled = stream_records(TABLE) * 2
        shuffler.shuffle(doubled)
        assert dispatch(doubled) == {"batchItemFailures": []}
        if services.store.get_run(state.runId)[0].status == "completed":
            break
    # Then the run completed once: every node ran once, sequences are contiguous, one run.completed
    events = services.store.read_events(state.runId)
    assert [e["sequence"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events].count("run.completed") == 1
    assert sorted(e["nodeId"] for e in events if e["type"] == "node.completed") == [f"n{i}" for i in range(7)]
    # And once every record was delivered (the last, run.completed's, was written by the loop's last round: its first
    # delivery does its outbox work), delivering the whole stream twice more, shuffled, changes no item
    assert dispatch(stream_records(TABLE)) == {"batchItemFailures": []}
    before = sorted(json.dumps(i, sort_keys=True, default=bytes.hex) for i in all_items())
    doubled = stream_records(TABLE) * 2
    shuffler.shuffle(doubled)
    assert dispatch(doubled) == {"batchItemFailures": []}
    assert sorted(json.dumps(i, sort_keys=True, default=bytes.hex) for i in all_items()) == before


def test_dispatch_continues_a_run_that_hit_its_step_budget(world, monkeypatch):
    services, state = budgeted_chain_run()
    assert state.status == "running"
    # The real dispatch handler, fed the stream as the event source mapping would, finishes the run.
    monkeypatch.setenv("INTERLUDE_STEP_BUDGET", "2")
    for _ in range(10):
        records = stream_records(TABLE)
        dispatch(records)
        if services.store.get_run(state.runId)[0].status == "completed":
            break
    final, _ = services.store.get_run(state.runId)
    assert final.status == "completed"
    seqs = [e["sequence"] for e in services.store.read_events(state.runId)]
    assert seqs == list(range(len(seqs)))


def test_a_losing_resolve_learns_the_winner_from_the_failed_condition(services, admin):
    workflow = register(services, admin, "conformance-approval")
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    stale_state, stale_version = services.store.get_run(state.runId)
    services.decisions.resolve_interrupt(admin, state.runId, "gate", {"action": "accept"})
    calls = []
    services.store.client.meta.events.register("before-call.dynamodb", lambda **kw: calls.append(kw["model"].name))
    with pytest.raises(DomainError) as lost:
        services.decisions.resolve(stale_state, stale_version, "gate", {"action": "reject"}, _resolver(admin))
    assert lost.value.code == "interrupt_already_resolved"
    assert lost.value.details["resolution"]["decision"] == "granted"
    # The transaction that lost (its failed condition returns the head the winner left, which no longer holds the
    # gate) and the close's event (ADR 0126); no audit chain's head (the decision's entry is a draft on its event
    # batch, ADR 0128).
    assert calls == ["TransactWriteItems", "Query"]


def _resolver(principal: Principal):
    from interlude.rules.interrupts.decide import Resolver

    return Resolver(subject=principal.subject, surface="run")


def test_workflow_versions_are_immutable_and_increment(services, admin, tenant):
    first = services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [{"id": "a", "typeId": "core.noop"}]}))
    second = services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [{"id": "b", "typeId": "core.noop"}]}))
    assert (first["version"], second["version"]) == (1, 2)
    assert services.store.get_workflow(tenant, "wf", 1)["nodes"][0]["id"] == "a"
    assert services.workflows.get_workflow(admin, "wf")["version"] == 2


def test_the_snapshot_shows_each_open_gates_deadline(services, admin):
    gate = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", "timeoutMs": 60_000}}
    services.workflows.put_workflow(admin, "timed", WorkflowDefinition.model_validate({"nodes": [gate]}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "timed"}))
    opened = snapshot(state)["extensions"]["interlude.run"]["openInterrupts"]["gate"]
    raised = datetime.fromisoformat(opened["raisedAt"].replace("Z", "+00:00"))
    deadline = datetime.fromisoformat(opened["deadline"].replace("Z", "+00:00"))
    assert (deadline - raised).total_seconds() == 60


def test_raised_any_finds_a_closed_interrupt_among_more_keys_than_one_batch_reads(services, admin):
    workflow = register(services, admin, "conformance-approval")
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow}))
    services.decisions.resolve_interrupt(admin, state.runId, "gate", {"action": "accept"})
    raised = state.interrupts["gate"].key
    others = [f"{state.runId}:gate:{n}" for n in range(2, 152)]
    assert services.store.raised_any(state.runId, others + [raised])  # the real key is in the second batch
    assert services.store.raised_any(state.runId, [raised])
    assert not services.store.raised_any(state.runId, others)
    assert not services.store.raised_any(state.runId, [])
