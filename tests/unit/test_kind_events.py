"""The kind-specific events (approval.*, clarification.*) written beside interrupt.requested / interrupt.resolved.

Normative text: shared/reference/openwop-notes.md §1.1 Events — the legacy types stay registered, their payloads are
`$ref` aliases of interruptRequested / interruptResolved, and a host emitting the generic type SHOULD also emit them.
Their consumers here (callback notices, ModuleX frames) read only the generic types, so nothing fires twice.
"""

from __future__ import annotations

from typing import Any

import pytest

from interlude.adapters.delivery.notices import build_notices
from interlude.domain import schemas
from interlude.engine import deadlines
from interlude.engine import run as engine
from interlude.engine.events import to_docs
from interlude.faces.modulex.frames import RunView, project
from interlude.rules.interrupts.decide import Resolver
from tests.support.engine import NOW, RUN_ID, answer, gate, start, subject, types, wf_of

CLARIFY = {
    "id": "ask",
    "typeId": "core.clarificationGate",
    "config": {"questions": [{"id": "why", "question": "Why?"}], "timeoutMs": 500},
}


def docs_of(*transitions: engine.Transition) -> list[dict[str, Any]]:
    """The transitions' events as the store writes them: one contiguous log, each doc checked against its schema."""
    drafts = [e for t in transitions for e in t.events]
    return to_docs(RUN_ID, drafts, 0, engine.iso(NOW))


def payload(t: engine.Transition, type_: str) -> dict[str, Any]:
    return next(e.payload for e in t.events if e.type == type_)


def test_an_approval_is_requested_twice_then_granted_twice_with_the_same_payloads():
    wf = wf_of([gate("g")])
    t1 = start(wf)
    assert types(t1) == ["run.started", "node.started", "interrupt.requested", "approval.requested", "node.suspended"]
    assert payload(t1, "approval.requested") == payload(t1, "interrupt.requested")

    t2 = answer(t1, wf, "g", {"action": "accept"})
    assert types(t2) == ["interrupt.resolved", "approval.granted", "node.resumed", "node.completed", "run.completed"]
    assert payload(t2, "approval.granted") == payload(t2, "interrupt.resolved")
    assert payload(t2, "approval.granted")["decision"] == "granted"

    # One log: contiguous sequences from 0, distinct ids, every payload valid against its own $defs entry.
    docs = docs_of(t1, t2)
    assert [d["sequence"] for d in docs] == list(range(len(docs)))
    assert len({d["eventId"] for d in docs}) == len(docs)
    for doc in docs:
        if doc["type"].startswith(("approval.", "clarification.")):
            assert schemas.payload_validator(doc["type"]) is not None
            assert schemas.errors_of(schemas.payload_validator(doc["type"]), doc["payload"]) == []


def test_a_reject_is_approval_rejected_right_after_interrupt_resolved():
    wf = wf_of([gate("g")])
    t = answer(start(wf), wf, "g", {"action": "reject"})
    assert types(t) == ["interrupt.resolved", "approval.rejected", "node.failed", "run.failed"]
    assert payload(t, "approval.rejected") == payload(t, "interrupt.resolved")
    docs_of(t)


def test_an_override_is_approval_overridden():
    wf = wf_of([gate("g", requiredApprovals=3, overrideBypassesQuorum=True, overridePrincipals=["boss"])])
    t = answer(start(wf), wf, "g", {"action": "accept"}, Resolver(subject("boss"), "run"))
    assert types(t)[:2] == ["interrupt.resolved", "approval.overridden"]
    assert payload(t, "approval.overridden")["decision"] == "overridden"
    docs_of(t)


def test_a_vote_that_decides_nothing_and_a_refine_have_no_decision_event():
    wf = wf_of([gate("g", requiredApprovals=2)])
    vote = answer(start(wf), wf, "g", {"action": "accept"})
    assert types(vote) == ["approval.received"]

    wf = wf_of([gate("g", actions=["accept", "refine"])])
    refined = answer(start(wf), wf, "g", {"action": "refine", "refineFeedback": {"scope": "whole"}})
    assert types(refined)[:2] == ["interrupt.resolved", "node.resumed"]
    assert not [k for k in types(refined) if k.startswith("approval.")]


def test_an_approval_timeout_is_approval_rejected_with_the_timeout_fields():
    wf = wf_of([gate("g", timeoutMs=1000)])
    t = deadlines.expire(start(wf).state, wf, NOW.replace(second=1))
    assert types(t)[:2] == ["interrupt.resolved", "approval.rejected"]
    assert payload(t, "approval.rejected")["action"] == "timeout"
    assert payload(t, "approval.rejected")["reason"] == "timeout"


def test_a_clarification_is_requested_and_resolved_twice_also_on_timeout():
    wf = wf_of([CLARIFY])
    t1 = start(wf)
    assert types(t1)[2:4] == ["interrupt.requested", "clarification.requested"]
    t2 = answer(t1, wf, "ask", {"why": "because"})
    assert types(t2)[:2] == ["interrupt.resolved", "clarification.resolved"]
    assert payload(t2, "clarification.resolved") == payload(t2, "interrupt.resolved")
    docs_of(t1, t2)

    timed_out = deadlines.expire(t1.state, wf, NOW.replace(second=1))
    assert types(timed_out)[:2] == ["interrupt.resolved", "clarification.resolved"]
    assert payload(timed_out, "clarification.resolved")["reason"] == "timeout"


@pytest.mark.parametrize(
    "node",
    [
        {"id": "n", "typeId": "core.interrupt", "config": {"kind": "custom", "data": {"customKind": "x.y"}}},
        {"id": "n", "typeId": "core.confidenceGate", "config": {"agentId": "a", "observed": 0.1}},
    ],
)
def test_kinds_without_a_registered_kind_specific_type_get_only_the_generic_events(node):
    wf = wf_of([node])
    t = start(wf)
    assert types(t) == ["run.started", "node.started", "interrupt.requested", "node.suspended"]


def test_callback_notices_and_modulex_frames_come_from_the_generic_events_only():
    wf = wf_of([gate("g")])
    t1 = start(wf)
    t2 = answer(t1, wf, "g", {"action": "accept"})
    docs = docs_of(t1, t2)

    notices = build_notices(t2.state, docs, None, "")
    assert [n["type"] for n in notices] == ["interrupt.requested", "interrupt.resolved", "run.completed"]

    view = RunView(RUN_ID, "wf", "1", {"g": {"id": "g", "type": "interrupt", "name": "Gate"}})
    frames = [f for f in (project(d, view) for d in docs) if f is not None]
    assert [f["type"] for f in frames].count("interrupt") == 1
    assert [f["type"] for f in frames].count("resumed") == 1
