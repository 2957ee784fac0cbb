"""A closed interrupt's inbox entries leave by the stream, not on the request that closed it (issue 13).

Real moto table and stream; the real dispatch handler consumes the records (tests/support/stream.py). The entries
are counted by the one thing that can see them: a scan of the table for items under the inbox prefix.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.api.inbox import inbox_query
from interlude.composition import Services
from interlude.composition import services as process_services
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.run import Closed, Transition
from interlude.store.facade import Store
from interlude.store.inbox import CLOSED_ENTRIES
from tests.integration.conftest import signed_in, state_of
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.stream import Stream, dispatch

# Worlds of their own: each test counts the inbox entries by scanning the whole table.
pytestmark = pytest.mark.private_world


@pytest.fixture
def world(world):
    services = Services(Store(TABLE, ENTRIES_TABLE))
    admin = signed_in(services, "admin")
    gate = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "t"}}
    services.workflows.put_workflow(admin, "one", WorkflowDefinition.model_validate({"nodes": [gate], "edges": []}))
    return services, admin, Stream(TABLE)


# The gate's entries: ANY (it names no approver) and its workflow's; an approval has none in its kind's (ADR 0160).
GATE_ENTRIES = 2


def entries() -> list[dict]:
    # A scan is fine in a test: it sees every entry, whichever partition and table it is in (docs/adr/0161).
    return [i for i in everything() if f"#{wiring.INBOX.prefix}#" in i[wiring.PARTITION_KEY]["S"]]


def everything() -> list[dict]:
    """Every item of both tables."""
    return [item for table in (TABLE, ENTRIES_TABLE) for item in boto3.client("dynamodb").scan(TableName=table)["Items"]]


def calls_made(client) -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = []
    client.meta.events.register(
        "before-parameter-build.dynamodb", lambda model, params, **_: calls.append((model.name, params))
    )
    return calls


def pending(services, admin) -> list[str]:
    return [i["runId"] for i in services.inbox.inbox(admin, *inbox_query({}))["interrupts"]]


def test_a_resolve_writes_no_inbox_entry_and_dispatching_its_record_removes_them(world):
    services, admin, stream = world
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"})).runId
    stream.settle()
    opened = entries()
    assert len(opened) == GATE_ENTRIES
    calls = calls_made(services.store.client)
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    # The request path: the run's read, the transaction; no BatchWriteItem, and no inbox key in the transaction
    assert [name for name, _ in calls] == ["GetItem", "TransactWriteItems"]
    written = [next(iter(op.values())) for op in calls[1][1]["TransactItems"]]
    assert not [w for w in written if f"#{wiring.INBOX.prefix}#" in str(w.get("Key") or w.get("Item"))]
    # The entries stay until dispatch runs
    assert entries() == opened
    assert state_of(services, run_id).status == "completed"
    stream.pump()
    assert entries() == []
    assert pending(services, admin) == []


def test_the_closing_record_names_the_entries_and_a_redelivered_one_changes_nothing(world):
    services, admin, stream = world
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"})).runId
    assert pending(services, admin) == [run_id]
    opened = {(e[wiring.PARTITION_KEY]["S"], e[wiring.SORT_KEY]["S"]) for e in entries()}
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    records = stream.take()
    closing = [r for r in records if CLOSED_ENTRIES in r["dynamodb"].get("NewImage", {})]
    assert len(closing) == 1  # the create's record names none
    assert dispatch(records) == {"batchItemFailures": []}
    assert entries() == []
    # Delivered again (at least once), alone and with every record: nothing fails, nothing is written back
    before = everything()
    for again in (closing, stream.take(again=True)):
        assert dispatch(again) == {"batchItemFailures": []}
    assert everything() == before
    assert len(opened) == GATE_ENTRIES
    assert entries() == []


def test_a_process_that_stops_after_the_commit_leaves_the_entries_to_the_record(world):
    services, admin, stream = world
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"})).runId
    stream.settle()

    def stop(**_) -> None:
        raise SystemExit("the instance stopped right after the transaction")

    services.store.client.meta.events.register("after-call.dynamodb.TransactWriteItems", stop)
    with pytest.raises(SystemExit):
        services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    services.store.client.meta.events.unregister("after-call.dynamodb.TransactWriteItems", stop)
    assert state_of(services, run_id).status == "completed"
    assert len(entries()) == GATE_ENTRIES
    stream.settle()
    assert entries() == []


def test_a_failed_delete_fails_the_record_and_its_redelivery_removes_the_entries(world):
    services, admin, stream = world
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"})).runId
    stream.settle()
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    records = stream.take()

    def throttled(**_) -> None:
        error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
        raise ClientError(error, "BatchWriteItem")  # type: ignore[arg-type]

    dispatch_client = process_services().store.client
    dispatch_client.meta.events.register("before-call.dynamodb.BatchWriteItem", throttled)
    failed = dispatch(records)
    dispatch_client.meta.events.unregister("before-call.dynamodb.BatchWriteItem", throttled)
    # The closing record alone is reported back (the mapping retries it), and the entries are still there
    (closing,) = [r for r in records if CLOSED_ENTRIES in r["dynamodb"].get("NewImage", {})]
    assert failed == {"batchItemFailures": [{"itemIdentifier": closing["dynamodb"]["SequenceNumber"]}]}
    assert len(entries()) == GATE_ENTRIES
    assert dispatch(records) == {"batchItemFailures": []}
    assert entries() == []


def test_a_cancel_closes_the_gate_and_its_record_removes_the_entries(world):
    services, admin, stream = world
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"})).runId
    stream.settle()
    calls = calls_made(services.store.client)
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest.model_validate({"reason": "no longer needed"}))
    assert "BatchWriteItem" not in [name for name, _ in calls]
    assert len(entries()) == GATE_ENTRIES
    # Before dispatch ran, the cancelled gate is not pending (the page reads the interrupt's status) and the page
    # sweeps the entries it met (its families' only); the record delivered afterwards deletes the rest, and
    # deleting the swept ones again fails nothing
    assert pending(services, admin) == []
    assert 0 < len(entries()) < GATE_ENTRIES
    stream.settle()
    assert entries() == []


def test_a_transition_that_closes_an_interrupt_without_events_deletes_its_entries_itself(world):
    # No engine path does this today (closing emits interrupt.resolved or node.cancelled); with no event batch
    # there is no record to carry the entries, so the commit deletes them after the transaction.
    services, admin, _ = world
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"})).runId
    state, version = services.store.get_run(run_id)
    gate = state.interrupts.pop("gate")
    closed = Closed(gate, "cancelled", {"reason": "test"})
    services.store.commit(Transition(state=state, closed=[closed]), version, "2026-12-01T00:00:00Z")
    assert entries() == []
