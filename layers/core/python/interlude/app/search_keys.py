"""Keys declared searchable later (issue 29 item 1): when a tenant adds a key to `searchableMetadata`, the runs it
created before get their entries under that key (rules/run_search.metadata_families), by a job taken turn by turn
from the migrations queue (functions/migrate), as the retention job and the table's migrations are.

The settings change that declares keys writes the job's record in its own transaction (store/search_keys.py) and
queues its first turn. A turn waits until every instance applies the declaration (their settings cache), so a run
created meanwhile without its entry is one the job still reads; then it reads the run listing newest first, a round at
a time, and saves where it stopped after each, until its time runs out (the next turn goes on from there) or the
listing ends. A later declaration replaces the job (a new generation, from the newest run down again, its keys
still pending carried over); a key no longer declared is not indexed any further, and no listing may name it.
Progress: the tenant's settings answer, `searchIndexing`. Reasons: docs/adr/0112.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from interlude.domain.clock import epoch_of, iso
from interlude.rules.run_search import metadata_families
from interlude.store.run_items import search_entries
from interlude.store.search_keys import SEARCH_KEYS_SK, job_put

if TYPE_CHECKING:
    from interlude.domain.clock import Clock
    from interlude.store.search_keys import SearchKeysStore
    from interlude.store.transactions import Labelled

logger = logging.getLogger(__name__)

# A turn's round reads at most this many listing entries of each shard (16 shards: 400 runs) and their heads (4
# BatchGetItems), then saves where it stopped: a bounded page, as a run listing page is.
PER_SHARD = 25
# The job starts this long after the instances' settings cache time (composition passes app/limits.py's): by then
# every instance creates runs under the keys declared.
SETTLE_MARGIN_S = 5
# A pending job whose record has not moved for this long (its turn's message lost) is queued again when the tenant's
# settings are read.
STALE_S = 15 * 60


class NotYet(Exception):
    """The declaration is not yet applied everywhere: the turn is to be taken after `seconds`."""

    def __init__(self, seconds: int) -> None:
        super().__init__(seconds)
        self.seconds = seconds


class SearchKeys:
    def __init__(
        self,
        store: SearchKeysStore,
        declared: Callable[[str], Iterable[str]],
        clock: Clock,
        queue: Callable[[str, int], None],
        cached_s: float,
    ) -> None:
        self.store = store
        self.settle_s = cached_s + SETTLE_MARGIN_S
        # The keys the tenant declares searchable now (its settings, read afresh).
        self.declared = declared
        self.clock = clock
        # Queues a turn of the tenant's job after so many seconds (adapters/migration_turns.queue_search_keys).
        self.queue = queue

    def declaration(self, tenant: str, previous: Iterable[str], declared: Iterable[str], at: str) -> list[Labelled]:
        """The job's record a settings change writes in its transaction: none unless it declares a key."""
        before, now = set(previous), list(declared)
        added = [key for key in now if key not in before]
        if not added:
            return []
        job = self.store.job(tenant)
        carried = [key for key in job.keys if key in now] if job is not None and job.done_at is None else []
        generation = job.generation + 1 if job is not None else 1
        return [(SEARCH_KEYS_SK, job_put(tenant, list(dict.fromkeys(carried + added)), generation, at))]

    def start(self, tenant: str) -> None:
        """Queue the first turn. Not queued (SQS unreachable, or a CLI without the queue): the job stays pending and
        is queued again by a read of the settings once it is stale."""
        try:
            self.queue(tenant, 0)
        except Exception:  # noqa: BLE001 - the settings are changed; the job's record says it is pending
            logger.warning("the search-keys job's first turn could not be queued", exc_info=True)

    def progress(self, tenant: str) -> dict[str, Any] | None:
        """The job as the settings answer shows it (None: no key was ever declared after runs existed)."""
        job = self.store.job(tenant)
        if job is None:
            return None
        if job.done_at is None and self.clock().timestamp() - epoch_of(job.updated_at) > STALE_S:
            self.start(tenant)
        return job.view()

    def turn(self, tenant: str, has_time: Callable[[], bool]) -> bool:
        """Index the tenant's older runs under its pending keys while `has_time()`; True once the job is done (or was
        replaced), False when the next turn is to go on. Raises NotYet before the declaration has settled."""
        job = self.store.job(tenant)
        if job is None or job.done_at is not None:
            return True
        wait = epoch_of(job.declared_at) + self.settle_s - self.clock().timestamp()
        if wait > 0:
            raise NotYet(math.ceil(wait))
        declared = set(self.declared(tenant))
        keys = [key for key in job.keys if key in declared]
        listing = self.store.run_listing(tenant)
        while True:
            found = listing.round(job.after, PER_SHARD, {}) if keys else None
            runs = self.store.heads([e["runId"] for e in found.entries]) if found else []
            # A finished run's entries expire with it (its head's ttl), a running one's at its provisional search expiry.
            entries = [e for state, ttl in runs for e in search_entries(state, metadata_families(state, keys), ttl)]
            self.store.put(entries)
            at = iso(self.clock())
            after = found.floor if found else None
            job = replace(
                job,
                after=after,
                runs_read=job.runs_read + len(runs),
                entries_written=job.entries_written + len(entries),
                updated_at=at,
                done_at=at if after is None else None,
            )
            if not self.store.save(tenant, job) or job.done_at is not None:
                return True
            if not has_time():
                return False
