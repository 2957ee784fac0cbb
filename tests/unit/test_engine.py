"""The engine alone: trigger rules, gates, loops, rejection routing, and the shared conformance fixtures."""

from __future__ import annotations

import pytest

from interlude.domain import schemas
from interlude.domain.errors import DomainError
from interlude.engine import run as engine
from interlude.engine.events import to_docs
from tests.support.engine import ALICE, NOW, answer, edge, fixture, gate, new_state, noop, types, wf_of


def test_approval_fixture_waits_then_completes_on_accept():
    wf = fixture("conformance-approval")
    t = engine.start(new_state(wf), wf, NOW)
    assert t.state.status == "waiting-approval"
    assert engine.waiting_on(t.state) == ("gate", "waiting-approval")
    assert types(t) == ["run.started", "node.started", "interrupt.requested", "approval.requested", "node.suspended"]
    t2 = answer(t, wf, "gate", {"action": "accept"})
    assert types(t2) == ["interrupt.resolved", "approval.granted", "node.resumed", "node.completed", "run.completed"]
    assert t2.state.status == "completed"
    assert t2.state.outputs["gate"]["action"] == "accept"
    assert t2.state.outputs["gate"]["decidedBy"] == "alice"
    resolved = t2.events[0].payload
    assert resolved["decision"] == "granted"
    assert resolved["action"] == "accept"


def test_every_event_of_a_lifecycle_is_schema_valid_and_contiguous():
    wf = fixture("conformance-approval-reject-loopback")
    t1 = engine.start(new_state(wf), wf, NOW)
    t2 = answer(t1, wf, "gate", {"action": "reject"})
    t3 = answer(t2, wf, "gate", {"action": "accept"})
    drafts = t1.events + t2.events + t3.events
    docs = to_docs("t1/AAAAAAAAAAAAAAAAAAAA", drafts, 0, engine.iso(NOW))  # raises on any invalid event
    assert [d["sequence"] for d in docs] == list(range(len(docs)))
    assert len({d["eventId"] for d in docs}) == len(docs)
    validator = schemas.validator("run-event.schema.json")
    assert all(validator.is_valid(d) for d in docs)


def test_reject_routed_takes_the_any_failed_edge_and_skips_all_success():
    wf = fixture("conformance-approval-reject-routed")
    t = answer(engine.start(new_state(wf), wf, NOW), wf, "gate", {"action": "reject"})
    failed = next(e for e in t.events if e.type == "node.failed")
    assert failed.payload["error"] == {
        "code": "approval_rejected",
        "message": failed.payload["error"]["message"],
        "retryable": False,
    }
    assert t.state.nodes["on-reject"].status == "completed"
    assert t.state.nodes["on-accept"].status == "skipped"
    assert t.state.status == "completed"


def test_reject_without_a_failure_edge_fails_the_run_naming_the_gate():
    wf = fixture("conformance-approval")
    t = answer(engine.start(new_state(wf), wf, NOW), wf, "gate", {"action": "reject"})
    assert t.state.status == "failed"
    run_failed = t.events[-1]
    assert run_failed.type == "run.failed"
    assert run_failed.payload["error"]["code"] == "approval_rejected"
    assert run_failed.payload["failedNodeId"] == "gate"
    resolved = t.events[0].payload
    assert (resolved["action"], resolved["decision"]) == ("reject", "rejected")


def test_loop_back_raises_a_new_interrupt_under_a_new_key():
    wf = fixture("conformance-approval-reject-loopback")
    t1 = engine.start(new_state(wf), wf, NOW)
    first_key = t1.state.interrupts["gate"].key
    t2 = answer(t1, wf, "gate", {"action": "reject"})
    assert t2.state.status == "waiting-approval"
    second = t2.state.interrupts["gate"]
    assert second.key != first_key
    assert second.interruptId != t1.state.interrupts["gate"].interruptId
    assert types(t2).count("interrupt.requested") == 1
    t3 = answer(t2, wf, "gate", {"action": "accept"})
    assert t3.state.status == "completed"


def test_keys_derive_from_run_node_and_visit_so_replay_repeats_them():
    wf = fixture("conformance-approval")
    a = engine.start(new_state(wf), wf, NOW)
    b = engine.start(new_state(wf), wf, NOW)
    assert a.state.interrupts["gate"].key == b.state.interrupts["gate"].key == "t1/AAAAAAAAAAAAAAAAAAAA:gate:1"
    assert a.events == b.events


def test_loops_are_bounded_by_max_loop_iterations():
    wf = wf_of(
        [noop("start"), gate("g"), noop("again")],
        [edge("start", "g", "any_success"), edge("g", "again", "any_failed"), edge("again", "g", "any_success")],
    )
    t = engine.start(new_state(wf, configurable={"version": 1, "run": {"maxLoopIterations": 2}}), wf, NOW)
    t = answer(t, wf, "g", {"action": "reject"})
    assert t.state.status == "waiting-approval"
    t = answer(t, wf, "g", {"action": "reject"})
    assert t.state.status == "failed"
    assert t.state.error["code"] == "loop_limit_exceeded"


@pytest.mark.parametrize(
    ("loop", "asked", "stops_with", "executed"),
    [
        # Two steps that run each other: each visit of a step is counted, and the run fails past the ceiling
        # (the first step's run, then each of the two its ceiling of times).
        (2, {"maxLoopIterations": 10**40, "recursionLimit": 10**40}, "loop_limit_exceeded", 1 + 2 * engine.MAX_LOOP_ITERATIONS),
        # Twenty steps in a ring: every execution is counted, and the ceiling of executions comes first.
        (20, {"maxLoopIterations": 10**40, "recursionLimit": 10**40}, "recursion_limit_exceeded", engine.MAX_RECURSION_LIMIT),
    ],
)
def test_a_run_cannot_ask_for_loops_without_end(loop: int, asked: dict, stops_with: str, executed: int) -> None:
    names = [f"step{i}" for i in range(loop)]
    ring = [edge(a, b, "any_success") for a, b in zip(names, names[1:] + names[:1], strict=True)]
    wf = wf_of([noop("start"), *(noop(n) for n in names)], [edge("start", names[0], "any_success"), *ring])
    state = new_state(wf, configurable={"version": 1, "run": asked})
    t = engine.start(state, wf, NOW, step_budget=10 * engine.MAX_RECURSION_LIMIT)
    assert t.state.status == "failed"
    assert t.state.error["code"] == stops_with
    # Each step ran as often as the ceiling lets it, never as often as the run asked.
    assert sum(1 for e in t.events if e.type == "node.started") == executed


@pytest.mark.parametrize(
    ("rule", "a_ok", "b_ok", "fires"),
    [
        ("all_success", True, True, True),
        ("all_success", True, False, False),
        ("any_success", False, True, True),
        ("any_success", False, False, False),
        ("all_complete", False, False, True),
        ("none_failed", True, True, True),
        ("none_failed", True, False, False),
        ("any_failed", True, False, True),
        ("any_failed", True, True, False),
    ],
)
def test_trigger_rules(rule, a_ok, b_ok, fires):
    # Two gates feed `join`; a rejected gate is a failed source. Failure edges keep the run alive.
    wf = wf_of(
        [gate("a"), gate("b"), noop("join"), noop("sink")],
        [
            edge("a", "join", rule),
            edge("b", "join", rule),
            edge("a", "sink", "all_complete"),
            edge("b", "sink", "all_complete"),
        ],
    )
    t = engine.start(new_state(wf), wf, NOW)
    assert set(t.state.interrupts) == {"a", "b"}
    t = answer(t, wf, "a", {"action": "accept" if a_ok else "reject"})
    t = answer(t, wf, "b", {"action": "accept" if b_ok else "reject"})
    assert t.state.nodes["join"].status == ("completed" if fires else "skipped")
    assert t.state.status == "completed"


def test_transform_resolves_references_and_a_reference_with_no_value_is_never_raw():
    wf = wf_of(
        [
            {
                "id": "src",
                "typeId": "core.transform",
                "config": {"outputs": {"n": "{{inputs.n}}", "who": "user-{{inputs.name}}"}},
            },
            {
                "id": "use",
                "typeId": "core.transform",
                "config": {"outputs": {"copy": "{{src.n}}", "text": "{{src.who}} / {{later.v}}", "whole": "{{later.v}}"}},
            },
            {"id": "later", "typeId": "core.transform", "config": {"outputs": {"v": "{{inputs.absent}}"}}},
        ],
        [edge("src", "use"), edge("use", "later")],
    )
    assert engine.check_config(wf) == []  # every reference names a step and a field it outputs
    t = engine.start(new_state(wf, inputs={"n": 3, "name": "bo"}), wf, NOW)
    # `later` has not run when `use` does: its field is empty inside text and null as a whole value
    assert t.state.outputs["use"] == {"copy": 3, "text": "user-bo / ", "whole": None}
    assert t.state.outputs["later"] == {"v": None}
    assert t.events[-1].type == "run.completed"
    assert t.events[-1].payload["outputs"]["use"]["copy"] == 3


def test_step_budget_leaves_the_run_runnable_and_advance_finishes_it():
    nodes = [noop(f"n{i}") for i in range(6)]
    edges = [edge(f"n{i}", f"n{i + 1}") for i in range(5)]
    wf = wf_of(nodes, edges)
    t = engine.start(new_state(wf), wf, NOW, step_budget=2)
    assert t.state.status == "running"
    assert t.state.queue == ["n2"]
    t = engine.advance(t.state, wf, NOW, step_budget=2)
    t = engine.advance(t.state, wf, NOW, step_budget=10)
    assert t.state.status == "completed"
    assert engine.advance(t.state, wf, NOW).events == []


def test_clarification_and_external_event_statuses_and_resume_schema():
    wf = wf_of(
        [
            {
                "id": "ask",
                "typeId": "core.clarificationGate",
                "config": {"questions": [{"id": "q1", "question": "Colour?"}]},
            },
            {
                "id": "ext",
                "typeId": "core.interrupt",
                "config": {
                    "kind": "external-event",
                    "data": {"eventType": "paid", "correlation": {"order": "{{ask.q1}}"}},
                },
            },
        ],
        [edge("ask", "ext")],
    )
    t = engine.start(new_state(wf), wf, NOW)
    assert t.state.status == "waiting-input"
    with pytest.raises(DomainError) as bad:
        answer(t, wf, "ask", {"q2": "x"})
    assert bad.value.code == "validation_error"
    t = answer(t, wf, "ask", {"q1": "blue"})
    assert t.state.status == "waiting-external"
    assert t.state.interrupts["ext"].payload["data"]["correlation"] == {"order": "blue"}


def test_cancel_closes_open_interrupts():
    wf = fixture("conformance-approval")
    t = engine.start(new_state(wf), wf, NOW)
    c = engine.cancel(t.state, NOW, "changed my mind", "alice")
    assert c.state.status == "cancelled"
    assert not c.state.interrupts
    assert [x.status for x in c.closed] == ["cancelled"]
    assert types(c) == ["node.cancelled", "run.cancelled"]


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"action": "timeout"}, "resumeValue.action"),
        ({"action": "refine"}, "resumeValue.action"),  # not in this gate's actions
        ({}, "resumeValue"),
        ("accept", "resumeValue"),
        ({"action": "accept", "extra": 1}, "resumeValue"),
    ],
)
def test_approval_refuses_bad_resume_values(value, field):
    wf = fixture("conformance-approval")
    t = engine.start(new_state(wf), wf, NOW)
    with pytest.raises(DomainError) as refused:
        answer(t, wf, "gate", value)
    assert refused.value.code == "validation_error"
    assert refused.value.details["field"] == field


def test_approvers_list_binds():
    wf = wf_of([gate("g", approversList=["bob"])])
    t = engine.start(new_state(wf), wf, NOW)
    with pytest.raises(DomainError) as refused:
        answer(t, wf, "g", {"action": "accept"})
    assert refused.value.code == "forbidden"
    bob = {**ALICE, "subjectId": "bob"}
    assert answer(t, wf, "g", {"action": "accept"}, who=bob).state.status == "completed"


def test_registration_checks_report_paths():
    wf = wf_of(
        [
            {"id": "x", "typeId": "core.nope"},
            {"id": "g", "typeId": "core.approvalGate", "config": {"actions": ["accept"]}},
        ]
    )
    problems = engine.check_config(wf)
    paths = {p["path"] for p in problems}
    assert "nodes/0/typeId" in paths
    assert "nodes/1/config/title" in paths


def test_the_debug_switch_checks_each_event_against_the_schemas_before_it_is_written(monkeypatch):
    from interlude.engine import events
    from interlude.engine.run import EventDraft

    broken = [EventDraft(type="run.started", node_id=None, payload={"workflowId": 5})]
    monkeypatch.setattr(events, "VALIDATE_EVENTS", True)
    with pytest.raises(events.InvalidEvent):
        to_docs("t1/AAAAAAAAAAAAAAAAAAAA", broken, 0, engine.iso(NOW))
    monkeypatch.setattr(events, "VALIDATE_EVENTS", False)  # production: typed drafts are trusted, not re-checked
    assert to_docs("t1/AAAAAAAAAAAAAAAAAAAA", broken, 0, engine.iso(NOW))[0]["type"] == "run.started"


def test_the_suite_runs_with_event_checks_on():
    from interlude.engine import events

    assert events.VALIDATE_EVENTS


def started_inputs(t: engine.Transition, node: str) -> list[dict[str, object]]:
    return [
        {k: v for k, v in e.payload.items() if k.startswith("x-interlude-inputs")}
        for e in t.events
        if e.type == "node.started" and e.node_id == node
    ]


def test_each_visit_of_a_step_records_its_inputs_as_bound_when_it_started_bounded_in_size():
    # A gate reached again over a loop: what its inputs were bound to differs from one visit to the next
    looped = {"last": "{{gate.action}}", "amount": {"type": "variable", "variableName": "amount"}}
    wf = wf_of(
        [noop("start"), {**gate("gate", actions=["accept", "reject"]), "inputs": looped}, noop("revise")],
        [edge("start", "gate", "any_success"), edge("gate", "revise", "any_failed"), edge("revise", "gate", "any_success")],
    )
    first = engine.start(new_state(wf, inputs={"amount": 5}), wf, NOW)
    second = answer(first, wf, "gate", {"action": "reject"})

    assert started_inputs(first, "gate") == [{"x-interlude-inputs": {"last": None, "amount": 5}}]
    assert started_inputs(second, "gate") == [{"x-interlude-inputs": {"last": "reject", "amount": 5}}]
    assert started_inputs(first, "start") == [{}]  # a step that declares no inputs records none
    for doc in to_docs(second.state.runId, second.events, 0, engine.iso(NOW)):
        payload = schemas.payload_validator(doc["type"])
        assert payload is None or payload.is_valid(doc["payload"]), doc
    # Past 1 KiB of JSON, only the size and a digest are kept
    big = engine.start(new_state(wf, inputs={"amount": "x" * 1100}), wf, NOW)
    (kept,) = started_inputs(big, "gate")
    assert kept["x-interlude-inputs-digest"]["bytes"] > 1100
    assert len(kept["x-interlude-inputs-digest"]["sha256"]) == 64
