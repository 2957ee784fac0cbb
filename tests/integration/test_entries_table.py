"""The second table (docs/adr/0161) as the reader release (0.5.0) reads it: what the writer release (0.6.0) writes
there (store/layout.py's INBOX_ENTRIES and DELIVERY_RECORDS, set here as each release has them) is listed, worked,
closed, retained and replayed by the reader, which writes every new item to the first table; and an inbox page over
both tables keeps its order and its cursor.

Real moto tables and stream, the real dispatch and callbacks workers, a receiver on 127.0.0.1."""

from __future__ import annotations

import boto3
import pytest

from interlude import wiring
from interlude.api.inbox import inbox_query
from interlude.app import replay as replay_module
from interlude.composition import Services
from interlude.domain.errors import Conflict
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local.lambda_runtime import CURRENT_FUNCTION
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store.facade import Store
from interlude.store.inbox import ENTRIES_TABLE, closed_entry_keys
from interlude.store.layout import FIRST, SECOND, interrupt_sk, run_pk
from interlude.store.transactions import Labelled, TransactionalTable
from tests.integration.conftest import state_of
from tests.support.queues import drain
from tests.support.receiver import delivering_to_loopback
from tests.support.stream import Stream

MAX_ATTEMPTS = 2
# Where each release writes both families' new items, and reads them.
READER = layout.Placement(written=FIRST, either=(FIRST, SECOND))
WRITER = layout.Placement(written=SECOND, either=(FIRST, SECOND))
GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "t"}}


@pytest.fixture
def services(world, monkeypatch) -> Services:
    for name, value in {"PUBLIC_BASE_URL": "https://interlude.example.com", **delivering_to_loopback(MAX_ATTEMPTS)}.items():
        monkeypatch.setenv(name, value)
    return Services(Store(world.table, world.entries_table))


@pytest.fixture
def releases(monkeypatch):
    """`releases(writer=True)`: what follows runs as the writer release; False: as the reader release."""

    def release(writer: bool) -> None:
        monkeypatch.setattr(layout, "INBOX_ENTRIES", WRITER if writer else READER)
        monkeypatch.setattr(layout, "DELIVERY_RECORDS", WRITER if writer else READER)

    return release


def gate_run(services, admin, callback_url: str | None = None) -> str:
    services.workflows.put_workflow(admin, "one", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    request = {"workflowId": "one", **({"callbackUrl": callback_url} if callback_url else {})}
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate(request)).runId


def items_of(services, where: str, tenant: str, marker: str) -> list[dict]:
    """The tenant's items in table `where` whose partition key holds `marker` (a scan: every partition)."""
    # Every page: the shared world's first table holds other tests' items, past a scan page's 1 MB.
    pages = boto3.client("dynamodb").get_paginator("scan").paginate(
        TableName=services.store.table_named(where),
        FilterExpression="begins_with(pk, :own) AND contains(pk, :marker)",
        ExpressionAttributeValues={":own": a.s(f"T#{tenant}#"), ":marker": a.s(marker)},
        ConsistentRead=True,
    )
    return [a.plain(item) for page in pages for item in page["Items"]]


def entries_in(services, where: str, tenant: str) -> list[dict]:
    return items_of(services, where, tenant, f"#{wiring.INBOX.prefix}#")


def records_in(services, where: str, tenant: str) -> list[dict]:
    """The tenant's delivery records in table `where` (a run partition's `N#` items)."""
    return [i for i in items_of(services, where, tenant, "#R#") if i["sk"].startswith("N#")]


def listed(services, admin, limit: int = 25, cursor: str | None = None, sort: str | None = None) -> tuple[list[str], str | None]:
    query = {"limit": str(limit), **({"cursor": cursor} if cursor else {}), **({"sort": sort} if sort else {})}
    page = services.inbox.inbox(admin, *inbox_query(query))
    return [i["runId"] for i in page["interrupts"]], page["nextCursor"]


def test_a_gate_whose_entries_the_writer_put_in_the_second_table_is_listed_worked_and_closed_there(
    services, admin, tenant, releases
):
    stream = Stream(services.store.table)
    # Given a gate opened by the writer release: its entries in the second table, its head and its item saying so
    releases(writer=True)
    run_id = gate_run(services, admin)
    stream.settle()
    assert entries_in(services, FIRST, tenant) == []
    opened = entries_in(services, SECOND, tenant)
    assert len(opened) == 2  # ANY and its workflow's
    (interrupt,) = state_of(services, run_id).interrupts.values()
    assert interrupt.entriesTable == SECOND
    item = services.store.client.get_item(TableName=services.store.table, Key=a.key(run_pk(run_id), interrupt_sk(interrupt.key)))
    assert item["Item"][ENTRIES_TABLE] == a.s(SECOND)

    # When the reader release runs it (a rollback): its inbox lists the gate
    releases(writer=False)
    assert listed(services, admin)[0] == [run_id]
    # and a claim puts the gate's entries again where they are, each naming who works it
    services.claims.move(admin, run_id, "gate", "claim")
    assert entries_in(services, FIRST, tenant) == []
    claimed = entries_in(services, SECOND, tenant)
    assert sorted(e["sk"] for e in claimed) == sorted(e["sk"] for e in opened)
    assert {e.get("assignee") for e in claimed} == {admin.subject["subjectId"]}
    assert listed(services, admin)[0] == [run_id]

    # and the resolve names the entries with their table for dispatch, which deletes them there
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    batches = services.store.client.query(
        TableName=services.store.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":e": a.s(wiring.EVENT_ITEM_PREFIX)},
    )["Items"]
    named = [where for batch in batches for where, _ in closed_entry_keys(batch)]
    assert named == [SECOND] * len(opened)
    assert listed(services, admin)[0] == []  # never a closed gate, before dispatch too
    stream.pump()
    assert entries_in(services, SECOND, tenant) == entries_in(services, FIRST, tenant) == []
    assert state_of(services, run_id).status == "completed"


def test_an_entry_put_in_the_second_table_stays_there_when_its_transaction_is_sent_again(services, tenant):
    # An audited transaction is sent again with the same items when another append moved its chain's head first
    # (store/transactions.py): an inbox entry marked for the second table is written there on every sending.
    store = TransactionalTable(services.store.table, services.store.entries_table)
    entry = a.key(f"T#{tenant}#INBOX#ANY#0", "2026-12-07T00:00:00Z#i")
    items: list[Labelled] = [("INBOX", {"Put": {"Item": entry, "TableName": SECOND}})]
    # (sent as the api sends a claim's transaction, the one that puts an entry there: the IAM check judges it on its role)
    running = CURRENT_FUNCTION.set("api")
    try:
        for _ in range(2):
            store._transact_once(items, None, None)
    finally:
        CURRENT_FUNCTION.reset(running)
    assert entries_in(services, FIRST, tenant) == []
    assert entries_in(services, SECOND, tenant) == [a.plain(entry)]


def test_a_page_over_both_tables_keeps_its_order_and_its_cursor(services, admin, tenant, releases):
    # Given gates opened by the reader release, then by the writer, then by the reader again (a rollback), and so on
    opened = []
    for writer in (False, True, False, True):
        releases(writer=writer)
        opened.append(gate_run(services, admin))
    releases(writer=False)
    assert len(entries_in(services, FIRST, tenant)) == len(entries_in(services, SECOND, tenant)) == 4

    # When the inbox is walked a page of one at a time, newest first, then oldest first
    for sort, order in ((None, opened[::-1]), ("oldest", opened)):
        seen, cursor = [], None
        while True:
            page, cursor = listed(services, admin, 1, cursor, sort)
            seen += page
            if cursor is None:
                break
        # Then every gate is listed once, in order, whichever table holds its entries
        assert seen == order, sort


def test_a_delivery_record_the_writer_wrote_in_the_second_table_is_listed_replayed_and_retained(
    services, admin, tenant, receiver, world, releases, monkeypatch
):
    monkeypatch.setattr(replay_module, "MAX_REPLAYS", 1)
    # Given a run whose `interrupt.requested` notice the writer release delivered, the endpoint down for every attempt
    releases(writer=True)
    receiver.script[:] = [500] * MAX_ATTEMPTS
    run_id = gate_run(services, admin, receiver.url())
    Stream(world.table).pump()
    drain(world.queues)
    assert len(receiver.hits) == MAX_ATTEMPTS
    assert not records_in(services, FIRST, tenant)
    (record,) = records_in(services, SECOND, tenant)
    assert record["status"] == "dead"

    # When the reader release lists the run's deliveries, and replays the dead notice
    releases(writer=False)
    attempts = services.deliveries.run_deliveries(admin, run_id)["deliveries"]
    assert [d["attempt"] for d in attempts] == list(range(1, MAX_ATTEMPTS + 1))
    notice_id = attempts[0]["noticeId"]
    receiver.script[:] = [200]
    assert services.replay.retry_run_delivery(admin, run_id, notice_id)["attempt"] == MAX_ATTEMPTS + 1
    drain(world.queues)

    # Then the replay's attempt is POSTed once, recorded on the same record in the second table
    assert len(receiver.hits) == MAX_ATTEMPTS + 1
    (record,) = records_in(services, SECOND, tenant)
    assert (record["status"], record["attempts"]) == ("delivered", MAX_ATTEMPTS + 1)
    assert not records_in(services, FIRST, tenant)
    # and a second replay is refused: the notice is delivered
    with pytest.raises(Conflict):
        services.replay.retry_run_delivery(admin, run_id, notice_id)

    # and once the run ends, its retention gives the record in the second table the run's expiry (one that has none:
    # a record with its provisional one keeps it, as in the first table)
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    Stream(world.table).pump()
    drain(world.queues)
    services.store.client.update_item(
        TableName=services.store.entries_table, Key=a.key(record["pk"], record["sk"]), UpdateExpression="REMOVE #t",
        ExpressionAttributeNames={"#t": wiring.TTL_ATTRIBUTE},
    )
    services.retention.turn(run_id, None, lambda: True)
    head = services.store.client.get_item(TableName=services.store.table, Key=a.key(run_pk(run_id), "RUN"))["Item"]
    kept = records_in(services, SECOND, tenant)
    assert [i.get("ttl") for i in kept] == [int(head["ttl"]["N"])]


def test_a_runs_dead_notices_in_the_second_table_are_recovered_once(services, admin, tenant, receiver, world, releases):
    # Given a run whose notice the writer release dead-lettered in the second table
    releases(writer=True)
    receiver.script[:] = [500] * MAX_ATTEMPTS
    run_id = gate_run(services, admin, receiver.url())
    Stream(world.table).pump()
    drain(world.queues)
    # When the reader release recovers the run's dead callback notices
    releases(writer=False)
    receiver.script[:] = [200]
    recovered = services.replay.recover_run(admin, run_id, "callback-deliveries")
    drain(world.queues)
    # Then the one dead notice was counted, queued and POSTed once more, its record delivered where it is
    assert (recovered["matched"], recovered["queued"], recovered["status"]) == (1, 1, "completed")
    assert len(receiver.hits) == MAX_ATTEMPTS + 1
    (record,) = records_in(services, SECOND, tenant)
    assert record["status"] == "delivered"
