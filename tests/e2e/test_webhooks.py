"""Webhook subscriptions (issue 14, item 5) over HTTP against the real local stack, driven by openwop-client's
`webhooks_*` calls, with subscribers on 127.0.0.1 (the stack's development-only loopback switch is on) that verify
each delivery as the client library's verifier does."""

from __future__ import annotations

import json

import pytest
import requests
from openwop_client import OpenwopClient, WopError
from openwop_client.types import RegisterWebhookRequest, RotateWebhookSecretRequest
from openwop_client.webhook_helpers import verify_webhook_signature
from standardwebhooks import Webhook

from interlude import wiring
from interlude.domain import schemas
from interlude.local.stack import TABLE_NAME
from tests.support.local_stack import Api, running_stack, stack_client, tenant_admin_key, until
from tests.support.receiver import delivering_to_loopback

WORKFLOW = {
    "nodes": [
        {
            "id": "review",
            "typeId": "core.approvalGate",
            "config": {"title": "Publish?", "actions": ["accept", "reject"]},
        },
    ],
    "edges": [],
}
NEW_SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    env = delivering_to_loopback(2)
    with running_stack(tmp_path_factory.mktemp("webhooks"), env) as info:
        api = Api.of(info)
        assert api.put_workflow("wh", WORKFLOW).status_code == 201
        yield api, info


def client(api: Api, key: str | None = None) -> OpenwopClient:
    return OpenwopClient(api.base_url, key or api.api_key)


def test_discovery_advertises_webhooks_with_their_facets(stack):
    api, _ = stack
    webhooks = requests.get(api.base_url + "/.well-known/openwop", timeout=30).json()["webhooks"]
    assert webhooks["signatureAlgorithms"] == ["v1"]
    assert webhooks["retryPolicy"] == {"maxAttempts": 2, "backoff": "exponential"}
    assert webhooks["deadLetter"] == {"retentionDays": 14, "maxPageSize": 100}
    assert webhooks["secretRotation"] == {"overlapSeconds": 86400}


def test_a_subscriber_verifies_a_delivery_in_its_documented_shape(stack, receiver):
    api, _ = stack
    owc = client(api)
    # Given a subscription registered with openwop-client
    made = owc.webhooks_register(RegisterWebhookRequest(url=receiver.url("/wop"), events=["interrupt.requested"]))
    assert made.subscriptionId.startswith(f"{api.tenant}/")
    assert made.eventTypes == ["interrupt.requested"]
    assert made.url == receiver.url("/wop")

    # When a run (with no callbackUrl) reaches its gate
    run_id = api.start("wh")["runId"]

    # Then the subscriber receives the event, signed (OpenWOP v1, checked by openwop-client's verifier)
    (hit,) = receiver.wait_for(1, timeout_s=60)
    outcome = verify_webhook_signature(
        made.secret,
        hit.headers["openwop-signature"],
        hit.headers["openwop-timestamp"],
        hit.body,
        algorithm_header=hit.headers["openwop-signature-algorithm"],
    )
    assert outcome.valid
    assert hit.headers["openwop-webhook-id"] == made.subscriptionId
    assert hit.headers["openwop-event-type"] == "interrupt.requested"
    # And the body is webhook-delivery.schema.json's, its event the one the run's log holds
    body = json.loads(hit.body)
    assert schemas.errors_of(schemas.validator("webhook-delivery.schema.json"), body) == []
    assert body["runId"] == run_id
    (logged,) = [e for e in api.events(run_id) if e["type"] == "interrupt.requested"]
    assert body["event"] == logged
    owc.webhooks_unregister(made.subscriptionId)


def test_rotation_dead_letters_and_unregistering(stack, receiver):
    api, _ = stack
    owc = client(api)
    receiver.script[:] = [500, 500]
    made = owc.webhooks_register(RegisterWebhookRequest(url=receiver.url(), events=["interrupt.requested"]))
    # When the secret is rotated to the caller's own
    rotated = owc.webhooks_rotate_secret(made.subscriptionId, RotateWebhookSecretRequest(secret=NEW_SECRET))
    assert rotated.previousSecretExpiresAt > rotated.rotatedAt
    # And a delivery fails every attempt
    run_id = api.start("wh")["runId"]
    page = until(lambda: owc.webhooks_dead_letters(made.subscriptionId).deliveries, timeout_s=60)

    # Then both attempts (inside the overlap) verify for a subscriber that keeps the old secret until
    # previousSecretExpiresAt (v1 stays on it) and for one that switched at once (Standard Webhooks, multi-entry)
    assert len(receiver.hits) == 2
    for hit in receiver.hits:
        assert verify_webhook_signature(made.secret, hit.headers["openwop-signature"], hit.headers["openwop-timestamp"], hit.body).valid
        assert Webhook(made.secret).verify(hit.body, hit.headers)
        assert Webhook(NEW_SECRET).verify(hit.body, hit.headers)
    # And the secret cannot be rotated again until the previous one expires
    refused = refusal(
        api.call("POST", f"/webhooks/{made.subscriptionId.replace('/', '~2F')}/rotate-secret", {}), 409, "interlude.rotation_in_overlap"
    )
    assert refused["details"] == {"previousSecretExpiresAt": rotated.previousSecretExpiresAt}
    (record,) = page
    assert (record.runId, record.webhookId, record.reason, record.attempts, record.lastStatus) == (
        run_id,
        made.subscriptionId,
        "retries_exhausted",
        2,
        500,
    )
    raw = api.call("GET", f"/webhooks/{made.subscriptionId.replace('/', '~2F')}/dead-letters").text
    assert schemas.errors_of(schemas.validator("webhook-dead-letter-page.schema.json"), json.loads(raw)) == []
    for leaked in (NEW_SECRET, made.secret, "sha256=", '"event"'):
        assert leaked not in raw

    # When it is unregistered, it is gone
    owc.webhooks_unregister(made.subscriptionId)
    with pytest.raises(WopError) as gone:
        owc.webhooks_unregister(made.subscriptionId)
    assert (gone.value.status, gone.value.envelope.error) == (404, "not_found")


# --- refusals over HTTP ---------------------------------------------------------------------------


def refusal(response: requests.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code
    assert schemas.errors_of(schemas.validator("error-envelope.schema.json"), body) == []
    return body


@pytest.mark.parametrize("url", ["https://10.0.0.1/hook", "ftp://8.8.8.8/hook", "https://169.254.169.254/latest"])
def test_registration_refuses_a_url_the_egress_guard_refuses(stack, url):
    api, _ = stack
    body = refusal(api.call("POST", "/webhooks", {"url": url, "events": ["run.completed"]}), 400, "webhook_url_rejected")
    assert body["details"]["field"] == "url"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": "https://8.8.8.8/", "events": []}, "events"),
        ({"url": "https://8.8.8.8/", "events": ["Not An Event"]}, "events[0]"),
        ({"url": "https://8.8.8.8/", "events": ["run.completed"], "secret": "short"}, "secret"),
        ({"url": "https://8.8.8.8/", "events": ["run.completed"], "signatureAlgorithms": ["standard-webhooks-1"]}, "signatureAlgorithms[0]"),
        ({"url": "https://8.8.8.8/", "events": ["run.completed"], "signatureAlgorithms": []}, "signatureAlgorithms"),
        ({"url": "https://8.8.8.8/", "events": ["interrupt.resolve"]}, "events[0]"),
        ({"url": "https://8.8.8.8/", "events": ["acme.invoice-paid"]}, "events[0]"),
    ],
)
def test_registration_validates_its_body(stack, body, field):
    api, _ = stack
    refused = refusal(api.call("POST", "/webhooks", body), 400, "validation_error")
    assert field in json.dumps(refused["details"])


def test_signature_algorithms_naming_v1_are_accepted_and_echoed(stack, receiver):
    api, _ = stack
    answer = api.call("POST", "/webhooks", {"url": receiver.url(), "events": ["run.completed"], "signatureAlgorithms": ["v1"]})
    assert answer.status_code == 201, answer.text
    assert answer.json()["signatureAlgorithms"] == ["v1"]
    client(api).webhooks_unregister(answer.json()["subscriptionId"])


def test_openwop_client_is_told_which_event_type_names_are_refused(stack, receiver):
    api, _ = stack
    with pytest.raises(WopError) as refused:
        client(api).webhooks_register(RegisterWebhookRequest(url=receiver.url(), events=["run.completed", "interrupt.resolve"]))
    assert (refused.value.status, refused.value.envelope.error) == (400, "validation_error")
    assert "interrupt.resolve" in refused.value.envelope.message
    assert refused.value.envelope.details["field"] == "events[1]"


def test_another_tenants_subscription_is_refused_and_an_unknown_one_is_not_found(stack, receiver):
    api, info = stack
    made = client(api).webhooks_register(RegisterWebhookRequest(url=receiver.url(), events=["run.completed"]))
    wire = made.subscriptionId.replace("/", "~2F")
    other = tenant_admin_key(info, "other-tenant")
    refusal(api.call("DELETE", f"/webhooks/{wire}", key=other), 403, "id_tenant_mismatch")
    refusal(api.call("GET", f"/webhooks/{wire}/dead-letters", key=other), 403, "id_tenant_mismatch")
    refusal(api.call("POST", f"/webhooks/{wire}/rotate-secret", {}, key=other), 403, "id_tenant_mismatch")
    unknown = f"{api.tenant}~2F" + "no-such-subscription-0"
    refusal(api.call("GET", f"/webhooks/{unknown}/dead-letters"), 404, "not_found")
    refusal(api.call("GET", f"/webhooks/{wire}/dead-letters?cursor=bm90LWEtY3Vyc29y"), 400, "validation_error")
    refusal(api.call("GET", f"/webhooks/{wire}/dead-letters?limit=0"), 400, "validation_error")
    refusal(api.call("DELETE", "/webhooks/not-a-bound-id"), 400, "validation_error")
    client(api).webhooks_unregister(made.subscriptionId)


def test_the_routes_need_the_webhooks_scope(stack):
    api, _ = stack
    key = api.new_key([s for s in wiring.ALL_SCOPES if s != "webhooks:manage"])
    refusal(api.call("POST", "/webhooks", {"url": "https://8.8.8.8/", "events": ["run.completed"]}, key=key), 403, "forbidden")


def test_a_tenant_over_its_subscription_limit_is_refused(stack, receiver):
    api, info = stack
    key = tenant_admin_key(info, "limited-tenant")
    owc = client(api, key)
    from interlude.domain.models.webhooks import MAX_WEBHOOKS_PER_TENANT

    for _ in range(MAX_WEBHOOKS_PER_TENANT):
        owc.webhooks_register(RegisterWebhookRequest(url=receiver.url(), events=["run.completed"]))
    body = refusal(
        api.call("POST", "/webhooks", {"url": receiver.url(), "events": ["run.completed"]}, key=key),
        403,
        "interlude.quota_exceeded",
    )
    assert body["details"] == {"quota": "webhooks", "limit": MAX_WEBHOOKS_PER_TENANT}


# --- Idempotency-Key and the dead-letter listing's edges (issue 26, row 16) -------------------------------


def test_a_registration_replayed_under_its_idempotency_key_is_one_subscription(stack, receiver):
    api, info = stack
    owc = client(api, tenant_admin_key(info, "idempotent-tenant"))
    body = RegisterWebhookRequest(url=receiver.url(), events=["run.completed"])
    # When the same registration is sent twice under one key
    first = owc.webhooks_register(body, idempotency_key="register-once-0000000000000001")
    second = owc.webhooks_register(body, idempotency_key="register-once-0000000000000001")
    # Then the second is the first's answer (its secret too), and one subscription exists
    assert (second.subscriptionId, second.secret) == (first.subscriptionId, first.secret)
    stored = stack_client(info, "dynamodb").query(
        TableName=TABLE_NAME,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :wh)",
        ExpressionAttributeValues={":pk": {"S": "T#idempotent-tenant"}, ":wh": {"S": "WH#"}},
    )["Items"]
    assert len(stored) == 1
    # And the key with another body is refused, registering nothing
    other = RegisterWebhookRequest(url=receiver.url(), events=["run.failed"])
    with pytest.raises(WopError) as refused:
        owc.webhooks_register(other, idempotency_key="register-once-0000000000000001")
    assert (refused.value.status, refused.value.envelope.error) == (409, "idempotency_key_mismatch")
    owc.webhooks_unregister(first.subscriptionId)


def seed_dead_letters(info: dict, webhook_id: str, count: int) -> None:
    """`count` dead letters of the subscription, written straight into the stack's table (as the worker writes them)."""
    from interlude.store.webhooks import WebhookStore

    store = WebhookStore(TABLE_NAME, stack_client(info, "dynamodb"))
    tenant = webhook_id.split("/", 1)[0]
    for n in range(count):
        at = f"2026-12-01T00:{n // 60:02d}:{n % 60:02d}.000Z"
        store.put_dead_letter(
            {
                "deliveryId": f"{tenant}/whd_seeded{n:012d}",
                "webhookId": webhook_id,
                "runId": f"{tenant}/seeded-run-{n:08d}",
                "eventId": f"evt_seeded_{n:010d}",
                "eventType": "run.completed",
                "attempts": 2,
                "deadLetteredAt": at,
                "expiresAt": "2099-01-01T00:00:00.000Z",
                "reason": "retries_exhausted",
                "lastStatus": 500,
            }
        )


def test_the_dead_letter_listing_at_its_edges(stack, receiver):
    api, info = stack
    owc = client(api)
    made = owc.webhooks_register(RegisterWebhookRequest(url=receiver.url(), events=["run.completed"]))
    path = f"/webhooks/{made.subscriptionId.replace('/', '~2F')}/dead-letters"
    # An empty sink: no records, no nextCursor
    empty = owc.webhooks_dead_letters(made.subscriptionId)
    assert (empty.deliveries, empty.nextCursor) == ([], None)

    # A limit over maxPageSize is clamped to it (never more rows), and the pages reach the end without a cursor past it
    seed_dead_letters(info, made.subscriptionId, 101)
    page = api.call("GET", f"{path}?limit=1000").json()
    assert len(page["deliveries"]) == 100
    rest = owc.webhooks_dead_letters(made.subscriptionId, limit=100, cursor=page["nextCursor"])
    assert len(rest.deliveries) == 1
    assert rest.nextCursor is None
    seen = [d["deliveryId"] for d in page["deliveries"]] + [d.deliveryId for d in rest.deliveries]
    assert len(set(seen)) == 101
    assert seen[0].endswith("000000000100")  # newest first
    # limit=1 walks one record a page, the last one with no nextCursor
    walked, cursor = [], None
    for _ in range(3):
        one = owc.webhooks_dead_letters(made.subscriptionId, limit=1, cursor=cursor)
        walked += one.deliveries
        cursor = one.nextCursor
    assert [d.deliveryId for d in walked] == seen[:3]

    # Limits out of range and cursors this listing did not issue are 400, naming the parameter
    for query, field in (
        ("limit=0", "limit"),
        ("limit=-1", "limit"),
        ("limit=abc", "limit"),
        ("limit=10000000000", "limit"),
        ("cursor=bm90LWEtY3Vyc29y", "cursor"),
        ("cursor=%25%25%25", "cursor"),
    ):
        assert refusal(api.call("GET", f"{path}?{query}"), 400, "validation_error")["details"]["field"] == field
    owc.webhooks_unregister(made.subscriptionId)
