"""The ledger items of leased work (store.leases) across a rolling deploy: a claim, in flight or settled, written by
the release before the three workers shared one ledger is honoured by this one, and the items this release writes
are the ones that release reads (the same attributes, the same status names).

The previous release's items are written here as its code wrote them (one UpdateItem or transaction per claim:
status, attempts, leaseUntil and each ledger's own attributes)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from interlude.store import attributes as a
from interlude.store.deliveries import KEPT_ATTEMPTS, DeliveryStore, Notice
from interlude.store.effects import EffectStore, LedgerEntry, recorded_outcome
from interlude.store.leases import Ledger
from interlude.store.notifications import Notification, NotificationStore, kept_record
from tests.support.moto_world import TABLE

NOW = 1_900_000_000.0
LEASE_S = 60.0
RECORD = {"notificationId": "n-1", "principalId": "ann", "channels": {"email": {"outcome": "failed", "attempt": 1}}}


@dataclass(frozen=True)
class Kind:
    """One ledger, and what its previous release's claim wrote besides status, attempts and leaseUntil."""

    ledger: type[Ledger[Any]]
    leased: str
    settled: str
    own: dict[str, Any]

    def ref(self, tenant: str) -> Any:
        run_id = f"{tenant}/r-1"
        if self.ledger is DeliveryStore:
            return Notice(run_id, "n-1", "interrupt.requested")
        if self.ledger is NotificationStore:
            return Notification(run_id, "n-1", {"notificationId": "n-1", "channels": {}})
        return LedgerEntry(run_id, "refund", f"{tenant}/e-1", "run", "pk-1", int(NOW) + 86400)


KINDS = {
    "delivery": Kind(DeliveryStore, "delivering", "delivered", {"type": a.s("interrupt.requested")}),
    "notification": Kind(NotificationStore, "sending", "sent", {"record": a.as_json(RECORD)}),
    "effect": Kind(
        EffectStore,
        "claimed",
        "completed",
        {"runId": a.s("r"), "nodeId": a.s("refund"), "keying": a.s("run"), "at": a.s("2030-03-17T17:46:40Z")},
    ),
}


def put_previous(kind: Kind, ledger: Ledger[Any], ref: Any, **attributes: Any) -> None:
    item = {**ledger.key(ref), **kind.own, **attributes}
    boto3.client("dynamodb").put_item(TableName=TABLE, Item=item)


def stored(ledger: Ledger[Any], ref: Any) -> dict[str, Any]:
    return boto3.client("dynamodb").get_item(TableName=TABLE, Key=ledger.key(ref), ConsistentRead=True)["Item"]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_claim_in_flight_from_the_previous_release_is_honoured_until_its_lease_runs_out(services, tenant, name):
    # Given an attempt the previous release claimed, its lease running for another minute
    kind = KINDS[name]
    ledger = kind.ledger(services.store)
    ref = kind.ref(tenant)
    put_previous(kind, ledger, ref, status=a.s(kind.leased), attempts=a.n(1), leaseUntil=a.n(NOW + LEASE_S))

    # When a worker of this release takes a copy of its message, it waits for the lease
    busy = ledger.claim(ref, NOW, LEASE_S)
    assert (busy.outcome, busy.retry_in_s) == ("busy", int(LEASE_S) + 1)

    # And once the lease has run out it takes the work over as the next attempt, keeping what the first one kept
    took = ledger.claim(ref, NOW + LEASE_S + 1, LEASE_S)
    assert (took.outcome, took.attempt) == ("claimed", 2)
    if name == "notification":
        assert kept_record(took) == RECORD
    # And the worker that held the first lease can no longer settle it: only the attempt that holds the lease settles
    assert ledger.settle(ref, 1, kind.settled, {}, NOW + LEASE_S + 2) is False
    assert ledger.settle(ref, 2, kind.settled, {"output": 1}, NOW + LEASE_S + 2) is True


@pytest.mark.parametrize("name", sorted(KINDS))
def test_work_the_previous_release_settled_is_not_attempted_again(services, tenant, name):
    kind = KINDS[name]
    ledger = kind.ledger(services.store)
    ref = kind.ref(tenant)
    outcome = {"output": {"status": 200}}
    put_previous(kind, ledger, ref, status=a.s(kind.settled), attempts=a.n(2), outcome=a.as_json(outcome))

    claim = ledger.claim(ref, NOW, LEASE_S)

    assert (claim.outcome, claim.attempt) == ("settled", 2)
    if name == "effect":
        assert recorded_outcome(claim) == outcome


@pytest.mark.parametrize("name", sorted(KINDS))
def test_the_items_this_release_writes_are_the_ones_the_previous_release_reads(services, tenant, name):
    # Given a unit of work no worker has claimed yet
    kind = KINDS[name]
    ledger = kind.ledger(services.store)
    ref = kind.ref(tenant)

    # When this release claims its first attempt
    assert ledger.claim(ref, NOW, LEASE_S).attempt == 1

    # Then the item holds what the previous release's claim wrote (its lease check reads status and leaseUntil)
    item = stored(ledger, ref)
    expected = {"pk", "sk", "status", "attempts", "leaseUntil", *kind.own}
    if name == "effect":
        expected.add("ttl")
    assert set(item) == expected
    assert (item["status"], item["attempts"], item["leaseUntil"]) == (
        a.s(kind.leased),
        a.n(1),
        a.n(round(NOW + LEASE_S, 3)),
    )

    # And settling it again pending, then for good, leaves the statuses that release knows, and no lease
    assert ledger.settle(ref, 1, "pending", {"output": 1}, NOW + 1)
    assert "leaseUntil" not in stored(ledger, ref)
    assert ledger.claim(ref, NOW + 2, LEASE_S).attempt == 2
    assert ledger.settle(ref, 2, kind.settled, {"output": 1}, NOW + 3)
    item = stored(ledger, ref)
    assert (item["status"], item["attempts"], "leaseUntil" in item) == (a.s(kind.settled), a.n(2), False)
    if name == "effect":
        assert json.loads(item["outcome"]["S"]) == {"output": 1}


def test_a_delivery_records_each_attempt_on_its_own_item_and_keeps_the_latest_round(services, tenant):
    # Given a delivery that fails more often than a round of attempts, then succeeds
    store = DeliveryStore(services.store)
    ref = KINDS["delivery"].ref(tenant)
    attempts = KEPT_ATTEMPTS + 2
    for number in range(1, attempts + 1):
        seen = store.look(ref, NOW + number)
        assert (seen.outcome, seen.attempt) == ("open", number)
        status = "delivered" if number == attempts else "pending"
        record = {"noticeId": ref.notice_id, "attempt": number, "status": "failed" if status == "pending" else "succeeded"}
        # When each attempt is recorded after it is made: one conditional update, no claim, no item of its own
        assert store.record(ref, seen, status, record, NOW + number) == status
        assert "leaseUntil" not in stored(store, ref)

    # Then the run's partition holds the delivery's item alone, and its history is the latest round, oldest first
    items = boto3.client("dynamodb").query(
        TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": ledger_pk(store, ref)}
    )["Items"]
    assert [i["sk"]["S"] for i in items] == [f"N#{ref.notice_id}"]
    kept = store.attempts(ref.run_id)
    assert [r["attempt"] for r in kept] == list(range(attempts - KEPT_ATTEMPTS + 1, attempts + 1))
    assert kept == store.attempts(ref.run_id, ref.notice_id)
    assert kept[-1]["status"] == "succeeded"


def test_attempt_items_the_previous_release_wrote_are_read_beside_the_history_this_one_keeps(services, tenant):
    # Given a delivery the previous release attempted twice (an item per attempt), pending again
    store = DeliveryStore(services.store)
    ref = KINDS["delivery"].ref(tenant)
    put_previous(KINDS["delivery"], store, ref, status=a.s("pending"), attempts=a.n(2))
    pk = ledger_pk(store, ref)
    for number in (1, 2):
        record = {"noticeId": ref.notice_id, "attempt": number, "status": "failed", "httpStatus": 500}
        item = {"pk": pk, "sk": a.s(f"D#{ref.notice_id}#{number:03d}"), "record": a.as_json(record)}
        boto3.client("dynamodb").put_item(TableName=TABLE, Item=item)

    # When this release makes its third attempt
    seen = store.look(ref, NOW)
    assert seen.attempt == 3
    assert store.record(ref, seen, "delivered", {"noticeId": ref.notice_id, "status": "succeeded"}, NOW) == "delivered"

    # Then the delivery's history (what the API, the console and a dead letter show) has every attempt, in order
    assert [(r["attempt"], r["status"]) for r in store.attempts(ref.run_id)] == [(1, "failed"), (2, "failed"), (3, "succeeded")]
    assert store.attempts(ref.run_id, ref.notice_id) == store.attempts(ref.run_id)


def test_a_delivery_in_flight_from_the_previous_release_is_honoured_by_a_worker_that_records(services, tenant):
    # Given a delivery attempt the previous release claimed, its lease running for another minute
    kind = KINDS["delivery"]
    store = DeliveryStore(services.store)
    ref = kind.ref(tenant)
    put_previous(kind, store, ref, status=a.s(kind.leased), attempts=a.n(1), leaseUntil=a.n(NOW + LEASE_S))

    # When this release takes a copy of its message, it does not dial while the lease runs
    busy = store.look(ref, NOW)
    assert (busy.outcome, busy.retry_in_s) == ("busy", int(LEASE_S) + 1)

    # And once the lease has run out it makes the next attempt and records it, the lease gone with it
    seen = store.look(ref, NOW + LEASE_S + 1)
    assert (seen.outcome, seen.attempt) == ("open", 2)
    assert store.record(ref, seen, "delivered", {"noticeId": ref.notice_id, "status": "succeeded"}, NOW + LEASE_S + 2) == "delivered"
    item = stored(store, ref)
    assert (item["status"], item["attempts"], "leaseUntil" in item) == (a.s("delivered"), a.n(2), False)
    # And the previous release's worker, back late, cannot settle the attempt it claimed
    assert store.settle(ref, 1, "delivered", {}, NOW + LEASE_S + 3) is False


@pytest.mark.parametrize("second", ["succeeded", "failed"])
def test_two_copies_of_a_delivery_attempted_at_once_are_both_recorded_and_it_stays_delivered(services, tenant, second):
    # Given two copies of a notice's message taken at the same moment: both find it open and both dial
    store = DeliveryStore(services.store)
    ref = KINDS["delivery"].ref(tenant)
    first_seen, second_seen = store.look(ref, NOW), store.look(ref, NOW)
    assert first_seen.attempt == second_seen.attempt == 1

    # When the first records its success, then the second its own outcome
    assert store.record(ref, first_seen, "delivered", {"noticeId": ref.notice_id, "status": "succeeded"}, NOW + 1) == "delivered"
    outcome = "delivered" if second == "succeeded" else "pending"
    ended = store.record(ref, second_seen, outcome, {"noticeId": ref.notice_id, "status": second}, NOW + 2)

    # Then the notice stays delivered, and an operator sees both attempts, numbered in the order they were recorded
    assert ended == "delivered"
    assert [(r["attempt"], r["status"]) for r in store.attempts(ref.run_id)] == [(1, "succeeded"), (2, second)]
    assert store.look(ref, NOW + 3).outcome == "settled"


def ledger_pk(ledger: Ledger[Any], ref: Any) -> dict[str, str]:
    return ledger.key(ref)["pk"]


PREVIOUS_RELEASE = Path(__file__).resolve().parents[1] / "upgrade" / "previous" / "interlude.tar.gz"
# Run with the previous release's package first on the path: its DeliveryStore over the items given on stdin.
PREVIOUS_READS = """
import base64, inspect, json, sys, types
import boto3
from moto import mock_aws
from interlude.store.deliveries import DeliveryStore, Notice
from interlude.store.table import Table
given = json.load(sys.stdin)
with mock_aws():
    client = boto3.client("dynamodb", region_name="us-east-1")
    for name in ("t", "t-entries"):
        client.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}])
    for item in given["items"]:
        client.put_item(TableName="t", Item={k: {"B": base64.b64decode(v["B"])} if "B" in v else v for k, v in item.items()})
    # The release's own handle on its tables where it has two (0.5.0 on: Table names both), else the one it read
    if "entries_table_name" in inspect.signature(Table.__init__).parameters:
        store = DeliveryStore(Table("t", "t-entries", client))
    else:
        store = DeliveryStore(types.SimpleNamespace(client=client, table="t"))
    run = given["run"]
    delivered, pending = (Notice(run, notice, "interrupt.requested") for notice in ("delivered-1", "pending-1"))
    done = store.look(delivered, given["now"])
    again = store.look(pending, given["now"])
    store.record(pending, again, "delivered", {"noticeId": "pending-1"}, given["now"])
    print(json.dumps({"done": [done.outcome, done.attempt], "again": [again.outcome, again.attempt],
                      "status": store.read(pending)["status"], "attempts": store.attempts(run)}))
"""


def test_the_previous_release_reads_the_delivery_items_this_one_writes(services, tenant, tmp_path):
    # Given a delivery this release delivered, and one it left pending after a failed attempt
    store = DeliveryStore(services.store)
    run_id = f"{tenant}/r-1"
    for notice_id, status in (("delivered-1", "delivered"), ("pending-1", "pending")):
        ref = Notice(run_id, notice_id, "interrupt.requested")
        assert store.record(ref, store.look(ref, NOW), status, {"noticeId": notice_id}, NOW) == status
    items = boto3.client("dynamodb").query(
        TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": ledger_pk(store, ref)}
    )["Items"]
    sent = [{k: {"B": base64.b64encode(v["B"]).decode()} if "B" in v else v for k, v in i.items()} for i in items]

    # When the previous release (a rollback) takes them over
    with tarfile.open(PREVIOUS_RELEASE) as archive:
        archive.extractall(tmp_path, filter="data")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_"))}
    env.update(PYTHONPATH=str(tmp_path / "layers" / "core" / "python"), AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x")
    done = subprocess.run(
        [sys.executable, "-c", PREVIOUS_READS],
        input=json.dumps({"items": sent, "run": run_id, "now": NOW + 120}),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    # Then it reads them as its own: the delivered one is not attempted again, the pending one is its next attempt
    assert seen["done"][0] == "settled"
    assert seen["again"] == ["open", 2]
    assert seen["status"] == "delivered"
    # And it lists every attempt of both, this release's and its own
    assert sorted((r["noticeId"], r["attempt"]) for r in seen["attempts"]) == [
        ("delivered-1", 1), ("pending-1", 1), ("pending-1", 2)
    ]
