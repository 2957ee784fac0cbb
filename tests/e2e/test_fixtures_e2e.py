"""Every shared OpenWOP fixture whose node types Interlude has runs, over HTTP, to the outcome its description states.

The two approval-timeout fixtures belong to the deadlines feature (tests/e2e there); fixtures naming node types
Interlude does not have (mock agents, the orchestrator) are skipped by name of the missing type.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from interlude.engine.registry import known_type_ids
from tests.support.local_stack import FIXTURES, Api, wire

OWNED_ELSEWHERE = {"conformance-approval-timeout", "conformance-approval-timeout-approve"}
ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.json"))


def events_of(api: Api, run_id: str) -> list[dict[str, Any]]:
    return api.events(run_id)


def of_type(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


def completes(api: Api, workflow: str, **body: Any) -> dict[str, Any]:
    run = api.start(workflow, **body)
    return api.wait_status(run["runId"], {"completed", "failed", "cancelled"})


def drive_noop(api: Api, workflow: str) -> None:
    assert completes(api, workflow)["status"] == "completed"


def drive_idempotent(api: Api, workflow: str) -> None:
    assert completes(api, workflow, inputs={"nonce": "n-1"})["status"] == "completed"


def drive_approval(api: Api, workflow: str) -> None:
    run_id = api.start(workflow)["runId"]
    assert api.run(run_id)["status"] == "waiting-approval"
    assert api.resolve(run_id, "gate", {"action": "accept"}).json()["status"] == "completed"


def drive_child_gate(api: Api, workflow: str) -> None:
    # Standalone, the child behaves like a vanilla approval gate.
    run_id = api.start(workflow)["runId"]
    assert api.run(run_id)["currentNodeId"] == "child-gate"
    assert api.resolve(run_id, "child-gate", {"action": "accept"}).json()["status"] == "completed"


def drive_reject_routed(api: Api, workflow: str) -> None:
    run_id = api.start(workflow)["runId"]
    assert api.resolve(run_id, "gate", {"action": "reject"}).json()["status"] == "completed"
    events = events_of(api, run_id)
    resolved = of_type(events, "interrupt.resolved")[0]["payload"]
    assert (resolved["action"], resolved["decision"]) == ("reject", "rejected")
    failed = of_type(events, "node.failed")[0]["payload"]
    assert failed["nodeId"] == "gate"
    assert failed["error"]["code"] == "approval_rejected"
    assert failed["error"]["retryable"] is False
    states = api.run(run_id)["nodeStates"]
    assert states["on-reject"]["status"] == "completed"
    assert states["on-accept"]["status"] == "skipped"


def drive_reject_loopback(api: Api, workflow: str) -> None:
    run_id = api.start(workflow, configurable={"version": 1, "run": {"recursionLimit": 20}})["runId"]
    assert api.resolve(run_id, "gate", {"action": "reject"}).json()["status"] == "waiting-approval"
    requested = of_type(events_of(api, run_id), "interrupt.requested")
    assert len(requested) == 2
    assert requested[0]["payload"]["key"] != requested[1]["payload"]["key"]
    assert api.resolve(run_id, "gate", {"action": "accept"}).json()["status"] == "completed"
    assert len(of_type(events_of(api, run_id), "interrupt.resolved")) == 2


def drive_clarification(api: Api, workflow: str) -> None:
    run_id = api.start(workflow)["runId"]
    assert api.run(run_id)["status"] == "waiting-input"
    # The resume value is an object keyed by question id (openwop-notes §1.12 #5).
    assert api.resolve(run_id, "ask", {"q1": "blue"}).json()["status"] == "completed"
    assert api.run(run_id)["variables"]["ask"] == {"q1": "blue"}


def drive_auth_required(api: Api, workflow: str) -> None:
    run_id = api.start(workflow)["runId"]
    weak = api.new_key(["runs:read"])
    refused = api.resolve(run_id, "gate", {"action": "accept"}, key=weak)
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    assert api.run(run_id)["status"] == "waiting-approval"
    bearer = api.new_key(["approvals:respond"])
    assert api.resolve(run_id, "gate", {"action": "accept"}, key=bearer).json()["status"] == "completed"


def drive_external_event(api: Api, workflow: str) -> None:
    run_id = api.start(workflow)["runId"]
    assert api.run(run_id)["status"] == "waiting-external"
    mismatch = {
        "eventType": "conformance.external.completed",
        "correlation": {"orderId": "other", "status": "completed"},
    }
    assert api.call("POST", "/events", mismatch).json()["results"] == []
    assert api.run(run_id)["status"] == "waiting-external"
    body = {
        "eventType": "conformance.external.completed",
        "correlation": {"orderId": "fixture-order-1", "status": "completed"},
        "payload": {"receipt": "r-1"},
    }
    got = api.call("POST", "/events", body).json()
    assert {"runId": run_id, "nodeId": "wait-for-external", "outcome": "resolved", "status": "completed"} in got[
        "results"
    ]
    resume = of_type(events_of(api, run_id), "interrupt.resolved")[0]["payload"]["resumeValue"]
    assert resume["payload"] == {"receipt": "r-1"}
    assert resume["correlation"] == body["correlation"]


def drive_quorum(api: Api, workflow: str) -> None:
    keys = [api.new_key(["approvals:respond"]) for _ in range(3)]
    run_id = api.start(workflow)["runId"]
    for key in keys[:2]:
        assert api.resolve(run_id, "gate", {"action": "accept"}, key=key).json()["status"] == "waiting-approval"
    events = events_of(api, run_id)
    assert len(of_type(events, "approval.received")) == 2
    assert not of_type(events, "interrupt.resolved")
    assert api.resolve(run_id, "gate", {"action": "accept"}, key=keys[2]).json()["status"] == "completed"
    rejected = api.start(workflow)["runId"]
    for key, status in zip(keys[:2], ["waiting-approval", "failed"], strict=True):
        assert api.resolve(rejected, "gate", {"action": "reject"}, key=key).json()["status"] == status
    assert api.run(rejected)["error"]["code"] == "approval_rejected"


def drive_conversation(api: Api, workflow: str) -> None:
    final = completes(api, workflow)
    assert final["status"] == "completed"
    convo = [e for e in events_of(api, final["runId"]) if e["type"].startswith("conversation.")]
    assert [e["type"] for e in convo] == ["conversation.opened", "conversation.exchanged", "conversation.closed"]
    assert len({e["payload"]["conversationId"] for e in convo}) == 1


def drive_cancellable(api: Api, workflow: str) -> None:
    run_id = api.start(workflow)["runId"]
    assert api.call("POST", f"/runs/{wire(run_id)}/cancel", {}).status_code == 200
    assert api.wait_status(run_id, {"cancelled"})["status"] == "cancelled"


def drive_parent_child_cancel(api: Api, workflow: str) -> None:
    # The parent's config names the child by its fixture id: register the child under that id.
    child_workflow = "conformance-interrupt-parent-child-cancel-child"
    child_definition = json.loads((FIXTURES / f"{child_workflow}.json").read_text())
    assert api.put_workflow(child_workflow, child_definition).status_code in (200, 201)
    parent_id = api.start(workflow)["runId"]
    child_id = poll(lambda: next(iter(of_type(events_of(api, parent_id), "interlude.child-requested")), None))[
        "payload"
    ]["childRunId"]
    # The child-requested event is logged before the outbox starts the child: wait until the child exists.
    poll(lambda: api.call("GET", f"/runs/{wire(child_id)}").status_code == 200 or None)
    child = api.wait_status(child_id, {"waiting-approval"}, timeout_s=30)
    assert (child["status"], child["parentRunId"], child["currentNodeId"]) == ("waiting-approval", parent_id, "child-gate")
    assert api.run(parent_id)["status"] == "running"
    ancestry = api.call("GET", f"/runs/{wire(child_id)}/ancestry").json()
    assert ancestry["parent"] == {"runId": parent_id, "hostId": ancestry["hostId"], "cause": "core.subWorkflow"}
    # The route is served because discovery advertises it, under the host id it answers with.
    caps = api.call("GET", "/.well-known/openwop").json()
    causation = caps["multiAgent"]["executionModel"]["crossHostCausation"]
    assert causation == {"hostId": ancestry["hostId"], "ancestryEndpointSupported": True}
    assert caps["subWorkflow"]["inputMapping"] is True
    assert api.call("GET", f"/runs/{wire(parent_id)}/ancestry").json()["parent"] is None
    opaque = parent_id.split("/", 1)[1]
    unknown, foreign = f"{api.tenant}/{opaque[::-1]}", f"other-tenant/{opaque}"
    for run_id, answer in ((unknown, (404, "not_found")), (foreign, (403, "id_tenant_mismatch"))):
        refused = api.call("GET", f"/runs/{wire(run_id)}/ancestry")
        assert (refused.status_code, refused.json()["error"]) == answer

    assert api.call("POST", f"/runs/{wire(parent_id)}/cancel", {}).status_code == 200
    assert api.wait_status(child_id, {"cancelled"}, timeout_s=30)["status"] == "cancelled"
    cancelled = of_type(events_of(api, child_id), "run.cancelled")[0]["payload"]
    assert (cancelled["reason"], cancelled["parentRunId"]) == ("parent-cancelled", parent_id)
    direct = of_type(events_of(api, parent_id), "run.cancelled")[0]["payload"]
    assert "parentRunId" not in direct
    late = api.resolve(child_id, "child-gate", {"action": "accept"})
    # v2 has one code per state (RFC 0213 §C): a cancelled run's interrupt is 409 interrupt_already_resolved, as for
    # a run cancelled directly; v1's 410 interrupt_gone is not a v2 code (docs/adr/0033).
    assert (late.status_code, late.json()["error"]) == (409, "interrupt_already_resolved")
    assert api.run(parent_id)["status"] == "cancelled"


def poll(probe: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found is not None or time.monotonic() > deadline:
            assert found is not None, "timed out"
            return found
        time.sleep(0.1)


def drive_delay(api: Api, workflow: str) -> None:
    run = api.start(workflow, inputs={"delayMs": 200})
    assert api.wait_status(run["runId"], {"completed", "failed"}, timeout_s=30)["status"] == "completed"


DRIVERS: dict[str, Callable[[Api, str], None]] = {
    "conformance-noop": drive_noop,
    "conformance-idempotent": drive_idempotent,
    "conformance-approval": drive_approval,
    "conformance-interrupt-parent-child-cancel-child": drive_child_gate,
    "conformance-approval-reject-routed": drive_reject_routed,
    "conformance-approval-reject-loopback": drive_reject_loopback,
    "conformance-clarification": drive_clarification,
    "conformance-interrupt-auth-required": drive_auth_required,
    "conformance-interrupt-external-event": drive_external_event,
    "conformance-interrupt-quorum": drive_quorum,
    "conformance-conversation-lifecycle": drive_conversation,
    "conformance-cancellable": drive_cancellable,
    "conformance-delay": drive_delay,
    "conformance-interrupt-parent-child-cancel": drive_parent_child_cancel,
}


def missing_types(name: str) -> list[str]:
    definition = json.loads((FIXTURES / f"{name}.json").read_text())
    return sorted({n["typeId"] for n in definition["nodes"]} - set(known_type_ids()))


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_runs_to_its_described_outcome(api: Api, name: str) -> None:
    if name in OWNED_ELSEWHERE:
        pytest.skip("approval timeouts are the deadlines feature's fixtures")
    missing = missing_types(name)
    if missing:
        pytest.skip(f"node types not in Interlude: {missing}")
    assert name in DRIVERS, f"{name} has only known node types but no driver here"
    DRIVERS[name](api, api.fixture(name))
