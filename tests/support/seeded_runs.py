"""Many runs written straight into a table, as the store writes them (a head, a run listing entry and, for search, the
run search's entries each), for listings too long to fill through the API in a test."""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta
from typing import Any

from moto.dynamodb.models import dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType, Item

from interlude import wiring
from interlude.composition import Services
from interlude.domain.clock import iso
from interlude.domain.ids import mint_opaque, tenant_bound
from interlude.domain.models.run import OpenInterrupt, RunState, RunStatus
from interlude.domain.models.tenants import TenantSettings
from interlude.rules import auth, run_search
from interlude.store.facade import Store
from interlude.store.inbox import InboxIndex
from interlude.store.provisioning import create_tables
from interlude.store.run_items import head_put, run_entry, search_entries
from tests.support.moto_world import current_account


def seed_subject(tenant: str) -> dict[str, str]:
    """Who started the seeded runs: an API key's subject, as a run created through the API holds it."""
    return {"issuer": auth.ISSUER, "subjectId": "seed", "tenant": tenant, "lane": "api-key", "kind": "user"}


def seed_runs(
    client: Any, table: str, tenant: str, workflow_id: str, count: int, first: datetime, status: RunStatus = "completed"
) -> list[str]:
    """`count` runs of `workflow_id` (version 1) in `status` (their heads and run listing entries: what a listing
    reads), created a millisecond apart from `first`: their ids, oldest first. Written 25 items to a BatchWriteItem;
    the dispatch stream ignores heads and entries."""
    run_ids: list[str] = []
    requests = []
    for i in range(count):
        at = iso(first + timedelta(milliseconds=i))
        state = RunState(
            runId=tenant_bound(tenant, mint_opaque()),
            tenant=tenant,
            workflowId=workflow_id,
            workflowVersion=1,
            status=status,
            owner={"tenant": tenant, "subject": seed_subject(tenant)},
            createdAt=at,
            startedAt=at,
            completedAt=at if status == "completed" else None,
        )
        run_ids.append(state.runId)
        requests.append({"PutRequest": {"Item": head_put(state)["Item"]}})
        requests.append({"PutRequest": {"Item": run_entry(tenant, state.runId, workflow_id, at)[1]["Put"]["Item"]}})
    InboxIndex(table, client, table).batch_write(requests)
    return run_ids


def searchable_items(state: RunState) -> list[dict[str, Any]]:
    """Every item the store writes for `state` as it was created and its open gates opened: its head, its run
    listing entry and its run search entries (store/transitions.py writes the same)."""
    families = run_search.creation_families(state) + run_search.gate_families(
        state, (i.payload for i in state.interrupts.values())
    )
    entry = run_entry(state.tenant, state.runId, state.workflowId, state.createdAt)[1]["Put"]["Item"]
    return [head_put(state)["Item"], entry, *search_entries(state, families)]


def put_straight(client: Any, table: str, items: list[dict[str, Any]]) -> None:
    """Put `items` (the store's own, as built above) straight into moto's table, as moto's put does (its item, size
    check included) less the request's serialising and a stream record each, which no reader of such a table looks
    at: tens of thousands of items in seconds. The garbage collector waits meanwhile (nothing built here is garbage)."""
    moto_table = dynamodb_backends[current_account()][client.meta.region_name].get_table(table)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for attributes in items:
            hash_key, range_key = DynamoType(attributes[wiring.PARTITION_KEY]), DynamoType(attributes[wiring.SORT_KEY])
            moto_table.items[hash_key][range_key] = Item(hash_key, range_key, attributes)
    finally:
        if was_enabled:
            gc.enable()


# -- run search at scale (tests/integration/test_run_search_scale.py, bench/run_search_page_calls.py) ---------------

SEARCH_TENANT = "t1"
NEWEST = datetime(2026, 12, 1, tzinfo=UTC)
INVOICE_GATE = {"kind": "approval", "data": {"title": "Check the invoice"}}
SHAPES = [
    ("refund-approval", "Refund approval", "waiting-approval", ["eu", "vip"], "acme"),
    ("refund-noop", "Refund bookkeeping", "completed", ["eu"], "globex"),
    ("shipping", "Ship parcel", "completed", ["vip"], "acme"),
    ("shipping", "Ship parcel", "failed", [], "initech"),
]


def shaped_run(k: int) -> RunState:
    """The k-th newest run of SEARCH_TENANT: the four SHAPES in turn, a second apart, the first one waiting on a gate
    titled "Check the invoice"; `customer` is searchable. The same run for the same k in every table."""
    at = iso(NEWEST - timedelta(seconds=k))
    workflow, name, status, tags, customer = SHAPES[k % len(SHAPES)]
    run_id = f"{SEARCH_TENANT}/run{k:015d}"
    state = RunState(
        runId=run_id,
        tenant=SEARCH_TENANT,
        workflowId=workflow,
        workflowName=name,
        workflowVersion=1,
        status=status,
        owner={"tenant": SEARCH_TENANT, "subject": {"subjectId": "seed"}},
        tags=tags,
        metadata={"customer": customer, "amount": 100 + k},
        searchableMetadata=["customer"],
        createdAt=at,
        startedAt=at,
    )
    if status == "waiting-approval":
        gate = OpenInterrupt(
            nodeId="gate", key="gate", interruptId=f"{run_id}:gate", kind="approval", visit=1, payload=INVOICE_GATE, raisedAt=at
        )
        state.interrupts["gate"] = gate
    return state


# The filters measured, each matching a quarter to a half of the shapes (so a page of 25 fills from 100 runs).
SEARCH_FILTERS = {
    "none": run_search.RunFilters(),
    "tags (one)": run_search.RunFilters(tags=("eu",)),
    "tags (all of two)": run_search.RunFilters(tags=("eu", "vip")),
    "metadata": run_search.RunFilters(metadata={"customer": "acme"}),
    "metadata and tag": run_search.RunFilters(metadata={"customer": "acme"}, tags=("vip",)),
    "created between": run_search.RunFilters(created_after=iso(NEWEST - timedelta(seconds=80)), created_before=iso(NEWEST)),
    "status set": run_search.RunFilters(statuses=frozenset({"waiting-approval", "failed"})),
    "workflow id prefix": run_search.RunFilters(workflow_prefix="refund"),
    "workflow id": run_search.RunFilters(workflow_id="shipping"),
    "q (the name)": run_search.RunFilters(query=("refund",)),
    "q (the open gate's title)": run_search.RunFilters(query=("check", "invoice")),
    # A tenant that does not index title words (no searchTitles, the default): `q` reads the run listing.
    "q, titles not indexed": run_search.RunFilters(query=("refund",), titles_indexed=False),
    "q and status and created after": run_search.RunFilters(
        query=("parcel",), statuses=frozenset({"failed"}), created_after=iso(NEWEST - timedelta(seconds=99))
    ),
}


def seed_search_tables(client: Any, sizes: tuple[int, ...]) -> dict[int, str]:
    """A table per size (`search-{size}`), each holding the `size` newest shaped runs: the table names by size."""
    was_enabled = gc.isenabled()
    gc.disable()  # tens of thousands of items built, none of them garbage
    try:
        runs = [searchable_items(shaped_run(k)) for k in range(max(sizes))]
    finally:
        if was_enabled:
            gc.enable()
    tables = {}
    for size in sizes:
        tables[size] = f"search-{size}"
        entries = create_tables(client, tables[size])[1]
        put_straight(client, tables[size], [item for items in runs[:size] for item in items])
        # The tenant indexes its runs' title words: `q` reads their entries (SEARCH_FILTERS also asks without).
        Services(Store(tables[size], entries, client)).tenants.put_settings(SEARCH_TENANT, TenantSettings(searchTitles=True), "seed")
    return tables
