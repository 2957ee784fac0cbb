"""Issue 26, S8 and S9 over HTTP against the local stack: an id or a name is matched whole (a trailing newline or a
NUL is not part of any grammar), and a principal cannot name itself its out-of-office delegate. Each refusal is a 400
in the OpenWOP envelope naming the field."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import requests

from tests.support.local_stack import Api, tenant_admin_key


@pytest.fixture(scope="module")
def tenant(stack_info: dict[str, str]) -> Api:
    name = f"ids-{uuid.uuid4().hex[:6]}"
    return Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)


def refused(got: requests.Response, field: str) -> dict[str, Any]:
    assert got.status_code == 400, got.text
    body = got.json()
    assert set(body) <= {"error", "message", "details"}
    assert body["error"] == "validation_error"
    assert body["message"]
    assert field in str(body.get("details")), body
    return body


def http_node(headers: dict[str, str]) -> dict[str, Any]:
    return {
        "nodes": [{"id": "call", "typeId": "core.http", "config": {"url": "https://8.8.8.8/hook", "headers": headers}}],
        "edges": [],
    }


def test_a_workflow_id_with_a_trailing_newline_is_refused(tenant: Api) -> None:
    definition = {"nodes": [{"id": "only", "typeId": "core.noop"}], "edges": []}
    refused(tenant.put_workflow("nl-wf%0A", definition), "workflowId")
    # Nothing was registered under either spelling.
    assert tenant.call("GET", "/workflows/nl-wf%0A").status_code == 400
    assert tenant.call("GET", "/workflows/nl-wf").status_code == 404
    assert tenant.put_workflow("nl-wf", definition).status_code == 201


@pytest.mark.parametrize("principal_id", ["alice%0A", "%00", "al%00ice", "alice%1B"])
def test_a_principal_id_with_a_newline_or_a_control_character_is_refused(tenant: Api, principal_id: str) -> None:
    refused(tenant.call("PUT", f"/principals/{principal_id}", {"displayName": "Alice"}), "principalId")
    refused(tenant.call("GET", f"/principals/{principal_id}"), "principalId")


@pytest.mark.parametrize("name", ["alice\n", "\u0000", "al\u0000ice"])
def test_names_inside_bodies_are_matched_whole_too(tenant: Api, name: str) -> None:
    # A directory entry's delegate and groups, a key's subject: the same grammar as the path's principalId.
    refused(tenant.call("PUT", "/principals/carol", {"outOfOffice": {"delegate": name}}), "outOfOffice")
    refused(tenant.call("PUT", "/principals/carol", {"groups": [name]}), "groups")
    refused(tenant.call("POST", "/keys", {"subjectId": name, "scopes": ["runs:read"]}), "subjectId")


def test_an_event_filter_with_a_trailing_newline_is_refused(tenant: Api) -> None:
    body = {"url": "https://8.8.8.8/hook", "events": ["run.completed", "zz.never\n"]}
    refused(tenant.call("POST", "/webhooks", body), "events[1]")


def test_a_core_http_header_name_with_a_trailing_newline_is_refused(tenant: Api) -> None:
    refused(tenant.put_workflow(f"hdr-{uuid.uuid4().hex[:6]}", http_node({"X-Test\n": "1"})), "headers")
    assert tenant.put_workflow(f"hdr-{uuid.uuid4().hex[:6]}", http_node({"X-Test": "1"})).status_code == 201


def test_a_principal_cannot_be_its_own_out_of_office_delegate(tenant: Api) -> None:
    body = refused(tenant.call("PUT", "/principals/dana", {"outOfOffice": {"delegate": "dana"}}), "outOfOffice.delegate")
    assert body["details"] == {"field": "outOfOffice.delegate"}
    assert "themselves" in body["message"]
    assert tenant.call("GET", "/principals/dana").status_code == 404
    # Another delegate is fine, and so is replacing the entry with itself as delegate refused again.
    assert tenant.call("PUT", "/principals/dana", {"outOfOffice": {"delegate": "erin"}}).status_code == 201
    refused(tenant.call("PUT", "/principals/dana", {"outOfOffice": {"delegate": "dana"}}), "outOfOffice.delegate")
    assert tenant.call("GET", "/principals/dana").json()["outOfOffice"]["delegate"] == "erin"
