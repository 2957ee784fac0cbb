"""Migration 0011 (docs/adr/0170): the inbox entries of gates opened before 0.6.0, in the first table, moved to the
second with their gates' marks, after which a page reads the second table alone. Pages list exactly the same gates
before, during and after the move; a claim or a close racing it leaves the gate's entries in one table, never both
nor none; a rerun moves nothing.

Gates "opened before 0.6.0" are opened here as 0.5.0 opened them (store/layout.py's INBOX_ENTRIES writing the first
table: no mark); tests/integration/test_upgrade.py moves the previous release's. Real moto tables, the real services."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import boto3
import pytest

from interlude import migrations, wiring
from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules.auth import run_resolver
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store import migrations as migration_store
from interlude.store.checkpoints import MIGRATION_PK, finished
from interlude.store.facade import Store
from interlude.store.inbox import CLOSED_ENTRIES, ENTRIES_TABLE
from interlude.store.layout import ENTRIES_MOVED, FIRST, SECOND, interrupt_sk, run_pk
from interlude.store.migrations import MigrationStore
from tests.integration.conftest import signed_in
from tests.support.stream import Stream

# Each test scans and moves the whole table: a world of its own.
pytestmark = pytest.mark.private_world

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approverGroupRefs": ["ops"]}}
TIMED = {**GATE, "config": {**GATE["config"], "timeoutMs": 3_600_000}}
# What 0.5.0 wrote: every new inbox entry in the first table, its gate unmarked (docs/adr/0161).
OPENED_BEFORE = layout.Placement(written=FIRST, either=(FIRST, SECOND))
MOVE = importlib.import_module("interlude.migrations.0011_inbox_entries_moved")


@pytest.fixture
def services(world) -> Services:
    return Services(Store(world.table, world.entries_table))


@pytest.fixture
def people(services) -> dict[str, Any]:
    services.workflows.put_workflow(admin := signed_in(services), "ship", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    services.workflows.put_workflow(admin, "timed", WorkflowDefinition.model_validate({"nodes": [TIMED], "edges": []}))
    olga = signed_in(services, "olga", groups=["ops"], scopes=["approvals:respond", "runs:read"])
    return {"admin": admin, "olga": olga}


def open_gate(services: Services, people: dict[str, Any], workflow: str = "ship") -> str:
    """A run waiting at its gate, opened as 0.5.0 opened it."""
    with pytest.MonkeyPatch.context() as env:
        env.setattr(layout, "INBOX_ENTRIES", OPENED_BEFORE)
        return services.lifecycle.create_run(people["admin"], CreateRunRequest.model_validate({"workflowId": workflow})).runId


def waiting(services: Services, people: dict[str, Any]) -> dict[str, str]:
    """Gates opened before 0.6.0: one nobody works, one olga claimed, one with a deadline (its DUE entry)."""
    runs = {"open": open_gate(services, people), "claimed": open_gate(services, people), "timed": open_gate(services, people, "timed")}
    services.claims.move(people["olga"], runs["claimed"], "gate", "claim")
    return runs


def pages(services: Services, olga: Any) -> dict[str, list[str]]:
    """What olga's inbox lists in each order and filter, and walked two gates a page."""

    def listed(**filters: str) -> list[str]:
        return [i["runId"] for i in services.inbox.inbox(olga, 100, filters, None)["interrupts"]]

    walked: list[str] = []
    cursor = None
    while True:
        got = services.inbox.inbox(olga, 2, {}, cursor)
        walked += [i["runId"] for i in got["interrupts"]]
        if (cursor := got["nextCursor"]) is None:
            break
    return {"newest": listed(), "due": listed(sort="due"), "mine": listed(claim="mine"), "unclaimed": listed(claim="unclaimed"), "walked": walked}


def entries(world: Any, table: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """The inbox entries of a table (the first unless told), plain, by run."""
    scanned = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=table or world.table)
    found: dict[str, list[dict[str, Any]]] = {}
    for page in scanned:
        for item in page["Items"]:
            if f"#{wiring.INBOX.prefix}#" in item["pk"]["S"] and "runId" in item:
                found.setdefault(item["runId"]["S"], []).append(a.plain(item))
    return found


def marks(services: Services, run_id: str) -> tuple[str | None, str | None]:
    """The gate's marks: its head's open interrupt's and its item's (None: none, the first table)."""
    gate = services.runs.load_run(run_id.split("/", 1)[0], run_id)[0].interrupts["gate"]
    item = services.store.client.get_item(TableName=services.store.table, Key=a.key(run_pk(run_id), interrupt_sk(gate.key)))["Item"]
    return gate.entriesTable, item.get(ENTRIES_TABLE, {}).get("S")


def moved(services: Services) -> int:
    """Run every migration pending, as a deploy does; what 0011 wrote."""
    progress: list[migrations.Progress] = []
    assert migrations.run_pending(services.store, "deploy", report=progress.append).complete
    return sum(p.written for p in progress if p.migration.id == ENTRIES_MOVED)


def test_the_open_gates_entries_move_to_the_second_table_and_pages_list_the_same_gates(services, people, world):
    runs = waiting(services, people)
    before = pages(services, people["olga"])
    assert before["newest"] == [runs["timed"], runs["claimed"], runs["open"]] == before["walked"]
    assert (before["due"][0], before["mine"], before["unclaimed"]) == (runs["timed"], [runs["claimed"]], [runs["timed"], runs["open"]])
    first = entries(world)
    assert set(first) == set(runs.values())
    assert not entries(world, world.entries_table)
    # A closed gate's entries its close left (dispatch has not deleted them yet), and a run gone but its entries
    closed = open_gate(services, people)
    services.decisions.resolve(*services.runs.load_run(world.tenant, closed), "gate", {"action": "accept"}, run_resolver(people["olga"]))
    gone = open_gate(services, people)
    services.store.client.delete_item(TableName=world.table, Key=a.key(run_pk(gone), "RUN"))
    assert {closed, gone} <= set(entries(world))
    # and a page of this release, started before the move, reads both tables
    assert services.inbox_index.read_tables() == (FIRST, SECOND)

    written = moved(services)

    # Every open gate's entries are in the second table, as they were (olga's claim on hers), none left in the first
    second = entries(world, world.entries_table)
    assert entries(world) == {}
    assert set(second) == set(runs.values())
    for run_id in runs.values():
        assert sorted(second[run_id], key=str) == sorted(first[run_id], key=str)
        assert marks(services, run_id) == (SECOND, SECOND)
    assert {e.get("assignee") for e in second[runs["claimed"]]} == {"olga"}
    assert any("due" in e for e in second[runs["timed"]])
    assert written == sum(len(e) for e in first.values())
    # And once the migration is done, a page reads the second table alone: a process that asked before reads both
    # until it asks again, one started since the second alone; each lists exactly the same gates
    assert finished(services.store.client, world.table, ENTRIES_MOVED)
    assert services.inbox_index.read_tables() == (FIRST, SECOND)
    assert pages(services, people["olga"]) == before
    fresh = Services(Store(world.table, world.entries_table))
    assert fresh.inbox_index.read_tables() == (SECOND,)
    assert pages(fresh, people["olga"]) == before


def test_a_page_while_a_gate_is_in_both_tables_lists_it_once(services, people, world, monkeypatch):
    runs = waiting(services, people)
    before = pages(services, people["olga"])
    during: list[dict[str, list[str]]] = []
    move_entries = MigrationStore.move_entries

    def and_a_page(self: MigrationStore, *args: Any) -> bool:
        done = move_entries(self, *args)
        # Between the transaction and the delete: the gate's entries in both tables, its marks on the second
        in_both = set(entries(world)) & set(entries(world, world.entries_table))
        during.append({"inBoth": sorted(in_both), **pages(Services(Store(world.table, world.entries_table)), people["olga"])})
        return done

    monkeypatch.setattr(MigrationStore, "move_entries", and_a_page)
    moved(services)
    assert len(during) == len(runs)
    for seen in during:
        assert len(seen.pop("inBoth")) == 1
        assert seen == before


def racing(monkeypatch: pytest.MonkeyPatch, race: Callable[[], None]) -> None:
    """`race` runs once, after the migration read a gate's head and before its move (its transaction)."""
    entries_at = MigrationStore.entries_at
    ran: list[bool] = []

    def after_the_head(self: MigrationStore, keys: list[a.Item]) -> list[a.Item]:
        if not ran:
            ran.append(True)
            race()
        return entries_at(self, keys)

    monkeypatch.setattr(MigrationStore, "entries_at", after_the_head)


def test_a_gate_closed_while_its_move_is_in_flight_keeps_no_entry_in_either_table(services, people, world, monkeypatch):
    run_id = open_gate(services, people)
    resolved = lambda: services.decisions.resolve(  # noqa: E731
        *services.runs.load_run(world.tenant, run_id), "gate", {"action": "accept"}, run_resolver(people["olga"])
    )
    racing(monkeypatch, resolved)
    stream = Stream(world.table)
    stream.take()

    assert moved(services) == 0

    # The close won: its transaction moved the head, the move's condition failed, and the gate read again was closed:
    # nothing put in the second table, the entries the migration found deleted, and the close named them where they
    # were (the first table) for dispatch, which finds nothing more to delete
    assert services.runs.load_run(world.tenant, run_id)[0].status == "completed"
    assert entries(world, world.entries_table) == {} == entries(world)
    batches = [r["dynamodb"]["NewImage"] for r in stream.pump() if CLOSED_ENTRIES in r["dynamodb"].get("NewImage", {})]
    named = [where for b in batches for _, _, *where in a.unpacked(b[CLOSED_ENTRIES])]
    assert named
    assert not any(named)
    assert entries(world, world.entries_table) == {} == entries(world)


def test_a_gate_claimed_while_its_move_is_in_flight_is_moved_with_its_claim(services, people, world, monkeypatch):
    run_id = open_gate(services, people)
    racing(monkeypatch, lambda: services.claims.move(people["olga"], run_id, "gate", "claim"))

    written = moved(services)

    # The claim won, in the first table; the move, tried again from the head it wrote, took its entries as it left them
    assert entries(world) == {}
    second = entries(world, world.entries_table)[run_id]
    assert written == len(second) == 2  # the ops group's, the workflow's
    assert {e.get("assignee") for e in second} == {"olga"}
    assert marks(services, run_id) == (SECOND, SECOND)
    fresh = Services(Store(world.table, world.entries_table))
    assert pages(fresh, people["olga"])["mine"] == [run_id]


def test_entries_past_what_the_transaction_holds_are_put_before_it_and_taken_back_when_it_is_refused(
    services, people, world, monkeypatch
):
    # A transaction of three items: the head's update, the item's, one entry; a gate's second entry is put before it
    monkeypatch.setattr(migration_store, "TRANSACT_MAX_ITEMS", 3)
    closing, kept = open_gate(services, people), open_gate(services, people)
    racing(monkeypatch, lambda: services.decisions.resolve(
        *services.runs.load_run(world.tenant, closing), "gate", {"action": "accept"}, run_resolver(people["olga"])
    ))

    moved(services)

    # The closed gate's entry put before its refused move is taken back; the other gate is moved whole
    second = entries(world, world.entries_table)
    assert set(second) == {kept}
    assert len(second[kept]) == 2
    assert entries(world) == {}


def test_a_move_run_again_moves_nothing(services, people, world):
    runs = waiting(services, people)
    before = pages(services, people["olga"])
    assert moved(services) > 0
    second = entries(world, world.entries_table)
    # The checkpoint forgotten: the migration scans again and finds no entry left in the first table
    services.store.client.delete_item(TableName=world.table, Key=a.key(MIGRATION_PK, ENTRIES_MOVED))
    assert moved(services) == 0
    assert entries(world) == {}
    assert entries(world, world.entries_table) == second
    assert pages(Services(Store(world.table, world.entries_table)), people["olga"]) == before
    assert set(second) == set(runs.values())


def test_a_deployment_made_on_this_release_has_nothing_to_move_and_reads_the_second_table_alone(services, people, world):
    assert moved(services) == 0
    assert finished(services.store.client, world.table, ENTRIES_MOVED)
    run_id = services.lifecycle.create_run(people["admin"], CreateRunRequest.model_validate({"workflowId": "ship"})).runId
    assert services.inbox_index.read_tables() == (SECOND,)
    assert pages(services, people["olga"])["newest"] == [run_id]


def test_the_migration_that_moves_the_entries_is_the_one_the_layout_names():
    assert layout.INBOX_ENTRIES.moved_by == ENTRIES_MOVED == MOVE.__name__.rsplit(".", 1)[1].split("_", 1)[0]
    assert layout.INBOX_ENTRIES.read() == (FIRST, SECOND)
    assert layout.INBOX_ENTRIES.read(moved=True) == (SECOND,)
    # Delivery records are read in both tables: no migration moves them (they expire where they are)
    assert layout.DELIVERY_RECORDS.read(moved=True) == (FIRST, SECOND)
