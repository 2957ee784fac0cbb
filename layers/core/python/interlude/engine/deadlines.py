"""Deadlines of a run: interrupt timeouts, core.delay wake-ups and the run's own timeout. Pure: no I/O.

Rules (shared/reference/openwop-notes.md §1.1 §Rejection, RFC 0223):
* an approval whose non-zero `timeoutMs` elapsed resolves rejected — `action: "timeout"`, `decision:
  "rejected"`, `reason: "timeout"`, no `resolvedBy` — whatever `onTimeout` says: `approve` is treated as
  `reject`, `escalate` additionally records an `interlude.escalation-requested` notice and never extends or
  grants. The gate then fails with `approval_rejected` and routes like any reject, exposing its outcome
  (domain/outcomes.py: action "timeout", decision "rejected", reason "timeout") to the steps after it;
* any other kind resolves with `reason: "timeout"` and fails its node with `interlude.interrupt_timeout`, routed
  like a failure (a vendor code: the OpenWOP registry has no code for a timed-out interrupt that is not an
  approval, and a producer may emit only registered or vendor codes);
* a sleeping core.delay node completes with `{"delayMs": n}`;
* a run past `configurable.run.runTimeoutMs` fails with `run_timeout`, cancelling open interrupts and delays.

`expire` applies every deadline that has passed at `now`, earliest first, in one Transition (as many as one
transaction can hold: budgets.TRANSITION_MAX_WAITS; Runs.apply_deadlines commits again for the rest), so the
scheduler's worker, a resolve and a read all converge on the same outcome, and applying it twice is a no-op
(a deadline that was applied is no longer in the state).
"""

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from interlude.config import DEFAULT_STEP_BUDGET
from interlude.domain.budgets import TRANSITION_MAX_WAITS
from interlude.domain.errors import run_error
from interlude.domain.outcomes import approval_outcome

if TYPE_CHECKING:
    from interlude.domain.models.run import OpenInterrupt, RunState
    from interlude.domain.models.workflow import WorkflowDefinition
    from interlude.engine.run import Transition
    from interlude.rules.interrupts.decide import Decision

ESCALATION_EVENT = "interlude.escalation-requested"

# `reminder` (issue 14) changes no state: its schedule asks the notify adapter to remind an open gate's
# non-voters (the `visit` is the reminder's index), and `pending` never lists it. `task` (issue 15 item 2) checks a
# task's claim (`interrupt_id` is the task id, `visit` the attempt): its state lives on the task item
# (interlude.app.tasks), so `pending` never lists it either.
Purpose = Literal["interrupt", "delay", "run", "reminder", "task"]


class Deadline(NamedTuple):
    """One pending deadline of a run: what it is for, and when (epoch seconds) it falls due."""

    purpose: Purpose
    due: float
    node_id: str | None = None
    # The interrupt id (interrupt) or the visit (delay): identifies the one occurrence this deadline is for.
    interrupt_id: str | None = None
    visit: int | None = None

    def as_input(self, run_id: str) -> dict[str, Any]:
        """The schedule's input: names the run and the exact occurrence, so a stale firing is a no-op."""
        body: dict[str, Any] = {"runId": run_id, "purpose": self.purpose, "due": self.due}
        if self.node_id is not None:
            body["nodeId"] = self.node_id
        if self.interrupt_id is not None:
            body["interruptId"] = self.interrupt_id
        if self.visit is not None:
            body["visit"] = self.visit
        return body


class NotDueYet(Exception):
    """A schedule fired before the deadline it names (clock skew): the invoker should retry."""


def from_input(body: dict[str, Any]) -> Deadline | None:
    """The Deadline a schedule's input names (see Deadline.as_input), or None if it names none."""
    try:
        return Deadline(
            purpose=body["purpose"],
            due=float(body["due"]),
            node_id=body.get("nodeId"),
            interrupt_id=body.get("interruptId"),
            visit=body.get("visit"),
        )
    except (KeyError, TypeError, ValueError):
        return None


def pending(state: "RunState") -> list[Deadline]:
    """Every deadline the run still waits on, earliest first."""
    if state.terminal:
        return []
    out: list[Deadline] = []
    if state.deadline is not None:
        out.append(Deadline("run", state.deadline))
    for node_id, interrupt in state.interrupts.items():
        if interrupt.deadline is not None:
            out.append(Deadline("interrupt", interrupt.deadline, node_id, interrupt_id=interrupt.interruptId))
    for node_id, delay in state.delays.items():
        out.append(Deadline("delay", delay.due, node_id, visit=delay.visit))
    return sorted(out, key=lambda d: (d.due, d.purpose != "run"))


def due(state: "RunState", now: datetime) -> list[Deadline]:
    moment = now.timestamp()
    return [d for d in pending(state) if d.due <= moment]


def is_pending(state: "RunState", deadline: Deadline) -> bool:
    """True while this exact occurrence (not a later visit of the same node) is still waiting."""
    return deadline in pending(state)


def timeout_decision(interrupt: "OpenInterrupt") -> "Decision":
    """What an elapsed timeout does to an open interrupt: never a grant."""
    from interlude.rules.interrupts.decide import Decision

    event: dict[str, Any] = {"kind": interrupt.kind, "reason": "timeout"}
    if interrupt.kind == "approval":
        event.update(action="timeout", decision="rejected")
        extra: list[tuple[str, dict[str, Any]]] = []
        if interrupt.payload.get("data", {}).get("onTimeout") == "escalate":
            escalation = {"reason": "timeout", "raisedAt": interrupt.raisedAt}
            if interrupt.payload.get("data", {}).get("title"):
                # What the escalation notification names (issue 14): the gate's rendered title.
                escalation["title"] = interrupt.payload["data"]["title"]
            extra.append((ESCALATION_EVENT, escalation))
        error = run_error("approval_rejected", f"approval gate {interrupt.nodeId!r} timed out and was rejected")
        outcome = approval_outcome(None, "timeout", "rejected", "timeout")
        return Decision("fail", None, event, error=error, extra_events=extra, output=outcome)
    error = run_error("interlude.interrupt_timeout", f"the {interrupt.kind} interrupt of node {interrupt.nodeId!r} timed out")
    return Decision("fail", None, event, error=error)


def expire(
    state: "RunState",
    workflow: "WorkflowDefinition",
    now: datetime,
    step_budget: int = DEFAULT_STEP_BUDGET,
    halt: dict[str, Any] | None = None,
) -> "Transition":
    """Apply every deadline passed at `now`; a Transition with no events when none has. `halt`: fail the run
    instead (what the deadlines would set off could not be committed)."""
    # The engine's run rules load with the first deadline applied: which deadlines a run has (`pending`, `due`) is
    # read from the run alone, by the dispatch function's every record (docs/adr/0058, "The worker
    # functions' cold imports").
    from interlude.engine.run import Transition, fail_where_it_stands, waits_spent

    if halt is not None:
        return fail_where_it_stands(state, now, halt, None)
    transition = Transition(state=state.model_copy(deep=True))
    for deadline in due(state, now):
        current = transition.state
        if current.terminal or not is_pending(current, deadline):
            continue  # an earlier deadline in this same pass settled it (e.g. the run timed out)
        spent = waits_spent(transition)
        if spent and spent + len(current.interrupts) + len(current.actions) >= TRANSITION_MAX_WAITS:
            break  # one transaction holds no more: the rest is applied by the next (Runs.apply_deadlines)
        step_t = _apply(current, workflow, deadline, now, step_budget, spent)
        transition = _chain(transition, step_t)
    return transition


def _apply(
    state: "RunState", workflow: "WorkflowDefinition", deadline: Deadline, now: datetime, step_budget: int, spent: int
) -> "Transition":
    from interlude.engine.run import _Step, resolve

    if deadline.purpose == "interrupt":
        assert deadline.node_id is not None
        interrupt = state.interrupts[deadline.node_id]
        return resolve(state, workflow, deadline.node_id, timeout_decision(interrupt), now, step_budget, spent=spent)
    step = _Step(state, workflow, now, step_budget, spent)
    if deadline.purpose == "delay":
        assert deadline.node_id is not None
        delay = step.s.delays.pop(deadline.node_id)
        step.complete(deadline.node_id, {"delayMs": delay.delayMs})
        step.run_queue()
        return step.t
    limit = int(state.run_options.get("runTimeoutMs") or 0)
    step.fail_run(run_error("run_timeout", f"the run did not finish within runTimeoutMs={limit}"), None)
    return step.t


def _chain(first: "Transition", second: "Transition") -> "Transition":
    """Two transitions in a row as one commit (the second started from the first's state). An interrupt the first
    opened and the second closed (a delay woke a gate, then the run timed out in the same pass) is dropped as the
    engine drops one a single step opens and closes (run.drop_transient)."""
    from interlude.engine.run import Transition, drop_transient

    chained = Transition(
        state=second.state,
        events=first.events + second.events,
        opened=first.opened + second.opened,
        closed=first.closed + second.closed,
        updated=first.updated + second.updated,
        claims=first.claims + second.claims,
        abandoned=first.abandoned + second.abandoned,
    )
    drop_transient(chained)
    return chained
