"""The local stack's moto: a transaction and a Query cost what they touch, and behave as moto (and DynamoDB) do.

Cost is counted, not timed: the items moto deep-copies and the key comparisons it makes for one call, with 10
and with 2,000 other items in the table, must be the same numbers; and so must what a whole approval lifecycle
through the real `api` handler and `dispatch` makes moto do, beside 10 and beside 400 existing runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.sqs.models import Message

from interlude import wiring
from interlude.app import keys as app_keys
from interlude.app import limits as app_limits
from interlude.composition import Services
from interlude.config import forget as forget_settings
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime, moto_patches
from interlude.local.http_gateway import to_event
from interlude.local.sqs_pump import create_queues
from interlude.local.stack import DEMO_WORKFLOW
from interlude.rules import limits as limit_rules
from interlude.store import audit as audit_items
from interlude.store.facade import Store
from interlude.store.provisioning import create_table, create_tables, entries_table_beside
from tests.integration.conftest import new_api_key
from tests.support.local_stack import wire
from tests.support.run_copies import RunCopies
from tests.support.stream import Stream

TABLE = "patched"
REPO = Path(__file__).resolve().parents[2]
PK = "T#t#R#run"


def s(value: str) -> dict[str, str]:
    return {"S": value}


# Worlds of their own: moto itself, patched and not, is under test here.
@pytest.fixture
def ddb() -> Iterator[Any]:
    moto_patches.apply()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        yield client


def fill(ddb: Any, count: int) -> None:
    """`count` items in partitions of their own, none of which a call below names."""
    for start in range(0, count, 25):
        ddb.batch_write_item(
            RequestItems={
                TABLE: [
                    {"PutRequest": {"Item": {"pk": s(f"T#t#R#other{i}"), "sk": s("RUN"), "state": s("x" * 200)}}}
                    for i in range(start, min(count, start + 25))
                ]
            }
        )


def run_items(ddb: Any) -> None:
    ddb.put_item(TableName=TABLE, Item={"pk": s(PK), "sk": s("RUN"), "version": {"N": "1"}})
    ddb.put_item(TableName=TABLE, Item={"pk": s(PK), "sk": s("I#review"), "status": s("open")})
    for seq in range(3):
        ddb.put_item(TableName=TABLE, Item={"pk": s(PK), "sk": s(f"E#{seq:012d}"), "events": s(f"batch {seq}")})


def transition(run_version: int, event_seq: int) -> list[dict[str, Any]]:
    """What a resolve commits: the run (versioned), a new event batch, the interrupt closed if still open."""
    return [
        {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": s(PK), "sk": s("RUN")},
                "UpdateExpression": "SET version = :next",
                "ConditionExpression": "version = :seen",
                "ExpressionAttributeValues": {":next": {"N": str(run_version + 1)}, ":seen": {"N": str(run_version)}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        {
            "Put": {
                "TableName": TABLE,
                "Item": {"pk": s(PK), "sk": s(f"E#{event_seq:012d}"), "events": s("resolved")},
                "ConditionExpression": "attribute_not_exists(sk)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": s(PK), "sk": s("I#review")},
                "UpdateExpression": "SET #st = :done",
                "ConditionExpression": "#st = :open",
                "ExpressionAttributeNames": {"#st": "status"},
                "ExpressionAttributeValues": {":done": s("resolved"), ":open": s("open")},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    ]


def query_events(ddb: Any, **extra: Any) -> dict[str, Any]:
    return ddb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
        ExpressionAttributeValues={":pk": s(PK), ":e": s("E#")},
        **extra,
    )


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts the work moto does: items deep-copied, and key/value comparisons (each item examined costs some)."""
    counted: Counter[str] = Counter()

    def counting(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, wrapper)

    counting(Item, "__deepcopy__")
    for name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        counting(DynamoType, name)
    return counted


def cost_with(ddb: Any, work: Counter[str], others: int) -> tuple[Counter[str], Counter[str]]:
    fill(ddb, others)
    run_items(ddb)
    work.clear()
    ddb.transact_write_items(TransactItems=transition(1, 3))
    transaction = Counter(work)
    work.clear()
    got = query_events(ddb)
    assert [i["events"]["S"] for i in got["Items"]] == ["batch 0", "batch 1", "batch 2", "resolved"]
    return transaction, Counter(work)


def test_a_transaction_and_a_query_cost_the_same_at_10_and_2000_other_items(work):
    moto_patches.apply()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        small = cost_with(client, work, 10)
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        large = cost_with(client, work, 2000)
    transaction, query = small
    assert transaction["__deepcopy__"] <= 2 * 2  # each updated item: moto's stream image and its undo copy
    assert query["__deepcopy__"] == 4  # the items returned
    assert large == small


def scan_page_work(work: Counter[str], others: int) -> Counter[str]:
    """What the second page of a paged Scan (the local TTL's read) makes moto compare and copy."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        fill(client, others)
        first = client.scan(TableName=TABLE, Limit=3)
        work.clear()
        page = client.scan(TableName=TABLE, Limit=5, ExclusiveStartKey=first["LastEvaluatedKey"])
        assert page["Count"] == 5
        assert "LastEvaluatedKey" in page
        return Counter(work)


def test_a_scan_page_costs_the_same_in_a_table_of_10_and_of_1000_items(work):
    """moto sorted the whole table and compared every item up to the page's start for each page: each tick of the
    local TTL (four pages) held the stack's moto for seconds beside 5,000 runs."""
    moto_patches.apply()
    small = scan_page_work(work, 10)
    assert scan_page_work(work, 1000) == small
    assert small["__deepcopy__"] == 5  # the items returned


def test_a_failed_condition_cancels_every_item_with_its_reason_and_old_image(ddb):
    run_items(ddb)
    ddb.transact_write_items(TransactItems=transition(1, 3))  # another decision won first
    before = sorted(ddb.scan(TableName=TABLE)["Items"], key=lambda i: i["sk"]["S"])
    stream_before = stream_records(ddb)
    # The run update and the new event batch pass and are applied before the closed interrupt fails.
    stale = transition(2, 4)
    with pytest.raises(ClientError) as lost:
        ddb.transact_write_items(TransactItems=stale)
    error = lost.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    reasons = error["CancellationReasons"]
    assert [r["Code"] for r in reasons] == ["None", "None", "ConditionalCheckFailed"]
    assert reasons[2]["Item"]["status"] == s("resolved")  # ALL_OLD: what won
    after = sorted(ddb.scan(TableName=TABLE)["Items"], key=lambda i: i["sk"]["S"])
    assert after == before  # the run update and the new event batch were undone
    assert stream_records(ddb) == stream_before  # and left nothing on the stream


def test_serialised_rivals_on_one_interrupt_have_one_winner(ddb):
    run_items(ddb)
    outcomes = []
    for rival in (transition(1, 3), transition(1, 3)):  # both read version 1 and the gate open
        try:
            ddb.transact_write_items(TransactItems=rival)
            outcomes.append("won")
        except ClientError as exc:
            reasons = exc.response["CancellationReasons"]
            outcomes.append([r["Code"] for r in reasons])
            assert reasons[0]["Item"]["version"] == {"N": "2"}
            assert reasons[1]["Item"]["events"] == s("resolved")
    assert outcomes == ["won", ["ConditionalCheckFailed"] * 3]
    run = ddb.get_item(TableName=TABLE, Key={"pk": s(PK), "sk": s("RUN")})["Item"]
    assert run["version"] == {"N": "2"}


def test_an_invalid_entry_undoes_the_entries_before_it_and_is_reported_as_moto_does(ddb):
    run_items(ddb)
    before = ddb.scan(TableName=TABLE)["Items"]
    entries = transition(1, 3)[:2] + [
        {"Put": {"TableName": TABLE, "Item": {"pk": s(PK), "sk": s("big"), "blob": s("x" * 410_000)}}}
    ]
    with pytest.raises(ClientError) as refused:
        ddb.transact_write_items(TransactItems=entries)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "size" in refused.value.response["Error"]["Message"]
    assert ddb.scan(TableName=TABLE)["Items"] == before
    with pytest.raises(ClientError) as twice:
        ddb.transact_write_items(TransactItems=transition(1, 3)[:1] * 2)
    assert "multiple operations on one item" in twice.value.response["Error"]["Message"]
    assert ddb.scan(TableName=TABLE)["Items"] == before


def test_a_cancelled_transaction_restores_deleted_and_created_items(ddb):
    run_items(ddb)
    before = ddb.scan(TableName=TABLE)["Items"]
    entries = [
        {"Delete": {"TableName": TABLE, "Key": {"pk": s(PK), "sk": s("E#000000000000")}}},
        {"Put": {"TableName": TABLE, "Item": {"pk": s("T#t#R#new"), "sk": s("RUN")}}},
        {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": s(PK), "sk": s("I#new")},
                "UpdateExpression": "SET a = :a",
                "ExpressionAttributeValues": {":a": s("b")},
            }
        },
        {
            "ConditionCheck": {
                "TableName": TABLE,
                "Key": {"pk": s(PK), "sk": s("RUN")},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
    ]
    with pytest.raises(ClientError) as lost:
        ddb.transact_write_items(TransactItems=entries)
    assert [r["Code"] for r in lost.value.response["CancellationReasons"]] == [
        "None",
        "None",
        "None",
        "ConditionalCheckFailed",
    ]
    assert ddb.scan(TableName=TABLE)["Items"] == before


def test_a_query_reads_its_partition_in_order_with_limits_filters_and_pages(ddb):
    fill(ddb, 30)
    run_items(ddb)
    ddb.put_item(TableName=TABLE, Item={"pk": s(PK + "x"), "sk": s("E#000000000001"), "events": s("neighbour")})
    assert [i["events"]["S"] for i in query_events(ddb, ScanIndexForward=False)["Items"]] == [
        "batch 2",
        "batch 1",
        "batch 0",
    ]
    first = query_events(ddb, Limit=2)
    assert [i["events"]["S"] for i in first["Items"]] == ["batch 0", "batch 1"]
    rest = query_events(ddb, Limit=2, ExclusiveStartKey=first["LastEvaluatedKey"])
    assert [i["events"]["S"] for i in rest["Items"]] == ["batch 2"]
    filtered = ddb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :e)",
        FilterExpression="events = :b",
        ExpressionAttributeValues={":pk": s(PK), ":e": s("E#"), ":b": s("batch 1")},
    )
    assert [i["events"]["S"] for i in filtered["Items"]] == ["batch 1"]
    assert filtered["ScannedCount"] == 3
    between = ddb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
        ExpressionAttributeValues={":pk": s(PK), ":lo": s("E#000000000001"), ":hi": s("E#999999999999")},
    )
    assert [i["events"]["S"] for i in between["Items"]] == ["batch 1", "batch 2"]
    missing = ddb.query(TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": s("no")})
    assert missing["Items"] == []


def test_an_index_query_still_reads_the_index(ddb):
    fill(ddb, 5)
    ddb.put_item(
        TableName=TABLE, Item={"pk": s(PK), "sk": s("I#a"), "gsi1pk": s("T#t#INBOX"), "gsi1sk": s("2026-01-01#a")}
    )
    got = ddb.query(
        TableName=TABLE,
        IndexName="inbox",
        KeyConditionExpression="gsi1pk = :g",
        ExpressionAttributeValues={":g": s("T#t#INBOX")},
    )
    assert [i["sk"]["S"] for i in got["Items"]] == ["I#a"]


def index_query_work(work: Counter[str], others: int) -> Counter[str]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, TABLE)
        fill(client, others)
        for n in range(3):
            item = {"pk": s(f"K#{n}"), "sk": s("KEY"), "gsi1pk": s("T#t#KEYS"), "gsi1sk": s(f"2026-01-0{n + 1}")}
            client.put_item(TableName=TABLE, Item=item)
        work.clear()
        got = client.query(
            TableName=TABLE,
            IndexName="inbox",
            KeyConditionExpression="gsi1pk = :g",
            ExpressionAttributeValues={":g": s("T#t#KEYS")},
        )
        assert [i["pk"]["S"] for i in got["Items"]] == ["K#0", "K#1", "K#2"]
        return Counter(work)


def test_an_index_query_compares_only_the_items_carrying_its_key(work):
    """moto sorted the whole table by key for every index query (the audit-checkpoint sweep stalled the local stack
    for seconds once it held 5,000 runs); the items without the index's key are now passed over unsorted."""
    assert index_query_work(work, 2000) == index_query_work(work, 10)


def stream_records(ddb: Any) -> list[str]:
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    arn = ddb.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    got = streams.get_records(ShardIterator=iterator["ShardIterator"], Limit=1000)
    return [r["dynamodb"]["SequenceNumber"] for r in got["Records"]]


def test_a_table_without_a_sort_key_is_undone_and_queried_the_same_way(ddb):
    ddb.create_table(
        TableName="flat",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )
    ddb.put_item(TableName="flat", Item={"id": s("a"), "n": {"N": "1"}})
    before = ddb.scan(TableName="flat")["Items"]
    entries = [
        {
            "Update": {
                "TableName": "flat",
                "Key": {"id": s("a")},
                "UpdateExpression": "SET n = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
            }
        },
        {"Put": {"TableName": "flat", "Item": {"id": s("b")}}},
        {"Put": {"TableName": "flat", "Item": {"id": s("c")}, "ConditionExpression": "attribute_exists(id)"}},
    ]
    with pytest.raises(ClientError):
        ddb.transact_write_items(TransactItems=entries)
    assert ddb.scan(TableName="flat")["Items"] == before
    got = ddb.query(TableName="flat", KeyConditionExpression="id = :a", ExpressionAttributeValues={":a": s("a")})
    assert got["Items"] == before


def test_one_update_text_serves_many_items_and_a_bad_one_is_refused_every_time(ddb):
    """Update expressions are parsed once per text: the same text applied to two items changes each with its own
    values, and a text that does not parse is refused on each request, not remembered as valid."""
    for key in ("I#a", "I#b"):
        ddb.put_item(TableName=TABLE, Item={"pk": s(PK), "sk": s(key), "status": s("open"), "n": {"N": "1"}})
    for key, value in (("I#a", "first"), ("I#b", "second")):
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"pk": s(PK), "sk": s(key)},
                        "UpdateExpression": "SET #st = :v ADD n :one",
                        "ConditionExpression": "#st = :open",
                        "ExpressionAttributeNames": {"#st": "status"},
                        "ExpressionAttributeValues": {":v": s(value), ":one": {"N": "1"}, ":open": s("open")},
                    }
                }
            ]
        )
    got = {i["sk"]["S"]: (i["status"]["S"], i["n"]["N"]) for i in ddb.scan(TableName=TABLE)["Items"]}
    assert got == {"I#a": ("first", "2"), "I#b": ("second", "2")}
    for _ in range(2):
        with pytest.raises(ClientError) as refused:
            ddb.update_item(
                TableName=TABLE,
                Key={"pk": s(PK), "sk": s("I#a")},
                UpdateExpression="SET = :v",
                ExpressionAttributeValues={":v": s("x")},
            )
        assert refused.value.response["Error"]["Code"] == "ValidationException"


# -- SQS: a call costs the messages it moves -------------------------------------------------------------------------


def queue_call_work(others: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Counter[str]]:
    """How many looks at a message (its visibility, its delay, its receipt handles) each call a queue pump makes costs
    moto: ten messages sent behind `others` queued ones, then ten received, kept invisible and deleted."""
    looks: Counter[str] = Counter()
    for name in ("visible", "delayed"):
        counted = getattr(Message, name)
        monkeypatch.setattr(Message, name, property(lambda m, f=counted.fget, n=name: looks.update([n]) or f(m)))
    handles = Message.had_receipt_handle
    monkeypatch.setattr(Message, "had_receipt_handle", lambda m, h: looks.update(["handle"]) or handles(m, h))
    steps: dict[str, Counter[str]] = {}
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="costs", Attributes={"VisibilityTimeout": "360"})["QueueUrl"]
        for start in range(0, others, 10):
            batch = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(start, min(others, start + 10))]
            sqs.send_message_batch(QueueUrl=url, Entries=batch)
        looks.clear()
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "last"} for i in range(10)])
        steps["send"] = Counter(looks)
        looks.clear()
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        assert sorted(m["Body"] for m in got) == sorted(f"m{i}" for i in range(10))  # the oldest
        steps["receive"] = Counter(looks)
        looks.clear()
        entries: Any = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 360} for i, m in enumerate(got)]
        sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        steps["change visibility"] = Counter(looks)
        looks.clear()
        done = sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": e["Id"], "ReceiptHandle": e["ReceiptHandle"]} for e in entries])
        assert len(done["Successful"]) == 10
        steps["delete"] = Counter(looks)
    return steps


def test_a_queue_call_examines_the_same_messages_in_a_queue_of_10_and_of_300(monkeypatch):
    """SQS costs the same per message however long the queue; moto looked at every message of the queue for each
    message sent, received or deleted (the outbox of 5,000 seeded runs held the local stack's moto for minutes).
    Messages in flight before the ones a receive takes still cost a look each: as many as the consumers hold."""
    moto_patches.apply()
    small = queue_call_work(10, monkeypatch)
    large = queue_call_work(300, monkeypatch)
    assert large == small
    assert small["send"] == Counter()  # a send reads one attribute, not the queue's counts
    assert small["delete"]["handle"] == 0  # a receipt handle finds its message at once


# -- a whole lifecycle ------------------------------------------------------------------------------


def api_call(bearer: str, method: str, path: str, body: Any = None, idempotency_key: str | None = None) -> Any:
    headers = {"authorization": f"Bearer {bearer}", "content-type": "application/json", "host": "127.0.0.1"}
    if idempotency_key:
        headers["idempotency-key"] = idempotency_key
    raw = b"" if body is None else json.dumps(body).encode()
    answer = lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))
    assert answer["statusCode"] in (200, 201), answer
    return json.loads(answer["body"])


def lifecycle_work(
    work: Counter[str], existing: int, round_: int, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Counter[str]]:
    """What moto does for each step of one approval lifecycle (the second: caches warm) once `existing` runs
    (half waiting in the inbox, half resolved) are in the table: create and resolve with an Idempotency-Key,
    the run read, and dispatch of each step's stream records."""
    table = f"lifecycle-{existing}"
    lambda_runtime.fresh_instances()
    # Each run, key or tenant its own audit chain, in the order they first append, the same in both worlds: a decision's
    # append reads back its chain when another member's entry went there within the clock slack, which with hashed
    # chains happens to one world's ids and not the other's (a few per cent of runs).
    chains: dict[str, int] = {}
    monkeypatch.setattr(audit_items, "chain_of_member", lambda member: chains.setdefault(member, len(chains)))
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        entries = create_tables(client, table)[1]
        # The queues dispatch sends to (a completed run's retention turn, issue 30 item 4): SQS, not counted here.
        queues = create_queues(boto3.client("sqs", region_name="us-east-1"), table)
        for queue in wiring.QUEUES:
            monkeypatch.setenv(queue.url_env, queues[queue.name])
        forget_settings()
        services = Services(Store(table, entries, client))
        bearer = new_api_key(services, tenant="demo")
        principal = services.keys.authenticate(f"Bearer {bearer}")
        services.workflows.put_workflow(principal, "demo-approval", WorkflowDefinition.model_validate(DEMO_WORKFLOW))
        templates = []
        for n in range(4):
            run = services.lifecycle.create_run(principal, CreateRunRequest.model_validate({"workflowId": "demo-approval"}))
            if n % 2:
                services.decisions.resolve_interrupt(principal, run.runId, "review", {"action": "accept"})
            templates.append(run.runId)
        RunCopies(client, table, templates).write(existing - len(templates))
        stream = Stream(table)
        stream.take()  # the existing runs' records: dispatch has nothing to do for them
        steps: dict[str, Counter[str]] = {}
        for n in range(2):
            work.clear()
            run_id = wire(
                api_call(bearer, "POST", "/runs", {"workflowId": "demo-approval"}, f"lifecycle-create-{round_}-{n}-0123456789")["runId"]
            )
            steps["create"] = Counter(work)
            work.clear()
            assert api_call(bearer, "GET", f"/runs/{run_id}")["status"] == "waiting-approval"
            steps["get"] = Counter(work)
            work.clear()
            stream.pump()
            steps["dispatch after create"] = Counter(work)
            work.clear()
            body = {"resumeValue": {"action": "accept"}}
            api_call(bearer, "POST", f"/runs/{run_id}/interrupts/review", body, f"lifecycle-resolve-{round_}-{n}-0123456789")
            steps["resolve"] = Counter(work)
            work.clear()
            stream.pump()
            steps["dispatch after resolve"] = Counter(work)
        assert api_call(bearer, "GET", f"/runs/{run_id}")["status"] == "completed"
    return steps


def test_a_lifecycle_through_the_api_and_dispatch_costs_the_same_beside_10_and_400_runs(work, monkeypatch):
    """Every path a lifecycle takes — the key and request counter, the workflow pointer, the transactions, the
    inbox entries (BatchWriteItem), the run index, the audit head, idempotency records, dispatch's queries —
    walks, copies and compares as many items whatever the table holds."""
    walked = Table.all_items  # moto_patches' partition-scoped version; index queries and scans walk every item

    def counting_walk(self: Table) -> Iterator[Item]:
        for item in walked(self):  # a Scan's items come as moto's loop takes them
            work["items walked"] += 1
            yield item

    monkeypatch.setattr(Table, "all_items", counting_walk)
    # The key and the tenant's limits are re-read every few seconds: on a slow machine a step could pay a re-read
    # the other world's did not. Held for the test, each world reads them the same number of times.
    monkeypatch.setattr(app_keys, "time", SimpleNamespace(monotonic=lambda: 0.0))  # the key cache's clock stands still
    monkeypatch.setattr(app_limits, "LIMITS_CACHE_SECONDS", 3600.0)
    # And every request counts into one rate window: a step that opened a new window item would copy one item less.
    window = limit_rules.window_of(time.time())
    monkeypatch.setattr(limit_rules, "window_of", lambda _now: window)
    monkeypatch.setenv(wiring.TABLE_NAME_ENV, "lifecycle-10")
    monkeypatch.setenv(wiring.ENTRIES_TABLE_NAME_ENV, entries_table_beside("lifecycle-10"))
    small = lifecycle_work(work, 10, 0, monkeypatch)
    monkeypatch.setenv(wiring.TABLE_NAME_ENV, "lifecycle-400")
    monkeypatch.setenv(wiring.ENTRIES_TABLE_NAME_ENV, entries_table_beside("lifecycle-400"))
    large = lifecycle_work(work, 400, 1, monkeypatch)
    for step, cost in small.items():
        assert large[step]["items walked"] == cost["items walked"], step
        assert large[step]["__deepcopy__"] == cost["__deepcopy__"], step
        # Comparisons vary a little with the ids drawn (a partition's few items sorted, dict probes): a margin far
        # below what one walk of 400 runs' items would add.
        compared = sum(n for name, n in cost.items() if name.startswith("__") and name != "__deepcopy__")
        compared_large = sum(n for name, n in large[step].items() if name.startswith("__") and name != "__deepcopy__")
        assert compared_large <= 2 * compared + 10, (step, cost, large[step])


# -- the same answers as moto's own ---------------------------------------------------------------------------------


def scenario_outcome(patched: bool) -> dict[str, Any]:
    """tests/support/moto_scenarios.py in a fresh interpreter: this process's moto is patched for good."""
    command = [sys.executable, "-m", "tests.support.moto_scenarios", *(["--patched"] if patched else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def test_patched_moto_answers_as_moto_does_for_updates_conditions_and_transactions():
    """Every update, condition, transaction and read of the scenarios (each twice, so remembered parses and checks
    are met) answers, refuses, leaves the table and writes the stream exactly as unpatched moto does."""
    patched, plain = scenario_outcome(True), scenario_outcome(False)
    answers = patched["answers"]
    for n, (got, expected) in enumerate(zip(answers, plain["answers"], strict=True)):
        assert got == expected, n
    assert patched["table"] == plain["table"]
    assert patched["flat"] == plain["flat"]
    assert patched["stream"] == plain["stream"]
    # old images too, on a table whose stream keeps them (an update's is the item it replaced), each as the item was
    # when the record was made though the records are read after later changes to the same items
    images = patched["images stream"]
    assert images == plain["images stream"]
    assert [r["eventName"] for r in images[:6]] == ["INSERT", "MODIFY", "MODIFY"] * 2
    later = [r["dynamodb"] for r in images if r["dynamodb"]["Keys"]["id"]["S"] == "first#later"]
    assert later[0]["NewImage"]["m"] == {"M": {"a": {"L": [{"N": "1"}]}}}
    assert [image["NewImage"]["c"]["N"] for image in later] == ["1", "1", "1", "2", "3", "3"]
    created = [r["dynamodb"] for r in images if r["dynamodb"]["Keys"]["id"]["S"] == "first#created"]
    assert created[0]["NewImage"] == {"id": {"S": "first#created"}}  # moto's put before its update, keys only
    sizes = patched["sizes counted as at creation"]
    assert sizes == plain["sizes counted as at creation"] == [True] * len(patched["stream"])
    image_sizes = patched["images sizes counted as at creation"]
    assert image_sizes == plain["images sizes counted as at creation"] == [True] * len(images)
    # The scenarios reach what they are meant to: refusals of each kind, and a cancellation naming its reasons.
    codes = Counter(a.get("error") or a.get("raised") or "ok" for a in answers)
    assert codes["ValidationException"] >= 20, codes
    assert codes["ConditionalCheckFailedException"] >= 6, codes
    cancelled = [a for a in answers if a.get("error") == "TransactionCanceledException"]
    assert [r["Code"] for r in cancelled[0]["reasons"]] == ["None", "None", "ConditionalCheckFailed", "None", "None"]
    assert cancelled[0]["reasons"][2]["Item"]["status"] == {"S": "resolved"}
