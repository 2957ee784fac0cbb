"""A run listing page reads the same at 100 and at 20,000 runs, with each filter (issue 29 item 1; docs/scale.md,
"Run search").

Two tables of the same tenant: one holds 100 runs, the other the same 100 as its newest and 19,900 older ones of the
same four shapes. Items are the store's own (tests/support/seeded_runs.searchable_items), put straight into moto's
table (seeded_runs.put_straight). DynamoDB requests are counted around each page (tests/support/dynamodb_reads.py),
and with them the entries and heads they returned. (moto answers a fixed ConsumedCapacity per call, so capacity is not what it measures:
docs/scale.md gives the units a page costs on DynamoDB.)
"""

from __future__ import annotations

import gc

import boto3
import pytest
from moto import mock_aws

from interlude import wiring
from interlude.app import run_listing
from interlude.app.run_listing import RunListing
from interlude.composition import Services
from interlude.domain.ids import to_wire
from interlude.faces.modulex import workflows as mxw
from interlude.rules.run_search import RunFilters
from interlude.store.facade import Store
from interlude.store.provisioning import entries_table_beside
from tests.support.dynamodb_reads import counting
from tests.support.seeded_runs import SEARCH_FILTERS, SEARCH_TENANT, seed_search_tables, shaped_run

SIZES = (100, 20_000)
LIMIT = 25
# 400 heads, 100 a BatchGetItem, and a part-call where a round ends.
HEAD_READS_BOUND = run_listing.MAX_HEADS_PER_PAGE // run_listing.BATCH_GET_MAX + run_listing.MAX_ROUNDS - 1


# A world of its own: 20,000 runs would grow the shared table for every later test.
@pytest.fixture(scope="module")
def listings():
    with pytest.MonkeyPatch.context() as env, mock_aws():
        env.setenv(wiring.TABLE_NAME_ENV, "search-100")
        env.setenv(wiring.ENTRIES_TABLE_NAME_ENV, entries_table_beside("search-100"))
        client = boto3.client("dynamodb", region_name="us-east-1")
        found: dict[int, tuple[RunListing, object, Services]] = {}
        for size, table in seed_search_tables(client, SIZES).items():
            own = boto3.client("dynamodb", region_name="us-east-1")
            services = Services(Store(table, entries_table_beside(table), own))
            found[size] = (services.run_listing, own, services)
        # What was built stays to the end of the module: the collector need not walk it again at every collection.
        gc.freeze()
        try:
            yield found
        finally:
            gc.unfreeze()


def first_page(listings, size: int, filters: RunFilters) -> tuple[list[str], int, list[str]]:
    """The requests the first page sends (sorted), the items they return, and the runs it lists."""
    listing, client, _ = listings[size]
    with counting(client) as reads:
        page = listing.list_runs(SEARCH_TENANT, LIMIT, filters=filters)
    return sorted(reads.calls), reads.items, [r.runId for r in page.runs]


@pytest.mark.parametrize("name", list(SEARCH_FILTERS))
def test_a_page_sends_the_same_requests_at_100_and_at_20000_runs(listings, name) -> None:
    filters = SEARCH_FILTERS[name]
    small, large = (first_page(listings, size, filters) for size in SIZES)
    # The same requests: rounds of one Query per shard of the index the filters drive by, BatchGetItems of heads ...
    assert small[0] == large[0], (name, small[0], large[0])
    assert large[0].count("Query") <= run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards, name
    assert large[0].count("BatchGetItem") <= HEAD_READS_BOUND, name
    # ... the same page (the newest runs that match, in both tables alike) ...
    assert small[2] == large[2], name
    assert large[2], name
    expected = [s.runId for s in map(shaped_run, range(100)) if filters.accepts(s)][: len(large[2])]
    assert large[2] == expected, name
    # ... and at most what the bound allows returned.
    bound = run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards * run_listing.MAX_PER_SHARD + run_listing.MAX_HEADS_PER_PAGE
    assert large[1] <= bound, name


def test_a_filter_nothing_matches_reads_at_most_the_bound_and_answers_short(listings) -> None:
    rare = RunFilters(statuses=frozenset({"cancelled"}))
    small = first_page(listings, 100, rare)
    large = first_page(listings, 20_000, rare)
    assert small[2] == large[2] == []
    assert large[0].count("Query") <= run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards
    assert large[0].count("BatchGetItem") <= HEAD_READS_BOUND
    assert large[1] <= run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards * run_listing.MAX_PER_SHARD + run_listing.MAX_HEADS_PER_PAGE
    listing, _, _ = listings[20_000]
    assert listing.list_runs(SEARCH_TENANT, LIMIT, filters=rare).next_cursor is not None  # short, with a cursor to go on
    # A family nobody holds is one round of empty Queries at any size.
    for size in SIZES:
        assert first_page(listings, size, RunFilters(tags=("nobody",)))[:2] == (["Query"] * wiring.RUN_INDEX.shards, 0)


def test_a_modulex_page_with_search_filters_reads_the_same_at_100_and_at_20000_runs(listings) -> None:
    """GET /workflow-runs takes GET /runs's filters (in ModuleX's spelling) and reads as its pages do: the same
    Queries and BatchGetItems whatever the tenant holds (its bookmark, a PutItem when more follows, aside)."""
    filters = SEARCH_FILTERS["metadata and tag"]
    sent, rows = {}, {}
    for size in SIZES:
        _, client, services = listings[size]
        with counting(client) as reads:
            got = mxw.list_run_rows(services.run_listing, services.store, services.clock, SEARCH_TENANT, 0, LIMIT, filters)
        sent[size] = sorted(call for call in reads.calls if call != "PutItem")
        rows[size] = [row["run_id"] for row in got["runs"]]
    assert sent[100] == sent[20_000], sent
    assert sent[20_000].count("Query") <= run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards
    assert rows[100] == rows[20_000]
    assert rows[100] == [to_wire(s.runId) for s in map(shaped_run, range(100)) if filters.accepts(s)][: len(rows[100])]
    assert rows[100]
