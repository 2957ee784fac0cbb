"""Issue 30 item 2 in process (moto, the real services and store): the migrations give runs, gates, workflows and keys
written before their listings existed a place in them, exactly the one they would have had; a migration is
idempotent, resumable from its checkpoint after any page, and held by one runner at a time.

Items "written before the listings existed" are made by writing them now and removing what the listings added since
(their index entries, pointer and catalogue entry, the keys' listing attributes, the ModuleX entries' filter fields):
the items themselves were written the same way then (tests/upgrade/ reads what the previous release really wrote)."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from interlude import migrations, wiring
from interlude.composition import Services
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import QueuePump
from interlude.rules.run_search import RunFilters
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store.directory import DirectoryStore
from interlude.store.facade import Store
from interlude.store.layout import catalogue_pk, run_pk, workflow_pk
from interlude.store.migrations import LEASE_S, LeaseLost, MigrationStore
from interlude.store.sharded import entry_pk
from interlude.store.tenants import TenantRecords
from tests.integration.conftest import new_api_key, signed_in
from tests.support.local_stack import until
from tests.support.modulex_example import worked_example
from tests.support.moto_world import create_world, private_account
from tests.support.queues import queued
from tests.support.receiver import Receiver

GATED = {
    "name": "Ship parcels",
    "description": "asks ops",
    "version": "1.2",
    "nodes": [
        {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approverGroupRefs": ["ops"]}},
        {"id": "after", "typeId": "core.noop"},
    ],
    "edges": [{"sourceNodeId": "gate", "targetNodeId": "after"}],
}
# The same gate with a deadline: one run of it is claimed (issue 29 item 3: its entries carry both since ADR 0114).
TIMED = {**GATED, "nodes": [{**GATED["nodes"][0], "config": {**GATED["nodes"][0]["config"], "timeoutMs": 3_600_000}}, GATED["nodes"][1]]}
RUNS = 5  # the last one of the timed workflow
# Directory entries, two of them naming their Slack user (a click finds its principal through that user's item).
SLACK_PEOPLE = {"ana": {"slackUserId": "U0ANA", "email": "ana@example.com"}, "bob": {"email": "bob@example.com"}, "carl": {"slackUserId": "U0CARL"}}
# Each test scans and rewrites the whole table: a world of its own.
pytestmark = pytest.mark.private_world


START = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


@pytest.fixture
def moments() -> list[datetime]:
    """The service's clock: its last moment is now (a test appends a later one to move time on)."""
    return [START]


@pytest.fixture
def services(world, moments) -> Services:
    return Services(Store(world.table, world.entries_table), clock=lambda: moments[-1])


@functools.cache
def table() -> Any:
    """One client for the module: making one costs tens of milliseconds, and moto serves each call from the account
    current at the call (each test's own)."""
    return boto3.client("dynamodb")


def items(world: Any) -> list[dict[str, Any]]:
    pages = table().get_paginator("scan").paginate(TableName=world.table)
    return [item for page in pages for item in page["Items"]]


def batch_write(world: Any, requests: list[dict[str, Any]]) -> None:
    for start in range(0, len(requests), 25):  # BatchWriteItem's most
        answered = table().batch_write_item(RequestItems={world.table: requests[start : start + 25]})
        assert not answered.get("UnprocessedItems")


def delete(world: Any, keep: Any) -> int:
    gone = [{"DeleteRequest": {"Key": a.key(i["pk"]["S"], i["sk"]["S"])}} for i in items(world) if not keep(i)]
    batch_write(world, gone)
    return len(gone)


def listings(services: Services, tenant: str) -> dict[str, Any]:
    """What each listing shows the tenant: its runs, the gates in an ops member's inbox, its workflows, its keys."""
    member = signed_in(services, "olga", tenant=tenant, groups=["ops"], scopes=["approvals:respond", "runs:read"])
    return {
        "runs": sorted(s.runId for s in services.run_listing.list_runs(tenant, 100).runs),
        "found": sorted(s.runId for s in services.run_listing.list_runs(tenant, 100, filters=RunFilters(query=("ship",))).runs),
        # By a word of the workflow's name alone (a head from before run search does not hold the name).
        "named": sorted(s.runId for s in services.run_listing.list_runs(tenant, 100, filters=RunFilters(query=("parcels",))).runs),
        "inbox": sorted(i["runId"] for i in services.inbox.inbox(member, 100, {}, None)["interrupts"]),
        # In their order: the timed gate (the oldest) first, then the others newest first.
        "due": [i["runId"] for i in services.inbox.inbox(member, 100, {"sort": "due"}, None)["interrupts"]],
        "newest": [i["runId"] for i in services.inbox.inbox(member, 100, {}, None)["interrupts"]],
        "mine": [i["runId"] for i in services.inbox.inbox(member, 100, {"claim": "mine"}, None)["interrupts"]],
        "workflows": services.workflows.list_workflows(tenant, 1, 100)["workflows"],
        "keys": sorted(k["keyId"] for k in services.keys.list_keys(tenant, 100, None)["keys"]),
        "slack": {u: services.directory_records.by_slack_user(tenant, u) for u in ("U0ANA", "U0CARL")},
    }


@pytest.fixture(scope="module")
def made_history() -> dict[str, Any]:
    """The history, made once for the module in an account of its own (making it cost each test seconds of setup):
    what the listings showed, and every item of its table once taken back (`items`)."""
    with private_account(), pytest.MonkeyPatch.context() as env:
        world = create_world()
        for name, value in world.env.items():
            env.setenv(name, value)
        # Written as the releases before the second table wrote it: every item in the first (docs/adr/0161).
        before = layout.Placement(written=layout.FIRST, either=(layout.FIRST,))
        env.setattr(layout, "INBOX_ENTRIES", before)
        env.setattr(layout, "DELIVERY_RECORDS", before)
        moments = [START]
        made = make_history(Services(Store(world.table, world.entries_table), clock=lambda: moments[-1]), world, moments)
        made.update(tenant=world.tenant, items=items(world), moments=moments[1:])
    return made


@pytest.fixture
def history(made_history, world, moments) -> dict[str, Any]:
    """A tenant with runs waiting at a gate, an OpenWOP and a ModuleX workflow and keys, as the listings show them,
    then taken back to before the listings existed (`taken`: how many index items of each migration went): the
    module's history, written into the test's own world as it was, at the moment it was made."""
    batch_write(world, [{"PutRequest": {"Item": item}} for item in made_history["items"]])
    moments.extend(made_history["moments"])
    return made_history


def make_history(services: Services, world: Any, moments: list[datetime]) -> dict[str, Any]:
    tenant = world.tenant
    admin = signed_in(services, tenant=tenant)
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate(GATED))
    services.modulex_workflows.create(
        admin, {"workflow_schema": worked_example(), "name": "Refunds", "category": "finance", "visibility": "private"}
    )
    services.workflows.put_workflow(admin, "timed", WorkflowDefinition.model_validate(TIMED))
    # The oldest run waits at the timed gate: due first lists it first, newest first last.
    timed = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "timed"})).runId
    olga = signed_in(services, "olga", tenant=tenant, groups=["ops"], scopes=["approvals:respond", "runs:read"])
    services.claims.move(olga, timed, "gate", "claim")
    moments.append(moments[-1] + timedelta(minutes=1))
    for _ in range(RUNS - 1):
        services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"}))
    new_api_key(services, "second", tenant=tenant)
    for pid, entry in SLACK_PEOPLE.items():
        services.directory.put_principal(tenant, pid, PrincipalEntry.model_validate(entry), "admin")
    listed = listings(services, tenant)
    assert (len(listed["runs"]), len(listed["inbox"]), len(listed["workflows"])) == (RUNS, RUNS, 3)
    assert (listed["due"][0], listed["newest"][-1], listed["mine"]) == (timed, timed, [timed])
    # The open gates' inbox entries, all in the first table (the releases before the second), which 0011 moves
    entries = [i for i in items(world) if f"#{wiring.INBOX.prefix}#" in i["pk"]["S"]]
    return {**listed, "timed": timed, "taken": {**take_back(world, tenant, timed), "0011": len(entries)}}


def take_back(world: Any, tenant: str, timed: str) -> dict[str, int]:
    """Remove what the listings added since the items were first written that way; how many of each went."""
    runs, entries = f"T#{tenant}#{wiring.RUN_INDEX.prefix}#", f"T#{tenant}#{wiring.INBOX.prefix}#"
    searched = f"T#{tenant}#{wiring.RUN_SEARCH.prefix}#"
    workflows = (catalogue_pk(tenant), "LATEST")
    # 0.4.0 gave each approval an entry in KIND#approval too, which no release reads since (ADR 0160): the waiting
    # gates', as their opening wrote them (nobody working them)
    by_kind = [
        {**{k: v for k, v in i.items() if k != "assignee"}, "pk": a.s(entry_pk(tenant, wiring.INBOX, "KIND#approval", i["sk"]["S"].split("#", 1)[1]))}
        for i in items(world)
        if i["pk"]["S"].startswith(f"T#{tenant}#{wiring.INBOX.prefix}#WF#")
    ]
    taken = {
        "0001": delete(world, lambda i: not i["pk"]["S"].startswith(runs)),
        # The timed gate's entries as the previous release wrote them: none in the DUE family, no due, no assignee.
        "0002": delete(world, lambda i: not i["pk"]["S"].startswith(entries) or (timed_entry(i, timed) and "#DUE#" not in i["pk"]["S"])),
        "0003": delete(world, lambda i: i["pk"]["S"] not in workflows and i["sk"]["S"] not in workflows),
        "0004": 0,
    }
    for item in items(world):
        if "gsi1pk" in item and item["sk"]["S"] == "KEY":
            table().update_item(
                TableName=world.table, Key=a.key(item["pk"]["S"], "KEY"), UpdateExpression="REMOVE gsi1pk, gsi1sk"
            )
            taken["0004"] += 1
    # The tenant registry (issue 30 item 6) did not exist: every tenant holding a key gets its record.
    delete(world, lambda i: i["pk"]["S"] != "TENANTS")
    taken["0005"] = len({a.unpacked(i["record"])["tenant"] for i in items(world) if i["sk"]["S"] == "KEY"})
    # Run search (issue 29 item 1) did not exist: no run had its entries, nor its workflow's name.
    taken["0006"] = delete(world, lambda i: not i["pk"]["S"].startswith(searched))
    for item in items(world):
        if item["sk"]["S"] == "RUN" and item["pk"]["S"].startswith(f"T#{tenant}#"):
            state = json.loads(a.unpacked_json(item["state"]))
            del state["workflowName"]
            table().put_item(TableName=world.table, Item={**item, "state": a.packed_json(json.dumps(state).encode())})
            taken["0006"] += 1  # the head is given its name back
    # Retention (issue 30 item 4): the history's runs all wait at their gate, so none is given an expiry
    # (tests/integration/test_retention.py has runs that ended before it).
    taken["0007"] = 0
    # The Slack user items (issue 28 item 6) did not exist: no entry was linked.
    taken["0008"] = delete(world, lambda i: not i["pk"]["S"].startswith(f"T#{tenant}#DIR#S#"))
    # Each of the timed gate's entries gets its due time and assignee back (its DUE entry, put again by 0002, too).
    taken["0009"] = 1
    for item in items(world):
        if timed_entry(item, timed):
            table().update_item(TableName=world.table, Key=a.key(item["pk"]["S"], item["sk"]["S"]), UpdateExpression="REMOVE due, assignee")
            taken["0009"] += 1
    batch_write(world, [{"PutRequest": {"Item": item}} for item in by_kind])
    taken["0010"] = len(by_kind)
    assert taken["0010"] == RUNS
    return taken


def timed_entry(item: dict[str, Any], timed: str) -> bool:
    return f"#{wiring.INBOX.prefix}#" in item["pk"]["S"] and item.get("runId", {}).get("S") == timed


def test_the_backfills_list_what_was_written_before_the_listings_existed(services, history):
    tenant = history["tenant"]
    before = listings(services, tenant)
    # Given: the listings show none of it (the tenant's first key listed aside: made before the test took keys back)
    assert before["runs"] == before["found"] == before["named"] == before["workflows"] == before["mine"] == []
    # The timed gate's entries are there as the previous release wrote them: listed, but nobody's claim (mine is empty).
    assert before["inbox"] == before["due"] == [history["timed"]]
    assert before["slack"] == {"U0ANA": None, "U0CARL": None}
    assert len(before["keys"]) == 1  # the member's key listings() itself made, after the taking back

    progress: list[migrations.Progress] = []
    outcome = migrations.run_pending(services.store, "test", report=progress.append, clock=services.clock)

    assert outcome.complete
    assert outcome.finished == [m.id for m in migrations.registered()] == ["0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011"]
    after = listings(services, tenant)
    assert after["runs"] == history["runs"]
    assert after["found"] == history["found"] == history["runs"]
    assert after["named"] == history["named"] == history["runs"]
    assert after["inbox"] == history["inbox"]
    assert after["due"] == history["due"]
    assert after["due"][0] == history["timed"]
    assert after["mine"] == history["mine"] == [history["timed"]]
    assert after["workflows"] == history["workflows"]
    assert after["slack"] == history["slack"] == {"U0ANA": "ana", "U0CARL": "carl"}
    assert set(history["keys"]) <= set(after["keys"])
    assert TenantRecords(services.store).status(tenant, consistent=True) == "active"
    written = {p.migration.id: 0 for p in progress}
    for p in progress:
        written[p.migration.id] += p.written
    # Exactly what was taken back, each once: a run's entry, a gate's entries (its group, workflow and kind), the
    # workflows' pointers and entries, the keys' listing attributes.
    assert written == history["taken"]
    assert history["taken"]["0001"] == RUNS
    assert history["taken"]["0008"] == 2


def test_a_gate_claimed_or_released_since_its_head_was_read_keeps_what_that_wrote(services, history, world):
    timed = history["timed"]
    heads = [i for i in items(world) if i["sk"]["S"] == "RUN" and i["pk"]["S"] == run_pk(timed)]
    # Olga lets the gate go after the migration read its run: the release's entries (nobody works it) win.
    olga = signed_in(services, "olga", tenant=history["tenant"], groups=["ops"], scopes=["approvals:respond", "runs:read"])
    services.claims.move(olga, timed, "gate", "release")
    backfill = next(m for m in migrations.registered() if m.id == "0009")
    assert backfill.apply(services.store, heads) == 0
    entries = [i for i in items(world) if timed_entry(i, timed)]
    assert any("#DUE#" in i["pk"]["S"] for i in entries)
    assert all("assignee" not in i and "due" in i for i in entries)


def test_a_migration_run_again_writes_nothing(services, history, world):
    assert migrations.run_pending(services.store, "first", clock=services.clock).complete
    # The checkpoints forgotten: every migration reads every item again, and finds nothing missing.
    delete(world, lambda i: i["pk"]["S"] != "MIGRATION")
    progress: list[migrations.Progress] = []
    assert migrations.run_pending(services.store, "again", report=progress.append, clock=services.clock).complete
    assert sum(p.written for p in progress) == 0
    assert listings(services, history["tenant"])["runs"] == history["runs"]


def test_a_turn_with_every_migration_done_imports_none_of_their_modules(services, monkeypatch):
    """The migrate function's steady turn (after each deploy's first) loads no migration's module, nor what they use
    (the run models, the services): it reads the checkpoints and is done."""
    assert migrations.run_pending(services.store, "first", clock=services.clock).complete
    loaded: list[str] = []
    import_module = migrations.importlib.import_module

    def watched(name: str, package: str | None = None) -> Any:
        loaded.extend([name] if name.startswith(migrations.__name__ + ".") else [])
        return import_module(name, package)

    monkeypatch.setattr(migrations.importlib, "import_module", watched)
    outcome = migrations.run_pending(services.store, "again", clock=services.clock)
    assert outcome.complete
    assert outcome.finished == []
    assert loaded == []


def test_a_migration_stopped_after_any_page_goes_on_from_its_checkpoint(services, history, world, moments):
    pages = iter(range(3))
    progress: list[migrations.Progress] = []
    # Three pages of four items at a time, then time is up.
    stopped = migrations.run_pending(
        services.store,
        "first",
        more_time=lambda: next(pages, None) is not None,
        report=progress.append,
        page_items=4,
        clock=services.clock,
    )
    assert not stopped.complete
    assert stopped.pending[0] == "0001"
    checkpoint = MigrationStore(world.table, table(), world.entries_table).checkpoints()["0001"]
    assert checkpoint["state"] == "running"
    assert checkpoint["position"]  # where the scan goes on

    # The next turn, queued as the first stopped, goes on at once from that page on: a long migration loses no time
    # between its turns.
    resumed = migrations.run_pending(
        services.store, "second", report=progress.append, page_items=4, clock=services.clock
    )
    assert resumed.complete
    assert sum(p.written for p in progress if p.migration.id == "0001") == RUNS
    done = MigrationStore(world.table, table(), world.entries_table).checkpoints()["0001"]
    assert done["state"] == "done"
    assert done["scanned"] == sum(p.scanned for p in progress if p.migration.id == "0001")
    assert "position" not in done
    assert "owner" not in done
    assert listings(services, history["tenant"])["runs"] == history["runs"]


def test_a_turn_that_died_holds_its_migration_until_its_lease_lapses(services, history, world, moments, monkeypatch):
    # A turn whose invocation died after a page's writes, before it could say where it stopped
    died = MigrationStore.record_page

    def dying(*args: Any, **kwargs: Any) -> None:
        raise TimeoutError("the invocation died")

    monkeypatch.setattr(MigrationStore, "record_page", dying)
    with pytest.raises(TimeoutError):
        migrations.run_pending(services.store, "first", page_items=4, clock=services.clock)
    monkeypatch.setattr(MigrationStore, "record_page", died)
    # Then no other runner writes over its page while it might still be writing (its lease holds the table)
    assert migrations.run_pending(services.store, "second", page_items=4, clock=services.clock).busy == "0001"
    # and once the lease lapsed the next goes on, and every run is listed once
    moments.append(moments[-1] + timedelta(seconds=LEASE_S + 1))
    assert migrations.run_pending(services.store, "second", page_items=4, clock=services.clock).complete
    assert listings(services, history["tenant"])["runs"] == history["runs"]


def test_a_runner_that_lost_its_lease_writes_nothing_more(services, history, world):
    store = MigrationStore(world.table, table(), world.entries_table)
    now = services.clock().timestamp()
    assert store.claim("0001", "first", now, "test") is not None
    assert store.claim("0001", "second", now + 1, "test") is None
    assert store.claim("0001", "second", now + LEASE_S + 1, "test") is not None
    with pytest.raises(LeaseLost):
        store.record_page("0001", "first", None, 1, 1, now + 2)


def test_status_names_each_migration_and_its_state(services, history):
    before = {row["migration"]: row["state"] for row in migrations.status(services.store)}
    assert before == {
        "0001 run listing": "not started",
        "0002 inbox entries": "not started",
        "0003 workflow catalogue": "not started",
        "0004 key listing": "not started",
        "0005 tenant registry": "not started",
        "0006 run search": "not started",
        "0007 run retention": "not started",
        "0008 slack users": "not started",
        "0009 inbox due and assignee": "not started",
        "0010 approval kind entries": "not started",
        "0011 inbox entries moved": "not started",
    }
    migrations.run_pending(services.store, "test", clock=services.clock)
    assert {row["state"] for row in migrations.status(services.store)} == {"done"}


def test_a_slack_user_is_linked_only_to_the_entry_as_read_and_only_once(services, world):
    tenant = world.tenant
    directory = DirectoryStore(services.store)
    # As it was before this release: two entries could name one Slack user, and neither is linked.
    for pid in ("dora", "eli"):
        services.directory.put_principal(tenant, pid, PrincipalEntry(slackUserId="U0SHARED"), "admin")
        delete(world, lambda i: not i["pk"]["S"].startswith(f"T#{tenant}#DIR#S#"))
    seen = {pid: directory.get(tenant, pid)["updatedAt"] for pid in ("dora", "eli")}
    assert not directory.link_slack_user(tenant, "dora", "U0SHARED", "2000-01-01T00:00:00Z")  # changed since read
    assert directory.by_slack_user(tenant, "U0SHARED") is None
    assert directory.link_slack_user(tenant, "dora", "U0SHARED", seen["dora"])
    assert not directory.link_slack_user(tenant, "eli", "U0SHARED", seen["eli"])
    assert not directory.link_slack_user(tenant, "dora", "U0SHARED", seen["dora"])  # run again: nothing written
    assert directory.by_slack_user(tenant, "U0SHARED") == "dora"


def test_a_workflow_pointer_and_entry_are_only_ever_moved_forward(services, world):
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate(GATED))
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({**GATED, "name": "Ship v2"}))
    tenant = world.tenant
    # A pointer left behind (written before the second version) is moved up to the latest; never down.
    table().put_item(
        TableName=world.table, Item={**a.key(workflow_pk(tenant, "ship"), "LATEST"), "version": a.n(1)}
    )
    assert migrations.run_pending(services.store, "test", clock=services.clock).complete
    assert services.store.latest_workflow_version(tenant, "ship") == 2
    assert services.workflows.list_workflows(tenant, 1, 10)["workflows"][0]["name"] == "Ship v2"


def test_a_deploy_queues_a_turn_and_the_queue_runs_every_migration_through_the_function(services, history, world):
    receiver = Receiver().start()
    try:
        # When CloudFormation creates the deploy's custom resource (interlude_cdk: the function is its service token)
        request = {
            "RequestType": "Create",
            "ResponseURL": receiver.url("/cloudformation-response"),
            "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/interlude/1",
            "RequestId": "r-1",
            "LogicalResourceId": "Migrations",
            "ResourceProperties": {"release": "0.2.0", "migrations": migrations.module_names()},
        }
        lambda_runtime.invoke("migrate", request)
        # Then it is answered at once, with a first turn queued
        (hit,) = receiver.wait_for(1)
        answered = json.loads(hit.body)
        assert (hit.method, answered["Status"], answered["RequestId"]) == ("PUT", "SUCCESS", "r-1")
        assert hit.headers.get("content-type", "") == ""
        # and the queue's turns, each through the function as the event source mapping runs it, finish them all
        pump = QueuePump("migrate", world.queues["migrations"])
        assert until(lambda: not pump.pump_once(), 30)
    finally:
        receiver.close()
    assert {row["state"] for row in migrations.status(services.store)} == {"done"}
    assert listings(services, history["tenant"])["runs"] == history["runs"]
    assert queued(world.queues["migrations"]) == []


def test_a_deploy_that_cannot_queue_its_turn_fails_saying_why(services, world, monkeypatch):
    receiver = Receiver().start()
    monkeypatch.setenv(wiring.queue("migrations").url_env, world.queues["migrations"] + "-missing")
    try:
        lambda_runtime.invoke(
            "migrate",
            {"RequestType": "Update", "ResponseURL": receiver.url(), "StackId": "s", "RequestId": "r-2", "LogicalResourceId": "M"},
        )
        (hit,) = receiver.wait_for(1)
    finally:
        receiver.close()
    answered = json.loads(hit.body)
    assert answered["Status"] == "FAILED"
    assert "could not be queued" in answered["Reason"]


def test_a_gate_held_against_its_node_goes_through_every_migration_run_again(services, world):
    """A gate written in format 12 (its payload deflated against its node: ADR 0169) is read by the migrations that
    read gates (0002's entries from its payload) as by every other read: run again, they find nothing to write."""
    tenant = world.tenant
    admin = signed_in(services, tenant=tenant)
    brief = {"title": "Ship the brief?", "description": "What ships, who signs it off, which figures back it. " * 12}
    long_gate = {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": brief}], "edges": []}
    services.workflows.put_workflow(admin, "brief", WorkflowDefinition.model_validate(long_gate))
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "brief"})).runId
    (gate,) = [i for i in items(world) if i["pk"]["S"] == run_pk(run_id) and i["sk"]["S"].startswith("I#")]
    assert gate["v"] == a.n(12)
    assert migrations.run_pending(services.store, "first", clock=services.clock).complete
    delete(world, lambda i: i["pk"]["S"] != "MIGRATION")
    progress: list[migrations.Progress] = []
    assert migrations.run_pending(services.store, "again", report=progress.append, clock=services.clock).complete
    assert sum(p.written for p in progress) == 0
    member = signed_in(services, "olga", tenant=tenant, scopes=["approvals:respond", "runs:read"])
    listed = services.inbox.inbox(member, 100, {}, None)["interrupts"]
    assert [(i["runId"], i["payload"]["data"]["description"]) for i in listed] == [(run_id, brief["description"])]
