"""Retention of finished runs (issue 30 item 4): every item of a run that ended (completed, failed, cancelled) gets
the table's TTL attribute, its end plus the tenant's `retentionDays`, after which DynamoDB deletes it. The audit
chain is never given one (docs/operations.md, "Retention").

The job is queued by dispatch for each event-log item that ends a run or runs one again (interlude.composition), and
taken turn by turn from the migrations queue (functions/migrate): a turn stamps the head first, then pages through the
run's partition stamping each item whose ttl is not the head's (and the effect records its ledger names, the tasks its
event batches requested), then the listing entry, and checks after each page that the run has not moved meanwhile
(else it starts over). A turn out of time answers where it stopped; the next turn goes on from there (and a turn
repeated does no write twice: an item already carrying the ttl is left as it is). The run's search entries carry a
provisional expiry from their creation: the job writes them again only for a run that ends too late for it
(rules/run_search.stamped_at_end). Reasons: ADR 0115.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from interlude.engine.effect_names import ACTION_REQUESTED, TASK, task_id
from interlude.rules import run_search
from interlude.rules.retention import run_expiry

if TYPE_CHECKING:
    from typing import Any

    from interlude.domain.clock import Clock
    from interlude.store.retention import RetainedRun, RetentionStore


class RunMoved(Exception):
    """The run moved while its turn read it (it ended, or ran again): the turn is taken again (its message)."""


class RunRetention:
    def __init__(
        self,
        store: RetentionStore,
        retention_days: Callable[[str], int],
        clock: Clock,
        searchable: Callable[[str], Iterable[str]] = lambda tenant: (),
    ) -> None:
        self.store = store
        # A tenant's retentionDays (app/limits.py: read with its limits, cached briefly).
        self.retention_days = retention_days
        self.clock = clock
        # The metadata keys it declares searchable now: a run created before one was declared has its entries under
        # it from the search-keys job (app/search_keys.py), and they expire with it too.
        self.searchable = searchable

    def turn(self, run_id: str, after: str | None, has_time: Callable[[], bool]) -> str | None:
        """Retain the run's items from sort key `after` on while `has_time()`; None once the run is done with, else
        the key to go on after. Raises RunMoved when the run moved meanwhile (the turn is taken again)."""
        run = self.store.retained_run(run_id)
        if run is None:
            return None  # gone: deleted, or expired already
        target = self._target(run_id, run)
        searched = run_search.stamped_at_end(run.state, target)
        while True:
            items, last = self.store.items_page(run_id, after)
            for item in items:
                self._retain(run_id, item.sk, item.ttl, item.effect_id, target)
                for task in requested_tasks(run_id, item.events):
                    self.store.set_task_ttl(task, target)
                # The search entries of the words of the gates this batch opened (the run's own: at the end), when
                # their provisional expiry does not do (rules/run_search.stamped_at_end).
                if searched and (gates := run_search.gate_families(run.state, requested_gates(item.events))):
                    self.store.put_search_entries(run.state, gates, target)
            # The run moved (it ran again, or ended anew): its next turn starts over with what it is now.
            self._unmoved(run_id, run)
            if last is None:
                break
            after = last
            if not has_time():
                return after
        self.store.set_listing_ttl(run.state, target)
        if searched:
            later = run_search.metadata_families(run.state, self.searchable(run.state.tenant))
            self.store.put_search_entries(run.state, run_search.creation_families(run.state) + later, target)
        return None

    def _unmoved(self, run_id: str, run: RetainedRun) -> None:
        now = self.store.retained_run(run_id)
        if now is None or now.version != run.version:
            raise RunMoved(run_id)

    def _target(self, run_id: str, run: RetainedRun) -> int | None:
        """The ttl every item of the run is to carry: the head's, set now if the finished run has none yet; None for a
        run that is not finished (it runs again)."""
        if not run.state.terminal:
            return None
        if run.ttl is not None:
            return run.ttl
        ttl = run_expiry(run.state.completedAt, self.retention_days(run.state.tenant), self.clock())
        if not self.store.expire_head(run_id, run.version, ttl):
            raise RunMoved(run_id)
        return ttl

    def _retain(self, run_id: str, sk: str, ttl: int | None, effect_id: str | None, target: int | None) -> None:
        if effect_id is not None:
            # A ledger entry (and its effect record) keeps its own expiry when that is later: never less than 14 days
            # past its effect (OpenWOP idempotency.md). A run that runs again leaves them as they are.
            if target is not None:
                if ttl is None or ttl < target:
                    self.store.raise_ttl(run_id, sk, target)
                self.store.raise_effect_ttl(effect_id, target)
            return
        if ttl != target:
            self.store.set_item_ttl(run_id, sk, target)


def requested_gates(events: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """The payloads of the gates an event batch opened (`interrupt.requested`: their kind and data, the title there)."""
    return [e["payload"] for e in events if e.get("type") == "interrupt.requested" and isinstance(e.get("payload"), dict)]


def requested_tasks(run_id: str, events: tuple[dict[str, Any], ...]) -> list[str]:
    """The tasks an event batch requested (engine.tasks: an action requested of kind `task`), by id."""
    return [
        task_id(run_id, e["payload"]["nodeId"], e["payload"]["visit"])
        for e in events
        if e.get("type") == ACTION_REQUESTED and (e.get("payload") or {}).get("kind") == TASK
    ]
