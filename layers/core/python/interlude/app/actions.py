"""Action nodes (core.http) seen from the run: which visit waits, its outcome landing, and the run's effect records.

The worker (interlude.adapters.actions) performs the call; here the run moves. Both ends are idempotent: an
outcome for a visit that no longer waits writes nothing.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.domain.models.run import PendingAction
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.service import Service
    from interlude.rules import auth


def pending_action(service: Service, run_id: str, node_id: str, visit: int) -> PendingAction | None:
    """The action `node_id`'s visit `visit` waits on, or None (done, cancelled, the run over or gone)."""
    got = service.store.get_run(run_id)
    if got is None:
        return None
    state, _ = got
    pending = state.actions.get(node_id)
    if state.terminal or pending is None or pending.visit != visit:
        return None
    return pending


def finish_action(service: Service, run_id: str, node_id: str, visit: int, outcome: dict[str, Any]) -> int:
    """Land an action's outcome (`{"output": ...}` or `{"error": ...}`); returns the events written (0: nothing
    waited for it any more)."""
    from interlude.engine import run as engine  # the run rules: app/service.py loads them where a run moves

    for _ in range(MAX_RACE_RETRIES):
        got = service.store.get_run(run_id)
        if got is None:
            return 0
        state, version = got
        if state.terminal or node_id not in state.actions:
            return 0
        now = service.clock()
        definition = service.workflow(state.tenant, state.workflowId, state.workflowVersion)
        build = partial(engine.finish_action, state, definition, node_id, visit, outcome, now, service.step_budget)
        try:
            transition = service.commit_or_fail(build, version, now, node_id)
        except LostRace:
            continue
        return len(transition.events)
    raise busy("the run kept changing while an action's outcome landed; retry")


def effect_retention_days(service: Service, tenant: str) -> int:
    """How many days the tenant keeps an effect record and its ledger entry past their last change."""
    from interlude.app.tenants import tenant_settings
    from interlude.domain.models.tenants import MIN_EFFECT_RETENTION_DAYS

    days = tenant_settings(service.hitl_store, tenant).effectRetentionDays
    return days or MIN_EFFECT_RETENTION_DAYS


def run_effects(service: Service, principal: auth.Principal, run_id: str) -> dict[str, Any]:
    """GET /runs/{runId}/effects: the run's effect records (content-free: no request, response or secret)."""
    from interlude.store.effects import EffectStore  # the effects route's alone: the outbox never reads the ledger

    state, _ = service.load_run(principal.tenant, run_id)
    return {"runId": state.runId, "effects": EffectStore(service.store).ledger(state.runId)}
