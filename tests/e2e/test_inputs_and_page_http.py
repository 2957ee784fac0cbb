"""Issue 16 items 6 and 7 over HTTP against the local stack: a workflow declares its inputs and createRun refuses
missing or invalid ones in the OpenWOP envelope; the approval page says who asked, when (in the approver's time
zone from the directory, with UTC), which workflow and step by name, shows a value that could not be filled as
nothing (never a raw reference), never tells a view-only link it is waited for, and a reopened link says what was
decided, by whom and when."""

from __future__ import annotations

import uuid
from typing import Any

import requests

from tests.support.local_stack import Api, tenant_admin_key, wire

VARIABLES = [
    {"name": "amount", "type": "number", "required": True, "schema": {"minimum": 1, "maximum": 10000}},
    {"name": "customer", "type": "string", "required": True, "schema": {"minLength": 1}},
    {"name": "reason", "type": "string"},
]


def refund_workflow(api: Api) -> str:
    workflow_id = f"refund-{uuid.uuid4().hex[:6]}"
    definition = {
        "name": "Refund approval",
        "variables": VARIABLES,
        "nodes": [
            {"id": "draft", "typeId": "core.noop", "name": "Draft the refund"},
            {
                "id": "gate",
                "typeId": "core.approvalGate",
                "name": "Finance review",
                # `reason` is optional and not given: that value cannot be filled when the gate asks.
                "config": {"title": "Refund {{inputs.amount}} to {{inputs.customer}}", "description": "Note: {{inputs.reason}}"},
            },
        ],
        "edges": [{"sourceNodeId": "draft", "targetNodeId": "gate"}],
    }
    got = api.put_workflow(workflow_id, definition)
    assert got.status_code == 201, got.text
    return workflow_id


def refusal(got: requests.Response) -> dict[str, Any]:
    assert got.status_code == 400, got.text
    body = got.json()
    assert body["error"] == "validation_error"
    assert set(body) <= {"error", "message", "details"}
    return body


def test_create_run_refuses_missing_and_invalid_declared_inputs(stack_info: dict[str, str]) -> None:
    name = f"inputs-{uuid.uuid4().hex[:6]}"
    api = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    workflow_id = refund_workflow(api)

    missing = refusal(api.call("POST", "/runs", {"workflowId": workflow_id, "inputs": {"amount": 5}}))
    assert missing["details"] == {"field": "inputs", "missing": ["customer"]}
    invalid = refusal(api.call("POST", "/runs", {"workflowId": workflow_id, "inputs": {"amount": "ten", "customer": ""}}))
    assert invalid["details"]["field"] == "inputs"
    assert [e["path"] for e in invalid["details"]["errors"]] == ["inputs/amount", "inputs/customer"]
    assert "inputs/amount: 'ten' is not of type 'number'" in invalid["message"]
    too_much = refusal(api.call("POST", "/runs", {"workflowId": workflow_id, "inputs": {"amount": 20000, "customer": "Ada"}}))
    assert too_much["details"]["errors"][0]["path"] == "inputs/amount"
    assert api.call("POST", "/runs", {"workflowId": workflow_id, "inputs": {"amount": 42, "customer": "Ada"}}).status_code == 201

    # A declared schema that is not a JSON Schema is refused when the workflow is registered.
    broken = {"variables": [{"name": "x", "schema": {"type": "no-such-type"}}], "nodes": [{"id": "n", "typeId": "core.noop"}]}
    body = refusal(api.put_workflow(f"broken-{uuid.uuid4().hex[:6]}", broken))
    assert "schema is not a valid JSON Schema" in body["message"] + str(body.get("details"))


def test_the_page_names_who_asked_when_which_workflow_and_step_and_shows_no_raw_reference(stack_info: dict[str, str]) -> None:
    name = f"page-{uuid.uuid4().hex[:6]}"
    api = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    # The key's subject is `admin`: its directory entry names the person and their time zone.
    entry = {"displayName": "Ada Admin", "timeZone": "Asia/Tokyo"}
    assert api.call("PUT", "/principals/admin", entry).status_code in (200, 201)
    run_id = api.start(refund_workflow(api), inputs={"amount": 42, "customer": "Ada"})["runId"]
    minted = api.call("GET", f"/runs/{wire(run_id)}/interrupts/gate").json()

    page = requests.get(minted["url"], headers={"Accept": "text/html"}, timeout=30).text
    assert "<h1>Refund 42 to Ada</h1>" in page
    assert "<dt>Asked by</dt><dd>Ada Admin</dd>" in page
    assert "(Asia/Tokyo) · " in page
    assert " UTC</dd>" in page
    assert "<dt>Workflow</dt><dd>Refund approval</dd>" in page
    assert "<dt>Step</dt><dd>Finance review</dd>" in page
    assert "Draft the refund: done" in page
    assert "{{" not in page
    assert "inputs.reason" not in page
    assert "waiting for you" in page

    inspect = api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate/tokens", {"intent": "inspect"}).json()
    view_only = requests.get(inspect["url"], headers={"Accept": "text/html"}, timeout=30).text
    assert "View only" in view_only
    assert "waiting for you" not in view_only.lower()

    # Rejected through the link, then opened again: what was decided, by whom and when, not an error.
    assert requests.post(minted["url"], json={"resumeValue": {"action": "reject"}}, timeout=30).status_code == 200
    reopened = requests.get(minted["url"], headers={"Accept": "text/html"}, timeout=30)
    assert reopened.status_code == 409
    assert "<h1>Already decided</h1>" in reopened.text
    assert "Ada Admin rejected this request on " in reopened.text
    assert "(Asia/Tokyo) · " in reopened.text
    assert 'class="banner info"' in reopened.text
