"""The retention sweep (issue 30, ADR 0118): the finished runs whose retention turns never finished (a turn's message
dead-lettered, a deploy stopped it, the run was re-stamped) found and retained, so no finished run stays unstamped.

It is a migration that starts over: the same Scan, checkpoint, lease and pages as the table's migrations
(interlude.migrations), under the checkpoint `retention-sweep`, never among the registered ones. The deployment's
daily schedule (wiring.RETENTION_SWEEP) queues a turn that `start`s a pass when the last one is done; a turn pages
while it has time and queues the next (a turn out of time goes on from the checkpoint's position, as a migration does;
a chain of turns that died is taken on by the next day's turn once its lease lapsed). A finished run is selected
when its retention turn never finished: by an item of its partition without an expiry, which a whole turn gives each
one after what it names (such an item may name an open run: its head is read, 0.5 read units), or by a listing entry
without one (written so before ADR 0131), or by its head, when it has no expiry (ended before retention existed) or
has a `retentionStamped` that is not its `ttl` (re-stamped since its end, or ended too late for its items'
provisional expiry: store/retention.py). Its retention turn is taken here, inline, as migration 0007 does for runs
ended before retention existed. Every open run's head is selected (read whole by the Scan already): one whose items'
provisional expiry is near (rules/run_search.LISTING_KEPT_DAYS) has it taken off every item (one Query of its partition a day, a write once an
item), so it keeps every item however long it waits (ADR 0133); one whose listing entry's is near has it taken off,
or the entry put back, so it stays listed, and so do the tasks it waits for (ADR 0131).
A unit of a replay (a delivery, a notification) reopened more than STUCK_AFTER_S ago whose new round never began (its
replay stopped between its reopen and its send) is queued again (interlude.app.replay.Replay.requeue). A tenant's
re-stamp job still running (app/retention.Restamp: its chain of turns died, or the change was made where
no queue was at hand) is taken on here too, inline. A tenant's open-runs counter items (where its runs bill their
usage: docs/adr/0123) have their ended months closed (app/tenant_lifecycle.close_ended_months), so months nobody read
do not pile up on them. Approvals' inbox entries in their kind's family are deleted as migration 0010 deletes them (ADR
0160): a rollback to 0.4.0 writes them again after 0010 ran, its claims without an expiry, and no close of a later
release deletes them. An active tenant that still holds work kept while it was suspended (a resume that stopped short
before this release listed it: docs/adr/0196) is listed for the per-minute sweep, which hands that work back.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from types import ModuleType
from typing import TYPE_CHECKING

from interlude import __version__, wiring
from interlude.app.retention import Restamp, RunRetention
from interlude.app.tenant_facts import tenant_settings
from interlude.app.tenant_lifecycle import close_ended_months
from interlude.composition import services
from interlude.domain import clock as clock_
from interlude.domain.clock import Clock, iso
from interlude.domain.models.tenants import DEFAULT_RETENTION_DAYS
from interlude.engine.effect_names import TASK
from interlude.migrations import PAGE_ITEMS, Migration, Progress, run_one
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store.interactions import InteractionStore
from interlude.store.layout import RUN_PARTITION, RUN_SK, SECOND, run_id_of, tenant_of_pk
from interlude.store.leases import PENDING
from interlude.store.limits import USAGE_SK
from interlude.store.migrations import MigrationStore, Scan
from interlude.store.retention import RESTAMP_SK, RETAINED, RUNNING, RetentionStore, retained_head
from interlude.store.tenants import ACTIVE, HELD_SUFFIX, TenantRecords, held_pk

if TYPE_CHECKING:
    from interlude.store.facade import Store

logger = logging.getLogger(__name__)
FINISHED_STATUSES = ("completed", "failed", "cancelled")
FINISHED = {":run": RUN_SK, **{f":{status}": status for status in FINISHED_STATUSES}}
FINISHED_FILTER = "sk = :run AND #status IN (:completed, :failed, :cancelled)"


def retain_heads(store: Store, heads: list[a.Item]) -> int:
    """Each finished run of `heads` (keys of run heads) retained whole, inline; how many were."""
    return _retained(_jobs(store)[0], [run_id_of(head[wiring.PARTITION_KEY]["S"]) for head in heads])


def _retained(retention: RunRetention, run_ids: list[str | None]) -> int:
    return sum(run_id is not None and retention.turn(run_id, None, lambda: True) is None for run_id in run_ids)


def _swept(store: Store, items: list[a.Item], now: datetime) -> int:
    """A page of the sweep: run heads retained, re-stamp jobs still running (their turns' chain died, or a change made
    where no queue was at hand: the CLI) taken on inline, and replayed units never queued queued
    (interlude.app.replay.Replay.requeue); how many were."""
    jobs = [i for i in items if i[wiring.SORT_KEY]["S"] == RESTAMP_SK]
    retention, restamp = _jobs(store)
    for job in jobs:
        restamp.turn(job[wiring.PARTITION_KEY]["S"].split("#")[1], None, lambda: True)
    stuck_before = iso(now - timedelta(seconds=STUCK_AFTER_S))
    units = [i for i in items if _stuck(i, stuck_before)]
    for unit in units:
        run_id = run_id_of(unit[wiring.PARTITION_KEY]["S"])
        if run_id is None:
            continue
        try:
            services().replay.requeue(run_id, unit[wiring.SORT_KEY]["S"])
        except Exception:  # noqa: BLE001 - one unit's failure (no queue where the CLI runs) stops no other's
            logger.exception("a replayed unit could not be queued", extra={"runId": run_id})
    kind = approval_kind_entries()
    by_kind = [i for i in items if str(kind.SCAN.values[":family"]) in i[wiring.PARTITION_KEY]["S"]]
    deleted = kind.apply(store, by_kind) if by_kind else 0
    counters = {tenant_of_pk(i[wiring.PARTITION_KEY]["S"]) for i in items if i[wiring.SORT_KEY]["S"] == USAGE_SK}
    closed = _close_ended_months(store, counters, now)
    partitions = {i[wiring.PARTITION_KEY]["S"] for i in items}
    holding = {tenant_of_pk(pk) for pk in partitions if pk == held_pk(tenant_of_pk(pk))}
    listed = _list_handing_back(store, holding)
    rows = [i for i in items if i[wiring.SORT_KEY]["S"] == RUN_SK]
    heads = [run_id_of(i[wiring.PARTITION_KEY]["S"]) for i in rows if i.get("status", {}).get("S") in FINISHED_STATUSES]
    waiting = [retained_head(i) for i in rows if i.get("status", {}).get("S") not in FINISHED_STATUSES]
    # The runs named by an item without an expiry: an item of the run's partition (a finished run whose turn never
    # finished: a turn gives them theirs after what they name; an open run's, written so by a release before ADR 0133
    # or once the sweep keeps it), or a listing entry (written so by a release before ADR 0131, or an open run's the
    # sweep kept; or a head gone: a creation refused after its entry was put); and every open run, by its head (ADR
    # 0133). The finished are retained; an open run near its items' provisional expiry keeps every item and the tasks it
    # waits for, and near its listing entry's keeps it listed.
    unlisted = {i["runId"]["S"] for i in items if is_listing_entry(i[wiring.PARTITION_KEY]["S"]) and "runId" in i}
    unstamped = [run_id_of(i[wiring.PARTITION_KEY]["S"]) for i in items if i[wiring.SORT_KEY]["S"] != RUN_SK]
    read = {run.state.runId for run in waiting}
    named = [r for r in dict.fromkeys([*unlisted, *unstamped]) if r is not None and r not in heads and r not in read]
    finished: list[str] = []
    kept = 0
    for run in [*waiting, *(retention.store.heads_among(named) if named else [])]:
        expiry = run.state.searchExpiry
        if run.state.terminal:
            finished.append(run.state.runId)
            continue
        if run.provisional is not None and run_search.listing_kept_open(run.provisional, now.timestamp()):
            # The tasks it waits for were made with its items' provisional expiry (ADR 0142; an earlier release's with
            # its listing entry's, later: kept from here on too).
            # Its open gates' inbox entries expire with them (docs/adr/0154).
            gates = [i.interruptId for i in run.state.interrupts.values()]
            kept += retention.store.keep_items(run.state.runId, now.timestamp(), gates)
            waited = [p.effectId for p in run.state.actions.values() if p.kind == TASK]
            kept += sum(retention.store.keep_task(task) for task in waited)
        if expiry is not None and run_search.listing_kept_open(expiry, now.timestamp()):
            kept += retention.store.keep_listed(run.state)
    swept = sum(retention.turn(run_id, None, lambda: True, listing=run_id in unlisted) is None for run_id in finished)
    return _retained(retention, heads) + swept + kept + len(jobs) + len(units) + closed + deleted + listed


def _list_handing_back(store: Store, tenants: set[str]) -> int:
    """Each of `tenants` (they hold work kept while suspended) that is active and not listed yet, listed among those
    whose held work the per-minute sweep hands back (app/tenant_lifecycle.hand_back_left); how many were."""
    records, listed = TenantRecords(store), 0
    for tenant in sorted(tenants):
        stored = records.get(tenant, consistent=True)
        if stored is not None and stored.status == ACTIVE and not stored.handing_back:
            listed += records.list_handing_back(stored)
    return listed


# The tenants whose ended months this process closed, and the day it did: a tenant has up to 32 counter items, each a
# row of the sweep, so one pass would otherwise read its counters once per item.
_months_closed: dict[str, str] = {}


def _close_ended_months(store: Store, tenants: set[str], now: datetime) -> int:
    """Each tenant's ended months closed (app/tenant_lifecycle.close_ended_months), once a day per process; how many
    tenants had one."""
    today, closed = now.date().isoformat(), 0
    records = TenantRecords(store)
    for tenant in sorted(tenants):
        if _months_closed.get(tenant) == today:
            continue
        try:
            closed += bool(close_ended_months(records, tenant, now))
        except Exception:  # noqa: BLE001 - one tenant's months left for the next day stop no other's
            logger.exception("a tenant's ended months could not be closed", extra={"tenant": tenant})
            continue
        _months_closed[tenant] = today
    return closed


def _stuck(item: a.Item, stuck_before: str) -> bool:
    """Whether a row of the sweep is a replayed unit whose new round never began (the Scan's test: a unit without an
    expiry is a row for its run too)."""
    plain = a.plain(item)
    return (
        str(plain[wiring.SORT_KEY]).startswith("N")
        and plain.get("status") == PENDING
        and str(plain.get("reopenedAt", stuck_before)) < stuck_before
        and "attempts" in plain
        and plain.get("attempts") == plain.get("reopenedFrom")
    )


def is_listing_entry(pk: str) -> bool:
    """The partition of a run listing entry (store/item_index.index_pk: `T#{tenant}#RUNS#{shard}`), not the run
    search's or the inbox's, whatever a tenant's workflow or tag is called."""
    parts = pk.split("#")
    return len(parts) == 4 and parts[0] == "T" and parts[2] == wiring.RUN_INDEX.prefix


def _jobs(store: Store) -> tuple[RunRetention, Restamp]:
    # The tenant's settings read directly, not through the limiter: `interlude migrate` runs where no function's
    # configuration is.
    settings = InteractionStore(store.table, store.client)
    days: dict[str, int] = {}

    def retention_days(tenant: str) -> int:
        if tenant not in days:
            days[tenant] = tenant_settings(settings, tenant).retentionDays or DEFAULT_RETENTION_DAYS
        return days[tenant]

    retained = RetentionStore(store.table, store.entries_table, store.client)
    retention = RunRetention(retained, retention_days, clock_.now)
    return retention, Restamp(retained, retention, clock_.now, wiring.RUN_INDEX.shards)


# A replayed unit reopened this long ago whose new round has not begun: its replay stopped between the reopen and the
# send (a replay's request sends at once, within the API's 29 seconds).
STUCK_AFTER_S = 900
# The Scan's clause for such a unit in either pass, with `_stuck_values(now)` (`_stuck` tests a row the same way).
_STUCK_UNIT = "(begins_with(sk, :unit) AND #status = :pending AND reopenedAt < :stuck AND attempts = reopenedFrom)"


def _stuck_values(now: datetime) -> dict[str, str | int]:
    return {":unit": "N", ":pending": PENDING, ":stuck": iso(now - timedelta(seconds=STUCK_AFTER_S))}


def approval_kind_entries() -> ModuleType:
    """Migration 0010, which the sweep takes again on every pass (imported when a pass runs: migrate's cold start)."""
    return importlib.import_module(f"{__package__}.0010_approval_kind_entries")


def daily_sweep(now: datetime) -> Migration:
    """The sweep's pass as of `now`: what it selects, and what it does with each page."""
    kind = approval_kind_entries().SCAN
    return Migration(
        RETENTION_SWEEP_ID,
        "retention_sweep",
        "finished runs whose retention never finished are retained; replays stopped before their send are queued;"
        " tenants' ended months of usage are closed; approvals' inbox entries in their kind's family are deleted;"
        " active tenants still holding work kept while suspended are listed for it to be handed back",
        Scan(
            f"({FINISHED_FILTER} AND (attribute_not_exists(#ttl) OR (attribute_exists(#retained) AND #retained <> #ttl)))"
            " OR (contains(pk, :listing) AND attribute_exists(runId) AND attribute_not_exists(#ttl))"
            " OR (contains(pk, :run_items) AND sk <> :run AND attribute_not_exists(#ttl))"
            " OR (sk = :run AND attribute_not_exists(#ttl))"
            " OR (sk = :restamp AND #state = :running)"
            f" OR {_STUCK_UNIT}"
            " OR sk = :usage"
            " OR (contains(pk, :held) AND attribute_exists(heldAt))"
            f" OR {kind.filter}",
            {
                **FINISHED,
                ":listing": f"#{wiring.RUN_INDEX.prefix}#",
                ":run_items": f"#{RUN_PARTITION}#",
                ":restamp": RESTAMP_SK,
                ":running": RUNNING,
                **_stuck_values(now),
                ":usage": USAGE_SK,
                ":held": HELD_SUFFIX,
                **kind.values,
            },
            {
                "#ttl": wiring.TTL_ATTRIBUTE,
                "#status": "status",
                "#retained": RETAINED,
                "#state": "state",
                "#version": "version",
            },
            # An open run's head is read here whole (a Scan is billed by what it reads, not what it answers).
            "pk, sk, runId, #status, reopenedAt, attempts, reopenedFrom, #state, #version, #ttl, #retained",
        ),
        lambda store, items: _swept(store, items, now),
    )


RETENTION_SWEEP_ID = "retention-sweep"
RECORDS_SWEEP_ID = "retention-sweep-entries"


def records_sweep(now: datetime) -> Migration:
    """The sweep's pass over the second table (store/layout.py): its delivery records, as the first pass finds the
    first table's (a replay stopped before its send; a record without an expiry names its run, retained or kept)."""
    return Migration(
        RECORDS_SWEEP_ID,
        "retention_sweep_entries",
        "the daily sweep's pass over the second table's delivery records",
        Scan(
            f"(contains(pk, :run_items) AND attribute_not_exists(#ttl)) OR {_STUCK_UNIT}",
            {":run_items": f"#{RUN_PARTITION}#", **_stuck_values(now)},
            {"#ttl": wiring.TTL_ATTRIBUTE, "#status": "status"},
            "pk, sk, #status, reopenedAt, attempts, reopenedFrom, #ttl",
            table=SECOND,
        ),
        lambda store, items: _swept(store, items, now),
    )


def sweep(
    table: Store,
    owner: str,
    start: bool,
    more_time: Callable[[], bool] = lambda: True,
    report: Callable[[Progress], None] = lambda _: None,
    page_items: int = PAGE_ITEMS,
    clock: Clock = clock_.now,
) -> bool | None:
    """A turn of the retention sweep: True when its pass is whole, False when time ran out (the next turn goes on),
    None when another runner holds it. `start`: a pass done already starts over (the schedule's turn). A pass is the
    first table's, then the second's."""
    store = MigrationStore(table.table, table.client, table.entries_table)
    if start:
        store.start_over(RETENTION_SWEEP_ID, iso(clock()))
        store.start_over(RECORDS_SWEEP_ID, iso(clock()))
    done = run_one(table, store, daily_sweep(clock()), owner, __version__, more_time, report, page_items, clock)
    if not done:
        return done
    return run_one(table, store, records_sweep(clock()), owner, __version__, more_time, report, page_items, clock)
