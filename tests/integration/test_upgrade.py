"""Issue 30 item 3: an upgrade from the real previous release, and a rollback to it.

tests/upgrade/previous/ holds that release's package (its layer and functions, as its git tag has them) and a dump
of a table its own local stack wrote (tests/upgrade/previous_release.py, refreshed by scripts/refresh_upgrade_dump.py):
runs waiting at each gate kind, sleeping, running a task and an action, a parent waiting on its child, failed,
completed and cancelled, with the schedules and queued messages they left. Here this release takes that table over
as a deploy would: the migrations run, every run is listed, every open gate is decided once, every deadline fires, the
queued action is taken, the audit chains verify. Then the previous release, run from its package, reads what this one
wrote, decides a gate of it and finishes every run it holds (a rollback): no run this release opened is left that the
previous release cannot finish.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path
from typing import Any

import boto3
import pytest

from interlude import migrations, wiring
from interlude.composition import Services
from interlude.config import forget as forget_settings
from interlude.config.scheduler import scheduler_settings
from interlude.domain import clock, formats
from interlude.domain.audit import AuditDraft
from interlude.domain.ids import from_wire
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.local.sqs_pump import QueuePump
from interlude.migrations import sweeps
from interlude.store import attributes as a
from interlude.store import audit as audit_items
from interlude.store import gate_closes
from interlude.store.facade import Store
from interlude.store.inbox import ENTRIES_TABLE
from interlude.store.layout import run_pk
from tests.support.local_stack import wire
from tests.support.modulex_example import instructed_example
from tests.support.queues import drain, mapped_until_gone, queued
from tests.support.receiver import Receiver, delivering_to_loopback
from tests.support.stream import Stream
from tests.upgrade.previous_release import resume_value

PREVIOUS = Path(__file__).resolve().parents[1] / "upgrade" / "previous"
DUMP = PREVIOUS / "table.json.gz"
ARCHIVE = PREVIOUS / "interlude.tar.gz"
READER = PREVIOUS.parent / "previous_release.py"
# The runs whose deadline is left to fire rather than decided.
LEFT_TO_THEIR_DEADLINES = {"approve-timeout", "run-timeout"}

pytestmark = pytest.mark.private_world  # the previous release's table, whole


@pytest.fixture
def dump() -> dict[str, Any]:
    return json.loads(gzip.decompress(DUMP.read_bytes()))


@pytest.fixture
def upgraded(world, dump, tmp_path, monkeypatch) -> Upgraded:
    """The previous release's table in this world, at the moment it was written (a minute on), its stream taken."""
    clock_file = tmp_path / "clock"
    monkeypatch.setenv(clock.CLOCK_FILE_ENV, str(clock_file))
    # One tenant driven far faster than people would: the rate's ceiling, as the local stack sets it.
    monkeypatch.setenv("INTERLUDE_TENANT_REQUESTS_PER_SECOND", "500")
    # The world was made with the settings read once per process (interlude.config): these are read afresh, as an
    # instance started after them would.
    forget_settings()
    at(clock_file, dump["writtenAt"] + 60)
    load(world.table, dump["items"])
    # A release with two tables (0.5.0 on) dumped its second's items too; one of a single table, none.
    load(world.entries_table, dump.get("entriesItems") or [])
    secrets = boto3.client("secretsmanager")
    for env, value in dump["secrets"].items():  # the deployment's secrets outlive its releases
        secrets.put_secret_value(SecretId=world.env[env], SecretString=value)
    # Making the world read its own keys (the admin key's audit entry, the token ring): this release's instances start
    # after the restore, so they read the deployment's secrets afresh.
    lambda_runtime.fresh_instances()
    stream = Stream(world.table)
    stream.take()  # what the previous release's dispatch already took
    return Upgraded(world, dump, clock_file, stream)


class Upgraded:
    def __init__(self, world: Any, dump: dict[str, Any], clock_file: Path, stream: Stream) -> None:
        self.world = world
        self.dump = dump
        self.clock_file = clock_file
        self.stream = stream
        self.services = Services(Store(world.table, world.entries_table))
        self.tenant: str = dump["tenant"]
        self.admin: str = dump["apiKey"]
        self.runs: dict[str, str] = dump["made"]["runs"]

    def http(self, method: str, path: str, body: Any = None, key: str | None = None, **headers: str) -> tuple[int, Any]:
        """A request through this release's api handler, as the gateway hands it over."""
        sent = {"content-type": "application/json", "authorization": f"Bearer {key or self.admin}", **headers}
        raw = b"" if body is None else json.dumps(body).encode()
        got = lambda_runtime.invoke("api", to_event(method, path, sent, raw, "127.0.0.1"))
        return got["statusCode"], json.loads(got["body"]) if got.get("body") else None

    def status(self, name: str) -> str:
        answered, snapshot = self.http("GET", f"/runs/{wire(self.runs[name])}")
        assert answered == 200, (name, snapshot)
        return str(snapshot["status"])

    def settle(self) -> None:
        """Dispatch takes the stream's new records until a round makes none (a child's end moves its parent)."""
        while self.stream.pump():
            pass


def two_on_one_chain(up: Upgraded, apart_from: str) -> tuple[str, str]:
    """Two new waiting runs whose decisions go to one audit chain nothing was appended to yet, not `apart_from`'s
    (runs are created until two do): the previous release's table, and this test, leave some chains waiting for their
    checkpoint, where the first decision would be left past the head too."""
    firsts: dict[int, str] = {}
    for _ in range(200):
        created = up.http("POST", "/runs", {"workflowId": "approve"})
        assert created[0] == 201, created
        run_id = created[1]["runId"]
        chain = audit_items.chain_of_member(run_id)
        if chain in firsts:
            return firsts[chain], run_id
        untouched = up.services.store.audit_log.head(up.tenant, chain).seq == 0
        if chain != audit_items.chain_of_member(apart_from) and untouched:
            firsts[chain] = run_id
    raise AssertionError("no two of 200 new runs share an audit chain")


def decided_past_the_head(up: Upgraded, chain: int) -> list[str]:
    """The runs of the decision entries stored past the chain's head, in the chain's order."""
    head = up.services.store.audit_log.head(up.tenant, chain)
    past = boto3.client("dynamodb").query(
        TableName=up.world.table,
        KeyConditionExpression="pk = :pk AND sk > :head",
        ExpressionAttributeValues={
            ":pk": a.s(audit_items.log_pk(up.tenant, chain)),
            ":head": a.s(audit_items.entry_sk(head.seq)),
        },
    )["Items"]
    entries = [json.loads(item["entry"]["S"]) for item in past if item["sk"]["S"].startswith(audit_items.ENTRY_SK_PREFIX)]
    return [e["target"]["runId"] for e in entries if e["action"] == "interrupt.decided"]


def event_batches(up: Upgraded, run_id: str) -> list[dict[str, Any]]:
    """The run's event batch items as stored."""
    return boto3.client("dynamodb").query(
        TableName=up.world.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
        ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":events": a.s(wiring.EVENT_ITEM_PREFIX)},
    )["Items"]


def at(clock_file: Path, epoch: float) -> None:
    """This process's clock (and its handlers') at `epoch`: the offset file holds how far from the real time."""
    clock_file.write_text(repr(epoch - time.time()))


def load(table: str, items: list[dict[str, Any]]) -> None:
    client = boto3.client("dynamodb")
    for start in range(0, len(items), 25):
        pending = {table: [{"PutRequest": {"Item": decoded(i)}} for i in items[start : start + 25]]}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def release_of(dump: dict[str, Any]) -> tuple[int, ...]:
    """The version of the release that wrote the dump, comparable: (0, 4, 0)."""
    return tuple(int(part) for part in dump["release"].split("."))


def scanned_items(table: str) -> list[dict[str, Any]]:
    return [i for page in boto3.client("dynamodb").get_paginator("scan").paginate(TableName=table) for i in page["Items"]]


def replaced(table: str, items: list[dict[str, Any]]) -> None:
    """The table made `items` (encoded): what another release left in it."""
    kept = {(i["pk"]["S"], i["sk"]["S"]) for i in items}
    gone = [a.key(i["pk"]["S"], i["sk"]["S"]) for i in scanned_items(table) if (i["pk"]["S"], i["sk"]["S"]) not in kept]
    client = boto3.client("dynamodb")
    for start in range(0, len(gone), 25):
        pending = {table: [{"DeleteRequest": {"Key": key}} for key in gone[start : start + 25]]}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
    load(table, items)


def decoded(item: dict[str, Any]) -> dict[str, Any]:
    return {name: ({"B": base64.b64decode(v["B"])} if "B" in v else v) for name, v in item.items()}


def encoded(item: dict[str, Any]) -> dict[str, Any]:
    return {name: ({"B": base64.b64encode(v["B"]).decode()} if "B" in v else v) for name, v in item.items()}


def open_interrupts(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gates the dump holds open: a format-1 item's by its status, a format-3 item's (written once, ADR 0126) by
    its run head, which holds it while it is open."""
    heads = {item["pk"]["S"]: item for item in items if item["sk"]["S"] == "RUN"}
    found = []
    for item in items:
        if not item["sk"]["S"].startswith("I#"):
            continue
        if "status" in item:
            is_open = item["status"]["S"] == "open"
        else:
            is_open = item["interruptId"]["S"] in gate_closes.open_ids(decoded(heads[item["pk"]["S"]]))
        if is_open:
            payload = json.loads(zlib.decompress(base64.b64decode(item["payload"]["B"])))
            found.append({"runId": item["runId"]["S"], "nodeId": item["nodeId"]["S"], "payload": payload})
    return found


def opened_in_the_first_table(up: Upgraded) -> int:
    """The dump's open gates as a release before 0.6.0 opened them (since 0.6.0 a new gate's entries are in the second
    table: docs/adr/0161): their inbox entries in the first table, their heads and items unmarked. How many entries
    were put there."""
    client = boto3.client("dynamodb")
    entries = [i for i in scanned_items(up.world.entries_table) if f"#{wiring.INBOX.prefix}#" in i["pk"]["S"]]
    load(up.world.table, [encoded(i) for i in entries])
    for item in entries:
        client.delete_item(TableName=up.world.entries_table, Key=a.key(item["pk"]["S"], item["sk"]["S"]))
    for item in scanned_items(up.world.table):
        if item["sk"]["S"] == "RUN":
            state = json.loads(zlib.decompress(item["state"]["B"]))
            for gate in state.get("interrupts", {}).values():
                gate.pop(ENTRIES_TABLE, None)
            client.put_item(TableName=up.world.table, Item={**item, "state": a.packed_json(a.compact(state))})
        elif ENTRIES_TABLE in item:
            client.put_item(TableName=up.world.table, Item={k: v for k, v in item.items() if k != ENTRIES_TABLE})
    return len(entries)


def inboxes(up: Upgraded) -> dict[str, list[str]]:
    """What each inbox lists (the admin's, the ops member's; newest and due first), by interrupt, as the api answers."""
    lambda_runtime.fresh_instances()  # an instance started now: it asks afresh where the entries are
    pages = {}
    for who, key in (("admin", up.admin), ("ops", up.dump["made"]["opsKey"])):
        for order in ("newest", "due"):
            status, page = up.http("GET", f"/interrupts?limit=100&sort={order}", key=key)
            assert status == 200, page
            pages[f"{who} {order}"] = [i["interruptId"] for i in page["interrupts"]]
    return pages


def test_the_previous_releases_table_is_taken_over_whole(upgraded: Upgraded) -> None:
    up, dump = upgraded, upgraded.dump
    # Its gates opened before it wrote the second table: their inbox entries in the first (docs/adr/0170)
    in_first = opened_in_the_first_table(up)
    listed = inboxes(up)
    assert in_first
    assert len(listed["ops newest"]) > 1
    # The migrations run, as a deploy runs them
    outcome = migrations.run_pending(up.services.store, "deploy")
    assert outcome.complete
    # ... moving every open gate's entries to the second table, after which a page reads that alone and lists the same
    assert not [i for i in scanned_items(up.world.table) if f"#{wiring.INBOX.prefix}#" in i["pk"]["S"]]
    assert inboxes(up) == listed
    assert all(len(gates) == len(set(gates)) for gates in listed.values())
    # ... the last deleting the approvals' entries in their kind's family, which no release reads since 0.4.0 (ADR 0160)
    by_kind = f"#{wiring.INBOX.prefix}#KIND#approval#"
    if release_of(dump) < (0, 5, 0):  # the releases before put an approval's entry in its kind's family
        assert any(by_kind in i["pk"]["S"] for i in dump["items"])
    scanned = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=up.world.table)
    assert not [i for page in scanned for i in page["Items"] if by_kind in i["pk"]["S"]]

    # Every run the previous release wrote is listed, and each workflow by what the listing filters on
    heads = {i["pk"]["S"] for i in dump["items"] if i["sk"]["S"] == "RUN"}
    listed = up.services.run_listing.list_runs(up.tenant, 100).runs
    assert len(listed) == len(heads) > len(up.runs)
    assert set(up.runs.values()) <= {r.runId for r in listed}
    modulex = {"X-Organization-ID": up.tenant}
    status, finance = up.http("GET", "/workflows?category=finance", **modulex)
    assert (status, [w["id"] for w in finance["workflows"]]) == (200, [dump["made"]["modulexWorkflow"]])
    assert len(up.http("GET", "/keys")[1]["keys"]) == 3  # the admin's, the ops member's, the worker's

    # Every open gate is decided, once (the ones left to their deadlines aside)
    name_of = {run: name for name, run in up.runs.items()}
    for gate in open_interrupts(dump["items"]):
        name = name_of.get(gate["runId"], "child")
        if name in LEFT_TO_THEIR_DEADLINES:
            continue
        decide = f"/runs/{wire(gate['runId'])}/interrupts/{gate['nodeId']}"
        key = dump["made"]["opsKey"] if name in ("approve-ops", "quorum") else None
        if gate["payload"]["kind"] == "external-event":
            event = {**gate["payload"]["data"], "payload": {"paid": True}}
            status, accepted = up.http("POST", "/events", event)
            assert (status, accepted["resolved"]) == (202, 1), (name, accepted)
        else:
            status, answer = up.http("POST", decide, {"resumeValue": resume_value(gate["payload"])}, key=key)
            assert status == 200, (name, answer)
        again, refused = up.http("POST", decide, {"resumeValue": resume_value(gate["payload"])}, key=key)
        assert again == 409, (name, refused)
    up.settle()
    for name in ("approve", "approve-ops", "quorum", "clarify", "custom", "external", "conversation", "confidence", "parent", "modulex"):
        assert up.status(name) == "completed", name
    assert up.status("credential") == "failed"

    # Every deadline the previous release scheduled fires, when its time comes
    for schedule in dump["schedules"]:
        # A deadline's own schedule names its due time; a bucket's (format 8, ADR 0132) its second
        at(up.clock_file, schedule["input"].get("due", schedule["input"].get("dueSecond")) + 1)
        lambda_runtime.invoke(wiring.SCHEDULES.target, schedule["input"])
    up.settle()
    assert up.status("approve-timeout") == "failed"  # onTimeout: reject
    assert up.status("run-timeout") == "failed"
    assert up.status("sleep") == "completed"

    # The tasks (one a worker of the previous release had claimed: its lease lapsed above) and the action it left
    # running are taken by this release's workers
    worker = dump["made"]["workerKey"]
    while (claimed := up.http("POST", "/tasks:claim", {"queues": ["summarize"]}, key=worker))[0] == 200:
        done = up.http("POST", f"/tasks/{claimed[1]['taskToken']}/complete", {"output": {"summary": "ok"}}, key=worker)
        assert done[0] == 200, done
    assert claimed[0] == 204, claimed
    actions = up.world.queues["actions"]
    for body in dump["queued"]["actions"]:
        boto3.client("sqs").send_message(QueueUrl=actions, MessageBody=body)
    assert QueuePump("actions", actions).pump_once() == len(dump["queued"]["actions"])
    up.settle()
    assert up.status("task") == up.status("task-claimed") == "completed"
    assert up.status("http") == "failed"  # its private address, refused by the egress guard

    # And the audit chains, the previous release's entries and this one's, verify
    status, verified = up.http("GET", "/audit/verify?fromSeq=0&toSeq=100000")
    assert (status, verified["chainValid"], verified["anomalies"]) == (200, True, []), verified


def notices_in_one_delivery(up: Upgraded, receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Two runs whose gate is decided as they end, each decision's and end's notices one delivery (format 10, ADR
    0155): the first's dead (its receiver took the decision's notice and refused the end's every time), the second's
    still queued. What the rollback is handed of them: the runs' names and the queued message."""
    for name, value in delivering_to_loopback(2).items():
        monkeypatch.setenv(name, value)
    forget_settings()
    lambda_runtime.fresh_instances()
    runs = up.runs
    for name in ("new-notices-dead", "new-notices-queued"):
        created = up.http("POST", "/runs", {"workflowId": "approve", "callbackUrl": receiver.url()})
        assert created[0] == 201, created
        runs[name] = created[1]["runId"]
    up.settle()
    drain(up.world.queues)  # the gates' own notices, delivered
    receiver.script[:] = [200, 500, 500]
    for name in ("new-notices-dead", "new-notices-queued"):
        assert up.http("POST", f"/runs/{wire(runs[name])}/interrupts/gate", {"resumeValue": {"action": "accept"}})[0] == 200
        up.settle()
        if name == "new-notices-dead":
            drain(up.world.queues)
    (message,) = queued(up.world.queues["callbacks"])
    assert [n["type"] for n in json.loads(message["Body"])["notices"]] == ["interrupt.resolved", "run.completed"]
    records = {
        table: up.services.store.client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :n)",
            ExpressionAttributeValues={":pk": a.s(run_pk(runs["new-notices-dead"])), ":n": a.s("N#")},
        )["Items"]
        for table in (up.world.table, up.world.entries_table)
    }
    # (in the second table, format 11: docs/adr/0161)
    assert records[up.world.table] == []
    dead = records[up.world.entries_table]
    # (the gate's notice alone in format 1; the decision's and the end's one record, in format 10)
    assert sorted((i["status"]["S"], i.get(formats.FORMAT_FIELD)) for i in dead) == [
        ("dead", a.n(formats.NOTICE_BUNDLES)),
        ("delivered", None),
    ]
    # And a third run's gate notice dead-lettered on its message's last receive, no attempt made (invocations without time
    # for its dial): its record dead, and a line without an attempt number saying so (ADR 0190)
    created = up.http("POST", "/runs", {"workflowId": "approve", "callbackUrl": receiver.url()})
    assert created[0] == 201, created
    runs["new-notice-given-up"] = created[1]["runId"]
    up.settle()
    with monkeypatch.context() as hurried:
        hurried.setattr(lambda_runtime.LambdaContext, "get_remaining_time_in_millis", lambda self: 1_000)
        mapped_until_gone(up.world.queues["callbacks"], "callbacks")
    given_up = up.http("GET", f"/runs/{wire(runs['new-notice-given-up'])}/deliveries")[1]["deliveries"]
    assert [(d["type"], d.get("attempt"), d["errorClass"], d["final"]) for d in given_up] == [
        ("interrupt.requested", None, "receives_exhausted", True)
    ]
    named = {"dead": "new-notices-dead", "queued": "new-notices-queued", "givenUp": "new-notice-given-up"}
    return {"noticeRuns": named, "callbacksQueued": [message["Body"]]}


def test_the_previous_release_reads_what_this_one_wrote(
    upgraded: Upgraded, tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    up, dump = upgraded, upgraded.dump
    # Its gates' entries in the first table, moved to the second by this release's migration (docs/adr/0170)
    assert opened_in_the_first_table(up)
    assert migrations.run_pending(up.services.store, "deploy").complete
    notices = notices_in_one_delivery(up, receiver, monkeypatch)
    # This release writes: new runs in several states (created by a key: the run records it), decisions, settings
    runs = up.runs
    for name in ("new-completed", "new-rejected", "new-cancelled", "new-quorum"):
        created = up.http("POST", "/runs", {"workflowId": "quorum" if name == "new-quorum" else "approve"})
        assert created[0] == 201, created
        runs[name] = created[1]["runId"]
    # The gate decided on the rollback holds a long text and long inputs: its head is in format 4 (ADR 0127)
    long_text = {"title": "Ship the long one?", "description": "A paragraph of the brief, read before shipping. " * 30}
    long_gate = {"nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": long_text}], "edges": []}
    assert up.http("PUT", "/workflows/approve-long", long_gate)[0] == 201
    created = up.http("POST", "/runs", {"workflowId": "approve-long", "inputs": {"brief": "What to ship, and why. " * 50}})
    assert created[0] == 201, created
    runs["new-waiting"] = created[1]["runId"]
    long_head = boto3.client("dynamodb").get_item(TableName=up.world.table, Key=a.key(run_pk(runs["new-waiting"]), "RUN"))
    assert json.loads(zlib.decompress(long_head["Item"]["state"]["B"]))["v"] == formats.HEAD_PARTS_ELSEWHERE
    # ... and its gate's item in format 12 (ADR 0169): its text deflated against its node, which the rollback reads back
    (long_item,) = boto3.client("dynamodb").query(
        TableName=up.world.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :i)",
        ExpressionAttributeValues={":pk": a.s(run_pk(runs["new-waiting"])), ":i": a.s("I#")},
    )["Items"]
    assert long_item[formats.FORMAT_FIELD] == a.n(formats.GATE_PAYLOAD_AGAINST_DEFINITION)
    # A ModuleX gate whose message is large: its head and its create's batch hold its title's words (ADR 0142)
    asked = {"workflow": instructed_example(), "input": {"request": "a refund"}}
    created = up.http("POST", "/workflows/run", asked)
    assert created[0] == 200, created
    runs["new-modulex"] = from_wire(created[1]["run_id"])
    created = up.http("POST", "/runs", {"workflowId": "approve"})
    assert created[0] == 201, created
    runs["new-claimed"] = created[1]["runId"]
    made_for_the_rollback = runs_of_every_kind(up)
    for name, action in (("new-completed", "accept"), ("new-rejected", "reject"), ("new-quorum", "accept")):
        assert up.http("POST", f"/runs/{wire(runs[name])}/interrupts/gate", {"resumeValue": {"action": action}})[0] == 200
    assert up.http("POST", f"/runs/{wire(runs['new-cancelled'])}/cancel", {})[0] == 200
    assert up.http("POST", f"/runs/{wire(runs['approve'])}/interrupts/gate", {"resumeValue": {"action": "accept"}})[0] == 200
    assert up.http("PUT", "/tenant/settings", {"eventRetentionHours": 72, "retentionDays": 30})[0] == 200
    up.settle()
    # Two decisions on one audit chain, the second while the first waits for its checkpoint: this release's appender
    # leaves the chain's head behind the second's entry (docs/adr/0172), which the rollback must list and verify
    runs["new-lag-first"], runs["new-lag-second"] = two_on_one_chain(up, apart_from=runs["new-waiting"])
    for name in ("new-lag-first", "new-lag-second"):
        assert up.http("POST", f"/runs/{wire(runs[name])}/interrupts/gate", {"resumeValue": {"action": "accept"}})[0] == 200
        up.settle()
    assert decided_past_the_head(up, audit_items.chain_of_member(runs["new-lag-first"])) == [runs["new-lag-second"]]
    wrote = {name: up.status(name) for name in runs}
    # Its create's event batch leaves the long text to the gate's interrupt item (format 9, ADR 0134)
    waiting_events = up.http("GET", f"/runs/{wire(runs['new-waiting'])}/events/poll")[1]["events"]
    batches = event_batches(up, runs["new-waiting"])
    assert [b.get(formats.FORMAT_FIELD) for b in batches] == [a.n(formats.GATE_TEXT_OFF_EVENTS)]
    modulex_events = up.http("GET", f"/runs/{wire(runs['new-modulex'])}/events/poll")[1]["events"]
    modulex_batches = event_batches(up, runs["new-modulex"])
    assert a.n(formats.GATE_TEXT_OFF_EVENTS) in [b.get(formats.FORMAT_FIELD) for b in modulex_batches]
    # (the runs this release ended carry the expiry it gives a finished run: issue 30 item 4)
    head = boto3.client("dynamodb").get_item(TableName=up.world.table, Key=a.key(run_pk(runs["new-completed"]), "RUN"))
    assert wiring.TTL_ATTRIBUTE in head["Item"]

    # This release's appender stopped between an entry's put and its head's move (ADR 0135): an entry past the head of
    # the chain of the gate the rollback decides, the draft of a committed action
    tenant = dump["tenant"]
    chain = audit_items.chain_of_member(runs["new-waiting"])
    log = up.services.store.audit_log
    orphan = AuditDraft(tenant, "interrupt.voted", {"subjectId": "orphan"}, {"runId": "orphan-run"}, clock.iso(clock.now()), {})
    written, _ = audit_items.chain_items(tenant, chain, log.head(tenant, chain), [(orphan, "orphan/source")], time.time())
    for label, op in written:
        if label == audit_items.ENTRY_LABEL:
            log.client.put_item(TableName=up.world.table, **op["Put"])

    # The gates this release's ops member has in their inbox: those it moved, and those it opened
    ours = inboxes(up)["ops newest"]

    # When the previous release is deployed again over that table (and the deployment's secrets) and reads it all
    secrets = boto3.client("secretsmanager")
    scan = boto3.client("dynamodb").get_paginator("scan").paginate
    rolled_back = {
        **dump,
        "writtenAt": time.time() + float(up.clock_file.read_text()),
        "items": [encoded(item) for page in scan(TableName=up.world.table) for item in page["Items"]],
        # The second table's (docs/adr/0161): a release with one table refuses a dump whose second holds any.
        "entriesItems": [encoded(item) for page in scan(TableName=up.world.entries_table) for item in page["Items"]],
        "made": {
            **dump["made"],
            "runs": runs,
            "decideOnRollback": "new-waiting",
            "claimOnRollback": "new-claimed",
            **notices,
            **made_for_the_rollback,
        },
        # Every schedule either release made, as a deployment keeps them across releases
        "schedules": dump["schedules"] + schedules_made(),
        "secrets": {env: secrets.get_secret_value(SecretId=up.world.env[env])["SecretString"] for env in dump["secrets"]},
        "objects": bucket_objects(up.world.env),
    }
    path = tmp_path / "current.json.gz"
    path.write_bytes(gzip.compress(json.dumps(rolled_back).encode()))
    posted = len(receiver.hits)
    seen = previous_release(tmp_path, "read", path)

    # Then it answered everything, as this release left it, and decided the gate this release opened
    assert seen["failures"] == [], "\n".join(seen["failures"])
    assert seen["seen"]["runs"] == wrote
    assert seen["seen"]["listed"] == len([i for i in rolled_back["items"] if i["sk"]["S"] == "RUN"])
    # (it reads the marks of the gates this release moved to the second table, and lists each: format 11)
    assert seen["seen"]["inbox"] == len(ours)
    assert seen["seen"]["settings"]["eventRetentionHours"] == 72
    # A kind filter lists the gate this release opened, which has no entry in its kind's family (ADR 0160)
    assert runs["new-waiting"] in seen["seen"]["approvals"]
    assert seen["seen"]["events"] == waiting_events
    assert seen["seen"]["modulexEvents"] == modulex_events
    assert seen["seen"]["decided"] == "completed"
    # and its daily retention sweep, over this release's items born with a provisional expiry (ADR 0133), left every
    # run as it answered it
    assert seen["seen"]["swept"] is True
    assert seen["seen"]["afterSweep"] == {**wrote, "new-waiting": "completed"}
    assert seen["seen"]["audit"]["chainValid"] is True, json.dumps(seen["seen"]["audit"]["anomalies"])
    # ... not listing the entry past the head until its appender, chaining the decision, adopted it
    listed = seen["seen"]["auditListed"]
    assert listed.count(["interrupt.voted", "orphan-run"]) == 1
    assert listed.count(["interrupt.decided", runs["new-waiting"]]) == 1
    assert seen["seen"]["auditAfter"]["chainValid"] is True, json.dumps(seen["seen"]["auditAfter"]["anomalies"])
    # ... and the decision this release left past its chain's head, listed once beside the one before it
    for name in ("new-lag-first", "new-lag-second"):
        assert listed.count(["interrupt.decided", runs[name]]) == 1, name
    # It listed each notice of a delivery this release made of a transition's notices, sent the dead one again by its
    # id, and delivered the one still queued, each notice its own POST (beside them, its own dispatch queued every
    # notice of the table it loaded again, one by one, under the same ids: each kept its own record)
    rolled = seen["seen"]["notices"]
    assert rolled["listed"] == [
        ["interrupt.requested", 1, "succeeded"],
        ["interrupt.resolved", 1, "succeeded"],
        ["run.completed", 1, "failed"],
        ["run.completed", 2, "failed"],
    ]
    assert rolled["replayed"] == "queued"
    # and listed the notice this release dead-lettered on its message's last receive (a line without an attempt number),
    # sent it again by its id and delivered it
    assert rolled["givenUp"] == {
        "listed": [["interrupt.requested", None, "failed", "receives_exhausted"]],
        "replayed": "queued",
        "delivered": True,
    }
    # Each bundle's record where this release wrote it (the second table, format 11), delivered by the previous release
    # there; a release that writes the first table (0.5.0) made its own again there when its dispatch queued the notices
    # again (docs/adr/0161), one that writes the second (0.6.0 on) met this release's record under the same key
    again = ["delivered"] if release_of(dump) >= (0, 6, 0) else ["delivered", "delivered"]
    assert rolled["bundles"] == {"new-notices-dead": again, "new-notices-queued": again}
    assert rolled["delivered"] == {"new-notices-dead": True, "new-notices-queued": True}
    sent = {(json.loads(h.body)["runId"], json.loads(h.body)["type"]) for h in receiver.hits[posted:]}
    dead, queued_run = runs["new-notices-dead"], runs["new-notices-queued"]
    wanted = {(dead, "run.completed"), (queued_run, "interrupt.resolved"), (queued_run, "run.completed")}
    if release_of(dump) < (0, 5, 0):
        # A release that writes no bundles queued the dead run's delivered notice again too, alone, and POSTed it
        wanted.add((dead, "interrupt.resolved"))
    assert wanted <= sent

    # And it finished every run that had not ended, each as its people, workers and deadlines would: the gate this
    # release's ops member claimed released by them, the ModuleX runs resumed on their face, every gate decided, every
    # task completed (the one this release's worker claimed with its token), every deadline fired
    finishing = seen["seen"]["finishing"]
    assert finishing["released"] == {"new-claimed-here": 200}
    assert finishing["resumed"] == {"modulex": 200, "new-modulex": 200}
    assert finishing["tasks"] >= 3  # this release's two, and the older release's
    finished = finishing["finished"]
    assert {name: status for name, status in finished.items() if status not in FINISHED} == {}
    # (the gates left to their deadlines timed out: onTimeout reject; a run's own timeout)
    assert finished["new-timed"] == finished["approve-timeout"] == finished["run-timeout"] == "failed"
    assert finished["http"] == "failed"  # its private address, refused by the egress guard
    opened_here = (
        "new-sleep", "new-task", "new-task-claimed", "new-claimed-here", "new-claimed", "new-modulex", "new-quorum"
    )
    assert {name: finished[name] for name in opened_here} == dict.fromkeys(opened_here, "completed")

    # When this release is deployed again over the table the rollback left, decides the gate the rollback claimed
    # (whose entry in the approval kind's family the claim put again, without an expiry, after migration 0010 ran), and
    # its daily retention sweep passes
    assert seen["seen"]["claimed"] is True
    replaced(up.world.table, seen["seen"]["table"])
    if "entriesTable" in seen["seen"]:  # a release with a second table (0.5.0 on); one without left ours as it was
        replaced(up.world.entries_table, seen["seen"]["entriesTable"])
    up.stream.take()  # what the previous release's dispatch took
    lambda_runtime.fresh_instances()
    assert migrations.run_pending(up.services.store, "deploy").complete
    decided = up.http("POST", f"/runs/{wire(runs['new-claimed'])}/interrupts/gate", {"resumeValue": {"action": "accept"}})
    assert decided[0] == 200, decided
    up.settle()
    assert sweeps.sweep(up.services.store, "upgrade", start=True) is True
    # Then no approval's entry is left in its kind's family (ADR 0160), where nothing would ever delete it
    assert not [i for i in scanned_items(up.world.table) if f"#{wiring.INBOX.prefix}#KIND#approval#" in i["pk"]["S"]]


FINISHED = {"completed", "failed", "cancelled"}
# A task queue of this release's runs alone: its worker claims one of them, not a task the older release left ready.
TRANSLATE = {
    "nodes": [
        {"id": "work", "typeId": "core.task", "config": {"taskType": "translate", "heartbeatTimeoutSeconds": 3600}},
        {"id": "after", "typeId": "core.transform", "config": {"outputs": {"done": True}}},
    ],
    "edges": [{"sourceNodeId": "work", "targetNodeId": "after"}],
}


def runs_of_every_kind(up: Upgraded) -> dict[str, Any]:
    """Runs this release opens of each kind a rollback must be able to finish: a timed gate and a sleep (their
    deadlines in this release's due index: ADR 0132), a task a worker of this release claimed and one waiting for a
    worker, a gate its ops member claimed. What the rollback is told of them (added to `up.runs`)."""
    assert up.http("PUT", "/workflows/translate", TRANSLATE)[0] == 201
    kinds = {
        "new-timed": "approve-timeout",
        "new-sleep": "sleep",
        "new-task-claimed": "translate",
        "new-claimed-here": "approve",
    }
    for name, workflow in kinds.items():
        created = up.http("POST", "/runs", {"workflowId": workflow})
        assert created[0] == 201, created
        up.runs[name] = created[1]["runId"]
    up.settle()
    worker, ops = up.dump["made"]["workerKey"], up.dump["made"]["opsKey"]
    claimed = up.http("POST", "/tasks:claim", {"queues": ["translate"]}, key=worker)
    assert (claimed[0], claimed[1]["runId"]) == (200, up.runs["new-task-claimed"]), claimed
    created = up.http("POST", "/runs", {"workflowId": "translate"})
    assert created[0] == 201, created
    up.runs["new-task"] = created[1]["runId"]
    taken = up.http("POST", f"/runs/{wire(up.runs['new-claimed-here'])}/interrupts/gate/claim", key=ops)
    assert taken[0] == 200, taken
    return {
        "finishOnRollback": True,
        "releaseOnRollback": {"new-claimed-here": ops},
        "modulexRuns": ["modulex", "new-modulex"],
        "leftToTheirDeadlines": [*LEFT_TO_THEIR_DEADLINES, "new-timed"],
        "claimedTaskToken": claimed[1]["taskToken"],
        "taskQueues": ["summarize", "translate"],
    }


def schedules_made() -> list[dict[str, Any]]:
    """The schedules this release made, as the previous release's dump lists its own (name, expression, input)."""
    client = boto3.client("scheduler")
    group = scheduler_settings().group
    found = []
    for page in client.get_paginator("list_schedules").paginate(GroupName=group):
        for summary in page.get("Schedules") or []:
            got = client.get_schedule(Name=summary["Name"], GroupName=group)
            found.append(
                {"name": got["Name"], "at": got["ScheduleExpression"], "input": json.loads(got["Target"]["Input"])}
            )
    return found


def bucket_objects(env: dict[str, str]) -> dict[str, dict[str, str]]:
    """Every object of the deployment's buckets (the tenants' audit anchors), by the bucket's environment name: a
    rollback keeps the buckets as it keeps the table."""
    s3 = boto3.client("s3")
    found: dict[str, dict[str, str]] = {}
    for bucket in wiring.BUCKETS:
        listed = s3.get_paginator("list_objects_v2").paginate(Bucket=env[bucket.env])
        keys = [o["Key"] for page in listed for o in page.get("Contents", ())]
        found[bucket.env] = {
            k: base64.b64encode(s3.get_object(Bucket=env[bucket.env], Key=k)["Body"].read()).decode() for k in keys
        }
    return found


def previous_release(work: Path, *args: Any) -> dict[str, Any]:
    """Run tests/upgrade/previous_release.py with the previous release's package, unpacked from its archive."""
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(work / "previous", filter="data")
    root = work / "previous"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLUDE_", "TABLE_NAME", "ENTRIES_TABLE_NAME", "MOTO_"))}
    env["PYTHONPATH"] = str(root / "layers" / "core" / "python")
    env["INTERLUDE_LOCAL_INSTANCES"] = "1"  # one api instance: the reads come one at a time
    done = subprocess.run(
        [sys.executable, str(READER), *map(str, args)], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    # Its answer is the one line it prints itself (exit 1: with refusals listed in it); the previous release's own log
    # lines may come before or after it. A reader that stopped without it (an uncaught error also exits 1) says why.
    answer = next((line for line in reversed(done.stdout.splitlines()) if line.startswith('{"release"')), None)
    assert done.returncode in (0, 1), done.stderr[-4000:]
    assert answer is not None, done.stderr[-4000:]
    found: dict[str, Any] = json.loads(answer)
    return found
