"""A new run's event batch that reaches dispatch before its run's head (docs/adr/0165): a create may put the batch
before the transaction that writes the head, so the outbox can read it first. Dispatch hands it out again shortly
while the head may still come, and dispatches it once the head is there; past the wait it is an orphan (a create that
never committed), dropped with nothing dispatched. Played through the outbox queue and its mapping on moto."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient

from interlude import wiring
from interlude.adapters import metrics
from interlude.adapters.outbox_feed import forward
from interlude.app.dispatch import head_wait_retry_s
from interlude.composition import Services
from interlude.domain import clock, formats
from interlude.domain.errors import DomainError, NotFound
from interlude.domain.models.requests import ForkRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.local.sqs_pump import QueuePump
from interlude.store import audit as audit_items
from interlude.store.facade import Store
from interlude.store.layout import INTERRUPT_SK_PREFIX, RUN_SK, run_id_of, run_pk
from interlude.store.stream import is_event_insert, record_run_id
from interlude.wiring import EVENT_ITEM_PREFIX
from tests.integration import test_audit_stream as audit_stream
from tests.integration import test_new_run_gates as gates
from tests.integration import test_webhooks
from tests.integration.conftest import signed_in
from tests.integration.test_store_and_dispatch import register
from tests.integration.test_webhooks import start_gate_run
from tests.support.emf import as_function, of, written
from tests.support.logs import function_log
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.queues import queued
from tests.support.stream import Stream, dispatch

# The webhook tests' world (the loopback switch on) and services; `receiver` is the suite's (tests/conftest.py).
aws, services = test_webhooks.aws, test_webhooks.services
DEPLOYMENT = "orphans-test"


def held_back_head(run_id: str) -> dict[str, Any]:
    """Take the run's head out of the table, as it is between a create's puts and its transaction; the item, to put
    back when that transaction commits."""
    key = {"pk": {"S": run_pk(run_id)}, "sk": {"S": RUN_SK}}
    return boto3.client("dynamodb").delete_item(TableName=TABLE, Key=key, ReturnValues="ALL_OLD")["Attributes"]


def outbox_records_of(run_id: str) -> list[dict[str, Any]]:
    """The run's stream records the deployed filter passes to the outbox (the shared world's stream holds others')."""
    return [r for r in Stream(TABLE).take() if is_event_insert(r) and record_run_id(r) == run_id]


def outbox_batches(run_id: str) -> list[dict[str, Any]]:
    """The run's event-batch items in the table."""
    found = boto3.client("dynamodb").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
        ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":events": {"S": EVENT_ITEM_PREFIX}},
    )
    return found["Items"]


def hidden(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every visibility change made from now on (each entry: receipt handle, seconds)."""
    changes: list[dict[str, Any]] = []
    original = BaseClient._make_api_call

    def recording(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "ChangeMessageVisibilityBatch":
            changes.extend(params["Entries"])
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    return changes


def messages_of(url: str, run_id: str) -> list[dict[str, Any]]:
    """The queue's visible messages that name the run (the shared world's queues hold other tests' too)."""
    return [m for m in queued(url) if run_id in m["Body"]]


def notices_of(aws: dict[str, str], run_id: str) -> list[dict[str, Any]]:
    return messages_of(aws["callbacks"], run_id)


def test_a_new_runs_batch_before_its_head_goes_again_soon_and_is_dispatched_once_when_the_head_commits(
    services, aws, receiver, tenant, monkeypatch
):
    # Given a new gate run whose batch is on the outbox queue while its head is not yet committed
    admin = signed_in(services, tenant=tenant)
    run_id = start_gate_run(services, admin, callbackUrl=receiver.url())
    head = held_back_head(run_id)
    forward(aws[wiring.OUTBOX_QUEUE], outbox_records_of(run_id))
    pump = QueuePump("dispatch", aws[wiring.OUTBOX_QUEUE], batch_size=wiring.OUTBOX_BATCH_SIZE)
    changes = hidden(monkeypatch)
    as_function(monkeypatch, DEPLOYMENT, "dispatch")

    # When the outbox's mapping hands it to dispatch
    with function_log("dispatch", "ERROR") as errors, written("dispatch") as points:
        pump.pump_once()

    # Then nothing of it is dispatched (no callback notice), it is no failure nor an orphan, and it stays on the queue,
    # hidden for the short retry rather than the queue's visibility timeout
    assert notices_of(aws, run_id) == []
    assert errors == []
    assert of(points, metrics.RECORD_FAILURES) == of(points, metrics.ORPHAN_BATCHES) == []
    assert [c["VisibilityTimeout"] for c in changes] == [wiring.NEW_RUN_BATCH_FIRST_RETRY_S]
    assert wiring.queue(wiring.OUTBOX_QUEUE).visibility_timeout_s > wiring.NEW_RUN_BATCH_FIRST_RETRY_S

    # And when the head commits and the message comes back (its retry's seconds passed), it is dispatched: its run's
    # one callback notice queued, once, and the message done with
    boto3.client("dynamodb").put_item(TableName=TABLE, Item=head)
    sqs = boto3.client("sqs")
    sqs.change_message_visibility(
        QueueUrl=aws[wiring.OUTBOX_QUEUE], ReceiptHandle=changes[0]["ReceiptHandle"], VisibilityTimeout=0
    )
    pump.pump_once()
    assert [json.loads(m["Body"])["notice"]["type"] for m in notices_of(aws, run_id)] == ["interrupt.requested"]
    assert messages_of(aws[wiring.OUTBOX_QUEUE], run_id) == []


def test_a_new_runs_batch_whose_head_never_came_is_dropped_past_the_wait_nothing_dispatched_and_counted(
    services, aws, receiver, tenant, clock_file, caplog, monkeypatch
):
    # Given a new gate run's batch on the outbox queue whose head was never committed (its create crashed between its
    # puts and its transaction), older than the wait for it
    admin = signed_in(services, tenant=tenant)
    run_id = start_gate_run(services, admin, callbackUrl=receiver.url())
    head = held_back_head(run_id)
    forward(aws[wiring.OUTBOX_QUEUE], outbox_records_of(run_id))
    clock.advance(clock_file, wiring.NEW_RUN_BATCH_WAIT_S + 1)
    pump = QueuePump("dispatch", aws[wiring.OUTBOX_QUEUE], batch_size=wiring.OUTBOX_BATCH_SIZE)
    function = as_function(monkeypatch, DEPLOYMENT, "dispatch")

    # When the outbox's mapping hands it to dispatch
    with written("dispatch") as points:
        pump.pump_once()

    # Then it is done with, never a dead letter: nothing dispatched, one line naming the orphan's run
    assert messages_of(aws[wiring.OUTBOX_QUEUE], run_id) == []
    assert messages_of(aws["outbox-dlq"], run_id) == []
    assert notices_of(aws, run_id) == []
    (line,) = [r for r in caplog.records if hasattr(r, "orphanBatch")]
    assert line.levelname == "WARNING"
    # And the line names what an operator looks up (docs/operations.md §7): the tenant, the run, the event item's key
    # (the item is there to read) and how long after its events were stamped it was dropped
    assert (line.tenant, line.runId) == (tenant, run_id)
    (batch,) = outbox_batches(run_id)
    assert (line.pk, line.sk) == (batch["pk"]["S"], batch["sk"]["S"])
    assert wiring.NEW_RUN_BATCH_WAIT_S <= line.waitedSeconds < wiring.NEW_RUN_BATCH_WAIT_S + 60
    # And one OrphanBatches point of the function, which the operators' alarm reads (no failed record: it is no failure)
    assert of(points, metrics.ORPHAN_BATCHES) == [{"deployment": DEPLOYMENT, "FunctionName": function}]
    assert of(points, metrics.RECORD_FAILURES) == []
    boto3.client("dynamodb").put_item(TableName=TABLE, Item=head)  # the shared world's run, whole again


def test_waiting_for_a_head_is_soon_retried_and_never_spends_the_receives_that_dead_letter_a_message():
    # Hidden for the doubling retry after each receive until its events are older than the wait, a message waiting for
    # a head that never comes is dropped at its 6th receive of the 10 that dead-letter it: 4 are left for the failures
    # any dispatch may meet. The first retry is seconds away, not the queue's 6 minutes.
    hidden, receives = 0, 1
    while hidden < wiring.NEW_RUN_BATCH_WAIT_S:
        hidden += head_wait_retry_s(receives)
        receives += 1
    assert receives + 4 <= wiring.OUTBOX_MAX_RECEIVES
    assert head_wait_retry_s(1) <= 2
    assert 2 * wiring.function("api").timeout_s <= wiring.NEW_RUN_BATCH_WAIT_S


def test_a_forks_audit_entry_is_chained_once_its_head_is_there_never_before(world, tenant):
    # Given a fork (its create carries its audit entry's draft, "run.forked", on its event batch) whose batch reaches
    # dispatch before its head is committed
    services = Services(Store(TABLE, ENTRIES_TABLE), audit_key=lambda: audit_stream.KEY)
    admin = signed_in(services)
    (source,) = audit_stream.decided(services, admin)
    fork = services.forks.fork_run(admin, source, ForkRunRequest(mode="replay")).state.runId
    records = audit_stream.records_of([fork])
    head = held_back_head(fork)

    # When dispatch takes it, the draft is not appended and the record goes again
    assert len(audit_stream.dispatched(records)) == 1
    assert forked_entries(tenant, fork) == []

    # Then once the head is there, the fork's entry is chained, once, however often the record comes
    boto3.client("dynamodb").put_item(TableName=TABLE, Item=head)
    assert audit_stream.dispatched(records) == []
    assert audit_stream.dispatched(records) == []
    assert len(forked_entries(tenant, fork)) == 1


def forked_entries(tenant: str, run_id: str) -> list[dict[str, Any]]:
    chain = audit_items.chain_of_member(run_id)
    entries = [json.loads(item["entry"]) for item in audit_stream.chain_items(tenant, chain)]
    return [e for e in entries if e["action"] == "run.forked" and e["target"]["runId"] == run_id]


# -- the writer (from 0.7.0: formats.CREATE_BATCH_PUT_BEFORE_WRITTEN) -------------------------------------------------


@pytest.fixture
def batch_before(monkeypatch):
    monkeypatch.setattr(formats, "CREATE_BATCH_PUT_BEFORE_WRITTEN", True)


def tenants_outbox_records(tenant: str) -> list[dict[str, Any]]:
    """The tenant's new stream records the deployed filter passes to the outbox."""
    return [r for r in Stream(TABLE).take() if is_event_insert(r) and (record_run_id(r) or "").startswith(f"{tenant}/")]


def streamed(item: dict[str, Any]) -> dict[str, Any]:
    """The stream record of a new item, as the mapping hands it over."""
    keys = {name: item[name] for name in (wiring.PARTITION_KEY, wiring.SORT_KEY)}
    return {"eventName": "INSERT", "dynamodb": {"Keys": keys, "NewImage": item, "SequenceNumber": item["sk"]["S"]}}


def batch_items(tenant: str) -> list[dict[str, Any]]:
    return [i for i in gates.tenant_items(tenant) if i["sk"]["S"].startswith(EVENT_ITEM_PREFIX)]


def test_a_new_runs_batch_is_put_with_its_gate_before_its_transaction_and_dispatched_once_its_head_commits(
    services, aws, receiver, tenant, batch_before, monkeypatch
):
    admin = signed_in(services, tenant=tenant)
    client = services.store.client
    transact = services.store._transact
    early: list[dict[str, Any]] = []

    def dispatched_first(*args: Any, **kwargs: Any) -> Any:
        # The outbox is quick: it takes the batch's record between the create's puts and its transaction (the record
        # the stream holds by then, made here: reading the stream is no part of the API function's work).
        if put := [i for i in gates.put_items(batches) if i["sk"]["S"].startswith(EVENT_ITEM_PREFIX)]:
            early.append(dispatch([streamed(i) for i in put]))
        return transact(*args, **kwargs)

    monkeypatch.setattr(services.store, "_transact", dispatched_first)
    with gates.sent(client, "BatchWriteItem") as batches, gates.sent(client, "TransactWriteItems") as transactions:
        run_id = start_gate_run(services, admin, callbackUrl=receiver.url())

    # The batch is in the create's one BatchWriteItem, beside its gate, with the gate's expiry; not in its transaction
    put = gates.put_items(batches)
    [batch] = [i for i in put if i["sk"]["S"].startswith(EVENT_ITEM_PREFIX)]
    [gate] = [i for i in put if i["sk"]["S"].startswith(INTERRUPT_SK_PREFIX)]
    assert len([b for b in batches if run_pk(run_id) in str(b)]) == 1
    assert batch[wiring.TTL_ATTRIBUTE] == gate[wiring.TTL_ATTRIBUTE]
    [transaction] = [t for t in transactions if run_pk(run_id) in str(t)]  # not the workflow's put
    written = [next(iter(op.values())) for op in transaction["TransactItems"]]
    assert not [w for w in written if w.get("Item", w.get("Key", {})).get("sk", {}).get("S", "").startswith(EVENT_ITEM_PREFIX)]
    # Dispatched before its head committed, it waited: nothing sent
    assert [len(answer["batchItemFailures"]) for answer in early] == [1]
    assert notices_of(aws, run_id) == []
    # Handed out again once the head is there, it is dispatched: the run's one notice, once
    assert dispatch(outbox_records_of(run_id)) == {"batchItemFailures": []}
    assert [json.loads(m["Body"])["notice"]["type"] for m in notices_of(aws, run_id)] == ["interrupt.requested"]
    assert [e["type"] for e in services.store.read_events(run_id)][:2] == ["run.started", "node.started"]


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_creation_refused_takes_its_batch_back_and_the_outbox_finds_it_gone(services, admin, batch_before):
    workflow = register(services, admin, "conformance-approval")
    kept = gates.create(services, admin, workflow)
    services.tenants.put_settings(admin.tenant, TenantSettings.model_validate({"limits": {"openRuns": 1}}), "admin")
    services.limiter.forget(admin.tenant)
    with pytest.raises(DomainError) as refused:
        gates.create(services, admin, workflow)
    assert refused.value.code == "interlude.quota_exceeded"
    assert [run_id_of(i["pk"]["S"]) for i in batch_items(admin.tenant)] == [kept]
    # The refused run's batch reached the stream before it was taken back: dispatch finds it gone, done with
    records = [r for r in tenants_outbox_records(admin.tenant) if record_run_id(r) != kept]
    assert len(records) == 1
    assert dispatch(records) == {"batchItemFailures": []}


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_batch_left_by_a_creation_stopped_before_its_transaction_is_shown_by_nothing_and_dropped_by_the_outbox(
    services, admin, batch_before, monkeypatch, clock_file
):
    workflow = register(services, admin, "conformance-approval")
    orphan = gates.stopped_creation(services, admin, workflow, monkeypatch)
    run_id = run_id_of(orphan["pk"]["S"])
    [batch] = batch_items(admin.tenant)
    # It goes by itself with the gate put beside it
    assert run_id_of(batch["pk"]["S"]) == run_id
    assert batch[wiring.TTL_ATTRIBUTE] == orphan[wiring.TTL_ATTRIBUTE]
    # Nothing shows its events: they are read only with the run's head
    with pytest.raises(NotFound):
        services.runs.poll_events(admin, run_id, -1, 0)
    with pytest.raises(NotFound):
        services.run_exports.export(admin, run_id)
    # The outbox waits for its head, then drops it: nothing dispatched, no failure
    records = tenants_outbox_records(admin.tenant)
    assert len(dispatch(records)["batchItemFailures"]) == 1
    clock.advance(clock_file, wiring.NEW_RUN_BATCH_WAIT_S + 1)
    assert dispatch(records) == {"batchItemFailures": []}
