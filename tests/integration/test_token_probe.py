"""A hostile pass over the credentials Interlude issues and checks, as an attacker who holds one API key of a tenant
(of any scope), has seen a decision link, reads a tenant's callback traffic and replays what they capture: the real
api handler behind an HTTP server on loopback, the real callbacks handler on moto's SQS, real clients.

Probed here: a gate's token against the next gate of its run and the same gate of a fork; every alteration of a
token (truncated, padded, re-cased, re-encoded, spliced with another token's payload or MAC), each refused alike and
telling nothing; an expired token's bare 410; another tenant's key on a run's token and link routes, answered as a
run that does not exist is; a token whose minting key was revoked; what a request failing inside the handler logs and
answers (never a key's secret or a token); a Slack click forged with another tenant's signing secret. Defects found
(ADR 0185): an Idempotency-Key replayed by another key of the tenant was answered the first key's credential (a
key's secret, a token deciding as another key); a callbacks message failing on its last receive reached the dead
letters with its decision link; `POST /keys` and `POST /tasks:claim` answered their credential without
`Cache-Control: no-store`; and the page of a link whose minting key was revoked still offered its decision form.

Probed elsewhere and not repeated: tampered tokens, kid rotation and retirement, inspect intents, eligibility
through a minter (tests/e2e/test_tokens_http.py, tests/unit/test_tokens.py); a key lacking each route's scope,
unknown and malformed keys (tests/e2e/test_api_errors.py); revocation's cache bound (tests/e2e/test_keys_and_limits.py);
suspended tenants on every route (test_tenant_lifecycle.py); console sessions after revocation, sign-out and tampering
(tests/e2e/test_console_http.py); Slack signatures out of their window or over another body
(test_slack_interactivity.py); webhook signatures through a rotation, verified with `standardwebhooks`
(test_webhooks.py, test_callbacks.py)."""

from __future__ import annotations

import base64
import io
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
import requests

from interlude import sdk_clients, wiring
from interlude.api import http
from interlude.composition import Services
from interlude.domain import clock
from interlude.domain.ids import mint_opaque, tenant_bound, tenant_of
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from tests.integration import test_slack_interactivity as slack_tests
from tests.integration.conftest import new_api_key, signed_in
from tests.integration.test_dispatch_batch import gate_runs
from tests.integration.test_slack_interactivity import asked, click, person, votes, with_signing_secret
from tests.integration.test_tasks import started as task_run
from tests.integration.test_tasks import task_workflow
from tests.support.local_stack import wire
from tests.support.moto_world import TABLE
from tests.support.queues import mapped_until_gone
from tests.support.stream import Stream, dispatch_runs

# Two approvals in a row, the second reached only when the first is accepted.
TWO_GATES = {
    "nodes": [
        {"id": "draft", "typeId": "core.approvalGate", "config": {"title": "Draft fine?"}},
        {"id": "publish", "typeId": "core.approvalGate", "config": {"title": "Publish?"}},
    ],
    "edges": [{"sourceNodeId": "draft", "targetNodeId": "publish"}],
}


class Caller:
    """One API key of a tenant, calling the api handler over HTTP."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.key = key

    def call(self, method: str, path: str, body: Any = None, **headers: str) -> requests.Response:
        sent = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json", **headers}
        data = None if body is None else json.dumps(body)
        return requests.request(method, self.base_url + path, data=data, headers=sent, timeout=30)


def caller(services: Services, gateway: str, subject: str = "admin", tenant: str | None = None, scopes=None) -> Caller:
    extra = {} if scopes is None else {"scopes": scopes}
    return Caller(gateway, new_api_key(services, subject, tenant, **extra))


@pytest.fixture
def admin_caller(services: Services, gateway: str) -> Caller:
    services.workflows.put_workflow(signed_in(services), "two-gates", WorkflowDefinition.model_validate(TWO_GATES))
    return caller(services, gateway)


def started(who: Caller) -> str:
    got = who.call("POST", "/runs", {"workflowId": "two-gates"})
    assert got.status_code == 201, got.text
    return got.json()["runId"]


def token_body(token: str) -> dict[str, Any]:
    payload = token.split(".")[3]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


# -- interrupt tokens: what one names, and nothing else -------------------------------------------------------------


def post_token(base_url: str, token: str, body: Any) -> requests.Response:
    return requests.post(f"{base_url}/interrupts/{token}", json=body, timeout=30)


def minted(who: Caller, run_id: str, node: str) -> str:
    got = who.call("POST", f"/runs/{wire(run_id)}/interrupts/{node}/tokens", {"intent": "resolve"})
    assert got.status_code == 201, got.text
    return got.json()["token"]


def run_of(who: Caller, run_id: str) -> dict[str, Any]:
    got = who.call("GET", f"/runs/{wire(run_id)}")
    assert got.status_code == 200, got.text
    return got.json()


ACCEPT = {"resumeValue": {"action": "accept"}}


def test_a_gates_token_never_decides_the_gate_its_run_reaches_next(gateway, admin_caller):
    # Given a run whose first gate was decided through its token, waiting now at the second
    run_id = started(admin_caller)
    first = minted(admin_caller, run_id, "draft")
    assert post_token(gateway, first, ACCEPT).status_code == 200
    assert run_of(admin_caller, run_id)["currentNodeId"] == "publish"

    # When the first gate's token is sent again
    again = post_token(gateway, first, ACCEPT)

    # Then it is refused as naming a gate no longer open, and the second gate still waits
    assert (again.status_code, again.json()["error"]) == (409, "interrupt_already_resolved")
    assert run_of(admin_caller, run_id)["status"] == "waiting-approval"
    assert run_of(admin_caller, run_id)["currentNodeId"] == "publish"


def test_a_token_of_a_runs_gate_never_decides_the_same_gate_of_its_fork(gateway, admin_caller):
    # Given a run waiting at its first gate, a token for that gate, and a replay fork waiting at the same gate
    source = started(admin_caller)
    token = minted(admin_caller, source, "draft")
    forked = admin_caller.call("POST", f"/runs/{wire(source)}:fork", {"fromSeq": 0, "mode": "replay"})
    assert forked.status_code == 201, forked.text
    fork = forked.json()["runId"]
    assert run_of(admin_caller, fork)["currentNodeId"] == "draft"

    # When the source's token decides
    assert post_token(gateway, token, ACCEPT).status_code == 200

    # Then the source moved on and the fork still waits at its own gate
    assert run_of(admin_caller, source)["currentNodeId"] == "publish"
    assert run_of(admin_caller, fork)["currentNodeId"] == "draft"
    assert run_of(admin_caller, fork)["status"] == "waiting-approval"


def re_encodings(token: str, other: str) -> dict[str, str]:
    """Every way a captured token might be altered to reach something it does not name (`other`: a token of another
    gate, of the same kid)."""
    prefix, alg, kid, payload, mac = token.split(".")
    other_payload, other_mac = other.split(".")[3:]
    # Standard base64's '+' where base64url has '-' or '_' ('/' would be another path: a damaged link's 404).
    signed = f"{payload}.{mac}"
    url_only = next((c for c in signed if c in "-_"), None)
    standard = f"{prefix}.{alg}.{kid}." + (signed.replace(url_only, "+", 1) if url_only else signed + "+")
    return {
        "truncated": token[:-1],
        "padded": token + "=",
        "payload padded": ".".join([prefix, alg, kid, payload + "=", mac]),
        "upper-case prefix": ".".join([prefix.upper(), alg.upper(), kid, payload, mac]),
        "swapped case": token.swapcase(),
        "standard base64": standard,
        "a trailing dot": token + ".",
        "no kid": ".".join([prefix, alg, payload, mac]),
        "another kid": ".".join([prefix, alg, kid + "x", payload, mac]),
        "the other token's mac": ".".join([prefix, alg, kid, payload, other_mac]),
        "the other token's payload": ".".join([prefix, alg, kid, other_payload, mac]),
        "a percent-encoded dot": token.replace(".", "%252E", 1),
        "a space": token[:10] + " " + token[10:],
    }


def test_every_alteration_of_a_token_is_refused_alike_saying_nothing_of_what_it_names(gateway, admin_caller):
    # Given tokens for two gates of two runs, the second of another run
    run_id, other_run = started(admin_caller), started(admin_caller)
    token, other = minted(admin_caller, run_id, "draft"), minted(admin_caller, other_run, "draft")

    for how, altered in re_encodings(token, other).items():
        # When an altered token is read or sent to decide
        read = requests.get(f"{gateway}/interrupts/{altered}", timeout=30)
        sent = post_token(gateway, altered, ACCEPT)

        # Then each is the same refusal, naming no run, gate or reason, and nothing was decided
        for got in (read, sent):
            body = got.json()
            assert (got.status_code, body["error"]) == (401, "interrupt_token_invalid"), (how, got.text)
            assert body == {"error": "interrupt_token_invalid", "message": "interrupt token not accepted"}, how
    assert run_of(admin_caller, run_id)["currentNodeId"] == "draft"
    assert run_of(admin_caller, other_run)["currentNodeId"] == "draft"


def test_a_token_past_its_expiry_is_410_and_tells_a_client_nothing_of_the_run(gateway, admin_caller, clock_file):
    # Given a token minted to live a minute
    run_id = started(admin_caller)
    got = admin_caller.call("POST", f"/runs/{wire(run_id)}/interrupts/draft/tokens", {"intent": "resolve", "lifetimeSeconds": 60})
    token = got.json()["token"]

    # When it is used after its minute
    clock.advance(clock_file, 61)
    read, sent = requests.get(f"{gateway}/interrupts/{token}", timeout=30), post_token(gateway, token, ACCEPT)

    # Then both are 410 with the bare envelope, and the gate still waits
    for answer in (read, sent):
        assert answer.status_code == 410
        assert answer.json() == {"error": "interrupt_expired", "message": "interrupt token expired"}
    assert run_of(admin_caller, run_id)["currentNodeId"] == "draft"


def test_another_tenants_key_mints_nothing_for_a_run_and_learns_nothing_of_it(services, gateway, admin_caller, other_tenant):
    # Given a run of this tenant waiting at a gate, and a key of another tenant holding every scope
    run_id = started(admin_caller)
    outsider = caller(services, gateway, tenant=other_tenant)

    made_up = tenant_bound(tenant_of(run_id), mint_opaque())

    for method, path, body in [
        ("GET", "/runs/{}/interrupts/draft", None),
        ("POST", "/runs/{}/interrupts/draft/tokens", {"intent": "resolve"}),
        ("POST", "/runs/{}/interrupts/draft/links", {"principal": "admin"}),
        ("POST", "/runs/{}/interrupts/draft", ACCEPT),
    ]:
        # When it asks for a token, a link, or decides through the run's own route
        got = outsider.call(method, path.format(wire(run_id)), body)

        # Then it is refused as another tenant's id, and the answer holds nothing of the gate
        assert (got.status_code, got.json()["error"]) == (403, "id_tenant_mismatch"), (path, got.text)
        assert "Draft fine?" not in got.text
        assert "token" not in got.json()
        # And it is the answer a run id of that tenant that names no run gets: nothing tells whether the run exists
        assert outsider.call(method, path.format(wire(made_up)), body).json() == got.json()
    assert run_of(admin_caller, run_id)["currentNodeId"] == "draft"


def test_a_token_whose_minting_key_was_revoked_decides_nothing(services, gateway, admin_caller):
    # Given a token minted by a key that is then revoked
    run_id = started(admin_caller)
    minter = caller(services, gateway, subject="leaver", scopes=["approvals:respond", "runs:read"])
    token = minted(minter, run_id, "draft")
    minter_id = minter.key.split("_")[1]
    assert admin_caller.call("DELETE", f"/keys/{minter_id}").status_code == 200

    # When it is sent to decide
    got = post_token(gateway, token, ACCEPT)

    # Then it is refused as a token no longer standing, and the gate still waits
    assert (got.status_code, got.json()["error"]) == (401, "interrupt_token_invalid")
    assert run_of(admin_caller, run_id)["currentNodeId"] == "draft"
    # And its page shows the request to a browser without a form the decision would be refused from
    page = requests.get(f"{gateway}/interrupts/{token}", headers={"Accept": "text/html"}, timeout=30)
    assert page.status_code == 200
    assert "Draft fine?" in page.text
    assert "<form" not in page.text
    assert 'name="csrf"' not in page.text


# -- where credentials could leak: a failing request's log and answer -----------------------------------------------


def test_a_request_failing_inside_the_handler_logs_and_answers_neither_its_key_nor_its_token(
    services, gateway, admin_caller, monkeypatch
):
    # Given a token, and the table failing every call from now on (a request is answered 5xx)
    run_id = started(admin_caller)
    token = minted(admin_caller, run_id, "draft")

    def failing(**_: Any) -> None:
        raise RuntimeError("the table is unreachable")

    # On the session every client is made from, taken up by the clients of the instances started from now on.
    events = sdk_clients.session().get_component("event_emitter")
    events.register("before-call.dynamodb", failing)
    lambda_runtime.fresh_instances()
    try:
        with captured_api_log() as lines:
            answers = [
                post_token(gateway, token, ACCEPT),
                requests.get(f"{gateway}/interrupts/{token}", headers={"Accept": "text/html"}, timeout=30),
                admin_caller.call("POST", f"/runs/{wire(run_id)}/interrupts/draft/tokens", {"intent": "resolve"}),
                admin_caller.call("POST", "/keys", {"subjectId": "ci", "scopes": ["runs:read"]}),
            ]
    finally:
        events.unregister("before-call.dynamodb", failing)
        lambda_runtime.fresh_instances()

    # Then every request failed as the server's fault, and was logged at ERROR
    assert all(a.status_code >= 500 for a in answers), [a.status_code for a in answers]
    assert any(line.get("level") == "ERROR" for line in lines)
    # And no log line and no answer holds the key's secret, the token or any of its parts
    secret = admin_caller.key.split("_", 2)[2]  # il_{keyId}_{secret}: the secret may hold "_" itself
    logged = json.dumps(lines) + "".join(a.text for a in answers)
    for held in (secret, token, *token.split(".")[3:]):
        assert held not in logged


@contextmanager
def captured_api_log() -> Iterator[list[dict[str, Any]]]:
    """The JSON lines the api function's Powertools Logger writes inside the block, parsed."""
    stream = io.StringIO()
    previous = http.logger.registered_handler.setStream(stream)
    lines: list[dict[str, Any]] = []
    try:
        yield lines
    finally:
        http.logger.registered_handler.setStream(previous)
        lines.extend(json.loads(line) for line in stream.getvalue().splitlines() if line.strip())


# -- Slack: a tenant's own signing secret speaks for that tenant's runs alone ---------------------------------------


slack = slack_tests.slack  # the fixture standing in for slack.com


def test_a_click_signed_with_another_tenants_slack_secret_decides_nothing_here(services, world, slack):
    # Given a run of this tenant asking Ana in Slack
    _, run_id, message = asked(services, world, slack)
    hits = len(slack.hits)
    # And an attacker administering another tenant: its own signing secret set, Ana's Slack user mapped in its directory
    attacker = world.other_tenant
    person(services, attacker, "ana", displayName="Ana", slackUserId="U0ANA")
    attacker_secret = with_signing_secret(attacker)

    # When the attacker forges Ana's click on this run's message, signed for their own tenant
    status, answer = click(message, "U0ANA", "interlude-approve", slack.url("/actions/1"), attacker_secret, attacker)

    # Then Slack is told the request is no one's to decide there, and this run is untouched
    assert status == 200
    assert answer.get("response_type") == "ephemeral"
    state, _ = services.store.get_run(run_id)
    assert state.status == "waiting-approval"
    assert votes(services, run_id) == []
    assert len(slack.hits) == hits + 1  # the ephemeral reply to the attacker's own response_url, nothing else


# -- Idempotency-Key: a credential answered to the key that asked for it alone --------------------------------------


def test_a_token_minted_for_one_key_is_never_replayed_to_another_key_of_the_tenant(services, gateway, admin_caller):
    # Given a run waiting at a gate, and a token minted for key A under an Idempotency-Key
    run_id = started(admin_caller)
    idempotency = {"Idempotency-Key": f"mint-{uuid.uuid4().hex}"}
    path = f"/runs/{wire(run_id)}/interrupts/draft/tokens"
    minted_for_a = admin_caller.call("POST", path, {"intent": "resolve"}, **idempotency)
    assert minted_for_a.status_code == 201, minted_for_a.text

    # When another key of the tenant (another person, allowed to respond) sends the very same request
    other = caller(services, gateway, subject="mallory", scopes=["approvals:respond", "runs:read"])
    got = other.call("POST", path, {"intent": "resolve"}, **idempotency)

    # Then it is never handed A's token (which would decide as A): it is a request of its own, a token acting for it
    assert got.status_code == 201, got.text
    assert got.headers.get("OpenWOP-Idempotent-Replay") is None
    assert token_body(got.json()["token"])["k"] == other.key.split("_")[1]
    # And A sending its request again is answered as the first time
    again = admin_caller.call("POST", path, {"intent": "resolve"}, **idempotency)
    assert again.headers.get("OpenWOP-Idempotent-Replay") == "true"
    assert again.json()["token"] == minted_for_a.json()["token"]


def test_a_created_api_key_is_never_replayed_to_another_key_of_the_tenant(services, gateway, admin_caller):
    # Given a key created by one administrator under an Idempotency-Key
    idempotency = {"Idempotency-Key": f"key-{uuid.uuid4().hex}"}
    request = {"subjectId": "ci", "scopes": ["runs:read"]}
    created = admin_caller.call("POST", "/keys", request, **idempotency)
    assert created.status_code == 201, created.text

    # When another administrator of the tenant sends the same request with the same Idempotency-Key
    other = caller(services, gateway, subject="other-admin", scopes=["keys:admin", "runs:read"])
    got = other.call("POST", "/keys", request, **idempotency)

    # Then it is never shown the first key's secret: it creates a key of its own
    assert got.status_code == 201, got.text
    assert got.headers.get("OpenWOP-Idempotent-Replay") is None
    assert created.json()["apiKey"] not in got.text
    assert got.json()["keyId"] != created.json()["keyId"]
    # And the first administrator sending its request again is answered as the first time
    again = admin_caller.call("POST", "/keys", request, **idempotency)
    assert (again.headers.get("OpenWOP-Idempotent-Replay"), again.json()) == ("true", created.json())


def test_a_credential_kept_for_its_retry_is_kept_encrypted_under_the_key_that_asked(services, gateway, admin_caller):
    # Given a key created and a token minted, each under an Idempotency-Key (one committed with its effect, one claimed)
    created_key = {"Idempotency-Key": f"key-{uuid.uuid4().hex}"}
    request = {"subjectId": "ci-kept", "scopes": ["runs:read"]}
    created = admin_caller.call("POST", "/keys", request, **created_key)
    assert created.status_code == 201, created.text
    run_id = started(admin_caller)
    minted_key = {"Idempotency-Key": f"mint-{uuid.uuid4().hex}"}
    path = f"/runs/{wire(run_id)}/interrupts/draft/tokens"
    minted_token = admin_caller.call("POST", path, {"intent": "resolve"}, **minted_key)
    assert minted_token.status_code == 201, minted_token.text

    # Then what the table keeps for their retries holds neither credential (nor its secret part)
    # (read raw, page after page: the shared table holds every other test's items, some in a format no release reads)
    pages = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=TABLE)
    records = [i for page in pages for i in page["Items"] if "#IDEM#" in i["pk"]["S"]]
    assert {r["pk"]["S"].split("#IDEM#")[1].split("#")[0] for r in records} >= {"createKey", "mintInterruptToken"}
    kept = json.dumps(records, default=repr)
    secret = created.json()["apiKey"]
    token = minted_token.json()["token"]
    assert secret.split("_", 2)[2] not in kept  # il_{keyId}_{secret}: the secret may hold "_" itself
    assert token.split(".")[-1] not in kept
    # And each retry sent with the asking key is answered exactly as the first time
    again = admin_caller.call("POST", "/keys", request, **created_key)
    assert (again.headers.get("OpenWOP-Idempotent-Replay"), again.json()) == ("true", created.json())
    again = admin_caller.call("POST", path, {"intent": "resolve"}, **minted_key)
    assert (again.headers.get("OpenWOP-Idempotent-Replay"), again.json()) == ("true", minted_token.json())


# -- an answer carrying a credential is kept by no cache -----------------------------------------------------------


def test_every_answer_carrying_a_credential_is_kept_by_no_cache(services, gateway, admin_caller, admin):
    # Given a key created, a token minted and a task claimed, each answered with its credential
    created = admin_caller.call("POST", "/keys", {"subjectId": "ci", "scopes": ["runs:read"]})
    run_id = started(admin_caller)
    token = admin_caller.call("POST", f"/runs/{wire(run_id)}/interrupts/draft/tokens", {"intent": "resolve"})
    task_run(services, admin, task_workflow())
    Stream(TABLE).settle()
    worker = caller(services, gateway, subject="worker", scopes=["tasks:work"])
    claimed = worker.call("POST", "/tasks:claim", {"queues": ["summarise"], "waitSeconds": 0})
    assert [a.status_code for a in (created, token, claimed)] == [201, 201, 200]

    # Then no cache between the caller and the API may keep any of them
    for answer in (created, token, claimed):
        assert answer.headers.get("Cache-Control") == "no-store", answer.request.url


# -- dead letters keep no decision link -----------------------------------------------------------------------------

LOOPBACK_RECEIVER = "http://127.0.0.1:9/hook"
PUBLIC_BASE_URL = "https://interlude.example.com"


def dead_letters(queue_url: str) -> list[str]:
    sqs = boto3.client("sqs")
    bodies = []
    while got := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", []):
        bodies += [m["Body"] for m in got]
    return bodies


def test_a_callback_message_that_never_finds_time_for_its_dial_leaves_no_decision_link_in_the_dead_letters(
    services, admin, world, monkeypatch
):
    # Given a run whose gate's callback notice, decision link and all, is queued for the callbacks worker
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    monkeypatch.setenv("PUBLIC_BASE_URL", PUBLIC_BASE_URL)
    (run_id,) = gate_runs(services, admin, 1, resolved=False, callback_url=LOOPBACK_RECEIVER)
    dispatch_runs(TABLE, run_id)
    # And invocations that never have time left for a dial (each receive answers "not now", no attempt counted)
    monkeypatch.setattr(lambda_runtime.LambdaContext, "get_remaining_time_in_millis", lambda self: 1_000)

    # When SQS hands the message out as many times as the queue allows
    handed = mapped_until_gone(world.queues["callbacks"], "callbacks")

    # Then it was handed out with its link every time, as many times as the queue allows, and never delivered
    assert len(handed) == wiring.queue("callbacks").max_receive_count
    link = json.loads(handed[0])["notice"]["token"]
    # And the dead letters name the notice, so an operator finds it, but keep no decision link
    kept = [b for b in dead_letters(world.queues["callbacks-dlq"]) if run_id in b]
    assert len(kept) == 1
    assert json.loads(kept[0]).get("noticeId", json.loads(kept[0]).get("notice", {}).get("id"))
    assert link not in kept[0]
    assert "/interrupts/" not in kept[0]

