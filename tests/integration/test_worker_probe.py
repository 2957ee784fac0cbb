"""A hostile pass over the workers (ADR 0175's for the API, done for what arrives on queues, the stream and the
scheduler): each worker's real handler, on moto, handed what a deployment can deliver to it but the happy path never
does. Every worker wiring.py declares is probed here, or this module says it is not (test_every_worker_is_probed).

What each must do: fail the poisoned message alone (a batch item failure, counted as RecordFailures and logged at
ERROR with why), so that after its queue's receives it waits in its dead letters; refuse a later release's message by
name (interlude.item_too_new), never take it for the one this release writes; take the good messages of the same
batch; and take a message delivered twice once.

Probed elsewhere, not here: a suspended or deleted tenant's work, held once however often it comes and handed back on
resume, or dropped (test_tenant_lifecycle.py); a fault before or after each AWS call of a worker, redelivered
(test_resilience.py); a new run's batch ahead of its head (test_new_run_batches.py)."""

from __future__ import annotations

import json

import boto3
import pytest

from interlude import wiring
from interlude.adapters import metrics
from interlude.adapters.outbox_feed import forward
from interlude.domain import clock
from interlude.domain.errors import Internal
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import to_event_record
from interlude.store.facade import Store
from interlude.store.layout import RUN_SK, run_pk
from interlude.store.stream import is_event_insert
from interlude.store.tenants import TenantRecords
from tests.integration.test_dispatch_batch import gate_runs
from tests.support.emf import as_function, of, written
from tests.support.logs import function_log
from tests.support.moto_world import TABLE
from tests.support.queues import drain, queued
from tests.support.receiver import Receiver, delivering_to_loopback
from tests.support.stream import OUTBOX_ARN, Stream, outbox_event

DEPLOYMENT = "probe-test"
# Queue consumers, by the queue that invokes them.
CONSUMERS = {fn.name: fn for fn in wiring.FUNCTIONS if fn.consumes}
# The table stream's readers and the scheduler's target, probed by the tests below of their own.
STREAM_READERS = {"stream"}
SCHEDULED = {wiring.SCHEDULES.target}
# Invoked by neither a queue, the stream nor a schedule: the API's and the operator's functions (ADR 0175's probe).
NOT_WORKERS = {"api", "admin"}
# A format no release writes yet.
TOO_NEW = 99


@pytest.fixture(autouse=True)
def _loopback_callbacks(monkeypatch):
    # gate_runs' callback URL is on loopback, where nothing listens: its notices stay queued.
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://interlude.example.com")


@pytest.fixture(autouse=True)
def _a_tenant(world):
    # The world's tenant as the operator surface lists it: active (a tenant with neither a record nor a key is a
    # deleted one, whose work every worker drops: docs/adr/0195).
    TenantRecords(Store(world.table, world.entries_table)).register(world.tenant, clock.iso(clock.now()))


def poison(tenant: str) -> dict[str, str]:
    """Bodies no worker's queue should ever carry, each the tenant's (so it is admitted, not held)."""
    later = {"v": TOO_NEW, "tenant": tenant, "runId": f"{tenant}/r1", "pk": f"T#{tenant}#R#r1", "sk": "E#1"}
    return {
        "not-json": "{not json",
        "not-an-object": "[1, 2]",
        "no-fields": "{}",
        "too-new": json.dumps({**later, "kind": "later"}),
        # The callbacks queue's webhook deliveries are read apart from its notices
        "too-new-webhook": json.dumps({**later, "kind": "webhook", "webhookId": "wh1", "sequence": 1}),
    }


def sqs_records(queue: str, bodies: list[str]) -> list[dict]:
    return [
        to_event_record(
            {
                "MessageId": f"p{i}",
                "ReceiptHandle": f"receipt-p{i}",
                "Body": body,
                "Attributes": {"ApproximateReceiveCount": "1"},
            },
            f"arn:aws:sqs:us-east-1:123456789012:{queue}",
        )
        for i, body in enumerate(bodies)
    ]


def failed_ids(name: str, event: dict) -> set[str]:
    """The messages the real handler reports failed; a whole batch of one failing may raise (Powertools' default, the
    migrate function's): SQS then hands that one message out again the same way."""
    try:
        answer = lambda_runtime.invoke(name, event)
    except Exception:
        if len(event["Records"]) > 1:
            raise
        return {event["Records"][0]["messageId"]}
    return {failure["itemIdentifier"] for failure in answer["batchItemFailures"]}


def test_every_worker_is_probed():
    assert {fn.name for fn in wiring.FUNCTIONS} == set(CONSUMERS) | STREAM_READERS | SCHEDULED | NOT_WORKERS
    assert {fn.name for fn in wiring.FUNCTIONS if fn.reads_stream} == STREAM_READERS


@pytest.mark.parametrize("name", sorted(CONSUMERS))
def test_each_poisoned_message_fails_alone_counted_and_logged_with_why(name, world, monkeypatch):
    # Given every kind of poisoned message, in one batch (one per batch where the function takes one at a time)
    bodies = poison(world.tenant)
    function = as_function(monkeypatch, DEPLOYMENT, name)
    batches = [list(bodies.items())] if CONSUMERS[name].batch_size >= len(bodies) else [[kv] for kv in bodies.items()]

    for batch in batches:
        records = sqs_records(CONSUMERS[name].consumes or "", [body for _, body in batch])
        # When the real handler takes them
        with function_log(name, level="ERROR") as lines, written(name) as points:
            failed = failed_ids(name, {"Records": records})

        # Then each one failed (SQS hands it out again, then moves it to the queue's dead letters), none was taken
        assert failed == {r["messageId"] for r in records}
        # And each is one RecordFailures point of the function (what its alarm reads) and one ERROR line saying why
        assert of(points, metrics.RECORD_FAILURES) == [{"deployment": DEPLOYMENT, "FunctionName": function}] * len(
            batch
        )
        errors = [line["exception"] for line in lines if line.get("exception")]
        assert len(errors) == len(batch)
        # And a later release's message is refused by name, never read as this release's
        for (kind, _), error in zip(batch, errors, strict=True):
            if kind.startswith("too-new"):
                assert f"format {TOO_NEW}, newer than this release" in error, error


def test_a_later_releases_outbox_message_is_refused_not_dispatched(services, admin, world):
    # Given a real outbox message naming a run's new event item, as a later release would queue it (format 99)
    gate_runs(services, admin, 1, resolved=False)
    event = outbox_event(Stream(TABLE).take())
    (record,) = event["Records"]
    later = {**json.loads(record["body"]), "v": TOO_NEW}

    # When dispatch is handed it
    answer = lambda_runtime.invoke("dispatch", {"Records": [{**record, "body": json.dumps(later)}]})

    # Then it fails (to wait for the release that reads it) and nothing was dispatched: no callback notice queued
    assert answer == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert queued(world.queues["callbacks"]) == []
    # And the message as this release writes it still goes
    assert lambda_runtime.invoke("dispatch", event) == {"batchItemFailures": []}
    assert len(queued(world.queues["callbacks"])) == 1


def test_a_batch_mixing_good_and_poisoned_outbox_messages_takes_the_good_ones_once(services, admin, world, monkeypatch):
    for name, value in delivering_to_loopback(max_attempts=3).items():
        monkeypatch.setenv(name, value)
    receiver = Receiver().start()
    try:
        # Given two runs' real outbox messages (created and resolved, two each) with poisoned ones between them
        gate_runs(services, admin, 2, callback_url=receiver.url())
        good = outbox_event(Stream(TABLE).take())["Records"]
        bad = sqs_records(wiring.OUTBOX_QUEUE, list(poison(world.tenant).values()))
        mixed = [*bad[:1], *good[:2], *bad[1:3], *good[2:], *bad[3:]]

        # When dispatch takes the batch, then the same batch again (SQS delivers at least once), and the callbacks
        # worker takes what both queued
        first = lambda_runtime.invoke("dispatch", {"Records": mixed})
        second = lambda_runtime.invoke("dispatch", {"Records": mixed})
        drain(world.queues)

        # Then only the poisoned failed, each time; the good ones were dispatched, and each run's every notice reached
        # its receiver once: the second delivery's copies were taken as the duplicates they are
        assert {f["itemIdentifier"] for f in first["batchItemFailures"]} == {r["messageId"] for r in bad}
        assert {f["itemIdentifier"] for f in second["batchItemFailures"]} == {r["messageId"] for r in bad}
        notices = [hit.headers["webhook-id"] for hit in receiver.hits]
        assert len(notices) == len(set(notices)) >= len(good)
    finally:
        receiver.close()


def test_an_outbox_message_naming_a_run_head_fails_alone_not_its_whole_batch(services, admin, world):
    # Given a run's real outbox messages, and beside them one naming its head (no event-log item: the stream never
    # forwards it, but a message edited by hand, or redriven from elsewhere, can)
    (run,) = gate_runs(services, admin, 1, resolved=False)
    good = outbox_event(Stream(TABLE).take())["Records"]
    head = {"v": 1, "pk": run_pk(run), "sk": RUN_SK, "seq": "1"}
    (odd,) = sqs_records(wiring.OUTBOX_QUEUE, [json.dumps(head)])

    # When dispatch takes them together
    answer = lambda_runtime.invoke("dispatch", {"Records": [odd, *good]})

    # Then that one alone failed (the batch's one read of items and heads would refuse the same key twice), and the
    # run's own record was dispatched: its callback notice queued
    assert answer == {"batchItemFailures": [{"itemIdentifier": odd["messageId"]}]}
    assert len(queued(world.queues["callbacks"])) == len(good)


def test_an_outbox_message_naming_an_item_that_is_gone_is_dropped_as_documented(world):
    # Given an outbox message for an item of a run that does not exist (deleted since, or never was)
    body = {"v": 1, "pk": f"T#{world.tenant}#R#01HZZZZZZZZZZZZZZZZZZZZZZZ", "sk": "E#00000001", "seq": "1"}
    with function_log("dispatch") as lines:
        answer = lambda_runtime.invoke("dispatch", {"Records": sqs_records(wiring.OUTBOX_QUEUE, [json.dumps(body)])})

    # Then it succeeds, saying so (dispatch's documented outcome: nothing to do)
    assert answer == {"batchItemFailures": []}
    assert any("the item is gone" in line["message"] for line in lines)


def test_the_stream_passes_no_remove_modify_or_ttl_deletion_and_forwards_them_harmlessly_if_it_did(
    services, admin, world
):
    # Given a run's stream records, and each new event item's record as a MODIFY, a REMOVE and a TTL deletion
    gate_runs(services, admin, 1, resolved=False)
    records = Stream(TABLE).take()
    inserts = [r for r in records if is_event_insert(r)]
    assert inserts
    keys_only = {k: v for k, v in inserts[0]["dynamodb"].items() if k != "NewImage"}
    modify = {**inserts[0], "eventName": "MODIFY"}
    remove = {
        **inserts[0],
        "eventName": "REMOVE",
        "dynamodb": {**keys_only, "OldImage": inserts[0]["dynamodb"]["NewImage"]},
    }
    ttl = {**remove, "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}}

    # Then the deployed filter passes none of them to the stream function
    assert not any(is_event_insert(r) for r in (modify, remove, ttl))
    # And were one passed (a filter changed by hand), the stream function forwards it as the item's key alone, and
    # dispatch, reading the item from the table, finds a removed one gone and drops it, failing nothing
    outbox = world.queues[wiring.OUTBOX_QUEUE]
    assert forward(outbox, [remove, ttl]) == 2
    boto3.client("dynamodb").delete_item(TableName=TABLE, Key=inserts[0]["dynamodb"]["Keys"])
    forwarded = [to_event_record(m, OUTBOX_ARN) for m in queued(outbox)]
    assert len(forwarded) == 2
    assert lambda_runtime.invoke("dispatch", {"Records": forwarded}) == {"batchItemFailures": []}


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"sweep": "a-later-releases-sweep"},
        {"purpose": "interrupt", "nodeId": "gate", "due": 1},
        {"runId": "t/r", "purpose": "a-later-releases-purpose", "due": 1},
        {"v": TOO_NEW, "runId": "t/r"},
    ],
    ids=["no-input", "unknown-sweep", "no-run", "unknown-purpose", "too-new"],
)
def test_a_schedule_input_that_names_nothing_this_release_fires_fails(event, world):
    # When the timeouts function is invoked with an input no schedule of this release carries
    # Then it fails (Scheduler retries it, then leaves it in the schedules' dead letters), firing and counting nothing
    with pytest.raises((ValueError, Internal)) as refused:
        lambda_runtime.invoke("timeouts", event)
    if event.get("v") == TOO_NEW:
        assert isinstance(refused.value, Internal)
        assert refused.value.code == "interlude.item_too_new"


@pytest.mark.parametrize("schedule", wiring.RECURRING_SCHEDULES, ids=lambda schedule: schedule.name)
def test_every_recurring_schedules_input_is_taken(schedule, world):
    # The deployment's own schedules name no run: each is taken as what it is (no deadline fired), none refused as a
    # foreign input
    assert "events" not in lambda_runtime.invoke(wiring.SCHEDULES.target, dict(schedule.input))


def test_a_schedule_input_naming_a_run_that_is_gone_fires_nothing(world):
    # A deadline (or reminder, or task check) whose run was deleted since its schedule was made: a no-op, not a failure
    run_id = f"{world.tenant}/01HZZZZZZZZZZZZZZZZZZZZZZZ"
    for purpose in ("interrupt", "reminder", "task"):
        answer = lambda_runtime.invoke("timeouts", {"runId": run_id, "purpose": purpose, "nodeId": "gate", "due": 1})
        assert answer["events"] == 0
