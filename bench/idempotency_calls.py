"""Print the DynamoDB calls and request units Idempotency-Key adds to a request, through the real `api` handler.

Runs in-process against moto (no network); the API key lookup is warm (cached) so only the operation and the
idempotency record are counted. Write units follow each written item's resulting size (DynamoDB's size rules,
twice inside a transaction, as bench/_deployment.py's meter counts them); read units are 4 KB steps, halved for eventually
consistent reads. Usage: .venv/bin/python bench/idempotency_calls.py
"""

from __future__ import annotations

import json
import uuid
from collections import Counter

from _bench import offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries", POWERTOOLS_LOG_LEVEL="ERROR")

import boto3  # noqa: E402
from _deployment import Invocation, Meter  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.api import http  # noqa: E402
from interlude.domain.models.requests import CreateKeyRequest  # noqa: E402
from interlude.local import lambda_runtime  # noqa: E402
from interlude.local.http_gateway import to_event  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from tests.support.local_stack import FIXTURES, wire  # noqa: E402

FIXTURE = FIXTURES / "conformance-approval.json"


def main() -> None:
    with mock_aws():
        tables = create_tables(boto3.client("dynamodb"), "bench")
        services = http.services()
        created = services.keys.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        meter = Meter(*tables)

        def call(method: str, path: str, body: object, key: str | None) -> tuple[int, Counter[str], str, float, float]:
            headers = {"authorization": f"Bearer {created['apiKey']}", "content-type": "application/json"}
            if key:
                headers["idempotency-key"] = key
            with meter.recording(Invocation("api", "http")) as record:
                got = lambda_runtime.invoke("api", to_event(method, path, headers, json.dumps(body).encode(), "127.0.0.1"))
            calls = Counter({op.split(":", 1)[1]: n for op, n in record.calls.items() if op.startswith("dynamodb:")})
            return got["statusCode"], calls, got["body"], record.wru, record.rru

        def new_run() -> str:
            return wire(json.loads(call("POST", "/runs", create, None)[2])["runId"])

        definition = json.loads(FIXTURE.read_text())
        call("PUT", f"/workflows/{definition['id']}", definition, None)
        create = {"workflowId": definition["id"]}
        key = uuid.uuid4().hex + "-bench"
        resume = {"resumeValue": {"action": "accept"}}
        run, other = new_run(), new_run()
        rows = [
            ("createRun, no key", *call("POST", "/runs", create, None)),
            ("createRun, new key", *call("POST", "/runs", create, key)),
            ("createRun, replay", *call("POST", "/runs", create, key)),
            ("createRun, mismatch", *call("POST", "/runs", {**create, "inputs": {"x": 1}}, key)),
            ("resolve, no key", *call("POST", f"/runs/{other}/interrupts/gate", resume, None)),
            ("resolve, new key", *call("POST", f"/runs/{run}/interrupts/gate", resume, key + "r")),
            ("resolve, replay", *call("POST", f"/runs/{run}/interrupts/gate", resume, key + "r")),
            ("resolve 409, new key", *call("POST", f"/runs/{run}/interrupts/gate", resume, key + "s")),
            ("resolve 400, new key", *call("POST", f"/runs/{new_run()}/interrupts/gate", {"resumeValue": {}}, key)),
            ("cancel, no key", *call("POST", f"/runs/{new_run()}/cancel", {}, None)),
            ("cancel, new key", *call("POST", f"/runs/{new_run()}/cancel", {}, key + "c")),
            ("putWorkflow, new key (claimed)", *call("PUT", f"/workflows/{definition['id']}", definition, key + "w")),
            ("putWorkflow, replay (claimed)", *call("PUT", f"/workflows/{definition['id']}", definition, key + "w")),
        ]
        print(f"{'request':31} {'status':>6}  {'WRU':>5} {'RRU':>5}  DynamoDB calls")
        for name, status, calls, _, wru, rru in rows:
            detail = ", ".join(f"{k}×{v}" for k, v in sorted(calls.items())) or "-"
            print(f"{name:31} {status:>6}  {wru:5.1f} {rru:5.1f}  {sum(calls.values())} ({detail})")


if __name__ == "__main__":
    main()
