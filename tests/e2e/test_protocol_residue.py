"""Issue 10 item 6 over HTTP, against the real local stack: which resolves are 404 and which 409, the kind-specific
events in the log and on the stream, the status while several gates are open, ModuleX `enabled: false` on an
interrupt node, and the event log in discovery.

Normative text: shared/reference/openwop-notes.md §1.1 (Resolve surfaces, Events), §1.5, §1.6 Snapshot, §1.7.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import requests

from interlude.domain import schemas
from tests.support.local_stack import Api, wire
from tests.support.modulex_example import worked_example

PREP_THEN_GATE = {
    "nodes": [
        {"id": "prep", "typeId": "core.noop"},
        {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Go?"}},
        {"id": "second", "typeId": "core.approvalGate", "config": {"title": "Really?"}},
        {
            "id": "confident",
            "typeId": "core.confidenceGate",
            "config": {"agentId": "agent-1", "observed": 0.99, "threshold": 0.5},
        },
    ],
    "edges": [
        {"sourceNodeId": "prep", "targetNodeId": "gate"},
        {"sourceNodeId": "prep", "targetNodeId": "confident"},
        {"sourceNodeId": "gate", "targetNodeId": "second"},
    ],
}
EXTERNAL = {
    "id": "payment",
    "typeId": "core.interrupt",
    "config": {"kind": "external-event", "data": {"eventType": "order.paid", "correlation": {"orderId": "o-1"}}},
}
PARALLEL_GATES = {
    "nodes": [
        {"id": "approve", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}},
        {"id": "clarify", "typeId": "core.clarificationGate", "config": {"questions": [{"id": "q", "question": "?"}]}},
        EXTERNAL,
    ],
    "edges": [],
}


def register(api: Api, definition: dict[str, Any]) -> str:
    workflow_id = f"residue-{uuid.uuid4().hex[:8]}"
    got = api.put_workflow(workflow_id, {"id": workflow_id, **definition})
    assert got.status_code == 201, got.text
    return workflow_id


def error(response: requests.Response) -> tuple[int, str]:
    return response.status_code, response.json()["error"]


def mint(api: Api, run_id: str, node_id: str) -> requests.Response:
    """GET /runs/{runId}/interrupts/{nodeId}: the same lookup as the resolve, answered with a token."""
    return api.call("GET", f"/runs/{wire(run_id)}/interrupts/{node_id}")


# -- 404 not_found against 409 interrupt_already_resolved --------------------------------------------


def test_a_node_that_is_not_a_gate_is_not_found_even_after_it_ran(api: Api) -> None:
    run_id = api.start(register(api, PREP_THEN_GATE))["runId"]
    assert api.run(run_id)["nodeStates"]["prep"]["status"] == "completed"
    for response in (api.resolve(run_id, "prep", {"action": "accept"}), mint(api, run_id, "prep")):
        assert error(response) == (404, "not_found")
        assert "not a gate" in response.json()["message"]
    assert api.run(run_id)["status"] == "waiting-approval"


def test_a_gate_that_has_not_asked_yet_or_passed_without_asking_is_not_found(api: Api) -> None:
    run_id = api.start(register(api, PREP_THEN_GATE))["runId"]
    assert api.run(run_id)["nodeStates"]["confident"]["status"] == "completed"  # above its threshold: no interrupt
    for node in ("second", "confident", "nowhere"):
        assert error(api.resolve(run_id, node, {"action": "accept"})) == (404, "not_found")
        assert error(mint(api, run_id, node)) == (404, "not_found")


def test_a_decided_gate_is_already_resolved_while_the_run_goes_on_and_after_it_ends(api: Api) -> None:
    run_id = api.start(register(api, PREP_THEN_GATE))["runId"]
    assert api.resolve(run_id, "gate", {"action": "accept"}).json()["status"] == "waiting-approval"
    # The run waits on `second` now; `gate` was decided.
    assert error(api.resolve(run_id, "gate", {"action": "accept"})) == (409, "interrupt_already_resolved")
    assert error(mint(api, run_id, "gate")) == (409, "interrupt_already_resolved")
    assert api.resolve(run_id, "second", {"action": "accept"}).json()["status"] == "completed"
    # The run is over: a gate is 409, a node that is no gate stays 404.
    assert error(api.resolve(run_id, "second", {"action": "reject"})) == (409, "interrupt_already_resolved")
    assert error(api.resolve(run_id, "prep", {"action": "accept"})) == (404, "not_found")


def test_a_cancelled_gate_is_already_resolved_and_a_node_that_is_no_gate_is_still_not_found(api: Api) -> None:
    run_id = api.start(register(api, PREP_THEN_GATE))["runId"]
    assert api.call("POST", f"/runs/{wire(run_id)}/cancel", {}).status_code == 200
    assert error(api.resolve(run_id, "gate", {"action": "accept"})) == (409, "interrupt_already_resolved")
    assert error(mint(api, run_id, "gate")) == (409, "interrupt_already_resolved")
    assert error(api.resolve(run_id, "prep", {"action": "accept"})) == (404, "not_found")


# -- kind-specific events ------------------------------------------------------------------------------


def test_the_log_and_the_stream_carry_the_kind_specific_events_schema_valid_and_contiguous(api: Api) -> None:
    run_id = api.start(api.fixture("conformance-approval"))["runId"]
    assert api.resolve(run_id, "gate", {"action": "reject"}).json()["status"] == "failed"
    events = api.events(run_id)
    types = [e["type"] for e in events]
    assert types == [
        "run.started",
        "node.started",
        "interrupt.requested",
        "approval.requested",
        "node.suspended",
        "interrupt.resolved",
        "approval.rejected",
        "node.failed",
        "run.failed",
    ]
    assert [e["sequence"] for e in events] == list(range(len(events)))
    by_type = {e["type"]: e["payload"] for e in events}
    assert by_type["approval.requested"] == by_type["interrupt.requested"]
    assert by_type["approval.rejected"] == by_type["interrupt.resolved"]
    for e in events:
        assert schemas.validator("run-event.schema.json").is_valid(e)
        assert schemas.payload_validator(e["type"]).is_valid(e["payload"])

    # The SSE stream (updates mode) carries them in log order, each frame's id its sequence.
    stream = api.call("GET", f"/runs/{wire(run_id)}/events", Accept="text/event-stream")
    frames = [
        dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        for block in stream.text.split("\n\n")
        if block.strip() and not block.startswith((":", "retry"))
    ]
    assert [f["event"] for f in frames] == [t for t in types if t != "node.started"]
    assert [int(f["id"]) for f in frames] == [json.loads(f["data"])["sequence"] for f in frames]


def test_a_modulex_listener_sees_one_interrupt_frame_for_an_approval_gate(api: Api) -> None:
    run_id = api.start(api.fixture("conformance-approval"))["runId"]
    listen = api.call("GET", f"/workflows/listen/{wire(run_id)}", Accept="text/event-stream")
    kinds = [json.loads(line[6:])["type"] for line in listen.text.splitlines() if line.startswith("data: ")]
    assert kinds.count("interrupt") == 1


# -- status with several gates open ------------------------------------------------------------------


def test_an_external_event_gate_beside_an_approval_and_a_clarification_reads_waiting_external(api: Api) -> None:
    created = api.start(register(api, PARALLEL_GATES))
    assert created["status"] == "waiting-external"
    snap = api.run(created["runId"])
    assert (snap["status"], snap["currentNodeId"]) == ("waiting-external", "payment")
    assert set(snap["extensions"]["interlude.run"]["openInterrupts"]) == {"approve", "clarify", "payment"}
    assert schemas.validator("run-snapshot.schema.json").is_valid(snap)

    # Each answer steps the status down: waiting-input, then waiting-approval.
    resolved = api.resolve(created["runId"], "payment", {"orderId": "o-1"})
    assert resolved.json()["status"] == "waiting-input"
    assert api.run(created["runId"])["currentNodeId"] == "clarify"
    assert api.resolve(created["runId"], "clarify", {"q": "yes"}).json()["status"] == "waiting-approval"
    assert api.run(created["runId"])["currentNodeId"] == "approve"


# -- ModuleX enabled: false -------------------------------------------------------------------------


def test_a_disabled_modulex_interrupt_node_passes_the_run_through_without_pausing(api: Api) -> None:
    workflow = worked_example()
    approval = next(n for n in workflow["nodes"] if n["id"] == "node_approval")
    approval["enabled"] = False
    got = api.call("POST", "/workflows/run", {"workflow": workflow, "input": {"request": "a refund"}})
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["status"] == "completed"
    listen = api.call("GET", f"/workflows/listen/{body['run_id']}", Accept="text/event-stream")
    kinds = [json.loads(line[6:])["type"] for line in listen.text.splitlines() if line.startswith("data: ")]
    assert "interrupt" not in kinds
    assert kinds[-1] == "done"
    # The run never suspended: no interrupt was requested, and resolving the node is not found.
    run_id = body["run_id"].replace("~2F", "/")
    assert "interrupt.requested" not in [e["type"] for e in api.events(run_id)]
    assert error(api.resolve(run_id, "node_approval", {"approved": True})) == (404, "not_found")


# -- discovery -----------------------------------------------------------------------------------------


def test_discovery_advertises_the_event_log_with_only_facets_its_schema_defines(api: Api) -> None:
    caps = requests.get(api.base_url + "/.well-known/openwop", timeout=30).json()
    event_log = caps["eventLog"]
    # capabilities.schema.json `eventLog` is closed: the record fields and `crossEngineOrdering` only.
    assert set(event_log) <= {"status", "since", "until", "witness", "crossEngineOrdering"}
    assert event_log["witness"] == "claims-check"
    assert event_log["crossEngineOrdering"] == {"orderingModel": "global-sequencer"}
    # What it claims works: the stream and the poll both serve a run's log.
    run_id = api.start(api.fixture("conformance-approval"))["runId"]
    assert api.call("GET", f"/runs/{wire(run_id)}/events", Accept="text/event-stream").status_code == 200
    assert api.events(run_id)[0]["type"] == "run.started"


# -- no protocol words where a person answers (issue 28, items 1-2) ------------------------------------------------

EVERY_KIND = {
    "nodes": [
        {"id": "approve", "typeId": "core.approvalGate", "config": {"title": "Ship it?", "actions": ["accept", "reject", "refine", "edit-accept"], "artifactData": {"v": 1}}},
        {"id": "clarify", "typeId": "core.clarificationGate", "config": {"questions": [{"id": "q", "question": "Which one?", "schema": {"type": "integer", "minimum": 1}}]}},
        {
            "id": "custom",
            "typeId": "core.interrupt",
            "config": {"kind": "custom", "data": {"customKind": "refund.check", "payload": {"title": "Check the refund", "amount": 5}}, "resumeSchema": {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}},
        },
        {"id": "free", "typeId": "core.interrupt", "config": {"kind": "custom", "data": {"customKind": "note"}}},
        EXTERNAL,
        {"id": "confidence", "typeId": "core.confidenceGate", "config": {"agentId": "agent-1", "observed": 0.2, "threshold": 0.5, "decision": {"route": "refund"}}},
        {"id": "connect", "typeId": "core.credentialGate", "config": {"provider": "github", "scopes": ["repo"], "connectUrl": "https://example.com/connect"}},
        {"id": "talk", "typeId": "core.conversationGate", "config": {"turn": "start", "title": "About the refund", "initialPrompt": "Tell me more."}},
        {"id": "redraft", "typeId": "core.noop"},
    ],
    # A gate offering refine must route it (issue 28, item 4)
    "edges": [{"sourceNodeId": "approve", "targetNodeId": "redraft", "condition": {"type": "equals", "left": "action", "right": "refine"}}],
}
PROTOCOL_WORDS = (
    "resumeValue",
    "resumeSchema",
    "outcomeSchema",
    "bearer credential",
    "customKind",
    "resume_schema",
    "modulex",
    "~5F",
    "Input requested",
    "artifactData",
    "refineFeedback",
    "editedArtifactData",
    "not valid JSON",
)


def test_no_gates_page_says_a_protocol_word_open_or_refused(api: Api) -> None:
    run_id = api.start(register(api, EVERY_KIND))["runId"]
    modulex = api.call("POST", "/workflows/run", {"workflow": worked_example(), "input": {"request": "a refund"}}).json()
    gates = [(run_id, n["id"]) for n in EVERY_KIND["nodes"] if n["typeId"] != "core.noop"] + [(modulex["run_id"].replace("~2F", "/"), "node~5Fapproval")]
    for gate_run, node in gates:
        url = api.call("POST", f"/runs/{wire(gate_run)}/interrupts/{node}/tokens", {"intent": "resolve"}).json()["url"]
        browser = requests.Session()
        opened = browser.get(url, headers={"Accept": "text/html"}, timeout=30)
        assert opened.status_code == 200, (node, opened.text[:300])
        proof = re.search(r'name="csrf" value="([^"]+)"', opened.text)
        assert proof, node
        # An empty answer is refused, with the form drawn again
        refused = browser.post(url, data={"csrf": proof.group(1), "action": "submit"}, headers={"Accept": "text/html"}, timeout=30)
        assert refused.status_code == 400, (node, refused.text[:300])
        for page in (opened.text, refused.text):
            shown = page[page.index("<body>") :]
            assert [w for w in PROTOCOL_WORDS if w in shown] == [], node
