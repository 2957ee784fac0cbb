"""Print the DynamoDB requests and items read by the first page of GET /runs (25 runs) with each search filter, at
100 and at 20,000 runs (issue 29 item 1; docs/scale.md, "Run search").

The real run listing and store run against moto in-process; the runs are the store's own items, written straight
into moto's table (tests/support/seeded_runs.py: the shapes and filters tests/integration/test_run_search_scale.py
asserts on). Goal: the same requests at both sizes, for every filter.
Usage: .venv/bin/python bench/run_search_page_calls.py
"""

from __future__ import annotations

import gc
from collections import Counter

from _bench import offline_aws

offline_aws(TABLE_NAME="search-100", ENTRIES_TABLE_NAME="search-100-entries")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude.composition import Services  # noqa: E402
from interlude.local import moto_patches  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import entries_table_beside  # noqa: E402
from tests.support.dynamodb_reads import counting  # noqa: E402
from tests.support.seeded_runs import SEARCH_FILTERS, SEARCH_TENANT, seed_search_tables  # noqa: E402

SIZES = (100, 20_000)
LIMIT = 25


def main() -> None:
    moto_patches.apply()  # as the tests and the local stack run moto: a Query reads its partition, not the table
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        tables = seed_search_tables(client, SIZES)
        gc.freeze()  # the seeded items live to the end: the collector need not walk them at every collection
        print(f"GET /runs first page (limit {LIMIT}): requests / items returned / runs listed, at {SIZES[0]:,} and {SIZES[1]:,} runs")
        for name, filters in SEARCH_FILTERS.items():
            cells = []
            for size in SIZES:
                listing = Services(Store(tables[size], entries_table_beside(tables[size]), client)).run_listing
                with counting(client) as reads:
                    page = listing.list_runs(SEARCH_TENANT, LIMIT, filters=filters)
                calls = ", ".join(f"{n} {op}" for op, n in sorted(Counter(reads.calls).items()))
                cells.append((calls, reads.items, len(page.runs)))
            same = "same" if cells[0][0] == cells[1][0] else "DIFFERS"
            print(f"  {name:32s} " + "   ".join(f"{c} / {i:4d} / {n:2d}" for c, i, n in cells) + f"   ({same})")


if __name__ == "__main__":
    main()
