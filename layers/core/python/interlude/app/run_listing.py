"""Run listing (GET /runs, GET /workflow-runs, the console's Runs page) and bulk cancel (POST /runs:bulk-cancel).

A page reads the tenant's run index (wiring.RUN_INDEX: one entry per run, written once when the run is created)
in rounds of one Query per shard, then the heads of the runs it keeps (one BatchGetItem): at most MAX_ROUNDS
rounds whatever the tenant holds, so a filtered page may come back short, with a cursor to go on. `workflowId`
filters the entries themselves; `status` is read from the heads, since a run's status is not written to its
entry (a status change would otherwise rewrite index items: docs/scale.md, "Run listing").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from interlude import wiring
from interlude.domain.errors import DomainError, Forbidden, Invalid
from interlude.domain.ids import TENANT_BOUND_RE, tenant_of
from interlude.domain.models.requests import CancelRunRequest
from interlude.domain.models.run import RunState
from interlude.rules import auth, run_search
from interlude.store import item_index

if TYPE_CHECKING:
    from interlude.app.ports import RunCancels, RunIndex, RunLedger, TenantLimits

# GET /runs: `limit` is clamped to this (runList.maxPageSize in discovery).
MAX_RUNS_PAGE = 100
DEFAULT_RUNS_PAGE = 25
# Rounds of one Query per shard a page may read before it answers short with a cursor; a filtered page reads at
# least MIN_FILTERED_PER_SHARD entries of each shard, doubling each round, at most MAX_PER_SHARD a Query; and at most
# MAX_HEADS_PER_PAGE run heads (BatchGetItem, 100 a call). So a page costs at most MAX_ROUNDS x shards Queries of
# small entries and 4 BatchGetItems, whatever the tenant holds.
MAX_ROUNDS = 4
MIN_FILTERED_PER_SHARD = 25
MAX_PER_SHARD = 200
MAX_HEADS_PER_PAGE = 400
BATCH_GET_MAX = 100
# POST /runs:bulk-cancel: at most this many ids per request (400 validation_error with details.maxRunIds).
MAX_BULK_CANCEL = 100
# The filters GET /runs honours (runList.filters in discovery; issue 29 item 1 added all but the first two).
RUN_LIST_FILTERS = ("workflowId", "status", "workflowIdPrefix", "tags", "metadata", "createdAfter", "createdBefore", "q")
# skip_and_take reads at most this many pages (each bounded as list_runs says), then answers short.
MAX_SLICE_PAGES = 12


@dataclass(frozen=True)
class RunPage:
    runs: list[RunState]
    # Where the next page starts; None on the last page.
    next_cursor: str | None


def _position(tenant: str, below: str | None) -> str | None:
    return item_index.encode_position(tenant, wiring.RUN_INDEX, below) if below is not None else None


@dataclass(frozen=True)
class Slice:
    runs: list[RunState]
    # The cursor the listing goes on at after them; None when nothing follows.
    after: str | None

    @property
    def more(self) -> bool:
        return self.after is not None


class RunListing:
    def __init__(self, records: RunIndex, runs: RunLedger, cancels: RunCancels, limits: TenantLimits) -> None:
        self.records = records
        self.runs = runs
        self.cancels = cancels
        self.limits = limits

    def searchable_metadata(self, tenant: str) -> tuple[str, ...]:
        """The metadata keys the tenant declared searchable (its settings, briefly cached)."""
        return self.limits.limits(tenant).searchable_metadata

    def list_runs(
        self,
        tenant: str,
        limit: int,
        cursor: str | None = None,
        workflow_id: str | None = None,
        status: str | None = None,
        keep: Callable[[RunState], bool] | None = None,
        filters: run_search.RunFilters | None = None,
    ) -> RunPage:
        """The tenant's runs, newest first by creation, at most `limit` (≤ MAX_RUNS_PAGE) of them: those `filters`
        (and `workflow_id`, `status`, `keep`, when given) accept.

        A page reads one index: the run search's family `filters` drive by (a metadata value, a tag, a word: its
        entries are the runs that hold it), else the run listing. Creation bounds narrow its Queries' key range and a
        workflow id (exact or prefix) filters its entries; the rest is decided on the run heads, which are read
        anyway to answer. At most MAX_ROUNDS rounds and MAX_HEADS_PER_PAGE heads, whatever the tenant holds."""
        filters = filters or run_search.RunFilters()
        if workflow_id is not None:
            filters = filters._replace(workflow_id=workflow_id)
        if status is not None:
            filters = filters._replace(statuses=frozenset({status}))
        if filters.query and not self.limits.limits(tenant).search_titles:
            filters = filters._replace(titles_indexed=False)  # `q` reads the listing, checked on each run's title
        reader = self.records.run_index(tenant, filters.driving_family())
        below = filters.created_before
        if cursor is not None:
            try:
                position = item_index.decode_position(cursor, tenant, wiring.RUN_INDEX)
            except ValueError:
                raise Invalid("cursor is not one this listing issued", {"field": "cursor"}) from None
            below = position if below is None else min(below, position)
        equals = {"workflowId": filters.workflow_id} if filters.workflow_id is not None else {}
        begins = {"workflowId": filters.workflow_prefix} if filters.workflow_prefix is not None else {}
        on_heads = filters.on_heads or keep is not None
        narrowed = on_heads or bool(equals or begins or filters.driving_family())
        out: list[RunState] = []
        heads_read = 0
        for round_no in range(MAX_ROUNDS):
            wanted = limit - len(out)
            # Entries are small: a filtered page reads more of each shard, and more again each round.
            floor_per_shard = MIN_FILTERED_PER_SHARD if narrowed else 0
            per_shard = min(MAX_PER_SHARD, max(math.ceil(wanted * 1.5 / wiring.RUN_INDEX.shards) + 1, floor_per_shard) << round_no)
            found = reader.round(below, per_shard, equals, filters.created_after, begins)
            # Heads only for the entries looked at: without a filter on them, each one is a row.
            chunk_size = BATCH_GET_MAX if on_heads else wanted
            start = 0
            while start < len(found.entries):
                if heads_read >= MAX_HEADS_PER_PAGE:
                    return RunPage(out, _position(tenant, below))
                chunk = found.entries[start : start + min(chunk_size, MAX_HEADS_PER_PAGE - heads_read)]
                start += len(chunk)
                heads = self.records.get_runs([e["runId"] for e in chunk])
                heads_read += len(chunk)
                for i, entry in enumerate(chunk, start - len(chunk)):
                    below = entry[wiring.SORT_KEY]
                    got = heads.get(entry["runId"])
                    if got is None:
                        continue
                    state, _ = self.runs.apply_deadlines(*got)
                    if not filters.accepts(state) or (keep is not None and not keep(state)):
                        continue
                    out.append(state)
                    if len(out) == limit:
                        more = i < len(found.entries) - 1 or found.floor is not None
                        return RunPage(out, _position(tenant, below) if more else None)
            if found.floor is None:
                return RunPage(out, None)
            below = found.floor
        return RunPage(out, _position(tenant, below))

    def skip_and_take(
        self,
        tenant: str,
        skip: int,
        limit: int,
        filters: run_search.RunFilters | None = None,
        keep: Callable[[RunState], bool] | None = None,
        cursor: str | None = None,
    ) -> Slice:
        """The `limit` runs after the first `skip` of the listing below `cursor` (ModuleX pages by offset), reading at
        most MAX_SLICE_PAGES pages: a slice that reaches that bound answers short (fewer runs, and a cursor) and goes on
        where reading stopped, so what it skipped or took is never read again from there."""
        taken: list[RunState] = []
        skipped = 0
        for _ in range(MAX_SLICE_PAGES):
            # What is left to skip and take: a page that fills ends at the last of them (its cursor is theirs).
            wanted = min(MAX_RUNS_PAGE, skip - skipped + limit - len(taken))
            page = self.list_runs(tenant, wanted, cursor, keep=keep, filters=filters)
            for state in page.runs:
                if skipped < skip:
                    skipped += 1
                else:
                    taken.append(state)
            cursor = page.next_cursor
            if cursor is None or len(taken) == limit:
                break
        return Slice(taken, cursor)

    def bulk_cancel(
        self, principal: auth.Principal, run_ids: list[str], reason: str | None, surface: str = "api"
    ) -> list[tuple[str, RunState | DomainError]]:
        """Each id cancelled on its own, in request order: its run as cancelled, or the refusal it met (another tenant's
        run is `run_forbidden` in its own entry, never a refusal of the whole request)."""
        if len(run_ids) > MAX_BULK_CANCEL:
            raise Invalid(
                f"at most {MAX_BULK_CANCEL} runIds per request",
                {"field": "runIds", "maxRunIds": MAX_BULK_CANCEL},
            )
        request = CancelRunRequest(reason=reason)
        results: list[tuple[str, RunState | DomainError]] = []
        for run_id in run_ids:
            try:
                if not TENANT_BOUND_RE.fullmatch(run_id):
                    raise Invalid("not a tenant-bound run id (tenant/opaque)", {"field": "runId"})
                if tenant_of(run_id) != principal.tenant:
                    raise Forbidden("the run belongs to another tenant", code="run_forbidden")
                results.append((run_id, self.cancels.cancel_run(principal, run_id, request, surface=surface)))
            except DomainError as refused:
                results.append((run_id, refused))
        return results
