"""Format 12 of the interrupt item (docs/adr/0169, store/gate_payloads.py): a gate's payload deflated against its node's
configuration in the run's workflow version. Written once the release after 0.7.0 writes it (the switch,
formats.GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN, is turned on here); read from 0.7.0 on, through every surface that
shows a gate, exactly as a format-3 item."""

from __future__ import annotations

import json
import random
import re

import boto3
import pytest

from interlude.domain import formats
from interlude.domain.errors import Internal
from interlude.domain.ids import from_wire
from interlude.engine.visits import interrupt_key
from interlude.store import attributes as a
from interlude.store import gate_payloads
from interlude.store.layout import interrupt_sk, run_pk
from tests.integration.test_streams_and_modulex import aws, call, issue, key, modulex_run  # noqa: F401 (fixtures)
from tests.support.local_stack import wire
from tests.support.modulex_example import INSTRUCTIONS, instructed_example
from tests.support.moto_world import TABLE

# Two kilobytes of a brief, as a gate's description (prose that deflates alone to ≈ 1 KB, as the bench's): its node
# says it, every run's gate repeats it.
_WORDS = [
    "ship", "brief", "figures", "margin", "quarter", "review", "signed", "owner", "budget", "launch",
    "region", "partner", "invoice", "refund", "policy", "tone", "draft", "customer", "contract", "renewal",
    "forecast", "audit", "risk", "legal", "pricing", "discount", "channel", "support", "backlog", "release",
]
_pick = random.Random(31)
BRIEF = " ".join(_pick.choice(_WORDS) + ("." if _pick.random() < 0.1 else "") for _ in range(300))[:2030]
WORKFLOW = {
    "nodes": [
        {
            "id": "gate",
            "typeId": "core.approvalGate",
            "config": {"title": "Ship the brief?", "description": BRIEF, "actions": ["accept", "reject"]},
        }
    ],
    "edges": [],
}


@pytest.fixture
def writer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN", True)


def gate_item(run_id: str, node_id: str = "gate") -> dict:
    item_key = a.key(run_pk(run_id), interrupt_sk(interrupt_key(run_id, node_id, 1)))
    return boto3.client("dynamodb").get_item(TableName=TABLE, Key=item_key, ConsistentRead=True)["Item"]


def brief_run(bearer: str, register: bool = True) -> str:
    assert not register or call("PUT", "/workflows/brief", bearer, WORKFLOW).status == 201
    created = call("POST", "/runs", bearer, {"workflowId": "brief", "inputs": {}})
    assert created.status == 201, created.text
    return created.json()["runId"]


def shown(bearer: str, run_id: str) -> dict[str, str]:
    """What each surface that shows an open gate answers, by route."""
    run = wire(run_id)
    token = call("GET", f"/runs/{run}/interrupts/gate", bearer)
    assert token.status == 200, token.text
    answers = {
        "snapshot": call("GET", f"/runs/{run}", bearer),
        "events": call("GET", f"/runs/{run}/events/poll", bearer),
        "inbox": call("GET", "/interrupts", bearer),
        "inbox of the run": call("GET", f"/interrupts?runId={run}", bearer),
        "token": token,
        "by token": call("GET", f"/interrupts/{token.json()['token']}", None, accept="application/json"),
    }
    assert {route: got.status for route, got in answers.items()} == dict.fromkeys(answers, 200)
    return {route: got.text for route, got in answers.items()}


def test_a_gate_whose_node_says_it_is_stored_in_under_a_kilobyte_and_shown_whole(aws, key, writer):  # noqa: F811
    run_id = brief_run(key)
    item = gate_item(run_id)
    assert (item[formats.FORMAT_FIELD], gate_payloads.PAYLOAD in item) == (a.n(formats.GATE_PAYLOAD_AGAINST_DEFINITION), False)
    assert a.billed_size(item) < 1024  # one write unit, where the text deflated alone makes it two (below)
    for route, text in shown(key, run_id).items():
        # (a snapshot shows what a decision reads of a large gate, not its text: ADR 0127)
        assert (BRIEF in text) == (route != "snapshot"), route


def test_a_gate_in_format_12_answers_as_one_in_format_3(aws, key, monkeypatch):  # noqa: F811
    monkeypatch.setattr(formats, "GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN", False)
    run_3 = brief_run(key)
    monkeypatch.setattr(formats, "GATE_PAYLOAD_AGAINST_DEFINITION_WRITTEN", True)
    run_12 = brief_run(key, register=False)  # the same version
    assert gate_item(run_3)[formats.FORMAT_FIELD] == a.n(formats.GATE_STATUS_ON_HEAD)
    assert a.billed_size(gate_item(run_3)) > 1024
    assert gate_item(run_12)[formats.FORMAT_FIELD] == a.n(formats.GATE_PAYLOAD_AGAINST_DEFINITION)

    def same(text: str, run_id: str) -> object:
        # Ids, instants and durations differ between two runs; nothing else may.
        doc = json.loads(INSTANT.sub("T", text.replace(run_id, "RUN").replace(wire(run_id), "RUN")))
        return _without(doc, {"interruptId", "eventId", "token", "url", "durationMs"})

    seen_3, seen_12 = shown(key, run_3), shown(key, run_12)
    for route in seen_3:
        if route == "inbox":  # lists both runs
            continue
        assert same(seen_12[route], run_12) == same(seen_3[route], run_3), route
    # Decided, exported, and its close read back the same way
    for run_id in (run_3, run_12):
        decided = call("POST", f"/runs/{wire(run_id)}/interrupts/gate", key, {"resumeValue": {"action": "accept"}})
        assert decided.status == 200, decided.text
    exported = {run_id: call("GET", f"/runs/{wire(run_id)}/export", key) for run_id in (run_3, run_12)}
    assert BRIEF in exported[run_12].text
    assert same(exported[run_12].text, run_12) == same(exported[run_3].text, run_3)


INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")


def _without(doc: object, names: set[str]) -> object:
    if isinstance(doc, dict):
        return {k: _without(v, names) for k, v in doc.items() if k not in names}
    if isinstance(doc, list):
        return [_without(v, names) for v in doc]
    return doc


def test_a_modulex_gate_is_held_against_its_nodes_template(aws, key, writer):  # noqa: F811
    run_id = from_wire(modulex_run(key, workflow=instructed_example()))
    (item,) = boto3.client("dynamodb").query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :i)",
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":i": a.s(interrupt_sk(""))},
    )["Items"]
    assert item[formats.FORMAT_FIELD] == a.n(formats.GATE_PAYLOAD_AGAINST_DEFINITION)
    events = call("GET", f"/runs/{wire(run_id)}/events/poll", key)
    assert events.status == 200
    assert INSTRUCTIONS.strip() in events.text
    frames = [f["data"] for f in call("GET", f"/workflows/listen/{wire(run_id)}", key).events()]
    interrupt = next(f for f in frames if f["type"] == "interrupt")["data"]
    assert interrupt["message"].startswith(INSTRUCTIONS)
    assert "refund" in interrupt["message"]
    resumed = call(
        "POST", f"/workflows/resume/{wire(run_id)}", key, {"run_id": wire(run_id), "resume_value": {"action": "accept"}}
    )
    assert resumed.status == 200, resumed.text


def test_a_payload_read_against_another_configuration_is_refused_not_misread(aws, key, writer):  # noqa: F811
    run_id = brief_run(key)
    item = gate_item(run_id)
    client = boto3.client("dynamodb")
    gate_payloads.fill(client, TABLE, [dict(item)])  # reads back
    # The version's node said something else when the payload was written (a hand-edited definition)
    version = gate_payloads.item_version(TABLE, item)
    definition_key = a.key(*_version_key(version))
    stored = client.get_item(TableName=TABLE, Key=definition_key)["Item"]
    changed = a.unpacked(stored["definition"])
    changed["nodes"][0]["config"]["description"] = BRIEF.upper()
    client.put_item(TableName=TABLE, Item={**stored, "definition": a.packed(changed)})
    with pytest.raises(Internal) as refused:
        gate_payloads.fill(boto3.client("dynamodb"), TABLE, [dict(item)])  # a new client: nothing cached
    assert refused.value.code == "interlude.gate_payload_unreadable"


def _version_key(version: gate_payloads.Version) -> tuple[str, str]:
    from interlude.store.layout import workflow_pk, workflow_version_sk

    _, tenant, workflow_id, number = version
    return workflow_pk(tenant, workflow_id), workflow_version_sk(number)


def test_a_small_node_is_written_as_before(aws, key, writer):  # noqa: F811
    small = {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?"}}], "edges": []}
    assert call("PUT", "/workflows/small", key, small).status == 201
    created = call("POST", "/runs", key, {"workflowId": "small", "inputs": {}})
    assert created.status == 201
    assert gate_item(created.json()["runId"])[formats.FORMAT_FIELD] == a.n(formats.GATE_STATUS_ON_HEAD)

