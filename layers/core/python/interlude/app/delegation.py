"""Delegation of an approver's vote (issue 14 item 4): for one interrupt (POST .../delegation), or standing while
out of office (the directory's `outOfOffice.delegate`), where the tenant allows it (`allowDelegation`).

The rules (rules/interrupts/decide.py, delegation.py) decide; this module reads what they need at decision time
(the tenant's setting, the delegation items the directory keeps keyed by each delegate) and commits a delegation as a run transition, so
the run's log records it (`interlude.vote-delegated`) beside the delegated vote that later names both principals.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.app.facts import with_directory
from interlude.app.retries import MAX_RACE_RETRIES, busy, closed_meanwhile
from interlude.app.tenant_facts import tenant_settings
from interlude.domain.clock import Clock, iso
from interlude.domain.models.principal_requests import DelegateVoteRequest
from interlude.engine import run as engine
from interlude.rules import auth
from interlude.rules.interrupts.decide import delegation
from interlude.store.transactions import LostRace

if TYPE_CHECKING:

    from interlude.app.ports import DefinitionSource, DirectoryRecords, Gates, RunLedger, TenantRecords


class Delegation:
    def __init__(
        self,
        runs: RunLedger,
        gates: Gates,
        definitions: DefinitionSource,
        tenants: TenantRecords,
        directory: DirectoryRecords,
        clock: Clock,
    ) -> None:
        self.runs = runs
        self.gates = gates
        self.definitions = definitions
        self.tenants = tenants
        self.directory = directory
        self.clock = clock

    def delegate_vote(
        self, principal: auth.Principal, run_id: str, node_id: str, request: DelegateVoteRequest
    ) -> dict[str, Any]:
        """Record that the caller hands their vote on `node_id`'s open approval gate to `request.delegate`."""
        state, version = self.runs.load_run(principal.tenant, run_id)
        node_id = self.gates.node_named(state, node_id)
        for _ in range(MAX_RACE_RETRIES):
            state, version = self.runs.apply_deadlines(state, version)
            definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
            interrupt = self.gates.open_interrupt(state, node_id)
            now = self.clock()
            resolver = auth.run_resolver(principal)
            if interrupt.kind == "approval":
                resolver = with_directory(self.directory, state.tenant, interrupt.payload["data"], resolver)
            allowed = bool(tenant_settings(self.tenants, state.tenant).allowDelegation)
            record = delegation(interrupt, resolver._replace(delegation_allowed=allowed), request.delegate, iso(now))
            build = partial(engine.delegate, state, definition, node_id, record, now)
            try:
                self.runs.commit_or_fail(build, version, now, node_id)
            except LostRace as lost:
                closed_meanwhile(lost)
                state, version = self.runs.load_run(state.tenant, state.runId)
                continue
            return {
                "runId": state.runId,
                "nodeId": node_id,
                "interruptId": interrupt.interruptId,
                "principal": record.principal,
                "delegate": request.delegate,
                "at": record.at,
            }
        raise busy("the run kept changing while delegating; retry")
