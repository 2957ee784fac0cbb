"""A transition's callback notices delivered together (format 10, docs/adr/0155) in-process: moto (DynamoDB, streams,
SQS, Secrets Manager), the real dispatch outbox and callbacks worker, a receiver on 127.0.0.1. One message and one
delivery record for the gate's resolution and the run's completion; each notice still its own POST, `webhook-id`,
attempts, dead letter and replay, as a person sees it."""

from __future__ import annotations

import json

import boto3
import pytest

from interlude import wiring
from interlude.adapters.delivery.worker import Worker
from interlude.api.console.routes import any_dead_notice
from interlude.composition import Services
from interlude.config.delivery import delivery_settings
from interlude.domain import formats
from interlude.domain.errors import Conflict, Internal
from interlude.domain.ids import to_wire
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local.sqs_pump import QueuePump
from interlude.rules.notice_bundles import reopened_parts
from interlude.store import attributes as a
from interlude.store.deliveries import BUNDLE, DeliveryStore, Notice, bundle_ref, notice_sk
from interlude.store.facade import Store
from interlude.store.layout import run_pk
from interlude.store.leases import Writes
from tests.integration.conftest import new_api_key
from tests.integration.test_tenant_lifecycle import call
from tests.support.local_stack import FIXTURES
from tests.support.queues import drain, queued
from tests.support.receiver import delivering_to_loopback
from tests.support.stream import Stream

MAX_ATTEMPTS = 2
RESOLVE_NOTICES = ["interrupt.resolved", "run.completed"]


@pytest.fixture
def aws(world, monkeypatch):
    env = {"PUBLIC_BASE_URL": "https://interlude.example.com", **delivering_to_loopback(MAX_ATTEMPTS)}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return world


@pytest.fixture
def bundled(monkeypatch):
    """This release writes format 10 (the WRITER's flag), so what it queues and records is what the reader reads."""
    monkeypatch.setattr(formats, "NOTICE_BUNDLES_WRITTEN", True)


@pytest.fixture
def services(aws) -> Services:
    return Services(Store(aws.table, aws.entries_table))


def on_queue(url: str) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def resolved_run(services, admin, aws, receiver, script: list) -> tuple[str, Stream, int]:
    """A callback run whose gate notice was delivered, then resolved: its resolution's notices queued (and how many
    messages carry them), not delivered yet; the receiver answers them with `script`."""
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    request = CreateRunRequest.model_validate({"workflowId": definition["id"], "callbackUrl": receiver.url()})
    run_id = services.lifecycle.create_run(admin, request).runId
    stream = Stream(aws.table)
    stream.pump()
    drain(aws.queues)
    assert [json.loads(h.body)["type"] for h in receiver.hits] == ["interrupt.requested"]
    receiver.script[:] = script
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    stream.pump()
    return run_id, stream, on_queue(aws.queues["callbacks"])


def notice_items(aws, run_id: str) -> list[dict]:
    """The run's delivery records, in whichever table a release wrote them (docs/adr/0161)."""
    got = [
        boto3.client("dynamodb").query(
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :n)",
            ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":n": a.s(notice_sk("ntc_"))},
        )
        for table in (aws.table, aws.entries_table)
    ]
    return [a.plain(item) for answer in got for item in answer["Items"]]


def bundle_of(aws, run_id: str) -> dict:
    (bundle,) = [item for item in notice_items(aws, run_id) if BUNDLE in item]
    return bundle


def seen(services, admin, run_id: str) -> list[tuple[str, int, str]]:
    """The run's delivery attempts as GET /runs/{runId}/deliveries (and the console, and the CLI) list them."""
    listed = services.deliveries.run_deliveries(admin, run_id)["deliveries"]
    return [(d["type"], d["attempt"], d["status"]) for d in listed if d["type"] != "interrupt.requested"]


@pytest.mark.parametrize("written", [False, True])
def test_a_transitions_notices_are_one_message_and_one_record_each_posted_in_order_under_its_own_id(
    services, admin, aws, receiver, monkeypatch, written
):
    monkeypatch.setattr(formats, "NOTICE_BUNDLES_WRITTEN", written)
    # Given a gate resolved, which ends the run: two notices to one receiver
    run_id, stream, messages = resolved_run(services, admin, aws, receiver, [])

    # When they are delivered, and the stream record comes again (its notices queued again)
    drain(aws.queues)
    stream.pump(again=True)
    drain(aws.queues)

    # Then each notice was POSTed once, in order, under its own webhook-id
    later = receiver.hits[1:]
    assert [json.loads(h.body)["type"] for h in later] == RESOLVE_NOTICES
    assert [h.headers["webhook-id"] for h in later] == [json.loads(h.body)["id"] for h in later]
    assert len({h.headers["webhook-id"] for h in later}) == 2
    # And one message and one record carried both (format 10), or one each (the previous format)
    assert messages == (1 if written else 2)
    assert len(notice_items(aws, run_id)) == (2 if written else 3)
    # And a person sees each notice's attempt
    assert sorted(seen(services, admin, run_id)) == [("interrupt.resolved", 1, "succeeded"), ("run.completed", 1, "succeeded")]
    if written:
        bundle = bundle_of(aws, run_id)
        assert (bundle["v"], bundle["status"], bundle["attempts"]) == (formats.NOTICE_BUNDLES, "delivered", 1)
        # It expires with its run, as every delivery record (its run ended before it was created)
        head = boto3.client("dynamodb").get_item(TableName=aws.table, Key=a.key(run_pk(run_id), "RUN"))["Item"]
        assert bundle[wiring.TTL_ATTRIBUTE] == int(head[wiring.TTL_ATTRIBUTE]["N"])
        assert [(n["type"], n["status"], n["tries"]) for n in bundle[BUNDLE]] == [
            ("interrupt.resolved", "delivered", 1),
            ("run.completed", "delivered", 1),
        ]


def test_a_notice_refused_after_the_one_before_was_accepted_is_retried_alone(services, admin, aws, receiver, bundled):
    # Given a receiver that accepts the resolution and refuses the completion once
    run_id, _, _ = resolved_run(services, admin, aws, receiver, [200, 500])

    # When the queue is played until it is empty
    drain(aws.queues)

    # Then the resolution was POSTed once and the completion twice, in order
    assert [json.loads(h.body)["type"] for h in receiver.hits[1:]] == [*RESOLVE_NOTICES, "run.completed"]
    # And the record says which was delivered when, each notice's attempts its own
    assert sorted(seen(services, admin, run_id)) == [
        ("interrupt.resolved", 1, "succeeded"),
        ("run.completed", 1, "failed"),
        ("run.completed", 2, "succeeded"),
    ]
    bundle = bundle_of(aws, run_id)
    assert (bundle["status"], bundle["attempts"]) == ("delivered", 2)
    assert [(n["status"], n["tries"]) for n in bundle[BUNDLE]] == [("delivered", 1), ("delivered", 2)]


def test_a_notice_out_of_attempts_is_dead_lettered_alone_and_replayed_by_its_id_alone(
    services, admin, aws, receiver, bundled
):
    # Given a receiver that accepts the resolution and refuses the completion every time
    run_id, _, _ = resolved_run(services, admin, aws, receiver, [200] + [500] * MAX_ATTEMPTS)
    drain(aws.queues)

    # Then the completion alone is dead-lettered, with its own attempts, and the run shows a dead notice
    (dead,) = [json.loads(m["Body"]) for m in queued(aws.queues["callbacks-dlq"])]
    completed = json.loads(receiver.hits[-1].body)["id"]
    assert (dead["noticeId"], dead["type"], dead["attempts"]) == (completed, "run.completed", MAX_ATTEMPTS)
    assert [h["attempt"] for h in dead["deliveryHistory"]] == [1, 2]
    assert dead["deliveryHistory"][-1]["final"] is True
    assert bundle_of(aws, run_id)["status"] == "dead"
    assert any_dead_notice(services.deliveries.run_deliveries(admin, run_id)["deliveries"])

    # When it is replayed by its id (no record of its own: its bundle's)
    replayed = services.replay.retry_run_delivery(admin, run_id, completed)
    drain(aws.queues)

    # Then it alone is POSTed again, in a round of its own, and delivered
    assert (replayed["status"], replayed["deliveryId"]) == ("queued", completed)
    assert [json.loads(h.body)["type"] for h in receiver.hits[1:]] == [*RESOLVE_NOTICES, "run.completed", "run.completed"]
    assert seen(services, admin, run_id)[-1] == ("run.completed", MAX_ATTEMPTS + 1, "succeeded")
    assert bundle_of(aws, run_id)["status"] == "delivered"
    # And a replay of a delivered notice is refused
    with pytest.raises(Conflict) as refused:
        services.replay.retry_run_delivery(admin, run_id, completed)
    assert refused.value.code == "interlude.not_dead_lettered"


def test_a_notice_gone_for_good_does_not_hold_back_the_next_and_a_recovery_sends_it_again(
    services, admin, aws, receiver, bundled
):
    # Given a receiver that answers the resolution 410 Gone (never retried) and accepts the completion
    run_id, _, _ = resolved_run(services, admin, aws, receiver, [410, 200])
    drain(aws.queues)

    # Then the resolution is dead-lettered at once and the completion delivered in the same attempt
    assert [json.loads(h.body)["type"] for h in receiver.hits[1:]] == RESOLVE_NOTICES
    (dead,) = [json.loads(m["Body"]) for m in queued(aws.queues["callbacks-dlq"])]
    assert (dead["type"], dead["attempts"]) == ("interrupt.resolved", 1)
    bundle = bundle_of(aws, run_id)
    assert (bundle["status"], [n["status"] for n in bundle[BUNDLE]]) == ("dead", ["dead", "delivered"])
    # And GET /runs/{runId}/deliveries (the CLI's and the console's listing) shows each notice's attempt
    listed = call("GET", f"/runs/{to_wire(run_id)}/deliveries", new_api_key(services))
    assert listed.status == 200
    assert sorted((d["type"], d["status"], d.get("httpStatus")) for d in listed.json()["deliveries"]) == [
        ("interrupt.requested", "succeeded", 200),
        ("interrupt.resolved", "failed", 410),
        ("run.completed", "succeeded", 200),
    ]

    # When the run's dead callback deliveries are recovered
    recovered = services.replay.recover_run(admin, run_id, "callback-deliveries")
    drain(aws.queues)

    # Then the resolution alone is sent again, and delivered
    assert (recovered["matched"], recovered["queued"]) == (1, 1)
    assert [json.loads(h.body)["type"] for h in receiver.hits[1:]] == [*RESOLVE_NOTICES, "interrupt.resolved"]
    assert bundle_of(aws, run_id)["status"] == "delivered"


def test_notices_queued_as_one_delivery_and_again_one_by_one_keep_their_records_apart(
    services, admin, aws, receiver, monkeypatch, bundled
):
    # Given a transition's notices queued as one delivery, whose first attempt delivered the decision's notice only
    run_id, stream, _ = resolved_run(services, admin, aws, receiver, [200, 500])
    QueuePump("callbacks", aws.queues["callbacks"]).pump_once()
    # And the same stream record handled again by the release before, which queues each notice alone
    monkeypatch.setattr(formats, "NOTICE_BUNDLES_WRITTEN", False)
    stream.pump(again=True)

    # When every message is delivered
    drain(aws.queues)

    # Then each notice reached the receiver, and the delivery of both and each one's own are recorded apart
    assert {json.loads(h.body)["type"] for h in receiver.hits[1:]} == set(RESOLVE_NOTICES)
    bundle = bundle_of(aws, run_id)
    assert (bundle["status"], [n["status"] for n in bundle[BUNDLE]]) == ("delivered", ["delivered", "delivered"])
    alone = [i for i in notice_items(aws, run_id) if BUNDLE not in i and i["type"] != "interrupt.requested"]
    assert sorted((i["type"], i["status"]) for i in alone) == [("interrupt.resolved", "delivered"), ("run.completed", "delivered")]


def test_a_bundle_reopened_but_never_queued_is_queued_by_the_sweep(services, admin, aws, receiver, bundled):
    # Given a dead bundle reopened by a replay that stopped before it queued its message
    run_id, _, _ = resolved_run(services, admin, aws, receiver, [200] + [500] * MAX_ATTEMPTS)
    drain(aws.queues)
    store = DeliveryStore(services.store)
    found = store.located(bundle_ref(run_id, bundle_of(aws, run_id)[BUNDLE]))
    assert found is not None
    ref, held = found
    writes = Writes(sets={BUNDLE: a.packed(reopened_parts(held[BUNDLE]))})
    assert store.reopen(ref, held, "2026-12-06T00:00:00Z", 20, writes).outcome == "reopened"

    # When the sweep finds it, and the queue is played
    assert services.replay.requeue(run_id, store.key(ref)["sk"]["S"]) == "queued"
    drain(aws.queues)

    # Then its undelivered notice alone was sent again
    assert [json.loads(h.body)["type"] for h in receiver.hits[-2:]] == ["run.completed", "run.completed"]
    assert bundle_of(aws, run_id)["status"] == "delivered"


def test_a_message_or_a_record_in_a_newer_format_is_refused_by_name(services, aws):
    worker = Worker(deliveries=DeliveryStore(services.store), sqs=None, secrets=None, settings=delivery_settings())  # type: ignore[arg-type]
    later = {"v": formats.READS + 1, "tenant": "t", "callbackUrl": "https://x.example", "notices": []}
    with pytest.raises(Internal) as refused:
        worker.handle({"body": json.dumps(later)})
    assert refused.value.code == "interlude.item_too_new"

    store = DeliveryStore(services.store)
    ref = Notice("t/run_x", "ntc_x", "run.completed")
    boto3.client("dynamodb").put_item(TableName=aws.table, Item={**store.key(ref), "v": a.n(formats.READS + 1)})
    for read in (lambda: store.read(ref), lambda: store.attempts("t/run_x"), lambda: store.bundle_of("t/run_x", "ntc_y")):
        with pytest.raises(Internal) as refused:
            read()
        assert refused.value.code == "interlude.item_too_new"
