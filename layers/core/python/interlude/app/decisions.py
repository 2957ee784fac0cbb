"""Decisions on a run's gates: a resume value decided by a resolver (a key holder, a token, an external event, a
ModuleX resume) against the gate's open interrupt, with the facts the decision reads at decision time (the tenant's
override principals and grants, its directory's groups and roles, delegated votes), and committed with its audit
entry. Exactly once: whoever commits first wins; a late decision loses to the deadline recorded first."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from interlude.app import audit_entries as audit_log
from interlude.app.facts import with_delegations, with_directory
from interlude.app.idempotency import KeyedWrite
from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.app.tenant_facts import with_tenant_facts
from interlude.config import DEFAULT_STEP_BUDGET
from interlude.domain import clock as clock_
from interlude.domain.budgets import MAX_VALUE_BYTES, within_budget
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Conflict, NotFound
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.engine import run as engine
from interlude.engine.registry import is_gate
from interlude.engine.visits import visit_keys
from interlude.rules import auth
from interlude.rules.interrupts.decide import Decision, Resolver, decide
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from datetime import datetime

    from interlude.app.ports import DefinitionSource, DirectoryRecords, RunLedger, RunRecords, TenantRecords
    from interlude.domain.models.workflow import WorkflowDefinition


class Decisions:
    def __init__(
        self,
        records: RunRecords,
        runs: RunLedger,
        definitions: DefinitionSource,
        tenants: TenantRecords,
        directory: DirectoryRecords,
        clock: Clock = clock_.now,
        step_budget: int = DEFAULT_STEP_BUDGET,
    ) -> None:
        self.records = records
        self.runs = runs
        self.definitions = definitions
        self.tenants = tenants
        self.directory = directory
        self.clock = clock
        self.step_budget = step_budget

    def resolve_interrupt(
        self,
        principal: auth.Principal,
        run_id: str,
        node_id: str,
        resume_value: Any,
        keyed: KeyedWrite | None = None,
        surface: Literal["run", "console"] = "run",
        written_numbers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        resolver = auth.run_resolver(principal, surface)
        state, version = self.runs.load_run(principal.tenant, run_id)
        return self.resolve(state, version, node_id, resume_value, resolver, keyed=keyed, written_numbers=written_numbers)

    def node_named(self, state: RunState, node_id: str) -> str:
        """The node a caller names in `state`'s run as the engine runs it (WorkflowDefinition.engine_node_id)."""
        if node_id in state.interrupts:
            return node_id
        return self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion).engine_node_id(node_id)

    def open_interrupt(self, state: RunState, node_id: str) -> OpenInterrupt:
        """The interrupt node_id holds now.

        404 not_found: the run has no such node, the node is not a gate, or the gate has raised no interrupt yet
        in a run that is still going. 409 interrupt_already_resolved: the gate's interrupt was decided, cancelled
        or timed out, or the run is over (interrupt.md §Resolve as amended by RFC 0213 §C).
        """
        interrupt = state.interrupts.get(node_id)
        if interrupt is not None:
            return interrupt
        definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
        if (engine_id := definition.engine_node_id(node_id)) != node_id:
            return self.open_interrupt(state, engine_id)  # a ModuleX node by the id its author wrote
        node = next((n for n in definition.nodes if n.id == node_id), None)
        if node is None:
            raise NotFound(f"the run has no node {node_id!r}")
        if not is_gate(node.typeId):
            raise NotFound(f"node {node_id!r} is not a gate: it raises no interrupt")
        if state.terminal or self.records.raised_any(state.runId, visit_keys(state, node_id)):
            raise Conflict(
                f"node {node_id!r} holds no open interrupt (run {state.status})",
                {"runStatus": state.status},
                code="interrupt_already_resolved",
            )
        raise NotFound(f"node {node_id!r} has not raised an interrupt")

    def resolve(
        self,
        state: RunState,
        version: int,
        node_id: str,
        resume_value: Any,
        resolver: Resolver,
        interrupt_id: str | None = None,
        keyed: KeyedWrite | None = None,
        written_numbers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """`interrupt_id` pins the decision to one interrupt (a token names one; a later visit's is another);
        `written_numbers`: how the request or form that decides wrote its numbers (RunState.writtenNumbers)."""
        within_budget(resume_value, MAX_VALUE_BYTES, "the resume value")
        node_id = self.node_named(state, node_id)
        for _ in range(MAX_RACE_RETRIES):
            # A decision arriving after the deadline loses to the timeout, which is recorded first if nobody has.
            state, version = self.runs.apply_deadlines(state, version)
            state = state.with_written_numbers(written_numbers)
            definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
            interrupt = self.open_interrupt(state, node_id)
            if interrupt_id is not None and interrupt.interruptId != interrupt_id:
                raise Conflict(
                    f"the interrupt this token names was resolved; node {node_id!r} has asked again since",
                    {"runStatus": state.status},
                    code="interrupt_already_resolved",
                )
            now = self.clock()
            if interrupt.deadline is not None and interrupt.deadline <= now.timestamp():
                continue  # the deadline passed while deciding: the next attempt records the timeout first
            config = definition.node(node_id).config
            # Tenant-held facts (override principals, credential grants), read at decision time (issue 3).
            resolver = with_tenant_facts(self.tenants, state.tenant, interrupt, resolver)
            if interrupt.kind == "approval":
                # Group and role membership from the tenant's directory, read at decision time (issue 14).
                resolver = with_directory(self.directory, state.tenant, interrupt.payload["data"], resolver)
                # Votes handed to this principal, for this gate or while someone is out of office (issue 14).
                resolver = with_delegations(self.tenants, self.directory, state.tenant, interrupt, resolver, now)
            decision = decide(interrupt, resume_value, resolver, iso(now), config)
            entry = audit_log.decision_draft(
                state.tenant, state.runId, node_id, interrupt.interruptId, interrupt.kind, decision, resolver, iso(now)
            )
            # What the commit writes moves the state built on (its next sequence): the loser's read below needs it.
            next_seq = state.nextSeq
            try:
                build = partial(self._decided, state, version, definition, node_id, decision, now, written_numbers)
                transition = self.runs.commit_or_fail(
                    build,
                    version,
                    now,
                    node_id,
                    keyed,
                    partial(resolution_of, node_id),
                    audit=entry,
                )
                return resolution_of(node_id, transition)
            except LostRace as lost:
                old = lost.interrupt_old_image()
                if old is not None and old.get("status") != "open":
                    # The failed condition already tells the loser what won: no further read.
                    raise _resolved_first(old) from None
                head = lost.head_old_image()
                if interrupt.written_once and head is not None and not _holds(head, interrupt):
                    # A format-3 gate has no status to fail on: the head's condition failed, and the head the winner
                    # left no longer holds the gate. What won is the close's event, after what this attempt read.
                    close = self.records.gate_close(state.runId, node_id, interrupt.interruptId, next_seq)
                    if close is not None:
                        raise _resolved_first({"resolution": close[1]}) from None
                state, version = self.runs.load_run(state.tenant, state.runId)
        raise busy("the run kept changing while resolving; retry")

    def _decided(
        self,
        state: RunState,
        version: int,
        definition: WorkflowDefinition,
        node_id: str,
        decision: Decision,
        now: datetime,
        written_numbers: Mapping[str, str] | None,
        halt: dict[str, Any] | None = None,
    ) -> engine.Transition:
        """The decision's transition, built on `state` itself: each attempt reads the run for itself and builds one
        transition on it, so the engine's copy of it (≈ 0.2 M instructions, 1.4 % of a resolve: docs/adr/0140) buys
        nothing. The halting transition commit_or_fail builds when that one could not be built or stored is built on
        the run read again (the first build spent `state`): refused as a lost race when the run moved meanwhile."""
        if halt is not None:
            got = self.records.get_run(state.runId)
            if got is None or got[1] != version:
                raise LostRace([])
            state = got[0].with_written_numbers(written_numbers)
        return engine.resolve(state, definition, node_id, decision, now, self.step_budget, halt=halt, owned=halt is None)


def _holds(head: dict[str, Any], interrupt: OpenInterrupt) -> bool:
    """Whether a run head's image (as a failed condition returns it) holds `interrupt` open."""
    held = ((head.get("state") or {}).get("interrupts") or {}).get(interrupt.nodeId) or {}
    return bool(held.get("interruptId") == interrupt.interruptId)


def _resolved_first(closed: dict[str, Any]) -> Conflict:
    return Conflict(
        "another decision resolved this interrupt first",
        {"resolution": closed.get("resolution")},
        code="interrupt_already_resolved",
    )


def resolution_of(node_id: str, transition: engine.Transition) -> dict[str, Any]:
    """What a resolve answers: the run, the node decided, and where the run stands after it."""
    return {"runId": transition.state.runId, "nodeId": node_id, "status": transition.state.status}
