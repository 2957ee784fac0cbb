"""Every refusal of the foundation API, against the real local stack: exact status, the OpenWOP error envelope,
the registered code, the details a client acts on — and never a 500."""

from __future__ import annotations

import json
import re
import secrets
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from interlude import wiring
from interlude.api import contract
from interlude.api.errors import status_for_code
from interlude.domain import schemas
from interlude.domain.errors import ERROR_CODES
from tests.support.local_stack import FIXTURES, Api, tenant_admin_key, wire

ENVELOPE = schemas.validator("error-envelope.schema.json")
ROUTES = {r.operation: r for r in wiring.ROUTES}
# The foundation API this module covers; routes other modules add to wiring.ROUTES have tests of their own.
FOUNDATION = (
    "getCapabilities", "getOpenApi", "putWorkflow", "getWorkflow", "createRun", "getRun", "cancelRun",
    "pollRunEvents", "resolveInterruptByRun", "createKey",
)
SCOPED_ROUTES = [ROUTES[op] for op in FOUNDATION if ROUTES[op].scope]
RUN_ROUTES = [ROUTES[op] for op in FOUNDATION if "{runId}" in ROUTES[op].path]
BODY_ROUTES = ["putWorkflow", "createRun", "cancelRun", "resolveInterruptByRun", "createKey"]
# Codes this API returns for a request (runner_unavailable and internal_error only answer lost races and faults).
RETURNED_CODES = {
    "validation_error",
    "unauthenticated",
    "forbidden",
    "id_tenant_mismatch",
    "not_found",
    "interrupt_already_resolved",
    "run_terminal",
    "interlude.vote_already_cast",
    "payload_too_large",
    "unsupported_media_type",
}
CODES_SEEN: set[str] = set()
SERVER_ERRORS: list[str] = []

# A syntactically valid run id of the demo tenant that no run has.
UNKNOWN_RUN = "demo/" + "N0-such-run-" + "x" * 12
FOREIGN_UNKNOWN_RUN = "other/" + "N0-such-run-" + "x" * 12


def refused(response: requests.Response, status: int | set[int], code: str | None = None) -> dict[str, Any]:
    """Assert a refusal: never a 5xx, the exact status, a schema-valid envelope carrying `code`."""
    request = f"{response.request.method} {response.request.path_url}"
    assert response.status_code < 500, f"{request} answered {response.status_code}: {response.text[:500]}"
    statuses = status if isinstance(status, set) else {status}
    assert response.status_code in statuses, f"{request} answered {response.status_code}: {response.text[:500]}"
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    problems = schemas.errors_of(ENVELOPE, body)
    assert problems == [], f"{request} answered a body outside the error envelope: {problems}"
    assert status_for_code(body["error"]) == response.status_code
    if code is not None:
        assert body["error"] == code, body
    route = route_of(response.request.method or "", response.request.path_url)
    if route is not None:
        # An operation never answers a code it does not declare (interlude.api.contract, the OpenAPI document).
        assert body["error"] in contract.error_codes(route), f"{request}: {body['error']} is not declared"
    CODES_SEEN.add(body["error"])
    return body


ROUTE_PATTERNS = [(re.compile("^" + re.sub(r"{\w+}", "[^/]+", r.path) + "$"), r) for r in wiring.ROUTES]


def route_of(method: str, path_url: str) -> wiring.Route | None:
    path = path_url.split("?")[0]
    return next((r for pattern, r in ROUTE_PATTERNS if r.method == method and pattern.match(path)), None)


def error_paths(body: dict[str, Any]) -> list[str]:
    return [e["path"] for e in body["details"]["errors"]]


def path_of(route: wiring.Route, run_id: str = UNKNOWN_RUN, node_id: str = "gate", workflow_id: str = "wf") -> str:
    return (
        route.path.replace("{runId}", wire(run_id)).replace("{nodeId}", node_id).replace("{workflowId}", workflow_id)
    )


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": value}
    return value


# -- fixtures ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(api: Api) -> Api:
    """The seeded admin of tenant demo, on a session of its own that records every 5xx it ever receives."""
    own = Api(api.base_url, api.api_key, api.tenant)

    def record(response: requests.Response, *args: Any, **kwargs: Any) -> None:
        if response.status_code >= 500:
            SERVER_ERRORS.append(f"{response.request.method} {response.request.path_url} -> {response.status_code}")

    own.session.hooks["response"].append(record)
    return own


@pytest.fixture(autouse=True)
def _no_server_errors() -> Iterator[None]:
    SERVER_ERRORS.clear()
    yield
    assert SERVER_ERRORS == [], "the API answered 5xx"


@pytest.fixture(scope="module")
def approval_wf(client: Api) -> str:
    return client.fixture("conformance-approval")


@pytest.fixture(scope="module")
def clarification_wf(client: Api) -> str:
    return client.fixture("conformance-clarification")


@pytest.fixture(scope="module")
def noop_wf(client: Api) -> str:
    return client.fixture("conformance-noop")


def register(client: Api, definition: dict[str, Any], key: str | None = None) -> str:
    workflow_id = f"wf-{uuid.uuid4().hex[:10]}"
    got = client.put_workflow(workflow_id, definition, key)
    assert got.status_code == 201, got.text
    return workflow_id


@pytest.fixture(scope="module")
def gate_then_publish_wf(client: Api) -> str:
    return register(
        client,
        {
            "nodes": [
                {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}},
                {"id": "publish", "typeId": "core.noop"},
            ],
            "edges": [{"sourceNodeId": "gate", "targetNodeId": "publish"}],
        },
    )


def start_waiting(client: Api, workflow_id: str) -> str:
    started = client.start(workflow_id)
    assert started["status"] == "waiting-approval"
    return started["runId"]


@pytest.fixture(scope="module")
def waiting_run(client: Api, approval_wf: str) -> str:
    """Shared by the refusals: each test that uses it also proves the refusal left it waiting."""
    return start_waiting(client, approval_wf)


@pytest.fixture
def fresh_run(client: Api, approval_wf: str) -> str:
    return start_waiting(client, approval_wf)


@pytest.fixture(scope="module")
def other_tenant_key(stack_info: dict[str, str]) -> str:
    return tenant_admin_key(stack_info, "other", "x")


@pytest.fixture(scope="module")
def foreign_run(client: Api, other_tenant_key: str) -> str:
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    definition.pop("id")
    workflow_id = register(client, definition, other_tenant_key)
    run_id = client.start(workflow_id, key=other_tenant_key)["runId"]
    assert run_id.startswith("other/")
    return run_id


@pytest.fixture(scope="module")
def keys_without() -> dict[str, str]:
    return {}


def key_without(client: Api, cache: dict[str, str], scope: str) -> str:
    if scope not in cache:
        cache[scope] = client.new_key([s for s in wiring.ALL_SCOPES if s != scope], subject=f"no-{scope.replace(':', '-')}")
    return cache[scope]


# -- bodies --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", BODY_ROUTES)
def test_malformed_json_body_is_a_validation_error(client: Api, waiting_run: str, operation: str) -> None:
    got = client.call(ROUTES[operation].method, path_of(ROUTES[operation], waiting_run), '{"workflowId": ')
    body = refused(got, 400, "validation_error")
    assert "JSON" in body["message"]


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "42", "true"])
@pytest.mark.parametrize("operation", BODY_ROUTES)
def test_a_body_that_is_not_an_object_is_refused(client: Api, waiting_run: str, operation: str, raw: str) -> None:
    got = client.call(ROUTES[operation].method, path_of(ROUTES[operation], waiting_run), raw)
    refused(got, 400, "validation_error")
    assert client.run(waiting_run)["status"] == "waiting-approval"


@pytest.mark.parametrize("operation", BODY_ROUTES)
def test_a_body_that_is_not_json_is_an_unsupported_media_type(client: Api, waiting_run: str, operation: str) -> None:
    got = client.call(
        ROUTES[operation].method, path_of(ROUTES[operation], waiting_run), '{"resumeValue": {"action": "accept"}}',
        **{"Content-Type": "text/plain"},
    )
    refused(got, 415, "unsupported_media_type")
    assert client.run(waiting_run)["status"] == "waiting-approval"


@pytest.mark.parametrize("operation", BODY_ROUTES)
def test_an_oversize_body_is_payload_too_large(client: Api, waiting_run: str, operation: str) -> None:
    oversize = json.dumps({"resumeValue": {"action": "accept", "comment": "x" * 1_100_000}})
    refused(client.call(ROUTES[operation].method, path_of(ROUTES[operation], waiting_run), oversize), 413, "payload_too_large")
    assert client.run(waiting_run)["status"] == "waiting-approval"


# Writes that read no body (a retry, a recovery, a claim, a deletion): the body limit holds for them too, before
# anything runs.
BODYLESS_WRITES = [r for r in wiring.ROUTES if r.body_limited and r.request is None]


@pytest.mark.parametrize("route", BODYLESS_WRITES, ids=lambda r: r.operation)
def test_an_oversize_body_is_payload_too_large_on_a_write_that_reads_none(
    client: Api, waiting_run: str, route: wiring.Route
) -> None:
    path = path_of(route, waiting_run).replace("{", "").replace("}", "")
    got = client.call(route.method, path, json.dumps({"ignored": "x" * 1_000_001}))
    if route.face == "modulex":
        assert (got.status_code, got.headers.get("X-Interlude-Error")) == (413, "payload_too_large"), got.text[:300]
        assert set(got.json()) == {"detail"}
    else:
        refused(got, 413, "payload_too_large")
    assert client.run(waiting_run)["status"] == "waiting-approval"


@pytest.mark.parametrize("operation", ["putWorkflow", "createRun", "resolveInterruptByRun", "createKey"])
def test_a_required_body_may_not_be_empty(client: Api, waiting_run: str, operation: str) -> None:
    refused(client.call(ROUTES[operation].method, path_of(ROUTES[operation], waiting_run)), 400, "validation_error")


# -- unknown fields ------------------------------------------------------------------------------------


def test_create_run_refuses_an_unknown_field(client: Api, noop_wf: str) -> None:
    body = refused(client.call("POST", "/runs", {"workflowId": noop_wf, "priority": 1}), 400, "validation_error")
    assert error_paths(body) == ["priority"]


def test_create_key_refuses_an_unknown_field(client: Api) -> None:
    got = client.call("POST", "/keys", {"subjectId": "alice", "scopes": ["runs:read"], "admin": True})
    assert error_paths(refused(got, 400, "validation_error")) == ["admin"]


def test_cancel_refuses_an_unknown_field(client: Api, waiting_run: str) -> None:
    got = client.call("POST", f"/runs/{wire(waiting_run)}/cancel", {"reason": "r", "force": True})
    assert error_paths(refused(got, 400, "validation_error")) == ["force"]
    assert client.run(waiting_run)["status"] == "waiting-approval"


@pytest.mark.parametrize(
    "resolve_body",
    [
        {"resumeValue": {"action": "accept"}, "comment": "extra"},
        {"value": {"action": "accept"}},
        {},
    ],
    ids=["extra-field", "wrong-field", "empty-object"],
)
def test_resolve_body_must_be_exactly_resume_value(client: Api, waiting_run: str, resolve_body: dict[str, Any]) -> None:
    body = refused(client.call("POST", f"/runs/{wire(waiting_run)}/interrupts/gate", resolve_body), 400, "validation_error")
    assert body["details"]["field"] == "body"
    assert client.run(waiting_run)["status"] == "waiting-approval"


@pytest.mark.parametrize(
    ("definition", "expected_paths"),
    [
        ({"nodes": [{"id": "a", "typeId": "core.noop"}], "owner": "me"}, ["owner"]),
        ({"nodes": [{"id": "a", "typeId": "core.noop", "colour": "red"}]}, ["nodes/0/colour"]),
        (
            {
                "nodes": [{"id": "a", "typeId": "core.noop"}, {"id": "b", "typeId": "core.noop"}],
                "edges": [{"sourceNodeId": "a", "targetNodeId": "b", "weight": 2}],
            },
            ["edges/0/weight"],
        ),
    ],
    ids=["top-level", "node", "edge"],
)
def test_workflow_refuses_unknown_fields(client: Api, definition: dict[str, Any], expected_paths: list[str]) -> None:
    body = refused(client.put_workflow(f"wf-{uuid.uuid4().hex[:8]}", definition), 400, "validation_error")
    assert error_paths(body) == expected_paths


# -- workflow validation -------------------------------------------------------------------------------

NOOP_A = {"id": "a", "typeId": "core.noop"}
NOOP_B = {"id": "b", "typeId": "core.noop"}
EDGE_TO_MISSING = {"nodes": [NOOP_A], "edges": [{"sourceNodeId": "a", "targetNodeId": "ghost"}]}
CONFLICTING_RULES = {
    "nodes": [NOOP_A, NOOP_B, {"id": "c", "typeId": "core.noop"}],
    "edges": [
        {"sourceNodeId": "a", "targetNodeId": "c", "triggerRule": "all_success"},
        {"sourceNodeId": "b", "targetNodeId": "c", "triggerRule": "any_success"},
    ],
}


@pytest.mark.parametrize(
    ("definition", "expected_path"),
    [
        pytest.param({"nodes": [{"id": "a", "typeId": "core.nope"}]}, "nodes/0/typeId", id="unknown-typeId"),
        pytest.param({"nodes": [NOOP_A, {"id": "a", "typeId": "core.noop"}]}, "nodes", id="duplicate-node-ids"),
        pytest.param(
            {"nodes": [NOOP_A, {"id": "gate", "typeId": "core.approvalGate", "config": {}}]},
            "nodes/1/config/title",
            id="approval-gate-without-title",
        ),
        pytest.param(
            {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "t", "colour": "red"}}]},
            "nodes/0/config/colour",
            id="unknown-config-field",
        ),
        pytest.param(
            {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "t", "actions": ["maybe"]}}]},
            "nodes/0/config/actions/0",
            id="unknown-approval-action",
        ),
        pytest.param(
            {"nodes": [{"id": "ask", "typeId": "core.clarificationGate", "config": {"questions": []}}]},
            "nodes/0/config/questions",
            id="clarification-without-questions",
        ),
        pytest.param(
            {
                "nodes": [NOOP_A, NOOP_B],
                "edges": [{"sourceNodeId": "a", "targetNodeId": "b"}, {"sourceNodeId": "b", "targetNodeId": "a"}],
            },
            "edges",
            id="no-root-node",
        ),
        pytest.param({"nodes": []}, "nodes", id="no-nodes"),
        pytest.param(
            EDGE_TO_MISSING, "edges/0", id="edge-to-missing-node"),
        pytest.param(
            CONFLICTING_RULES, "edges/1", id="conflicting-trigger-rules"),
    ],
)
def test_an_invalid_workflow_names_the_offending_place(
    client: Api, definition: dict[str, Any], expected_path: str
) -> None:
    workflow_id = f"wf-{uuid.uuid4().hex[:8]}"
    body = refused(client.put_workflow(workflow_id, definition), 400, "validation_error")
    paths = error_paths(body)
    assert any(p == expected_path or p.startswith(expected_path + "/") for p in paths), paths
    refused(client.call("GET", f"/workflows/{workflow_id}"), 404, "not_found")


def test_workflow_body_id_must_match_the_path(client: Api) -> None:
    got = client.put_workflow("wf-path-id", {"id": "wf-other-id", "nodes": [NOOP_A]})
    assert refused(got, 400, "validation_error")["details"] == {"path": "id"}


@pytest.mark.parametrize("workflow_id", ["has%20space", "%E2%9C%93", "a" * 129])
def test_a_malformed_workflow_id_is_a_validation_error(client: Api, workflow_id: str) -> None:
    body = refused(client.call("GET", f"/workflows/{workflow_id}"), 400, "validation_error")
    assert body["details"] == {"field": "workflowId"}


def test_an_unknown_workflow_is_not_found(client: Api) -> None:
    refused(client.call("GET", "/workflows/never-registered"), 404, "not_found")


# -- createRun -----------------------------------------------------------------------------------------


def test_create_run_of_an_unknown_workflow_is_not_found(client: Api) -> None:
    body = refused(client.call("POST", "/runs", {"workflowId": "never-registered"}), 404, "not_found")
    assert body["details"] == {"field": "workflowId"}


def test_create_run_refuses_a_callback_url(client: Api, noop_wf: str) -> None:
    got = client.call("POST", "/runs", {"workflowId": noop_wf, "callbackUrl": "http://127.0.0.1:9/callback"})
    assert refused(got, 400, "validation_error")["details"]["field"] == "callbackUrl"


def test_create_run_for_another_tenant_is_forbidden(client: Api, noop_wf: str) -> None:
    got = client.call("POST", "/runs", {"workflowId": noop_wf, "tenantId": "other"})
    assert refused(got, 403, "forbidden")["details"] == {"field": "tenantId"}


def test_create_run_naming_its_own_tenant_is_accepted(client: Api, noop_wf: str) -> None:
    assert client.start(noop_wf, tenantId="demo")["status"] == "completed"


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"mode": "eval"}, "mode"), ({"residency": {"region": "eu"}}, "residency"), ({"agentId": "a1"}, "agentId")],
)
def test_create_run_refuses_what_this_host_does_not_offer(client: Api, noop_wf: str, extra: dict, field: str) -> None:
    got = client.call("POST", "/runs", {"workflowId": noop_wf, **extra})
    assert refused(got, 400, "validation_error")["details"] == {"field": field}


def test_create_run_refuses_an_invalid_configurable(client: Api, noop_wf: str) -> None:
    got = client.call("POST", "/runs", {"workflowId": noop_wf, "configurable": {"bogus": 1}})
    body = refused(got, 400, "validation_error")
    assert body["details"]["field"] == "configurable"
    assert body["details"]["errors"]


def test_create_run_refuses_missing_required_variables(client: Api) -> None:
    workflow_id = register(
        client,
        {
            "nodes": [NOOP_A],
            "variables": [
                {"name": "title", "type": "string", "required": True},
                {"name": "lang", "type": "string", "required": True, "defaultValue": "en"},
            ],
        },
    )
    body = refused(client.call("POST", "/runs", {"workflowId": workflow_id, "inputs": {"other": 1}}), 400, "validation_error")
    assert body["details"] == {"field": "inputs", "missing": ["title"]}
    assert client.start(workflow_id, inputs={"title": "t"})["status"] == "completed"


# -- run ids and tenants -------------------------------------------------------------------------------


def request_on(client: Api, route: wiring.Route, run_id: str, key: str | None = None) -> requests.Response:
    # A valid body for each route, so only the id can be what is refused.
    body = {"resumeValue": {"action": "accept"}} if route.operation == "resolveInterruptByRun" else None
    path = path_of(route, run_id) + ("?timeout=1" if route.operation == "pollRunEvents" else "")
    return client.call(route.method, path, body, key)


@pytest.mark.parametrize("route", RUN_ROUTES, ids=lambda r: r.operation)
def test_an_unknown_run_is_not_found(client: Api, route: wiring.Route) -> None:
    refused(request_on(client, route, UNKNOWN_RUN), 404, "not_found")


@pytest.mark.parametrize("route", RUN_ROUTES, ids=lambda r: r.operation)
def test_another_tenants_run_id_is_refused_before_lookup(client: Api, foreign_run: str, route: wiring.Route) -> None:
    existing = refused(request_on(client, route, foreign_run), 403, "id_tenant_mismatch")
    missing = refused(request_on(client, route, FOREIGN_UNKNOWN_RUN), 403, "id_tenant_mismatch")
    # The same answer whether or not the run exists: a foreign id discloses nothing.
    assert existing == missing


def test_the_foreign_run_is_untouched_by_refused_requests(client: Api, foreign_run: str, other_tenant_key: str) -> None:
    request_on(client, ROUTES["cancelRun"], foreign_run)
    request_on(client, ROUTES["resolveInterruptByRun"], foreign_run)
    assert client.run(foreign_run, key=other_tenant_key)["status"] == "waiting-approval"


def test_the_other_tenant_cannot_reach_a_demo_run(client: Api, waiting_run: str, other_tenant_key: str) -> None:
    refused(request_on(client, ROUTES["getRun"], waiting_run, other_tenant_key), 403, "id_tenant_mismatch")


@pytest.mark.parametrize(
    "segment",
    ["demo~ZZN0-such-run-xxxxxxxxxxxx", "demo~2", "demo~2FN0-such-run-~", "N0-such-run-xxxxxxxxxxxx", "demo~2Fshort"],
    ids=["tilde-not-hex", "tilde-truncated", "tilde-at-end", "not-tenant-bound", "opaque-too-short"],
)
@pytest.mark.parametrize("route", RUN_ROUTES, ids=lambda r: r.operation)
def test_a_malformed_run_id_is_a_validation_error(client: Api, route: wiring.Route, segment: str) -> None:
    path = route.path.replace("{runId}", segment).replace("{nodeId}", "gate")
    body = refused(client.call(route.method, path, {"resumeValue": {"action": "accept"}}), 400, "validation_error")
    assert body["details"] == {"field": "runId"}


def test_percent_encoded_run_ids_are_accepted_too(client: Api, waiting_run: str) -> None:
    refused(client.call("GET", "/runs/" + UNKNOWN_RUN.replace("/", "%2F")), 404, "not_found")
    got = client.call("GET", "/runs/" + waiting_run.replace("/", "%2F"))
    assert got.status_code == 200, got.text


# -- authentication and scopes -------------------------------------------------------------------------


@pytest.mark.parametrize("route", SCOPED_ROUTES, ids=lambda r: r.operation)
def test_a_scoped_route_without_authorization_is_unauthenticated(client: Api, route: wiring.Route) -> None:
    got = client.session.request(route.method, client.base_url + path_of(route), json={}, timeout=30)
    refused(got, 401, "unauthenticated")
    assert got.headers["WWW-Authenticate"].startswith("Bearer ")


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer",
        "Bearer not-a-key",
        "Basic ZGVtbzpkZW1v",
        "Bearer il_0123456789abcdef_" + "A" * 43,
        "Bearer il_0123456789ABCDEF_" + "A" * 43,
        "Bearer il_0123456789abcdef_" + "A" * 42,
    ],
    ids=["empty-bearer", "garbage", "basic", "unknown-key", "uppercase-key-id", "short-secret"],
)
def test_a_wrong_credential_is_unauthenticated(client: Api, authorization: str) -> None:
    got = client.session.post(client.base_url + "/runs", json={}, headers={"Authorization": authorization}, timeout=30)
    refused(got, 401, "unauthenticated")
    assert got.headers["WWW-Authenticate"].startswith("Bearer ")


def test_a_real_key_id_with_a_wrong_secret_is_unauthenticated(client: Api) -> None:
    key = client.new_key(["runs:read"])
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    got = client.call("GET", "/runs/" + wire(UNKNOWN_RUN), key=tampered)
    refused(got, 401, "unauthenticated")
    # The genuine key passes authentication and reaches the lookup.
    refused(client.call("GET", "/runs/" + wire(UNKNOWN_RUN), key=key), 404, "not_found")


@pytest.mark.parametrize("route", SCOPED_ROUTES, ids=lambda r: r.operation)
def test_a_key_missing_the_routes_scope_is_forbidden(
    client: Api, keys_without: dict[str, str], waiting_run: str, route: wiring.Route
) -> None:
    assert route.scope is not None
    key = key_without(client, keys_without, route.scope)
    body = refused(request_on(client, route, waiting_run, key), 403, "forbidden")
    assert body["details"] == {"scopeRequired": route.scope}
    assert client.run(waiting_run)["status"] == "waiting-approval"


def test_a_key_cannot_grant_scopes_its_creator_lacks(client: Api) -> None:
    creator = client.new_key(["keys:admin", "runs:read"])
    got = client.call("POST", "/keys", {"subjectId": "bob", "scopes": ["runs:read", "runs:create"]}, key=creator)
    assert refused(got, 403, "forbidden")["details"] == {"scopes": ["runs:create"]}
    allowed = client.call("POST", "/keys", {"subjectId": "bob", "scopes": ["runs:read"]}, key=creator)
    assert allowed.status_code == 201, allowed.text


@pytest.mark.parametrize(
    ("key_body", "path"),
    [
        ({"subjectId": "bob", "scopes": []}, "scopes"),
        ({"subjectId": "bob", "scopes": ["runs:everything"]}, "scopes/0"),
        ({"subjectId": "has space", "scopes": ["runs:read"]}, "subjectId"),
        ({"subjectId": "bob", "scopes": ["runs:read"], "kind": "robot"}, "kind"),
    ],
)
def test_create_key_validates_its_body(client: Api, key_body: dict[str, Any], path: str) -> None:
    assert error_paths(refused(client.call("POST", "/keys", key_body), 400, "validation_error")) == [path]


# -- resolving interrupts ------------------------------------------------------------------------------


def test_a_resume_value_failing_the_schema_leaves_the_run_waiting(client: Api, clarification_wf: str) -> None:
    run_id = client.start(clarification_wf)["runId"]
    assert client.run(run_id)["status"] == "waiting-input"
    for bad in ({"q1": 5}, {"q1": ""}, {"q1": "blue", "q2": "extra"}, {}, "blue"):
        body = refused(client.resolve(run_id, "ask", bad), 400, "validation_error")
        assert body["details"]["field"] == "resumeValue"
        assert body["details"]["errors"]
        snapshot = client.run(run_id)
        assert snapshot["status"] == "waiting-input"
        assert "ask" in snapshot["extensions"]["interlude.run"]["openInterrupts"]
    # Still answerable after the refusals.
    assert client.resolve(run_id, "ask", {"q1": "blue"}).json()["status"] == "completed"


def test_an_approval_with_an_unknown_field_fails_the_resume_schema(client: Api, waiting_run: str) -> None:
    body = refused(client.resolve(waiting_run, "gate", {"action": "accept", "colour": "red"}), 400, "validation_error")
    assert body["details"]["field"] == "resumeValue"
    assert client.run(waiting_run)["status"] == "waiting-approval"


def test_an_action_the_gate_does_not_offer_is_refused(client: Api, waiting_run: str) -> None:
    body = refused(client.resolve(waiting_run, "gate", {"action": "refine", "refineFeedback": {"scope": "whole"}}), 400)
    assert body["error"] == "validation_error"
    assert body["details"]["field"] == "resumeValue.action"
    assert body["details"]["actions"] == ["accept", "reject"]
    assert client.run(waiting_run)["status"] == "waiting-approval"


def test_a_resume_may_not_claim_a_timeout(client: Api, waiting_run: str) -> None:
    body = refused(client.resolve(waiting_run, "gate", {"action": "timeout"}), 400, "validation_error")
    assert body["details"]["field"] == "resumeValue.action"
    assert client.run(waiting_run)["status"] == "waiting-approval"


@pytest.mark.parametrize("resume_value", ["accept", None, ["accept"], {"decision": "accept"}, {"action": 1}])
def test_an_approval_resume_value_must_be_an_object_with_an_action(client: Api, waiting_run: str, resume_value: Any) -> None:
    body = refused(client.resolve(waiting_run, "gate", resume_value), 400, "validation_error")
    assert body["details"]["field"] == "resumeValue"
    assert client.run(waiting_run)["status"] == "waiting-approval"


def test_resolving_an_unknown_node_is_not_found(client: Api, waiting_run: str) -> None:
    body = refused(client.resolve(waiting_run, "no-such-node", {"action": "accept"}), 404, "not_found")
    assert "no-such-node" in body["message"]


def test_resolving_a_node_that_raised_no_interrupt_is_not_found(client: Api, gate_then_publish_wf: str) -> None:
    run_id = client.start(gate_then_publish_wf)["runId"]
    refused(client.resolve(run_id, "publish", {"action": "accept"}), 404, "not_found")
    assert client.run(run_id)["status"] == "waiting-approval"


def test_a_malformed_node_id_is_a_validation_error(client: Api, waiting_run: str) -> None:
    got = client.call("POST", f"/runs/{wire(waiting_run)}/interrupts/bad%20node", {"resumeValue": {"action": "accept"}})
    assert refused(got, 400, "validation_error")["details"] == {"field": "nodeId"}


def test_resolving_after_completion_is_already_resolved(client: Api, fresh_run: str) -> None:
    assert client.resolve(fresh_run, "gate", {"action": "accept"}).json()["status"] == "completed"
    body = refused(client.resolve(fresh_run, "gate", {"action": "reject"}), 409, "interrupt_already_resolved")
    assert body["details"]["runStatus"] == "completed"
    assert client.run(fresh_run)["status"] == "completed"


def test_resolving_on_a_cancelled_run_is_already_resolved(client: Api, fresh_run: str) -> None:
    assert client.call("POST", f"/runs/{wire(fresh_run)}/cancel", {"reason": "no longer needed"}).status_code == 200
    body = refused(client.resolve(fresh_run, "gate", {"action": "accept"}), 409, "interrupt_already_resolved")
    assert body["details"]["runStatus"] == "cancelled"
    assert client.run(fresh_run)["status"] == "cancelled"


@pytest.mark.parametrize("ending", ["completed", "cancelled", "failed"])
def test_cancelling_a_terminal_run_is_run_terminal(client: Api, fresh_run: str, ending: str) -> None:
    if ending == "cancelled":
        assert client.call("POST", f"/runs/{wire(fresh_run)}/cancel").status_code == 200
    else:
        client.resolve(fresh_run, "gate", {"action": "accept" if ending == "completed" else "reject"})
    assert client.run(fresh_run)["status"] == ending
    body = refused(client.call("POST", f"/runs/{wire(fresh_run)}/cancel", {"reason": "again"}), 409, "run_terminal")
    assert body["details"] == {"runStatus": ending}


def test_a_second_vote_by_the_same_principal_is_refused(client: Api) -> None:
    workflow_id = register(
        client, {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "t", "requiredApprovals": 2}}]}
    )
    run_id = client.start(workflow_id)["runId"]
    assert client.resolve(run_id, "gate", {"action": "accept"}).json()["status"] == "waiting-approval"
    refused(client.resolve(run_id, "gate", {"action": "accept"}), 409, "interlude.vote_already_cast")
    assert client.run(run_id)["status"] == "waiting-approval"


def test_an_ineligible_approver_is_forbidden(client: Api) -> None:
    workflow_id = register(
        client, {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "t", "approversList": ["alice"]}}]}
    )
    run_id = client.start(workflow_id)["runId"]
    body = refused(client.resolve(run_id, "gate", {"action": "accept"}), 403, "forbidden")
    assert body["details"] == {"field": "approversList"}
    alice = client.new_key(["approvals:respond"], subject="alice")
    assert client.resolve(run_id, "gate", {"action": "accept"}, key=alice).json()["status"] == "completed"


# -- polling -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("afterSequence=abc", "afterSequence"),
        ("afterSequence=-1", "afterSequence"),
        ("afterSequence=1.5", "afterSequence"),
        ("afterSequence=", "afterSequence"),
        ("afterSequence=10000000000000", "afterSequence"),
        ("timeout=0", "timeout"),
        ("timeout=61", "timeout"),
        ("timeout=soon", "timeout"),
    ],
)
def test_poll_refuses_bad_query_values(client: Api, waiting_run: str, query: str, field: str) -> None:
    got = client.call("GET", f"/runs/{wire(waiting_run)}/events/poll?{query}")
    assert refused(got, 400, "validation_error")["details"] == {"field": field}


# -- routing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/nope", "/runs/demo~2Fabcdefghijklmnopqr/nope", "/v2/runs", "/workflows/a/b/c"])
@pytest.mark.parametrize("authorized", [True, False])
def test_an_unknown_route_is_not_found(client: Api, path: str, authorized: bool) -> None:
    headers = client.headers() if authorized else {}
    refused(client.session.get(client.base_url + path, headers=headers, timeout=30), 404, "not_found")


@pytest.mark.parametrize(("method", "path"), [("DELETE", "/runs"), ("DELETE", "/runs/" + wire(UNKNOWN_RUN))])
def test_an_unserved_method_on_a_known_path_is_method_not_allowed(client: Api, method: str, path: str) -> None:
    got = client.call(method, path)
    # Which code carries the 405 is left open: method_not_allowed itself is outside the OpenWOP envelope.
    refused(got, 405, "interlude.method_not_allowed")
    assert got.headers.get("Allow")


# -- hostile inputs that currently crash the handler ---------------------------------------------------


# Random text: stored documents are deflated, so a repetitive blob would fit in an item.
INCOMPRESSIBLE_900K = secrets.token_urlsafe(675_000)


def hostile_cases() -> list[Any]:
    return [
        pytest.param(
            "createRun", b'\xff\xfe{"workflowId": "x"}', {400}, "validation_error", id="invalid-utf8-body",
        ),
        pytest.param(
            "createRun", "[" * 5000 + "]" * 5000, {400}, "validation_error", id="json-nested-5000-deep",
        ),
        pytest.param(
            "createRun", {"inputs": {"deep": nested(300)}}, {400}, "validation_error", id="inputs-nested-300-deep",
        ),
        pytest.param(
            "createRun", {"inputs": {"blob": INCOMPRESSIBLE_900K}}, {400, 413}, None, id="inputs-over-the-item-limit",
        ),
        pytest.param(
            "putWorkflow", {"nodes": [{"id": "a", "typeId": "core.transform", "config": {"outputs": nested(300)}}]},
            {400}, "validation_error", id="workflow-config-nested-300-deep",
        ),
        pytest.param(
            "resolveInterruptByRun", '{"resumeValue": {"action": "accept", "comment": "\\ud800"}}', {400},
            "validation_error", id="resume-value-lone-surrogate",
        ),
        pytest.param(
            "resolveInterruptByRun", {"action": "accept", "editedArtifactData": nested(300)}, {400},
            "validation_error", id="resume-value-nested-300-deep",
        ),
    ]


@pytest.mark.parametrize(("operation", "payload", "statuses", "code"), hostile_cases())
def test_hostile_input_is_refused_not_crashed(
    client: Api, noop_wf: str, fresh_run: str, operation: str, payload: Any, statuses: set[int], code: str | None
) -> None:
    route = ROUTES[operation]
    if operation == "createRun" and isinstance(payload, dict):
        payload = {"workflowId": noop_wf, **payload}
    elif operation == "resolveInterruptByRun" and isinstance(payload, dict):
        payload = {"resumeValue": payload}
    got = client.call(route.method, path_of(route, fresh_run, workflow_id=f"wf-{uuid.uuid4().hex[:8]}"), payload)
    refused(got, statuses, code)
    assert client.run(fresh_run)["status"] == "waiting-approval"


# -- the OpenAPI document ------------------------------------------------------------------------------


@pytest.mark.parametrize("code", list(ERROR_CODES))
def test_every_registered_code_fits_the_openwop_envelope(code: str) -> None:
    assert schemas.errors_of(ENVELOPE, {"error": code, "message": "m"}) == []
    # A code the OpenWOP registry knows keeps the registry's status.
    registry = schemas.load("error-envelope.schema.json")["x-openwop-http-status"]
    assert registry.get(code, status_for_code(code)) == status_for_code(code)


def test_openapi_lists_every_route_with_its_answers_and_every_returned_error_code(client: Api) -> None:
    got = client.session.get(client.base_url + "/openapi.json", timeout=30)
    assert got.status_code == 200, got.text
    document = got.json()
    for route in wiring.ROUTES:
        operation = document["paths"][route.path][route.method.lower()]
        assert operation["operationId"] == route.operation
        assert operation["security"] == ([{"bearer": [route.scope]}] if route.scope else [])
        responses = operation["responses"]
        assert "default" not in responses, "every answer is declared by its status"
        # A success, or for `/` alone the way to the console (303).
        assert any(status.startswith("2") or (route.path, status) == ("/", "303") for status in responses), route.operation
        declared = {code for status, codes in contract.error_statuses(route).items() for code in codes}
        for status, codes in contract.error_statuses(route).items():
            assert str(status) in responses, (route.operation, status)
            assert all(status_for_code(c, route.face) == status for c in codes)
        assert "internal_error" in declared
    listed = set(document["components"]["schemas"]["Error"]["properties"]["error"]["enum"])
    assert listed <= set(ERROR_CODES)
    # CODES_SEEN holds what the tests above actually received (all of them when the module runs whole).
    returned = RETURNED_CODES | CODES_SEEN
    assert returned <= set(ERROR_CODES)
    assert returned - listed == set()
