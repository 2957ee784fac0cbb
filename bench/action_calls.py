"""Print the AWS calls a gated core.http action makes: the outbox per transition, the worker per message.

Runs the real dispatch and actions handlers against moto in-process with a receiver on 127.0.0.1 (the
development-only loopback switch is on here). Usage: .venv/bin/python bench/action_calls.py
"""

from __future__ import annotations

from _bench import Calls, fmt, offline_aws

offline_aws(
    TABLE_NAME="interlude-test", ENTRIES_TABLE_NAME="interlude-test-entries",
    PUBLIC_BASE_URL="https://interlude.example.com",
    INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS="1",
    INTERLUDE_ACTION_BACKOFF_BASE_S="0",
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
from tests.integration.test_actions import ENTRIES_TABLE, TABLE, workflow  # noqa: E402
from tests.support.receiver import Receiver  # noqa: E402
from tests.support.stream import Stream  # noqa: E402
from tests.support.stream import dispatch as dispatch_outbox  # noqa: E402

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
        boto3.client("secretsmanager").create_secret(Name="interlude/actions/bench/api", SecretString="Bearer x")
        services = Services(Store(TABLE, ENTRIES_TABLE))
        created = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        admin = services.keys.authenticate(f"Bearer {created['apiKey']}")
        plain = workflow(receiver.url())
        services.workflows.put_workflow(admin, "refund", WorkflowDefinition.model_validate(plain))
        keyed = {**workflow(receiver.url(), secretHeaders={"Authorization": "api"}), "id": "refund-auth"}
        services.workflows.put_workflow(admin, "refund-auth", WorkflowDefinition.model_validate(keyed))
        stream, pump = Stream(TABLE), QueuePump("actions", urls["actions"])
        rows = []

        def dispatch(again: bool = False) -> None:
            fresh = stream.take(again)
            if fresh:
                dispatch_outbox(fresh)

        def approved(workflow_id: str) -> None:
            request = CreateRunRequest.model_validate({"workflowId": workflow_id, "inputs": {"orderId": "o-1"}})
            run_id = services.lifecycle.create_run(admin, request).runId
            services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
            dispatch()
            calls.take()

        approved("refund")
        pump.pump_once()
        rows.append(("actions, one action performed and its outcome landed", calls.take()))
        dispatch()  # the transition the outcome wrote: nothing to queue
        dispatch(again=True)  # every record again: the action is queued a second time
        calls.take()
        pump.pump_once()
        rows.append(("actions, a duplicate message (the visit no longer waits)", calls.take()))
        approved("refund-auth")
        pump.pump_once()
        rows.append(("actions, one action with an auth header from Secrets Manager", calls.take()))
        receiver.script[:] = [503]
        approved("refund")
        pump.pump_once()
        rows.append(("actions, one failed attempt (released, retry scheduled)", calls.take()))
        for what, counted in rows:
            print(f"{what:62s} {fmt(counted)}")
        print("(the functions' own calls; the local SQS mapping's ReceiveMessage/DeleteMessageBatch, what Lambda's poller does for free, are not counted)")
    receiver.close()


if __name__ == "__main__":
    main()
