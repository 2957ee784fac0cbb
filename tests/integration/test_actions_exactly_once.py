"""Issue 15's Show: a core.http action after an approval is performed exactly once against a loopback receiver
(development mode) while every stream record and every queue message is delivered twice and the worker is killed
once mid-call.

moto runs as a server on 127.0.0.1 (the local stack's, serialised), so a worker in another process can share it:
the first attempt runs the real actions handler in a child process, which is SIGKILLed while the receiver holds
its request. Everything else runs the real dispatch and actions handlers in this process, each stream batch and
each received SQS message handed over twice, as an at-least-once mapping may. The receiver may see the killed
attempt and its successor, both with the effect's Idempotency-Key; the effect is recorded once and completed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

import interlude
from interlude.adapters.keyring_store import ensure_key_ring
from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.actions import provider_key
from interlude.local import lambda_runtime
from interlude.local.moto_server import LockedMotoServer
from interlude.local.sqs_pump import create_queues, export_queue_urls, to_event_record
from interlude.local.stack import configure_environment
from interlude.store.facade import Store
from interlude.store.provisioning import create_tables, entries_table_beside
from tests.integration.conftest import signed_in
from tests.support.receiver import Receiver
from tests.support.stream import Stream, dispatch

TABLE = "interlude-once"
ENTRIES_TABLE = entries_table_beside(TABLE)
REPO = Path(__file__).resolve().parents[2]
# The killed attempt's claim runs out after connect (2 s) + the node's timeout (3 s) + this margin.
LEASE_MARGIN_S = "1"
# Runs the real actions handler on one SQS event read from stdin, in a process of its own.
CHILD = "import json, sys; from interlude.local import lambda_runtime; lambda_runtime.invoke('actions', json.load(sys.stdin))"

WORKFLOW = {
    "id": "refund",
    "name": "Refund after approval",
    "nodes": [
        {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Refund {{inputs.orderId}}?"}},
        {
            "id": "refund",
            "typeId": "core.http",
            "config": {
                "url": "RECEIVER",
                "body": {"order": "{{inputs.orderId}}"},
                "effectKey": "refund-{{inputs.orderId}}",
                "timeoutMs": 3000,
            },
        },
    ],
    "edges": [{"id": "g-r", "sourceNodeId": "gate", "targetNodeId": "refund"}],
    "variables": [{"name": "orderId", "type": "string"}],
}


# A world of its own: the worker killed mid-attempt runs in a process of its own, which reaches moto through a server.
@pytest.fixture
def world():
    saved = dict(os.environ)
    moto = LockedMotoServer().start()
    try:
        configure_environment(moto.endpoint, TABLE, ENTRIES_TABLE)
        os.environ.update(
            {
                "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1",
                "INTERLUDE_ACTION_CONNECT_TIMEOUT_S": "2",
                "INTERLUDE_ACTION_LEASE_MARGIN_S": LEASE_MARGIN_S,
                "INTERLUDE_ACTION_BACKOFF_BASE_S": "0",
                "KEY_RING_SECRET": "interlude-once/token-keys",
                "PYTHONPATH": str(Path(interlude.__file__).resolve().parents[1]),
            }
        )
        lambda_runtime.fresh_instances()
        create_tables(boto3.client("dynamodb"), TABLE, ENTRIES_TABLE)
        urls = create_queues(boto3.client("sqs"), TABLE)
        export_queue_urls(urls)
        ensure_key_ring("interlude-once/token-keys")
        yield urls
    finally:
        moto.stop()
        os.environ.clear()
        os.environ.update(saved)


def pump_stream_twice(stream: Stream) -> int:
    fresh = stream.take()
    for _ in range(2):
        if fresh:
            assert dispatch(fresh) == {"batchItemFailures": []}
    return len(fresh)


def receive(queue_url: str) -> list[dict]:
    sqs = boto3.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    got = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"])
    return [to_event_record(m, arn) for m in got.get("Messages", [])]


def deliver_twice(queue_url: str, record: dict) -> None:
    """Hand one message to the real handler twice; delete it as the mapping would once a handling succeeded."""
    succeeded = False
    for _ in range(2):
        result = lambda_runtime.invoke("actions", {"Records": [record]}) or {}
        succeeded |= not result.get("batchItemFailures")
    if succeeded:
        boto3.client("sqs").delete_message(QueueUrl=queue_url, ReceiptHandle=record["receiptHandle"])


def test_an_approved_action_is_performed_once_through_duplicates_and_a_killed_worker(world):
    # Given a receiver that holds the first request it gets (the worker will die while it waits) and answers later
    # requests 200, and a run whose approval gates a refund call
    receiver = Receiver(script=[("sleep", 60)], answer=b'{"refundId":"r-1"}', answer_type="application/json").start()
    try:
        services = Services(Store(TABLE, ENTRIES_TABLE))
        admin = signed_in(services, tenant="t1")
        definition = json.loads(json.dumps(WORKFLOW).replace("RECEIVER", receiver.url("/refunds")))
        services.workflows.put_workflow(admin, "refund", WorkflowDefinition.model_validate(definition))
        run_id = services.lifecycle.create_run(
            admin, CreateRunRequest.model_validate({"workflowId": "refund", "inputs": {"orderId": "o-1"}})
        ).runId
        stream = Stream(TABLE)
        pump_stream_twice(stream)
        services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})

        # When the outbox runs each record twice, so the action is queued twice
        pump_stream_twice(stream)
        first, *copies = receive(world["actions"])
        assert len(copies) == 1

        # And the first worker is killed mid-call
        child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, stdin=subprocess.PIPE)
        assert child.stdin is not None
        child.stdin.write(json.dumps({"Records": [first]}).encode())
        child.stdin.close()
        deadline = time.monotonic() + 90
        while not receiver.hits and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert len(receiver.hits) == 1, "the child worker never called"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)

        # And every stream record and every queue message from here on is delivered twice, until the run ends
        for record in copies:
            deliver_twice(world["actions"], record)
        deadline = time.monotonic() + 120
        while services.store.get_run(run_id)[0].status != "completed" and time.monotonic() < deadline:
            pump_stream_twice(stream)
            for record in receive(world["actions"]):
                deliver_twice(world["actions"], record)
            time.sleep(0.2)
        for _ in range(3):  # what the end of the run left on the stream and the queue, twice over
            pump_stream_twice(stream)
            for record in receive(world["actions"]):
                deliver_twice(world["actions"], record)

        # Then the run completed with the receiver's answer as the node's output
        state = services.store.get_run(run_id)[0]
        assert state.status == "completed", state.status
        output = state.outputs["refund"]
        assert (output["status"], output["body"]) == (200, {"refundId": "r-1"})
        # And the receiver saw the killed attempt and its successor only, both carrying the effect's one key
        assert len(receiver.hits) == 2
        assert {h.headers["idempotency-key"] for h in receiver.hits} == {provider_key(output["effectId"])}
        assert [json.loads(h.body) for h in receiver.hits] == [{"order": "o-1"}] * 2
        # And the effects list shows one effect, completed on its second attempt
        (effect,) = services.run_effects.run_effects(admin, run_id)["effects"]
        assert (effect["effectId"], effect["state"], effect["attempt"]) == (output["effectId"], "completed", 2)
        # And the node completed once
        completed = [e for e in services.store.read_events(run_id, -1) if e["type"] == "node.completed"]
        assert [e["nodeId"] for e in completed].count("refund") == 1
    finally:
        receiver.close()
