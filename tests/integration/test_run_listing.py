"""Run listing over the sharded run index: newest first, filters, tenant-bound cursors, bounded reads per page,
and bulk cancel with per-id outcomes (issue 16, item 2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest

from interlude import wiring
from interlude.app import run_listing
from interlude.composition import Services
from interlude.domain.errors import Invalid
from interlude.domain.ids import to_wire
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.faces.modulex import workflows as mxw
from interlude.rules.run_search import RunFilters
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.seeded_runs import seed_runs


@pytest.fixture
def client(world):
    return boto3.client("dynamodb")


@pytest.fixture
def services(client) -> Services:
    return Services(Store(TABLE, ENTRIES_TABLE, client))


def register(services: Services, principal, workflow_id: str, fixture: str) -> None:
    raw = json.loads((FIXTURES / f"{fixture}.json").read_text())
    services.workflows.put_workflow(principal, workflow_id, WorkflowDefinition.model_validate(raw))


def start(services: Services, principal, workflow_id: str) -> str:
    return services.lifecycle.create_run(principal, CreateRunRequest(workflowId=workflow_id)).runId


def walk(services: Services, tenant: str, limit: int, **filters) -> tuple[list[str], int]:
    """Every run id the listing yields, page after page, and how many pages it took."""
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = services.run_listing.list_runs(tenant, limit, cursor, **filters)
        assert len(page.runs) <= limit
        seen += [r.runId for r in page.runs]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            return seen, pages


def test_pages_through_every_run_newest_first_with_filters(services: Services) -> None:
    admin = signed_in(services)
    register(services, admin, "approve", "conformance-approval")
    register(services, admin, "noop", "conformance-noop")
    approvals = [start(services, admin, "approve") for _ in range(40)]
    noops = [start(services, admin, "noop") for _ in range(25)]
    everything, pages = walk(services, admin.tenant, 10)
    assert sorted(everything) == sorted(approvals + noops)  # each run exactly once
    created = {r: services.store.get_run(r)[0].createdAt for r in everything}
    assert [created[r] for r in everything] == sorted(created.values(), reverse=True)
    assert pages >= 7
    assert sorted(walk(services, admin.tenant, 7, workflow_id="noop")[0]) == sorted(noops)
    waiting, _ = walk(services, admin.tenant, 9, status="waiting-approval")
    assert sorted(waiting) == sorted(approvals)
    assert walk(services, admin.tenant, 9, workflow_id="noop", status="waiting-approval")[0] == []
    assert sorted(walk(services, admin.tenant, 100, status="completed")[0]) == sorted(noops)


def test_a_tenant_sees_only_its_runs_and_a_foreign_or_forged_cursor_is_refused(
    services: Services, tenant, other_tenant
) -> None:
    admin = signed_in(services)
    other = signed_in(services, tenant=other_tenant)
    register(services, admin, "noop", "conformance-noop")
    register(services, other, "noop", "conformance-noop")
    mine = [start(services, admin, "noop") for _ in range(5)]
    theirs = [start(services, other, "noop") for _ in range(3)]
    assert sorted(walk(services, tenant, 2)[0]) == sorted(mine)
    assert sorted(walk(services, other_tenant, 2)[0]) == sorted(theirs)
    their_cursor = services.run_listing.list_runs(other_tenant, 1).next_cursor
    assert their_cursor is not None
    for cursor in (their_cursor, "not-a-cursor", "e30"):
        with pytest.raises(Invalid) as refused:
            services.run_listing.list_runs(tenant, 2, cursor)
        assert refused.value.details == {"field": "cursor"}


def test_a_page_reads_the_same_whatever_the_tenant_holds(services: Services, client) -> None:
    """Reads per page are bounded by the page size and the shard count, not by how many runs there are."""
    admin = signed_in(services)
    register(services, admin, "noop", "conformance-noop")

    def first_page_cost() -> tuple[int, int]:
        calls: list[str] = []

        def count(model, **_):
            calls.append(model.name)

        client.meta.events.register("after-call.dynamodb", count)
        try:
            services.run_listing.list_runs(admin.tenant, 10)
        finally:
            client.meta.events.unregister("after-call.dynamodb", count)
        return calls.count("Query"), calls.count("BatchGetItem")

    # The listing is the subject: its runs written as the store writes them, in batches (seeded_runs).
    seed_runs(client, TABLE, admin.tenant, "noop", 30, datetime(2026, 11, 1, tzinfo=UTC))
    small = first_page_cost()
    seed_runs(client, TABLE, admin.tenant, "noop", 170, datetime(2026, 11, 2, tzinfo=UTC))
    large = first_page_cost()
    assert small[0] <= run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards
    assert large[0] <= run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards
    assert large[1] <= run_listing.MAX_HEADS_PER_PAGE // run_listing.BATCH_GET_MAX


def test_entries_spread_over_the_shards_and_are_written_once(services: Services, client) -> None:
    admin = signed_in(services)
    register(services, admin, "approve", "conformance-approval")
    runs = [start(services, admin, "approve") for _ in range(48)]
    for run_id in runs[:5]:  # status changes write no index entry
        services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    shards = set()
    entries = 0
    for shard in range(wiring.RUN_INDEX.shards):
        items = client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"T#{admin.tenant}#RUNS#{shard:02d}"}},
        )["Items"]
        entries += len(items)
        if items:
            shards.add(shard)
    assert entries == len(runs)
    assert len(shards) >= 8


def run_entries(client, tenant: str) -> int:
    return sum(
        len(
            client.query(
                TableName=TABLE,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues={":pk": {"S": f"T#{tenant}#RUNS#{shard:02d}"}},
            )["Items"]
        )
        for shard in range(wiring.RUN_INDEX.shards)
    )


def test_a_refused_create_leaves_no_entry_and_an_entry_without_its_run_is_not_listed(services: Services, client) -> None:
    from interlude.domain.errors import DomainError
    from interlude.domain.models.tenants import TenantSettings
    from interlude.store.run_items import run_entry

    admin = signed_in(services)
    register(services, admin, "approve", "conformance-approval")
    kept = start(services, admin, "approve")
    services.tenants.put_settings(admin.tenant, TenantSettings.model_validate({"limits": {"openRuns": 1}}), "admin")
    services.limiter.forget(admin.tenant)
    with pytest.raises(DomainError) as refused:
        start(services, admin, "approve")
    assert refused.value.code == "interlude.quota_exceeded"
    # The entry is a plain write before the run's transaction (half its price inside it), taken back when refused.
    assert run_entries(client, admin.tenant) == 1
    # One left behind (a process that stopped between the two writes) is skipped: no run head, no row.
    _, put = run_entry(admin.tenant, f"{admin.tenant}/neverWritten00000000000", "approve", "2099-01-01T00:00:00.000Z")
    client.put_item(TableName=TABLE, **{k: v for k, v in put["Put"].items() if k == "Item"})
    assert walk(services, admin.tenant, 10) == ([kept], 1)


def test_bulk_cancel_reports_each_id_in_request_order(services: Services, tenant, other_tenant) -> None:
    admin = signed_in(services)
    register(services, admin, "approve", "conformance-approval")
    live = [start(services, admin, "approve") for _ in range(2)]
    done = start(services, admin, "approve")
    services.lifecycle.cancel_run(admin, done, run_listing.CancelRunRequest())
    foreign = f"{other_tenant}/" + "A" * 24
    missing = f"{tenant}/" + "B" * 24
    outcomes = services.run_listing.bulk_cancel(admin, [*live, done, foreign, missing, "garbage"], "tidy up")
    assert [run_id for run_id, _ in outcomes] == [*live, done, foreign, missing, "garbage"]
    codes = [getattr(outcome, "code", None) or outcome.status for _, outcome in outcomes]
    assert codes == ["cancelled", "cancelled", "run_terminal", "run_forbidden", "not_found", "validation_error"]
    with pytest.raises(Invalid) as refused:
        services.run_listing.bulk_cancel(admin, [missing] * 101, None)
    assert refused.value.details == {"field": "runIds", "maxRunIds": 100}


def test_modulex_offsets_read_in_order_cost_one_page_each_however_deep(services: Services, client) -> None:
    """GET /workflow-runs's offsets are served by cursor: a page read in order (as iter_runs reads) starts at the
    bookmark the page before left, so its reads do not grow with its offset."""
    admin = signed_in(services)
    register(services, admin, "noop", "conformance-noop")
    seeded = seed_runs(client, TABLE, admin.tenant, "noop", 1_300, datetime(2026, 11, 1, tzinfo=UTC))
    costs: list[tuple[int, int]] = []
    served: list[str] = []

    def count(model, **_):
        calls.append(model.name)

    client.meta.events.register("after-call.dynamodb", count)
    try:
        offset = 0
        while True:
            calls: list[str] = []
            page = mxw.list_run_rows(services.run_listing, services.store, services.clock, admin.tenant, offset, 100, RunFilters())
            costs.append((calls.count("Query"), calls.count("BatchGetItem")))
            served += [row["run_id"] for row in page["runs"]]
            if not page["has_more"]:
                break
            offset += 100
    finally:
        client.meta.events.unregister("after-call.dynamodb", count)
    assert served == [to_wire(r) for r in reversed(seeded)]
    # Every page, the 13th as the second, reads what one page of GET /runs reads at most, and one bookmark.
    assert all(queries <= run_listing.MAX_ROUNDS * wiring.RUN_INDEX.shards + 1 for queries, _ in costs)
    assert all(gets <= run_listing.MAX_HEADS_PER_PAGE // run_listing.BATCH_GET_MAX for _, gets in costs)
    # A page may start at most MAX_RUN_SKIP past the nearest bookmark; the listing with another filter has its own.
    assert len(mxw.list_run_rows(services.run_listing, services.store, services.clock, admin.tenant, 1_150, 100, RunFilters())["runs"]) == 100
    with pytest.raises(Invalid, match="at most 1000 runs past"):
        mxw.list_run_rows(services.run_listing, services.store, services.clock, admin.tenant, 1_001, 10, RunFilters(statuses=frozenset({"completed"})))
