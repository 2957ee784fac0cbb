"""Retention of finished runs (issue 30 item 4), in-process over moto: the real api, dispatch and migrate handlers,
DynamoDB's TTL played by the local stack's pump (interlude.local.ttl) on the process clock, moved by its offset file,
never by sleeping."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from interlude import migrations, wiring
from interlude.adapters.migration_turns import RUN_RETENTION
from interlude.app import retention as retention_app
from interlude.app import run_export
from interlude.domain import clock
from interlude.domain.ids import to_wire
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.effect_names import task_id
from interlude.local import lambda_runtime
from interlude.local import ttl as ttl_pump
from interlude.local.sqs_pump import QueuePump
from interlude.local.ttl import TtlPump
from interlude.migrations import sweeps
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store import expiry
from interlude.store import retention as retention_store
from interlude.store.deliveries import DeliveryStore, Notice
from interlude.store.layout import run_pk
from interlude.store.table import Table
from interlude.store.task_items import TASK_SK, task_pk
from tests.integration.conftest import new_api_key
from tests.integration.test_tenant_lifecycle import GATE, call
from tests.support.stream import Stream

DAY_S = 24 * 3600


def finished_run(services: Any, world: Any, key: str, workflow: str = "gate") -> str:
    """A run of the one-gate workflow, decided (an audit entry on its chain) and completed, its outbox settled."""
    principal = services.keys.authenticate(f"Bearer {key}")
    services.workflows.put_workflow(principal, workflow, WorkflowDefinition.model_validate(GATE))
    stream = Stream(world.table)
    started = call("POST", "/runs", key, {"workflowId": workflow})
    assert started.status == 201, started.text
    run_id: str = started.json()["runId"]
    stream.settle()
    decided = call("POST", f"/runs/{to_wire(run_id)}/interrupts/review", key, {"resumeValue": {"action": "accept"}})
    assert decided.status == 200, decided.text
    stream.settle()
    return run_id


TASK = {
    "nodes": [{"id": "draft", "typeId": "core.task", "config": {"taskType": "summarise", "input": {}}}],
    "edges": [],
}


def finished_task_run(services: Any, world: Any, key: str) -> str:
    """A run of one core.task, claimed and completed by a worker."""
    principal = services.keys.authenticate(f"Bearer {key}")
    services.workflows.put_workflow(principal, "task", WorkflowDefinition.model_validate(TASK))
    stream = Stream(world.table)
    run_id: str = call("POST", "/runs", key, {"workflowId": "task"}).json()["runId"]
    stream.settle()
    claimed = call("POST", "/tasks:claim", key, {"queues": ["summarise"], "waitSeconds": 0})
    assert claimed.status == 200, claimed.text
    done = call("POST", f"/tasks/{claimed.json()['taskToken']}/complete", key, {"output": {"summary": "short"}})
    assert done.status == 200, done.text
    stream.settle()
    return run_id


def retention_turns(world: Any) -> None:
    """The migrations queue's turns, each through the migrate function, until none is left."""
    pump = QueuePump("migrate", world.queues["migrations"])
    while pump.pump_once():
        pass


def end_of(run_id: str, key: str) -> int:
    """The run's completedAt, in the epoch seconds its expiry counts from."""
    return int(clock.epoch_of(call("GET", f"/runs/{to_wire(run_id)}", key).json()["completedAt"]))


def items_of(world: Any, run_id: str) -> list[dict[str, Any]]:
    """Every item of the table that belongs to the run: its partition, its listing and search entries, its effects (a
    Scan: the test's table is its own)."""
    tenant, opaque = run_id.split("/", 1)
    items = boto3.client("dynamodb").scan(TableName=world.table, ConsistentRead=True)["Items"]
    return [
        item
        for item in items
        if item["pk"]["S"] == run_pk(run_id)
        or (item["pk"]["S"].startswith((f"T#{tenant}#RUNS#", f"T#{tenant}#RUNX#")) and opaque in item["sk"]["S"])
    ]


def is_search_entry(item: dict[str, Any]) -> bool:
    return f"#{wiring.RUN_SEARCH.prefix}#" in item["pk"]["S"]


def is_index_entry(item: dict[str, Any]) -> bool:
    """The run's listing or search entry: written with a provisional expiry (ADR 0131), not the run's own."""
    return is_search_entry(item) or f"#{wiring.RUN_INDEX.prefix}#" in item["pk"]["S"]


def own_items(world: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's items but its listing and search entries."""
    return [i for i in items_of(world, run_id) if not is_index_entry(i)]


def listing_expiry(world: Any, run_id: str) -> int | None:
    (entry,) = [i for i in items_of(world, run_id) if is_index_entry(i) and not is_search_entry(i)]
    return int(entry[wiring.TTL_ATTRIBUTE]["N"]) if wiring.TTL_ATTRIBUTE in entry else None


def items_provisional(world: Any, run_id: str) -> int:
    """The provisional expiry the run's own items are written with (its creation + retentionDays + the items' margin:
    ADR 0133)."""
    head = boto3.client("dynamodb").get_item(TableName=world.table, Key=a.key(run_pk(run_id), "RUN"), ConsistentRead=True)
    provisional = run_search.items_expiry(a.unpacked(head["Item"]["state"])["searchExpiry"])
    assert provisional is not None
    return provisional


def kept_until(world: Any, run_id: str, expires: int) -> None:
    """Every own item of the run finished to expire at `expires` carries that expiry, or the later provisional one it
    was written with (ADR 0133: the run ended within its margin, so the retention job wrote none of those)."""
    held = expiries(world, run_id)
    assert expires in held
    assert held <= {expires, items_provisional(world, run_id)}, (held, expires)
    assert items_provisional(world, run_id) > expires


def open_items(world: Any, run_id: str) -> set[int | None]:
    """The expiries an open run's own items carry: none, or the provisional one they were written with."""
    held = expiries(world, run_id)
    assert held <= {None, items_provisional(world, run_id)}, held
    return held


@pytest.mark.private_world
def test_a_run_that_outlives_its_search_entries_is_found_again_once_it_ends(clock_file, services, world, tenant):
    key = new_api_key(services)
    assert call("PATCH", "/tenant/settings", key, {"retentionDays": 1}).status == 200
    principal = services.keys.authenticate(f"Bearer {key}")
    services.workflows.put_workflow(principal, "gate", WorkflowDefinition.model_validate(GATE))
    stream = Stream(world.table)
    started = call("POST", "/runs", key, {"workflowId": "gate", "tags": ["long-wait"]})
    assert started.status == 201, started.text
    run_id = started.json()["runId"]
    stream.settle()
    # Given a gate that waits past its run's index entries' provisional expiry (its creation + 1 + 90 days), the
    # deployment's daily sweep running on the way
    provisional = listing_expiry(world, run_id)
    assert provisional is not None
    ttl = TtlPump(world.table, world.entries_table)
    clock.advance(clock_file, (1 + run_search.SEARCH_ENTRY_MARGIN_DAYS - run_search.LISTING_KEPT_DAYS) * DAY_S + 60)
    daily_sweep(world)
    # (which took its listing entry's expiry off, as it came near)
    assert listing_expiry(world, run_id) is None
    clock.advance(clock_file, run_search.LISTING_KEPT_DAYS * DAY_S)
    ttl.sweep()
    assert not [i for i in items_of(world, run_id) if is_search_entry(i)]
    # Then the run is still listed, though its tag no longer finds it
    assert run_id in str(call("GET", "/runs", key).json())
    assert run_id not in str(call("GET", "/runs?tags=long-wait", key).json())
    # When it is decided, and its retention turn taken
    decided = call("POST", f"/runs/{to_wire(run_id)}/interrupts/review", key, {"resumeValue": {"action": "accept"}})
    assert decided.status == 200, decided.text
    stream.settle()
    retention_turns(world)
    # Then its tag finds it again until it expires, its entry written anew with the run's own expiry
    assert run_id in str(call("GET", "/runs?tags=long-wait", key).json())
    (entry,) = [i for i in items_of(world, run_id) if is_search_entry(i)]
    assert int(entry[wiring.TTL_ATTRIBUTE]["N"]) == end_of(run_id, key) + DAY_S
    # and its listing entry expires with it
    assert listing_expiry(world, run_id) == end_of(run_id, key) + DAY_S


@pytest.mark.private_world
def test_a_task_run_that_ends_within_its_items_margin_has_its_task_kept_with_them_and_never_written_again(
    clock_file, services, world, monkeypatch
):
    written: list[str] = []
    stamp = retention_store.RetentionStore.set_task_ttl
    monkeypatch.setattr(
        retention_store.RetentionStore,
        "set_task_ttl",
        lambda store, task, ttl: (written.append(task), stamp(store, task, ttl)),
    )
    key = new_api_key(services)
    # Given a run of a task (the default 90 days' retention), claimed and completed at once
    run_id = finished_task_run(services, world, key)
    retention_turns(world)
    # Then its task was made with the run's items' provisional expiry (ADR 0142), later than the run's own, and its
    # retention turn did not write it
    task_item = boto3.client("dynamodb").get_item(
        TableName=world.table, Key=a.key(task_pk(task_id(run_id, "draft", 1)), TASK_SK), ConsistentRead=True
    )["Item"]
    assert int(task_item[wiring.TTL_ATTRIBUTE]["N"]) == items_provisional(world, run_id)
    kept_until(world, run_id, end_of(run_id, key) + 90 * DAY_S)
    assert written == []


@pytest.mark.private_world
def test_a_task_waiting_past_its_runs_provisional_expiry_is_kept_by_the_daily_sweep(clock_file, services, world):
    key = new_api_key(services)
    principal = services.keys.authenticate(f"Bearer {key}")
    services.workflows.put_workflow(principal, "task", WorkflowDefinition.model_validate(TASK))
    stream = Stream(world.table)
    run_id = call("POST", "/runs", key, {"workflowId": "task"}).json()["runId"]
    stream.settle()
    task_key = a.key(task_pk(task_id(run_id, "draft", 1)), TASK_SK)
    client = boto3.client("dynamodb")
    provisional = items_provisional(world, run_id)
    assert int(client.get_item(TableName=world.table, Key=task_key)["Item"][wiring.TTL_ATTRIBUTE]["N"]) == provisional
    # Given a task no worker claims until its run's items' provisional expiry has passed, the daily sweep running on
    # the way
    clock.advance(clock_file, provisional - int(clock.now().timestamp()) - run_search.LISTING_KEPT_DAYS * DAY_S + 60)
    daily_sweep(world)
    assert wiring.TTL_ATTRIBUTE not in client.get_item(TableName=world.table, Key=task_key)["Item"]
    clock.advance(clock_file, run_search.LISTING_KEPT_DAYS * DAY_S)
    TtlPump(world.table, world.entries_table).sweep()
    # When a worker claims it and completes it
    claimed = call("POST", "/tasks:claim", key, {"queues": ["summarise"], "waitSeconds": 0})
    assert claimed.status == 200, claimed.text
    assert claimed.json()["runId"] == run_id
    done = call("POST", f"/tasks/{claimed.json()['taskToken']}/complete", key, {"output": {"summary": "late"}})
    assert done.status == 200, done.text
    stream.settle()
    retention_turns(world)
    # Then its run completed, and the task expires with it
    assert call("GET", f"/runs/{to_wire(run_id)}", key).json()["status"] == "completed"
    expires = end_of(run_id, key) + 90 * DAY_S
    assert int(client.get_item(TableName=world.table, Key=task_key)["Item"][wiring.TTL_ATTRIBUTE]["N"]) == expires
    assert listing_expiry(world, run_id) == expires


@pytest.mark.private_world
def test_an_open_run_whose_listing_entry_expired_unswept_is_listed_again_by_the_next_sweep(clock_file, services, world):
    key = new_api_key(services)
    principal = services.keys.authenticate(f"Bearer {key}")
    services.workflows.put_workflow(principal, "gate", WorkflowDefinition.model_validate(GATE))
    run_id = call("POST", "/runs", key, {"workflowId": "gate"}).json()["runId"]
    Stream(world.table).settle()
    # Given a run still waiting when its listing entry's provisional expiry passed with no daily sweep near it
    clock.advance(clock_file, (90 + run_search.SEARCH_ENTRY_MARGIN_DAYS) * DAY_S + 60)
    TtlPump(world.table, world.entries_table).sweep()
    assert run_id not in str(call("GET", "/runs", key).json())
    # When the daily sweep runs
    daily_sweep(world)
    # Then the run is listed again, its entry without an expiry
    assert run_id in str(call("GET", "/runs", key).json())
    assert listing_expiry(world, run_id) is None


@pytest.mark.private_world
def test_a_finished_run_expires_after_its_retention_its_export_is_whole_and_the_audit_chain_still_verifies(
    clock_file, services, world, tenant
):
    key = new_api_key(services)
    # Given a tenant that keeps finished runs two days, and indexes its runs' title words
    set_ = call("PATCH", "/tenant/settings", key, {"retentionDays": 2, "searchTitles": True})
    assert set_.status == 200, set_.text
    assert set_.json()["settings"]["retentionDays"] == 2
    # and a run decided and completed, its retention job taken
    run_id = finished_run(services, world, key)
    expires = end_of(run_id, key) + 2 * DAY_S
    # (taken in the dispatch of the record that ended it: no retention turn is left for the migrate function)
    queued = boto3.client("sqs").receive_message(
        QueueUrl=world.queues["migrations"], MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", [])
    assert [json.loads(m["Body"]).get("kind") for m in queued].count(RUN_RETENTION) == 0
    # Then the transaction that ended it gave what it wrote its expiry (its end plus two days), the head among them
    # (a run kept two days has its items written without a provisional expiry, which would be near from the start:
    # its creation + 2 + ITEMS_MARGIN_DAYS is less than LISTING_KEPT_DAYS away, and its gate, put before the creating
    # transaction, with its search entries': ADR 0147; the retention turn stamps them)
    ending = {i["sk"]["S"]: i for i in own_items(world, run_id) if wiring.TTL_ATTRIBUTE in i}
    assert "RUN" in ending
    assert {int(item[wiring.TTL_ATTRIBUTE]["N"]) for item in ending.values()} == {expires}
    # and once its retention job is taken, every item of the run carries it (a task run's task too)
    task_run = finished_task_run(services, world, key)
    retention_turns(world)
    task_item = boto3.client("dynamodb").get_item(
        TableName=world.table, Key=a.key(task_pk(task_id(task_run, "draft", 1)), TASK_SK), ConsistentRead=True
    )["Item"]
    # (its task was made without an expiry, as the run's own items were: ADR 0142)
    assert int(task_item[wiring.TTL_ATTRIBUTE]["N"]) == end_of(task_run, key) + 2 * DAY_S
    items = items_of(world, run_id)
    kinds = {item["sk"]["S"].split("#", 1)[0] for item in items}
    assert {"RUN", "E", "I"} <= kinds
    assert len(items) > len(ending)
    # the listing entry, and the search entries of the words of its workflow id ("gate") and its gate's title ("Ship it?")
    outside = sorted(i["pk"]["S"].split("#")[2] for i in items if i["pk"]["S"] != run_pk(run_id))
    assert outside == ["RUNS", "RUNX", "RUNX", "RUNX"]
    searched = [i for i in items if is_index_entry(i)]
    assert {int(item[wiring.TTL_ATTRIBUTE]["N"]) for item in items if item not in searched} == {expires}
    # the listing and search entries keep the provisional expiry they were written with (its creation + 2 + 90 days),
    # which the run, ended within it, does not pass: the job wrote none of them
    (provisional,) = {int(item[wiring.TTL_ATTRIBUTE]["N"]) for item in searched}
    assert expires < provisional <= expires + run_search.SEARCH_ENTRY_MARGIN_DAYS * DAY_S
    # and a delivery made after the job (a late callback notice) is created with the same expiry
    deliveries = DeliveryStore(Table(world.table, world.entries_table))
    late = Notice(run_id, "late-notice", "run.completed")
    claim = deliveries.claim(late, clock.now().timestamp(), 30)
    assert deliveries.settle(late, claim.attempt, "delivered", {"noticeId": "late-notice"}, clock.now().timestamp())
    (written,) = [i for i in items_of(world, run_id) if i["sk"]["S"].startswith("N#")]
    assert int(written[wiring.TTL_ATTRIBUTE]["N"]) == expires
    items = items_of(world, run_id)
    # When the run is exported before it expires
    exported = call("GET", f"/runs/{to_wire(run_id)}/export", key)
    assert exported.status == 200, exported.text
    document = exported.json()
    # Then it is the whole run: the snapshot, every event, the decision with its resolution, its effects
    polled = call("GET", f"/runs/{to_wire(run_id)}/events/poll?timeout=1", key).json()["events"]
    assert document["complete"] is True
    assert document["events"] == polled
    assert document["snapshot"] == call("GET", f"/runs/{to_wire(run_id)}", key).json()
    (decision,) = document["decisions"]
    assert (decision["nodeId"], decision["status"]) == ("review", "resolved")
    assert decision["resolution"]["action"] == "accept"
    assert document["effects"] == []
    assert clock.epoch_of(document["expiresAt"]) == expires
    # and the tenant's audit chains are checkpointed (signed) with the decision in them
    assert services.audit.checkpoint_pending(early_s=10 * DAY_S) >= 1
    entries = services.audit.entries_page(tenant, 100, None)["entries"]
    assert any(run_id in str(entry) for entry in entries)
    # When a day passes, DynamoDB's TTL (the local stack's pump) keeps the run
    ttl = TtlPump(world.table, world.entries_table)
    clock.advance(clock_file, DAY_S)
    ttl.sweep()
    assert call("GET", f"/runs/{to_wire(run_id)}", key).status == 200
    # and when its period is over, every item of the run is gone but its search entries, and no answer names it
    clock.advance(clock_file, DAY_S + 60)
    assert ttl.sweep() >= len(items) - len(searched)
    assert items_of(world, run_id) == searched
    gone = call("GET", f"/runs/{to_wire(run_id)}", key)
    assert (gone.status, gone.code) == (404, "not_found")
    assert run_id not in str(call("GET", "/runs", key).json())
    assert run_id not in str(call("GET", "/runs?q=ship", key).json())
    assert call("GET", f"/runs/{to_wire(run_id)}/export", key).code == "not_found"
    # and once their provisional expiry passes, the search entries are gone too
    clock.advance(clock_file, provisional - int(clock.now().timestamp()) + 60)
    ttl.sweep()
    assert items_of(world, run_id) == []
    # Then the audit chain, which is never expired, still verifies, its checkpoints too, and still names the run
    top = max(entry["seq"] for entry in entries)
    verified = services.audit.verify(tenant, 1, top)
    assert verified["chainValid"] is True, verified["anomalies"]
    assert verified["checkpointsValid"] is True
    assert services.audit.entries_page(tenant, 100, None)["entries"] == entries


def test_retention_days_are_set_within_their_bounds(services):
    key = new_api_key(services)
    for days in (0, 3651, 1.5):
        refused = call("PATCH", "/tenant/settings", key, {"retentionDays": days})
        assert (refused.status, refused.code) == (400, "validation_error"), refused.text
    for days in (1, 3650):
        assert call("PATCH", "/tenant/settings", key, {"retentionDays": days}).json()["settings"]["retentionDays"] == days
    # null takes it back to the default (90 days), which the settings leave unsaid
    back = call("PATCH", "/tenant/settings", key, {"retentionDays": None})
    assert "retentionDays" not in back.json()["settings"]
    assert services.limiter.retention_days(services.keys.authenticate(f"Bearer {key}").tenant) == 90


def test_an_export_pages_its_events_and_refuses_what_it_cannot_hold(services, world, other_tenant, monkeypatch):
    key = new_api_key(services)
    run_id = finished_run(services, world, key, "paged")
    whole = call("GET", f"/runs/{to_wire(run_id)}/export", key).json()
    assert whole["complete"] is True
    # When one answer holds only a little more than the snapshot, decisions and effects
    fixed = len(str({k: v for k, v in whole.items() if k != "events"}))
    monkeypatch.setattr(run_export, "MIN_EVENT_BYTES", 1)
    monkeypatch.setattr(run_export, "MAX_ANSWER_BYTES", fixed + 600)
    # Then the events come in pages, each asked after the last sequence received, the last one complete
    events: list[dict[str, Any]] = []
    after, pages = "", 0
    for _ in whole["events"]:
        page = call("GET", f"/runs/{to_wire(run_id)}/export{after}", key).json()
        assert page["snapshot"] == whole["snapshot"]
        events += page["events"]
        pages += 1
        if page["complete"]:
            break
        after = f"?afterSequence={page['events'][-1]['sequence']}"
    assert page["complete"] is True
    assert pages > 1
    assert events == whole["events"]
    # and a run whose document alone passes what one answer holds is refused, not cut short
    monkeypatch.setattr(run_export, "MAX_ANSWER_BYTES", 100)
    too_large = call("GET", f"/runs/{to_wire(run_id)}/export", key)
    assert (too_large.status, too_large.code) == (413, "payload_too_large")
    # Refusals: a cursor out of range, a run of no one, another tenant's run
    assert call("GET", f"/runs/{to_wire(run_id)}/export?afterSequence=-1", key).code == "validation_error"
    missing = f"{run_id.split('/', 1)[0]}/{'r' * 22}"
    assert call("GET", f"/runs/{to_wire(missing)}/export", key).code == "not_found"
    foreign = call("GET", f"/runs/{to_wire(run_id)}/export", new_api_key(services, tenant=other_tenant))
    assert (foreign.status, foreign.code) == (403, "id_tenant_mismatch")
    # and a key without runs:read
    reader = new_api_key(services, scopes=["approvals:respond"])
    assert call("GET", f"/runs/{to_wire(run_id)}/export", reader).status == 403


@pytest.mark.private_world  # items_of scans the table
def test_a_run_with_more_items_than_dispatch_retains_has_the_rest_from_the_migrations_queue(
    clock_file, services, world, monkeypatch
):
    # Given pages of one item
    monkeypatch.setattr(retention_store, "PAGE_ITEMS", 1)
    key = new_api_key(services)
    # When a run ends past its items' margin (its turn writes every item), its dispatch retaining one page of them
    run_id = open_gate_run(services, world, key, "paged")
    clock.advance(clock_file, (run_search.ITEMS_MARGIN_DAYS + 1) * DAY_S)
    resolve(world, key, run_id)
    expires = end_of(run_id, key) + 90 * DAY_S
    queued = boto3.client("sqs").receive_message(
        QueueUrl=world.queues["migrations"], MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", [])
    # (the rest queued for the migrate function, from where it stopped)
    turns = [json.loads(m["Body"]) for m in queued]
    assert {(t["kind"], "after" in t) for t in turns if t.get("runId") == run_id} == {(RUN_RETENTION, True)}
    # Then the turns the migrate function takes from where it stopped give every other item its expiry
    retention_turns(world)
    assert expiries(world, run_id) == {expires}


def without_expiry(world, run_id: str, listing: bool = True) -> None:
    """The run's items as a release before retention wrote them: no expiry (its search entries keep theirs, written
    when they were: the job leaves them); its listing entry too, unless `listing` is False (as this release wrote it:
    ADR 0131)."""
    client = boto3.client("dynamodb")
    for item in [i for i in items_of(world, run_id) if not (is_search_entry(i) if listing else is_index_entry(i))]:
        client.update_item(
            TableName=world.table,
            Key={"pk": item["pk"], "sk": item["sk"]},
            UpdateExpression="REMOVE #ttl",
            ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE},
        )


@pytest.mark.private_world  # items_of scans the table
def test_a_retention_turn_out_of_time_is_taken_on_where_it_stopped(services, world, monkeypatch):
    key = new_api_key(services)
    run_id = finished_run(services, world, key, "turns")
    # Given a finished run none of whose earlier items has its expiry yet (as a run ended before this release)
    without_expiry(world, run_id)
    # When each turn reads one item a page and has no time left after its first page
    monkeypatch.setattr(retention_store, "PAGE_ITEMS", 1)
    turns, after = 0, None
    while True:
        turns += 1
        after = services.retention.turn(run_id, after, lambda: False)
        if after is None:
            break
        # Then each turn stops after one page, the items before its cursor already done
        done = [i for i in items_of(world, run_id) if i["pk"]["S"] == run_pk(run_id) and i["sk"]["S"] <= after]
        assert all(wiring.TTL_ATTRIBUTE in i for i in done)
    # and the turns together gave every item of the run, its head too, one expiry, and its listing entry one no sooner
    items = items_of(world, run_id)
    assert turns >= len([i for i in items if i["pk"]["S"] == run_pk(run_id)]) - 1
    expires = end_of(run_id, key) + 90 * DAY_S
    assert {int(i[wiring.TTL_ATTRIBUTE]["N"]) for i in own_items(world, run_id)} == {expires}
    assert (listing_expiry(world, run_id) or 0) >= expires


@pytest.mark.private_world
def test_runs_that_ended_before_retention_existed_get_their_expiry_from_a_migration(services, world):
    key = new_api_key(services)
    run_id = finished_run(services, world, key, "older")
    waiting = call("POST", "/runs", key, {"workflowId": "older"}).json()["runId"]
    # Given a finished run none of whose items has an expiry (as the release before wrote it), and a waiting one
    without_expiry(world, run_id)
    # When the deploy's migrations run
    assert migrations.run_pending(services.store, "deploy", clock=services.clock).complete
    # Then every item of the finished run expires the default 90 days after its end, and nothing of the waiting one
    expires = end_of(run_id, key) + 90 * DAY_S
    assert {int(i[wiring.TTL_ATTRIBUTE]["N"]) for i in own_items(world, run_id)} == {expires}
    assert (listing_expiry(world, run_id) or 0) >= expires
    open_items(world, waiting)


def expiry_of(world: Any, run_id: str, sk: str) -> int | None:
    item = boto3.client("dynamodb").get_item(TableName=world.table, Key=a.key(run_pk(run_id), sk), ConsistentRead=True)
    value = item["Item"].get(wiring.TTL_ATTRIBUTE)
    return int(value["N"]) if value else None


def test_a_delivery_whose_ledger_read_the_head_before_the_run_ended_takes_its_expiry_after_all(
    services, world, monkeypatch
):
    key = new_api_key(services)
    # Given a run that ended, its retention job taken whole (its pages passed every key of its partition)
    run_id = finished_run(services, world, key, "racing")
    retention_turns(world)
    # and a delivery whose ledger read the head just before the end (no expiry yet), and writes only now
    monkeypatch.setattr(expiry, "created_expiry", lambda *_: {})
    deliveries = DeliveryStore(Table(world.table, world.entries_table))
    late = Notice(run_id, "raced", "run.completed")
    # When the delivery is created with what its ledger read
    claim = deliveries.claim(late, clock.now().timestamp(), 30)
    assert claim.outcome == "claimed"
    # Then it carries the run's expiry all the same, as every other item of the run
    expires = end_of(run_id, key) + 90 * DAY_S
    assert expiry_of(world, run_id, "N#raced") == expires
    kept_until(world, run_id, expires)


def test_a_delivery_created_by_a_worker_that_stopped_before_confirming_its_expiry_is_confirmed_by_the_next_claim(
    services, world, monkeypatch
):
    key = new_api_key(services)
    run_id = finished_run(services, world, key, "stopped")
    retention_turns(world)
    # Given a delivery created without the run's expiry (its ledger read the head before the end) by a worker that
    # stopped before confirming it
    deliveries = DeliveryStore(Table(world.table, world.entries_table))
    notice = Notice(run_id, "stopped", "run.completed")
    with monkeypatch.context() as stale:
        stale.setattr(expiry, "created_expiry", lambda *_: {})
        stale.setattr(expiry, "confirm", lambda *_: None)
        assert deliveries.claim(notice, clock.now().timestamp(), 30).outcome == "claimed"
    assert expiry_of(world, run_id, "N#stopped") is None
    # When its message is taken again, once the lease has lapsed
    claim = deliveries.claim(notice, clock.now().timestamp() + 60, 30)
    assert claim.outcome == "claimed"
    # Then the delivery carries the run's expiry
    assert expiry_of(world, run_id, "N#stopped") == end_of(run_id, key) + 90 * DAY_S


def test_the_local_ttl_pump_reads_a_bounded_slice_of_the_tables_each_tick_and_deletes_within_a_pass(
    world, tenant, monkeypatch
):
    client = boto3.client("dynamodb")
    now = int(clock.now().timestamp())
    # Given two expired items and one still kept in each of the shared tables, among their items
    for table in (world.table, world.entries_table):
        for sk, ttl in (("X#expired-1", now - 10), ("X#expired-2", now - 1), ("X#kept", now + DAY_S)):
            client.put_item(TableName=table, Item={**a.key(f"T#{tenant}#TTLPUMP", sk), wiring.TTL_ATTRIBUTE: a.n(ttl)})
    table_items = client.describe_table(TableName=world.table)["Table"]["ItemCount"] or client.scan(
        TableName=world.table, Select="COUNT"
    )["Count"]
    monkeypatch.setattr(ttl_pump, "PAGE_ITEMS", 100)
    pump = TtlPump(world.table, world.entries_table)
    # When the pump ticks, a page a tick, until its pass over both tables is whole
    ticks = 0
    while True:
        before = pump.scanned
        pump.tick(pages=1)
        ticks += 1
        # Then no tick reads more than its page, however large the table
        assert pump.scanned - before <= 100
        if pump.position is None and pump.current == 0:
            break
    assert ticks >= table_items // 100
    # and within the pass, the expired items of both tables are gone and the kept ones stay
    for table in (world.table, world.entries_table):
        left = client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": a.s(f"T#{tenant}#TTLPUMP")},
            ConsistentRead=True,
        )["Items"]
        assert [item["sk"]["S"] for item in left] == ["X#kept"], table


def unfinished_retention(world: Any, run_id: str, listing: bool = False) -> None:
    """The run as a retention turn that never finished leaves it (its message dead-lettered): the head and what the
    ending transaction wrote expire, the items written before do not (its listing entry keeps its provisional expiry;
    `listing`: not, as a release before ADR 0131 wrote it), and the head has no mark of a turn done (as a release that
    marked heads left it too)."""
    client = boto3.client("dynamodb")
    head = client.get_item(TableName=world.table, Key=a.key(run_pk(run_id), "RUN"), ConsistentRead=True)["Item"]
    without_expiry(world, run_id, listing)
    client.update_item(
        TableName=world.table,
        Key=a.key(run_pk(run_id), "RUN"),
        UpdateExpression="SET #ttl = :ttl REMOVE #retained",
        ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE, "#retained": retention_store.RETAINED},
        ExpressionAttributeValues={":ttl": head[wiring.TTL_ATTRIBUTE]},
    )


def unfinished_restamp(world: Any, run_id: str, expires: int) -> None:
    """The run as a re-stamp whose turn never finished leaves it: the head has the new expiry (and says its turn is
    under way), every other item keeps the one it had."""
    boto3.client("dynamodb").update_item(
        TableName=world.table,
        Key=a.key(run_pk(run_id), "RUN"),
        UpdateExpression="SET #ttl = :ttl, #retained = :restamping",
        ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE, "#retained": retention_store.RETAINED},
        ExpressionAttributeValues={":ttl": a.n(expires), ":restamping": a.n(retention_store.RESTAMPING)},
    )


def daily_sweep(world: Any) -> None:
    """The deployment's daily schedule fires and the sweep's turns are taken by the migrate function."""
    assert lambda_runtime.invoke("timeouts", dict(wiring.RETENTION_SWEEP.input)) == {"queued": True}
    retention_turns(world)


def expiries(world: Any, run_id: str) -> set[int | None]:
    """The expiries of the run's own items (its listing and search entries keep a provisional one: ADR 0131)."""
    return {int(i[wiring.TTL_ATTRIBUTE]["N"]) if wiring.TTL_ATTRIBUTE in i else None for i in own_items(world, run_id)}


# The sweep reads every item of the table: in the shared world, every item each earlier test of the process wrote.
@pytest.mark.private_world
def test_a_run_whose_retention_turn_never_finished_is_retained_by_the_daily_sweep(services, world):
    key = new_api_key(services)
    run_id = finished_run(services, world, key, "swept")
    waiting = call("POST", "/runs", key, {"workflowId": "swept"}).json()["runId"]
    Stream(world.table).settle()
    retention_turns(world)
    expires = end_of(run_id, key) + 90 * DAY_S
    kept_until(world, run_id, expires)
    # Given a finished run whose retention turn never finished: its earlier items carry no expiry (as a release
    # before ADR 0133 wrote them)
    unfinished_retention(world, run_id)
    assert None in expiries(world, run_id)
    # When the deployment's daily sweep runs
    daily_sweep(world)
    # Then every item of the run carries its expiry, and nothing of the run still waiting carries one but the
    # provisional one it was written with
    assert expiries(world, run_id) == {expires}
    open_items(world, waiting)
    # Given a re-stamp of the run whose turn never finished: the head has its new expiry, the other items the old
    unfinished_restamp(world, run_id, expires - 60 * DAY_S)
    # When the daily sweep runs
    daily_sweep(world)
    # Then every item of the run carries the new expiry
    assert expiries(world, run_id) == {expires - 60 * DAY_S}
    # When the turn never finishes again, as a release before ADR 0131 left it (its listing entry without an expiry),
    # and the sweep's turns have no time past a page of 10 items
    unfinished_retention(world, run_id, listing=True)
    turns = 0
    while not sweeps.sweep(services.store, "test", start=turns == 0, more_time=lambda: False, page_items=10):
        turns += 1
    # Then the pass went on turn after turn from where the last stopped, and found the run all the same
    assert turns >= 1
    assert expiries(world, run_id) == {expires - 60 * DAY_S}
    assert (listing_expiry(world, run_id) or 0) >= expires - 60 * DAY_S
    open_items(world, waiting)


@pytest.mark.private_world  # items_of scans the table
def test_a_change_of_retention_days_is_given_to_the_runs_finished_before_it_by_a_resumable_job(
    services, world, tenant, monkeypatch
):
    key = new_api_key(services)
    # Given two finished runs kept the default 90 days, and a run still waiting
    finished = [finished_run(services, world, key, "kept-1"), finished_run(services, world, key, "kept-2")]
    waiting = call("POST", "/runs", key, {"workflowId": "kept-1"}).json()["runId"]
    Stream(world.table).settle()
    retention_turns(world)
    for run_id in finished:
        kept_until(world, run_id, end_of(run_id, key) + 90 * DAY_S)
    # When the tenant keeps finished runs 30 days from now on, and the job it starts is taken
    assert call("PATCH", "/tenant/settings", key, {"retentionDays": 30}).status == 200
    retention_turns(world)
    # Then every item of the runs finished before expires 30 days after their end, and the waiting run is untouched
    for run_id in finished:
        assert {int(i[wiring.TTL_ATTRIBUTE]["N"]) for i in own_items(world, run_id)} == {end_of(run_id, key) + 30 * DAY_S}
    open_items(world, waiting)
    # and the settings show the job done, with what it saw and changed
    shown = call("GET", "/tenant/settings", key).json()["retentionRestamp"]
    assert {k: shown[k] for k in ("state", "days", "runsSeen", "runsRestamped")} == {
        "state": "done",
        "days": 30,
        "runsSeen": 3,
        "runsRestamped": 2,
    }
    # When it changes again to a week, and each turn of its job has no time past one listing entry
    monkeypatch.setattr(retention_app, "RESTAMP_PAGE", 1)
    assert call("PATCH", "/tenant/settings", key, {"retentionDays": 7}).status == 200
    progress = []
    while not services.restamp.turn(tenant, None, lambda: False):
        progress.append(services.restamp.store.restamp_job(tenant)["runsSeen"])
    # Then the job went on turn after turn from where the last stopped, its progress visible as it went
    assert progress == sorted(progress)
    assert len(progress) >= 3
    for run_id in finished:
        assert {int(i[wiring.TTL_ATTRIBUTE]["N"]) for i in own_items(world, run_id)} == {end_of(run_id, key) + 7 * DAY_S}
    shown = call("GET", "/tenant/settings", key).json()["retentionRestamp"]
    assert (shown["state"], shown["days"], shown["runsSeen"], shown["runsRestamped"]) == ("done", 7, 3, 2)
    # and the turn its change queued finds nothing left to do
    retention_turns(world)
    assert call("GET", "/tenant/settings", key).json()["retentionRestamp"] == shown


def retention_mark(world: Any, run_id: str) -> int | None:
    head = boto3.client("dynamodb").get_item(TableName=world.table, Key=a.key(run_pk(run_id), "RUN"), ConsistentRead=True)
    value = head["Item"].get(retention_store.RETAINED)
    return int(value["N"]) if value else None


def open_gate_run(services: Any, world: Any, key: str, workflow: str) -> str:
    principal = services.keys.authenticate(f"Bearer {key}")
    services.workflows.put_workflow(principal, workflow, WorkflowDefinition.model_validate(GATE))
    started = call("POST", "/runs", key, {"workflowId": workflow})
    assert started.status == 201, started.text
    Stream(world.table).settle()
    return str(started.json()["runId"])


def resolve(world: Any, key: str, run_id: str) -> None:
    """The run's gate accepted, its outbox settled (dispatch's retention turn taken, the migrations queue's not)."""
    decided = call("POST", f"/runs/{to_wire(run_id)}/interrupts/review", key, {"resumeValue": {"action": "accept"}})
    assert decided.status == 200, decided.text
    Stream(world.table).settle()


def decide(world: Any, key: str, run_id: str) -> None:
    resolve(world, key, run_id)
    retention_turns(world)


@pytest.mark.private_world
def test_a_run_that_ends_within_its_items_margin_has_them_written_once_and_kept_past_its_retention(
    clock_file, services, world, monkeypatch
):
    key = new_api_key(services)
    run_id = open_gate_run(services, world, key, "soon")
    # Given an open run: every item written so far carries its items' provisional expiry (its creation + the default
    # 90 days + ITEMS_MARGIN_DAYS), a delivery made for it too, its head none
    provisional = items_provisional(world, run_id)
    assert open_items(world, run_id) == {None, provisional}
    deliveries = DeliveryStore(Table(world.table, world.entries_table))
    notice = Notice(run_id, "opened", "interrupt.requested")
    assert deliveries.claim(notice, clock.now().timestamp(), 30).outcome == "claimed"
    assert expiry_of(world, run_id, "N#opened") == provisional
    before = {i["sk"]["S"] for i in own_items(world, run_id)} - {"RUN"}
    # When it is decided within the margin, and its retention turn taken
    written: list[str] = []
    stamp = retention_store.RetentionStore.set_item_ttl
    monkeypatch.setattr(
        retention_store.RetentionStore,
        "set_item_ttl",
        lambda store, run, sk, ttl: (written.append(sk), stamp(store, run, sk, ttl)),
    )
    decide(world, key, run_id)
    # Then its turn wrote none of its items: each one written before the end keeps the provisional expiry, later than
    # the run's, which the ending transaction gave what it wrote
    assert written == []
    expires = end_of(run_id, key) + 90 * DAY_S
    kept_until(world, run_id, expires)
    assert {expiry_of(world, run_id, sk) for sk in before} == {provisional}
    assert retention_mark(world, run_id) is None
    # When its retention is over, its head goes and no answer names it; its other items go at their provisional expiry
    ttl = TtlPump(world.table, world.entries_table)
    clock.advance(clock_file, expires - int(clock.now().timestamp()) + 60)
    ttl.sweep()
    assert call("GET", f"/runs/{to_wire(run_id)}", key).status == 404
    assert call("GET", f"/runs/{to_wire(run_id)}/events", key).status == 404
    assert call("GET", f"/runs/{to_wire(run_id)}/export", key).status == 404
    clock.advance(clock_file, provisional - expires)
    ttl.sweep()
    assert own_items(world, run_id) == []


@pytest.mark.private_world
def test_a_run_that_ends_past_its_items_margin_has_every_item_stamped_and_a_turn_cut_short_is_found_by_its_head(
    clock_file, services, world
):
    key = new_api_key(services)
    run_id = open_gate_run(services, world, key, "later")
    provisional = items_provisional(world, run_id)
    # Given a run decided past its items' margin (their provisional expiry is before its end + 90 days)
    clock.advance(clock_file, (run_search.ITEMS_MARGIN_DAYS + 1) * DAY_S)
    decide(world, key, run_id)
    expires = end_of(run_id, key) + 90 * DAY_S
    assert provisional < expires
    # Then its retention turn gave every item the run's expiry, and the head says that turn is whole
    assert expiries(world, run_id) == {expires}
    assert retention_mark(world, run_id) == expires
    # Given such a turn cut short: the head says it is under way (as the ending transaction wrote it), an item keeps
    # the provisional expiry it was written with
    client = boto3.client("dynamodb")
    event = min(i["sk"]["S"] for i in own_items(world, run_id) if i["sk"]["S"].startswith("E#"))
    client.update_item(
        TableName=world.table,
        Key=a.key(run_pk(run_id), event),
        UpdateExpression="SET #ttl = :ttl",
        ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE},
        ExpressionAttributeValues={":ttl": a.n(provisional)},
    )
    unfinished_restamp(world, run_id, expires)
    # When the daily sweep runs
    daily_sweep(world)
    # Then every item of the run carries its expiry, and the head says the turn is whole
    assert expiries(world, run_id) == {expires}
    assert retention_mark(world, run_id) == expires


@pytest.mark.private_world
def test_a_run_waiting_past_its_items_provisional_expiry_keeps_every_item_through_the_daily_sweep(
    clock_file, services, world
):
    key = new_api_key(services)
    run_id = open_gate_run(services, world, key, "waits")
    provisional = items_provisional(world, run_id)
    events = call("GET", f"/runs/{to_wire(run_id)}/events/poll?timeout=1", key).json()["events"]
    # Given a run still waiting as its items' provisional expiry comes near, the daily sweep running then
    clock.advance(clock_file, provisional - int(clock.now().timestamp()) - run_search.LISTING_KEPT_DAYS * DAY_S + 60)
    daily_sweep(world)
    # Then its items lose it, and what is written for it from then on is written without one
    assert open_items(world, run_id) == {None}
    deliveries = DeliveryStore(Table(world.table, world.entries_table))
    notice = Notice(run_id, "near", "interrupt.requested")
    assert deliveries.claim(notice, clock.now().timestamp(), 30).outcome == "claimed"
    assert expiry_of(world, run_id, "N#near") is None
    # When that expiry has long passed, DynamoDB's TTL running
    clock.advance(clock_file, 2 * run_search.LISTING_KEPT_DAYS * DAY_S)
    daily_sweep(world)
    TtlPump(world.table, world.entries_table).sweep()
    # Then the run has every item still, its events whole
    assert call("GET", f"/runs/{to_wire(run_id)}/events/poll?timeout=1", key).json()["events"] == events
    # and when it is decided, every item takes its expiry, and its head says its turn is whole
    decide(world, key, run_id)
    expires = end_of(run_id, key) + 90 * DAY_S
    assert expiries(world, run_id) == {expires}
    assert retention_mark(world, run_id) == expires


@pytest.mark.private_world  # items_of scans the table
def test_a_run_that_ends_within_its_items_margin_has_its_turn_decided_on_the_head_dispatch_read_with_its_end(
    services, world, monkeypatch
):
    key = new_api_key(services)
    run_id = open_gate_run(services, world, key, "held")
    # Given every read a retention turn makes of a run's items or head
    read: list[str] = []
    for name in ("items_page", "retained_run"):
        real = getattr(retention_store.RetentionStore, name)
        monkeypatch.setattr(
            retention_store.RetentionStore,
            name,
            lambda store, run, *rest, _name=name, _real=real: (read.append(_name), _real(store, run, *rest))[1],
        )
    # When it is decided within its items' margin and dispatch takes the batch that ends it
    decide(world, key, run_id)
    # Then its turn read none of its items, nor its head again (ADR 0176), and every item is kept as a whole turn keeps
    # it: the provisional expiry it was written with, or the run's
    assert read == []
    kept_until(world, run_id, end_of(run_id, key) + 90 * DAY_S)


@pytest.mark.private_world  # the sweep reads every item of the table
def test_an_item_left_without_an_expiry_by_a_release_before_0_3_is_given_the_runs_by_the_daily_sweep(services, world):
    key = new_api_key(services)
    run_id = open_gate_run(services, world, key, "older")
    # Given an open run one of whose items has no expiry, as a release before 0.3.0 wrote it (ADR 0133)
    gate = next(i["sk"]["S"] for i in own_items(world, run_id) if i["sk"]["S"].startswith("I#"))
    boto3.client("dynamodb").update_item(
        TableName=world.table,
        Key=a.key(run_pk(run_id), gate),
        UpdateExpression="REMOVE #ttl",
        ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE},
    )
    # When it is decided within its items' margin: dispatch's turn, decided on the head, reads no item (ADR 0176)
    decide(world, key, run_id)
    assert expiry_of(world, run_id, gate) is None
    # Then the daily sweep finds the item without an expiry and gives it the run's
    daily_sweep(world)
    expires = end_of(run_id, key) + 90 * DAY_S
    assert expiry_of(world, run_id, gate) == expires
    kept_until(world, run_id, expires)


def test_a_delivery_whose_message_says_its_expiry_is_created_with_it_and_confirmed_against_the_head(services, world):
    key = new_api_key(services)
    run_id = finished_run(services, world, key, "hinted")
    expires = end_of(run_id, key) + 90 * DAY_S
    deliveries = DeliveryStore(Table(world.table, world.entries_table))
    head_reads: list[bool] = []
    real = expiry._head_expiry

    def reading(client: Any, table: str, run: str, consistent: bool) -> Any:
        head_reads.append(consistent)
        return real(client, table, run, consistent=consistent)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(expiry, "_head_expiry", reading)
        # Given a delivery whose message says what dispatch read: the run's expiry (ADR 0178)
        said = Notice(run_id, "said", "run.completed", created_expiry=(expires,))
        assert deliveries.claim(said, clock.now().timestamp(), 30).outcome == "claimed"
        # Then its record is created with it, the head read once, after the write, to confirm it
        assert expiry_of(world, run_id, "N#said") == expires
        assert head_reads == [True]
        # Given one whose message said what the head no longer holds (the run ran again, or was re-stamped, since)
        stale = Notice(run_id, "stale", "run.completed", created_expiry=(expires - DAY_S,))
        assert deliveries.claim(stale, clock.now().timestamp(), 30).outcome == "claimed"
        # Then its confirmation gives it the head's
        assert expiry_of(world, run_id, "N#stale") == expires
        # and one whose message says nothing reads the head first, as before
        head_reads.clear()
        unsaid = Notice(run_id, "unsaid", "run.completed")
        assert deliveries.claim(unsaid, clock.now().timestamp(), 30).outcome == "claimed"
        assert head_reads == [False, True]
        assert expiry_of(world, run_id, "N#unsaid") == expires
