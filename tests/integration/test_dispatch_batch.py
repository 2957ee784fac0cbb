"""The outbox consumer as a batch consumer (issue 31 item 2): the real dispatch handler, handed a batch of several runs'
records as the outbox queue hands it, reads each run's head once, runs the runs side by side and each run's records
in order, and reports a failure for that record alone (and the records of its run after it)."""

from __future__ import annotations

import json
import os
from collections import Counter
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.app import keys as app_keys
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store.layout import run_pk
from interlude.store.stream import stream_events
from interlude.store.tenants import TenantRecords
from tests.integration.conftest import clear_of_a_month_end
from tests.support.dynamodb_reads import Request, keys_read, recorded
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import TABLE
from tests.support.queues import queued
from tests.support.stream import Stream, outbox_event

# Loopback callbacks are allowed here; nothing listens: the notices stay queued.
RECEIVER = "http://127.0.0.1:9/hook"


@pytest.fixture(autouse=True)
def _loopback_callbacks(monkeypatch):
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    monkeypatch.setenv("PUBLIC_BASE_URL", "https://interlude.example.com")


def gate_runs(services: Any, admin: Any, count: int, resolved: bool = True, callback_url: str = RECEIVER) -> list[str]:
    """`count` runs of an approval gate with a callback URL (so the outbox queues notices, counts time to decision and
    meters usage from the head), each resolved when `resolved`: two event items a run."""
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    request = CreateRunRequest.model_validate({"workflowId": definition["id"], "callbackUrl": callback_url})
    runs = [services.lifecycle.create_run(admin, request).runId for _ in range(count)]
    if resolved:
        for run_id in runs:
            services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    return runs


def head_reads(requests: list[Request]) -> Counter[str]:
    """Every read of a run head among `requests`, by the run's partition key (GetItem, and each key of a BatchGetItem)."""
    return Counter(pk for _, pk, sk in keys_read(requests) if sk == layout.RUN_SK)


def test_a_batch_reads_each_runs_head_once_for_all_its_records_and_handlers(services, admin, monkeypatch):
    # Given three resolved gate runs whose six event items (created, resolved) sit in one outbox batch
    runs = gate_runs(services, admin, 3)
    records = Stream(TABLE).take()
    event = outbox_event(records)
    assert len(event["Records"]) == 6
    sent = recorded(monkeypatch)

    # When the dispatch function takes the batch
    answer = lambda_runtime.invoke("dispatch", event)
    reads = head_reads(sent)

    # Then every record was handled, and each run's head was read once for the whole batch (not once per handler,
    # issue 31): the retention turn its end takes here reads it no other way, the run having ended within its items'
    # margin (ADR 0176: decided on the head the batch read)
    assert answer == {"batchItemFailures": []}
    assert sorted(reads.values()) == [1, 1, 1]
    assert len(reads) == len(runs)


def test_a_failing_record_fails_alone_and_holds_back_only_its_runs_later_records(
    services, admin, monkeypatch, tenant, clock_file
):
    clear_of_a_month_end(clock_file)  # the runs' usage is read back by the clock's month
    # Given two resolved gate runs, two event items each, in one batch, and the first item of the first run failing
    # once (its callback notice cannot be queued)
    first, second = gate_runs(services, admin, 2)
    records = Stream(TABLE).take()
    event = outbox_event(records)
    items = [stream_events(r) for r in records if stream_events(r) is not None]
    by_message = {r["messageId"]: item[0] for r, item in zip(event["Records"], items, strict=True)}
    failing = next(m for m, run in by_message.items() if run == first)
    original = BaseClient._make_api_call
    faults = []

    def failing_once(client: Any, operation: str, params: dict[str, Any]) -> Any:
        if operation == "SendMessageBatch" and not faults and first in json.dumps(params["Entries"]):
            faults.append(operation)
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, operation)
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", failing_once)

    # When the dispatch function takes the batch
    answer = lambda_runtime.invoke("dispatch", event)

    # Then the failing record and the later record of its run are reported (in order), the other run's are not
    failed = [f["itemIdentifier"] for f in answer["batchItemFailures"]]
    assert failed == [m for m, run in by_message.items() if run == first]
    assert failed[0] == failing
    assert all(by_message[m] == second for m in by_message if m not in failed)

    # And when SQS hands the two reported messages out again, they succeed, and each run counts once in its tenant's
    # usage (billed by the run's own transactions, whatever the outbox's deliveries): one lifecycle and one decision
    again = {"Records": [r for r in event["Records"] if r["messageId"] in failed]}
    assert lambda_runtime.invoke("dispatch", again) == {"batchItemFailures": []}
    usage = TenantRecords(services.store).usage([tenant], services.clock().strftime("%Y-%m"))[tenant]
    assert (usage.counts["lifecycles"], usage.counts["decisions"]) == (2, 2)


def test_a_warm_dispatch_mints_its_notices_links_without_reading_the_key_that_created_their_runs_again(
    services, admin, monkeypatch
):
    # Given a dispatch instance that has taken a batch of notices of runs one key created
    sent = recorded(monkeypatch)

    def key_reads() -> int:
        return sum(1 for operation, _, sk in keys_read(sent) if operation == "GetItem" and sk == layout.API_KEY_SK)

    monkeypatch.setattr(app_keys, "time", SimpleNamespace(monotonic=lambda: 0.0))  # within its period however slow
    lambda_runtime.fresh_instances()
    gate_runs(services, admin, 1, resolved=False)
    assert lambda_runtime.invoke("dispatch", outbox_event(Stream(TABLE).take())) == {"batchItemFailures": []}
    assert key_reads() == 1
    # When it takes the next batch, three more such runs' notices, within the key cache's period
    gate_runs(services, admin, 3, resolved=False)
    assert lambda_runtime.invoke("dispatch", outbox_event(Stream(TABLE).take())) == {"batchItemFailures": []}
    # Then their links were minted on the key as it read it, through the cache the API reads keys through (ADR 0177)
    assert key_reads() == 1


def test_a_notices_message_says_what_its_record_is_created_with_to_expire_as_dispatch_read_the_head(services, admin):
    # Given a run decided and ended, its two event items in one outbox batch
    (run_id,) = gate_runs(services, admin, 1)
    event = outbox_event(Stream(TABLE).take())
    queue = os.environ[wiring.queue("callbacks").url_env]
    boto3.client("sqs").purge_queue(QueueUrl=queue)
    # When the dispatch function takes it
    assert lambda_runtime.invoke("dispatch", event) == {"batchItemFailures": []}
    # Then each notice's message says the run's expiry, as the head read with the batch holds it (ADR 0178)
    head = boto3.client("dynamodb").get_item(TableName=TABLE, Key=a.key(run_pk(run_id), "RUN"), ConsistentRead=True)
    said = [json.loads(m["Body"]).get(layout.CREATED_EXPIRY) for m in queued(queue)]
    assert said
    assert all(s == {"ttl": int(head["Item"]["ttl"]["N"])} for s in said), said
