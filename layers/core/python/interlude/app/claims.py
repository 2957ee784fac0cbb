"""Who works an open gate (issue 29 item 3): claim it, release it, assign it to someone, on every surface alike.

The rules (rules/interrupts/claims.py) say who works it next; this service checks that the caller may decide the gate
(the same eligibility as a decision: `decide.eligible`, with the directory's groups and roles where the gate names
them) and commits the change as a run transition, so the run's log says who took it (`interlude.gate-assigned`),
with its audit entry in the same transaction. Nobody's eligibility changes: the gate stays open to everyone it was.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.app import audit_entries
from interlude.app.facts import with_directory
from interlude.app.retries import MAX_RACE_RETRIES, busy, closed_meanwhile
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Forbidden
from interlude.engine import run as engine
from interlude.rules import auth
from interlude.rules.interrupts.claims import Move, next_assignee
from interlude.rules.interrupts.decide import eligible
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.ports import DefinitionSource, DirectoryRecords, Gates, RunLedger

AUDIT_ACTIONS = {"claim": "interrupt.claimed", "release": "interrupt.released", "assign": "interrupt.assigned"}


class GateClaims:
    def __init__(
        self, runs: RunLedger, gates: Gates, definitions: DefinitionSource, directory: DirectoryRecords, clock: Clock
    ) -> None:
        self.runs = runs
        self.gates = gates
        self.definitions = definitions
        self.directory = directory
        self.clock = clock

    def move(
        self,
        principal: auth.Principal,
        run_id: str,
        node_id: str,
        move: Move,
        named: str | None = None,
        surface: str = "api",
    ) -> dict[str, Any]:
        """The gate's assignee after `move` by the caller (`named`: whom an assign names, None for nobody)."""
        state, version = self.runs.load_run(principal.tenant, run_id)
        node_id = self.gates.node_named(state, node_id)
        caller = str(principal.subject["subjectId"])
        for _ in range(MAX_RACE_RETRIES):
            state, version = self.runs.apply_deadlines(state, version)
            definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
            interrupt = self.gates.open_interrupt(state, node_id)
            resolver = auth.run_resolver(principal, "console" if surface == "console" else "run")
            if interrupt.kind == "approval":
                data = interrupt.payload.get("data") or {}
                if not eligible(data, with_directory(self.directory, state.tenant, data, resolver)):
                    raise Forbidden("only someone who may decide this gate may claim, release or assign it")
            assignee = next_assignee(interrupt, move, caller, named)
            now = self.clock()
            target = {"runId": state.runId, "nodeId": node_id, "interruptId": interrupt.interruptId}
            audit = audit_entries.entry(
                state.tenant, audit_entries.actor(principal, surface), AUDIT_ACTIONS[move], target, iso(now), {"assignee": assignee}
            )
            build = partial(engine.assign, state, definition, node_id, assignee, caller, now)
            try:
                self.runs.commit_or_fail(build, version, now, node_id, audit=audit)
            except LostRace as lost:
                closed_meanwhile(lost)
                state, version = self.runs.load_run(state.tenant, state.runId)
                continue
            return {
                **target,
                "assignee": assignee,
                "assignedBy": caller if assignee is not None else None,
                "assignedAt": iso(now) if assignee is not None else None,
            }
        raise busy("the run kept changing while its gate was being claimed; retry")
