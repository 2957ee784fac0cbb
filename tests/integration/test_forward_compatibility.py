"""Issue 30 item 1 in process (moto, the real api handler): what a later release stores, this one reads, answers in its
own schema and writes back whole, so rolling back one release strands nothing; an item in a format newer than it
reads is refused by name; and request bodies stay closed.

A "later release" here is simulated by adding to what this release stored the fields and attributes a later one could
add (tests/upgrade/ runs the real previous release against what this one writes)."""

from __future__ import annotations

import json
import zlib
from typing import Any

import boto3
import pytest

from interlude.composition import Services
from interlude.domain import formats
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.store import attributes as a
from interlude.store.layout import API_KEY_SK, RUN_SK, run_pk, workflow_pk, workflow_version_sk
from tests.integration.conftest import new_api_key, signed_in
from tests.support.local_stack import wire
from tests.support.moto_world import TABLE

FLOW = {
    "nodes": [
        {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}},
        {"id": "after", "typeId": "core.transform", "config": {"outputs": {"done": True}}},
    ],
    "edges": [{"sourceNodeId": "gate", "targetNodeId": "after"}],
}


def http(method: str, path: str, key: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    """A request through the real api handler, as the gateway hands it over."""
    sent = {"content-type": "application/json", "authorization": f"Bearer {key}", **headers}
    raw = b"" if body is None else json.dumps(body).encode()
    got = lambda_runtime.invoke("api", to_event(method, path, sent, raw, "127.0.0.1"))
    return got["statusCode"], json.loads(got["body"]) if got.get("body") else None


def table() -> Any:
    return boto3.client("dynamodb")


def item(pk: str, sk: str) -> dict[str, Any]:
    return table().get_item(TableName=TABLE, Key=a.key(pk, sk), ConsistentRead=True)["Item"]


def set_attributes(pk: str, sk: str, **values: dict[str, Any]) -> None:
    names = {f"#n{i}": name for i, name in enumerate(values)}
    table().update_item(
        TableName=TABLE,
        Key=a.key(pk, sk),
        UpdateExpression="SET " + ", ".join(f"#n{i} = :v{i}" for i in range(len(values))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={f":v{i}": value for i, value in enumerate(values.values())},
    )


def key_items() -> list[dict[str, Any]]:
    scanned = table().scan(TableName=TABLE, FilterExpression="sk = :k", ExpressionAttributeValues={":k": a.s(API_KEY_SK)})
    return list(scanned["Items"])


def state_document(run_id: str) -> dict[str, Any]:
    return json.loads(zlib.decompress(item(run_pk(run_id), RUN_SK)["state"]["B"]))


def a_waiting_run(services: Services) -> str:
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate(FLOW))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "wf"})).runId


def test_a_run_a_later_release_wrote_is_read_decided_and_written_back_whole(services):
    # Given a waiting run whose head a later release rewrote: a field in the document at the top and in a node's
    # state, and an attribute of the head item itself
    run_id = a_waiting_run(services)
    key = new_api_key(services)
    doc = state_document(run_id)
    doc["escalation"] = {"level": 2}
    doc["nodes"]["gate"]["retriedBy"] = ["later"]
    set_attributes(run_pk(run_id), RUN_SK, state=a.packed(doc), escalatedAt=a.s("2027-01-01T00:00:00.000Z"))

    # When this release shows it, decides its gate and runs it to its end
    status, snapshot = http("GET", f"/runs/{wire(run_id)}", key)
    assert (status, snapshot["status"]) == (200, "waiting-approval")
    status, _ = http("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    assert status == 200

    # Then the run finished here, and what the later release wrote is all still there for it
    after = state_document(run_id)
    assert after["status"] == "completed"
    assert after["escalation"] == {"level": 2}
    assert after["nodes"]["gate"]["retriedBy"] == ["later"]
    assert item(run_pk(run_id), RUN_SK)["escalatedAt"] == {"S": "2027-01-01T00:00:00.000Z"}


def test_stored_documents_a_later_release_wrote_are_answered_in_this_releases_schema_and_kept(services, tenant):
    key = new_api_key(services)
    # Given settings and a directory entry, each with a field (nested too) only a later release knows
    assert http("PUT", "/tenant/settings", key, {"eventRetentionHours": 12, "limits": {"openRuns": 50}})[0] == 200
    settings_key = (f"T#{tenant}", "SETTINGS")
    stored = a.unpacked(item(*settings_key)["settings"])
    stored["archiveAfterDays"] = 90
    stored["limits"]["retainedBytes"] = 10**9
    set_attributes(*settings_key, settings=a.as_json(stored))
    assert http("PUT", "/principals/ann", key, {"groups": ["ops"]})[0] == 201
    principal_key = (f"T#{tenant}#DIR", "P#ann")
    entry = a.unpacked(item(*principal_key)["entry"])
    set_attributes(*principal_key, entry=a.as_json({**entry, "pronouns": "she/her"}))

    # When this release reads them, they are answered without what it does not know
    status, answered = http("GET", "/tenant/settings", key)
    assert status == 200
    assert "archiveAfterDays" not in answered["settings"]
    assert "retainedBytes" not in answered["settings"]["limits"]
    status, principal = http("GET", "/principals/ann", key)
    assert (status, principal["groups"]) == (200, ["ops"])
    assert "pronouns" not in principal

    # and a client of this release replacing them whole (it can neither see nor clear those fields) keeps them
    assert http("PUT", "/tenant/settings", key, {"eventRetentionHours": 48})[0] == 200
    kept = a.unpacked(item(*settings_key)["settings"])
    assert (kept["eventRetentionHours"], kept["archiveAfterDays"], kept["limits"]) == (48, 90, {"retainedBytes": 10**9})
    assert http("PUT", "/principals/ann", key, {"groups": ["dev"]})[0] == 200
    assert a.unpacked(item(*principal_key)["entry"]) == {"groups": ["dev"], "roles": [], "pronouns": "she/her"}


# A world of its own: it rewrites every key item of the table.
@pytest.mark.private_world
def test_a_workflow_and_a_key_a_later_release_wrote_still_run_and_authenticate(services, tenant):
    admin = signed_in(services)
    key = new_api_key(services)
    # Given a workflow version whose definition and node config hold fields a later release added, and a key record
    # with one too
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate(FLOW))
    version_key = (workflow_pk(tenant, "wf"), workflow_version_sk(1))
    definition = a.unpacked(item(*version_key)["definition"])
    definition["owners"] = ["team-a"]
    definition["nodes"][0]["config"]["escalateAfterMs"] = 60_000
    set_attributes(*version_key, definition=a.as_json(definition))
    for key_item in key_items():
        record = a.unpacked(key_item["record"])
        set_attributes(key_item["pk"]["S"], API_KEY_SK, record=a.as_json({**record, "rotatedFrom": "k0"}))

    # When a run of it starts and is decided with that key
    status, created = http("POST", "/runs", key, {"workflowId": "wf"})
    assert status == 201, created
    run = wire(created["runId"])
    assert http("POST", f"/runs/{run}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})[0] == 200

    # Then it ran to its end, the definition as stored is answered whole, and the keys list in this release's schema
    assert http("GET", f"/runs/{run}", key)[1]["status"] == "completed"
    assert http("GET", "/workflows/wf", key)[1]["definition"]["owners"] == ["team-a"]
    status, keys = http("GET", "/keys", key)
    assert (status, len(keys["keys"])) == (200, 2)
    assert all("rotatedFrom" not in k for k in keys["keys"])


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/tenant/settings", {"limits": {"openRuns": 5, "retainedBytes": 1}}),
        ("/principals/ann", {"groups": [], "outOfOffice": {"delegate": "bob", "reason": "away"}}),
        ("/workflows/wf2", {"nodes": [{"id": "g", "typeId": "core.approvalGate", "config": {"later": 1}}], "edges": []}),
    ],
)
def test_request_bodies_stay_closed_nested_fields_too(services, path, body):
    key = new_api_key(services)
    status, refused = http("PUT", path, key, body)
    assert (status, refused["error"]) == (400, "validation_error"), refused


# A world of its own: it rewrites every key item of the table.
@pytest.mark.private_world
def test_an_item_in_a_newer_format_is_refused_by_name_never_misread(services):
    run_id = a_waiting_run(services)
    key = new_api_key(services)
    # Given a run head a release two ahead wrote in a format this one does not read
    newer = formats.READS + 1
    set_attributes(run_pk(run_id), RUN_SK, v=a.n(newer))
    # Then reading it is refused, saying so, and deciding it writes nothing
    status, refused = http("GET", f"/runs/{wire(run_id)}", key)
    assert (status, refused["error"]) == (500, "interlude.item_too_new")
    assert refused["details"] == {"kind": "table", "format": newer, "reads": formats.READS}
    assert "later release" in refused["message"]
    assert http("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})[0] == 500
    assert state_document(run_id)["status"] == "waiting-approval"

    # Likewise a state document in a newer format, whatever shape it has
    set_attributes(run_pk(run_id), RUN_SK, v=a.n(1))
    doc = state_document(run_id)
    set_attributes(run_pk(run_id), RUN_SK, state=a.packed({**doc, "v": newer, "nodes": "elsewhere"}))
    status, refused = http("GET", f"/runs/{wire(run_id)}", key)
    assert (status, refused["error"], refused["details"]["format"]) == (500, "interlude.item_too_new", newer)

    # and a key record: every request with that key is refused, not let through on a misread
    for key_item in key_items():
        set_attributes(key_item["pk"]["S"], API_KEY_SK, v=a.n(newer))
    assert http("GET", "/keys", key)[1]["error"] == "interlude.item_too_new"
