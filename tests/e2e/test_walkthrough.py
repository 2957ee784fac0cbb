"""The README walk-through over HTTP against the local stack, the OpenWOP client from PyPI, and the resolve race."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import openwop_client
import requests

from interlude import wiring
from interlude.domain import schemas
from tests.support.local_stack import tenant_admin_key, wire


def test_conformance_approval_waits_then_completes_with_a_schema_valid_log(api):
    workflow = api.fixture("conformance-approval")
    created = api.start(workflow)
    assert created["status"] == "waiting-approval"
    assert created["eventsUrl"].startswith(api.base_url)
    assert wire(created["runId"]) in created["eventsUrl"]
    snap = api.run(created["runId"])
    assert snap["status"] == "waiting-approval"
    assert snap["currentNodeId"] == "gate"
    assert schemas.validator("run-snapshot.schema.json").is_valid(snap), schemas.errors_of(
        schemas.validator("run-snapshot.schema.json"), snap
    )

    got = api.resolve(created["runId"], "gate", {"action": "accept"})
    assert got.status_code == 200
    assert got.json() == {"runId": created["runId"], "nodeId": "gate", "status": "completed"}

    events = api.events(created["runId"])
    assert [e["type"] for e in events] == [
        "run.started",
        "node.started",
        "interrupt.requested",
        "approval.requested",
        "node.suspended",
        "interrupt.resolved",
        "approval.granted",
        "node.resumed",
        "node.completed",
        "run.completed",
    ]
    assert [e["sequence"] for e in events] == list(range(len(events)))
    envelope = schemas.validator("run-event.schema.json")
    assert all(envelope.is_valid(e) for e in events)
    assert all(schemas.payload_validator(e["type"]).is_valid(e["payload"]) for e in events)
    final = api.run(created["runId"])
    assert final["status"] == "completed"
    assert "currentNodeId" not in final
    assert schemas.validator("run-snapshot.schema.json").is_valid(final)


def test_poll_cursor_is_exclusive_and_reports_the_end(api):
    run = api.start(api.fixture("conformance-approval"))
    first = api.call("GET", f"/runs/{wire(run['runId'])}/events/poll?afterSequence=1&timeout=1").json()
    assert [e["sequence"] for e in first["events"]] == [2, 3, 4]
    assert first["lastSequence"] == 4
    assert first["isTerminal"] is False
    assert first["status"] == "waiting-approval"
    past = api.call("GET", f"/runs/{wire(run['runId'])}/events/poll?afterSequence=99&timeout=1").json()
    assert past["events"] == []


def test_percent_encoded_run_ids_are_accepted_too(api):
    run = api.start(api.fixture("conformance-approval"))
    got = api.call("GET", "/runs/" + run["runId"].replace("/", "%2F"))
    assert got.status_code == 200
    assert got.json()["runId"] == run["runId"]


def test_the_openwop_client_drives_a_run_to_completion(api):
    client = openwop_client.OpenwopClient(api.base_url, api.api_key)
    caps = client.discovery_capabilities()
    assert caps is not None
    workflow = api.fixture("conformance-approval")
    created = client.runs_create(openwop_client.CreateRunRequest(workflowId=workflow, inputs={}))
    assert created.status == "waiting-approval"
    snapshot = client.runs_get(created.runId)
    assert snapshot.status == "waiting-approval"
    assert snapshot.currentNodeId == "gate"
    resolved = client.interrupts_resolve_by_run(
        created.runId, "gate", openwop_client.ResolveInterruptRequest(resumeValue={"action": "accept"})
    )
    assert (resolved.runId, resolved.nodeId, resolved.status) == (created.runId, "gate", "completed")
    polled = client.runs_poll_events(created.runId, after_sequence=4, timeout_seconds=1)
    assert [e.type for e in polled.events] == [
        "interrupt.resolved",
        "approval.granted",
        "node.resumed",
        "node.completed",
        "run.completed",
    ]
    assert polled.isTerminal is True


def test_fifty_concurrent_resolves_have_exactly_one_winner(api):
    run = api.start(api.fixture("conformance-approval"))
    url = f"{api.base_url}/runs/{wire(run['runId'])}/interrupts/gate"
    barrier = threading.Barrier(50)

    def resolve(i: int) -> requests.Response:
        barrier.wait()
        return requests.post(
            url, json={"resumeValue": {"action": "accept" if i % 2 else "reject"}}, headers=api.headers(), timeout=60
        )

    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(resolve, range(50)))
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] + [409] * 49
    assert {a.json()["error"] for a in answers if a.status_code == 409} == {"interrupt_already_resolved"}
    events = api.events(run["runId"])
    assert [e["type"] for e in events].count("interrupt.resolved") == 1
    assert [e["sequence"] for e in events] == list(range(len(events)))


def test_discovery_and_openapi_describe_the_served_routes(api):
    caps = requests.get(api.base_url + "/.well-known/openwop", timeout=10)
    assert caps.status_code == 200
    assert caps.headers["OpenWOP-Version"] == "2.0"
    doc = requests.get(api.base_url + "/openapi.json", timeout=10).json()
    served = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    assert served == {(r.method, r.path) for r in wiring.ROUTES}


def test_tenants_never_see_each_other(api, stack_info):
    # A second tenant's admin key, made with the CLI against the running stack.
    other_key = tenant_admin_key(stack_info, "other", "o-admin")
    run = api.start(api.fixture("conformance-approval"))
    foreign = api.call("GET", f"/runs/{wire(run['runId'])}", key=other_key)
    assert foreign.status_code == 403
    assert foreign.json()["error"] == "id_tenant_mismatch"
    missing = api.call("GET", f"/runs/{wire('demo/' + uuid.uuid4().hex)}", key=other_key)
    assert missing.status_code == 403
    assert missing.json()["error"] == "id_tenant_mismatch"
    assert api.call("GET", f"/workflows/{run['runId'].split('/')[0]}", key=other_key).status_code == 404
    resolve = api.resolve(run["runId"], "gate", {"action": "accept"}, key=other_key)
    assert resolve.status_code == 403
    assert api.run(run["runId"])["status"] == "waiting-approval"


def test_concurrent_requests_never_see_each_others_input(api):
    # Each request carries its own inputs and key; every answer must be about its own request.
    workflow = api.fixture("conformance-noop")
    keys = [api.new_key(["runs:create", "runs:read"], subject=f"parallel-{i}") for i in range(4)]
    barrier = threading.Barrier(24)

    def create(i: int) -> tuple[int, dict]:
        barrier.wait()
        got = api.call("POST", "/runs", {"workflowId": workflow, "inputs": {"nonce": f"n-{i}"}}, key=keys[i % 4])
        return i, got.json()

    with ThreadPoolExecutor(max_workers=24) as pool:
        results = list(pool.map(create, range(24)))
    for i, created in results:
        snap = api.run(created["runId"])
        assert snap["inputs"] == {"nonce": f"n-{i}"}
        assert snap["owner"]["subject"]["subjectId"] == f"parallel-{i % 4}"
