"""A careless or hostile client over every route of wiring.ROUTES (the one route table), so a route added later is
probed too: each body a strict JSON edge refuses, sent to every route that reads one, and another tenant's ids on
every route that names a run, a thread or a webhook and reads no body (one that reads a body refuses a malformed body
first; the foundation's with a valid one: tests/e2e/test_api_errors.py). Each answer is the exact status, in the route's face's envelope
(OpenWOP `{error, message, details?}`; ModuleX `{detail}` with the code in X-Interlude-Error), with a code the
route declares (interlude.api.contract); and a refused request leaves the run it names waiting."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import pytest
import requests

from interlude import wiring
from interlude.api import contract
from interlude.api.errors import ERROR_CODE_HEADER, status_for_code
from tests.support.local_stack import Api, tenant_admin_key, wire

JSON = "application/json"
# Each: the body, its content type, the status and code it is refused with.
BODIES: dict[str, tuple[bytes, str, int, str]] = {
    "empty": (b"", JSON, 400, "validation_error"),
    "null": (b"null", JSON, 400, "validation_error"),
    "an array": (b"[]", JSON, 400, "validation_error"),
    "a number": (b"7", JSON, 400, "validation_error"),
    "a duplicate key": (b'{"a":1,"a":2}', JSON, 400, "validation_error"),
    "NaN": (b'{"a":NaN}', JSON, 400, "validation_error"),
    "1e400": (b'{"a":1e400}', JSON, 400, "validation_error"),
    "100,000 levels": (b"[" * 100_000 + b"]" * 100_000, JSON, 400, "validation_error"),
    "not UTF-8": (b'{"a":"\xff\xfe"}', JSON, 400, "validation_error"),
    "cut short": (b'{"a":', JSON, 400, "validation_error"),
    "a byte-order mark": (b"\xef\xbb\xbf{}", JSON, 400, "validation_error"),
    "text/plain": (b"{}", "text/plain", 415, "unsupported_media_type"),
    "a form": (b"a=1", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
    "over 1 MB": (b'{"a":"' + b"x" * 1_000_001 + b'"}', JSON, 413, "payload_too_large"),
}
# A body left out (or null) is the route's defaults where it may be; a page's form is its own (tests/e2e/
# test_inputs_and_page_http.py).
LEFT_OUT = {"empty", "null"}
FORM = "a form"
BODY_ROUTES = [r for r in wiring.ROUTES if r.request is not None]
# The ids that name a tenant's thing in the path (tenant/opaque): another tenant's is refused before any lookup.
FOREIGN_PARAMS = ("runId", "threadId", "runPk", "webhookId")
FOREIGN_ROUTES = [
    r for r in wiring.ROUTES if any(f"{{{p}}}" in r.path for p in FOREIGN_PARAMS) and not r.html_errors and r.request is None
]
# The other path parameters name nothing another tenant holds: a name within the caller's own tenant (a workflow, a
# principal, a key, a provider; a node, delivery or notification of the run or webhook the path names), a token that
# carries its own tenant, or the tenant a signed Slack request is for. A parameter in neither list fails the coverage
# test below until it is placed in one.
OWN_PARAMS = {
    "workflowId", "principalId", "keyId", "provider", "nodeId", "deliveryId", "notificationId", "token", "taskToken", "tenant"
}


@dataclass(frozen=True)
class Ids:
    run: str
    webhook: str
    token: str


@dataclass(frozen=True)
class World:
    api: Api
    own: Ids
    foreign: Ids


def ids_of(api: Api) -> Ids:
    webhook = api.call("POST", "/webhooks", {"url": "https://8.8.8.8/hook", "events": ["run.completed"]})
    assert webhook.status_code == 201, webhook.text
    run_id = api.start(api.fixture("conformance-approval"))["runId"]  # waiting at its gate, `gate`
    token = api.call("GET", f"/runs/{wire(run_id)}/interrupts/gate").json()["token"]
    return Ids(run_id, webhook.json()["webhookId"], token)


@pytest.fixture(scope="module")
def world(stack_info: dict[str, str]) -> World:
    name = f"probe-{uuid.uuid4().hex[:6]}"
    own = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    other = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, f"{name}-x"), f"{name}-x")
    return World(own, ids_of(own), ids_of(other))


def path_of(route: wiring.Route, ids: Ids) -> str:
    run, webhook = wire(ids.run), wire(ids.webhook)
    values = {"runId": run, "threadId": run, "runPk": run, "webhookId": webhook, "token": ids.token}
    if "{webhookId}" in route.path:
        values["deliveryId"] = webhook  # a webhook's deliveries are named as it is (tenant/opaque)
    # Any other parameter: a well-formed name that holds nothing.
    path = re.sub(r"{(\w+)}", lambda m: values.get(m.group(1), "nothing-here"), route.path)
    # A required query parameter naming a run: the same one.
    return path + (f"?against={run}" if any(p.name == "against" for p in route.params) else "")


def send(api: Api, route: wiring.Route, path: str, body: bytes = b"", content_type: str = JSON) -> requests.Response:
    headers = {"Authorization": f"Bearer {api.api_key}", "Content-Type": content_type}
    return api.session.request(route.method, api.base_url + path, data=body, headers=headers, timeout=60)


def refused_as(route: wiring.Route, got: requests.Response, status: int, code: str) -> None:
    where = f"{route.operation} answered {got.status_code}: {got.text[:300]}"
    assert (got.status_code, got.headers["Content-Type"].split(";")[0]) == (status, JSON), where
    if route.face == "modulex":
        assert set(got.json()) == {"detail"}, where
        named = got.headers[ERROR_CODE_HEADER]
    else:
        assert {"error", "message"} <= set(got.json()) <= {"error", "message", "details"}, where
        named = got.json()["error"]
    assert named == code, where
    assert named in contract.error_codes(route), f"{route.operation} answered {named}, which it does not declare"
    assert status_for_code(named, route.face) == status


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda r: r.operation)
def test_every_route_that_reads_a_body_refuses_each_malformed_one_and_changes_nothing(world: World, route: wiring.Route):
    path = path_of(route, world.own)
    for kind, (body, content_type, status, code) in BODIES.items():
        if (kind in LEFT_OUT and route.optional_body) or (kind == FORM and route.form):
            continue
        refused_as(route, send(world.api, route, path, body, content_type), status, code)
    assert world.api.run(world.own.run)["status"] == "waiting-approval"


@pytest.mark.parametrize("route", FOREIGN_ROUTES, ids=lambda r: r.operation)
def test_another_tenants_id_is_refused_on_every_route_that_names_one(world: World, route: wiring.Route):
    got = send(world.api, route, path_of(route, world.foreign))
    if route.face == "modulex":
        # ModuleX hides another organisation's run behind the answer a missing one gets.
        refused_as(route, got, 404, "not_found")
    else:
        refused_as(route, got, 403, "id_tenant_mismatch")


def test_the_probe_covers_the_route_table():
    # Every route that reads a body or names another tenant's thing is probed, but the pages (their own tests).
    probed = {r.operation for r in BODY_ROUTES + FOREIGN_ROUTES}
    # (named from the route table itself, not from FOREIGN_PARAMS, so a parameter left out of it is caught)
    reads = {r.operation for r in wiring.ROUTES if r.request or set(re.findall(r"{(\w+)}", r.path)) - OWN_PARAMS}
    pages = {r.operation for r in wiring.ROUTES if r.html_errors}
    assert reads - probed - pages == set()
    print(f"\nroutes probed: {len(probed)} of {len(wiring.ROUTES)}; requests: {len(BODY_ROUTES) * len(BODIES) + len(FOREIGN_ROUTES)}")
