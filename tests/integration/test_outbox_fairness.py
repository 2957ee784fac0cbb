"""Outbox work fair across tenants (issue 26, S5), on moto: the `stream` function hands each new event-log item to
the outbox queue under its tenant's MessageGroupId (so the queue is an SQS fair queue), every queue message carries
its tenant the same way, and the local stack's queue pump serves batches as a fair queue does. The mechanism is
asserted here; what it does to a quiet tenant's latency under another's churn is measured by
bench/tenant_fairness.py, not timed in a test."""

from __future__ import annotations

import json

import boto3

from interlude import wiring
from interlude.local import lambda_runtime, sqs_pump
from interlude.local.pumps import STREAM_READER
from interlude.local.sqs_pump import FairQueue, QueuePump
from interlude.store.stream import is_event_insert
from tests.integration import test_webhooks
from tests.integration.conftest import signed_in
from tests.integration.test_webhooks import register, start_gate_run
from tests.support.moto_world import TABLE
from tests.support.queues import queued
from tests.support.stream import Stream, dispatch

# The webhook tests' world (the loopback switch on) and services; `receiver` is the suite's (tests/conftest.py).
aws, services = test_webhooks.aws, test_webhooks.services


def group_of(message: dict) -> str:
    return message["Attributes"]["MessageGroupId"]


def queued_with_groups(url: str) -> list[dict]:
    sqs = boto3.client("sqs")
    out: list[dict] = []
    while got := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["MessageGroupId"]
    ).get("Messages", []):
        out += got
    return out


def test_the_stream_function_queues_each_event_item_under_its_tenant_naming_it_only(
    services, aws, receiver, tenant, other_tenant
):
    # Given two tenants' runs, one of them with a callbackUrl
    first, second = signed_in(services, tenant=tenant), signed_in(services, tenant=f"{other_tenant}~b")
    start_gate_run(services, first, callbackUrl=receiver.url())
    start_gate_run(services, second)
    records = Stream(TABLE).take()
    events = [r for r in records if is_event_insert(r)]
    assert len(events) < len(records)

    # When the stream function gets what the mapping's filter passes (the new event-log items)
    assert lambda_runtime.invoke(STREAM_READER, {"Records": events}) == {"batchItemFailures": []}

    # Then one outbox message per item, under its run's tenant, naming the item and nothing of it
    messages = queued_with_groups(aws[wiring.OUTBOX_QUEUE])
    assert len(messages) == len(events)
    assert {group_of(m) for m in messages} == {tenant, f"{other_tenant}~b"}
    for message in messages:
        body = json.loads(message["Body"])
        assert set(body) == {"v", "pk", "sk", "seq"}
        assert body["pk"].startswith(f"T#{group_of(message)}#R#")
        assert "interrupt.requested" not in message["Body"]


def test_dispatch_reads_the_named_item_back_and_every_queue_it_feeds_carries_the_tenant(
    services, aws, receiver, tenant
):
    # Given a tenant with a webhook subscription and a run with a callbackUrl
    admin = signed_in(services, tenant=tenant)
    register(services, admin, receiver.url(), ["interrupt.requested"])
    start_gate_run(services, admin, callbackUrl=receiver.url())

    # When dispatch gets the outbox messages (as the outbox queue delivers them)
    assert dispatch(Stream(TABLE).take()) == {"batchItemFailures": []}

    # Then the callback notice and the webhook delivery it queued are under the tenant's group too
    deliveries = queued_with_groups(aws["callbacks"])
    assert len(deliveries) == 2
    assert {group_of(m) for m in deliveries} == {tenant}


def test_an_outbox_message_whose_item_is_gone_is_done_with(services, aws):
    message = {"v": 1, "pk": "T#tn0#R#no-such-run-000000", "sk": "E#0000000001", "seq": "1"}
    record = sqs_pump.to_event_record(
        {"MessageId": "m-1", "ReceiptHandle": "r-1", "Body": json.dumps(message), "Attributes": {}}, "arn"
    )
    assert lambda_runtime.invoke("dispatch", {"Records": [record]}) == {"batchItemFailures": []}


# --- the local pump's fair receive -------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def message(tenant: str | None, n: int) -> dict:
    attributes = {"MessageGroupId": tenant} if tenant else {}
    return {"MessageId": f"{tenant}-{n}", "Attributes": attributes, "Body": "{}"}


def test_a_tenant_over_a_tenth_of_the_processing_time_is_served_after_quiet_ones():
    clock = Clock()
    fair = FairQueue(clock)
    busy = [message("busy", n) for n in range(5)]
    # Before anyone has used the consumers, oldest first
    visible = [*busy, message("quiet", 0)]
    assert fair.choose(visible, 2) == busy[:2]
    # Once the busy tenant holds more than 10 % of the recent processing time (and the quiet one under it)
    fair.taken(busy[:2])
    fair.settled(busy[:2], 9.5)
    fair.taken([visible[-1]])
    fair.settled([visible[-1]], 0.5)
    assert fair.noisy("busy")
    assert not fair.noisy("quiet")
    # Then a quiet tenant's message goes before the busy one's older backlog
    later = [*busy[2:], message("quiet", 1)]
    assert fair.choose(later, 2) == [later[-1], later[0]]
    # And once its share has left the recent window, the busy tenant is served in order again
    clock.now += FairQueue.WINDOW_S + 1
    assert not fair.noisy("busy")
    assert fair.choose(later, 1) == [later[0]]


def test_among_noisy_tenants_the_one_with_fewest_messages_in_flight_goes_first():
    fair = FairQueue(Clock())
    first, second = [message("a", n) for n in range(40)], [message("b", n) for n in range(3)]
    fair.taken(first[:35])  # 35 of a's in flight: over 10 % of them and at least 30
    fair.taken(second[:1])
    assert fair.noisy("a")
    fair.settled(second[:1], 1.0)  # b has all the recent processing time: noisy too
    assert fair.noisy("b")
    assert fair.choose([*first[35:], *second[1:]], 1) == [second[1]]


def test_a_message_without_a_group_is_a_tenant_of_its_own():
    fair = FairQueue(Clock())
    lone = [message(None, 1), message(None, 2)]
    fair.taken(lone[:1])
    fair.settled(lone[:1], 5.0)
    assert fair.noisy(FairQueue.tenant(lone[0]))
    assert not fair.noisy(FairQueue.tenant(lone[1]))


def test_the_pump_interleaves_a_quiet_tenants_messages_into_a_busy_tenants_backlog(aws, monkeypatch):
    # Given a queue holding a busy tenant's backlog, then two messages of a quiet tenant
    url = aws["callbacks"]
    sqs = boto3.client("sqs")
    for n in range(12):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"tenant": "busy", "n": n}), MessageGroupId="busy")
    for n in range(2):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"tenant": "quiet", "n": n}), MessageGroupId="quiet")
    served: list[str] = []
    clock = Clock()

    def handler(name: str, event: dict) -> dict:
        # Each batch takes a second of the (simulated) consumer
        clock.now += 1.0
        served.extend(json.loads(r["body"])["tenant"] for r in event["Records"])
        return {"batchItemFailures": []}

    monkeypatch.setattr(sqs_pump, "invoke", handler)
    pump = QueuePump("callbacks", url, batch_size=2, clock=clock)

    # When the pump serves it to the end
    while pump.pump_once():
        pass

    # Then the first batch is the oldest (nobody has used the consumer yet), and the quiet tenant's messages come
    # next, before the rest of the busy tenant's backlog
    assert served[:4] == ["busy", "busy", "quiet", "quiet"]
    assert served.count("busy") == 12
    assert queued(url) == []
