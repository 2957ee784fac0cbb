"""Issue 3 over HTTP against the local stack: quorum, eligibility, concurrency, the inbox (API and CLI), external
events by correlation (before and after the gate), tenant settings, credential grants, and discovery."""

from __future__ import annotations

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from interlude import wiring
from interlude.local.stack import ENTRIES_TABLE_NAME, TABLE_NAME
from tests.support.local_stack import Api, quiesce, run_cli, stack_client, wire

RESPOND = ["approvals:respond", "runs:read"]


def register(api: Api, nodes: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None) -> str:
    workflow_id = f"i3-{uuid.uuid4().hex[:10]}"
    got = api.put_workflow(workflow_id, {"nodes": nodes, "edges": edges or []})
    assert got.status_code == 201, got.text
    return workflow_id


def approval(**config: Any) -> dict[str, Any]:
    return {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?", **config}}


def types(api: Api, run_id: str) -> list[str]:
    return [e["type"] for e in api.events(run_id)]


def error_of(response: requests.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == code, body
    return body


# -- quorum ------------------------------------------------------------------------------------------


def test_three_of_majority_over_http(api: Api) -> None:
    workflow = register(api, [approval(requiredApprovals=3, rejectionPolicy="majority")])
    keys = [api.new_key(RESPOND) for _ in range(3)]
    run_id = api.start(workflow)["runId"]
    for key in keys[:2]:
        got = api.resolve(run_id, "gate", {"action": "accept"}, key=key)
        assert got.json() == {"runId": run_id, "nodeId": "gate", "status": "waiting-approval"}
    assert "interrupt.resolved" not in types(api, run_id)
    received = [e["payload"] for e in api.events(run_id) if e["type"] == "approval.received"]
    assert [r["action"] for r in received] == ["accept", "accept"]
    # The votes so far are on the run snapshot, with who, when and through which surface.
    votes = api.run(run_id)["extensions"]["interlude.run"]["openInterrupts"]["gate"]["votes"]
    assert [(v["action"], v["surface"]) for v in votes] == [("accept", "run"), ("accept", "run")]
    assert all(v["at"] and v["principal"].startswith("urn:interlude:api-key|") for v in votes)
    assert api.resolve(run_id, "gate", {"action": "accept"}, key=keys[2]).json()["status"] == "completed"
    resolved = [e["payload"] for e in api.events(run_id) if e["type"] == "interrupt.resolved"]
    assert len(resolved) == 1
    assert (resolved[0]["action"], resolved[0]["decision"]) == ("accept", "granted")

    rejected_run = api.start(workflow)["runId"]
    assert api.resolve(rejected_run, "gate", {"action": "reject"}, key=keys[0]).json()["status"] == "waiting-approval"
    assert api.resolve(rejected_run, "gate", {"action": "reject"}, key=keys[1]).json()["status"] == "failed"
    events = api.events(rejected_run)
    resolved = [e["payload"] for e in events if e["type"] == "interrupt.resolved"]
    assert [(r["action"], r["decision"]) for r in resolved] == [("reject", "rejected")]
    failed = [e["payload"] for e in events if e["type"] == "run.failed"][0]
    assert (failed["error"]["code"], failed["failedNodeId"]) == ("approval_rejected", "gate")
    snap = api.run(rejected_run)
    assert snap["error"]["code"] == "approval_rejected"


def test_n_parallel_accepts_against_a_quorum_of_n_resolve_it_exactly_once(api: Api) -> None:
    n = 6
    workflow = register(api, [approval(requiredApprovals=n)])
    keys = [api.new_key(RESPOND) for _ in range(n)]
    run_id = api.start(workflow)["runId"]
    url = f"{api.base_url}/runs/{wire(run_id)}/interrupts/gate"
    barrier = threading.Barrier(n)

    def vote(key: str) -> requests.Response:
        barrier.wait()
        return requests.post(url, json={"resumeValue": {"action": "accept"}}, headers=api.headers(key), timeout=60)

    with ThreadPoolExecutor(max_workers=n) as pool:
        answers = list(pool.map(vote, keys))
    assert [a.status_code for a in answers] == [200] * n, [a.text for a in answers]
    assert sorted(a.json()["status"] for a in answers) == ["completed"] + ["waiting-approval"] * (n - 1)
    events = api.events(run_id)
    kinds = [e["type"] for e in events]
    assert kinds.count("interrupt.resolved") == 1
    assert kinds.count("approval.received") == n - 1
    assert [e["sequence"] for e in events] == list(range(len(events)))
    # No vote lost, none counted twice: the resolution records exactly the n principals.
    resolved = [e for e in events if e["type"] == "interrupt.resolved"][0]
    assert resolved["payload"]["decision"] == "granted"
    assert api.run(run_id)["status"] == "completed"


def test_a_second_vote_of_one_principal_is_refused_and_not_counted(api: Api) -> None:
    run_id = api.start(register(api, [approval(requiredApprovals=2)]))["runId"]
    key = api.new_key(RESPOND)
    assert api.resolve(run_id, "gate", {"action": "accept"}, key=key).status_code == 200
    error_of(api.resolve(run_id, "gate", {"action": "accept"}, key=key), 409, "interlude.vote_already_cast")
    votes = api.run(run_id)["extensions"]["interlude.run"]["openInterrupts"]["gate"]["votes"]
    assert len(votes) == 1


def test_ask_is_recorded_without_resolving(api: Api) -> None:
    run_id = api.start(register(api, [approval(actions=["accept", "ask"])]))["runId"]
    assert api.resolve(run_id, "gate", {"action": "ask", "comment": "which version?"}).json()["status"] == (
        "waiting-approval"
    )
    assert types(api, run_id)[-1] == "approval.received"
    assert "interrupt.resolved" not in types(api, run_id)


# -- eligibility -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "eligible_extra"),
    [
        ({"approversList": ["i3-bob"]}, {"subject": "i3-bob"}),
        ({"approverGroupRefs": ["finance"]}, {"groups": ["finance"]}),
        ({"approverRoleRefs": ["cfo"]}, {"roles": ["cfo"]}),
    ],
)
def test_an_ineligible_resolver_is_403_and_the_run_stays_waiting(api: Api, config, eligible_extra) -> None:
    run_id = api.start(register(api, [approval(**config)]))["runId"]
    outsider = api.new_key(RESPOND, groups=["sales"], roles=["clerk"])
    error_of(api.resolve(run_id, "gate", {"action": "accept"}, key=outsider), 403, "forbidden")
    assert api.run(run_id)["status"] == "waiting-approval"
    subject = eligible_extra.pop("subject", None)
    insider = api.new_key(RESPOND, subject=subject, **eligible_extra)
    assert api.resolve(run_id, "gate", {"action": "accept"}, key=insider).json()["status"] == "completed"
    vote = [e["payload"] for e in api.events(run_id) if e["type"] == "interrupt.resolved"][0]
    assert vote["resolvedBy"]["subjectId"] == (subject or vote["resolvedBy"]["subjectId"])


def test_discovery_advertises_the_ref_kinds_and_the_conversation_primitive(api: Api) -> None:
    caps = requests.get(api.base_url + "/.well-known/openwop", timeout=10).json()
    assert caps["interrupt"]["refKinds"] == ["principal", "group", "role"]
    assert caps["conversationPrimitive"]["witness"] == "claims-check"


# -- tenant settings and credential grants -----------------------------------------------------------


def test_tenant_override_principals_over_http(api: Api) -> None:
    before = api.call("GET", "/tenant/settings")
    assert before.status_code == 200
    ops = f"ops-{uuid.uuid4().hex[:6]}"
    settings = {**before.json()["settings"], "overridePrincipals": [ops]}
    assert api.call("PUT", "/tenant/settings", settings).json()["settings"]["overridePrincipals"] == [ops]
    run_id = api.start(register(api, [approval(requiredApprovals=5, overrideBypassesQuorum=True)]))["runId"]
    key = api.new_key(RESPOND, subject=ops)
    assert api.resolve(run_id, "gate", {"action": "accept"}, key=key).json()["status"] == "completed"
    resolved = [e["payload"] for e in api.events(run_id) if e["type"] == "interrupt.resolved"][0]
    assert resolved["decision"] == "overridden"
    error_of(api.call("PUT", "/tenant/settings", {"eventRetentionHours": 0}), 400, "validation_error")
    error_of(api.call("GET", "/tenant/settings", key=api.new_key(RESPOND)), 403, "forbidden")


def test_credential_interrupts_over_http(api: Api) -> None:
    provider = f"gh-{uuid.uuid4().hex[:6]}"
    node = {
        "id": "cred",
        "typeId": "core.credentialGate",
        "config": {"provider": provider, "scopes": ["repo"], "connectUrl": "https://app.example/connect"},
    }
    workflow = register(api, [node])
    run_id = api.start(workflow)["runId"]
    assert api.run(run_id)["status"] == "waiting-input"
    body = error_of(api.resolve(run_id, "cred", {"outcome": "authorized"}), 400, "validation_error")
    assert body["details"]["field"] == "resumeValue"
    error_of(api.resolve(run_id, "cred", {"outcome": "authorized", "access_token": "x"}), 400, "validation_error")
    grant = api.call("PUT", f"/tenant/credential-grants/{provider}", {"scopes": ["repo"]})
    assert grant.status_code == 200
    assert grant.json()["scopes"] == ["repo"]
    error_of(
        api.call("PUT", f"/tenant/credential-grants/{provider}", {"scopes": ["repo"], "token": "t"}),
        400,
        "validation_error",
    )
    assert api.resolve(run_id, "cred", {"outcome": "authorized"}).json()["status"] == "completed"
    declined = api.start(workflow)["runId"]
    assert api.resolve(declined, "cred", {"outcome": "declined"}).json()["status"] == "failed"
    assert api.run(declined)["error"]["code"] == "connector_auth_declined"


def test_a_workflow_that_would_raise_an_invalid_payload_is_refused_at_registration(api: Api) -> None:
    node = {
        "id": "c",
        "typeId": "core.credentialGate",
        "config": {"provider": "gh", "connectUrl": "http://plain.example"},
    }
    body = error_of(api.put_workflow("i3-bad-credential", {"nodes": [node]}), 400, "validation_error")
    assert any(e["path"].startswith("nodes/0/config") for e in body["details"]["errors"])


# -- external events ---------------------------------------------------------------------------------


def external(correlation: dict[str, Any], event_type: str = "order.paid") -> dict[str, Any]:
    data = {"eventType": event_type, "correlation": correlation}
    return {"id": "wait", "typeId": "core.interrupt", "config": {"kind": "external-event", "data": data}}


def test_an_event_resolves_the_waiting_interrupts_it_matches(api: Api) -> None:
    correlation = {"orderId": uuid.uuid4().hex}
    run_id = api.start(register(api, [external(correlation)]))["runId"]
    assert api.run(run_id)["status"] == "waiting-external"
    miss = api.call("POST", "/events", {"eventType": "order.paid", "correlation": {"orderId": "other"}})
    assert miss.status_code == 202
    assert miss.json()["matched"] == 0
    got = api.call("POST", "/events", {"eventType": "order.paid", "correlation": correlation, "payload": {"ok": 1}})
    assert got.status_code == 202, got.text
    assert (got.json()["resolved"], got.json()["kept"]) == (1, False)
    assert api.run(run_id)["status"] == "completed"
    resolved = [e["payload"] for e in api.events(run_id) if e["type"] == "interrupt.resolved"][0]
    assert resolved["resumeValue"]["payload"] == {"ok": 1}
    assert resolved["resumeValue"]["correlation"] == correlation


def test_an_event_posted_before_the_run_reaches_its_gate_resumes_the_gate_when_it_is_raised(api: Api) -> None:
    correlation = {"orderId": uuid.uuid4().hex}
    workflow = register(api, [approval(), external(correlation)], [{"sourceNodeId": "gate", "targetNodeId": "wait"}])
    run_id = api.start(workflow)["runId"]
    early = api.call("POST", "/events", {"eventType": "order.paid", "correlation": correlation, "payload": "early"})
    assert early.json()["kept"] is True
    assert early.json()["matched"] == 0
    assert api.resolve(run_id, "gate", {"action": "accept"}).json()["status"] == "waiting-external"
    final = api.wait_status(run_id, {"completed", "failed"})
    assert final["status"] == "completed"
    assert final["variables"]["wait"]["eventId"] == early.json()["eventId"]


def test_posting_events_needs_the_events_write_scope(api: Api) -> None:
    key = api.new_key(RESPOND)
    error_of(api.call("POST", "/events", {"eventType": "e", "correlation": {}}, key=key), 403, "forbidden")
    error_of(api.call("POST", "/events", {"eventType": "e"}), 400, "validation_error")


# -- inbox -------------------------------------------------------------------------------------------


def test_the_inbox_over_http_and_in_the_terminal(api: Api, stack_info) -> None:
    approver = f"inbox-{uuid.uuid4().hex[:6]}"
    workflow = register(api, [approval(approversList=[approver], requiredApprovals=2)])
    runs = [api.start(workflow)["runId"] for _ in range(3)]
    key = api.new_key(RESPOND, subject=approver)
    page = api.call("GET", f"/interrupts?status=pending&workflowId={workflow}&limit=2", key=key).json()
    assert [i["runId"] for i in page["interrupts"]] == runs[::-1][:2]
    rest = api.call("GET", f"/interrupts?workflowId={workflow}&cursor={page['nextCursor']}", key=key).json()
    assert [i["runId"] for i in rest["interrupts"]] == [runs[0]]
    assert rest["nextCursor"] is None
    # Another principal is not eligible: the gates are not in their inbox.
    other = api.call("GET", f"/interrupts?workflowId={workflow}", key=api.new_key(RESPOND)).json()
    assert other["interrupts"] == []
    assert api.resolve(runs[0], "gate", {"action": "accept"}, key=key).status_code == 200
    cli = run_cli("inbox", "--url", api.base_url, "--key", key, "--workflow", workflow)
    lines = cli.stdout.strip().splitlines()
    assert lines[0].split() == ["RAISED", "WAITS", "FOR", "WORKFLOW", "RUN", "STEP", "SUMMARY", "VOTES"]
    assert all("an approval" in line for line in lines[1:])  # the kind in words; --json keeps the protocol's
    assert len(lines) == 3
    assert all("Ship it?" in line and "0/2" in line for line in lines[1:])
    assert runs[0] not in cli.stdout  # the principal voted there already
    as_json = run_cli("inbox", "--url", api.base_url, "--key", api.api_key, "--workflow", workflow, "--json")
    listed = json.loads(as_json.stdout)["interrupts"]
    assert len(listed) == 0  # the admin is not on the approvers list
    # Ordered and filtered across the whole inbox (issue 29 item 3): the approver claims one of the two gates left.
    assert api.call("POST", f"/runs/{wire(runs[1])}/interrupts/gate/claim", key=key).status_code == 200

    def inbox(*options: str) -> list[str]:
        shown = run_cli("inbox", "--url", api.base_url, "--key", key, "--workflow", workflow, "--json", *options)
        return [i["runId"] for i in json.loads(shown.stdout)["interrupts"]]

    assert inbox("--sort", "oldest") == [runs[1], runs[2]]
    assert inbox("--claim", "mine") == [runs[1]]
    assert inbox("--claim", "unclaimed", "--sort", "newest") == [runs[2]]
    error_of(api.call("GET", "/interrupts?status=resolved"), 400, "validation_error")


def inbox_entries_of(stack_info: dict[str, str], run_id: str) -> list[dict[str, Any]]:
    """The inbox index entries naming `run_id`, looked up behind the API: a scan, which finds an entry of any family
    but reads the whole shared table (seconds once the worker's other modules have filled it): read it rarely."""
    scan = stack_client(stack_info, "dynamodb").get_paginator("scan").paginate
    own = {
        "FilterExpression": "begins_with(pk, :inbox) AND runId = :run",
        "ExpressionAttributeValues": {
            ":inbox": {"S": f"T#{stack_info['tenant']}#{wiring.INBOX.prefix}#"},
            ":run": {"S": run_id},
        },
    }
    # In either table, wherever a release wrote them (docs/adr/0161).
    return [item for table in (TABLE_NAME, ENTRIES_TABLE_NAME) for page in scan(TableName=table, **own) for item in page["Items"]]


def test_a_decided_gate_leaves_the_inbox_index_once_the_stream_pump_delivered_its_record(
    api: Api, stack_info
) -> None:
    # The resolve deletes no entry itself: the stack's stream pump plays dispatch, which deletes them.
    workflow = register(api, [approval()])
    run_id = api.start(workflow)["runId"]
    # Anyone's and the workflow's: an approval has no entry in its kind's family (ADR 0160).
    assert {e["pk"]["S"].split("#")[3] for e in inbox_entries_of(stack_info, run_id)} == {"ANY", "WF"}
    assert api.resolve(run_id, "gate", {"action": "accept"}).status_code == 200
    page = api.call("GET", f"/interrupts?workflowId={workflow}").json()
    assert page["interrupts"] == []
    # Read once the stack is idle (every pump's effect of the resolve landed), not polled: each read is a scan.
    quiesce(stack_info)
    assert inbox_entries_of(stack_info, run_id) == []
