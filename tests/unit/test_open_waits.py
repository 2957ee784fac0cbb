"""Issue 13 / reliability, pure: how many waits a run holds open and a transition writes (domain/budgets.py), so
every transition fits one TransactWriteItems and ending a run always does."""

from __future__ import annotations

from datetime import timedelta

from interlude.domain.budgets import ITEMS_PER_WAIT, MAX_OPEN_WAITS, TRANSACT_MAX_ITEMS, TRANSITION_MAX_WAITS
from interlude.engine import deadlines
from interlude.engine import run as engine
from tests.support.engine import NOW, edge, gate, noop, start, wf_of

# Items besides the waits in the largest transition (head, events, counter, idempotency, audit entry, head, marker).
OTHER_ITEMS = 7


def fan_out(width: int, branch, then=None, rule="all_success"):
    nodes, edges = [noop("start"), noop("join")], []
    for i in range(width):
        nodes.append(branch(f"b{i}"))
        edges.append(edge("start", f"b{i}"))
        if then is None:
            edges.append(edge(f"b{i}", "join", rule))
        else:
            nodes.append(then(f"then{i}"))
            edges += [edge(f"b{i}", f"then{i}", "any_failed"), edge(f"then{i}", "join", rule)]
    return wf_of(nodes, edges)


def task(i):
    return {"id": i, "typeId": "core.task", "config": {"taskType": "t", "input": {}}}


def waits_written(t: engine.Transition) -> int:
    return len({i.key for i in t.opened} | {c.interrupt.key for c in t.closed}) + len(t.abandoned)


def test_the_limits_leave_room_for_every_other_item_of_the_largest_transition():
    assert MAX_OPEN_WAITS < TRANSITION_MAX_WAITS
    assert TRANSITION_MAX_WAITS * ITEMS_PER_WAIT + OTHER_ITEMS <= TRANSACT_MAX_ITEMS


def test_gates_and_tasks_together_open_at_most_the_limit_and_the_next_fails_naming_the_budget():
    wf = fan_out(30, gate, rule="all_complete")
    wf = wf_of(
        [n.model_dump() for n in wf.nodes] + [task(f"t{i}") for i in range(30)],
        [e.model_dump() for e in wf.edges]
        + [edge("start", f"t{i}") for i in range(30)]
        + [edge(f"t{i}", "join", "all_complete") for i in range(30)],
    )
    t = start(wf)
    assert len(t.state.interrupts) + len(t.state.actions) == MAX_OPEN_WAITS
    failed = [e.payload for e in t.events if e.type == "node.failed"]
    assert len(failed) == 60 - MAX_OPEN_WAITS
    error = failed[0]["error"]
    assert error["code"] == "interlude.budget_exceeded"
    assert error["details"]["budget"] == "waits open at once in one run"
    assert (error["details"]["limit"], error["details"]["unit"]) == (MAX_OPEN_WAITS, "waits")


def test_a_fan_out_that_fails_the_run_writes_none_of_the_gates_it_opened_and_closed():
    t = start(fan_out(MAX_OPEN_WAITS + 1, gate))
    assert t.state.status == "failed"
    assert t.opened == []
    assert t.closed == []
    assert t.state.interrupts == {}


def test_cancelling_a_full_run_writes_every_wait_in_one_transaction_that_fits():
    t = start(fan_out(60, task, rule="all_complete"))
    cancelled = engine.cancel(t.state, NOW, None, None)
    assert len(cancelled.abandoned) == MAX_OPEN_WAITS
    assert waits_written(cancelled) * ITEMS_PER_WAIT + OTHER_ITEMS <= TRANSACT_MAX_ITEMS


def test_deadlines_that_would_write_too_many_waits_are_applied_over_several_transitions():
    wf = fan_out(MAX_OPEN_WAITS, lambda i: gate(i, timeoutMs=1000), then=gate, rule="all_complete")
    t = start(wf)
    state, commits = t.state, 0
    while deadlines.due(state, NOW + timedelta(seconds=5)):
        step = deadlines.expire(state, wf, NOW + timedelta(seconds=5))
        # What it wrote, and what stays open (the run could have ended in it, closing those too).
        touched = {i.key for i in step.opened} | {c.interrupt.key for c in step.closed}
        assert len(touched | {i.key for i in step.state.interrupts.values()}) <= TRANSITION_MAX_WAITS
        state, commits = step.state, commits + 1
    assert commits > 1
    assert sorted(state.interrupts) == sorted(f"then{i}" for i in range(MAX_OPEN_WAITS))


def test_a_step_that_starts_near_the_transition_budget_leaves_the_rest_of_the_queue_to_dispatch():
    wf = fan_out(3, gate, then=noop)
    t = start(wf)
    decision = deadlines.timeout_decision(t.state.interrupts["b0"])
    step = engine.resolve(t.state, wf, "b0", decision, NOW, spent=TRANSITION_MAX_WAITS - 3)
    assert step.state.queue == ["then0"]
    assert step.state.status == "running"
