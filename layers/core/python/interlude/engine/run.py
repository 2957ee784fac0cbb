"""Advance a run through its graph: the engine's only entry points are start, advance, resolve and cancel.

Each returns a Transition (new state, event drafts, interrupts opened and closed) and never mutates its
input, so a caller can retry on a lost race by reading again and deciding again.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import ValidationError

from interlude.config import DEFAULT_STEP_BUDGET
from interlude.domain.budgets import (
    MAX_OPEN_WAITS,
    MAX_STATE_BYTES,
    MAX_VALUE_BYTES,
    OPEN_WAITS_BUDGET,
    TRANSITION_MAX_WAITS,
    TRANSITION_SOFT_BYTES,
    BudgetExceeded,
    json_size,
)
from interlude.domain.clock import instant, iso
from interlude.domain.errors import run_error
from interlude.domain.models.run import (
    TERMINAL_NODE_STATUSES,
    Delay,
    NodeState,
    OpenInterrupt,
    PendingAction,
    RunState,
    RunStatus,
    Vote,
    state_json,
)
from interlude.domain.models.workflow import FAILURE_ADMITTING_RULES, Node, WorkflowDefinition
from interlude.domain.templates import PROBE
from interlude.engine import forks, kind_events
from interlude.engine.effect_names import ACTION_REQUESTED, GATE_ASSIGNED, NODE_RETRIED, RERUN_REASON, TASK
from interlude.engine.growth import unbounded_growth
from interlude.engine.nodetypes import ActionSpec, Failed, GateSpec, Passed, bind_inputs, recorded_inputs
from interlude.engine.registry import known_type_ids
from interlude.engine.registry import node_type as registered_type
from interlude.engine.subworkflows import (
    CHILD_REQUESTED,
    PARENT_CANCELLED,
    SUBWORKFLOW,
    limit_error,
    mapped_outcome,
)
from interlude.engine.visits import interrupt_id as interrupt_id
from interlude.engine.visits import interrupt_key as interrupt_key
from interlude.engine.visits import visit_keys as visit_keys
from interlude.engine.visits import visit_of as visit_of
from interlude.rules.interrupts.payloads import holding_interrupt, validate_payload

if TYPE_CHECKING:
    # An annotation only: the decision rules load where a decision is made (a resolve), not where a run moves.
    from interlude.rules.interrupts.decide import Decision

DEFAULT_MAX_LOOP_ITERATIONS = 25
DEFAULT_RECURSION_LIMIT = 1000
# What a run's configurable may raise them to: more is clamped (OpenWOP's run options: the server clamps
# `recursionLimit`), so no caller makes a run that loops without end, a transaction of steps at a time.
MAX_LOOP_ITERATIONS = 1000
MAX_RECURSION_LIMIT = 10_000
# A fork's task or child result carried from its source (a vendor event, `<org>.<name>`): what it was, from which.
RESULT_CARRIED = "interlude.result-carried"


class EventDraft(NamedTuple):
    type: str
    node_id: str | None
    payload: dict[str, Any]


class Closed(NamedTuple):
    interrupt: OpenInterrupt
    status: str  # resolved | cancelled
    resolution: dict[str, Any] | None = None


@dataclass
class Transition:
    state: RunState
    events: list[EventDraft] = field(default_factory=list)
    opened: list[OpenInterrupt] = field(default_factory=list)
    closed: list[Closed] = field(default_factory=list)
    # Votes recorded on interrupts that stay open: (interrupt after the vote).
    updated: list[OpenInterrupt] = field(default_factory=list)
    # Conversation ids opened by this transition: each is claimed tenant-wide (a conditional item).
    claims: list[str] = field(default_factory=list)
    # Pending actions the run stopped waiting for (it ended): (node id, action). The store ends their task items
    # in the same transaction, so no claim hands out work for a run that no longer wants it.
    abandoned: list[tuple[str, PendingAction]] = field(default_factory=list)
    # A failed run running again (retry_action): the store claims its open-run slot again, as a new run's.
    reopened: bool = False


def _duration_ms(start: str | None, now: datetime) -> int:
    if not start:
        return 0
    return max(0, int((now - instant(start)).total_seconds() * 1000))


def waiting_on(state: RunState) -> tuple[str, RunStatus] | None:
    """The node whose open interrupt sets the run's waiting status, and that status; None when none is open.

    With several gates open the kinds are ranked by rules.interrupts.payloads.STATUS_PRECEDENCE (an
    external-event gate always makes the run waiting-external); the snapshot's currentNodeId names this node.
    """
    return holding_interrupt((node_id, oi.kind) for node_id, oi in state.interrupts.items())


class _Step:
    def __init__(
        self,
        state: RunState,
        workflow: WorkflowDefinition | None,
        now: datetime,
        step_budget: int = DEFAULT_STEP_BUDGET,
        spent: int = 0,
        owned: bool = False,
    ) -> None:
        """`workflow` None: a step that only closes the run (cancel), which executes and routes nothing. `spent`:
        waits an earlier step of the same commit wrote and closed (deadlines.expire chains steps). `owned`: the caller
        hands `state` over (it read it for this step alone and builds no other step from it), so it is not copied."""
        # A copy: the caller's state stays as loaded (a failed commit builds again from it). Dumped and validated by
        # pydantic-core, about five times faster than model_copy(deep=True)'s Python walk on the hot path.
        copied = state if owned else type(state).model_validate(state.model_dump(round_trip=True))
        self.t = Transition(state=copied)
        self.s = self.t.state
        self._wf = workflow
        self.now = now
        self.budget = step_budget
        run_options = self.s.run_options
        self.max_visits = min(int(run_options.get("maxLoopIterations") or DEFAULT_MAX_LOOP_ITERATIONS), MAX_LOOP_ITERATIONS)
        self.max_executions = min(int(run_options.get("recursionLimit") or DEFAULT_RECURSION_LIMIT), MAX_RECURSION_LIMIT)
        # Bytes of outputs and interrupt payloads this transition recorded (TRANSITION_SOFT_BYTES), and the run
        # state's size, measured once when first needed and then kept by each output's change.
        self.recorded = 0
        self._state_bytes: int | None = None
        # Set when a decision must land without anything after it running (service.commit_or_fail).
        self.halting = False
        # Waits this transition may write an item for (budgets.TRANSITION_MAX_WAITS): every one open now (the run
        # may end in it, closing them all) and every one it opens.
        self.waits = spent + len(self.s.interrupts) + len(self.s.actions)

    # -- plumbing --------------------------------------------------------------------------------

    @property
    def wf(self) -> WorkflowDefinition:
        assert self._wf is not None, "this step was made without its workflow"
        return self._wf

    def emit(self, type_: str, node_id: str | None, payload: dict[str, Any]) -> None:
        self.t.events.append(EventDraft(type_, node_id, payload))

    def tick(self) -> int:
        self.s.step += 1
        return self.s.step

    def scope(self) -> dict[str, Any]:
        inputs = {v.name: v.defaultValue for v in self.wf.variables if v.defaultValue is not None}
        inputs.update(self.s.inputs)
        return {**self.s.outputs, "inputs": inputs}

    # -- node lifecycle --------------------------------------------------------------------------

    def enqueue(self, node_id: str) -> None:
        self.s.nodes[node_id].status = "queued"
        self.s.queue.append(node_id)

    def run_queue(self) -> None:
        while self.s.queue and not self.s.terminal:
            if self.budget <= 0 or self.recorded >= TRANSITION_SOFT_BYTES or self.waits >= TRANSITION_MAX_WAITS:
                break
            self.budget -= 1
            self.execute(self.s.queue.pop(0))
        self.settle()

    def execute(self, node_id: str) -> None:
        node = self.wf.node(node_id)
        ns = self.s.nodes[node_id]
        ns.visits += 1
        ns.activatedAt = self.tick()
        self.s.executed += 1
        if ns.visits > self.max_visits or self.s.executed > self.max_executions:
            limit = "maxLoopIterations" if ns.visits > self.max_visits else "recursionLimit"
            code = "loop_limit_exceeded" if limit == "maxLoopIterations" else "recursion_limit_exceeded"
            error = run_error(code, f"node {node_id!r} exceeded {limit}")
            ns.status = "failed"
            ns.settledAt = self.tick()
            self.emit("node.failed", node_id, {"nodeId": node_id, "error": error, "attempts": 1})
            self.fail_run(error, node_id)
            return
        scope = self.scope()
        started: dict[str, Any] = {"nodeId": node_id, "typeId": node.typeId}
        bound = self.bound_inputs(node, scope)
        if bound is not None:
            started.update(recorded_inputs(bound))
        self.emit("node.started", node_id, started)
        node_type = registered_type(node.typeId)
        if node_type is None:  # checked when the definition was accepted (check_workflow)
            raise KeyError(node.typeId)
        config = node_type.config_model.model_validate(node.config)
        try:
            if node_type.wait is not None:
                if bound is None:  # its binding failed above: the node fails on it here
                    bound = bind_inputs(node.inputs, scope)
                self.sleep(node_id, node_type.wait(config, scope, bound))
                return
            if node_type.act is not None:
                scope["$run"] = self.run_facts(node_id)
                self.request_action(node_id, node_type.act(node_id, config, scope))
                return
            if node_type.ask is not None:
                scope["$run"] = self.run_facts(node_id)
                outcome = node_type.ask(node_id, config, scope)
            else:
                assert node_type.compute is not None
                output = node_type.compute(config, scope)
                routes = node_type.route(config, output) if node_type.route is not None else None
        except BudgetExceeded as exc:
            self.fail(node_id, budget_error(node_id, exc))
            return
        except Exception as exc:  # noqa: BLE001 - a node's own failure fails the node, never the request
            self.fail(node_id, node_error(node_id, exc))
            return
        if node_type.ask is not None:
            self.gate(node_id, outcome)
            return
        self.complete(node_id, output, routes)

    @staticmethod
    def bound_inputs(node: Node, scope: dict[str, Any]) -> dict[str, Any] | None:
        """The step's declared inputs bound from the run as it starts (None: it declares none, or they cannot be bound,
        which the node that reads them fails on)."""
        if not node.inputs:
            return None
        try:
            return bind_inputs(node.inputs, scope)
        except Exception:  # noqa: BLE001 - recorded for reading only; a node reading its inputs fails on its own
            return None

    def run_facts(self, node_id: str) -> dict[str, Any]:
        """What a gate may know of the run besides templates (engine/gates.py); no template can reach it."""
        return {
            "runId": self.s.runId,
            "visit": self.s.nodes[node_id].visits,
            "runOptions": self.s.run_options,
            "conversations": dict(self.s.conversations),
            "exchanging": [
                oi.payload["data"]["conversationId"]
                for oi in self.s.interrupts.values()
                if oi.kind == "conversation.exchange"
            ],
        }

    def gate(self, node_id: str, outcome: Any) -> None:
        if isinstance(outcome, Failed):
            self.fail(node_id, outcome.error)
        elif isinstance(outcome, Passed):
            self.apply_effects(node_id, outcome.effects)
            self.complete(node_id, outcome.output)
        elif not self.settle_as_recorded(node_id, outcome):
            self.suspend(node_id, outcome)

    def carried(self, family: str, node_id: str) -> dict[str, Any] | None:
        """What a fork's source recorded for this visit of `node_id` (engine/forks.py), taken: used once."""
        held = self.s.recorded.get(family)
        if not held:
            return None
        return held.pop(forks.visit_key(node_id, self.s.nodes[node_id].visits), None)

    def settle_as_recorded(self, node_id: str, spec: GateSpec) -> bool:
        """A gate a fork's source had decided: it settles as decided there, asking no one (no interrupt.requested). A
        conversation turn's effects apply as when it is asked (the fork's own conversation opened, claimed, closing),
        and the recorded answer lands on the fork's conversation."""
        recorded = self.carried("gates", node_id)
        if recorded is None:
            return False
        visit = self.s.nodes[node_id].visits
        ids = {"nodeId": node_id, "interruptId": interrupt_id(self.s, node_id, visit)}
        cid = spec.data.get("conversationId") if spec.kind.startswith("conversation.") else None
        if cid is not None:
            recorded = forks.in_conversation(recorded, cid)
            self.apply_effects(node_id, spec.effects)
        decision = forks.decision_of(recorded, spec.kind)
        if cid is not None and spec.kind == "conversation.close" and decision.outcome == "complete":
            self.s.conversations[cid] = "closed"
        self.land(node_id, ids, spec.kind, decision)
        return True

    def land(self, node_id: str, ids: dict[str, Any], kind: str, decision: "Decision") -> None:
        """A gate's decision lands: interrupt.resolved (and its kind's twin), the decision's own events, the node
        settled as the decision says."""
        resolved = {**ids, **decision.event}
        self.emit("interrupt.resolved", node_id, resolved)
        alias = kind_events.resolved_type(kind, resolved)
        if alias is not None:
            self.emit(alias, node_id, dict(resolved))
        for type_, payload in decision.extra_events:
            self.emit(type_, node_id, {**ids, **payload})
        if decision.outcome == "complete":
            self.emit("node.resumed", node_id, {**ids, "resumeValue": decision.resume_value})
            output = decision.resume_value if decision.output is None else decision.output
            self.complete(node_id, output, routed_only=decision.routed_only)
        else:
            assert decision.error is not None
            self.fail(node_id, decision.error, decision.output)

    def apply_effects(self, node_id: str, effects: tuple[tuple[Any, ...], ...]) -> None:
        for effect in effects:
            if effect[0] == "event":
                self.emit(effect[1], node_id, {"nodeId": node_id, **effect[2]})
            elif effect[0] == "conversation":
                if effect[2] == "open":
                    self.t.claims.append(effect[1])
                self.s.conversations[effect[1]] = effect[2]

    def wait_refused(self, node_id: str) -> bool:
        """Fail `node_id` when the run holds MAX_OPEN_WAITS already (before anything of its wait is built)."""
        if len(self.s.interrupts) + len(self.s.actions) < MAX_OPEN_WAITS:
            return False
        self.fail(node_id, budget_error(node_id, BudgetExceeded(OPEN_WAITS_BUDGET, MAX_OPEN_WAITS, "waits")))
        return True

    def suspend(self, node_id: str, spec: GateSpec) -> None:
        if self.wait_refused(node_id):
            return
        visit = self.s.nodes[node_id].visits
        key = interrupt_key(self.s.runId, node_id, visit)
        payload = spec.payload(key)
        error = self.admit(node_id, payload, None, "the interrupt's payload")
        if error is not None:
            self.fail(node_id, error)
            return
        problems = validate_payload(payload)
        if problems:
            # Registration probes every gate, so only run-time template values can get here.
            error = run_error("validation_error", "the gate built an invalid interrupt payload", {"errors": problems})
            self.fail(node_id, error)
            return
        interrupt = OpenInterrupt(
            nodeId=node_id,
            key=key,
            interruptId=interrupt_id(self.s, node_id, visit),
            kind=spec.kind,
            visit=visit,
            payload=payload,
            raisedAt=iso(self.now),
            deadline=self.now.timestamp() + spec.timeout_ms / 1000 if spec.timeout_ms else None,
        )
        self.s.interrupts[node_id] = interrupt
        self.waits += 1
        self.s.nodes[node_id].status = "suspended"
        self.t.opened.append(interrupt)
        self.emit("interrupt.requested", node_id, payload)
        alias = kind_events.requested_type(spec.kind)
        if alias is not None:
            self.emit(alias, node_id, dict(payload))
        suspended = {"nodeId": node_id, "interruptId": interrupt.interruptId, "kind": spec.kind, "key": key}
        if spec.reason:
            suspended["reason"] = spec.reason
        self.emit("node.suspended", node_id, suspended)
        self.apply_effects(node_id, spec.effects)
        self.carry_votes(node_id, interrupt)

    def carry_votes(self, node_id: str, interrupt: OpenInterrupt) -> None:
        """Votes a fork's source had cast on this gate, still open at the fork point: on the gate again, in order (a
        quorum gate with 1 of 2 approvals waits for the 2nd only), and their events again after its request."""
        carried = self.carried("votes", node_id)
        if carried is None:
            return
        interrupt.votes = [Vote.model_validate(v) for v in carried["votes"]]
        ids = {"nodeId": node_id, "interruptId": interrupt.interruptId}
        for type_, payload in carried["events"]:
            self.emit(type_, node_id, {**ids, **payload})

    def sleep(self, node_id: str, delay: int | str) -> None:
        """core.delay: sleep durably; the run stays `running` and wakes through engine.deadlines.expire."""
        if isinstance(delay, str):
            self.fail(node_id, run_error("validation_error", delay))
            return
        if delay == 0:
            self.complete(node_id, {"delayMs": 0})
            return
        ns = self.s.nodes[node_id]
        ns.status = "running"
        self.s.delays[node_id] = Delay(visit=ns.visits, delayMs=delay, due=self.now.timestamp() + delay / 1000)

    def request_action(self, node_id: str, spec: ActionSpec | str) -> None:
        """An action node (engine/actions.py): running until its worker's outcome arrives (finish_action)."""
        if isinstance(spec, str):
            self.fail(node_id, run_error("validation_error", spec))
            return
        if spec.kind in (TASK, SUBWORKFLOW) and (result := self.carried("results", node_id)) is not None:
            # A task or child a fork's source completed: its result, and no task or child is made (engine/forks.py).
            carried = {"nodeId": node_id, "kind": result["kind"], "from": result["from"]}
            if self.s.fork is not None:
                carried["sourceRunId"] = self.s.fork.sourceRunId
            self.emit(RESULT_CARRIED, node_id, carried)
            self.complete(node_id, result["output"])
            return
        if self.wait_refused(node_id):
            return
        error = self.admit(node_id, spec.request, None, "the action's request")
        if error is None and spec.kind == SUBWORKFLOW:
            error = limit_error(self.s, node_id)
        if error is not None:
            self.fail(node_id, error)
            return
        ns = self.s.nodes[node_id]
        ns.status = "running"
        self.waits += 1
        if spec.kind == forks.HTTP_KIND and (performed := self.carried("effects", node_id)) is not None:
            # An effect a fork's source performed: its identity, so the worker lands the recorded outcome (engine/forks.py).
            spec = spec._replace(effect_id=performed["effectId"])
        self.s.actions[node_id] = PendingAction(
            visit=ns.visits,
            kind=spec.kind,
            effectId=spec.effect_id,
            keying=spec.keying,
            request=spec.request,
            requestedAt=iso(self.now),
        )
        if spec.kind == SUBWORKFLOW:
            # The child is started by the outbox (interlude.app.subworkflows), never by the actions worker.
            self.s.children.append(spec.effect_id)
            requested = {"nodeId": node_id, "childRunId": spec.effect_id, "visit": ns.visits}
            self.emit(CHILD_REQUESTED, node_id, {**requested, "workflowId": spec.request["workflowId"]})
            return
        self.emit(
            ACTION_REQUESTED,
            node_id,
            {"nodeId": node_id, "kind": spec.kind, "effectId": spec.effect_id, "visit": ns.visits},
        )

    def state_bytes(self) -> int:
        if self._state_bytes is None:
            # json_size's count, as the store will write it (pydantic-core): nothing is refused here, only measured.
            self._state_bytes = len(state_json(self.s))
        return self._state_bytes

    def admit(self, node_id: str, value: Any, replaces: Any, what: str) -> dict[str, Any] | None:
        """Account for `value` joining the run state (in place of `replaces`): None if it fits its budgets,
        else the error its node fails with. Measured before anything is stored or copied."""
        try:
            size = json_size(value, MAX_VALUE_BYTES, what)
            state = self.state_bytes() + size - (json_size(replaces, 1 << 62, depth=1 << 30) if replaces else 0)
            if state > MAX_STATE_BYTES:
                raise BudgetExceeded("the run's state", MAX_STATE_BYTES)
        except BudgetExceeded as exc:
            return budget_error(node_id, exc)
        self._state_bytes = state
        self.recorded += size
        return None

    def complete(self, node_id: str, output: Any, routes: list[str] | None = None, routed_only: bool = False) -> None:
        """`routes`: the targets a routing node continues to; `routed_only`: the output goes on only over edges whose
        condition holds for it (rules.interrupts.decide.Decision.routed_only)."""
        error = self.admit(node_id, output, self.s.outputs.get(node_id), "the node's output")
        if error is not None:
            self.fail(node_id, error)
            return
        ns = self.s.nodes[node_id]
        ns.status = "completed"
        ns.settledAt = self.tick()
        self.s.outputs[node_id] = output
        ns.routes = self.routes_of(node_id, "completed", output, routes, routed_only)
        outputs = output if isinstance(output, dict) else {"value": output}
        self.emit("node.completed", node_id, {"nodeId": node_id, "outputs": outputs})
        self.propagate(node_id)

    def fail(self, node_id: str, error: dict[str, Any], outcome: Any = None) -> None:
        """`outcome`: what the steps after a decided gate read of it (a rejection's comment and decider)."""
        ns = self.s.nodes[node_id]
        if outcome is not None and self.admit(node_id, outcome, self.s.outputs.get(node_id), "the node's output") is None:
            self.s.outputs[node_id] = outcome
        ns.status = "failed"
        ns.settledAt = self.tick()
        ns.routes = self.routes_of(node_id, "failed", outcome, None, False)
        self.emit("node.failed", node_id, {"nodeId": node_id, "error": error, "attempts": 1})
        if any(e.triggerRule in FAILURE_ADMITTING_RULES for e in self.wf.outgoing(node_id)):
            self.propagate(node_id)
        else:
            self.fail_run(error, node_id)

    def routes_of(
        self, node_id: str, status: str, output: Any, routes: list[str] | None, routed_only: bool
    ) -> list[str] | None:
        """The targets a node that settled continues to (None: every target of its edges): those a routing node
        chose, narrowed to edges whose condition holds for its outcome (engine/conditions.py) or that have none, unless
        the outcome is `routed_only`. Decided once, as it settles: its outputs do not change until its next visit."""
        edges = self.wf.outgoing(node_id)
        if routes is None and not routed_only and all(e.condition is None for e in edges):
            return None
        from interlude.engine.conditions import condition_context, holds  # only definitions that route by condition

        context = condition_context(status, output)
        chosen: list[str] = []
        for edge in edges:
            if edge.targetNodeId in chosen or (routes is not None and edge.targetNodeId not in routes):
                continue
            if holds(edge.condition, context) if edge.condition is not None else not routed_only:
                chosen.append(edge.targetNodeId)
        return chosen

    def skip(self, node_id: str, reason: str) -> None:
        ns = self.s.nodes[node_id]
        ns.status = "skipped"
        ns.settledAt = self.tick()
        self.emit("node.skipped", node_id, {"nodeId": node_id, "reason": reason})
        self.propagate(node_id)

    def propagate(self, node_id: str) -> None:
        if self.halting:
            return
        seen: list[str] = []
        for edge in self.wf.outgoing(node_id):
            if edge.targetNodeId not in seen:
                seen.append(edge.targetNodeId)
        for target in seen:
            self.evaluate(target)

    def source_status(self, source: str, target: str) -> str:
        """A source that settled counts as skipped for the targets it does not route to (routes_of)."""
        ns = self.s.nodes[source]
        if ns.status in ("completed", "failed") and ns.routes is not None and target not in ns.routes:
            return "skipped"
        return ns.status

    def evaluate(self, target: str) -> None:
        if self.s.terminal:
            return
        tns = self.s.nodes[target]
        if tns.status in ("queued", "suspended", "running"):
            return
        rule = self.wf.trigger_rule(target) or "all_success"
        fresh, all_settled = self.settled_sources(target)
        fire = trigger_fires(rule, fresh, all_settled)
        if fire:
            self.enqueue(target)
        elif fire is False and tns.visits == 0 and tns.status == "pending":
            self.skip(target, f"triggerRule {rule} not satisfied")

    def settled_sources(self, target: str) -> tuple[list[str], bool]:
        """The statuses of the target's sources that settled since it was last activated, and whether all did."""
        activated_at = self.s.nodes[target].activatedAt
        sources = list(dict.fromkeys(e.sourceNodeId for e in self.wf.incoming(target)))
        fresh = [
            self.source_status(s, target)
            for s in sources
            if self.s.nodes[s].status in TERMINAL_NODE_STATUSES and self.s.nodes[s].settledAt > activated_at
        ]
        return fresh, len(fresh) == len(sources)

    # -- run lifecycle ---------------------------------------------------------------------------

    def settle(self) -> None:
        if self.s.terminal:
            return
        if self.s.queue:
            self.s.status = "running"
        elif self.s.interrupts:
            held = waiting_on(self.s)
            assert held is not None
            self.s.status = held[1]
        elif self.s.delays or self.s.actions:
            self.s.status = "running"
        else:
            self.complete_run()

    def complete_run(self) -> None:
        for node_id, ns in self.s.nodes.items():
            if ns.status == "pending" and ns.visits == 0:
                ns.status = "skipped"
                ns.settledAt = self.tick()
                self.emit("node.skipped", node_id, {"nodeId": node_id, "reason": "not reached"})
        self.s.status = "completed"
        self.s.completedAt = iso(self.now)
        self.emit(
            "run.completed",
            None,
            {"outputs": dict(self.s.outputs), "durationMs": _duration_ms(self.s.startedAt, self.now)},
        )

    def close_open_interrupts(self, reason: str) -> None:
        for node_id, interrupt in list(self.s.interrupts.items()):
            self.t.closed.append(Closed(interrupt, "cancelled", {"reason": reason, "at": iso(self.now)}))
            ns = self.s.nodes[node_id]
            ns.status = "skipped"
            ns.settledAt = self.tick()
            self.emit("node.cancelled", node_id, {"nodeId": node_id, "reason": reason})
        self.s.interrupts.clear()
        for node_id in list(self.s.delays):
            ns = self.s.nodes[node_id]
            ns.status = "skipped"
            ns.settledAt = self.tick()
            self.emit("node.cancelled", node_id, {"nodeId": node_id, "reason": reason})
        self.s.delays.clear()
        for node_id, pending in list(self.s.actions.items()):
            self.t.abandoned.append((node_id, pending))
            ns = self.s.nodes[node_id]
            ns.status = "skipped"
            ns.settledAt = self.tick()
            self.emit("node.cancelled", node_id, {"nodeId": node_id, "reason": reason})
        self.s.actions.clear()
        self.s.queue.clear()
        drop_transient(self.t)

    def fail_run(self, error: dict[str, Any], node_id: str | None) -> None:
        self.close_open_interrupts("run failed")
        self.s.status = "failed"
        self.s.error = {k: v for k, v in error.items() if k in ("code", "message", "details")}
        self.s.failedNodeId = node_id
        self.s.completedAt = iso(self.now)
        payload: dict[str, Any] = {"error": error, "durationMs": _duration_ms(self.s.startedAt, self.now)}
        if node_id:
            payload["failedNodeId"] = node_id
        self.emit("run.failed", None, payload)


def trigger_fires(rule: str, fresh: list[str], all_settled: bool) -> bool | None:
    """Whether a trigger rule fires (True), never will on this activation (False) or waits for more sources (None)."""
    if rule == "any_success":
        return True if "completed" in fresh else (False if all_settled else None)
    if rule == "any_failed":
        return True if "failed" in fresh else (False if all_settled else None)
    if not all_settled:
        return None
    if rule == "all_success":
        return all(s == "completed" for s in fresh)
    if rule == "none_failed":
        return "failed" not in fresh
    return True  # all_complete


def budget_error(node_id: str, exc: BudgetExceeded) -> dict[str, Any]:
    return run_error("interlude.budget_exceeded", f"node {node_id!r}: {exc}", {"nodeId": node_id, **exc.details})


def node_error(node_id: str, exc: BaseException) -> dict[str, Any]:
    return run_error("interlude.node_error", f"node {node_id!r} failed: {type(exc).__name__}", {"nodeId": node_id})


# -- public entry points ---------------------------------------------------------------------------


def start(
    state: RunState,
    workflow: WorkflowDefinition,
    now: datetime,
    step_budget: int = DEFAULT_STEP_BUDGET,
    halt: dict[str, Any] | None = None,
) -> Transition:
    """`halt`: start the run and fail it at once with this error (its first steps could not be committed)."""
    step = _Step(state, workflow, now, step_budget)
    s = step.s
    s.status = "running"
    s.startedAt = iso(now)
    s.nodes = {n.id: NodeState() for n in workflow.nodes}
    run_timeout_ms = int(s.run_options.get("runTimeoutMs") or 0)
    if run_timeout_ms > 0:
        s.deadline = now.timestamp() + run_timeout_ms / 1000
    started: dict[str, Any] = {"workflowId": s.workflowId, "inputs": s.inputs, "owner": s.owner, "transport": "rest"}
    if s.tags:
        started["tags"] = s.tags
    if s.metadata:
        started["metadata"] = s.metadata
    step.emit("run.started", None, started)
    if halt is not None:
        step.fail_run(halt, None)
        return step.t
    for root in workflow.roots():
        step.enqueue(root)
    step.run_queue()
    return step.t


def advance(
    state: RunState,
    workflow: WorkflowDefinition,
    now: datetime,
    step_budget: int = DEFAULT_STEP_BUDGET,
    halt: dict[str, Any] | None = None,
) -> Transition:
    """Continue a run left runnable (queue not empty); a no-op Transition otherwise. `halt`: fail it instead,
    naming the node it would have run next (that step could not be committed)."""
    if halt is not None:
        return fail_where_it_stands(state, now, halt, state.queue[0] if state.queue else None)
    step = _Step(state, workflow, now, step_budget)
    if step.s.queue and not step.s.terminal:
        step.run_queue()
    return step.t


def resolve(
    state: RunState,
    workflow: WorkflowDefinition,
    node_id: str,
    decision: "Decision",
    now: datetime,
    step_budget: int = DEFAULT_STEP_BUDGET,
    halt: dict[str, Any] | None = None,
    spent: int = 0,
    owned: bool = False,
) -> Transition:
    """`halt`: the decision lands (interrupt closed, node settled), then the run fails with this error instead of
    continuing (what would follow could not be committed). `spent`, `owned`: as _Step's."""
    step = _Step(state, workflow, now, step_budget, spent, owned)
    step.halting = halt is not None
    s = step.s
    interrupt = s.interrupts[node_id]
    ids = {"nodeId": node_id, "interruptId": interrupt.interruptId}
    if decision.vote is not None:
        interrupt.votes.append(decision.vote)
    if decision.outcome == "record":
        step.t.updated.append(interrupt)
        if interrupt.kind == "approval":
            step.emit("approval.received", node_id, {**ids, **decision.event})
        return step.t
    del s.interrupts[node_id]
    resolution = {**decision.event, "at": iso(now), "votes": [v.model_dump() for v in interrupt.votes]}
    step.t.closed.append(Closed(interrupt, "resolved", resolution))
    if decision.outcome == "complete" and interrupt.kind == "conversation.close":
        s.conversations[interrupt.payload["data"]["conversationId"]] = "closed"
    step.land(node_id, ids, interrupt.kind, decision)
    if halt is not None:
        if not s.terminal:
            step.fail_run(halt, node_id)
        return step.t
    step.run_queue()
    return step.t


def finish_action(
    state: RunState,
    workflow: WorkflowDefinition,
    node_id: str,
    visit: int,
    outcome: dict[str, Any],
    now: datetime,
    step_budget: int = DEFAULT_STEP_BUDGET,
    halt: dict[str, Any] | None = None,
) -> Transition:
    """The worker's outcome of an action node's visit: `{"output": ...}` completes it, `{"error": ...}` fails it.

    A no-op Transition (no events) when that visit no longer waits (finished already, cancelled, run over), so a
    redelivered outcome changes nothing. `halt`: the outcome lands, then the run fails with this error."""
    pending = state.actions.get(node_id)
    if state.terminal or pending is None or pending.visit != visit:
        return Transition(state=state.model_copy(deep=True))
    step = _Step(state, workflow, now, step_budget)
    step.halting = halt is not None
    del step.s.actions[node_id]
    if pending.kind == SUBWORKFLOW:
        outcome = mapped_outcome(pending.request, outcome)
    if "error" in outcome:
        step.fail(node_id, outcome["error"])
    else:
        step.complete(node_id, outcome.get("output"))
    if halt is not None:
        if not step.s.terminal:
            step.fail_run(halt, node_id)
        return step.t
    step.run_queue()
    return step.t


def retry_task(state: RunState, node_id: str, visit: int, retried: dict[str, Any], now: datetime) -> Transition:
    """Record that a task node's visit goes back on its queue (engine/tasks.py): a `node.retried` event, the node
    still running. A no-op Transition when that visit no longer waits."""
    pending = state.actions.get(node_id)
    if state.terminal or pending is None or pending.visit != visit:
        return Transition(state=state.model_copy(deep=True))
    step = _Step(state, None, now)
    step.emit(NODE_RETRIED, node_id, {"nodeId": node_id, **retried})
    return step.t


# The run errors of a core.http action that failed (adapters.actions): a cause outside the run, fixable there.
ACTION_FAILURES = frozenset({"interlude.http_failed", "interlude.egress_denied", "interlude.secret_unavailable"})
HTTP_ACTION = "core.http"


def action_not_retryable(state: RunState, workflow: WorkflowDefinition, node_id: str) -> str | None:
    """Why the run cannot take its failed action `node_id` again (None: it can). Only a run its core.http action
    failed, and whose failure stopped nothing else (no gate, delay, action or queued step left behind), so running
    it again from there is the run it would have been; never a sub-workflow's, whose failure its parent has had."""
    ns = state.nodes.get(node_id)
    if state.status != "failed" or state.failedNodeId != node_id or ns is None or ns.status != "failed":
        return f"the run did not fail at {node_id!r}" if state.status == "failed" else f"the run is {state.status}"
    if workflow.node(node_id).typeId != HTTP_ACTION or (state.error or {}).get("code") not in ACTION_FAILURES:
        return f"{node_id!r} failed, but not as an action whose call failed"
    if state.parentRunId is not None:
        return "the run is a sub-workflow: its parent run has had its failure"
    stopped = [n for n, other in state.nodes.items() if n != node_id and (other.settledAt > ns.settledAt or other.status in ("queued", "running", "suspended"))]
    if stopped:
        return f"the failure also stopped {', '.join(sorted(stopped))}"
    return None


def retry_action(
    state: RunState, workflow: WorkflowDefinition, node_id: str, now: datetime, step_budget: int = DEFAULT_STEP_BUDGET
) -> Transition:
    """The run failed at action `node_id` (action_not_retryable says it may go on) runs again from there: the same
    visit's action is requested anew, its request rendered from the run as the failure left it, so its effect is the
    same one and the effect record decides whether the call is made (once) or its recorded outcome lands."""
    step = _Step(state, workflow, now, step_budget)
    s = step.s
    s.status, s.error, s.failedNodeId, s.completedAt = "running", None, None, None
    step.t.reopened = True
    visit = s.nodes[node_id].visits
    step.emit(NODE_RETRIED, node_id, {"nodeId": node_id, "visit": visit, "reason": RERUN_REASON})
    node = workflow.node(node_id)
    node_type = registered_type(node.typeId)
    assert node_type is not None, node.typeId
    assert node_type.act is not None, node.typeId
    scope = step.scope()
    scope["$run"] = step.run_facts(node_id)
    step.request_action(node_id, node_type.act(node_id, node_type.config_model.model_validate(node.config), scope))
    step.settle()
    return step.t


VOTE_DELEGATED = forks.VOTE_DELEGATED


def delegate(state: RunState, workflow: WorkflowDefinition, node_id: str, record: Vote, now: datetime) -> Transition:
    """Record on the open gate that a principal handed their vote to another: the gate stays open, and the log
    says who to whom (the audit of a delegation; the delegated vote itself names both when it is cast)."""
    step = _Step(state, workflow, now, DEFAULT_STEP_BUDGET)
    interrupt = step.s.interrupts[node_id]
    interrupt.votes.append(record)
    step.t.updated.append(interrupt)
    payload = {
        "nodeId": node_id,
        "interruptId": interrupt.interruptId,
        "principal": record.principal,
        "delegate": record.delegate,
        "at": record.at,
    }
    step.emit(VOTE_DELEGATED, node_id, payload)
    return step.t


def assign(
    state: RunState, workflow: WorkflowDefinition, node_id: str, assignee: str | None, by: str, now: datetime
) -> Transition:
    """Record who works the open gate now (None: nobody; `by` claimed or assigned it): the gate stays open to everyone
    it was open to, and the log says who took it, or gave it to whom."""
    step = _Step(state, workflow, now, DEFAULT_STEP_BUDGET)
    interrupt = step.s.interrupts[node_id]
    interrupt.assignee = assignee
    interrupt.assignedBy = by if assignee is not None else None
    interrupt.assignedAt = iso(now) if assignee is not None else None
    step.t.updated.append(interrupt)
    payload = {"nodeId": node_id, "interruptId": interrupt.interruptId, "assignee": assignee, "by": by, "at": iso(now)}
    step.emit(GATE_ASSIGNED, node_id, payload)
    return step.t


def drop_transient(transition: Transition) -> None:
    """An interrupt one commit both opens and closes (the run ended in it) is neither written nor closed: one
    transaction cannot touch an item twice, and the run is terminal, so its key is never raised again."""
    transient = {i.key for i in transition.opened} & {c.interrupt.key for c in transition.closed}
    if transient:
        transition.opened = [i for i in transition.opened if i.key not in transient]
        transition.closed = [c for c in transition.closed if c.interrupt.key not in transient]


def waits_spent(transition: Transition) -> int:
    """Waits `transition` writes an item for that are no longer open in its state (those still open count as open
    in the next step's own tally): what a further step chained into the same commit starts from."""
    still_open = {i.key for i in transition.state.interrupts.values()}
    written = {i.key for i in transition.opened} | {c.interrupt.key for c in transition.closed}
    written |= {u.key for u in transition.updated}
    return len(written - still_open) + len(transition.abandoned)


def fail_where_it_stands(state: RunState, now: datetime, error: dict[str, Any], node_id: str | None) -> Transition:
    """Fail the run as it is (its next steps could not be committed), closing whatever it waits on."""
    step = _Step(state, None, now)
    step.fail_run(error, node_id)
    return step.t


def cancel(
    state: RunState, now: datetime, reason: str | None, cancelled_by: str | None, parent_run_id: str | None = None
) -> Transition:
    """`parent_run_id`: a cascade from that parent (reason "parent-cancelled", OpenWOP cascade-cancel); a direct
    cancel never sets it."""
    step = _Step(state, None, now)
    step.close_open_interrupts("run cancelled")
    step.s.status = "cancelled"
    step.s.completedAt = iso(now)
    payload: dict[str, Any] = {"durationMs": _duration_ms(step.s.startedAt, now)}
    if reason:
        payload["reason"] = reason
    if cancelled_by:
        payload["cancelledBy"] = cancelled_by
    if parent_run_id is not None:
        payload["reason"] = PARENT_CANCELLED
        payload["parentRunId"] = parent_run_id
    step.emit("run.cancelled", None, payload)
    return step.t


def check_config(workflow: WorkflowDefinition) -> list[dict[str, Any]]:
    """Registration-time problems: unknown node types, bad configs, gates that would raise invalid payloads, references
    and edge conditions that read what cannot exist, outcomes no edge routes (engine/references.py), loops whose
    outputs multiply (engine/growth.py)."""
    problems: list[dict[str, Any]] = list(workflow.edge_problems())
    if problems:
        return problems
    if not workflow.roots():
        problems.append({"path": "edges", "message": "every node is the target of an edge, so no node can start"})
    configs: dict[str, Any] = {}
    for i, node in enumerate(workflow.nodes):
        config = _node_problems(i, node, workflow, problems)
        if config is not None:
            configs[node.id] = config
    from interlude.engine import references  # registration only: a run that moves never loads it

    problems += references.problems(workflow, configs)
    return problems or unbounded_growth(workflow)


def _node_problems(i: int, node: Node, workflow: WorkflowDefinition, problems: list[dict[str, Any]]) -> Any:
    """Appends what is wrong with node `i` to `problems`; its validated config (None: it has none)."""
    node_type = registered_type(node.typeId)
    if node_type is None:
        problems.append(
            {"path": f"nodes/{i}/typeId", "message": f"unknown typeId {node.typeId!r}; known: {known_type_ids()}"}
        )
        return None
    try:
        # Closed here, where a definition is accepted; a stored one's config is read open (engine.run's visit).
        config = node_type.config_model.model_validate(node.config, extra="forbid")
    except ValidationError as exc:
        for err in exc.errors():
            loc = "/".join(str(p) for p in err["loc"])
            problems.append({"path": f"nodes/{i}/config/{loc}".rstrip("/"), "message": err["msg"]})
        return None
    if node_type.check is not None:
        for problem in node_type.check(config, workflow):
            problems.append({"path": f"nodes/{i}/config/{problem['path']}", "message": problem["message"]})
    if node_type.ask is not None:
        spec = node_type.ask(node.id, config, {PROBE: True})
        if not isinstance(spec, Passed | Failed):
            for invalid in validate_payload(spec.payload("probe")):
                problems.append({"path": f"nodes/{i}/config/{invalid['path']}".rstrip("/"), "message": invalid["message"]})
    return config
