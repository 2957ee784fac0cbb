"""Print what one SSE request costs and how a client following a run spends its requests.

Through the real `api` handler in-process against moto (no network, no real waiting beyond the configured
bounds): DynamoDB calls per request on each face, and, for a run with two gates answered while a reader
follows it, how many requests the reader made and how many events each delivered.

Usage: .venv/bin/python bench/stream_requests.py
"""

from __future__ import annotations

import json
import time
from collections import Counter

from _bench import offline_aws

offline_aws(
    TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries",
    INTERLUDE_STREAM_HOLD_SECONDS="2",
    INTERLUDE_STREAM_LINGER_SECONDS="0.2",
    POWERTOOLS_LOG_LEVEL="ERROR",
)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.api import http  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.domain.models.requests import CreateKeyRequest  # noqa: E402
from interlude.local.http_gateway import to_event  # noqa: E402
from interlude.local.lambda_runtime import invoke  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from tests.support.local_stack import wire  # noqa: E402

GATES = {
    "nodes": [{"id": f"g{i}", "typeId": "core.approvalGate", "config": {"title": f"Gate {i}?"}} for i in range(2)]
    + [{"id": "end", "typeId": "core.noop"}],
    "edges": [{"sourceNodeId": "g0", "targetNodeId": "g1"}, {"sourceNodeId": "g1", "targetNodeId": "end"}],
}


def main() -> None:
    with mock_aws():
        create_tables(boto3.client("dynamodb"), "bench")
        api_client = http.services().store.client
        counter: Counter[str] = Counter()
        api_client.meta.events.register("before-call.dynamodb", lambda model, **_: counter.update([model.name]))
        key = Services(Store("bench", "bench-entries")).keys.issue_key("b", CreateKeyRequest(subjectId="a", scopes=list(wiring.ALL_SCOPES)))

        def call(method: str, path: str, body=None, **headers: str) -> dict:
            h = {"authorization": f"Bearer {key['apiKey']}", "content-type": "application/json", "host": "x", **headers}
            return invoke("api", to_event(method, path, h, json.dumps(body).encode() if body else b"", "127.0.0.1"))

        call("PUT", "/workflows/gates", GATES)
        run = wire(json.loads(call("POST", "/runs", {"workflowId": "gates"})["body"])["runId"])
        call("GET", f"/runs/{run}/events")  # warm the key cache and the workflow cache
        for label, path, headers in (
            ("OpenWOP stream, run waiting at a gate", f"/runs/{run}/events", {}),
            ("ModuleX listen, run waiting at a gate", f"/workflows/listen/{run}", {}),
        ):
            counter.clear()
            began = time.monotonic()
            call("GET", path, **headers)
            took = time.monotonic() - began
            print(f"{label}: {sum(counter.values())} DynamoDB calls {dict(counter)}, {took:.2f} s (linger 0.2 s)")
        counter.clear()
        began = time.monotonic()
        call("GET", f"/runs/{run}/events", **{"last-event-id": "99"})
        print(
            f"OpenWOP stream, nothing new, held 2 s: {sum(counter.values())} DynamoDB calls {dict(counter)}, "
            f"{time.monotonic() - began:.2f} s"
        )
        # A reader following the run while both gates are answered between its requests.
        cursor, requests, delivered = None, 0, []
        for gate in ("g0", "g1", None):
            headers = {"last-event-id": cursor} if cursor else {}
            body = call("GET", f"/runs/{run}/events?streamMode=debug", **headers)["body"]
            requests += 1
            ids = [line[4:] for line in body.splitlines() if line.startswith("id: ")]
            delivered.append(len(ids))
            cursor = ids[-1] if ids else cursor
            if gate:
                call("POST", f"/runs/{run}/interrupts/{gate}", {"resumeValue": {"action": "accept"}})
        print(f"following a two-gate run: {requests} requests delivered {delivered} events; ends on run.completed")


if __name__ == "__main__":
    main()
