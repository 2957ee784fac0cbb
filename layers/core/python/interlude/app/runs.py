"""A run as every operation reads and writes it: loaded with its passed deadlines applied (a late or lost schedule
never lets a late decision through), a transition committed (or, when it cannot be built or stored, the run failed
with a clear code instead), the scheduler's deadline fired, and the event log polled. No HTTP here, no boto3 here."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from interlude.app.caught import caught
from interlude.app.idempotency import KeyedWrite, answered, committed
from interlude.app.retries import MAX_RACE_RETRIES, busy
from interlude.config import DEFAULT_STEP_BUDGET
from interlude.domain import clock as clock_
from interlude.domain.budgets import ITEM_BUDGET, first_page
from interlude.domain.clock import Clock, iso
from interlude.domain.errors import Forbidden, NotFound, TooLarge, run_error
from interlude.domain.ids import tenant_of
from interlude.engine import deadlines
from interlude.engine.events import InvalidEvent
from interlude.rules.retention import run_expiry
from interlude.store.transactions import LostRace

if TYPE_CHECKING:
    from interlude.app.ports import DefinitionSource, RunRecords
    from interlude.domain.audit import AuditDraft
    from interlude.domain.models.run import RunState
    from interlude.engine.run import Transition
    from interlude.rules import auth

logger = logging.getLogger(__name__)


class Runs:
    def __init__(
        self,
        records: RunRecords,
        definitions: DefinitionSource,
        clock: Clock = clock_.now,
        step_budget: int = DEFAULT_STEP_BUDGET,
        retention_days: Callable[[str], int] | None = None,
    ) -> None:
        self.records = records
        self.definitions = definitions
        self.clock = clock
        self.step_budget = step_budget
        # A tenant's retentionDays (issue 30 item 4): a transition that ends a run writes its expiry on the items it
        # writes (the head, the last event batch, the interrupts it closes); app/retention.py gives it to the rest.
        self.retention_days = retention_days

    def commit_or_fail(
        self,
        build: Callable[..., Transition],
        version: int | None,
        now: datetime,
        node_id: str | None = None,
        keyed: KeyedWrite | None = None,
        result: Callable[[Transition], Any] = lambda made: made.state,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
    ) -> Transition:
        """Commit what `build()` makes; if it cannot be made (a bug) or stored (an item would pass DynamoDB's
        size), commit `build(halt=error)` instead: what was decided lands and the run fails with a clear code,
        never left waiting on a step nobody can take. A lost race (Conflict) and other storage errors propagate.
        With `keyed`, the answer to what was committed (`result` of it, rendered by the edge) is committed with it.
        `open_runs_limit`: the tenant's quota, checked in the transaction that creates a run. `audit`: the entry that
        records what was decided, committed in the same transaction either way."""
        where = f"what follows node {node_id!r}" if node_id else "the run's next steps"
        try:
            transition = build()
        except Exception as exc:  # noqa: BLE001 - a bug after a decision must not strand the run
            caught(logger, "transition-build", "building a transition failed; failing the run")
            error = run_error("interlude.node_error", f"{where} failed: {type(exc).__name__}", {"nodeId": node_id})
        else:
            try:
                return self.commit_answered(transition, version, now, keyed, result, open_runs_limit, audit)
            except TooLarge as refused:
                # The store names the budget passed: one stored item's bytes, or one transaction's items.
                budget = {**ITEM_BUDGET, **(refused.details or {})}
                error = run_error(
                    "interlude.budget_exceeded",
                    f"{where} would not fit in {budget['budget']} ({budget['limit']:,} {budget['unit']})",
                    {"nodeId": node_id, **budget},
                )
            except InvalidEvent as exc:
                caught(logger, "transition-invalid-event", "a transition built an invalid event; failing the run")
                error = run_error("interlude.node_error", f"{where} failed: {type(exc).__name__}", {"nodeId": node_id})
        return self.commit_answered(build(halt=error), version, now, keyed, result, open_runs_limit, audit)

    def commit_answered(
        self,
        transition: Transition,
        version: int | None,
        now: datetime,
        keyed: KeyedWrite | None = None,
        result: Callable[[Transition], Any] = lambda made: made.state,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
    ) -> Transition:
        """Commit a transition; with `keyed`, the Idempotency-Key's record and its answer in the same transaction
        (and `audit`'s entry too)."""
        record = answered(keyed, result(transition)) if keyed else None
        state = transition.state
        expires = None
        if state.terminal and self.retention_days is not None:
            expires = run_expiry(state.completedAt, self.retention_days(state.tenant), now)
        self.records.commit(transition, version, iso(now), record, open_runs_limit, audit, expires)
        committed(keyed, record)
        return transition

    def load_run(self, principal_tenant: str, run_id: str) -> tuple[RunState, int]:
        # The tenant check comes before any lookup, so a foreign id discloses nothing.
        if tenant_of(run_id) != principal_tenant:
            raise Forbidden("the run id belongs to another tenant", code="id_tenant_mismatch")
        got = self.records.get_run(run_id)
        if got is None:
            raise NotFound("no such run")
        return self.apply_deadlines(*got)

    def apply_deadlines(self, state: RunState, version: int) -> tuple[RunState, int]:
        """Record every deadline that has passed (timeouts, delays, the run's own), in one transaction when it holds them.

        Every read and resolve goes through here, so a late or lost schedule never lets a late decision
        through; the scheduler's worker calls it too. Whoever commits first wins; the others see the result.
        Deadlines that one transaction cannot hold all (budgets.TRANSITION_MAX_WAITS) are committed in turn.
        """
        races = 0
        while races < MAX_RACE_RETRIES:
            now = self.clock()
            if not deadlines.due(state, now):
                return state, version
            definition = self.definitions.workflow(state.tenant, state.workflowId, state.workflowVersion)
            try:
                build = partial(deadlines.expire, state, definition, now, self.step_budget)
                transition = self.commit_or_fail(build, version, now)
                # Every commit applies at least one deadline, so this ends.
                state, version = transition.state, version + 1
            except LostRace:
                races += 1
                got = self.records.get_run(state.runId)
                if got is None:
                    raise NotFound("no such run") from None
                state, version = got
        raise busy("the run kept changing while applying its deadlines; retry")

    def fire_deadline(self, body: dict[str, Any]) -> int:
        """The scheduler's worker: apply the named deadline if it is still pending and due.

        Returns the number of events written; 0 when the deadline was already applied, its interrupt was
        decided by a person first, the run moved on, or the run is gone — firing twice changes nothing.
        """
        run_id = body.get("runId")
        if not isinstance(run_id, str):
            return 0
        got = self.records.get_run(run_id)
        if got is None:
            return 0
        state, version = got
        before = state.nextSeq
        state, _ = self.apply_deadlines(state, version)
        named = deadlines.from_input(body)
        if named is not None and deadlines.is_pending(state, named):
            # Fired before its time by this process's clock: fail, so the invoker retries later.
            raise deadlines.NotDueYet(f"{named.purpose} deadline of {run_id} is not due yet")
        return state.nextSeq - before

    def poll_events(self, principal: auth.Principal, run_id: str, after: int, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        delay = 0.2
        while True:
            state, _ = self.load_run(principal.tenant, run_id)
            events = self.records.read_events(run_id, after, holder=state)
            if events or state.terminal or time.monotonic() + delay > deadline:
                return {
                    "runId": run_id,
                    # A page: lastSequence says whether more follow (ask again after the last event received).
                    "events": first_page(events),
                    "lastSequence": state.nextSeq - 1,
                    "status": state.status,
                    "isTerminal": state.terminal,
                }
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)
