"""Issue 11 findings 5 and 6 over HTTP: strict JSON at the edge of every route (and a strictly JSON event log),
and links built from configuration, never from the caller's Host or forwarding headers."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import requests

from tests.support.local_stack import wire
from tests.support.modulex_example import WORKED_EXAMPLE

# Each a request body that Python's json reads but a strict parser (JavaScript, Go) refuses, and the field named.
NON_JSON_NUMBERS = [
    ('{"workflowId":"%s","inputs":{"x":NaN}}', "inputs/x"),
    ('{"workflowId":"%s","inputs":{"x":Infinity}}', "inputs/x"),
    ('{"workflowId":"%s","inputs":{"x":[1,-Infinity]}}', "inputs/x/1"),
    ('{"workflowId":"%s","inputs":{"x":1e400}}', "inputs/x"),
    ('{"workflowId":"%s","inputs":{"x":-1e400}}', "inputs/x"),
    ('{"workflowId":"%s","inputs":{"x":' + "9" * 400 + "}}", "inputs/x"),
]
DUPLICATE_KEYS = [
    ('{"workflowId":"%s","workflowId":"other"}', "body"),
    ('{"workflowId":"%s","inputs":{"a":1,"a":2}}', "inputs"),
]


def strict_loads(text: str) -> Any:
    """What a JavaScript or Go client does with the text: no NaN, no Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def gate_workflow(api) -> str:
    workflow_id = f"strict-{uuid.uuid4().hex[:8]}"
    definition = {
        "nodes": [
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ok?", "actions": ["accept", "reject"]}},
            {"id": "after", "typeId": "core.noop"},
        ],
        "edges": [{"sourceNodeId": "gate", "targetNodeId": "after"}],
    }
    assert api.put_workflow(workflow_id, definition).status_code == 201
    return workflow_id


@pytest.mark.parametrize(("template", "field"), NON_JSON_NUMBERS + DUPLICATE_KEYS)
def test_create_run_refuses_what_strict_parsers_refuse_naming_the_field(api, template, field):
    got = api.call("POST", "/runs", template % gate_workflow(api))
    assert got.status_code == 400, got.text
    assert got.json()["error"] == "validation_error"
    assert got.json()["details"]["field"] == field


def test_a_resolve_and_a_workflow_refuse_non_json_numbers_too(api):
    run_id = api.start(gate_workflow(api))["runId"]
    got = api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate", '{"resumeValue":{"action":"accept","n":NaN}}')
    assert (got.status_code, got.json()["details"]["field"]) == (400, "resumeValue/n")
    assert api.run(run_id)["status"] == "waiting-approval"
    got = api.call("PUT", f"/workflows/strict-{uuid.uuid4().hex[:6]}", '{"nodes":[],"nodes":[]}')
    assert (got.status_code, got.json()["error"]) == (400, "validation_error")


def test_modulex_routes_refuse_them_as_detail(api):
    body = json.dumps({"workflow": WORKED_EXAMPLE, "input": {"request": "x"}})[:-1] + ',"input":{"n":Infinity}}'
    got = api.call("POST", "/workflows/run", body)
    assert got.status_code == 400, got.text
    assert set(got.json()) == {"detail"}
    assert "input" in got.json()["detail"]
    assert got.headers["X-Interlude-Error"] == "validation_error"


def test_the_event_log_and_every_answer_are_strict_json(api):
    # A body a client may legitimately send: big, small and negative finite numbers, unicode, nulls.
    inputs = {"big": 1.7976931348623157e308, "tiny": 5e-324, "neg": -0.0, "int": 2**63, "s": "\u202eé\u200b😀"}
    run_id = api.start(gate_workflow(api), inputs=inputs)["runId"]
    snapshot = strict_loads(api.call("GET", f"/runs/{wire(run_id)}").text)
    assert snapshot["inputs"] == inputs
    assert api.resolve(run_id, "gate", {"action": "accept"}).status_code == 200
    api.wait_status(run_id, {"completed"})
    polled = strict_loads(api.call("GET", f"/runs/{wire(run_id)}/events/poll?timeout=1").text)
    assert polled["events"][0]["type"] == "run.started"
    stream = api.call("GET", f"/runs/{wire(run_id)}/events")
    frames = [line[len("data:") :] for line in stream.text.splitlines() if line.startswith("data:")]
    assert frames
    assert all(strict_loads(frame) for frame in frames)


# -- links ----------------------------------------------------------------------------------------------

HOSTILE_HOST_HEADERS = [
    {"X-Forwarded-Host": "evil.example"},
    {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "http"},
    {"Host": "evil.example"},
    {"Forwarded": "host=evil.example;proto=http"},
    {"X-Forwarded-Host": "evil.example, also.evil", "X-Forwarded-Port": "666"},
]


@pytest.mark.parametrize("hostile", HOSTILE_HOST_HEADERS, ids=lambda h: ",".join(h))
def test_links_in_answers_follow_configuration_not_the_callers_headers(api, hostile):
    workflow_id = gate_workflow(api)
    created = api.call("POST", "/runs", {"workflowId": workflow_id}, **hostile)
    assert created.status_code == 201, created.text
    run_id = created.json()["runId"]
    assert created.json()["eventsUrl"] == f"{api.base_url}/runs/{wire(run_id)}/events"
    assert created.json()["statusUrl"] == f"{api.base_url}/runs/{wire(run_id)}"
    for method, body in (("GET", None), ("POST", {"intent": "inspect"})):
        got = api.call(method, f"/runs/{wire(run_id)}/interrupts/gate" + ("/tokens" if body else ""), body, **hostile)
        assert got.status_code in (200, 201), got.text
        assert got.json()["url"] == f"{api.base_url}/interrupts/{got.json()['token']}"
        assert "evil" not in got.text


def test_the_approval_page_posts_and_links_to_its_own_base_under_a_hostile_host(api):
    run_id = api.start(gate_workflow(api))["runId"]
    token = api.call("GET", f"/runs/{wire(run_id)}/interrupts/gate").json()["token"]
    page = requests.get(f"{api.base_url}/interrupts/{token}", headers={"X-Forwarded-Host": "evil.example"}, timeout=30)
    assert page.status_code == 200
    assert "evil.example" not in page.text
    assert "evil.example" not in json.dumps(dict(page.headers))
