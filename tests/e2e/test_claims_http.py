"""Issue 29 item 3 over HTTP against the local stack: claiming, releasing and assigning an open gate. Who works it
is recorded on the gate, in the run's log and in the audit trail; it never changes who may decide it."""

from __future__ import annotations

import uuid

import pytest

from tests.support.local_stack import Api, tenant_admin_key, until, wire

GATE = {
    "nodes": [
        {
            "id": "gate",
            "typeId": "core.approvalGate",
            "config": {"title": "Refund?", "actions": ["accept", "reject"], "approversList": ["alice", "bob", "carol"]},
        }
    ],
    "edges": [],
}


@pytest.fixture(scope="module")
def tenant(stack_info):
    """A tenant of its own, its gate open to alice, bob and carol; dave may respond to approvals but not to this one."""
    name = f"claims-{uuid.uuid4().hex[:6]}"
    admin = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    assert admin.put_workflow("refund", GATE).status_code == 201
    keys = {
        who: admin.new_key(["approvals:respond", "runs:read"], subject=who) for who in ("alice", "bob", "carol", "dave")
    }
    return admin, keys


def waiting(api: Api) -> str:
    run_id = api.start("refund")["runId"]
    assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    return run_id


def claim(api: Api, run_id: str, key: str, method: str = "POST"):
    return api.call(method, f"/runs/{wire(run_id)}/interrupts/gate/claim", None, key)


def assign(api: Api, run_id: str, key: str, to: str | None):
    return api.call("PUT", f"/runs/{wire(run_id)}/interrupts/gate/assignee", {"assignee": to}, key)


def test_a_claimed_gate_is_worked_by_one_person_and_still_decided_by_any_approver(tenant):
    api, keys = tenant
    run_id = waiting(api)

    taken = claim(api, run_id, keys["alice"])
    assert taken.status_code == 200, taken.text
    assert (taken.json()["assignee"], taken.json()["assignedBy"]) == ("alice", "alice")
    # Nobody else claims it, nor releases it
    for method in ("POST", "DELETE"):
        refused = claim(api, run_id, keys["bob"], method)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"] == "interlude.gate_claimed"
        assert refused.json()["details"]["assignee"] == "alice"
    # Someone the gate does not name may not touch it
    outsider = claim(api, run_id, keys["dave"], "DELETE")
    assert outsider.status_code == 403
    assert outsider.json()["error"] == "forbidden"
    # Alice hands it to bob; she (who assigned it) may release it again
    handed = assign(api, run_id, keys["alice"], "bob")
    assert (handed.status_code, handed.json()["assignee"], handed.json()["assignedBy"]) == (200, "bob", "alice")
    assert claim(api, run_id, keys["alice"], "DELETE").json()["assignee"] is None
    assert assign(api, run_id, keys["alice"], "bob").status_code == 200
    # Assignment never narrows who may decide: carol decides the gate bob works
    assert api.resolve(run_id, "gate", {"action": "accept"}, keys["carol"]).status_code == 200
    closed = claim(api, run_id, keys["alice"])
    assert closed.status_code == 409
    assert closed.json()["error"] == "interrupt_already_resolved"

    events = api.events(run_id)
    moves = [(e["payload"]["assignee"], e["payload"]["by"]) for e in events if e["type"] == "interlude.gate-assigned"]
    assert moves == [("alice", "alice"), ("bob", "alice"), (None, "alice"), ("bob", "alice")]

    def actions() -> set[str]:
        audit = api.call("GET", "/audit?limit=100").json()["entries"]
        return {e["action"] for e in audit if (e.get("target") or {}).get("runId") == run_id}

    # Each entry is chained once its record reaches dispatch (docs/adr/0128).
    wanted = {"interrupt.claimed", "interrupt.assigned", "interrupt.released", "interrupt.decided"}
    assert until(lambda: wanted <= actions(), timeout_s=20)


def test_an_assignee_must_be_a_user_id(tenant):
    api, keys = tenant
    run_id = waiting(api)
    refused = assign(api, run_id, keys["alice"], "not a user id")
    assert refused.status_code == 400
    assert refused.json()["error"] == "validation_error"
