"""Idempotency-Key through the real `api` handler in-process, against moto's DynamoDB: faults, in-flight
claims, leases and the record itself."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError

from interlude import wiring
from interlude.api import http
from interlude.api import idempotency as api_idem
from interlude.composition import Services
from interlude.domain import formats
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.store.facade import Store
from interlude.store.idempotency import RETENTION_SECONDS, CachedResponse, Claim, Existing, IdempotencyStore
from interlude.store.layout import INTERRUPT_SK_PREFIX, run_id_of
from interlude.wiring import EVENT_ITEM_PREFIX
from tests.integration.conftest import new_api_key
from tests.support.local_stack import wire
from tests.support.moto_world import ENTRIES_TABLE, TABLE

REPLAY = "OpenWOP-Idempotent-Replay"
APPROVAL = {
    "nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", "actions": ["accept"]}}],
    "edges": [],
}


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """What the api function logs, formatted as it would reach CloudWatch."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(http.logger.registered_formatter)
    std = logging.getLogger(http.logger.service)
    std.addHandler(handler)
    yield stream
    std.removeHandler(handler)


@pytest.fixture
def api_key(world) -> str:
    return new_api_key(Services(Store(TABLE, ENTRIES_TABLE)))


def call(method: str, path: str, api_key: str, body: Any = None, key: str | None = None) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {api_key}", "content-type": "application/json", "host": "127.0.0.1"}
    if key is not None:
        headers["idempotency-key"] = key
    raw = b"" if body is None else json.dumps(body).encode()
    return lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))


def waiting_run(api_key: str) -> str:
    assert call("PUT", "/workflows/ship", api_key, APPROVAL)["statusCode"] == 201
    created = call("POST", "/runs", api_key, {"workflowId": "ship"})
    assert created["statusCode"] == 201, created
    return json.loads(created["body"])["runId"]


def resolve(run_id: str, api_key: str, key: str) -> dict[str, Any]:
    return call("POST", f"/runs/{wire(run_id)}/interrupts/gate", api_key, RESUME, key)


RESUME = {"resumeValue": {"action": "accept"}}


def resolved_count(run_id: str) -> int:
    return sum(e["type"] == "interrupt.resolved" for e in Store(TABLE, ENTRIES_TABLE).read_events(run_id))


def fail_once(operation: str) -> list[int]:
    """Make the handler's DynamoDB client fail the next call of `operation` with a server error (the tenant's
    request counter, counted on every authenticated request, is let through)."""
    calls: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        if "#RATE" in str(params.get("body")):
            return
        calls.append(1)
        if len(calls) == 1:
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, operation)

    http.services().store.client.meta.events.register(f"before-call.dynamodb.{operation}", hook)
    return calls


def resolve_digest(run_id: str) -> str:
    params = {"runId": wire(run_id), "nodeId": "gate"}
    return api_idem.request_digest("resolveInterruptByRun", params, json.dumps(RESUME).encode())


def test_a_5xx_is_not_replayed_and_the_retry_executes(api_key, logs):
    run_id = waiting_run(api_key)
    key = f"fault-{uuid.uuid4().hex}"
    calls = fail_once("TransactWriteItems")
    failed = resolve(run_id, api_key, key)
    assert failed["statusCode"] == 500
    assert json.loads(failed["body"])["error"] == "internal_error"
    assert resolved_count(run_id) == 0
    retried = resolve(run_id, api_key, key)
    assert retried["statusCode"] == 200, retried
    assert REPLAY not in retried["headers"]
    assert len(calls) == 2
    assert resolved_count(run_id) == 1
    replayed = resolve(run_id, api_key, key)
    assert replayed["headers"][REPLAY] == "true"
    assert replayed["body"] == retried["body"]
    assert "injected" in logs.getvalue()  # the fault was logged ...
    assert key not in logs.getvalue()  # ... without the key


def test_a_request_in_flight_answers_409_with_retry_after(api_key, tenant):
    run_id = waiting_run(api_key)
    key = f"flight-{uuid.uuid4().hex}"
    now = int(time.time() * 1000)
    claim = api_idem.records().claim(
        tenant, "resolveInterruptByRun", key, resolve_digest(run_id), now_ms=now, lease_ms=60_000
    )
    assert isinstance(claim, Claim)
    got = resolve(run_id, api_key, key)
    assert got["statusCode"] == 409
    assert got["headers"]["Retry-After"] == "1"
    body = json.loads(got["body"])
    assert body["error"] == "idempotency_in_flight"
    assert "details" not in body
    assert resolved_count(run_id) == 0
    # A different request under that key is a mismatch even while the first is in flight.
    other = call("POST", f"/runs/{wire(run_id)}/cancel", api_key, None, key)
    assert other["statusCode"] == 200  # another endpoint: another record
    mismatch = call("POST", f"/runs/{wire(run_id)}/interrupts/gate", api_key,
                    {"resumeValue": {"action": "accept", "comment": "x"}}, key)  # fmt: skip
    assert mismatch["statusCode"] == 409
    assert json.loads(mismatch["body"])["error"] == "idempotency_key_mismatch"


def test_a_claim_whose_lease_ran_out_is_taken_over(api_key, tenant):
    run_id = waiting_run(api_key)
    key = f"crash-{uuid.uuid4().hex}"
    long_ago = int(time.time() * 1000) - 120_000
    crashed = api_idem.records().claim(
        tenant, "resolveInterruptByRun", key, resolve_digest(run_id), now_ms=long_ago, lease_ms=30_000
    )
    assert isinstance(crashed, Claim)
    got = resolve(run_id, api_key, key)
    assert got["statusCode"] == 200
    assert REPLAY not in got["headers"]
    # The crashed owner can no longer overwrite or release what the new owner stored.
    assert api_idem.records().complete(crashed, CachedResponse(500, {}, "late"), now_ms=long_ago) is False
    api_idem.records().release(crashed)
    assert resolve(run_id, api_key, key)["body"] == got["body"]


def test_a_failed_completion_on_a_claimed_route_still_answers_and_keeps_the_key_in_flight(api_key, logs, tenant):
    # putWorkflow keeps claim-then-store (api/idempotency.py CLAIMED_ROUTES_WHY): its completion is an UpdateItem.
    key = f"complete-{uuid.uuid4().hex}"
    fail_once("UpdateItem")
    got = call("PUT", "/workflows/ship", api_key, APPROVAL, key)
    assert got["statusCode"] == 201  # the effect happened, so the caller hears it
    again = call("PUT", "/workflows/ship", api_key, APPROVAL, key)
    assert again["statusCode"] == 409
    assert json.loads(again["body"])["error"] == "idempotency_in_flight"
    assert Store(TABLE, ENTRIES_TABLE).latest_workflow(tenant, "ship")[0] == 1
    assert "storing the idempotent response failed" in logs.getvalue()
    assert key not in logs.getvalue()


def lose_the_answer_once(operation: str, error: Exception | None = None) -> list[int]:
    """The next `operation` of the handler's client succeeds at DynamoDB, then its answer is lost on the way back."""
    calls: list[int] = []

    def hook(**_: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise error or ClientError({"Error": {"Code": "InternalServerError", "Message": "lost"}}, operation)

    http.services().store.client.meta.events.register(f"after-call.dynamodb.{operation}", hook)
    return calls


def run_heads() -> int:
    items = boto3.client("dynamodb").scan(TableName=TABLE)["Items"]
    return sum(item["sk"]["S"] == "RUN" for item in items)


def gate_runs(prefix: str = INTERRUPT_SK_PREFIX) -> list[str | None]:
    """The runs of the table's gate items (or of the items under another sort key `prefix`), one per item."""
    items = boto3.client("dynamodb").scan(TableName=TABLE)["Items"]
    return [run_id_of(item["pk"]["S"]) for item in items if item["sk"]["S"].startswith(prefix)]


# A world of its own: it counts every run head of the table.
@pytest.mark.private_world
@pytest.mark.parametrize("error", [None, EndpointConnectionError(endpoint_url="http://127.0.0.1:1")])
def test_a_create_run_whose_answer_was_lost_is_replayed_not_run_again(api_key, error):
    # Finding 3 (issue 11): the commit happened, the answer did not reach the caller.
    assert call("PUT", "/workflows/ship", api_key, APPROVAL)["statusCode"] == 201
    key = f"lost-{uuid.uuid4().hex}"
    lose_the_answer_once("TransactWriteItems", error)
    lost = call("POST", "/runs", api_key, {"workflowId": "ship"}, key)
    assert lost["statusCode"] == 500  # the function cannot know its transaction committed
    retried = call("POST", "/runs", api_key, {"workflowId": "ship"}, key)
    assert retried["statusCode"] == 201, retried
    assert retried["headers"][REPLAY] == "true"  # the answer committed with the run, not a second run
    assert run_heads() == 1
    again = call("POST", "/runs", api_key, {"workflowId": "ship"}, key)
    assert again["body"] == retried["body"]


# A world of its own: it counts every run head of the table.
@pytest.mark.private_world
def test_a_create_run_that_died_after_its_commit_is_replayed_on_retry(api_key):
    # The function itself dies between the commit and the answer (a crash, a timeout): the caller saw a 5xx.
    assert call("PUT", "/workflows/ship", api_key, APPROVAL)["statusCode"] == 201
    key = f"died-{uuid.uuid4().hex}"
    deaths: list[int] = []

    def die(**_: Any) -> None:
        deaths.append(1)
        if len(deaths) == 1:
            raise SystemExit("the function died")

    http.services().store.client.meta.events.register("after-call.dynamodb.TransactWriteItems", die)
    with pytest.raises(SystemExit):
        call("POST", "/runs", api_key, {"workflowId": "ship"}, key)
    retried = call("POST", "/runs", api_key, {"workflowId": "ship"}, key)
    assert retried["statusCode"] == 201
    assert retried["headers"][REPLAY] == "true"
    assert run_heads() == 1
    run_id = json.loads(retried["body"])["runId"]
    assert Store(TABLE, ENTRIES_TABLE).get_run(run_id) is not None


def test_a_resolve_that_died_after_its_commit_answers_its_own_decision_on_retry(api_key):
    run_id = waiting_run(api_key)
    key = f"died-{uuid.uuid4().hex}"
    deaths: list[int] = []

    def die(**_: Any) -> None:
        deaths.append(1)
        if len(deaths) == 1:
            raise SystemExit("the function died")

    http.services().store.client.meta.events.register("after-call.dynamodb.TransactWriteItems", die)
    with pytest.raises(SystemExit):
        resolve(run_id, api_key, key)
    retried = resolve(run_id, api_key, key)
    assert retried["statusCode"] == 200, retried  # not 409 interrupt_already_resolved: its own decision won
    assert retried["headers"][REPLAY] == "true"
    assert json.loads(retried["body"])["nodeId"] == "gate"
    assert resolved_count(run_id) == 1


def test_a_resolve_whose_answer_was_lost_answers_its_own_decision_on_retry(api_key):
    run_id = waiting_run(api_key)
    key = f"lost-{uuid.uuid4().hex}"
    lose_the_answer_once("TransactWriteItems")
    assert resolve(run_id, api_key, key)["statusCode"] == 500
    retried = resolve(run_id, api_key, key)
    assert retried["statusCode"] == 200, retried  # not 409 interrupt_already_resolved: its own decision won
    assert retried["headers"][REPLAY] == "true"
    assert json.loads(retried["body"])["status"] == "completed"
    assert resolved_count(run_id) == 1


def test_the_record_layout_and_retention(api_key, tenant):
    key = f"layout-{uuid.uuid4().hex}"
    before = int(time.time())
    assert call("PUT", "/workflows/ship", api_key, APPROVAL, key)["statusCode"] == 201
    item = boto3.client("dynamodb").get_item(
        TableName=TABLE, Key={"pk": {"S": f"T#{tenant}#IDEM#putWorkflow#{key}"}, "sk": {"S": "IDEM"}}
    )["Item"]
    assert item["status"]["S"] == "COMPLETED"
    assert "leaseUntil" not in item
    assert int(item[wiring.TTL_ATTRIBUTE]["N"]) >= before + RETENTION_SECONDS
    assert RETENTION_SECONDS >= 24 * 3600
    cached = json.loads(item["response"]["S"])
    assert cached["status"] == 201


def test_an_expired_record_not_yet_swept_by_ttl_is_claimed_afresh(world, tenant):
    store = IdempotencyStore(TABLE, boto3.client("dynamodb"))
    past = int(time.time() * 1000) - (RETENTION_SECONDS + 60) * 1000
    old = store.claim(tenant, "createRun", "k" * 22, "d1", now_ms=past, lease_ms=1000)
    assert isinstance(old, Claim)
    assert store.complete(old, CachedResponse(201, {"Content-Type": "application/json"}, "{}"), now_ms=past)
    now = int(time.time() * 1000)
    assert isinstance(store.claim(tenant, "createRun", "k" * 22, "d2", now_ms=now, lease_ms=1000), Claim)
    again = store.claim(tenant, "createRun", "k" * 22, "d2", now_ms=now, lease_ms=1000)
    assert again == Existing(digest="d2", completed=None)


def test_endless_contention_is_a_retryable_503_that_is_not_replayed(api_key):
    # Given a run whose head every write finds changed (another writer always wins the condition)
    run_id = waiting_run(api_key)

    def always_lose(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "injected"},
                "CancellationReasons": [{"Code": "ConditionalCheckFailed"}],
            },
            "TransactWriteItems",
        )

    events = http.services().store.client.meta.events
    events.register("before-call.dynamodb.TransactWriteItems", always_lose)
    key = f"busy-{uuid.uuid4().hex}"
    # When a resolve keeps losing
    busy = resolve(run_id, api_key, key)
    # Then it gives up with the registered retryable code and says when to come back, and records nothing
    assert busy["statusCode"] == 503
    assert json.loads(busy["body"])["error"] == "runner_unavailable"
    assert busy["headers"]["Retry-After"] == "1"
    assert resolved_count(run_id) == 0
    # And once the contention is gone the same key executes rather than replaying the 503
    events.unregister("before-call.dynamodb.TransactWriteItems", always_lose)
    retried = resolve(run_id, api_key, key)
    assert retried["statusCode"] == 200
    assert REPLAY not in retried["headers"]
    assert resolved_count(run_id) == 1


THROTTLED_ANSWERS = {
    # A provisioned table's units spent (or an on-demand table's hot partition), as botocore parses DynamoDB's answer
    "ProvisionedThroughputExceededException": {"Error": {"Code": "ProvisionedThroughputExceededException"}},
    # A transaction one of whose items was throttled
    "a transaction's item": {
        "Error": {"Code": "TransactionCanceledException"},
        "CancellationReasons": [{"Code": "None"}, {"Code": "ThrottlingError"}, {"Code": "None"}],
    },
}


@pytest.mark.parametrize("answer", THROTTLED_ANSWERS.values(), ids=THROTTLED_ANSWERS.keys())
def test_a_write_dynamodb_throttles_is_a_retryable_503_not_a_fault(api_key, answer):
    # Given a table that throttles a resolve's transaction: DynamoDB's answer once botocore's own retries of a throttle
    # are spent (moto never throttles; the answer replaces the request, so nothing is written)
    run_id = waiting_run(api_key)

    def throttled(**_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        error = {**answer, "Error": {**answer["Error"], "Message": "Throughput exceeds the current capacity"}}
        return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None), error

    events = http.services().store.client.meta.events
    events.register("before-call.dynamodb.TransactWriteItems", throttled)
    key = f"throttled-{uuid.uuid4().hex}"
    # When the resolve is sent
    busy = resolve(run_id, api_key, key)
    # Then the caller gets the registered retryable code and when to come back, not an error of this host (a 500)
    assert busy["statusCode"] == 503, busy
    assert json.loads(busy["body"])["error"] == "runner_unavailable"
    assert busy["headers"]["Retry-After"] == "1"
    assert resolved_count(run_id) == 0
    # And once the table has room the same key executes rather than replaying the 503
    events.unregister("before-call.dynamodb.TransactWriteItems", throttled)
    retried = resolve(run_id, api_key, key)
    assert retried["statusCode"] == 200, retried
    assert REPLAY not in retried["headers"]
    assert resolved_count(run_id) == 1


def run_a_duplicate_first(duplicate: Any) -> list[dict[str, Any]]:
    """While the next request sits between its record lookup and its transaction, a duplicate runs whole."""
    answers: list[dict[str, Any]] = []
    started: list[int] = []

    def hook(**_: Any) -> None:
        if not started:
            started.append(1)
            answers.append(duplicate())

    http.services().store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", hook)
    return answers


# A world of its own: it counts every run head of the table.
@pytest.mark.private_world
@pytest.mark.parametrize("batch_before", [False, True])
def test_concurrent_duplicate_create_runs_start_one_run_and_both_answer_it(api_key, batch_before, monkeypatch):
    # With the writer of docs/adr/0165 (from 0.7.0) too: each create's event batch put with its gates.
    monkeypatch.setattr(formats, "CREATE_BATCH_PUT_BEFORE_WRITTEN", batch_before)
    assert call("PUT", "/workflows/ship", api_key, APPROVAL)["statusCode"] == 201
    key = f"dup-{uuid.uuid4().hex}"
    duplicate = run_a_duplicate_first(lambda: call("POST", "/runs", api_key, {"workflowId": "ship"}, key))
    loser = call("POST", "/runs", api_key, {"workflowId": "ship"}, key)
    (winner,) = duplicate
    assert winner["statusCode"] == 201
    assert loser["statusCode"] == 201
    assert loser["headers"][REPLAY] == "true"
    assert loser["body"] == winner["body"]
    assert run_heads() == 1
    # The loser's gate item, put before its transaction (docs/adr/0139), was taken back with its index entries.
    assert gate_runs() == [json.loads(winner["body"])["runId"]]
    # And so was its event batch, put beside its gate or in its transaction.
    assert gate_runs(EVENT_ITEM_PREFIX) == [json.loads(winner["body"])["runId"]]


def test_concurrent_duplicate_resolves_decide_once_and_both_answer_the_decision(api_key):
    run_id = waiting_run(api_key)
    key = f"dup-{uuid.uuid4().hex}"
    duplicate = run_a_duplicate_first(lambda: resolve(run_id, api_key, key))
    loser = resolve(run_id, api_key, key)
    (winner,) = duplicate
    assert winner["statusCode"] == 200
    assert loser["statusCode"] == 200, loser
    assert loser["body"] == winner["body"]
    assert resolved_count(run_id) == 1


def test_a_concurrent_resolve_with_the_same_key_and_another_body_is_a_mismatch_not_the_others_outcome(api_key, monkeypatch):
    # Two actions, so the two requests differ in what they decide.
    gate = {**APPROVAL["nodes"][0], "config": {"title": "Ship?", "actions": ["accept", "reject"]}}
    assert call("PUT", "/workflows/ship-or-not", api_key, {"nodes": [gate], "edges": []})["statusCode"] == 201
    created = call("POST", "/runs", api_key, {"workflowId": "ship-or-not"})
    run_id = json.loads(created["body"])["runId"]
    key = f"dup-{uuid.uuid4().hex}"
    path = f"/runs/{wire(run_id)}/interrupts/gate"
    # The other request runs whole after this one found the key free and before it read the run: it then finds the
    # gate decided, a refusal it would keep under a key the other holds.
    records = api_idem.records()
    found = records.find
    others: list[dict[str, Any]] = []

    def find_then_the_other_runs(*args: Any, **kwargs: Any) -> Existing | None:
        existing = found(*args, **kwargs)
        if not others:
            others.append({})
            others[0] = call("POST", path, api_key, {"resumeValue": {"action": "reject"}}, key)
        return existing

    monkeypatch.setattr(records, "find", find_then_the_other_runs)
    loser = call("POST", path, api_key, {"resumeValue": {"action": "accept"}}, key)
    assert others[0]["statusCode"] == 200, others[0]
    assert loser["statusCode"] == 409, loser
    assert json.loads(loser["body"])["error"] == "idempotency_key_mismatch"
    # As its retry answers.
    monkeypatch.setattr(records, "find", found)
    retried = call("POST", path, api_key, {"resumeValue": {"action": "accept"}}, key)
    assert json.loads(retried["body"])["error"] == "idempotency_key_mismatch"
    assert resolved_count(run_id) == 1
