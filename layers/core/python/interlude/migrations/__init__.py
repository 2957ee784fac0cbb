"""The table's migrations: what a release does to items written before it. One module per migration, NNNN_name.py.

A migration names the items it reads (`SCAN`: a filter over a Scan of the table) and, for each page of them, writes
what they lack (`apply`, which says how many items it wrote). Every write is idempotent (a put of what is missing,
a conditional update), and the migration's checkpoint item keeps the scan's position after each page
(interlude.store.migrations), so a migration stopped anywhere (a function's timeout, a crash, a lease lost) goes on
from its last page, and one run twice writes nothing the second time. They run in the order of their numbers, each
once per table: on every deploy by the `migrate` function (which goes on from its queue until none is left) and by
`interlude migrate` (docs/operations.md, "Upgrades and rollbacks").
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from importlib.resources import files
from typing import TYPE_CHECKING

from interlude import __version__, wiring
from interlude.domain import clock as clock_
from interlude.domain.clock import Clock, iso
from interlude.store import attributes as a
from interlude.store.layout import tenant_of_pk
from interlude.store.migrations import DONE, LeaseLost, MigrationStore, Scan
from interlude.store.tenant_standing import TenantStanding, standing_of

if TYPE_CHECKING:
    from interlude.store.facade import Store

MODULE_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.py$")
# Items a page reads (a Scan's Limit, whatever its filter keeps): a page's writes and its checkpoint take seconds.
PAGE_ITEMS = 1000


@dataclass(frozen=True)
class Migration:
    id: str
    name: str
    description: str
    scan: Scan
    apply: Callable[[Store, list[a.Item]], int]

    @property
    def title(self) -> str:
        return f"{self.id} {self.name.replace('_', ' ')}"


def module_names() -> list[str]:
    """The migrations' modules, in order (read from the package, nothing imported: a deploy names them)."""
    return sorted(r.name.removesuffix(".py") for r in files(__name__).iterdir() if MODULE_NAME.fullmatch(r.name))


def registered(skipping: Container[str] = ()) -> list[Migration]:
    """Every migration of this release, in order, but those whose ids are in `skipping` (their modules not imported:
    a turn with nothing left to do imports none, nor the run models and services they use)."""
    found = []
    for name in module_names():
        if name.split("_", 1)[0] in skipping:
            continue
        module = importlib.import_module(f"{__name__}.{name}")
        number, title = name.split("_", 1)
        found.append(Migration(number, title, module.DESCRIPTION, module.SCAN, module.apply))
    return found


@dataclass(frozen=True)
class Progress:
    """What one page of a migration did, as it goes (the `migrate` function reports it as metrics)."""

    migration: Migration
    scanned: int
    written: int
    finished: bool


@dataclass
class Outcome:
    finished: list[str] = field(default_factory=list)  # ids finished by this run
    pending: list[str] = field(default_factory=list)  # ids not finished yet (after this run's time ran out)
    busy: str | None = None  # the id another runner holds (its lease has not lapsed)

    @property
    def complete(self) -> bool:
        return not self.pending and self.busy is None


def run_pending(
    table: Store,
    owner: str,
    more_time: Callable[[], bool] = lambda: True,
    report: Callable[[Progress], None] = lambda _: None,
    page_items: int = PAGE_ITEMS,
    clock: Clock = clock_.now,
) -> Outcome:
    """Run the migrations not done yet, in order, page after page while `more_time()` says so. `owner` names this
    runner in the checkpoints' leases; a migration another runner holds stops this run there (`busy`)."""
    store = MigrationStore(table.table, table.client, table.entries_table)
    done = {mid for mid, checkpoint in store.checkpoints().items() if checkpoint.get("state") == DONE}
    outcome = Outcome()
    waiting = registered(skipping=done)
    for index, migration in enumerate(waiting):
        if not more_time():
            outcome.pending = [m.id for m in waiting[index:]]
            break
        finished = run_one(table, store, migration, owner, __version__, more_time, report, page_items, clock)
        if finished is None:
            outcome.busy, outcome.pending = migration.id, [m.id for m in waiting[index:]]
            break
        if not finished:
            outcome.pending = [m.id for m in waiting[index:]]
            break
        outcome.finished.append(migration.id)
    return outcome


def run_one(
    table: Store,
    store: MigrationStore,
    migration: Migration,
    owner: str,
    release: str,
    more_time: Callable[[], bool],
    report: Callable[[Progress], None],
    page_items: int = PAGE_ITEMS,
    clock: Clock = clock_.now,
) -> bool | None:
    """One migration claimed and run from its checkpoint: True once whole, False when time ran out, None when another
    runner holds it (or took it over meanwhile)."""
    claimed = store.claim(migration.id, owner, clock().timestamp(), release)
    if claimed is None:
        return None
    try:
        return _run(table, store, migration, owner, claimed.get("position"), more_time, report, page_items, clock)
    except LeaseLost:
        return None


def _run(
    table: Store,
    store: MigrationStore,
    migration: Migration,
    owner: str,
    position: a.Item | None,
    more_time: Callable[[], bool],
    report: Callable[[Progress], None],
    page_items: int,
    clock: Clock,
) -> bool:
    """Pages of one migration from `position` until its end (True) or until time runs out (False)."""
    standing = standing_of(table, clock)
    while True:
        items, scanned, position = store.scan_page(migration.scan, position, page_items)
        written = migration.apply(table, kept_up(items, standing))
        store.record_page(migration.id, owner, position, scanned, written, clock().timestamp())
        if position is None:
            store.finish(migration.id, owner, iso(clock()))
        report(Progress(migration, scanned, written, finished=position is None))
        if position is None:
            return True
        if not more_time():
            # A turn that stops cleanly lets the next take over at once (it is queued now); one that died keeps its
            # lease, and the table is held until it lapses.
            store.release(migration.id, owner)
            return False


def kept_up(items: list[a.Item], standing: TenantStanding) -> list[a.Item]:
    """The items of a page a migration (or the sweep) writes for: none of a tenant being deleted or deleted, whose
    deletion removes them, and after which nothing may be written for it (docs/adr/0201)."""
    return [
        item
        for item in items
        if not (pk := item[wiring.PARTITION_KEY]["S"]).startswith("T#") or standing.keeps_data(tenant_of_pk(pk))
    ]


def status(table: Store) -> list[dict[str, object]]:
    """Each migration of this release, where it stands: its state (`not started` without a checkpoint), items read
    and written so far, when it started and finished, and the release that last ran it."""
    checkpoints = MigrationStore(table.table, table.client, table.entries_table).checkpoints()
    shown = ("state", "scanned", "written", "startedAt", "finishedAt", "release")
    return [
        {"migration": m.title, "state": "not started", **{k: v for k, v in checkpoints.get(m.id, {}).items() if k in shown}}
        for m in registered()
    ]
