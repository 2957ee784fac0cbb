"""Idempotency-Key over HTTP against the real local stack: replay byte for byte, mismatch, grammar, GET,
concurrency, uncached refusals and tenant separation (OpenWOP idempotency.md Layer 1, RFC 0213 §B)."""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from interlude import wiring
from interlude.api.console.session import SIGN_IN
from interlude.api.errors import status_for_code
from interlude.domain import schemas
from interlude.local.stack import TABLE_NAME
from interlude.store.item_index import index_pk
from tests.support.console import Console, opens_a_session
from tests.support.local_stack import FIXTURES, Api, stack_client, tenant_admin_key, wire

REPLAY = "OpenWOP-Idempotent-Replay"
ENVELOPE = schemas.validator("error-envelope.schema.json")


def new_key() -> str:
    return uuid.uuid4().hex + "-idem"  # 36 characters, 128 random bits


def refused(response: requests.Response, code: str, face: wiring.Face = "openwop") -> dict[str, Any]:
    """A refusal in the face's shape: the OpenWOP envelope, or ModuleX {detail} with the code in a header."""
    assert response.status_code == status_for_code(code, face), response.text
    body = response.json()
    if face == "modulex":
        assert set(body) == {"detail"}, body
        assert response.headers["X-Interlude-Error"] == code
    else:
        assert schemas.errors_of(ENVELOPE, body) == []
        assert body["error"] == code, body
    assert REPLAY not in response.headers
    return body


@pytest.fixture(scope="module")
def tenant(stack_info: dict[str, str]) -> tuple[str, Api]:
    """A tenant of its own, so the runs it holds can be counted."""
    name = f"idem-{uuid.uuid4().hex[:8]}"
    return name, Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name, "idem-admin"), name)


@pytest.fixture(scope="module")
def approval(tenant: tuple[str, Api]) -> str:
    return tenant[1].fixture("conformance-approval")


def runs_of(stack_info: dict[str, str], tenant: str) -> int:
    """The tenant's runs, counted straight from the local stack's table by their run listing entries (one per run,
    written just before the run's first transaction: wiring.RUN_INDEX): a Query of each shard, where a scan for the
    run heads read the whole shared table, which every e2e module of the worker has filled (1-1.5 s a count late in
    the suite)."""
    client = stack_client(stack_info, "dynamodb")
    pages = (
        page
        for shard in range(wiring.RUN_INDEX.shards)
        for page in client.get_paginator("query").paginate(
            TableName=TABLE_NAME,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": index_pk(tenant, wiring.RUN_INDEX, shard)}},
            Select="COUNT",
        )
    )
    return sum(page["Count"] for page in pages)


def resolved_events(api: Api, run_id: str) -> list[dict[str, Any]]:
    return [e for e in api.events(run_id) if e["type"] == "interrupt.resolved"]


# -- replay ------------------------------------------------------------------------------------------


def test_a_replayed_create_run_answers_the_same_bytes_and_creates_no_second_run(tenant, approval, stack_info):
    name, api = tenant
    key = new_key()
    before = runs_of(stack_info, name)
    first = api.call("POST", "/runs", {"workflowId": approval}, **{"Idempotency-Key": key})
    again = api.call("POST", "/runs", {"workflowId": approval}, **{"Idempotency-Key": key})
    assert first.status_code == again.status_code == 201
    assert REPLAY not in first.headers
    assert again.headers[REPLAY] == "true"
    assert again.content == first.content
    for header in ("Content-Type", "Location", "OpenWOP-Version"):
        assert again.headers[header] == first.headers[header]
    assert runs_of(stack_info, name) == before + 1
    # Without the key the same body is a new request, as always.
    other = api.call("POST", "/runs", {"workflowId": approval})
    assert other.json()["runId"] != first.json()["runId"]


def test_a_replayed_resolve_answers_the_first_outcome_and_does_not_resolve_again(tenant, approval):
    _, api = tenant
    run_id = api.start(approval)["runId"]
    key = new_key()
    first = api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate", {"resumeValue": {"action": "accept"}},
                     **{"Idempotency-Key": key})  # fmt: skip
    again = api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate", {"resumeValue": {"action": "accept"}},
                     **{"Idempotency-Key": key})  # fmt: skip
    assert first.status_code == again.status_code == 200, first.text
    assert again.headers[REPLAY] == "true"
    assert again.content == first.content
    assert len(resolved_events(api, run_id)) == 1
    # A new key is a new request: the gate is already decided.
    refused(api.resolve(run_id, "gate", {"action": "accept"}), "interrupt_already_resolved")


def test_a_final_refusal_is_replayed_too(tenant, approval):
    _, api = tenant
    run_id = api.start(approval)["runId"]
    assert api.call("POST", f"/runs/{wire(run_id)}/cancel").status_code == 200
    key = new_key()
    first = api.call("POST", f"/runs/{wire(run_id)}/cancel", **{"Idempotency-Key": key})
    refused(first, "run_terminal")
    again = api.call("POST", f"/runs/{wire(run_id)}/cancel", **{"Idempotency-Key": key})
    assert again.status_code == 409
    assert again.headers[REPLAY] == "true"
    assert again.content == first.content


def test_a_replayed_cancel_is_the_first_success_not_run_terminal(tenant, approval):
    _, api = tenant
    run_id = api.start(approval)["runId"]
    key = new_key()
    first = api.call("POST", f"/runs/{wire(run_id)}/cancel", **{"Idempotency-Key": key})
    again = api.call("POST", f"/runs/{wire(run_id)}/cancel", **{"Idempotency-Key": key})
    assert first.status_code == again.status_code == 200
    assert again.headers[REPLAY] == "true"
    assert again.content == first.content


# -- mismatch and grammar ------------------------------------------------------------------------------


def test_the_same_key_with_another_body_is_a_mismatch_never_the_cached_body(tenant, approval):
    _, api = tenant
    key = new_key()
    first = api.call("POST", "/runs", {"workflowId": approval}, **{"Idempotency-Key": key})
    assert first.status_code == 201
    other = api.call("POST", "/runs", {"workflowId": approval, "inputs": {"x": 1}}, **{"Idempotency-Key": key})
    body = refused(other, "idempotency_key_mismatch")
    assert first.json()["runId"] not in other.text
    assert "details" not in body or "runId" not in body["details"]
    # The same bytes still replay.
    assert api.call("POST", "/runs", {"workflowId": approval}, **{"Idempotency-Key": key}).content == first.content


def test_the_same_key_on_another_run_is_a_mismatch(tenant, approval):
    _, api = tenant
    one, two = api.start(approval)["runId"], api.start(approval)["runId"]
    key = new_key()
    assert api.call("POST", f"/runs/{wire(one)}/cancel", **{"Idempotency-Key": key}).status_code == 200
    refused(api.call("POST", f"/runs/{wire(two)}/cancel", **{"Idempotency-Key": key}), "idempotency_key_mismatch")
    assert api.run(two)["status"] == "waiting-approval"


@pytest.mark.parametrize(
    "key",
    [
        "a" * 21,  # too short
        "a" * 129,  # too long
        "",  # empty
        "a" * 21 + "!",  # outside the alphabet
        "a" * 21 + "/",
        "a" * 21 + "+",
        "a" * 21 + "#",
        "aaaaaaaaaaa aaaaaaaaaaa",
        "a" * 22 + ",",
    ],
)
def test_a_key_outside_the_grammar_is_refused_and_nothing_runs(tenant, approval, stack_info, key):
    name, api = tenant
    before = runs_of(stack_info, name)
    refused(api.call("POST", "/runs", {"workflowId": approval}, **{"Idempotency-Key": key}), "idempotency_key_invalid")
    assert runs_of(stack_info, name) == before


@pytest.mark.parametrize("key", ["a" * 22, "A-z0.9_~" * 16, "6f1d0c2e-8b47-4a51-9e0f-3c2b1a5d7e99"])
def test_keys_at_the_grammar_bounds_are_accepted(tenant, approval, key):
    _, api = tenant
    got = api.call("POST", "/runs", {"workflowId": approval}, **{"Idempotency-Key": key})
    assert got.status_code == 201, got.text


def test_get_routes_ignore_the_header(tenant, approval):
    _, api = tenant
    run_id = api.start(approval)["runId"]
    for key in ("bad key!", new_key()):
        got = api.call("GET", f"/runs/{wire(run_id)}", **{"Idempotency-Key": key})
        assert got.status_code == 200
        assert REPLAY not in got.headers
        assert api.call("GET", f"/runs/{wire(run_id)}/events/poll?timeout=1", **{"Idempotency-Key": key}).ok
        assert api.call("GET", f"/workflows/{approval}", **{"Idempotency-Key": key}).ok


# The console's forms check the key once their session holds (below).
@pytest.mark.parametrize("route", [r for r in wiring.ROUTES if r.mutating and not r.keyed_in_handler], ids=lambda r: r.operation)
def test_every_mutating_route_checks_the_key_grammar(tenant, route):
    _, api = tenant
    path = re.sub(r"{(\w+)}", "x", route.path)
    got = api.call(route.method, path, {}, **{"Idempotency-Key": "too-short"})
    refused(got, "idempotency_key_invalid", route.face)


def test_every_mutating_route_advertises_the_header(api):
    document = api.session.get(api.base_url + "/openapi.json", timeout=10).json()
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            names = {p["name"] for p in op["parameters"]}
            assert ("Idempotency-Key" in names) == (method != "get"), (method, path)


# -- uncached outcomes ------------------------------------------------------------------------------


def test_a_validation_error_is_not_cached_so_a_corrected_request_with_the_key_executes(tenant, approval):
    _, api = tenant
    run_id = api.start(approval)["runId"]
    key = new_key()
    path = f"/runs/{wire(run_id)}/interrupts/gate"
    bad = api.call("POST", path, {"resumeValue": {"action": "publish"}}, **{"Idempotency-Key": key})
    refused(bad, "validation_error")
    again = api.call("POST", path, {"resumeValue": {"action": "publish"}}, **{"Idempotency-Key": key})
    refused(again, "validation_error")  # executed again, not replayed
    good = api.call("POST", path, {"resumeValue": {"action": "accept"}}, **{"Idempotency-Key": key})
    assert good.status_code == 200, good.text
    assert REPLAY not in good.headers
    assert api.run(run_id)["status"] == "completed"


def test_a_key_invalid_refusal_is_not_cached(tenant, approval):
    _, api = tenant
    refused(api.call("POST", "/runs", "{not json", **{"Idempotency-Key": "short"}), "idempotency_key_invalid")
    got = api.call("POST", "/runs", {"workflowId": approval}, **{"Idempotency-Key": new_key()})
    assert got.status_code == 201


def test_unauthenticated_and_forbidden_are_not_cached(tenant, approval):
    _, api = tenant
    key = new_key()
    body = {"workflowId": approval}
    refused(api.call("POST", "/runs", body, key="il_0000000000000000_" + "x" * 43, **{"Idempotency-Key": key}),
            "unauthenticated")  # fmt: skip
    reader = api.new_key(["runs:read"])
    refused(api.call("POST", "/runs", body, key=reader, **{"Idempotency-Key": key}), "forbidden")
    got = api.call("POST", "/runs", body, **{"Idempotency-Key": key})
    assert got.status_code == 201
    assert REPLAY not in got.headers


# -- concurrency ---------------------------------------------------------------------------------------


def test_twenty_concurrent_same_key_resolves_execute_once(tenant, approval):
    _, api = tenant
    run_id = api.start(approval)["runId"]
    key = new_key()
    barrier = threading.Barrier(20)

    def resolve(_: int) -> requests.Response:
        session = requests.Session()
        barrier.wait()
        return session.post(
            f"{api.base_url}/runs/{wire(run_id)}/interrupts/gate",
            data=json.dumps({"resumeValue": {"action": "accept"}}),
            headers=api.headers(**{"Idempotency-Key": key}),
            timeout=30,
        )

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(resolve, range(20)))
    executed = [a for a in answers if a.status_code == 200 and REPLAY not in a.headers]
    assert len(executed) == 1, [(a.status_code, a.text) for a in answers]
    for answer in answers:
        if answer is executed[0]:
            continue
        if answer.status_code == 200:
            assert answer.headers[REPLAY] == "true"
            assert answer.content == executed[0].content
        else:
            body = refused(answer, "idempotency_in_flight")
            assert int(answer.headers["Retry-After"]) >= 1
            assert "retryAfter" not in json.dumps(body.get("details") or {})
    assert len(resolved_events(api, run_id)) == 1
    # Once the first has finished, every later duplicate replays it.
    late = api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate", {"resumeValue": {"action": "accept"}},
                    **{"Idempotency-Key": key})  # fmt: skip
    assert late.headers[REPLAY] == "true"
    assert late.content == executed[0].content


# -- tenant separation ---------------------------------------------------------------------------------


def test_the_same_key_under_two_tenants_does_two_different_things(tenant, stack_info):
    name_a, api_a = tenant
    name_b = f"idem-{uuid.uuid4().hex[:8]}"
    api_b = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name_b, "idem-admin"), name_b)
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    for api in (api_a, api_b):
        assert api.put_workflow("idem-shared", {**definition, "id": "idem-shared"}).status_code == 201
    key = new_key()
    first = api_a.call("POST", "/runs", {"workflowId": "idem-shared"}, **{"Idempotency-Key": key})
    second = api_b.call("POST", "/runs", {"workflowId": "idem-shared"}, **{"Idempotency-Key": key})
    assert first.status_code == second.status_code == 201
    assert REPLAY not in second.headers
    assert first.json()["runId"].startswith(f"{name_a}/")
    assert second.json()["runId"].startswith(f"{name_b}/")
    # Each tenant replays its own.
    again_b = api_b.call("POST", "/runs", {"workflowId": "idem-shared"}, **{"Idempotency-Key": key})
    assert again_b.headers[REPLAY] == "true"
    assert again_b.content == second.content


# -- the console's forms (the credential is the session: the record namespace is its tenant) -----------------

SECRET = re.compile(r"il_[0-9a-f]{16}_[A-Za-z0-9_-]+")


def test_a_console_form_is_replayed_only_to_its_session_and_keyed_in_its_tenant(tenant, stack_info):
    _, api = tenant
    console = Console(api).signed_in(api.api_key)
    form = {"csrf": console.proof("/console/keys"), "subjectId": "replayed", "scope": "runs:read"}
    key = new_key()
    made = console.post("/console/keys", form, headers={"Idempotency-Key": key}, allow_redirects=False)
    assert made.status_code == 201, made.text[:300]
    assert SECRET.search(made.text)
    again = console.post("/console/keys", form, headers={"Idempotency-Key": key}, allow_redirects=False)
    assert (again.status_code, again.headers.get(REPLAY)) == (201, "true")
    assert again.content == made.content
    # The same form and key without the session: signed out, never the page that holds the new key.
    bare = requests.post(
        api.base_url + "/console/keys", data=form, headers={"Idempotency-Key": key, "Origin": api.base_url}, timeout=30, allow_redirects=False
    )
    assert bare.status_code == 401, bare.text[:300]
    assert REPLAY not in bare.headers
    assert not SECRET.search(bare.text)
    # Another tenant's session with the same key makes its own key, in its own tenant.
    name_b = f"idem-{uuid.uuid4().hex[:8]}"
    api_b = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name_b, "idem-admin"), name_b)
    console_b = Console(api_b).signed_in(api_b.api_key)
    form_b = {"csrf": console_b.proof("/console/keys"), "subjectId": "replayed", "scope": "runs:read"}
    other = console_b.post("/console/keys", form_b, headers={"Idempotency-Key": key}, allow_redirects=False)
    assert (other.status_code, other.headers.get(REPLAY)) == (201, None), other.text[:300]


def test_a_console_form_refuses_a_key_outside_the_grammar_as_a_page(tenant):
    _, api = tenant
    console = Console(api).signed_in(api.api_key)
    form = {"csrf": console.proof("/console/keys"), "subjectId": "badkey", "scope": "runs:read"}
    got = console.post("/console/keys", form, headers={"Idempotency-Key": "too-short"}, allow_redirects=False)
    assert (got.status_code, got.headers["Content-Type"].split(";")[0]) == (400, "text/html")
    assert not SECRET.search(got.text)


def sign_in_as(api: Api, key: str) -> Callable[..., requests.Response]:
    """A browser-less client's sign-in with `key`: the sign-in page's proof and its pre-session cookie, posted as the
    same bytes each time it is sent (a retry sends them again), with the headers given."""
    console = Console(api)
    form = {"csrf": console.proof("/console/sign-in"), "api_key": key}
    name = SIGN_IN.name(https=False)  # the local stack's: over plain http
    cookie = f"{name}={console.session.cookies[name]}"

    def send(**headers: str) -> requests.Response:
        return requests.post(
            api.base_url + "/console/sign-in", data=form, headers={"Cookie": cookie, **headers}, timeout=30, allow_redirects=False
        )

    return send


def test_two_tenants_or_two_keys_sign_in_with_one_idempotency_key_each_to_their_own_session(tenant, stack_info):
    _, api = tenant
    name_b = f"idem-{uuid.uuid4().hex[:8]}"
    api_b = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name_b, "idem-admin"), name_b)
    key = new_key()
    for signing_in in (api.api_key, api_b.api_key, api.new_key(["runs:read"])):
        got = sign_in_as(api, signing_in)(**{"Idempotency-Key": key})
        assert (got.status_code, got.headers.get(REPLAY)) == (200, None), got.text[:300]
        assert "Signed in" in got.text
        assert opens_a_session(got)


def test_the_same_sign_in_sent_again_is_answered_as_the_first_and_a_bad_key_as_a_page(tenant):
    _, api = tenant
    send = sign_in_as(api, api.api_key)
    key = new_key()
    first = send(**{"Idempotency-Key": key})
    again = send(**{"Idempotency-Key": key})
    assert (first.status_code, first.headers.get(REPLAY)) == (200, None), first.text[:300]
    assert (again.status_code, again.headers.get(REPLAY)) == (200, "true"), again.text[:300]
    assert again.content == first.content
    # with the session the first one opened: a replay that said "Signed in" and set no cookie left the caller out
    assert opens_a_session(first)
    assert again.raw.headers.getlist("Set-Cookie") == first.raw.headers.getlist("Set-Cookie")
    bad = send(**{"Idempotency-Key": "too-short"})
    assert (bad.status_code, bad.headers["Content-Type"].split(";")[0]) == (400, "text/html")
    assert "Sign in" in bad.text
    assert not opens_a_session(bad)


# -- the signed-token surface (no API key: the record namespace is the token) ---------------------------


def test_a_replayed_token_resolve_answers_the_first_outcome_and_resolves_once(tenant, approval):
    _, api = tenant
    run_id = api.start(approval)["runId"]
    got = api.call("GET", f"/runs/{wire(run_id)}/interrupts/gate")
    assert got.status_code == 200, got.text
    token = got.json()["token"]
    key = new_key()
    body = json.dumps({"resumeValue": {"action": "accept"}})
    headers = {"Content-Type": "application/json", "Idempotency-Key": key}
    url = f"{api.base_url}/interrupts/{token}"
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    refused(requests.post(f"{api.base_url}/interrupts/{forged}", data=body, headers=headers, timeout=30),
            "interrupt_token_invalid")  # fmt: skip
    first = requests.post(url, data=body, headers=headers, timeout=30)
    again = requests.post(url, data=body, headers=headers, timeout=30)
    assert first.status_code == 200, first.text
    assert REPLAY not in first.headers
    assert again.status_code == 200
    assert again.headers[REPLAY] == "true"
    assert again.content == first.content
    other = requests.post(url, data=json.dumps({"resumeValue": {"action": "reject"}}), headers=headers, timeout=30)
    refused(other, "idempotency_key_mismatch")
    assert len(resolved_events(api, run_id)) == 1
