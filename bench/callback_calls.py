"""Print the AWS calls callback delivery makes: the outbox per transition, the worker per attempt.

Runs the real dispatch and callbacks handlers against moto in-process with a receiver on 127.0.0.1 (the
development-only loopback switch is on here). Usage: .venv/bin/python bench/callback_calls.py
"""

from __future__ import annotations

import json
from collections import Counter

from _bench import Calls, fmt, offline_aws

offline_aws(
    TABLE_NAME="interlude-test", ENTRIES_TABLE_NAME="interlude-test-entries",
    PUBLIC_BASE_URL="https://interlude.example.com",
    INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS="1",
    INTERLUDE_CALLBACK_BACKOFF_BASE_S="0",
    KEY_RING_SECRET="bench/token-keys",
    POWERTOOLS_LOG_LEVEL="ERROR",
    AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import sdk_clients, wiring  # noqa: E402
from interlude.adapters.keyring_store import ensure_key_ring  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.domain.models.requests import CreateKeyRequest, CreateRunRequest  # noqa: E402
from interlude.domain.models.workflow import WorkflowDefinition  # noqa: E402
from interlude.local.sqs_pump import QueuePump, create_queues, export_queue_urls  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from tests.integration.test_callbacks import ENTRIES_TABLE, TABLE  # noqa: E402
from tests.support.local_stack import FIXTURES  # noqa: E402
from tests.support.receiver import Receiver  # noqa: E402
from tests.support.stream import Stream  # noqa: E402
from tests.support.stream import dispatch as dispatch_outbox  # noqa: E402

FIXTURE = FIXTURES / "conformance-approval.json"
COUNTED = ("dynamodb", "sqs", "secretsmanager")


def main() -> None:
    receiver = Receiver().start()
    with mock_aws():
        # A session made after moto started (its stubber in place): the one the functions' clients come from.
        sdk_clients.forget_clients()
        calls = Calls(services=COUNTED, qualified=True)
        calls.watch(sdk_clients.session())
        create_tables(boto3.client("dynamodb"), TABLE)
        urls = create_queues(boto3.client("sqs"), "bench")
        export_queue_urls(urls)
        ensure_key_ring("bench/token-keys")
        services = Services(Store(TABLE, ENTRIES_TABLE))
        created = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        admin = services.keys.authenticate(f"Bearer {created['apiKey']}")
        definition = json.loads(FIXTURE.read_text())
        services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
        # Batches as the callbacks queue's event source mapping makes them (a batch of 1 would count a row's
        # notices in the rows after it).
        stream, pump = Stream(TABLE), QueuePump("callbacks", urls["callbacks"], batch_size=wiring.CALLBACK_BATCH_SIZE)
        rows = []

        def dispatch(again: bool = False) -> Counter[str]:
            # Only the dispatch handler is counted, not the harness reading the stream.
            fresh = stream.take(again)
            calls.take()
            dispatch_outbox(fresh)
            return calls.take()

        def run(callback: str):
            return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"], "callbackUrl": callback})).runId

        run_id = run(receiver.url())
        rows.append(("dispatch, transition raising an interrupt (1 notice, token minted)", dispatch()))
        pump.pump_once()
        rows.append(("callbacks, first delivery of a tenant (secret created)", calls.take()))
        services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
        rows.append(("dispatch, transition deciding and ending the run (2 notices)", dispatch()))
        pump.pump_once()
        rows.append(("callbacks, its 2 notices delivered: one message, one record (warm secret; ADR 0155)", calls.take()))
        dispatch(again=True)
        pump.pump_once()
        rows.append(("callbacks, both transitions' messages again (already delivered)", calls.take()))
        receiver.script[:] = [500]
        run(receiver.url())
        dispatch()
        pump.pump_once()
        rows.append(("callbacks, one failed attempt (retry scheduled)", calls.take()))
        for what, counted in rows:
            print(f"{what:84s} {fmt(counted)}")
        print("(the functions' own calls; the local SQS mapping's ReceiveMessage/DeleteMessageBatch, what Lambda's poller does for free, are not counted)")
    receiver.close()


if __name__ == "__main__":
    main()
