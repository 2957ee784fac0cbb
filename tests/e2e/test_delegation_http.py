"""Issue 14 item 4 over HTTP against the local stack: an approver hands their vote on a gate to another principal;
the delegate's vote (run-scoped or by token) is recorded with both principals, once."""

from __future__ import annotations

import uuid

import pytest

from tests.support.local_stack import Api, tenant_admin_key, wire

GATE = {
    "nodes": [
        {
            "id": "gate",
            "typeId": "core.approvalGate",
            "config": {"title": "Ship?", "actions": ["accept", "reject"], "approversList": ["alice", "bob"], "requiredApprovals": 2},
        }
    ],
    "edges": [],
}


@pytest.fixture(scope="module")
def tenant(stack_info):
    """A tenant of its own (its settings are replaced here), with an admin and three people."""
    name = f"deleg-{uuid.uuid4().hex[:6]}"
    admin = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    assert admin.put_workflow("ship", GATE).status_code == 201
    keys = {who: admin.new_key(["approvals:respond", "runs:read"], subject=who) for who in ("alice", "bob", "dave")}
    return admin, keys


def delegation(api: Api, run_id: str, key: str, to: str):
    return api.call("POST", f"/runs/{wire(run_id)}/interrupts/gate/delegation", {"delegate": to}, key)


def test_a_delegated_vote_is_recorded_with_both_principals(tenant):
    api, keys = tenant
    run_id = api.start("ship")["runId"]
    # Refused while the tenant does not allow delegation
    refused = delegation(api, run_id, keys["alice"], "dave")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"] == "interlude.delegation_not_allowed"

    # When the tenant allows it and alice hands her vote to dave
    assert api.call("PUT", "/tenant/settings", {"allowDelegation": True}).status_code == 200
    made = delegation(api, run_id, keys["alice"], "dave")
    assert made.status_code == 200, made.text
    assert made.json()["delegate"] == "dave"
    # Then dave's vote is alice's, cast by dave; a second one for her is refused
    assert api.resolve(run_id, "gate", {"action": "accept"}, keys["dave"]).status_code == 200
    again = api.resolve(run_id, "gate", {"action": "accept"}, keys["dave"])
    assert again.status_code == 409
    assert again.json()["error"] == "interlude.vote_already_cast"
    votes = api.run(run_id)["extensions"]["interlude.run"]["openInterrupts"]["gate"]["votes"]
    assert [(v["action"], v["principal"].split("|")[1], v.get("castBy", "").split("|")[-1]) for v in votes] == [
        ("delegate", "alice", ""),
        ("accept", "alice", "dave"),
    ]
    assert votes[1]["delegation"] == "interrupt"
    # And the log shows the delegation and the vote naming both
    assert api.resolve(run_id, "gate", {"action": "accept"}, keys["bob"]).json()["status"] == "completed"
    events = {e["type"]: e["payload"] for e in api.events(run_id)}
    assert events["interlude.vote-delegated"]["delegate"] == "dave"
    received = events["approval.received"]
    assert (received["resolvedBy"]["subjectId"], received["resumeValue"]["onBehalfOf"]) == ("dave", "alice")


def test_delegation_refusals_over_http(tenant):
    api, keys = tenant
    assert api.call("PUT", "/tenant/settings", {"allowDelegation": True}).status_code == 200
    run_id = api.start("ship")["runId"]
    to_self = delegation(api, run_id, keys["alice"], "alice")
    assert (to_self.status_code, to_self.json()["details"]["field"]) == (400, "delegate")
    outsider = delegation(api, run_id, keys["dave"], "bob")
    assert (outsider.status_code, outsider.json()["error"]) == (403, "forbidden")
    unknown = api.call("POST", f"/runs/{wire(run_id)}/interrupts/nope/delegation", {"delegate": "dave"}, keys["alice"])
    assert (unknown.status_code, unknown.json()["error"]) == (404, "not_found")
    assert delegation(api, run_id, keys["alice"], "dave").status_code == 200
    twice = delegation(api, run_id, keys["alice"], "bob")
    assert (twice.status_code, twice.json()["error"]) == (409, "interlude.vote_already_cast")


def test_the_delegate_sees_the_gate_in_their_inbox_on_behalf_of_the_delegator_and_decides_it(tenant):
    api, keys = tenant
    assert api.call("PUT", "/tenant/settings", {"allowDelegation": True}).status_code == 200
    run_id = api.start("ship")["runId"]

    def inbox(who: str) -> dict[str, dict]:
        answer = api.call("GET", "/interrupts?status=pending&limit=100", key=keys[who])
        assert answer.status_code == 200, answer.text
        return {i["runId"]: i for i in answer.json()["interrupts"]}

    assert run_id not in inbox("dave")
    assert delegation(api, run_id, keys["alice"], "dave").status_code == 200
    # dave is no approver of the gate, yet it is in his inbox, marked as alice's vote
    listed = inbox("dave")[run_id]
    assert (listed["nodeId"], listed["onBehalfOf"]) == ("gate", ["alice"])
    # When dave decides it, it leaves his inbox and alice's; bob's own vote is still asked
    assert api.resolve(run_id, "gate", {"action": "accept"}, keys["dave"]).status_code == 200
    assert run_id not in inbox("dave")
    assert run_id not in inbox("alice")
    assert "onBehalfOf" not in inbox("bob")[run_id]
    assert api.resolve(run_id, "gate", {"action": "accept"}, keys["bob"]).json()["status"] == "completed"
    assert run_id not in inbox("bob")
