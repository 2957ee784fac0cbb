"""Issue 14 item 1 over HTTP against the local stack: `PUT/GET/DELETE /principals/{principalId}` (keys:admin),
each refusal with its declared code."""

from __future__ import annotations

import uuid

from interlude import wiring
from interlude.api import contract
from tests.support.local_stack import Api, tenant_admin_key


def tenant_api(stack_info: dict[str, str]) -> Api:
    tenant = f"dir-{uuid.uuid4().hex[:6]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, tenant), tenant)


def declared(operation: str, code: str) -> bool:
    route = next(r for r in wiring.ROUTES if r.operation == operation)
    return code in contract.error_codes(route)


def test_an_entry_is_created_replaced_read_and_removed(stack_info: dict[str, str]) -> None:
    api = tenant_api(stack_info)
    body = {
        "displayName": "Alice Example",
        "email": "alice@example.com",
        "slackUserId": "U012ABCDEF",
        "groups": ["ops"],
        "timeZone": "Europe/Paris",
        "channels": ["slack", "email"],
        "outOfOffice": {"delegate": "bob", "from": "2026-12-24T00:00:00Z", "until": "2027-01-02T00:00:00Z"},
    }
    created = api.call("PUT", "/principals/alice", body)
    assert created.status_code == 201, created.text
    assert created.json()["outOfOffice"] == {
        "delegate": "bob",
        "from": "2026-12-24T00:00:00Z",
        "until": "2027-01-02T00:00:00Z",
    }
    replaced = api.call("PUT", "/principals/alice", {**body, "roles": ["lead"]})
    assert replaced.status_code == 200, replaced.text
    got = api.call("GET", "/principals/alice")
    assert got.status_code == 200
    assert got.json()["roles"] == ["lead"]
    assert got.json()["timeZone"] == "Europe/Paris"
    assert api.call("DELETE", "/principals/alice").status_code == 200
    missing = api.call("GET", "/principals/alice")
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"
    again = api.call("DELETE", "/principals/alice")
    assert again.status_code == 404
    assert again.json()["error"] == "not_found"


def test_refusals_are_the_declared_codes(stack_info: dict[str, str]) -> None:
    api = tenant_api(stack_info)
    bad_zone = api.call("PUT", "/principals/alice", {"timeZone": "Mars/Olympus"})
    assert bad_zone.status_code == 400
    assert bad_zone.json()["error"] == "validation_error"
    assert bad_zone.json()["details"]["errors"][0]["path"] == "timeZone"
    bad_id = api.call("GET", "/principals/has%20space")
    assert bad_id.status_code == 400
    assert bad_id.json()["details"]["field"] == "principalId"
    reader = api.new_key(["runs:read"])
    forbidden = api.call("GET", "/principals/alice", key=reader)
    assert forbidden.status_code == 403
    assert forbidden.json()["error"] == "forbidden"
    for operation, code in (
        ("putPrincipal", "validation_error"),
        ("getPrincipal", "not_found"),
        ("deletePrincipal", "not_found"),
        ("putPrincipal", "interlude.quota_exceeded"),
        ("getPrincipal", "forbidden"),
    ):
        assert declared(operation, code), (operation, code)
