"""A tenant's usage of a month (issue 30 item 6), billed by the runs' own transactions on the open-runs counter items
(issue 31, docs/adr/0123): counted as the outbox counted it before, once whatever the outbox's deliveries, read
together with the usage parts written before, and closed once the month is over."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from interlude.composition import Services
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.migrations import sweeps
from interlude.store import attributes as a
from interlude.store import limits as counters
from interlude.store.facade import Store
from interlude.store.layout import run_pk
from interlude.store.stream import stream_events
from interlude.store.tenants import TenantRecords
from tests.integration.conftest import clear_of_a_month_end, signed_in
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import TABLE
from tests.support.stream import Stream, outbox_event

MONTH = "2026-03"


class Clock:
    def __init__(self) -> None:
        self.moment = datetime(2026, 3, 10, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.moment


def start(services: Services, admin: Any, fixture: str) -> str:
    definition = json.loads((FIXTURES / f"{fixture}.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"]})).runId


def counted_by_the_outbox(services: Services, run_ids: list[str]) -> dict[str, int]:
    """What the outbox counted of these runs before 0123: per event item stored, its `run.started` events, its
    `interrupt.resolved` events not resolved by a timeout, and its events' size as compact JSON."""
    counts = {"lifecycles": 0, "decisions": 0, "storageBytes": 0}
    for run_id in run_ids:
        items = services.store.client.query(
            TableName=services.store.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
            ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":events": a.s("E#")},
        )["Items"]
        for item in items:
            events = a.unpacked(item["events"])
            counts["lifecycles"] += sum(e["type"] == "run.started" for e in events)
            counts["decisions"] += sum(
                e["type"] == "interrupt.resolved" and e["payload"].get("reason") != "timeout" for e in events
            )
            counts["storageBytes"] += len(json.dumps(events, separators=(",", ":")).encode())
    return counts


def counter_items(services: Services, tenant: str) -> list[dict[str, Any]]:
    keys = [counters.usage_key(tenant, shard) for shard in range(counters.MAX_SHARDS)]
    got = services.store.client.batch_get_item(RequestItems={services.store.table: {"Keys": keys}})
    return got["Responses"][services.store.table]


def test_a_month_of_runs_is_counted_as_the_outbox_counted_it_with_no_outbox_and_closed_whole(world, tenant):
    clock = Clock()
    services = Services(Store(world.table, world.entries_table), clock=clock)
    admin = signed_in(services)
    # Given, in one month, a run decided (accepted), one rejected, one that times out, one cancelled, one still
    # waiting and one that starts and ends in its create (a noop), and no outbox delivery at all
    accepted, rejected = start(services, admin, "conformance-approval"), start(services, admin, "conformance-approval")
    services.decisions.resolve_interrupt(admin, accepted, "gate", {"action": "accept"})
    services.decisions.resolve_interrupt(admin, rejected, "gate", {"action": "reject"})
    timed_out = start(services, admin, "conformance-approval-timeout")
    clock.moment += timedelta(seconds=4)
    services.runs.fire_deadline({"runId": timed_out})
    cancelled, waiting = start(services, admin, "conformance-approval"), start(services, admin, "conformance-approval")
    services.lifecycle.cancel_run(admin, cancelled, CancelRunRequest())
    noop = start(services, admin, "conformance-noop")
    runs = [accepted, rejected, timed_out, cancelled, waiting, noop]
    assert services.store.get_run(noop)[0].status == "completed"
    assert services.store.get_run(waiting)[0].status == "waiting-approval"

    # Then the month's usage is what the outbox counted from the same event items: six lifecycles, two decisions (a
    # timeout and a cancel decide nothing), and the history written
    records = TenantRecords(services.store)
    usage = records.usage([tenant], MONTH)[tenant]
    assert (usage.counts["lifecycles"], usage.counts["decisions"]) == (6, 2)
    assert usage.counts == {**counted_by_the_outbox(services, runs), "notifications": 0}
    assert usage.closed_at is None

    # And a month spanning the upgrade is whole: what the release before counted on the usage parts adds to it
    records.meter(tenant, MONTH, "an-earlier-run", {"lifecycles": 1, "decisions": 1, "storageBytes": 100})
    spanning = records.usage([tenant], MONTH)[tenant].counts
    assert spanning == {
        **usage.counts,
        "lifecycles": 7,
        "decisions": 3,
        "storageBytes": usage.counts["storageBytes"] + 100,
    }

    # When the month is closed, its document holds those counts, and the counter items keep their open runs but no
    # attribute of the closed month
    closed = records.close_month(tenant, records.usage([tenant], MONTH)[tenant], "2026-04-02T00:00:00Z")
    assert (closed.counts, closed.closed_at) == (spanning, "2026-04-02T00:00:00Z")
    assert records.usage([tenant], MONTH)[tenant] == closed
    items = counter_items(services, tenant)
    assert not [name for item in items for name in item if name.endswith(f"@{MONTH}")]
    assert sum(int(item["openRuns"]["N"]) for item in items if "openRuns" in item) == 1  # the waiting run


def test_a_run_whose_outbox_items_are_delivered_twice_is_counted_once(services, admin, tenant, clock_file):
    clear_of_a_month_end(clock_file)  # its usage is read back by the clock's month
    # Given a run decided and ended, and its usage as its transactions billed it
    run_id = start(services, admin, "conformance-approval")
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    month = services.clock().strftime("%Y-%m")
    records = TenantRecords(services.store)
    billed = records.usage([tenant], month)[tenant]
    assert (billed.counts["lifecycles"], billed.counts["decisions"]) == (1, 1)
    assert billed.counts == {**counted_by_the_outbox(services, [run_id]), "notifications": 0}

    # When the outbox hands dispatch its event items twice in one batch, then once more
    own = [r for r in Stream(TABLE).take() if (stream_events(r) or ("",))[0] == run_id]
    assert len(outbox_event(own)["Records"]) == 2
    assert lambda_runtime.invoke("dispatch", outbox_event(own + own)) == {"batchItemFailures": []}
    assert lambda_runtime.invoke("dispatch", outbox_event(own)) == {"batchItemFailures": []}

    # Then the run is still counted once
    assert records.usage([tenant], month)[tenant] == billed


# A world of its own: the daily sweep reads every item of the table, in the shared world every item each earlier test
# of the process wrote.
@pytest.mark.private_world
def test_a_run_that_ends_the_next_month_bills_its_lifecycle_in_the_first_and_its_decision_in_the_second(world, tenant):
    clock = Clock()
    services = Services(Store(world.table, world.entries_table), clock=clock)
    voters = [signed_in(services, f"voter-{i}") for i in range(3)]
    # Given a run of a gate three approvers decide, started in March
    run_id = start(services, voters[0], "conformance-interrupt-quorum")
    created = counted_by_the_outbox(services, [run_id])
    # When the first vote comes in March (no decision yet: what it writes is owed on the run's head), and the other
    # two in April, which decide the gate and end the run
    services.decisions.resolve_interrupt(voters[0], run_id, "gate", {"action": "accept"})
    assert services.store.get_run(run_id)[0].unbilled["storageBytes"] > 0
    clock.moment = datetime(2026, 4, 2, 9, 0, tzinfo=UTC)
    for voter in voters[1:]:
        services.decisions.resolve_interrupt(voter, run_id, "gate", {"action": "accept"})
    state = services.store.get_run(run_id)[0]
    assert (state.status, state.unbilled) == ("completed", {})

    # Then March bills its lifecycle and the history its create wrote; April, the month it ended, its decision and
    # the rest of its history
    records = TenantRecords(services.store)
    march, april = (records.usage([tenant], month)[tenant].counts for month in (MONTH, "2026-04"))
    assert (created["lifecycles"], created["decisions"]) == (1, 0)
    assert march == {**created, "notifications": 0}
    whole = counted_by_the_outbox(services, [run_id])
    assert april == {
        "lifecycles": 0,
        "decisions": 1,
        "notifications": 0,
        "storageBytes": whole["storageBytes"] - created["storageBytes"],
    }

    # When nobody reads them and the daily sweep runs once both months are over
    clock.moment = datetime(2026, 5, 2, 3, 0, tzinfo=UTC)
    assert sweeps.sweep(services.store, "usage-test", start=True, clock=clock)
    # Then it closed each with what it held, and the counter items keep no attribute of either
    for month, counts in ((MONTH, march), ("2026-04", april)):
        closed = records.usage([tenant], month)[tenant]
        assert (closed.counts, closed.closed_at) == (counts, "2026-05-02T03:00:00.000Z")
    assert not [name for item in counter_items(services, tenant) for name in item if "@" in name]
