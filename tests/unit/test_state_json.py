"""The run head's document as pydantic-core writes and reads it (domain/models/run.state_json, state_from_json):
the same values back, the same size the run-state budget documents, old documents still read, refusals as before."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import pytest
from pydantic import ValidationError

from interlude.domain import formats
from interlude.domain.budgets import json_size
from interlude.domain.errors import Internal
from interlude.domain.models.run import RunState, state_from_json, state_json
from interlude.store import attributes as a

# What the store wrote before (store/attributes.packed of model_dump(mode="json")): sorted keys, Python's encoder.
OLD_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False)
TEXTS = ["", "plain", "é—ü", "😀 astral", "tab\tnew\nline", "\x00\x1f ctl", "\x7f del", "quote\"back\\slash/", "\u2028"]


def a_float(rng: random.Random) -> float:
    """Floats of every shape Python prints: tiny and huge exponents, the -5..-9 exponents, plain decimals, bit noise."""
    choice = rng.randrange(5)
    if choice == 0:
        return rng.uniform(-1, 1) * 10.0 ** rng.randint(-12, 25)
    if choice == 1:
        return round(rng.uniform(-1e6, 1e6), rng.randint(0, 9))
    if choice == 2:
        return rng.choice([0.0, -0.0, 1e-05, 1e-07, 1.5e-09, 1e16, 1e22, 5e-324, 1.7976931348623157e308, 0.1])
    bits = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
    return bits if bits == bits and abs(bits) != float("inf") else 2.5


def a_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(9 if depth < 4 else 6)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice([0, -1, 2**53 + 1, -(10**30), 10 ** rng.randint(1, 3600), rng.randint(-(10**6), 10**6)])
    if choice == 3:
        return a_float(rng)
    if choice in (4, 5):
        return rng.choice(TEXTS) + str(rng.randint(0, 99))
    if choice == 6:
        return [a_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(TEXTS) + str(i): a_value(rng, depth + 1) for i in range(rng.randint(0, 4))}


def a_vote(rng: random.Random) -> dict[str, Any]:
    vote: dict[str, Any] = {"principal": "p", "action": "accept", "at": "2026-12-02T00:00:00.000Z", "surface": "api"}
    if rng.random() < 0.5:
        vote["resumeValue"] = a_value(rng)
    if rng.random() < 0.5:  # the delegation fields are absent unless set (exclude_if): both shapes round-trip
        vote.update(castBy="q", delegation="interrupt")
    return vote


def a_state(rng: random.Random) -> RunState:
    interrupts = {
        f"g{i}": {
            "nodeId": f"g{i}",
            "key": f"t/r:g{i}:1",
            "interruptId": f"t/i{i}",
            "kind": "approval",
            "visit": 1,
            "payload": {"data": a_value(rng), "title": rng.choice(TEXTS)},
            "raisedAt": "2026-12-02T00:00:00.000Z",
            "deadline": rng.choice([None, 1.7e9 + rng.random(), 1764633600.5]),
            "votes": [a_vote(rng) for _ in range(rng.randint(0, 2))],
        }
        for i in range(rng.randint(0, 3))
    }
    doc = {
        "runId": "t/r",
        "tenant": "t",
        "workflowId": rng.choice(TEXTS) or "wf",
        "workflowVersion": rng.randint(1, 9),
        "status": rng.choice(["running", "waiting-approval", "completed"]),
        "owner": {"subject": {"subjectId": rng.choice(TEXTS)}},
        "inputs": {f"in{i}": a_value(rng) for i in range(rng.randint(0, 4))},
        "configurable": rng.choice([None, {"run": {"maxLoopIterations": 5}}]),
        "metadata": {"m": a_value(rng)},
        "createdAt": "2026-12-02T00:00:00.000Z",
        "nodes": {"g0": {"status": "suspended", "visits": 1, "routes": rng.choice([None, ["a", "b"]])}},
        "outputs": {f"n{i}": a_value(rng) for i in range(rng.randint(0, 5))},
        "interrupts": interrupts,
        "delays": {"d": {"visit": 1, "delayMs": 5, "due": a_float(rng)}} if rng.random() < 0.3 else {},
        "deadline": rng.choice([None, 1.7e9 + rng.random()]),
        "error": rng.choice([None, {"code": "x", "message": rng.choice(TEXTS)}]),
    }
    return RunState.model_validate(doc)


def reference(state: RunState) -> str:
    """What the store writes and the budget measures: json.dumps of model_dump(mode="json") less the fields at their
    defaults (docs/adr/0153)."""
    return OLD_ENCODER.encode(state.model_dump(mode="json", exclude_defaults=True))


@pytest.mark.parametrize("seed", range(8))
def test_varied_states_round_trip_exactly_at_the_size_the_budget_measures(seed):
    rng = random.Random(seed)
    for _ in range(60):
        state = a_state(rng)
        made = state_json(state)
        back = state_from_json(made)
        assert back == state
        # Same values in the same types: 1 and 1.0, None and an absent field, large ints, floats to the bit.
        assert repr(back.model_dump()) == repr(state.model_dump())
        assert json.loads(made) == json.loads(reference(state))
        assert len(made) == len(reference(state)) == json_size(
            state.model_dump(mode="json", exclude_defaults=True), 1 << 40, depth=1 << 10
        )
        assert made.isascii()


def test_an_old_document_with_sorted_keys_is_read_from_either_attribute_form():
    state = a_state(random.Random(99))
    old = a.packed(state.model_dump(mode="json"))  # the store's write before this change
    assert state_from_json(a.unpacked_json(old)) == state
    assert state_from_json(a.unpacked_json({"S": reference(state)})) == state
    # As a Lambda stream event carries a binary: base64 text.
    import base64

    assert state_from_json(a.unpacked_json({"B": base64.b64encode(old["B"]).decode()})) == state


def test_the_stored_blob_is_the_deflated_document():
    state = a_state(random.Random(7))
    made = state_json(state)
    assert a.unpacked_json(a.packed_json(made)) == made
    assert a.unpacked(a.packed_json(made)) == json.loads(reference(state))


def test_floats_pydantic_core_prints_otherwise_are_written_as_python_prints_them():
    state = a_state(random.Random(1)).model_copy(update={"outputs": {"x": [1e-05, 1.5e-07, 2e-09]}})
    assert b'[1e-05,1.5e-07,2e-09]' in state_json(state)
    assert state_from_json(state_json(state)).outputs == {"x": [1e-05, 1.5e-07, 2e-09]}


def test_a_del_character_and_a_lone_surrogate_are_escaped_and_read_back():
    state = a_state(random.Random(2)).model_copy(update={"outputs": {"x": "a\x7fb\ud800c"}})
    made = state_json(state)
    assert b'"a\\u007fb\\ud800c"' in made
    assert state_from_json(made).outputs == {"x": "a\x7fb\ud800c"}


def test_a_non_finite_float_field_is_refused_and_a_non_finite_value_written_null_as_before():
    state = a_state(random.Random(3))
    with pytest.raises(ValueError):
        reference(state.model_copy(update={"deadline": float("nan")}))
    with pytest.raises(ValueError):
        state_json(state.model_copy(update={"deadline": float("nan")}))
    odd = state.model_copy(update={"outputs": {"x": float("inf")}})
    assert json.loads(state_json(odd))["outputs"] == {"x": None} == json.loads(reference(odd))["outputs"]


@pytest.mark.parametrize(
    "change",
    [
        lambda doc: doc.update(status="sleeping"),
        lambda doc: doc.update(step="many"),
        lambda doc: doc["nodes"]["g0"].update(visits="twice"),
    ],
)
def test_what_validation_refused_before_it_still_refuses(change):
    doc = json.loads(reference(a_state(random.Random(4))))
    change(doc)
    with pytest.raises(ValidationError):
        RunState.model_validate(doc)
    with pytest.raises(ValidationError):
        state_from_json(json.dumps(doc).encode())


def later_release_fields(doc: dict[str, Any]) -> None:
    """Fields a later release adds, at the top and inside each kind of part, as it could write them."""
    doc["escalation"] = {"level": 2, "since": "2027-01-01T00:00:00.000Z"}
    doc["nodes"]["g0"]["retriedBy"] = ["a", 1]
    doc["delays"]["d"]["calendar"] = "business-days"
    for interrupt in doc["interrupts"].values():
        interrupt["priority"] = "high"
        for vote in interrupt.get("votes", ()):
            vote["weight"] = 0.5


def test_fields_a_later_release_wrote_are_read_and_written_back_whole():
    # Given a run head a later release wrote: fields this release does not know, at every level
    docs = (json.loads(reference(a_state(random.Random(seed)))) for seed in range(100))
    doc = next(d for d in docs if d.get("delays") and any(i.get("votes") for i in d.get("interrupts", {}).values()))
    later_release_fields(doc)
    # When this release reads it and writes it back (either encoder, as a transition does)
    state = state_from_json(json.dumps(doc).encode())
    # Then nothing is lost: the next release reads every field it wrote
    assert json.loads(state_json(state)) == doc == json.loads(reference(state))
    assert state.model_extra == {"escalation": doc["escalation"]}


@pytest.mark.parametrize("change", [lambda doc: None, lambda doc: doc.update(status="sleeping")])
def test_a_document_in_a_newer_format_is_refused_by_name_not_misread(change):
    doc = json.loads(reference(a_state(random.Random(4))))
    doc["v"] = formats.READS + 1
    change(doc)  # a newer format's new shape: still refused as newer, not as invalid
    with pytest.raises(Internal) as refused:
        state_from_json(json.dumps(doc).encode())
    assert refused.value.code == "interlude.item_too_new"
    assert refused.value.details == {"kind": "run", "format": formats.READS + 1, "reads": formats.READS}


def test_a_typical_state_is_written_by_pydantic_core_in_declared_order():
    state = RunState.model_validate({
        "runId": "t/r",
        "tenant": "t",
        "workflowId": "wf",
        "workflowVersion": 1,
        "owner": {"subjectId": "ü"},
        "createdAt": "2026-12-02T00:00:00.000Z",
        "outputs": {"b": 1, "a": "é", "c": [0.5, 1e-4, 2e16]},
    })
    made = state_json(state)
    assert made == state.model_dump_json(ensure_ascii=True, exclude_defaults=True).encode()
    assert made.startswith(b'{"runId":"t/r"')
    assert list(state_from_json(made).outputs) == ["b", "a", "c"]


def test_fields_at_their_defaults_are_left_out_and_read_back_as_the_previous_release_reads_them():
    # Given a waiting run's head with the fields a run only sometimes sets at their defaults (parent, error, deadline,
    # completion, empty maps and lists, a node's unset counters, a gate's missing deadline and votes)
    state = a_state(random.Random(5)).model_copy(
        update={"configurable": None, "error": None, "deadline": None, "delays": {}, "completedAt": None}
    )
    made = state_json(state)
    document = json.loads(made)
    # Then the document holds none of them (0.3.0's RunState, the same model, fills each from its default)
    for field in ("v", "configurable", "error", "deadline", "delays", "completedAt", "parentRunId", "children", "actions"):
        assert field not in document
    assert "activatedAt" not in document["nodes"]["g0"]
    assert "settledAt" not in json.loads(reference(state))["nodes"]["g0"]
    # And it reads back as the whole state, every field at its default as written before
    back = state_from_json(made)
    assert back == state
    assert back.model_dump(mode="json") == state.model_dump(mode="json")
    assert len(made) < len(json.dumps(state.model_dump(mode="json"), separators=(",", ":"))) - 200


# Every default of the run head's document as 0.3.0 declares them (its domain/models/run.py): a head leaves out what
# equals one, so a default changed would change what every stored head means (docs/adr/0153): a format change.
DEFAULTS_SINCE_0_3_0 = {
    "RunState": {
        "v": 1, "status": "pending", "inputs": {}, "inputsBatch": None, "inputsDigest": None, "configurable": None,
        "tags": [], "metadata": {}, "workflowName": None, "searchableMetadata": [], "searchTitles": False,
        "searchExpiry": None, "callbackUrl": None, "createdByKey": None, "startedAt": None, "completedAt": None,
        "step": 0, "executed": 0, "nodes": {}, "outputs": {}, "queue": [], "interrupts": {}, "conversations": {},
        "delays": {}, "deadline": None, "actions": {}, "error": None, "failedNodeId": None, "nextSeq": 0,
        "parentRunId": None, "parentNodeId": None, "parentVisit": None, "depth": 0, "children": [], "fork": None,
        "recorded": {}, "forks": [], "usageShard": 0, "unbilled": {}, "writtenNumbers": {},
    },
    "NodeState": {"status": "pending", "visits": 0, "activatedAt": -1, "settledAt": -1, "routes": None},
    "OpenInterrupt": {
        "deadline": None, "votes": [], "assignee": None, "assignedBy": None, "assignedAt": None,
        "payloadDigest": None, "itemFormat": None,
        # Added in 0.5.0 (ADR 0161): where the gate's inbox entries are; a head without it, the first table.
        "entriesTable": None,
    },
    "Vote": {
        "subject": None, "groups": [], "roles": [], "resumeValue": None, "castBy": None, "delegation": None,
        "delegate": None,
    },
    "Delay": {},
    "PendingAction": {},
    "ForkOrigin": {"redrive": False},
}


def test_the_documents_defaults_are_the_ones_heads_were_written_without():
    from interlude.domain.models import run

    declared = {
        name: {
            field: info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]
            for field, info in getattr(run, name).model_fields.items()
            if not info.is_required()
        }
        for name in DEFAULTS_SINCE_0_3_0
    }
    assert declared == DEFAULTS_SINCE_0_3_0
