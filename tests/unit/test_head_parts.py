"""Format 4 of the run head (domain/head_parts.py): what leaves the head, what stays, and what is put back."""

from __future__ import annotations

import json

import pytest

from interlude.domain import formats, head_parts
from interlude.domain.errors import Internal
from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.domain.models.run import OpenInterrupt, RunState, state_from_json, state_json
from interlude.rules import run_search


def gate(description: str, **data: object) -> OpenInterrupt:
    payload = {
        "kind": "approval",
        "key": "gate:1",
        "data": {"title": "Ship?", "description": description, "actions": ["accept", "reject"], **data},
        "resumeSchema": {"type": "object"},
    }
    return OpenInterrupt(nodeId="gate", key="gate:1", interruptId="i-1", kind="approval", visit=1, payload=payload, raisedAt="t")


def a_run(description: str, inputs: dict[str, object], batch: int | None = 3) -> RunState:
    return RunState(
        runId="t/r-1",
        tenant="t",
        workflowId="wf",
        workflowVersion=1,
        owner={"subjectId": "ann"},
        inputs=inputs,
        inputsBatch=batch,
        createdAt="t",
        interrupts={"gate": gate(description, approversList=["ann"])},
    )


LONG = "a sentence of the gate's prose, " * 40
BIG_INPUTS = {"brief": "the brief, " * 100}


def test_a_large_text_and_large_inputs_leave_the_head_and_what_the_decision_reads_stays():
    state = a_run(LONG, BIG_INPUTS)
    leaned = head_parts.lean(state)
    kept = leaned.interrupts["gate"]
    assert kept.payload["data"] == {"title": "Ship?", "actions": ["accept", "reject"], "approversList": ["ann"]}
    assert "resumeSchema" not in kept.payload  # the decision reads the whole payload back
    assert kept.payloadDigest == head_parts.digest(state.interrupts["gate"].payload)
    assert (leaned.inputs, leaned.inputsDigest, leaned.v) == ({}, head_parts.digest(BIG_INPUTS), formats.HEAD_PARTS_ELSEWHERE)
    assert len(state_json(leaned)) < len(state_json(state)) - 2000
    # The state that was leaned is left as it was.
    assert state.interrupts["gate"].payloadDigest is None
    assert state.inputs == BIG_INPUTS


def test_small_parts_stay_and_a_head_that_keeps_everything_is_the_same_document():
    state = a_run("Ship the release today?", {"order": "o-1"})
    assert head_parts.lean(state) is state
    assert head_parts.held_elsewhere(state) == ([], None)


def test_inputs_stay_unless_the_head_names_the_batch_that_holds_them():
    leaned = head_parts.lean(a_run(LONG, BIG_INPUTS, batch=None))
    assert (leaned.inputs, leaned.inputsDigest) == (BIG_INPUTS, None)


def test_what_a_format_4_head_holds_elsewhere_is_put_back_whole_after_the_document_round_trip():
    state = a_run(LONG, BIG_INPUTS)
    read = state_from_json(state_json(head_parts.lean(state)))
    assert head_parts.held_elsewhere(read) == (["gate:1"], 3)
    head_parts.completed(read, {"gate:1": state.interrupts["gate"].payload}, {"inputs": BIG_INPUTS, "workflowId": "wf"})
    assert read.interrupts["gate"].payload == state.interrupts["gate"].payload
    assert read.inputs == BIG_INPUTS
    assert head_parts.held_elsewhere(read) == ([], None)
    # Written again, the same parts leave again (the batch is still named).
    assert head_parts.lean(read).inputsDigest == head_parts.digest(BIG_INPUTS)


@pytest.mark.parametrize("stored", [None, "another text"])
def test_a_part_missing_or_not_the_one_the_head_names_is_refused(stored):
    state = a_run(LONG, {})
    read = head_parts.lean(state)
    payloads = {} if stored is None else {"gate:1": {**state.interrupts["gate"].payload, "data": {"description": stored}}}
    with pytest.raises(Internal) as refused:
        head_parts.completed(read, payloads, None)
    assert refused.value.details == {"runId": "t/r-1", "part": "interrupt gate:1"}


def test_the_head_names_the_first_batch_for_its_inputs_only_when_they_are_large():
    started = [{"type": "run.started", "payload": {"inputs": BIG_INPUTS}}, {"type": "node.started", "payload": {}}]
    assert head_parts.inputs_leave(a_run(LONG, BIG_INPUTS, batch=None), started)
    small = [{"type": "run.started", "payload": {"inputs": {"order": "o-1"}}}]
    assert not head_parts.inputs_leave(a_run(LONG, {"order": "o-1"}, batch=None), small)
    # A later batch, or a run.started event that does not hold these inputs, is not named.
    assert not head_parts.inputs_leave(a_run(LONG, BIG_INPUTS, batch=None), started[1:])
    assert not head_parts.inputs_leave(a_run(LONG, {**BIG_INPUTS, "more": 1}, batch=None), started)


# -- format 9: the events that repeat a gate's payload ------------------------------------------------------------


def emitted(interrupt: OpenInterrupt) -> list[dict[str, object]]:
    """The events a transition that opens `interrupt` emits (engine/run.py), as RunEventDocs."""
    ids = {"runId": "t/r-1", "nodeId": interrupt.nodeId}
    return [
        {**ids, "sequence": 4, "type": "interrupt.requested", "payload": interrupt.payload, "timestamp": "t"},
        {**ids, "sequence": 5, "type": "approval.requested", "payload": dict(interrupt.payload), "timestamp": "t"},
        {**ids, "sequence": 6, "type": "node.suspended", "payload": {"key": interrupt.key}, "timestamp": "t"},
    ]


def test_events_that_repeat_a_large_gate_text_keep_what_a_head_keeps_and_are_put_back_as_they_were_emitted():
    interrupt = gate(LONG)
    docs = emitted(interrupt)
    lean = head_parts.lean_events(docs, [interrupt])
    assert lean is not None
    held = {"key": "gate:1", "digest": head_parts.digest(interrupt.payload)}
    assert [e.get(head_parts.EVENT_PAYLOAD_HELD) for e in lean] == [held, held, None]
    assert lean[0]["payload"] == head_parts.decision_payload(interrupt.payload)
    assert lean[2] == docs[2]
    assert LONG not in json.dumps(lean)

    stored = json.loads(json.dumps(lean))
    assert head_parts.events_held(stored) == ["gate:1"]
    filled = head_parts.events_filled("t/r-1", stored, {"gate:1": json.loads(json.dumps(interrupt.payload))})
    assert json.dumps(filled) == json.dumps(docs)  # byte for byte: every key where it was
    assert filled[0]["payload"] is not filled[1]["payload"]


def test_small_texts_and_events_of_gates_not_opened_with_them_stay_whole():
    small = gate("a short text")
    assert head_parts.lean_events(emitted(small), [small]) is None
    large = gate(LONG)
    assert head_parts.lean_events(emitted(large), []) is None
    # An event whose payload is not the gate's (a later change of it) keeps its own.
    other = [{**e, "payload": {**e["payload"], "note": "changed"}} for e in emitted(large)[:1]]
    assert head_parts.lean_events(other, [large]) is None


def test_an_event_payload_held_elsewhere_that_is_missing_or_not_the_one_named_is_refused():
    interrupt = gate(LONG)
    lean = head_parts.lean_events(emitted(interrupt), [interrupt])
    assert lean is not None
    with pytest.raises(Internal, match="missing"):
        head_parts.events_filled("t/r-1", [dict(e) for e in lean], {})
    changed = {**interrupt.payload, "data": {**interrupt.payload["data"], "description": "another"}}
    with pytest.raises(Internal, match="digest differs"):
        head_parts.events_filled("t/r-1", [dict(e) for e in lean], {"gate:1": changed})


def modulex_gate(message: str) -> OpenInterrupt:
    """A ModuleX interrupt as faces/modulex/nodes.py raises it (kind `custom`), its message rendered."""
    shown = {
        "message": message,
        "data": {},
        "resume_schema": {"type": "object"},
        "examples": {"ok": {"approved": True}},
    }
    payload = {"kind": "custom", "key": "ask:1", "data": {"customKind": MODULEX_INTERRUPT_KIND, "payload": shown}}
    return OpenInterrupt(
        nodeId="ask", key="ask:1", interruptId="i-2", kind="custom", visit=1, payload=payload, raisedAt="t"
    )


def test_a_modulex_gates_large_message_leaves_the_head_and_its_events_its_title_words_stay():
    draft = "Approve sending this draft? Dear customer, about your refundRequest: it is done. " + "More words. " * 60
    interrupt = modulex_gate(draft)
    kept = head_parts.decision_payload(interrupt.payload)
    # What the face shows leaves; the message's searchable words stay as the gate's title, found the same by the index
    assert kept == {
        "kind": "custom",
        "key": "ask:1",
        "data": {"customKind": MODULEX_INTERRUPT_KIND, "title": "approve sending this draft dear customer about your"},
    }
    assert run_search.gate_words(kept) == run_search.gate_words(interrupt.payload)
    # in the head (format 4) and in the events that repeat it (format 9), each put back whole
    state = a_run("short", {}).model_copy(update={"interrupts": {"ask": interrupt}})
    leaned = head_parts.lean(state)
    assert leaned.interrupts["ask"].payload == kept
    assert leaned.interrupts["ask"].payloadDigest == head_parts.digest(interrupt.payload)
    lean = head_parts.lean_events(emitted(interrupt), [interrupt])
    assert lean is not None
    assert draft not in json.dumps(lean)
    filled = head_parts.events_filled("t/r-1", json.loads(json.dumps(lean)), {"ask:1": interrupt.payload})
    assert json.dumps(filled) == json.dumps(emitted(interrupt))


def test_a_modulex_gates_small_message_or_one_without_words_stays_whole():
    assert head_parts.decision_payload(modulex_gate("Send it?").payload) is None
    # A large message of no searchable word leaves without a title, as the whole payload has none
    kept = head_parts.decision_payload(modulex_gate("- " * 400).payload)
    assert kept is not None
    assert kept["data"] == {"customKind": MODULEX_INTERRUPT_KIND}
    assert run_search.gate_words(kept) == run_search.gate_words(modulex_gate("- " * 400).payload) == []


def test_a_modulex_message_that_repeats_a_text_the_document_holds_stays_whole():
    draft = "Dear customer, about your refund: it is done. " * 40
    interrupt = modulex_gate(f"Approve sending this draft?\n\n{draft}")
    # The draft is the output of a node of the run (the head holds it; deflate stores the repeat for a few bytes)
    assert head_parts.decision_payload(interrupt.payload, [draft]) is None
    state = a_run("short", {}).model_copy(update={"interrupts": {"ask": interrupt}, "outputs": {"draft": {"text": draft}}})
    assert head_parts.lean(state).interrupts["ask"].payloadDigest is None
    # and in a batch whose node.completed event holds it
    done = {"runId": "t/r-1", "nodeId": "draft", "sequence": 3, "type": "node.completed", "payload": {"output": draft}}
    assert head_parts.lean_events([done, *emitted(interrupt)], [interrupt]) is None
    # Without it, the message is the gate's own text, and leaves
    assert head_parts.lean_events(emitted(interrupt), [interrupt]) is not None


def test_an_items_billed_size_counts_names_and_values_as_dynamodb_does():
    from interlude.store import attributes as a

    item = {
        "pk": a.s("T#é"),  # 4 bytes of UTF-8
        "n": a.n(12345),  # 5 digits: 3 bytes + 1
        "b": {"B": b"\x00" * 10},
        "m": {"M": {"k": a.s("v")}},  # 3 + (1 + 1 + 1)
        "l": {"L": [a.n(7), {"BOOL": True}]},  # 3 + (2 + 1) + (1 + 1)
    }
    assert a.billed_size(item) == (2 + 4) + (1 + 4) + (1 + 10) + (1 + 6) + (1 + 8)
    assert [a.billed_units(size) for size in (0, 1024, 1025, 2048, 2049)] == [1, 1, 2, 2, 3]
