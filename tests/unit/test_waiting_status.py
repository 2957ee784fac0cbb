"""The run's status (and currentNodeId) while several gates are open at once.

Rule: run-snapshot.schema.json `status` — "`waiting-external` MUST be used when the suspended interrupt's `kind` is
`external-event`"; the rest of the order is this host's (docs/adr/0011, "Status with several gates open"):
waiting-external > waiting-input > waiting-approval, the earliest raised among equals.
"""

from __future__ import annotations

import itertools

import pytest

from interlude.engine import run as engine
from interlude.rules.interrupts.payloads import STATUS_PRECEDENCE, holding_interrupt
from tests.support.engine import answer, gate, start, wf_of

EXTERNAL = {
    "id": "external",
    "typeId": "core.interrupt",
    "config": {"kind": "external-event", "data": {"eventType": "order.paid", "correlation": {"orderId": "o-1"}}},
}
CLARIFY = {"id": "clarify", "typeId": "core.clarificationGate", "config": {"questions": [{"id": "q", "question": "?"}]}}
APPROVE = gate("approve")
NODES = {"external": EXTERNAL, "clarify": CLARIFY, "approve": APPROVE}


@pytest.mark.parametrize("order", list(itertools.permutations(NODES)))
def test_the_strongest_open_kind_sets_the_status_whatever_order_the_gates_were_raised_in(order):
    # Given three parallel gates raised in `order` (roots run in definition order)
    t = start(wf_of([NODES[n] for n in order]))
    # Then an open external-event gate makes the run waiting-external and names that node
    assert t.state.status == "waiting-external"
    assert engine.waiting_on(t.state) == ("external", "waiting-external")


def test_status_steps_down_as_gates_close():
    wf = wf_of([APPROVE, CLARIFY, EXTERNAL])
    t = start(wf)
    assert t.state.status == "waiting-external"

    # When the external-event gate is resolved, the clarification outranks the approval
    t = answer(t, wf, "external", {"orderId": "o-1"})
    assert (t.state.status, engine.waiting_on(t.state)) == ("waiting-input", ("clarify", "waiting-input"))

    # When the clarification is answered, only the approval is left
    t = answer(t, wf, "clarify", {"q": "yes"})
    assert (t.state.status, engine.waiting_on(t.state)) == ("waiting-approval", ("approve", "waiting-approval"))

    t = answer(t, wf, "approve", {"action": "accept"})
    assert t.state.status == "completed"
    assert engine.waiting_on(t.state) is None


def test_an_external_event_gate_beside_an_approval_reads_waiting_external():
    t = start(wf_of([APPROVE, EXTERNAL]))
    assert t.state.status == "waiting-external"


def test_among_gates_of_equal_rank_the_earliest_raised_is_current():
    t = start(wf_of([gate("first"), gate("second")]))
    assert engine.waiting_on(t.state) == ("first", "waiting-approval")
    assert holding_interrupt([("b", "custom"), ("a", "low-confidence"), ("c", "approval")]) == (
        "b",
        "waiting-approval",
    )


def test_every_waiting_status_has_a_rank_and_nothing_open_is_none():
    assert set(STATUS_PRECEDENCE) == {"waiting-external", "waiting-input", "waiting-approval"}
    assert holding_interrupt([]) is None
    assert holding_interrupt([("c", "credential"), ("a", "approval")]) == ("c", "waiting-input")
