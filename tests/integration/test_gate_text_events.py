"""Format 9 of the event batch (domain/head_parts.py lean_events, docs/adr/0134), in process (moto, the real api
handler): a gate's large text is stored once, in its interrupt item, not again in the events that repeat it
(`interrupt.requested`, `approval.requested`); every surface that shows, sends or exports stored events answers the
same run byte for byte as a release before format 9 wrote it, reading no more where it holds the gate already."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from interlude.domain import clock, formats
from interlude.domain.errors import Internal
from interlude.domain.head_parts import EVENT_PAYLOAD_HELD
from interlude.domain.ids import from_wire
from interlude.store import attributes as a
from interlude.store.layout import interrupt_sk, run_pk
from interlude.store.runs import RunStore
from interlude.store.stream import OutboxRecords, carried_audit_draft, stream_events
from interlude.store.webhooks import WebhookStore
from tests.integration.conftest import new_api_key
from tests.integration.test_head_parts import BRIEF, FLOW, TEXT, http
from tests.integration.test_streams_and_modulex import call
from tests.support.dynamodb_reads import counting
from tests.support.gate_text_events import event_batches, write_lean, write_whole
from tests.support.local_stack import wire
from tests.support.modulex_example import INSTRUCTIONS, instructed_example, worked_example
from tests.support.moto_world import ENTRIES_TABLE, TABLE


@pytest.fixture(autouse=True)
def gates_in_format_3(monkeypatch):
    # What these tests read back is a format-3 gate's item (its payload deflated alone): the item a release before
    # format 12 wrote, and the one a node that says little still gets. Format 12's own: test_gate_payload_against_definition.
    monkeypatch.setattr(formats, "GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN", False)


@pytest.fixture
def short_streams(monkeypatch):
    # A stream of a waiting run ends within a second (tests/integration/test_streams_and_modulex.py).
    monkeypatch.setenv("INTERLUDE_STREAM_HOLD_SECONDS", "0.3")
    monkeypatch.setenv("INTERLUDE_STREAM_LINGER_SECONDS", "0.05")
    monkeypatch.setenv("INTERLUDE_STREAM_RETRY_MS", "150")


def gated_run(key: str) -> str:
    assert http("PUT", "/workflows/brief", key, FLOW)[0] == 201
    status, created = http("POST", "/runs", key, {"workflowId": "brief", "inputs": {"brief": BRIEF}})
    assert status == 201, created
    return str(created["runId"])


def requested_batch(run_id: str) -> a.Item:
    return next(b for b in event_batches(TABLE, run_id) if b"interrupt.requested" in a.unpacked_json(b["events"]))


def dispatched(run_id: str) -> list[Any]:
    """The events `dispatch` hands every outbox handler (notices, webhooks, callbacks, schedules, metrics)."""
    messages = [{"pk": b["pk"]["S"], "sk": b["sk"]["S"]} for b in event_batches(TABLE, run_id)]
    records, _ = OutboxRecords(boto3.client("dynamodb"), TABLE).records_of(messages)
    return [stream_events(r) for r in records if r is not None]


def sse_events(path: str, key: str) -> list[Any]:
    """The data of a stream's frames, less its heartbeats (each tells the time)."""
    return [f["data"] for f in call("GET", path, key, accept="text/event-stream").events() if "heartbeat" not in str(f)]


def surfaces(run_id: str, key: str) -> dict[str, Any]:
    """Every answer built from the run's stored events, less the export's time."""
    run = wire(run_id)
    events = RunStore(TABLE, ENTRIES_TABLE).read_events(run_id)
    requested = next(e["sequence"] for e in events if e["type"] == "interrupt.requested")
    shown: dict[str, Any] = {
        "stored events": events,
        "poll": http("GET", f"/runs/{run}/events/poll", key),
        "stream": sse_events(f"/runs/{run}/events?streamMode=debug", key),
        "values": sse_events(f"/runs/{run}/events?streamMode=values", key),
        "export": http("GET", f"/runs/{run}/export", key),
        "diff": http("GET", f"/runs/{run}:diff?against={run}", key),
        "webhook replay's event": WebhookStore(TABLE, boto3.client("dynamodb")).read_event(run_id, requested),
        "dispatched": dispatched(run_id),
    }
    del shown["export"][1]["exportedAt"]
    return shown


def test_a_gates_large_text_is_stored_once_and_every_surface_answers_as_the_whole_batch_does(services, short_streams):
    key = new_api_key(services)
    run_id = gated_run(key)

    # The batch as the writer stored it: both events that repeat the gate's payload keep what a head keeps of it
    batch = requested_batch(run_id)
    assert batch["v"] == {"N": str(formats.GATE_TEXT_OFF_EVENTS)}
    stored = {e["type"]: e for e in a.unpacked(batch["events"])}
    for type_ in ("interrupt.requested", "approval.requested"):
        assert stored[type_]["payload"]["data"] == {
            "artifactId": "gate",
            "artifactType": "interlude.gate",
            "title": "Approve the brief?",
            "actions": ["accept", "reject"],
        }
        assert "resumeSchema" not in stored[type_]["payload"]
        assert stored[type_][EVENT_PAYLOAD_HELD]["key"] == stored["node.suspended"]["payload"]["key"]
    lean_size = len(batch["events"]["B"])
    shown = surfaces(run_id, key)
    requested = next(e for e in shown["stored events"] if e["type"] == "interrupt.requested")
    assert requested["payload"]["data"]["description"] == f"{TEXT} {BRIEF}"
    assert EVENT_PAYLOAD_HELD not in requested

    # The same run's batch whole, as the release before wrote it, answers the same on every surface
    assert write_whole(TABLE, run_id) == 1
    assert "v" not in requested_batch(run_id)
    assert len(requested_batch(run_id)["events"]["B"]) > lean_size + 500
    assert surfaces(run_id, key) == shown

    # And in format 9 again (from the whole batch): the same once more, and the gate is decided on
    assert write_lean(TABLE, run_id) == 1
    assert requested_batch(run_id)["v"] == {"N": str(formats.GATE_TEXT_OFF_EVENTS)}
    assert surfaces(run_id, key) == shown
    status, _ = http("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    assert status == 200
    after = surfaces(run_id, key)
    assert after["stored events"][: len(shown["stored events"])] == shown["stored events"]
    assert after["dispatched"][: len(shown["dispatched"])] == shown["dispatched"]


def test_the_modulex_face_answers_a_run_in_format_9_as_before(services, short_streams):
    key = new_api_key(services)
    run_id = gated_run(key)
    assert write_whole(TABLE, run_id) == 1  # as the release before format 9 wrote it
    thread = wire(run_id)

    def views() -> dict[str, Any]:
        return {
            "state": http("GET", f"/workflows/state/{thread}", key),
            "listen": sse_events(f"/workflows/listen/{thread}", key),
        }

    before = views()
    assert write_lean(TABLE, run_id) == 1
    assert views() == before


def test_a_modulex_gates_large_message_is_stored_once_and_the_face_answers_as_before(services, short_streams):
    # (ADR 0142) A message with a large text of its own: the reviewer's instructions before the draft
    key = new_api_key(services)
    created = call("POST", "/workflows/run", key, {"workflow": instructed_example(), "input": {"request": "a refund"}})
    assert created.status == 200, created.text
    thread = created.json()["run_id"]
    run_id = from_wire(thread)
    # The head and the create's batch keep the gate's title words, not its message, which its interrupt item holds
    batch = requested_batch(run_id)
    assert batch["v"] == {"N": str(formats.GATE_TEXT_OFF_EVENTS)}
    held = [e for e in a.unpacked(batch["events"]) if EVENT_PAYLOAD_HELD in e]
    assert held
    assert {e["payload"]["data"]["title"] for e in held} == {"check the tone figures and promises before this"}
    assert "the promises" not in a.unpacked_json(batch["events"]).decode()
    head = boto3.client("dynamodb").get_item(TableName=TABLE, Key=a.key(run_pk(run_id), "RUN"))["Item"]
    assert "the promises" not in a.unpacked_json(head["state"]).decode()

    def views() -> dict[str, Any]:
        return {
            "state": http("GET", f"/workflows/state/{thread}", key),
            "listen": sse_events(f"/workflows/listen/{thread}", key),
            "stored events": RunStore(TABLE, ENTRIES_TABLE).read_events(run_id),
        }

    # And every view of it answers as the batch written whole does, the message whole in it
    lean = views()
    assert json.dumps(f"{INSTRUCTIONS}\n\nDear customer, about a refund")[1:-1] in json.dumps(lean["listen"])
    assert write_whole(TABLE, run_id) == 1
    assert views() == lean
    # and it is found by its title's words, and resumed
    assert run_id in str(http("GET", "/runs?q=tone+promises", key))
    resumed = call("POST", f"/workflows/resume/{thread}", key, {"run_id": thread, "resume_value": {"approved": True}})
    assert resumed.json()["status"] == "resumed", resumed.text


def test_a_modulex_message_that_repeats_what_the_run_holds_stays_in_its_events(services):
    # The worked example's message renders the draft, which the run holds already (the draft's output, in the same
    # batch and the head): stored with it, a repeat costs next to nothing, and the gate's reads read nothing more
    key = new_api_key(services)
    request = "a refund of the order, " * 60
    created = call("POST", "/workflows/run", key, {"workflow": worked_example(), "input": {"request": request}})
    assert created.status == 200, created.text
    batch = requested_batch(from_wire(created.json()["run_id"]))
    assert "v" not in batch
    assert all(EVENT_PAYLOAD_HELD not in e for e in a.unpacked(batch["events"]))


def test_small_gate_texts_stay_in_their_events(services):
    key = new_api_key(services)
    gate = {**FLOW["nodes"][0], "config": {"title": "Ship?", "description": "{{inputs.brief}}"}}
    assert http("PUT", "/workflows/small", key, {**FLOW, "nodes": [gate, FLOW["nodes"][1]]})[0] == 201
    run_id = http("POST", "/runs", key, {"workflowId": "small", "inputs": {"brief": "a short brief"}})[1]["runId"]
    batch = requested_batch(run_id)
    assert "v" not in batch
    assert all(EVENT_PAYLOAD_HELD not in e for e in a.unpacked(batch["events"]))


def test_a_read_that_holds_the_open_gate_reads_nothing_more_and_one_that_does_not_reads_its_item_once(services):
    key = new_api_key(services)
    run_id = gated_run(key)
    runs = RunStore(TABLE, ENTRIES_TABLE)
    state, _ = runs.get_run(run_id) or pytest.fail("no run")

    with counting(runs.client) as reads:
        held = runs.read_events(run_id, holder=state)
    assert reads.calls == ["Query"]
    with counting(runs.client) as reads:
        read = runs.read_events(run_id)
    assert reads.calls == ["Query", "BatchGetItem"]
    assert reads.items == 2  # the batch, and the interrupt item
    assert held == read

    # dispatch: the head read for the batch holds the open gate (its format-4 parts' read), so nothing more is read
    client = boto3.client("dynamodb")
    messages = [{"pk": b["pk"]["S"], "sk": b["sk"]["S"]} for b in event_batches(TABLE, run_id)]
    with counting(client) as reads:
        records, _ = OutboxRecords(client, TABLE).records_of(messages)
    assert reads.calls == ["BatchGetItem", "BatchGetItem"]
    assert [stream_events(r) for r in records if r is not None] == [(run_id, held)]


def test_a_format_9_event_whose_gate_item_is_not_the_one_it_names_is_refused_never_shown(services):
    key = new_api_key(services)
    run_id = gated_run(key)
    client = boto3.client("dynamodb")
    named = next(e[EVENT_PAYLOAD_HELD] for e in a.unpacked(requested_batch(run_id)["events"]) if EVENT_PAYLOAD_HELD in e)
    item_key = a.key(run_pk(run_id), interrupt_sk(named["key"]))
    payload = a.unpacked(client.get_item(TableName=TABLE, Key=item_key, ConsistentRead=True)["Item"]["payload"])
    payload["data"]["description"] = "another text"
    client.update_item(
        TableName=TABLE, Key=item_key, UpdateExpression="SET payload = :p", ExpressionAttributeValues={":p": a.packed(payload)}
    )

    for read in (lambda: RunStore(TABLE, ENTRIES_TABLE).read_events(run_id), lambda: WebhookStore(TABLE, boto3.client("dynamodb")).read_event(run_id, 2)):
        with pytest.raises(Internal, match="its interrupt .* not what it names"):
            read()


def test_a_decision_that_opens_a_gate_with_a_large_text_carries_its_audit_draft_on_the_format_9_batch(services, short_streams):
    key = new_api_key(services)
    second = {"id": "second", "typeId": "core.approvalGate", "config": {"title": "And again?", "description": TEXT}}
    flow = {"nodes": [FLOW["nodes"][0], second], "edges": [{"sourceNodeId": "gate", "targetNodeId": "second"}]}
    assert http("PUT", "/workflows/twice", key, flow)[0] == 201
    run_id = http("POST", "/runs", key, {"workflowId": "twice", "inputs": {"brief": BRIEF}})[1]["runId"]
    assert http("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})[0] == 200

    decided = event_batches(TABLE, run_id)[-1]
    assert decided["v"] == {"N": str(formats.GATE_TEXT_OFF_EVENTS)}  # over the audit draft's 5
    messages = [{"pk": decided["pk"]["S"], "sk": decided["sk"]["S"]}]
    (record,), _ = OutboxRecords(boto3.client("dynamodb"), TABLE).records_of(messages)
    draft = carried_audit_draft(record)
    assert draft is not None
    shown = surfaces(run_id, key)

    assert write_whole(TABLE, run_id) == 2
    (whole,), _ = OutboxRecords(boto3.client("dynamodb"), TABLE).records_of(messages)
    assert carried_audit_draft(whole) == draft
    assert surfaces(run_id, key) == shown


def test_a_run_past_its_expiry_whose_gate_item_ttl_deleted_first_is_gone_not_broken(services, clock_file):
    """DynamoDB deletes expired items within days and in no order, and reads return them until then: a finished run
    whose gate item went before its head and events answers 404 as a run deleted whole does, never a 500."""
    key = new_api_key(services)
    run_id = gated_run(key)
    run = wire(run_id)
    assert http("POST", f"/runs/{run}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})[0] == 200
    assert http("GET", f"/runs/{run}", key)[1]["status"] == "completed"
    client = boto3.client("dynamodb")
    head = client.get_item(TableName=TABLE, Key=a.key(run_pk(run_id), "RUN"), ConsistentRead=True)["Item"]
    expires = int(head["ttl"]["N"])
    named = next(e[EVENT_PAYLOAD_HELD] for e in a.unpacked(requested_batch(run_id)["events"]) if EVENT_PAYLOAD_HELD in e)
    client.delete_item(TableName=TABLE, Key=a.key(run_pk(run_id), interrupt_sk(named["key"])))

    # Before its expiry a missing gate item is this host's failure (as an altered one is, above)
    with pytest.raises(Internal):
        RunStore(TABLE, ENTRIES_TABLE).read_events(run_id)

    clock.advance(clock_file, expires - clock.now().timestamp() + 1)
    status, answer = http("GET", f"/runs/{run}/events/poll", key)
    assert (status, answer["error"]) == (404, "not_found"), answer
    assert http("GET", f"/runs/{run}/export", key)[0] == 404
