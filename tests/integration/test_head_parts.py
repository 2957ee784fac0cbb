"""Format 4 of the run head (domain/head_parts.py, docs/adr/0127), in process (moto, the real api handler): a run with
a large gate text and large inputs is written with them out of its head, answers every route as a whole head (as the
release before wrote it) does, is decided on, and runs its templates against its inputs; small ones stay, at no
further read."""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace
from typing import Any

import boto3
import pytest

from interlude.adapters.notify.messages import RAISED, queue_message
from interlude.composition import Services
from interlude.domain import formats, head_parts
from interlude.domain.head_parts import EVENT_PAYLOAD_HELD
from interlude.domain.ids import from_wire
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.run import RunState, state_json
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.store import attributes as a
from interlude.store.facade import Store
from interlude.store.layout import RUN_SK, event_sk, interrupt_sk, run_pk
from interlude.store.runs import RunStore
from interlude.store.stream import OutboxRecords
from tests.integration.conftest import new_api_key, signed_in
from tests.integration.test_notify_worker import delivered, sent_mail, worker_for
from tests.support.dynamodb_reads import counting
from tests.support.gate_text_events import event_batches
from tests.support.head_parts import head_document, write_format_4, write_whole
from tests.support.local_stack import FIXTURES, wire
from tests.support.modulex_example import worked_example
from tests.support.moto_world import ENTRIES_TABLE, TABLE


@pytest.fixture(autouse=True)
def gates_in_format_3(monkeypatch):
    # What these tests read back is a format-3 gate's item (its payload deflated alone): the item a release before
    # format 12 wrote, and the one a node that says little still gets. Format 12's own: test_gate_payload_against_definition.
    monkeypatch.setattr(formats, "GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN", False)

_WORDS = ("the", "gate", "asks", "whether", "a", "brief", "may", "go", "out", "to", "customer", "before", "noon", "with", "figures")


def prose(size: int, seed: int) -> str:
    """`size` bytes of varied words: a text that deflates as prose does (≈ 2.5×), not as a repeated phrase."""
    pick = random.Random(seed)
    text = ""
    while len(text) < size:
        text += pick.choice(_WORDS) + pick.choice((" ", " ", " ", ", ", ". "))
    return text[:size]


BRIEF = prose(2030, 6000)
TEXT = prose(2030, 2000)
FLOW = {
    "nodes": [
        {
            "id": "gate",
            "typeId": "core.approvalGate",
            "config": {"title": "Approve the brief?", "description": TEXT + " {{inputs.brief}}", "actions": ["accept", "reject"]},
        },
        {"id": "after", "typeId": "core.transform", "config": {"outputs": {"sent": "{{inputs.brief}}"}}},
    ],
    "edges": [{"sourceNodeId": "gate", "targetNodeId": "after"}],
}


def http(method: str, path: str, key: str, body: Any = None, **headers: str) -> tuple[int, Any]:
    sent = {"content-type": "application/json", "authorization": f"Bearer {key}", "host": "127.0.0.1", **headers}
    raw = b"" if body is None else json.dumps(body).encode()
    got = lambda_runtime.invoke("api", to_event(method, path, sent, raw, "127.0.0.1"))
    text = got.get("body") or ""
    try:
        return got["statusCode"], json.loads(text)
    except ValueError:
        return got["statusCode"], text


def answers(run_id: str, key: str) -> dict[str, Any]:
    """What every route that shows a waiting run answers, less what differs on every call: the token and its fields
    (each call mints one, and the page its form's CSRF value, nonce and the link's end), the export's time."""
    run = wire(run_id)
    minted = http("GET", f"/runs/{run}/interrupts/gate", key)
    token = minted[1]["token"]
    shown = {
        "run": http("GET", f"/runs/{run}", key),
        "interrupt": (minted[0], {k: v for k, v in minted[1].items() if k not in ("token", "url", "expiresAt")}),
        "payload": http("GET", f"/interrupts/{token}", key),
        "page": http("GET", f"/interrupts/{token}", key, accept="text/html"),
        "inbox": http("GET", "/interrupts", key),
        "export": http("GET", f"/runs/{run}/export", key),
    }
    page = shown["page"][1].replace(token, "TOKEN")
    for minted_each_time in (r'nonce="[^"]*"', r'name="csrf" value="[^"]*"', r"works until [^<]*"):
        page = re.sub(minted_each_time, "", page)
    shown["page"] = (shown["page"][0], page)
    del shown["export"][1]["exportedAt"]
    return shown


def test_a_format_4_head_answers_every_route_as_a_whole_head_does_is_decided_and_runs_its_templates(services):
    key = new_api_key(services)
    assert http("PUT", "/workflows/brief", key, FLOW)[0] == 201
    status, created = http("POST", "/runs", key, {"workflowId": "brief", "inputs": {"brief": BRIEF}})
    assert status == 201, created
    run_id = created["runId"]

    # The head as this release wrote it: the gate's text (and the answer's schema) and the inputs are out of it
    document = head_document(TABLE, run_id)
    assert document["v"] == formats.HEAD_PARTS_ELSEWHERE
    gate = document["interrupts"]["gate"]
    assert gate["payload"]["data"] == {
        "artifactId": "gate",
        "artifactType": "interlude.gate",
        "title": "Approve the brief?",
        "actions": ["accept", "reject"],
    }
    assert "resumeSchema" not in gate["payload"]
    # The inputs left out: empty, and so not written at all (a field at its default, docs/adr/0153).
    assert ("inputs" in document, len(document["inputsDigest"]), len(gate["payloadDigest"])) == (False, 64, 64)
    shown = answers(run_id, key)
    assert shown["payload"][1]["data"]["description"] == f"{TEXT} {BRIEF}"

    # The same run's head whole, as the release before wrote it, answers the same
    assert write_whole(TABLE, run_id)["inputs"] == {"brief": BRIEF}
    assert answers(run_id, key) == shown

    write_format_4(TABLE, run_id)
    status, _ = http("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
    assert status == 200
    status, run = http("GET", f"/runs/{wire(run_id)}", key)
    assert (status, run["status"], run["inputs"]) == (200, "completed", {"brief": BRIEF})
    assert run["variables"]["after"] == {"sent": BRIEF}


def test_small_parts_stay_in_the_head_and_nothing_more_is_read_for_it(services):
    key = new_api_key(services)
    gate = {**FLOW["nodes"][0], "config": {"title": "Ship?", "description": "{{inputs.brief}}"}}
    small = {**FLOW, "nodes": [gate, FLOW["nodes"][1]]}
    assert http("PUT", "/workflows/small", key, small)[0] == 201
    run_id = http("POST", "/runs", key, {"workflowId": "small", "inputs": {"brief": "a short brief"}})[1]["runId"]
    document = head_document(TABLE, run_id)
    assert document.get("v", 1) == 1
    assert {"inputsBatch", "inputsDigest"}.isdisjoint(document)
    assert document["interrupts"]["gate"]["payload"]["data"]["description"] == "a short brief"
    runs = RunStore(TABLE, ENTRIES_TABLE)
    with counting(runs.client) as reads:
        assert runs.get_run(run_id) is not None
    assert reads.calls == ["GetItem"]


def test_a_format_4_head_is_read_whole_in_one_call_more(services):
    key = new_api_key(services)
    assert http("PUT", "/workflows/brief", key, FLOW)[0] == 201
    run_id = http("POST", "/runs", key, {"workflowId": "brief", "inputs": {"brief": BRIEF}})[1]["runId"]
    runs = RunStore(TABLE, ENTRIES_TABLE)
    with counting(runs.client) as reads:
        got = runs.get_run(run_id)
    assert got is not None
    assert got[0].inputs == {"brief": BRIEF}
    assert reads.calls == ["GetItem", "BatchGetItem"]
    assert reads.items == 2  # the interrupt item and the run.started event's batch


def test_parts_an_eventually_consistent_read_missed_are_read_again_strongly_consistently(services):
    key = new_api_key(services)
    assert http("PUT", "/workflows/brief", key, FLOW)[0] == 201
    run_id = http("POST", "/runs", key, {"workflowId": "brief", "inputs": {"brief": BRIEF}})[1]["runId"]
    runs = RunStore(TABLE, ENTRIES_TABLE)
    consistent: list[bool] = []

    def behind(params: dict[str, Any], **_: Any) -> Any:
        body = json.loads(params["body"])["RequestItems"][TABLE]
        consistent.append(bool(body.get("ConsistentRead")))
        # A replica that does not hold the parts yet answers an eventually consistent read without them.
        return None if body.get("ConsistentRead") else (SimpleNamespace(status_code=200), {"Responses": {TABLE: []}})

    runs.client.meta.events.register("before-call.dynamodb.BatchGetItem", behind)
    try:
        got = runs.get_run(run_id)
    finally:
        runs.client.meta.events.unregister("before-call.dynamodb.BatchGetItem", behind)

    assert got is not None
    assert got[0].inputs == {"brief": BRIEF}
    assert got[0].interrupts["gate"].payload["data"]["description"] == f"{TEXT} {BRIEF}"
    assert consistent == [False, True]


def test_a_format_4_head_whose_part_is_not_the_one_it_names_is_refused_never_shown(services):
    key = new_api_key(services)
    assert http("PUT", "/workflows/brief", key, FLOW)[0] == 201
    run_id = http("POST", "/runs", key, {"workflowId": "brief", "inputs": {"brief": BRIEF}})[1]["runId"]
    document = write_format_4(TABLE, run_id)
    client = boto3.client("dynamodb")
    item_key = a.key(run_pk(run_id), interrupt_sk(document["interrupts"]["gate"]["key"]))
    payload = a.unpacked(client.get_item(TableName=TABLE, Key=item_key, ConsistentRead=True)["Item"]["payload"])
    payload["data"]["description"] = "another text"
    client.update_item(
        TableName=TABLE,
        Key=item_key,
        UpdateExpression="SET payload = :p",
        ExpressionAttributeValues={":p": a.packed(payload)},
    )

    status, refused = http("GET", f"/runs/{wire(run_id)}", key)
    assert (status, refused["error"]) == (500, "internal_error")


def test_a_modulex_run_with_a_format_4_head_answers_as_before_and_resumes(services):
    key = new_api_key(services)
    request = {"request": "a refund " + BRIEF}
    got = http("POST", "/workflows/run", key, {"workflow": worked_example(), "input": request})
    assert got[0] == 200, got
    thread = got[1]["run_id"]
    before = http("GET", f"/workflows/state/{thread}", key)
    assert before[0] == 200
    document = write_format_4(TABLE, from_wire(thread))
    assert "inputs" not in document  # left out of the head: empty, a field at its default

    assert http("GET", f"/workflows/state/{thread}", key) == before
    resumed = http("POST", f"/workflows/resume/{thread}", key, {"run_id": thread, "resume_value": {"approved": True}})
    assert resumed[1]["status"] == "resumed"
    assert http("GET", f"/workflows/state/{thread}", key)[1]["metadata"]["status"] == "completed"


def test_the_mail_a_format_4_head_sends_tells_the_gates_whole_text(world, tenant):
    services = Services(Store(TABLE, ENTRIES_TABLE))
    admin = signed_in(services, "admin")
    config = {"title": "Ship?", "description": TEXT, "approversList": ["ann"]}
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": config}]
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"}))
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    assert "description" not in write_format_4(TABLE, state.runId)["interrupts"]["review"]["payload"]["data"]

    message = queue_message(tenant, state.runId, "review", state.interrupts["review"].interruptId, "ann", RAISED)
    assert worker_for(services, world.queues).handle(delivered(world.queues, message)) == "sent"
    (mail,) = sent_mail()
    assert TEXT[:60] in mail.raw_data


def a_format_4_run_and_its_inputs_batch(services) -> tuple[str, dict[str, str]]:
    """A new run whose head is rewritten in format 4 (its inputs left to its run.started event): its id, and the key of
    the event batch that holds them, as an outbox record names it."""
    key = new_api_key(services)
    assert http("PUT", "/workflows/brief", key, FLOW)[0] == 201
    run_id = http("POST", "/runs", key, {"workflowId": "brief", "inputs": {"brief": BRIEF}})[1]["runId"]
    document = write_format_4(TABLE, run_id)
    batch = {"pk": run_pk(run_id), "sk": event_sk(document["inputsBatch"])}
    return run_id, batch


def test_dispatch_reads_a_format_4_head_whole_beside_its_records(services):
    run_id, batch = a_format_4_run_and_its_inputs_batch(services)

    records, heads = OutboxRecords(boto3.client("dynamodb"), TABLE).records_of([batch])

    assert records[0] is not None
    state, _ = heads[run_id]
    assert state.inputs == {"brief": BRIEF}
    assert state.interrupts["gate"].payload["data"]["description"] == f"{TEXT} {BRIEF}"


def test_dispatch_takes_the_inputs_from_the_batch_it_read_not_reading_it_again(services):
    run_id, batch = a_format_4_run_and_its_inputs_batch(services)
    client = boto3.client("dynamodb")

    with counting(client) as reads:
        _, heads = OutboxRecords(client, TABLE).records_of([batch])

    assert heads[run_id][0].inputs == {"brief": BRIEF}
    # The record's batch and the head in one call, then the interrupt item alone (the batch is not asked twice).
    assert reads.calls == ["BatchGetItem", "BatchGetItem"]
    assert reads.items == 3


APACHE = " ".join((FIXTURES / "LICENSE-Apache-2.0.txt").read_text().split())  # prose that deflates as a text does


def created_units(key: str, size: int) -> tuple[int, str]:
    """The write units a run's create spends on its own items (its head and event batch in the transaction, 2 per
    started KB; its interrupt item put plainly, 1), by their stored sizes, for a gate text of `size` bytes; the run."""
    config = {"title": "Approve the brief?", "actions": ["accept", "reject"], **({"description": APACHE[:size]} if size else {})}
    assert http("PUT", "/workflows/sized", key, {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": config}], "edges": []})[0] == 201
    status, created = http("POST", "/runs", key, {"workflowId": "sized"})
    assert status == 201, created
    items = boto3.client("dynamodb").query(
        TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": a.s(run_pk(created["runId"]))}
    )["Items"]
    factor = {"RUN": 2, "E#": 2, "I#": 1}
    kinds = [(i, "RUN" if i["sk"]["S"] == "RUN" else i["sk"]["S"][:2]) for i in items]
    units = [factor[kind] * a.billed_units(a.billed_size(item)) for item, kind in kinds if kind in factor]
    assert len(units) == 3, [i["sk"]["S"] for i in items]
    return sum(units), created["runId"]


def head_with_its_text(run_id: str) -> tuple[a.Item, a.Item, RunState]:
    """The run's head item as stored; as it is with its gate's text in it (read back whole from the interrupt item,
    at the format a create writes: what the create weighed); and that whole state."""
    stored = boto3.client("dynamodb").get_item(TableName=TABLE, Key=a.key(run_pk(run_id), RUN_SK), ConsistentRead=True)
    got = RunStore(TABLE, ENTRIES_TABLE).get_run(run_id)
    assert got is not None
    state = got[0].model_copy(update={"v": RunState.model_fields["v"].default})
    return stored["Item"], {**stored["Item"], "state": a.packed_json(state_json(state))}, state


def test_a_gate_text_costs_the_create_no_more_units_than_a_larger_one_does(services):
    # Below the large-text threshold (512 B) a text of 256–480 B used to stay in the head and the batch and carry them
    # over a KB: 13–15 WRU against 11 at 512 B (docs/adr/0153). Now it leaves whichever it would carry over.
    key = new_api_key(services)
    sizes = (0, 192, 256, 352, 416, 480, 512, 768)
    units = [created_units(key, size)[0] for size in sizes]
    assert units == sorted(units), dict(zip(sizes, units, strict=True))
    # Below the threshold a text stays in the head exactly when the head with it bills at most a KB
    # (store/run_items.fewer_units); otherwise it leaves, and the head is that whole head less the text. At 448 B the
    # whole head bills 1,018-1,028 B: its random run and interrupt ids' deflated size, its usageShard (hashed from the
    # run id: 0 is left out, 15 B of JSON), the tenant's name (tn3 or tn99999 as the suite counts them) and the
    # workflow's version (one more at each PUT above) decide by a few bytes which way it goes, so each size is held to
    # that rule whichever way it falls; 504 B (1,044-1,050 B whole) leaves, 352 B (973-992 B) stays.
    for size in (504, 448, 352):
        _, run_id = created_units(key, size)
        head, whole, state = head_with_its_text(run_id)
        kept = head_document(TABLE, run_id)["interrupts"]["gate"]["payload"]["data"].get("description") == APACHE[:size]
        assert kept == (a.billed_size(whole) <= 1024), (size, a.billed_size(whole))
        lean = {**whole, "state": a.packed_json(state_json(head_parts.lean(state, head_parts.ANY_TEXT)))}
        assert head == (whole if kept else lean)
    # A text held out of the batch (the head keeps it: no read more while the gate is open) is decided on, and the
    # closed gate's events read it back whole from its interrupt item
    assert kept, a.billed_size(whole)
    stored = [e for b in event_batches(TABLE, run_id) for e in a.unpacked(b["events"])]
    assert [e["type"] for e in stored if EVENT_PAYLOAD_HELD in e] == ["interrupt.requested", "approval.requested"]
    assert http("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})[0] == 200
    events = RunStore(TABLE, ENTRIES_TABLE).read_events(run_id)
    assert next(e for e in events if e["type"] == "interrupt.requested")["payload"]["data"]["description"] == APACHE[:size]
