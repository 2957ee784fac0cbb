"""Deadlines, pure: interrupt timeouts (RFC 0223), core.delay wake-ups, run timeouts, schedule names."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from interlude import config
from interlude.adapters.scheduler.names import at_expression, parse_at, schedule_name
from interlude.domain import clock, schemas
from interlude.domain.errors import RUN_ERROR_CODES
from interlude.engine import deadlines
from interlude.engine import run as engine
from interlude.engine.events import to_docs
from interlude.rules.interrupts.decide import Resolver, decide
from tests.support.engine import ALICE, NOW, fixture, start, types, wf_of


def later(ms: int) -> datetime:
    return NOW + timedelta(milliseconds=ms)


def payload(t: engine.Transition, type_: str) -> dict:
    (found,) = [e.payload for e in t.events if e.type == type_]
    return found


def assert_schema_valid(t: engine.Transition) -> None:
    # Every event the deadline path writes passes the OpenWOP envelope and payload schemas.
    to_docs(t.state.runId, t.events, t.state.nextSeq, engine.iso(NOW))


TIMED_OUT = {"nodeId": "gate", "kind": "approval", "action": "timeout", "decision": "rejected", "reason": "timeout"}


@pytest.mark.parametrize("name", ["conformance-approval-timeout", "conformance-approval-timeout-approve"])
def test_gate_times_out_rejected_with_the_exact_payload_and_fails_the_run(name):
    # Given the conformance gate with timeoutMs 1500 (the second says onTimeout: approve)
    wf = fixture(name)
    t = start(wf)
    interrupt = t.state.interrupts["gate"]
    assert interrupt.deadline == NOW.timestamp() + 1.5

    # When 1499 ms have passed / Then nothing is due
    assert deadlines.expire(t.state, wf, later(1499)).events == []

    # When 1500 ms have passed
    t2 = deadlines.expire(t.state, wf, later(1500))

    # Then the gate resolved rejected by timeout — never granted, no resolvedBy — and the run failed naming it
    resolved = payload(t2, "interrupt.resolved")
    assert resolved == {**TIMED_OUT, "interruptId": interrupt.interruptId}
    assert types(t2) == ["interrupt.resolved", "approval.rejected", "node.failed", "run.failed"]
    assert payload(t2, "node.failed")["error"]["code"] == "approval_rejected"
    assert payload(t2, "node.failed")["error"]["retryable"] is False
    assert t2.state.status == "failed"
    assert t2.state.failedNodeId == "gate"
    assert t2.state.error["code"] == "approval_rejected"
    assert [c.status for c in t2.closed] == ["resolved"]
    assert t2.closed[0].resolution["decision"] == "rejected"
    assert_schema_valid(t2)


def test_timeout_routes_like_a_reject_over_a_failure_admitting_edge():
    # Given a timed gate with an any_failed edge to a fallback and an all_success edge to publish
    wf = wf_of(
        [
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Go?", "timeoutMs": 1000}},
            {"id": "publish", "typeId": "core.noop"},
            {"id": "fallback", "typeId": "core.noop"},
        ],
        [
            {"sourceNodeId": "gate", "targetNodeId": "publish", "triggerRule": "all_success"},
            {"sourceNodeId": "gate", "targetNodeId": "fallback", "triggerRule": "any_failed"},
        ],
    )
    # When it times out / Then the fallback runs, publish is skipped, and the run completes
    t = deadlines.expire(start(wf).state, wf, later(1000))
    assert t.state.status == "completed"
    assert t.state.nodes["fallback"].status == "completed"
    assert t.state.nodes["publish"].status == "skipped"
    assert t.state.nodes["gate"].status == "failed"


def test_escalate_records_a_notice_but_still_rejects():
    wf = wf_of(
        [
            {
                "id": "gate",
                "typeId": "core.approvalGate",
                "config": {"title": "Go?", "timeoutMs": 10, "onTimeout": "escalate"},
            }
        ]
    )
    t = deadlines.expire(start(wf).state, wf, later(10))
    assert types(t) == [
        "interrupt.resolved",
        "approval.rejected",
        deadlines.ESCALATION_EVENT,
        "node.failed",
        "run.failed",
    ]
    assert payload(t, "interrupt.resolved")["decision"] == "rejected"
    assert payload(t, deadlines.ESCALATION_EVENT)["reason"] == "timeout"
    assert_schema_valid(t)


def test_other_kinds_fail_their_node_with_the_vendor_interrupt_timeout_code():
    wf = wf_of(
        [
            {
                "id": "ask",
                "typeId": "core.clarificationGate",
                "config": {"questions": [{"id": "q", "question": "Why?"}], "timeoutMs": 500},
            }
        ]
    )
    t = deadlines.expire(start(wf).state, wf, later(500))
    resolved = payload(t, "interrupt.resolved")
    assert resolved["reason"] == "timeout"
    assert resolved["kind"] == "clarification"
    assert "decision" not in resolved
    assert "action" not in resolved
    assert payload(t, "node.failed")["error"] == {
        "code": "interlude.interrupt_timeout",
        "message": "the clarification interrupt of node 'ask' timed out",
        "retryable": False,
    }
    assert t.state.status == "failed"
    assert t.state.error["code"] == "interlude.interrupt_timeout"
    assert_schema_valid(t)


def test_expire_twice_changes_nothing_and_a_decided_gate_has_no_deadline():
    wf = fixture("conformance-approval-timeout")
    t = start(wf)
    once = deadlines.expire(t.state, wf, later(2000))
    assert deadlines.expire(once.state, wf, later(3000)).events == []
    # A gate a person decided first has nothing left to time out.
    gate = t.state.interrupts["gate"]
    decision = decide(gate, {"action": "accept"}, Resolver(ALICE, "run"), engine.iso(NOW), wf.node("gate").config)
    decided = engine.resolve(t.state, wf, "gate", decision, NOW)
    assert deadlines.pending(decided.state) == []
    assert deadlines.expire(decided.state, wf, later(5000)).events == []


def test_a_resume_may_never_claim_the_timeout_action():
    wf = fixture("conformance-approval-timeout")
    t = start(wf)
    with pytest.raises(Exception) as refused:
        decide(t.state.interrupts["gate"], {"action": "timeout"}, Resolver(ALICE, "run"), engine.iso(NOW), {})
    assert getattr(refused.value, "code", None) == "validation_error"


# --- core.delay ------------------------------------------------------------------------------------


def test_delay_fixture_sleeps_running_then_completes_after_its_delay():
    # Given conformance-delay with its variable binding and default (1000 ms)
    wf = fixture("conformance-delay")
    t = start(wf)
    # Then the run is running (not waiting on a person) and the node sleeps
    assert t.state.status == "running"
    assert t.state.nodes["wait"].status == "running"
    assert t.state.delays["wait"].delayMs == 1000
    assert types(t) == ["run.started", "node.started"]
    assert deadlines.expire(t.state, wf, later(999)).events == []
    woke = deadlines.expire(t.state, wf, later(1000))
    assert types(woke) == ["node.completed", "run.completed"]
    assert woke.state.outputs["wait"] == {"delayMs": 1000}
    assert woke.state.status == "completed"


def test_delay_takes_the_run_input_over_the_default_and_config_over_both():
    wf = fixture("conformance-delay")
    assert start(wf, inputs={"delayMs": 250}).state.delays["wait"].delayMs == 250
    configured = wf_of([{"id": "w", "typeId": "core.delay", "config": {"delayMs": 40}, "inputs": {"delayMs": 7}}])
    assert start(configured).state.delays["w"].delayMs == 40
    # Zero sleeps not at all
    assert start(wf, inputs={"delayMs": 0}).state.status == "completed"


def test_delay_with_an_unusable_value_fails_its_node():
    wf = fixture("conformance-delay")
    t = start(wf, inputs={"delayMs": "soon"})
    assert t.state.status == "failed"
    assert t.state.error["code"] == "validation_error"


def test_cancel_mid_delay_cancels_the_sleeping_node():
    wf = fixture("conformance-cancellable")
    t = start(wf)
    cancelled = engine.cancel(t.state, later(10), "stop", "alice")
    assert cancelled.state.status == "cancelled"
    assert cancelled.state.delays == {}
    assert types(cancelled) == ["node.cancelled", "run.cancelled"]
    assert deadlines.pending(cancelled.state) == []


# --- run timeout ----------------------------------------------------------------------------------


def test_run_timeout_fails_the_run_and_cancels_open_interrupts():
    wf = wf_of([{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Go?"}}])
    t = start(wf, configurable={"version": 1, "run": {"runTimeoutMs": 5000}})
    assert t.state.deadline == NOW.timestamp() + 5
    assert deadlines.expire(t.state, wf, later(4999)).events == []
    failed = deadlines.expire(t.state, wf, later(5000))
    assert types(failed) == ["node.cancelled", "run.failed"]
    assert failed.state.status == "failed"
    assert failed.state.error["code"] == "run_timeout"
    assert [c.status for c in failed.closed] == ["cancelled"]
    assert_schema_valid(failed)


def test_a_delay_waking_into_a_gate_then_the_run_timing_out_in_one_pass_writes_one_consistent_commit():
    # Given delay (1 s) -> gate, and a run timeout at 2 s; the first look comes at 3 s
    wf = wf_of(
        [
            {"id": "w", "typeId": "core.delay", "config": {"delayMs": 1000}},
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Go?"}},
        ],
        [{"sourceNodeId": "w", "targetNodeId": "gate"}],
    )
    t = start(wf, configurable={"version": 1, "run": {"runTimeoutMs": 2000}})
    both = deadlines.expire(t.state, wf, later(3000))
    # Then the delay woke, the gate opened, and the run timed out, cancelling it; no interrupt item is
    # both created and closed in one transaction
    assert types(both)[:2] == ["node.completed", "node.started"]
    assert both.state.error["code"] == "run_timeout"
    assert both.opened == []
    assert both.closed == []


def test_a_gate_a_waking_delay_opens_keeps_its_conversation_claim():
    # Given delay -> a conversation start; the delay wakes through expire (not through a command)
    wf = wf_of(
        [
            {"id": "w", "typeId": "core.delay", "config": {"delayMs": 1000}},
            {"id": "talk", "typeId": "core.conversationGate", "config": {"turn": "start", "title": "Pick"}},
        ],
        [{"sourceNodeId": "w", "targetNodeId": "talk"}],
    )
    woke = deadlines.expire(start(wf).state, wf, later(2000))
    # Then the conversation it opened is claimed tenant-wide in the same commit
    (opened,) = woke.opened
    assert woke.claims == [opened.payload["data"]["conversationId"]]


# --- schedule names and expressions ----------------------------------------------------------------


def test_schedule_names_are_deterministic_distinct_and_valid():
    a = deadlines.Deadline("interrupt", 1.0, "gate", interrupt_id="t1/abc")
    b = deadlines.Deadline("interrupt", 9.0, "gate", interrupt_id="t1/abd")
    d1 = deadlines.Deadline("delay", 1.0, "w", visit=1)
    d2 = deadlines.Deadline("delay", 1.0, "w", visit=2)
    r = deadlines.Deadline("run", 1.0)
    names = [schedule_name("t1/run", x) for x in (a, b, d1, d2, r)]
    assert len(set(names)) == 5
    assert schedule_name("t1/run", a) == schedule_name(
        "t1/other", deadlines.Deadline("interrupt", 5, "x", interrupt_id="t1/abc")
    )
    for name in names:
        assert re.fullmatch(r"[a-zA-Z0-9-_]{1,64}", name)


def test_at_expression_is_utc_and_never_before_the_deadline():
    due = datetime(2026, 11, 30, 12, 0, 1, 200000, tzinfo=UTC).timestamp()
    assert at_expression(due) == "at(2026-11-30T12:00:02)"
    assert parse_at(at_expression(due)) >= due
    assert at_expression(float(int(due))) == "at(2026-11-30T12:00:01)"
    assert parse_at("rate(1 minute)") is None


def test_deadline_input_round_trips():
    d = deadlines.Deadline("delay", 1234.5, "w", visit=3)
    assert deadlines.from_input(json.loads(json.dumps(d.as_input("t1/r")))) == d
    assert deadlines.from_input({"runId": "t1/r"}) is None


def test_clock_offset_file_moves_forward_only(tmp_path, monkeypatch):
    path = tmp_path / "clock"
    monkeypatch.setenv(clock.CLOCK_FILE_ENV, str(path))
    clock.reset(path)
    before = clock.now()
    clock.advance(path, 3600)
    assert clock.now() - before >= timedelta(seconds=3600)
    with pytest.raises(ValueError):
        clock.advance(path, -1)
    monkeypatch.delenv(clock.CLOCK_FILE_ENV)
    config.forget()  # a process reads its environment once: a new one, without the offset file
    assert abs((clock.now() - datetime.now(UTC)).total_seconds()) < 5


def test_escalation_event_type_is_a_valid_vendor_type():
    assert schemas.validator("run-event.schema.json").is_valid(
        {
            "eventId": "e" * 22,
            "runId": "t1/AAAAAAAAAAAAAAAAAAAA",
            "type": deadlines.ESCALATION_EVENT,
            "payload": {},
            "timestamp": "2026-11-30T12:00:00.000Z",
            "sequence": 0,
            "schemaVersion": 1,
            "engineVersion": 1,
        }
    )


# approval_rejected joined the registry at 2.43 (openwop-notes §1.1); the vendored envelope predates it.
REGISTERED_SINCE_THE_VENDORED_ENVELOPE = {"approval_rejected"}
VENDOR_CODE = re.compile(r"^(?!openwop\.)[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$")


def test_every_code_a_run_or_node_fails_with_is_registered_or_carries_the_vendor_prefix():
    registered = set(schemas.load("error-envelope.schema.json")["properties"]["error"]["oneOf"][0]["enum"])
    for code in RUN_ERROR_CODES:
        assert code in registered | REGISTERED_SINCE_THE_VENDORED_ENVELOPE or (
            VENDOR_CODE.match(code) and code.startswith("interlude.")
        ), code
    assert "interrupt_timeout" not in RUN_ERROR_CODES
