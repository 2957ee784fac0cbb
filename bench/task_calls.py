"""Print the AWS calls, and DynamoDB items read and written, of each task-worker call (issue 15 item 2).

The real task service (interlude.app.tasks, as the API function runs it after authentication) against moto in-process:
a claim on an empty queue and on a queue holding a task, a heartbeat (within the claim's check, and one that carries
the lease past it and so schedules one more check), a completion, a retryable and a final failure, and a completion
after the run was cancelled (before the outbox saw the cancel), the cancel of a run whose task is ready, a claim
meeting only that task, and the outbox's handling of such a cancel. The tasks are made by the real dispatch handler
from the run's records. Key checks and the request counter (every authenticated request's, bench/key_and_limit_calls.py)
are not counted. Items written: one per item a write names (a transaction's entries each, a batch's requests each);
items read: those GetItem, BatchGetItem and Query answered. Counts, not timings: the machine's load does not move them.
Usage: .venv/bin/python bench/task_calls.py
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from _bench import offline_aws

CLOCK = Path(tempfile.mkdtemp(prefix="interlude-bench-")) / "clock"
offline_aws(
    TABLE_NAME="interlude-test", ENTRIES_TABLE_NAME="interlude-test-entries",
    PUBLIC_BASE_URL="https://interlude.example.com",
    KEY_RING_SECRET="bench/token-keys",
    INTERLUDE_LOCAL_CALLBACK_DELIVERY="off",
    POWERTOOLS_LOG_LEVEL="ERROR",
    AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import sdk_clients, wiring  # noqa: E402
from interlude.adapters.keyring_store import ensure_key_ring  # noqa: E402
from interlude.api.tasks import schedule, unschedule  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.domain import clock  # noqa: E402
from interlude.domain.errors import Conflict  # noqa: E402
from interlude.domain.models.requests import CancelRunRequest, CreateKeyRequest, CreateRunRequest  # noqa: E402
from interlude.domain.models.workflow import WorkflowDefinition  # noqa: E402
from interlude.local.schedules import create_local_deadline_resources  # noqa: E402
from interlude.local.sqs_pump import create_queues, export_queue_urls  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from tests.integration.test_tasks import ENTRIES_TABLE, TABLE, task_workflow  # noqa: E402
from tests.support.stream import Stream, dispatch  # noqa: E402

WRITES = {"PutItem", "UpdateItem", "DeleteItem"}


class Counted:
    """AWS calls by name (every service), and DynamoDB items read and written."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.read = self.written = 0

    def watch(self, session: Any) -> None:
        session.register("before-call", self._call)
        session.register("before-parameter-build.dynamodb", self._writes)
        session.register("after-call.dynamodb", self._reads)

    def _call(self, model: Any, **_: Any) -> None:
        services = model.service_model.endpoint_prefix
        self.calls[model.name if services == "dynamodb" else f"{services}:{model.name}"] += 1

    def _writes(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name in WRITES:
            self.written += 1
        elif model.name == "TransactWriteItems":
            self.written += len(params.get("TransactItems") or [])
        elif model.name == "BatchWriteItem":
            self.written += sum(len(v) for v in (params.get("RequestItems") or {}).values())

    def _reads(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name == "GetItem":
            self.read += "Item" in parsed
        elif model.name == "Query":
            self.read += len(parsed.get("Items") or [])
        elif model.name == "BatchGetItem":
            self.read += sum(len(v) for v in (parsed.get("Responses") or {}).values())

    def take(self) -> str:
        calls = ", ".join(f"{k}×{v}" for k, v in sorted(self.calls.items())) or "-"
        line = f"{sum(self.calls.values()):3d} calls, {self.read:2d} items read, {self.written:2d} written  ({calls})"
        self.calls, self.read, self.written = Counter(), 0, 0
        return line


def main() -> None:
    clock.reset(CLOCK)
    os.environ[clock.CLOCK_FILE_ENV] = str(CLOCK)
    with mock_aws():
        # A session made after moto started (its stubber in place): the one the functions' clients come from.
        sdk_clients.forget_clients()
        counted = Counted()
        counted.watch(sdk_clients.session())
        create_tables(boto3.client("dynamodb"), TABLE)
        urls = create_queues(boto3.client("sqs"), TABLE)
        for queue in wiring.QUEUES:
            os.environ[queue.url_env] = urls[queue.name]
        export_queue_urls(urls)
        os.environ.update(create_local_deadline_resources())
        ensure_key_ring("bench/token-keys")
        services = Services(Store(TABLE, ENTRIES_TABLE))
        admin_key = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        admin = services.keys.authenticate(f"Bearer {admin_key['apiKey']}")
        worker_key = services.keys.issue_key("bench", CreateKeyRequest(subjectId="worker", scopes=["tasks:work"]))
        worker = services.keys.authenticate(f"Bearer {worker_key['apiKey']}")
        definition = task_workflow(retry_config={"max_attempts": 2, "initial_interval": 0})
        services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
        stream = Stream(TABLE)
        rows: list[tuple[str, str]] = []

        def queued() -> str:
            request = CreateRunRequest.model_validate({"workflowId": definition["id"], "inputs": {"order": "o-1"}})
            run_id = services.lifecycle.create_run(admin, request).runId
            records = stream.take()
            counted.take()
            dispatch(records)  # the outbox makes the task
            return run_id

        def claimed() -> str:
            got = services.tasks.claim(worker, ["summarise"], 0, schedule)
            assert got is not None
            return str(got["taskToken"])

        counted.take()
        assert services.tasks.claim(worker, ["summarise"], 0, schedule) is None
        rows.append(("claim, nothing ready (waitSeconds 0: one round)", counted.take()))

        queued()
        rows.append(("dispatch of a new run's records (the outbox makes its task)", counted.take()))
        token = claimed()
        rows.append(("claim, one task ready (one check scheduled)", counted.take()))
        clock.advance(CLOCK, 5)
        services.tasks.heartbeat(worker, token, schedule)
        rows.append(("heartbeat, the lease past its last check (one more scheduled)", counted.take()))
        services.tasks.heartbeat(worker, token, schedule)
        rows.append(("heartbeat, the lease within its last check", counted.take()))
        services.tasks.complete(worker, token, {"summary": "short"}, unschedule)
        rows.append(("complete (its outcome lands on the run; its checks deleted)", counted.take()))

        queued()
        token = claimed()
        counted.take()
        services.tasks.fail(worker, token, "busy", True, unschedule)
        rows.append(("fail, retryable with attempts left (requeued, node.retried)", counted.take()))
        token = claimed()
        counted.take()
        services.tasks.fail(worker, token, "no", True, unschedule)
        rows.append(("fail, no attempt left (the node and the run fail)", counted.take()))

        run_id = queued()
        token = claimed()
        services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())  # its records not yet dispatched
        counted.take()
        try:
            services.tasks.complete(worker, token, {"summary": "unused"}, unschedule)
            raise SystemExit("a completion on a cancelled run was answered 200")
        except Conflict as refused:
            if refused.code != "interlude.task_not_claimed":
                raise
        rows.append(("complete after the run was cancelled (409; the task cancelled)", counted.take()))

        run_id = queued()
        services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())  # the task ready; its records not yet dispatched
        rows.append(("cancel of a run whose task is ready (the task cancelled with it)", counted.take()))
        handed = services.tasks.claim(worker, ["summarise"], 0, schedule)
        rows.append(("claim, only a cancelled run's task ready " + ("(HANDED OUT)" if handed else "(none; entry dropped)"), counted.take()))
        run_id = queued()
        services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
        records = stream.take()
        counted.take()
        dispatch(records)
        rows.append(("dispatch of the cancel's records (the ready entry leaves)", counted.take()))

        print("Task-worker calls through the real task service on moto, after authentication (counts, load-independent):")
        for what, line in rows:
            print(f"  {what:66s} {line}")


if __name__ == "__main__":
    main()
