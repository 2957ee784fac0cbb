"""Replay what failed (issue 30 item 5) in-process: moto (DynamoDB, streams, SQS, Secrets Manager), the real dispatch
outbox and callbacks worker, a receiver on 127.0.0.1; the bounds a replay keeps (how often one unit is sent again,
how many one recovery sends) and a recovery cut off half-way, taken over once it has gone quiet."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import boto3
import pytest

from interlude.adapters.leased_work import RetryLater
from interlude.adapters.notify.messages import RAISED, queue_message
from interlude.adapters.replay_outbox import ReplayOutbox
from interlude.app import replay as replay_module
from interlude.composition import Services
from interlude.domain.errors import Conflict, Invalid, NotFound
from interlude.domain.ids import to_wire
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.webhooks import RegisterWebhookRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.migrations import sweeps
from interlude.store.deliveries import DeliveryStore, Notice
from interlude.store.facade import Store
from interlude.store.recoveries import STALE_S
from tests.integration import test_notify_worker as notify
from tests.integration.conftest import new_api_key, signed_in
from tests.integration.test_tenant_lifecycle import call
from tests.support.local_stack import FIXTURES
from tests.support.queues import drain, mapped, mapped_until_gone, queued
from tests.support.receiver import Receiver, delivering_to_loopback
from tests.support.stream import Stream

MAX_ATTEMPTS = 2


class Clock:
    """The time, moved on by `ahead` (the workers date dead letters by the real time)."""

    ahead = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.ahead


@pytest.fixture
def aws(world, monkeypatch):
    env = {
        "PUBLIC_BASE_URL": "https://interlude.example.com",
        **delivering_to_loopback(MAX_ATTEMPTS),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return world


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def services(aws, clock) -> Services:
    return Services(Store(aws.table, aws.entries_table), clock=clock)


def deliver(aws) -> None:
    Stream(aws.table).pump()
    drain(aws.queues)


def subscription_with_dead_letters(services, admin, aws, receiver, runs: int) -> str:
    """A subscription whose endpoint was down for every attempt of `runs` runs' deliveries."""
    receiver.script[:] = [500] * (MAX_ATTEMPTS * runs)
    made = services.webhooks.register(
        admin, RegisterWebhookRequest.model_validate({"url": receiver.url(), "events": ["interrupt.requested"]})
    )
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    for _ in range(runs):
        services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"]}))
    deliver(aws)
    assert len(dead_letters(services, admin, made["webhookId"])) == runs
    return made["webhookId"]


def dead_letters(services, admin, webhook_id: str) -> list[dict]:
    return services.webhooks.dead_letters(admin, webhook_id, 100, None)["deliveries"]


def test_a_reopened_delivery_gets_a_round_of_attempts_and_is_replayed_at_most_max_replays_times(
    services, admin, aws, receiver, monkeypatch
):
    monkeypatch.setattr(replay_module, "MAX_REPLAYS", 1)
    replay = services.replay
    webhook_id = subscription_with_dead_letters(services, admin, aws, receiver, 1)
    (dead,) = dead_letters(services, admin, webhook_id)

    # When it is replayed while the endpoint is still down
    receiver.script[:] = [500] * MAX_ATTEMPTS
    assert replay.retry_webhook_delivery(admin, webhook_id, dead["deliveryId"])["attempt"] == MAX_ATTEMPTS + 1
    deliver(aws)

    # Then it had a whole round of attempts of its own, then came back to the dead letters, newly dated
    assert len(receiver.hits) == 2 * MAX_ATTEMPTS
    assert len({h.headers["webhook-id"] for h in receiver.hits}) == 1
    (again,) = dead_letters(services, admin, webhook_id)
    assert (again["deliveryId"], again["attempts"]) == (dead["deliveryId"], 2 * MAX_ATTEMPTS)
    # And past MAX_REPLAYS it is refused, nothing queued
    with pytest.raises(Conflict) as refused:
        replay.retry_webhook_delivery(admin, webhook_id, dead["deliveryId"])
    assert refused.value.code == "interlude.replay_limit_reached"
    assert queued(aws.queues["callbacks"]) == []


def test_a_webhook_delivery_dead_lettered_on_its_last_receive_is_listed_with_the_subscription_and_replayed(
    services, admin, aws, receiver, monkeypatch
):
    # Given a subscription's delivery that failed once at its endpoint
    receiver.script[:] = [500]
    made = services.webhooks.register(
        admin, RegisterWebhookRequest.model_validate({"url": receiver.url(), "events": ["interrupt.requested"]})
    )
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"]}))
    Stream(aws.table).pump()
    mapped(aws.queues["callbacks"], "callbacks", 1)
    # And invocations that never again have time left for its dial
    with monkeypatch.context() as hurried:
        hurried.setattr(lambda_runtime.LambdaContext, "get_remaining_time_in_millis", lambda self: 1_000)

        # When SQS hands its message out as many times as the queue allows
        mapped_until_gone(aws.queues["callbacks"], "callbacks")

    # Then the subscription's dead letters list it, with its one attempt and the endpoint's last answer
    (dead,) = dead_letters(services, admin, made["webhookId"])
    assert (dead["attempts"], dead["reason"], dead["lastStatus"]) == (1, "retries_exhausted", 500)
    # And sent again, it is delivered under the same id
    assert services.replay.retry_webhook_delivery(admin, made["webhookId"], dead["deliveryId"])["attempt"] == 2
    deliver(aws)
    assert [h.headers["webhook-id"] for h in receiver.hits] == [receiver.hits[0].headers["webhook-id"]] * 2
    assert dead_letters(services, admin, made["webhookId"]) == []


def test_a_recovery_past_its_limit_is_refused_before_anything_is_sent(services, admin, aws, receiver, monkeypatch):
    monkeypatch.setattr(replay_module, "MAX_RECOVERY", 1)
    webhook_id = subscription_with_dead_letters(services, admin, aws, receiver, 2)
    since = services.clock() - timedelta(hours=1)

    with pytest.raises(Invalid) as refused:
        services.replay.recover_webhook(admin, webhook_id, since, None)

    assert (refused.value.code, refused.value.details) == ("interlude.recovery_too_large", {"limit": 1})
    assert queued(aws.queues["callbacks"]) == []
    assert len(dead_letters(services, admin, webhook_id)) == 2


class FailingOutbox(ReplayOutbox):
    """Queues the first message, then the queue refuses (as SQS might)."""

    sent = 0

    def send(self, queue, tenant, messages):
        if self.sent:
            raise RuntimeError("the queue refused")
        self.sent += 1
        super().send(queue, tenant, messages)


def test_a_recovery_cut_off_is_refused_while_it_may_run_then_taken_over_sending_only_what_is_still_dead(
    services, admin, aws, receiver, clock, monkeypatch
):
    monkeypatch.setattr(replay_module, "TURN", 1)
    webhook_id = subscription_with_dead_letters(services, admin, aws, receiver, 2)
    since = clock() - timedelta(hours=1)

    # Given a recovery whose queue refused its second message: the request fails, that dead letter stays dead
    with pytest.raises(RuntimeError):
        replace(services.replay, outbox=FailingOutbox(services.store, services.clock)).recover_webhook(admin, webhook_id, since, None)
    assert len(dead_letters(services, admin, webhook_id)) == 1
    replay = services.replay
    # and its progress route says so: running, one of the two queued again
    key = new_api_key(services)
    progress = call("GET", f"/webhooks/{to_wire(webhook_id)}/recovery", key)
    assert progress.status == 200, progress.text
    assert {k: progress.json()[k] for k in ("status", "matched", "queued", "skipped")} == {
        "status": "running",
        "matched": 2,
        "queued": 1,
        "skipped": 0,
    }
    # Then another recovery of the subscription is refused while the first may still be running
    with pytest.raises(Conflict) as refused:
        replay.recover_webhook(admin, webhook_id, since, None)
    assert refused.value.code == "interlude.recovery_running"

    # When it has gone quiet, a new recovery takes over and sends only what is still dead
    clock.ahead = timedelta(seconds=STALE_S + 1)
    recovered = replay.recover_webhook(admin, webhook_id, since, None)
    assert (recovered["status"], recovered["matched"], recovered["queued"]) == ("completed", 1, 1)
    done = call("GET", f"/webhooks/{to_wire(webhook_id)}/recovery", key).json()
    assert (done["status"], done["queued"], done["finishedAt"]) == ("completed", 1, recovered["finishedAt"])
    deliver(aws)
    # Then each delivery arrived once more, under its own id
    replayed = [h.headers["webhook-id"] for h in receiver.hits[2 * MAX_ATTEMPTS :]]
    assert sorted(replayed) == sorted({h.headers["webhook-id"] for h in receiver.hits[: 2 * MAX_ATTEMPTS]})
    assert dead_letters(services, admin, webhook_id) == []


def test_a_dead_notification_retried_sends_again_only_the_channel_that_failed(world, tenant):
    # Given a notification whose Slack post failed every attempt (its mail went out), so it was dead-lettered
    services = Services(Store(world.table, world.entries_table))
    slack = Receiver(script=[500, 500]).start()
    try:
        run_id, node, interrupt = notify.open_gate(services)
        entry = PrincipalEntry(email="ann@example.com", slackUserId="U0ANN1234")
        services.directory.put_principal(tenant, "ann", entry, "admin")
        boto3.client("secretsmanager").create_secret(
            Name=f"interlude/slack/{tenant}", SecretString=json.dumps({"webhookUrl": slack.url("/hook")})
        )
        worker = notify.worker_for(services, world.queues)
        message = queue_message(tenant, run_id, node, interrupt, "ann", RAISED)
        with pytest.raises(RetryLater):
            worker.handle(notify.delivered(world.queues, message))
        assert worker.handle(notify.delivered(world.queues, message)) == "dead"
        mails = len(notify.sent_mail())

        # When it is retried once Slack is back
        admin = signed_in(services, "admin")
        retried = services.replay.retry_notification(admin, run_id, message["id"])

        # Then its message is queued again, the same notification; the worker sends Slack alone, once
        assert (retried["notificationId"], retried["attempt"], retried["replay"]) == (message["id"], 3, 1)
        # (the queue also still holds the copy the first failed attempt hid: the ledger makes it a duplicate)
        copies = queued(world.queues["notifications"])
        assert {json.loads(m["Body"])["id"] for m in copies} == {message["id"]}
        handled = [worker.handle({"body": m["Body"], "receiptHandle": m["ReceiptHandle"]}) for m in copies]
        assert sorted(handled) == ["duplicate"] * (len(copies) - 1) + ["sent"]
        assert len(slack.hits) == 3
        assert len(notify.sent_mail()) == mails
        # And a second retry is refused: it was sent
        with pytest.raises(Conflict) as refused:
            services.replay.retry_notification(admin, run_id, message["id"])
        assert refused.value.code == "interlude.not_dead_lettered"
    finally:
        slack.close()


def test_a_dead_notice_whose_event_is_not_in_the_log_is_not_found_never_a_server_error(services, admin, aws):
    # Given a dead callback notice as the release before replays wrote it (no sequence kept), naming no event of its run
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"]})).runId
    ledger = DeliveryStore(services.store)
    ref = Notice(run_id, "ntc_" + "x" * 20, "interrupt.requested")
    claim = ledger.claim(ref, 0, 60)
    assert ledger.settle(ref, claim.attempt, ledger.DEAD, {"attempt": 1, "status": "failed"}, 0)

    # When it is retried, it is not found (it cannot be made again), and it stays dead
    with pytest.raises(NotFound) as refused:
        services.replay.retry_run_delivery(admin, run_id, ref.notice_id)
    assert "no longer in its run's log" in refused.value.message
    assert ledger.read(ref)["status"] == "dead"


def test_the_progress_of_a_recovery_never_started_or_of_another_tenants_subscription_is_refused(
    services, admin, aws, receiver, other_tenant
):
    made = services.webhooks.register(
        admin, RegisterWebhookRequest.model_validate({"url": receiver.url(), "events": ["run.completed"]})
    )
    path = f"/webhooks/{to_wire(made['webhookId'])}/recovery"
    never = call("GET", path, new_api_key(services))
    assert (never.status, never.code) == (404, "not_found")
    foreign = call("GET", path, new_api_key(services, tenant=other_tenant))
    assert (foreign.status, foreign.code) == (403, "id_tenant_mismatch")
    assert call("GET", "/webhooks/not-an-id/recovery", new_api_key(services)).code == "validation_error"
    assert call("GET", path, new_api_key(services, scopes=["runs:read"])).status == 403


class Crash(BaseException):
    """The replaying process stops (no handler runs: not an Exception)."""


class CrashingOutbox(ReplayOutbox):
    def send(self, queue, tenant, messages):
        raise Crash


# A world of its own: the daily sweep reads every item of the table, in the shared world every item each earlier test
# of the process wrote (and would queue another test's stopped replay).
@pytest.mark.private_world
def test_a_replay_that_stopped_between_its_reopen_and_its_send_is_queued_by_the_daily_sweep(
    services, admin, aws, receiver, clock
):
    webhook_id = subscription_with_dead_letters(services, admin, aws, receiver, 1)
    (dead,) = dead_letters(services, admin, webhook_id)
    # Given a replay whose process stopped after reopening the delivery and before queueing its message
    with pytest.raises(Crash):
        replace(services.replay, outbox=CrashingOutbox(services.store, services.clock)).retry_webhook_delivery(
            admin, webhook_id, dead["deliveryId"]
        )
    assert queued(aws.queues["callbacks"]) == []
    assert dead_letters(services, admin, webhook_id) == []
    # When the daily sweep runs within a quarter of an hour of it, the replay may still be sending: it is left
    assert sweeps.sweep(services.store, "sweep", start=True, clock=clock)
    assert queued(aws.queues["callbacks"]) == []
    # and when it runs later
    clock.ahead = timedelta(seconds=sweeps.STUCK_AFTER_S + 60)
    assert sweeps.sweep(services.store, "sweep", start=True, clock=clock)
    deliver(aws)
    # Then the delivery was sent again once, under its own id, and took
    (hit,) = receiver.hits[MAX_ATTEMPTS:]
    assert hit.headers["webhook-id"] == receiver.hits[0].headers["webhook-id"]
    assert dead_letters(services, admin, webhook_id) == []
