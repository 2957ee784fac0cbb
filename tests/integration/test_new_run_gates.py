"""A new run's gates are plain puts before the transaction that creates it, beside its index entries (docs/adr/0139):
billed 1 write unit per KB instead of 2, and read as before. A creation refused takes them back; one that stopped
before its transaction leaves a gate that no reader shows, that expires by itself and that is in no later run's way."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from interlude import migrations, wiring
from interlude.app.retention import RunMoved
from interlude.domain import clock
from interlude.domain.clock import epoch_of
from interlude.domain.errors import DomainError, NotFound
from interlude.domain.models.principal_requests import DelegateVoteRequest
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.migrations import sweeps
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store.layout import INTERRUPT_SK_PREFIX, RUN_SK, run_id_of
from interlude.store.retention import RetentionStore, RunPage
from tests.integration.conftest import signed_in
from tests.integration.test_store_and_dispatch import register
from tests.support.moto_world import ENTRIES_TABLE, TABLE

DAY_S = 86_400


@contextmanager
def sent(client: Any, operation: str) -> Iterator[list[dict[str, Any]]]:
    """The parameters of every `operation` call the client makes inside the block."""
    calls: list[dict[str, Any]] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        calls.append(params)

    client.meta.events.register(f"provide-client-params.dynamodb.{operation}", hook)
    try:
        yield calls
    finally:
        client.meta.events.unregister(f"provide-client-params.dynamodb.{operation}", hook)


def put_items(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items the BatchWriteItem calls' parameters `batches` put, in every table."""
    return [r["PutRequest"]["Item"] for b in batches for rs in b["RequestItems"].values() for r in rs if "PutRequest" in r]


def create(services, admin, workflow: str) -> str:
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow})).runId


def tenant_items(tenant: str) -> list[dict[str, Any]]:
    """Every item of the tenant, of any family, in both tables (docs/adr/0161): a scan, which reads the whole table (a
    test's own world only)."""
    scan = boto3.client("dynamodb").get_paginator("scan").paginate
    own = {"FilterExpression": "begins_with(pk, :t)", "ExpressionAttributeValues": {":t": {"S": f"T#{tenant}#"}}}
    return [item for table in (TABLE, ENTRIES_TABLE) for page in scan(TableName=table, **own) for item in page["Items"]]


def gate_items(tenant: str) -> list[dict[str, Any]]:
    return [i for i in tenant_items(tenant) if i["sk"]["S"].startswith(INTERRUPT_SK_PREFIX)]


def test_a_new_runs_gate_is_put_with_its_entries_before_its_transaction_and_read_as_before(services, admin):
    workflow = register(services, admin, "conformance-approval")
    client = services.store.client
    with sent(client, "BatchWriteItem") as batches, sent(client, "TransactWriteItems") as transactions:
        run_id = create(services, admin, workflow)
    state, _ = services.store.get_run(run_id)
    put = put_items(batches)
    [gate] = [i for i in put if i["sk"]["S"].startswith(INTERRUPT_SK_PREFIX)]
    assert gate["sk"]["S"] == INTERRUPT_SK_PREFIX + state.interrupts["gate"].key
    # One BatchWriteItem still: the gate joins the run's inbox, listing and search entries.
    assert len(batches) == 1
    [transaction] = transactions
    written = [next(iter(op.values())) for op in transaction["TransactItems"]]
    assert not [w for w in written if w.get("Item", w.get("Key", {})).get("sk", {}).get("S", "").startswith(INTERRUPT_SK_PREFIX)]
    # With the run's items' provisional expiry (ADR 0133), as the create's event batch (put beside it: ADR 0165).
    assert gate[wiring.TTL_ATTRIBUTE]["N"] == str(run_search.items_expiry(state.searchExpiry))
    # Read as every gate is: listed, open, decided.
    assert [i["runId"] for i in services.inbox.inbox(admin, 25, {}, None)["interrupts"]] == [run_id]
    assert services.store.closed_interrupt(run_id, state.interrupts["gate"].key)["status"] == "open"
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    assert services.store.get_run(run_id)[0].status == "completed"


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_creation_refused_takes_its_gate_back_with_its_entries(services, admin):
    workflow = register(services, admin, "conformance-approval")
    kept = create(services, admin, workflow)
    services.tenants.put_settings(admin.tenant, TenantSettings.model_validate({"limits": {"openRuns": 1}}), "admin")
    services.limiter.forget(admin.tenant)
    with pytest.raises(DomainError) as refused:
        create(services, admin, workflow)
    assert refused.value.code == "interlude.quota_exceeded"
    assert [run_id_of(i["pk"]["S"]) for i in gate_items(admin.tenant)] == [kept]
    assert [i["runId"] for i in services.inbox.inbox(admin, 25, {}, None)["interrupts"]] == [kept]


def stopped_creation(services: Any, admin: Any, workflow: str, monkeypatch: Any) -> dict[str, Any]:
    """The gate item a creation leaves when its process stops between its puts and its transaction."""

    def stopped(*_: Any, **__: Any) -> None:
        raise RuntimeError("the process stopped between the creation's puts and its transaction")

    with monkeypatch.context() as m:
        m.setattr(services.store, "_transact", stopped)
        with pytest.raises(RuntimeError):
            create(services, admin, workflow)
    [orphan] = gate_items(admin.tenant)
    return orphan


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_gate_left_by_a_creation_stopped_before_its_transaction_is_read_by_nothing_and_in_no_ones_way(
    services, admin, monkeypatch
):
    workflow = register(services, admin, "conformance-approval")
    orphan = stopped_creation(services, admin, workflow, monkeypatch)
    run_id = run_id_of(orphan["pk"]["S"])
    assert not [i for i in tenant_items(admin.tenant) if i["sk"]["S"] == RUN_SK]
    # It goes by itself: the run's provisional expiry, its creation + retentionDays (90) + 7 days.
    assert 97 * DAY_S - 60 < int(orphan[wiring.TTL_ATTRIBUTE]["N"]) - time.time() <= 97 * DAY_S
    # No reader trusts a gate without its run head.
    with pytest.raises(NotFound):
        services.runs.load_run(admin.tenant, run_id)
    with pytest.raises(NotFound):
        services.run_exports.export(admin, run_id)
    assert services.inbox.inbox(admin, 25, {}, None)["interrupts"] == []
    assert services.inbox.inbox(admin, 25, {"runId": run_id}, None)["interrupts"] == []
    assert services.run_listing.list_runs(admin.tenant, 10, None).runs == []
    backfill = next(m for m in migrations.registered() if m.id == "0002")
    assert backfill.apply(services.store, [orphan]) == 0
    # And a later run is created, listed and decided as if it were not there.
    later = create(services, admin, workflow)
    assert [i["runId"] for i in services.inbox.inbox(admin, 25, {}, None)["interrupts"]] == [later]
    assert [r.runId for r in services.run_listing.list_runs(admin.tenant, 10, None).runs] == [later]
    services.decisions.resolve_interrupt(admin, later, "gate", {"action": "accept"})
    assert a.plain(orphan) in [a.plain(i) for i in gate_items(admin.tenant)]


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_short_retention_tenants_new_gate_expires_with_its_entries_and_takes_the_runs_expiry_when_it_ends(
    services, admin, monkeypatch
):
    # Given a tenant that keeps finished runs a week: its runs' items' provisional expiry (creation + 7 + 7 days) is
    # near from the start, so they are written without one (ADR 0133)
    services.tenants.put_settings(admin.tenant, TenantSettings.model_validate({"retentionDays": 7}), "admin")
    services.limiter.forget(admin.tenant)
    workflow = register(services, admin, "conformance-approval")
    # When a creation stops between its puts and its transaction
    orphan = stopped_creation(services, admin, workflow, monkeypatch)
    # Then the gate it left goes by itself with the listing and search entries put beside it (creation + 7 + 90 days)
    indexes = (f"#{wiring.RUN_INDEX.prefix}#", f"#{wiring.RUN_SEARCH.prefix}#")
    entries = [i for i in tenant_items(admin.tenant) if any(index in i["pk"]["S"] for index in indexes)]
    assert entries
    assert {int(i[wiring.TTL_ATTRIBUTE]["N"]) for i in entries} == {int(orphan[wiring.TTL_ATTRIBUTE]["N"])}
    assert 97 * DAY_S - 60 < int(orphan[wiring.TTL_ATTRIBUTE]["N"]) - time.time() <= 97 * DAY_S
    # And a run created whole has its gate with that expiry too, which the daily sweep leaves while it is far (a write
    # a day for nothing: the run is decided within weeks, or the sweep takes it off once near)
    run_id = create(services, admin, workflow)
    state, _ = services.store.get_run(run_id)
    [gate] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    assert gate[wiring.TTL_ATTRIBUTE]["N"] == str(state.searchExpiry)
    head = services.store.client.get_item(TableName=TABLE, Key=a.key(gate["pk"]["S"], RUN_SK))["Item"]
    with sent(services.store.client, "UpdateItem") as updates, sent(services.store.client, "PutItem") as puts:
        sweeps.daily_sweep(datetime.now(UTC)).apply(services.store, [head])
    assert (updates, puts) == ([], [])
    assert gate in gate_items(admin.tenant)
    # When it is decided and its retention turn taken
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    assert services.retention.turn(run_id, None, lambda: True) is None
    # Then its gate expires with the run (its end + 7 days), not the later expiry it was put with
    head = services.store.client.get_item(TableName=TABLE, Key=a.key(gate["pk"]["S"], RUN_SK), ConsistentRead=True)
    [gate] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    assert gate[wiring.TTL_ATTRIBUTE] == head["Item"][wiring.TTL_ATTRIBUTE]


def inbox_entries(tenant: str, run_id: str) -> list[dict[str, Any]]:
    return [i for i in tenant_items(tenant) if "#INBOX#" in i["pk"]["S"] and i.get("runId", {}).get("S") == run_id]


def swept_entries_before_their_gate(
    services: Any, gate: dict[str, Any], entries: list[dict[str, Any]], when: datetime
) -> dict[str, Any]:
    """The daily sweep at `when` over the gate's run: it writes each of the gate's open `entries` once, all before the
    gate itself (so a sweep stopped between them never leaves a kept gate whose entries still expire). The run's head."""
    head = services.store.client.get_item(TableName=TABLE, Key=a.key(gate["pk"]["S"], RUN_SK))["Item"]
    with sent(services.store.client, "UpdateItem") as updates:
        sweeps.daily_sweep(when).apply(services.store, [head])
    written = [u["Key"]["pk"]["S"] + u["Key"]["sk"]["S"] for u in updates]
    listed = [key for key in written if "#INBOX#" in key]
    assert sorted(listed) == sorted(i["pk"]["S"] + i["sk"]["S"] for i in entries)
    assert written.index(gate["pk"]["S"] + gate["sk"]["S"]) > max(written.index(key) for key in listed)
    return head


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
@pytest.mark.parametrize("retention_days", [None, 7])
def test_a_new_runs_inbox_entries_expire_with_its_gate_and_lose_that_expiry_with_it_while_it_waits(
    services, admin, monkeypatch, retention_days
):
    """docs/adr/0154: the inbox entries a creation puts before its transaction carry its gate's expiry, so those a
    creation stopped before its transaction leaves go by themselves; a run that waits longer than that has them kept
    by the daily sweep that keeps its gate, once, in the same pass."""
    if retention_days is not None:
        services.tenants.put_settings(admin.tenant, TenantSettings(retentionDays=retention_days), "admin")
        services.limiter.forget(admin.tenant)
    workflow = register(services, admin, "conformance-approval")
    # A creation stopped before its transaction leaves entries that expire with the gate it left
    orphan = stopped_creation(services, admin, workflow, monkeypatch)
    left = inbox_entries(admin.tenant, run_id_of(orphan["pk"]["S"]))
    assert left
    assert {i[wiring.TTL_ATTRIBUTE]["N"] for i in left} == {orphan[wiring.TTL_ATTRIBUTE]["N"]}
    # A run created whole has its entries with its gate's expiry too, the entries' put costing nothing more
    run_id = create(services, admin, workflow)
    [gate] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    entries = inbox_entries(admin.tenant, run_id)
    assert {i[wiring.TTL_ATTRIBUTE]["N"] for i in entries} == {gate[wiring.TTL_ATTRIBUTE]["N"]}
    # When the run still waits on the day the daily sweep finds its gate's expiry near (less than 30 days away)
    waited = datetime.fromtimestamp(int(gate[wiring.TTL_ATTRIBUTE]["N"]) - 29 * DAY_S, UTC)
    # Then its entries lose that expiry with the gate's (and its other items', as before), one write each, the entries
    # before their gate; the stopped creation's are left to expire
    head = swept_entries_before_their_gate(services, gate, entries, waited)
    [kept] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    assert wiring.TTL_ATTRIBUTE not in kept
    assert all(wiring.TTL_ATTRIBUTE not in i for i in inbox_entries(admin.tenant, run_id))
    assert all(wiring.TTL_ATTRIBUTE in i for i in inbox_entries(admin.tenant, run_id_of(orphan["pk"]["S"])))
    # And the gate is still listed, and the next day's sweep writes nothing more
    assert [i["runId"] for i in services.inbox.inbox(admin, 25, {}, None)["interrupts"]] == [run_id]
    with sent(services.store.client, "UpdateItem") as again:
        sweeps.daily_sweep(datetime.fromtimestamp(waited.timestamp() + DAY_S, UTC)).apply(services.store, [head])
    assert again == []


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
@pytest.mark.parametrize(("retention_days", "long_open"), [(None, False), (7, False), (None, True)])
def test_the_inbox_entries_of_a_gate_a_decision_opens_expire_with_it_and_lose_that_expiry_with_it_while_it_waits(
    services, admin, monkeypatch, clock_file, retention_days, long_open
):
    """docs/adr/0154: a decision that moves its run on to a new gate puts that gate's inbox entries before its
    transaction, with the gate's expiry (the run's items' provisional one, or its search entries' while that is near:
    a week's retention, or one as far from the decision once that is near too: a run open longer than retentionDays +
    60 days), so those of a decision stopped in between go by themselves; those of the gate it opens are kept by the
    daily sweep with their gate."""
    if retention_days is not None:
        services.tenants.put_settings(admin.tenant, TenantSettings(retentionDays=retention_days), "admin")
        services.limiter.forget(admin.tenant)
    workflow = register(services, admin, "conformance-approval-reject-loopback")
    run_id = create(services, admin, workflow)
    first = {i["sk"]["S"] for i in inbox_entries(admin.tenant, run_id)}
    if long_open:
        clock.advance(clock_file, (90 + run_search.SEARCH_ENTRY_MARGIN_DAYS - run_search.LISTING_KEPT_DAYS + 1) * DAY_S)

    def stopped(*_: Any, **__: Any) -> None:
        raise RuntimeError("the process stopped between the decision's puts and its transaction")

    # A reject loops back to the gate: a new visit, whose entries are put before the transaction that opens it
    with monkeypatch.context() as m:
        m.setattr(services.store, "_transact", stopped)
        with pytest.raises(RuntimeError):
            services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "reject"})
    state, _ = services.store.get_run(run_id)

    def expiry(raised_at: str) -> str:
        if long_open:
            return str(int(epoch_of(raised_at)) + run_search.SEARCH_ENTRY_MARGIN_DAYS * DAY_S)
        return str(run_search.items_expiry(state.searchExpiry) if retention_days is None else state.searchExpiry)

    orphans = [i for i in inbox_entries(admin.tenant, run_id) if i["sk"]["S"] not in first]
    assert orphans
    assert all(i[wiring.TTL_ATTRIBUTE]["N"] == expiry(i["sk"]["S"].split("#")[0]) for i in orphans)
    # The decision made whole opens the gate again, its item and its entries expiring alike
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "reject"})
    state, _ = services.store.get_run(run_id)
    reopened = state.interrupts["gate"]
    [gate] = [i for i in gate_items(admin.tenant) if i.get("interruptId", {}).get("S") == reopened.interruptId]
    entries = [i for i in inbox_entries(admin.tenant, run_id) if i["sk"]["S"].endswith(reopened.interruptId)]
    entries = [i for i in entries if i["sk"]["S"].startswith(reopened.raisedAt)]
    assert entries
    assert {i[wiring.TTL_ATTRIBUTE]["N"] for i in entries} == {gate[wiring.TTL_ATTRIBUTE]["N"]} == {expiry(reopened.raisedAt)}
    # When the run still waits on the day the daily sweep finds that expiry near, its open gate's entries lose it
    # before the gate, one write each; the stopped decision's are left to expire
    waited = datetime.fromtimestamp(int(expiry(reopened.raisedAt)) - 29 * DAY_S, UTC)
    swept_entries_before_their_gate(services, gate, entries, waited)
    kept = {i["sk"]["S"]: i for i in inbox_entries(admin.tenant, run_id)}
    assert all(wiring.TTL_ATTRIBUTE not in kept[i["sk"]["S"]] for i in entries)
    assert all(wiring.TTL_ATTRIBUTE in kept[i["sk"]["S"]] for i in orphans)
    assert [i["runId"] for i in services.inbox.inbox(admin, 25, {}, None)["interrupts"]] == [run_id]


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_the_daily_sweep_writes_no_inbox_entry_of_a_claimed_gate_which_carries_none(services, admin):
    """docs/adr/0154: a claim puts every inbox entry of its gate again, without an expiry, and its gate's item records
    that; so the daily sweep that keeps the gate on the day its expiry is near writes the gate alone, not each entry
    for nothing too."""
    workflow = register(services, admin, "conformance-approval")
    run_id = create(services, admin, workflow)
    services.claims.move(admin, run_id, "gate", "claim")
    [gate] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    entries = inbox_entries(admin.tenant, run_id)
    assert entries
    assert all(wiring.TTL_ATTRIBUTE not in i for i in entries)
    head = services.store.client.get_item(TableName=TABLE, Key=a.key(gate["pk"]["S"], RUN_SK))["Item"]
    waited = datetime.fromtimestamp(int(gate[wiring.TTL_ATTRIBUTE]["N"]) - 29 * DAY_S, UTC)
    with sent(services.store.client, "UpdateItem") as updates:
        sweeps.daily_sweep(waited).apply(services.store, [head])
    written = [u["Key"]["sk"]["S"] for u in updates]
    assert gate["sk"]["S"] in written
    assert not [u for u in updates if "#INBOX#" in u["Key"]["pk"]["S"]]
    assert [i["runId"] for i in services.inbox.inbox(admin, 25, {"assignee": "me"}, None)["interrupts"]] == [run_id]


def a_delegable_gate(services, admin) -> tuple[str, dict, dict]:
    """A new run waiting on an approval by alice and bob in a tenant that allows delegation: its id, its gate's item
    and its head (as stored)."""
    services.tenants.put_settings(admin.tenant, TenantSettings(allowDelegation=True), "admin")
    services.limiter.forget(admin.tenant)
    gate = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approversList": ["alice", "bob"]}}
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": [gate], "edges": []}))
    run_id = create(services, admin, "ship")
    [item] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    head = services.store.client.get_item(TableName=TABLE, Key=a.key(item["pk"]["S"], RUN_SK))["Item"]
    return run_id, item, head


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_delegation_after_the_sweep_kept_its_gate_gives_the_gate_its_delegates_entries_expiry(
    services, admin, clock_file
):
    """docs/adr/0154: a new delegate's inbox entries are put before the delegation's transaction with the gates'
    expiry of now; a gate the daily sweep kept already has none, so no later sweep would find it to keep them. The
    delegation gives the gate's item that expiry when it has none, and the sweep keeps both on the day it is near."""
    run_id, item, head = a_delegable_gate(services, admin)
    # The run still waits on the day its gate's expiry is near: the sweep takes it off the gate and its entries
    kept_on = int(item[wiring.TTL_ATTRIBUTE]["N"]) - 29 * DAY_S
    sweeps.daily_sweep(datetime.fromtimestamp(kept_on, UTC)).apply(services.store, [head])
    assert wiring.TTL_ATTRIBUTE not in next(i for i in gate_items(admin.tenant) if i["sk"] == item["sk"])
    # When an approver hands her vote to another that day
    clock.advance(clock_file, kept_on - time.time() + 60)
    alice = signed_in(services, "alice", admin.tenant)
    services.delegation.delegate_vote(alice, run_id, "gate", DelegateVoteRequest(delegate="dave"))
    # Then the delegate's entries carry the gates' expiry of now (the run's search entries'), and so does the gate
    state, _ = services.store.get_run(run_id)
    delegates = [i for i in inbox_entries(admin.tenant, run_id) if "#INBOX#P#dave#" in i["pk"]["S"]]
    assert delegates
    assert {i[wiring.TTL_ATTRIBUTE]["N"] for i in delegates} == {str(state.searchExpiry)}
    [item] = [i for i in gate_items(admin.tenant) if i["sk"] == item["sk"]]
    assert item[wiring.TTL_ATTRIBUTE]["N"] == str(state.searchExpiry)
    # And the sweep on the day that is near takes it off the delegate's entries, then off the gate
    swept_entries_before_their_gate(
        services, item, inbox_entries(admin.tenant, run_id), datetime.fromtimestamp(state.searchExpiry - 29 * DAY_S, UTC)
    )
    assert all(wiring.TTL_ATTRIBUTE not in i for i in inbox_entries(admin.tenant, run_id))


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_the_retention_turn_of_a_run_that_runs_again_leaves_its_open_gates_expiry_with_their_entries(services, admin):
    """docs/adr/0154: the turn of a run that runs again (a failed run's action retried) gives its items the provisional
    expiry back, none when near (a week's retention); a gate it holds open keeps the one its opening gave it and its
    inbox entries, which the daily sweep takes off both once near."""
    services.tenants.put_settings(admin.tenant, TenantSettings(retentionDays=7), "admin")
    services.limiter.forget(admin.tenant)
    run_id = create(services, admin, register(services, admin, "conformance-approval"))
    [gate] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    assert services.retention.turn(run_id, None, lambda: True) is None
    [kept] = [i for i in gate_items(admin.tenant) if run_id_of(i["pk"]["S"]) == run_id]
    assert kept[wiring.TTL_ATTRIBUTE] == gate[wiring.TTL_ATTRIBUTE]
    assert {i[wiring.TTL_ATTRIBUTE]["N"] for i in inbox_entries(admin.tenant, run_id)} == {gate[wiring.TTL_ATTRIBUTE]["N"]}


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_gate_opened_while_a_retention_turn_pages_through_its_run_keeps_its_expiry_with_its_entries(
    services, admin, monkeypatch
):
    """A retention turn reads the run's head, then its items: a gate a transition opens in between is on the page and
    among none of the open gates the turn read. With its expiry taken off (a week's retention: the run's items'
    provisional one is near), its inbox entries would keep theirs while no sweep finds the gate (docs/adr/0154): it is
    left as its opening wrote it, and the turn taken again after the move knows it open."""
    services.tenants.put_settings(admin.tenant, TenantSettings(retentionDays=7), "admin")
    services.limiter.forget(admin.tenant)
    gates = [{"id": g, "typeId": "core.approvalGate", "config": {"title": g}} for g in ("first", "second")]
    edges = [{"sourceNodeId": "first", "targetNodeId": "second"}]
    services.workflows.put_workflow(admin, "twice", WorkflowDefinition.model_validate({"nodes": gates, "edges": edges}))
    run_id = create(services, admin, "twice")
    store = services.retention.store
    read_page, read_head = store.items_page, store.retained_run

    # Given a run of more items before its head than a page holds: its first page holds no head, read after it
    def first_page_without_head(run: str, after: str | None) -> RunPage:
        monkeypatch.setattr(store, "items_page", read_page)
        return replace(read_page(run, after), head=None)

    # And its first gate decided (the second opened) just after the turn read the head
    def head_then_decided(run: str) -> Any:
        monkeypatch.setattr(store, "retained_run", read_head)
        head = read_head(run)
        services.decisions.resolve_interrupt(admin, run_id, "first", {"action": "accept"})
        return head

    monkeypatch.setattr(store, "items_page", first_page_without_head)
    monkeypatch.setattr(store, "retained_run", head_then_decided)
    with pytest.raises(RunMoved):
        services.retention.turn(run_id, None, lambda: True)
    assert services.retention.turn(run_id, None, lambda: True) is None
    # Then the second gate expires with its inbox entries (the first gate's went when it closed), as its opening wrote
    state, _ = services.store.get_run(run_id)
    [gate] = [i for i in gate_items(admin.tenant) if i["sk"]["S"] == INTERRUPT_SK_PREFIX + state.interrupts["second"].key]
    entries = inbox_entries(admin.tenant, run_id)
    assert entries
    assert {i[wiring.TTL_ATTRIBUTE]["N"] for i in entries} == {gate[wiring.TTL_ATTRIBUTE]["N"]} == {str(state.searchExpiry)}


# A world of its own: it reads every item of its tenant, wherever it is (a scan of the whole table).
@pytest.mark.private_world
def test_a_delegation_while_the_daily_sweep_keeps_its_gate_leaves_no_entry_expiring_under_a_gate_without_one(
    services, admin, clock_file, monkeypatch
):
    """docs/adr/0154: the daily sweep reads an open run's gates, then takes the expiry off each one's inbox entries and
    then off the gate. A delegation between its read and its writes puts the delegate's entries with the gates' expiry
    of now (the gate has one still, so it keeps it): were the gate's taken off, those entries would expire while it
    waits and no later sweep would find the gate."""
    run_id, item, head = a_delegable_gate(services, admin)
    kept_on = int(item[wiring.TTL_ATTRIBUTE]["N"]) - 29 * DAY_S
    clock.advance(clock_file, kept_on - time.time())
    write_ttl = RetentionStore._set_ttl

    # Given an approver who hands her vote to another once the sweep read the run's gate
    def delegated_first(store: RetentionStore, key: a.Item, ttl: int | None, where: str = layout.FIRST) -> None:
        monkeypatch.setattr(RetentionStore, "_set_ttl", write_ttl)
        alice = signed_in(services, "alice", admin.tenant)
        services.delegation.delegate_vote(alice, run_id, "gate", DelegateVoteRequest(delegate="dave"))
        write_ttl(store, key, ttl, where)

    monkeypatch.setattr(RetentionStore, "_set_ttl", delegated_first)
    # When the sweep passes on the day its gate's expiry is near
    sweeps.daily_sweep(datetime.fromtimestamp(kept_on, UTC)).apply(services.store, [head])
    # Then the gate keeps an expiry (for the next day's sweep) as long as one of its entries does
    [item] = [i for i in gate_items(admin.tenant) if i["sk"] == item["sk"]]
    assert [i for i in inbox_entries(admin.tenant, run_id) if "#INBOX#P#dave#" in i["pk"]["S"]]
    if wiring.TTL_ATTRIBUTE not in item:
        assert all(wiring.TTL_ATTRIBUTE not in i for i in inbox_entries(admin.tenant, run_id))
    # And the next day's sweep takes it off all of them
    clock.advance(clock_file, DAY_S)
    sweeps.daily_sweep(datetime.fromtimestamp(kept_on + DAY_S, UTC)).apply(services.store, [head])
    assert all(wiring.TTL_ATTRIBUTE not in i for i in [*inbox_entries(admin.tenant, run_id), *gate_items(admin.tenant)])
