"""Gates whose interrupt item is written once (format 3, docs/adr/0126), read through every surface: the item holds
no status and the close writes nothing to it; the run head says which gates are open, the close's event how it
closed. A release that writes format 1 decides them too (the previous release's code, after a rollback)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import boto3

from interlude import wiring
from interlude.domain import formats
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.rules.interrupts.approvers import ANYONE
from interlude.store import attributes as a
from interlude.store.layout import interrupt_sk, run_pk
from interlude.store.sharded import family_pks
from tests.integration.test_store_and_dispatch import register
from tests.integration.test_streams_and_modulex import aws, call, issue, openwop_run  # noqa: F401 (fixture)
from tests.support.local_stack import wire
from tests.support.moto_world import ENTRIES_TABLE, TABLE


def interrupt_item(run_id: str, node_id: str, visit: int = 1) -> dict:
    from interlude.engine.visits import interrupt_key

    key = a.key(run_pk(run_id), interrupt_sk(interrupt_key(run_id, node_id, visit)))
    return a.plain(boto3.client("dynamodb").get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"])


def approval_entries(tenant: str) -> list[dict]:
    """The tenant's inbox entries in the family of gates open to anyone, as every gate these tests open is (a Query
    of each of its partitions): what an unfiltered page and a `kind=approval` page read."""
    client = boto3.client("dynamodb")
    pages = (
        client.query(TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": a.s(pk)})
        for table in (TABLE, ENTRIES_TABLE)  # wherever a release wrote them (docs/adr/0161)
        for pk in family_pks(tenant, wiring.INBOX, ANYONE)
    )
    return [item for page in pages for item in page["Items"]]


def approval_run(services, admin, name: str = "conformance-approval") -> str:
    workflow = register(services, admin, name)
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow})).runId


def test_the_item_is_written_once_and_the_head_and_the_event_tell_its_status(services, admin):
    run_id = approval_run(services, admin)
    opened = interrupt_item(run_id, "gate")
    assert (opened["v"], "status" in opened, "resolution" in opened) == (formats.GATE_STATUS_ON_HEAD, False, False)
    assert services.store.get_run(run_id)[0].interrupts["gate"].itemFormat == formats.GATE_STATUS_ON_HEAD
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    assert interrupt_item(run_id, "gate") == opened  # the close wrote nothing to it
    closed = services.store.closed_interrupt(run_id, opened["sk"].removeprefix("I#"))
    assert closed["status"] == "resolved"
    assert closed["resolution"]["decision"] == "granted"
    assert closed["resolution"]["resolvedBy"]["subjectId"] == "admin"
    assert closed["resolution"]["at"]


def test_the_inbox_lists_an_open_gate_and_sweeps_its_entry_once_closed(services, admin):
    run_id = approval_run(services, admin)
    listed = services.inbox.inbox(admin, 25, {}, None)["interrupts"]
    assert [i["runId"] for i in listed] == [run_id]
    assert [e["runId"]["S"] for e in approval_entries(admin.tenant)] == [run_id]
    assert services.inbox.inbox(admin, 25, {"runId": run_id}, None)["interrupts"][0]["nodeId"] == "gate"
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    # Before dispatch deletes its entries, a page reads the head: the gate is not open, its entries are swept.
    assert services.inbox.inbox(admin, 25, {}, None)["interrupts"] == []
    assert services.inbox.inbox(admin, 25, {"kind": "approval"}, None)["interrupts"] == []
    assert services.inbox.inbox(admin, 25, {"runId": run_id}, None)["interrupts"] == []
    assert approval_entries(admin.tenant) == []


def test_the_export_tells_each_gate_resolved_or_cancelled(services, admin):
    decided = approval_run(services, admin)
    services.decisions.resolve_interrupt(admin, decided, "gate", {"action": "reject", "comment": "no"})
    cancelled = approval_run(services, admin)
    services.lifecycle.cancel_run(admin, cancelled, CancelRunRequest.model_validate({"reason": "not needed"}))
    [one] = services.run_exports.export(admin, decided)["decisions"]
    assert (one["status"], one["resolution"]["decision"], one["resolution"]["resumeValue"]["comment"]) == ("resolved", "rejected", "no")
    [other] = services.run_exports.export(admin, cancelled)["decisions"]
    assert other["status"] == "cancelled"
    assert other["resolution"]["reason"] == "run cancelled"
    still_open = approval_run(services, admin)
    assert [d["status"] for d in services.run_exports.export(admin, still_open)["decisions"]] == ["open"]


def test_a_quorum_gate_records_its_votes_on_the_item_and_closes_by_the_head(services, admin):
    run_id = approval_run(services, admin, "conformance-interrupt-quorum")
    state, _ = services.store.get_run(run_id)
    node_id = next(iter(state.interrupts))
    services.decisions.resolve_interrupt(admin, run_id, node_id, {"action": "accept"})
    voted = interrupt_item(run_id, node_id)
    assert [v["principal"] for v in json.loads(voted["votes"])] == [admin.key_id] or voted["votes"]
    assert "status" not in voted
    assert node_id in services.store.get_run(run_id)[0].interrupts


def test_a_gate_opened_in_format_3_is_closed_by_a_release_that_writes_format_1(services, admin, monkeypatch):
    """The rollback: this release decides a gate the next one opened, writing nothing to its item."""
    run_id = approval_run(services, admin)
    opened = interrupt_item(run_id, "gate")
    monkeypatch.setattr(formats, "INTERRUPT_ITEM_WRITTEN", None)
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    assert services.store.get_run(run_id)[0].status == "completed"
    assert interrupt_item(run_id, "gate") == opened
    assert services.run_exports.export(admin, run_id)["decisions"][0]["status"] == "resolved"


def test_the_token_page_of_a_decided_gate_says_what_was_decided(aws):  # noqa: F811
    key = issue(aws)
    run_id = openwop_run(key)
    minted = call("GET", f"/runs/{wire(run_id)}/interrupts/review", key).json()
    link = urlsplit(minted["url"])
    path = link.path + (f"?{link.query}" if link.query else "")
    assert call("POST", path, None, {"resumeValue": {"action": "reject"}}).status == 200
    reopened = call("GET", path, None, accept="text/html")
    assert reopened.status == 409
    assert "<h1>Already decided</h1>" in reopened.text
    assert "rejected this request on " in reopened.text


def test_the_modulex_face_resumes_a_gate_and_sees_it_closed(aws):  # noqa: F811
    key = issue(aws)
    run_id = openwop_run(key)
    resumed = call("POST", f"/workflows/resume/{wire(run_id)}", key, {"run_id": wire(run_id), "resume_value": {"action": "accept"}})
    assert resumed.status == 200, resumed.text
    again = call("POST", f"/workflows/resume/{wire(run_id)}", key, {"run_id": wire(run_id), "resume_value": {"action": "accept"}})
    assert (again.status, again.json()["detail"]) == (400, "the run is not interrupted (it is completed)")
    assert interrupt_item(run_id, "review").get("status") is None
