"""Webhook subscriptions (issue 14, item 5) in-process: moto (DynamoDB, streams, SQS, Secrets Manager), the real
dispatch outbox and callbacks worker, and a receiver on 127.0.0.1 that verifies what it gets the way a subscriber
would (openwop-client's v1 verifier, and the `standardwebhooks` package)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import boto3
import pytest
from openwop_client.webhook_helpers import verify_webhook_signature
from pydantic import ValidationError
from standardwebhooks import Webhook

from interlude.adapters.delivery.subscriptions import SubscriptionSecretCache, webhook_message
from interlude.composition import Services
from interlude.domain import schemas
from interlude.domain.clock import iso_epoch
from interlude.domain.errors import Conflict, Forbidden, Invalid, NotFound
from interlude.domain.models.requests import CreateRunRequest, ForkRunRequest
from interlude.domain.models.webhooks import (
    MAX_WEBHOOKS_PER_TENANT,
    ROTATION_OVERLAP_SECONDS,
    RegisterWebhookRequest,
    RotateWebhookSecretRequest,
)
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.deadlines import ESCALATION_EVENT
from interlude.engine.effect_names import ACTION_REQUESTED, CHILD_REQUESTED
from interlude.engine.run import VOTE_DELEGATED
from interlude.store.deliveries import DeliveryStore
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.support.egress import fake_resolve
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.queues import drain, queued
from tests.support.receiver import delivering_to_loopback
from tests.support.stream import Stream

MAX_ATTEMPTS = 3


@pytest.fixture
def aws(world, monkeypatch):
    env = {
        "PUBLIC_BASE_URL": "https://interlude.example.com",
        **delivering_to_loopback(MAX_ATTEMPTS),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return world.queues


@pytest.fixture
def services(aws) -> Services:
    return Services(Store(TABLE, ENTRIES_TABLE))



def start_gate_run(services, principal, **body) -> str:
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(principal, definition["id"], WorkflowDefinition.model_validate(definition))
    request = CreateRunRequest.model_validate({"workflowId": definition["id"], **body})
    return services.lifecycle.create_run(principal, request).runId


def register(services, principal, url: str, events: list[str], **extra) -> dict:
    request = RegisterWebhookRequest.model_validate({"url": url, "events": events, **extra})
    return services.webhooks.register(principal, request)


def v1_valid(secret: str, hit) -> bool:
    outcome = verify_webhook_signature(
        secret,
        hit.headers["openwop-signature"],
        hit.headers["openwop-timestamp"],
        hit.body,
        algorithm_header=hit.headers["openwop-signature-algorithm"],
    )
    return outcome.valid


def deliver(aws) -> None:
    Stream(TABLE).pump()
    drain(aws)


# --- delivery -------------------------------------------------------------------------------------


def test_one_subscription_serves_every_run_of_the_tenant_signed_and_in_the_documented_shape(
    services, admin, aws, receiver, tenant
):
    # Given a subscription to interrupt.requested, registered once for the tenant
    made = register(services, admin, receiver.url("/subscriber"), ["interrupt.requested"])
    assert made["webhookId"] == made["subscriptionId"]
    assert made["webhookId"].startswith(f"{tenant}/")
    assert made["secret"].startswith("whsec_")

    # When two runs (neither names a callbackUrl) reach their gates
    runs = [start_gate_run(services, admin), start_gate_run(services, admin)]
    deliver(aws)

    # Then the receiver got one delivery per run: only the subscribed type, each verifiable
    assert len(receiver.hits) == 2
    bodies = [json.loads(hit.body) for hit in receiver.hits]
    assert sorted(b["runId"] for b in bodies) == sorted(runs)
    for hit, body in zip(receiver.hits, bodies, strict=True):
        assert hit.path == "/subscriber"
        assert v1_valid(made["secret"], hit)
        # Standard Webhooks headers too, over the same bytes
        assert Webhook(made["secret"]).verify(hit.body, hit.headers) == body
        assert hit.headers["openwop-webhook-id"] == made["webhookId"]
        assert hit.headers["openwop-event-type"] == "interrupt.requested"
        assert hit.headers["openwop-signature-algorithm"] == "v1"
        # And the body is webhook-delivery.schema.json's: the run id tenant-bound, the event as persisted
        assert schemas.errors_of(schemas.validator("webhook-delivery.schema.json"), body) == []
        assert set(body) == {"runId", "event"}
        (persisted,) = [e for e in services.store.read_events(body["runId"]) if e["type"] == "interrupt.requested"]
        assert body["event"] == persisted


def test_a_subscription_receives_only_its_own_tenants_runs(services, admin, aws, receiver, tenant):
    # Given two tenants, each with a subscription to the same event type (and tenants whose ids differ by '~' / '_')
    other = signed_in(services, tenant=f"{tenant}~b")
    ours = register(services, admin, receiver.url("/t1"), ["interrupt.requested"])
    theirs = register(services, other, receiver.url("/t1~b"), ["interrupt.requested"])
    # When each tenant's runs reach their gates
    our_runs = {start_gate_run(services, admin), start_gate_run(services, admin)}
    their_runs = {start_gate_run(services, other)}
    deliver(aws)

    # Then each subscription got its own tenant's runs alone, each signed with its own secret
    got = {(hit.path, json.loads(hit.body)["runId"]) for hit in receiver.hits}
    assert got == {("/t1", r) for r in our_runs} | {("/t1~b", r) for r in their_runs}
    for hit in receiver.hits:
        mine = ours if hit.path == "/t1" else theirs
        assert hit.headers["openwop-webhook-id"] == mine["webhookId"]
        assert v1_valid(mine["secret"], hit)
        assert not v1_valid((theirs if mine is ours else ours)["secret"], hit)


def test_the_event_filter_and_the_tag_filter(services, admin, aws, receiver):
    # Given one subscription to run ends only, and one to interrupt.requested of runs tagged "finance"
    ends = register(services, admin, receiver.url("/ends"), ["run.completed", "run.failed"])
    tagged = register(services, admin, receiver.url("/finance"), ["interrupt.requested"], tags=["finance"])
    assert tagged["tags"] == ["finance"]

    # When an untagged run and a finance run reach their gates, and the finance one completes
    start_gate_run(services, admin)
    finance = start_gate_run(services, admin, tags=["finance", "q3"])
    deliver(aws)
    services.decisions.resolve_interrupt(admin, finance, "gate", {"action": "accept"})
    deliver(aws)

    # Then the tag subscription got the finance run's interrupt alone, and the other its completion alone
    got = [(hit.path, json.loads(hit.body)) for hit in receiver.hits]
    assert [(path, b["runId"], b["event"]["type"]) for path, b in got] == [
        ("/finance", finance, "interrupt.requested"),
        ("/ends", finance, "run.completed"),
    ]
    assert v1_valid(tagged["secret"], receiver.hits[0])
    assert v1_valid(ends["secret"], receiver.hits[1])


def test_a_replay_forks_events_are_never_delivered_a_branchs_are(services, admin, aws, receiver):
    # Given a subscription, and a run whose gate was accepted: it completed, and both its events were delivered
    register(services, admin, receiver.url("/subscriber"), ["interrupt.requested", "run.completed"])
    source = start_gate_run(services, admin)
    services.decisions.resolve_interrupt(admin, source, "gate", {"action": "accept"})
    deliver(aws)
    assert len(receiver.hits) == 2

    # When it is replayed (its history run again: it completes at once) and branched at its start (asked again)
    replay = services.forks.fork_run(admin, source, ForkRunRequest(mode="replay")).state
    branch = services.forks.fork_run(admin, source, ForkRunRequest(mode="branch", fromSeq=0)).state
    deliver(aws)

    # Then the replay's events reach no subscriber (webhooks.md: a replay fork's history is not delivered again);
    # the branch's new gate does
    assert replay.status == "completed"
    got = [(json.loads(hit.body)["runId"], hit.headers["openwop-event-type"]) for hit in receiver.hits[2:]]
    assert got == [(branch.runId, "interrupt.requested")]


def test_retries_then_a_content_free_dead_letter_readable_per_subscription(services, admin, aws, receiver, tenant):
    # Given a subscriber that fails every attempt
    receiver.script[:] = [500, 503, 500]
    made = register(services, admin, receiver.url("/hook?subscriber-secret=s3cr3t"), ["interrupt.requested"])
    run_id = start_gate_run(services, admin)

    # When the delivery is queued and the queue is played until it is empty
    deliver(aws)

    # Then it was attempted MAX_ATTEMPTS times, one delivery id throughout
    assert len(receiver.hits) == MAX_ATTEMPTS
    assert len({h.headers["webhook-id"] for h in receiver.hits}) == 1
    # And the subscription's dead-letter page names it, without body, headers or secret
    page = services.webhooks.dead_letters(admin, made["webhookId"], 100, None)
    assert schemas.errors_of(schemas.validator("webhook-dead-letter-page.schema.json"), page) == []
    (record,) = page["deliveries"]
    event = json.loads(receiver.hits[0].body)["event"]
    assert record["webhookId"] == made["webhookId"]
    assert record["runId"] == run_id
    assert (record["eventId"], record["eventType"]) == (event["eventId"], "interrupt.requested")
    assert record["deliveryId"] == f"{tenant}/{receiver.hits[0].headers['webhook-id']}"
    assert (record["attempts"], record["reason"], record["lastStatus"]) == (MAX_ATTEMPTS, "retries_exhausted", 500)
    assert record["expiresAt"] > record["deadLetteredAt"]
    raw = json.dumps(page)
    for leaked in (made["secret"], "s3cr3t", '"payload"', "/hook", "sha256="):
        assert leaked not in raw
    # And the operators' queue has it too (content-free), the callback queue nothing
    (dead,) = queued(aws["callbacks-dlq"])
    assert json.loads(dead["Body"])["deliveryId"] == record["deliveryId"]
    assert made["secret"] not in dead["Body"]
    assert queued(aws["callbacks"]) == []


def test_a_delivery_whose_event_is_not_in_the_log_is_dead_lettered_on_its_first_attempt(services, admin, aws, receiver):
    # Given a queued delivery naming an event its run never had
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    run_id = start_gate_run(services, admin)
    Stream(TABLE).pump()
    drain(aws)
    ghost = {"sequence": 999, "eventId": "evt_ghost_0000000000", "type": "interrupt.requested"}
    boto3.client("sqs").send_message(
        QueueUrl=aws["callbacks"], MessageBody=json.dumps(webhook_message(made["webhookId"], run_id, ghost))
    )

    # When the worker takes it
    drain(aws)

    # Then nothing is sent and it is dead at once: payload_unprojectable, one attempt, no status
    assert len(receiver.hits) == 1  # the real event's delivery only
    (record,) = services.webhooks.dead_letters(admin, made["webhookId"], 100, None)["deliveries"]
    assert (record["reason"], record["attempts"], record["eventId"]) == ("payload_unprojectable", 1, ghost["eventId"])
    assert "lastStatus" not in record


def test_unregistered_subscriptions_receive_nothing_more_and_their_secret_is_gone(services, admin, aws, receiver):
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    # Given a delivery already queued for it
    start_gate_run(services, admin)
    Stream(TABLE).pump()

    # When it is unregistered before the worker runs
    services.webhooks.unregister(admin, made["webhookId"])
    drain(aws)
    start_gate_run(services, admin)
    deliver(aws)

    # Then nothing was delivered, and the secret no longer exists
    assert receiver.hits == []
    assert services.webhook_secrets.read(services.webhook_secrets.name(made["webhookId"])) is None
    with pytest.raises(NotFound):
        services.webhooks.unregister(admin, made["webhookId"])


NEW_SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="


def keeper_verifies(old: str, new: str, expires_at: str, hit) -> bool:
    """A subscriber that keeps its old secret until previousSecretExpiresAt, as it is told, then takes the new one:
    OpenWOP's v1 signature (openwop-client's verifier) and Standard Webhooks' (the package), multi-entry."""
    secret = old if iso_epoch(int(hit.headers["openwop-timestamp"])) < expires_at else new
    return v1_valid(secret, hit) and Webhook(secret).verify(hit.body, hit.headers) is not None


def switcher_verifies(new: str, hit) -> bool:
    """A subscriber that switched to the new secret at once: Standard Webhooks' header carries an entry for it."""
    return Webhook(new).verify(hit.body, hit.headers) is not None


def test_through_a_rotations_overlap_both_subscribers_verify_every_delivery(services, admin, aws, receiver):
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    old = made["secret"]
    # Given a worker that has signed with the old secret (its process caches the secret it read)
    start_gate_run(services, admin)
    deliver(aws)
    assert keeper_verifies(old, NEW_SECRET, "9999-12-31T00:00:00.000Z", receiver.hits[0])

    # When the secret is rotated to one the caller chose, and deliveries follow at once (the cache still warm)
    rotated = services.webhooks.rotate(admin, made["webhookId"], RotateWebhookSecretRequest(secret=NEW_SECRET))
    assert "secret" not in rotated
    assert rotated["previousSecretExpiresAt"] > rotated["rotatedAt"]
    start_gate_run(services, admin)
    start_gate_run(services, admin)
    deliver(aws)

    # Then every delivery of the overlap verifies for the subscriber that kept the old secret (v1 stays on it)
    # and for the one that switched at once (an entry per secret in webhook-signature), and no more than two sign
    during = receiver.hits[1:]
    assert len(during) == 2
    for hit in during:
        assert keeper_verifies(old, NEW_SECRET, rotated["previousSecretExpiresAt"], hit)
        assert switcher_verifies(NEW_SECRET, hit)
        assert not v1_valid(NEW_SECRET, hit)
        assert len(hit.headers["webhook-signature"].split()) == 2


def test_after_the_overlap_only_the_new_secret_signs(services, admin, aws, receiver):
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    # Given a rotation whose overlap has ended (rotated a day and an hour ago)
    webhooks = services.webhooks
    real_clock = webhooks.clock
    webhooks.clock = lambda: real_clock() - timedelta(seconds=ROTATION_OVERLAP_SECONDS + 3600)
    rotated = webhooks.rotate(admin, made["webhookId"], RotateWebhookSecretRequest(secret=NEW_SECRET))
    webhooks.clock = real_clock
    start_gate_run(services, admin)
    deliver(aws)

    # Then both subscribers verify it, with the new secret alone
    (hit,) = receiver.hits
    assert keeper_verifies(made["secret"], NEW_SECRET, rotated["previousSecretExpiresAt"], hit)
    assert switcher_verifies(NEW_SECRET, hit)
    assert v1_valid(NEW_SECRET, hit)
    assert len(hit.headers["webhook-signature"].split()) == 1
    # And the secret can be rotated again: a generated one, shown once
    again = services.webhooks.rotate(admin, made["webhookId"], RotateWebhookSecretRequest())
    assert again["secret"].startswith("whsec_")


def test_a_rotation_inside_the_overlap_is_refused_so_two_secrets_at_most_sign(services, admin, aws, receiver):
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    rotated = services.webhooks.rotate(admin, made["webhookId"], RotateWebhookSecretRequest())
    # When it is rotated again while the previous secret still signs
    for request in (RotateWebhookSecretRequest(), RotateWebhookSecretRequest(secret=NEW_SECRET)):
        with pytest.raises(Conflict) as refused:
            services.webhooks.rotate(admin, made["webhookId"], request)
        # Then it is refused, saying when it may be rotated again
        assert refused.value.code == "interlude.rotation_in_overlap"
        assert refused.value.details == {"previousSecretExpiresAt": rotated["previousSecretExpiresAt"]}
        assert 0 < refused.value.retry_after_s <= ROTATION_OVERLAP_SECONDS
    # And the stored secret holds the current one and one previous, nothing more
    found = services.webhook_records.get(made["webhookId"])
    stored = services.webhook_secrets.read(found["secretName"], found["secretVersion"])
    assert stored["current"] == rotated["secret"]
    assert [p["secret"] for p in stored["previous"]] == [made["secret"]]


def test_rotation_refuses_the_secret_in_use_and_a_secret_not_in_standard_webhooks_form(services, admin, receiver):
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    with pytest.raises(Invalid) as refused:
        services.webhooks.rotate(admin, made["webhookId"], RotateWebhookSecretRequest(secret=made["secret"]))
    assert refused.value.details == {"field": "secret"}
    for secret in ("my-own-secret-0123456789", "whsec_" + "QUJD" * 4, "whsec_not base64 at all!!"):
        with pytest.raises(ValidationError):
            RotateWebhookSecretRequest(secret=secret)


def test_a_worker_signs_with_the_version_the_subscription_names_whatever_its_cache_holds(services, admin, aws):
    made = register(services, admin, "http://127.0.0.1:9/hook", ["interrupt.requested"])
    cache = SubscriptionSecretCache(services.webhook_secrets, max_age_s=3600)
    before = services.webhook_records.get(made["webhookId"])
    assert cache.signing(before, 0) == (made["secret"], [made["secret"]])
    rotated = services.webhooks.rotate(admin, made["webhookId"], RotateWebhookSecretRequest(secret=NEW_SECRET))
    after = services.webhook_records.get(made["webhookId"])
    assert after["secretVersion"] != before["secretVersion"]
    overlap = datetime.fromisoformat(rotated["previousSecretExpiresAt"]).timestamp()
    assert cache.signing(after, overlap - 1) == (made["secret"], [NEW_SECRET, made["secret"]])
    assert cache.signing(after, overlap) == (NEW_SECRET, [NEW_SECRET])


def test_a_caller_secret_signs_v1_alone(services, admin, aws, receiver):
    made = register(services, admin, receiver.url(), ["interrupt.requested"], secret="my-own-secret-0123456789")
    assert made["secret"] == "my-own-secret-0123456789"
    start_gate_run(services, admin)
    deliver(aws)
    (hit,) = receiver.hits
    assert v1_valid("my-own-secret-0123456789", hit)
    assert "webhook-signature" not in hit.headers


def test_the_url_is_guarded_again_at_delivery(services, admin, aws, receiver, monkeypatch):
    # Given a subscription whose host name resolves to a public address at registration
    services.callback_resolver = fake_resolve
    made = register(services, admin, "https://hooks.example.com/hook", ["interrupt.requested"])
    # When the name later resolves to a private address (the worker resolves it anew)
    monkeypatch.setattr("interlude.rules.egress.resolve_host", lambda host, port: ["10.0.0.7"])
    run_id = start_gate_run(services, admin)
    deliver(aws)

    # Then every attempt is refused by the guard, never dialled, and the delivery is dead-lettered
    attempts = [a for a in DeliveryStore(services.store).attempts(run_id) if a.get("subscriptionId")]
    assert [a["errorClass"] for a in attempts] == ["egress_denied"] * MAX_ATTEMPTS
    (record,) = services.webhooks.dead_letters(admin, made["webhookId"], 100, None)["deliveries"]
    assert record["reason"] == "retries_exhausted"
    assert "lastStatus" not in record


# --- registration and its refusals ----------------------------------------------------------------


@pytest.mark.parametrize("url", ["http://8.8.8.8/hook", "https://10.0.0.1/hook", "https://169.254.169.254/", "ftp://x/"])
def test_registration_refuses_urls_the_egress_guard_refuses(services, admin, monkeypatch, url):
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "")
    with pytest.raises(Invalid) as refused:
        register(services, admin, url, ["interrupt.requested"])
    assert refused.value.code == "webhook_url_rejected"
    assert refused.value.details["field"] == "url"


def test_registration_refuses_an_unknown_event_type_name(services, admin, receiver):
    with pytest.raises(Invalid) as refused:
        register(services, admin, receiver.url(), ["interrupt.requested", "Not An Event"])
    assert refused.value.code == "validation_error"
    assert refused.value.details["field"] == "events[1]"


def test_registration_refuses_names_of_a_registered_family_that_are_not_registered_types(services, admin, receiver):
    # A typo of a registered type (the family `interrupt.` is registered) would never match anything
    with pytest.raises(Invalid) as refused:
        register(services, admin, receiver.url(), ["run.completed", "interrupt.resolve", "run.complete"])
    assert refused.value.details["field"] == "events[1]"
    assert [e["path"] for e in refused.value.details["errors"]] == ["events[1]", "events[2]"]
    assert "'interrupt.resolve'" in refused.value.message
    assert "'run.complete'" in refused.value.message


def test_vendor_event_types_only_under_this_hosts_vendor_prefix(services, admin, receiver):
    with pytest.raises(Invalid) as refused:
        register(services, admin, receiver.url(), ["acme.invoice-paid"])
    assert refused.value.details["field"] == "events[0]"
    assert "interlude." in refused.value.message
    # The vendor events this host emits are all under its prefix, and each can be subscribed to
    emitted = [ESCALATION_EVENT, VOTE_DELEGATED, ACTION_REQUESTED, CHILD_REQUESTED]
    assert register(services, admin, receiver.url(), emitted)["eventTypes"] == emitted


def test_signature_algorithms_naming_only_advertised_schemes_are_accepted_and_echoed(services, admin, receiver):
    assert register(services, admin, receiver.url(), ["run.completed"])["signatureAlgorithms"] == ["v1"]
    made = register(services, admin, receiver.url(), ["run.completed"], signatureAlgorithms=["v1"])
    assert made["signatureAlgorithms"] == ["v1"]
    for algorithms, field in (
        (["v1", "standard-webhooks-1"], "signatureAlgorithms[1]"),  # not advertised (no endpoint verification)
        (["hs512"], "signatureAlgorithms[0]"),
    ):
        with pytest.raises(Invalid) as refused:
            register(services, admin, receiver.url(), ["run.completed"], signatureAlgorithms=algorithms)
        assert refused.value.details["field"] == field


def test_a_subscriber_answering_410_is_retried_like_any_failure(services, admin, aws, receiver):
    # Given a subscriber that answers 410 Gone once, then 200
    receiver.script[:] = [410]
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    run_id = start_gate_run(services, admin)
    deliver(aws)
    # Then the delivery was attempted again and delivered; nothing is dead-lettered
    assert len(receiver.hits) == 2
    attempts = [a for a in DeliveryStore(services.store).attempts(run_id) if a.get("subscriptionId")]
    assert [(a["status"], a.get("httpStatus")) for a in attempts] == [("failed", 410), ("succeeded", 200)]
    assert services.webhooks.dead_letters(admin, made["webhookId"], 100, None)["deliveries"] == []

    # And one that answers 410 every time is dead-lettered only when its attempts run out, as retries_exhausted
    receiver.script[:] = [410] * MAX_ATTEMPTS
    start_gate_run(services, admin)
    deliver(aws)
    (record,) = services.webhooks.dead_letters(admin, made["webhookId"], 100, None)["deliveries"]
    assert (record["attempts"], record["reason"], record["lastStatus"]) == (MAX_ATTEMPTS, "retries_exhausted", 410)


# A world of its own: it counts every secret of the account.
@pytest.mark.private_world
def test_a_tenant_holds_at_most_the_limit_and_unregistering_frees_a_place(services, admin, receiver):
    made = [register(services, admin, receiver.url(), ["run.completed"]) for _ in range(MAX_WEBHOOKS_PER_TENANT)]
    with pytest.raises(Forbidden) as refused:
        register(services, admin, receiver.url(), ["run.completed"])
    assert refused.value.code == "interlude.quota_exceeded"
    assert refused.value.details["quota"] == "webhooks"
    # The refused registration left no secret behind
    secrets = boto3.client("secretsmanager").list_secrets(MaxResults=100)["SecretList"]
    assert len([s for s in secrets if "subscriptions" in s["Name"]]) == MAX_WEBHOOKS_PER_TENANT
    services.webhooks.unregister(admin, made[0]["webhookId"])
    register(services, admin, receiver.url(), ["run.completed"])


def test_another_tenants_subscription_is_refused_before_lookup(services, admin, receiver, tenant, other_tenant):
    made = register(services, admin, receiver.url(), ["run.completed"])
    other = signed_in(services, tenant=other_tenant)
    for call in (
        lambda: services.webhooks.unregister(other, made["webhookId"]),
        lambda: services.webhooks.dead_letters(other, made["webhookId"], 10, None),
        lambda: services.webhooks.rotate(other, made["webhookId"], RotateWebhookSecretRequest()),
    ):
        with pytest.raises(Forbidden) as refused:
            call()
        assert refused.value.code == "id_tenant_mismatch"
    with pytest.raises(NotFound):
        services.webhooks.dead_letters(admin, f"{tenant}/unknown-subscription-0", 10, None)


def test_a_dead_letter_cursor_of_another_subscription_is_refused(services, admin, aws, receiver):
    receiver.script[:] = [500] * (2 * MAX_ATTEMPTS)
    made = register(services, admin, receiver.url(), ["interrupt.requested"])
    other = register(services, admin, receiver.url(), ["run.completed"])
    start_gate_run(services, admin)
    start_gate_run(services, admin)
    deliver(aws)
    # Pages of one: newest first, the cursor leads to the older one
    first = services.webhooks.dead_letters(admin, made["webhookId"], 1, None)
    second = services.webhooks.dead_letters(admin, made["webhookId"], 1, first["nextCursor"])
    assert first["deliveries"][0]["deadLetteredAt"] >= second["deliveries"][0]["deadLetteredAt"]
    assert first["deliveries"][0]["runId"] != second["deliveries"][0]["runId"]
    with pytest.raises(Invalid) as refused:
        services.webhooks.dead_letters(admin, other["webhookId"], 1, first["nextCursor"])
    assert refused.value.details == {"field": "cursor"}
