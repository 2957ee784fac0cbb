"""Action nodes (core.http, core.task) seen from the run: which visit waits, its outcome landing, and the run's effect
records.

The worker (interlude.adapters.actions) performs the call; here the run moves. Both ends are idempotent: an
outcome for a visit that no longer waits writes nothing.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.app.ports import WaitingAction
from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.config import DEFAULT_STEP_BUDGET
from interlude.domain import clock as clock_
from interlude.domain.clock import Clock
from interlude.domain.models.run import PendingAction
from interlude.domain.written_numbers import split_outcome
from interlude.engine import run as engine
from interlude.rules import run_search
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.ports import DefinitionSource, EffectLedger, RunLedger, RunRecords
    from interlude.rules import auth


class Actions:
    def __init__(
        self,
        records: RunRecords,
        runs: RunLedger,
        definitions: DefinitionSource,
        clock: Clock = clock_.now,
        step_budget: int = DEFAULT_STEP_BUDGET,
    ) -> None:
        self.records = records
        self.runs = runs
        self.definitions = definitions
        self.clock = clock
        self.step_budget = step_budget

    def pending_action(self, run_id: str, node_id: str, visit: int) -> PendingAction | None:
        """The action `node_id`'s visit `visit` waits on, or None (done, cancelled, the run over or gone)."""
        waiting = self.waiting_action(run_id, node_id, visit)
        return None if waiting is None else waiting.pending

    def waiting_action(self, run_id: str, node_id: str, visit: int) -> WaitingAction | None:
        """`pending_action`, with the run's items' provisional expiry as the same read of its head names it."""
        got = self.records.get_run(run_id)
        if got is None:
            return None
        state, _ = got
        pending = state.actions.get(node_id)
        if state.terminal or pending is None or pending.visit != visit:
            return None
        provisional = run_search.items_expiry(state.searchExpiry)
        return WaitingAction(pending, run_search.open_expiry(provisional, self.clock().timestamp()))

    def finish_action(self, run_id: str, node_id: str, visit: int, outcome: dict[str, Any]) -> int:
        """Land an action's outcome (`{"output": ...}` or `{"error": ...}`); returns the events written (0: nothing
        waited for it any more). How its body wrote its numbers (written_numbers.OUTCOME_KEY) joins the run's."""
        landed, written = split_outcome(outcome)
        for _ in range(MAX_RACE_RETRIES):
            got = self.records.get_run(run_id)
            if got is None:
                return 0
            state, version = got
            if state.terminal or node_id not in state.actions:
                return 0
            now = self.clock()
            definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
            state = state.with_written_numbers(written)
            build = partial(engine.finish_action, state, definition, node_id, visit, landed, now, self.step_budget)
            try:
                transition = self.runs.commit_or_fail(build, version, now, node_id)
            except LostRace:
                continue
            return len(transition.events)
        raise busy("the run kept changing while an action's outcome landed; retry")


class RunEffects:
    """GET /runs/{runId}/effects: the run's effect records (content-free: no request, response or secret)."""

    def __init__(self, runs: RunLedger, effects: EffectLedger) -> None:
        self.runs = runs
        self.effects = effects

    def run_effects(self, principal: auth.Principal, run_id: str) -> dict[str, Any]:
        state, _ = self.runs.load_run(principal.tenant, run_id)
        return {"runId": state.runId, "effects": self.effects.ledger(state.runId)}
