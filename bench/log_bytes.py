"""Print the bytes one approval lifecycle writes to CloudWatch Logs, by function, from the real handlers' output.

An approval lifecycle (createRun, getRun, a winning resolve, one poll; then, for each event item
the stream filter passes, one record each as when the stream is quiet, `stream` queueing it on the outbox and
`dispatch` handling the outbox's message) runs through the real handlers (functions/api, functions/stream and
functions/dispatch, as the local stack invokes them) on moto in-process, with the environment the
construct gives a deployed function: LOG_LEVEL at the construct's default (infra/interlude_cdk/props.py),
POWERTOOLS_SERVICE_NAME, the deployment's name, AWS_LAMBDA_FUNCTION_NAME (so the EMF business metrics of
interlude.adapters.metrics are written, as in Lambda) and an X-Ray trace header (Powertools Logger adds it to
each line). Everything each invocation writes to its stdout and stderr is captured at the file descriptors:
Powertools Logger lines and EMF metric documents, one JSON object per line, which Lambda's JSON log format passes
as they are. Measured after a warm-up lifecycle (an instance's caches filled, as in steady state).

Lambda's own platform records (platform.start, platform.runtimeDone, platform.report) are not output of the code: their
bytes are an ESTIMATE from the record shapes AWS documents for the JSON log format with active tracing, with this
run's request ids and a tracing header; runtimeDone is counted although the default system log level (INFO) may not
write it (conservative). The HTTP API's access log (its own log group; infra/interlude_cdk/api.py, read by the latency
metric filter) writes one line per request: rendered from the declared format with this run's routes, statuses and
response lengths, the rest typical values (an estimate). CloudWatch Logs meters each log event as its message's UTF-8
bytes plus 26 bytes.
bench/lifecycles.py captures every function's output the same way for each lifecycle it measures, and takes the
estimated shapes from here (platform_records, access_log_line), so bench/cost_per_million.py prices logs with them.
Usage: .venv/bin/python bench/log_bytes.py [--json]
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import tempfile
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _bench import admin_with_approval, offline_aws

ROOT = Path(__file__).resolve().parents[1]


def construct_default_log_level() -> str:
    # Read from the construct's props without importing aws_cdk (seconds of import for one default).
    found = re.search(r'^\s*log_level: str = "(\w+)"', (ROOT / "infra/interlude_cdk/props.py").read_text(), re.M)
    if found is None:
        raise SystemExit("infra/interlude_cdk/props.py no longer declares `log_level: str = ...`: update this bench")
    return found.group(1)


LOG_LEVEL = construct_default_log_level()
TRACE_HEADER = "Root=1-674d6f2a-0123456789abcdef01234567;Parent=0123456789abcdef;Sampled=1;Lineage=1:a1b2c3d4:0"
offline_aws(
    TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries",
    LOG_LEVEL=LOG_LEVEL,
    POWERTOOLS_SERVICE_NAME="interlude",  # infra/interlude_cdk/functions.py SERVICE_NAME
    INTERLUDE_DEPLOYMENT="Interlude",  # the default stack name, which names the deployment
    AWS_LAMBDA_LOG_FORMAT="JSON",
    _X_AMZN_TRACE_ID=TRACE_HEADER,
)

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

# CloudWatch Logs' metered size of one log event: its message's UTF-8 bytes plus this (PutLogEvents' accounting).
EVENT_OVERHEAD_BYTES = 26


@contextmanager
def running_as(name: str) -> Iterator[None]:
    """What follows runs in function `name`'s instance: Lambda sets the name before the instance starts, and the
    instance reads its environment then (interlude.config), so the settings are read afresh, and again after."""
    from interlude import config
    from interlude.local import lambda_runtime

    os.environ["AWS_LAMBDA_FUNCTION_NAME"] = f"{lambda_runtime.FUNCTION_NAME_PREFIX}{name}"
    config.forget()
    config.check()
    try:
        yield
    finally:
        os.environ.pop("AWS_LAMBDA_FUNCTION_NAME", None)
        config.forget()


@contextmanager
def captured_output() -> Iterator[Callable[[], bytes]]:
    """What the process writes to fd 1 and fd 2 inside the block (the bytes Lambda's runtime would forward)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        got: list[bytes] = []
        try:
            yield lambda: b"".join(got)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sink.seek(0)
            got.append(sink.read())


def kind_of(line: bytes) -> str:
    try:
        document = json.loads(line)
    except ValueError:
        return "other output (not JSON)"
    if isinstance(document, dict) and "_aws" in document:
        return "EMF metric documents"
    if isinstance(document, dict) and "level" in document:
        return f"Logger lines ({document['level']})"
    return "other JSON lines"


def access_log_fields() -> dict[str, str]:
    """The HTTP API's access log format (infra/interlude_cdk/api.py ACCESS_LOG_FIELDS), read without importing aws_cdk."""
    source = (ROOT / "infra/interlude_cdk/api.py").read_text()
    found = re.search(r"^ACCESS_LOG_FIELDS = (\{.*?^\})", source, re.M | re.S)
    if found is None:
        raise SystemExit("infra/interlude_cdk/api.py no longer declares ACCESS_LOG_FIELDS = {...}: update this bench")
    return ast.literal_eval(found.group(1))


def access_log_line(route: str, status: int, response_length: int) -> bytes:
    """One HTTP API access log line as API Gateway renders the declared format (an estimate: this request's route,
    status and body length; ids, address and latencies of typical length)."""
    values = {
        "$context.requestId": "JsGc9gEdoAMEVhQ=",
        "$context.apiId": "a1b2c3d4e5",
        "$context.requestTimeEpoch": "1796196990144",
        "$context.identity.sourceIp": "198.51.100.123",
        "$context.routeKey": route,
        "$context.status": str(status),
        "$context.protocol": "HTTP/1.1",
        "$context.responseLength": str(response_length),
        "$context.responseLatency": "45",
        "$context.integrationLatency": "42",
        "$context.integrationErrorMessage": "-",
    }
    return json.dumps({name: values[value] for name, value in access_log_fields().items()}).encode()


def platform_records(request_id: str, function: str) -> list[bytes]:
    """Lambda's own records for one invocation, in the JSON log format with active tracing (an estimate: the
    documented shapes, plausible values; the runtime's exact spacing and extra fields may differ)."""
    time = "2026-12-02T07:00:00.000Z"
    tracing = {"spanId": "0123456789abcdef", "type": "X-Amzn-Trace-Id", "value": TRACE_HEADER.rsplit(";", 1)[0]}
    records: list[dict[str, Any]] = [
        {"time": time, "type": "platform.start", "record": {"requestId": request_id, "version": "$LATEST", "tracing": tracing}},
        {
            "time": time,
            "type": "platform.runtimeDone",
            "record": {
                "requestId": request_id,
                "status": "success",
                "tracing": tracing,
                "spans": [
                    {"name": "responseLatency", "start": time, "durationMs": 38.123},
                    {"name": "responseDuration", "start": time, "durationMs": 0.321},
                    {"name": "runtimeOverhead", "start": time, "durationMs": 1.234},
                ],
                "metrics": {"durationMs": 40.123, "producedBytes": 1234},
            },
        },
        {
            "time": time,
            "type": "platform.report",
            "record": {
                "requestId": request_id,
                "metrics": {"durationMs": 40.123, "billedDurationMs": 41, "memorySizeMB": 512, "maxMemoryUsedMB": 123},
                "tracing": tracing,
                "status": "success",
            },
        },
    ]
    return [json.dumps(r, separators=(",", ":")).encode() for r in records]


class Invocations:
    """Each invocation's captured lines, by function and kind."""

    def __init__(self) -> None:
        self.bytes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.events: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.invocations: dict[str, int] = defaultdict(int)
        self.samples: dict[str, bytes] = {}

    def invoke(self, name: str, event: dict[str, Any]) -> Any:
        from interlude.local import lambda_runtime

        spec = lambda_runtime.wiring.function(name)
        context = lambda_runtime.LambdaContext(name=name, memory_limit_in_mb=spec.memory_mb)
        with running_as(name):
            entry = getattr(lambda_runtime.handler_module(name), spec.handler.rpartition(".")[2])
            with captured_output() as output:
                answer = entry(event, context)
        self.invocations[name] += 1
        lines = [line for line in output().splitlines() if line.strip()]
        for line in lines:
            self.record(name, kind_of(line), line)
        for line in platform_records(context.aws_request_id, name):
            self.record(name, "platform records (estimate)", line)
        return answer

    def record(self, group: str, kind: str, line: bytes) -> None:
        self.samples.setdefault(kind, line)
        self.bytes[group][kind] += len(line)
        self.events[group][kind] += 1

    def clear(self) -> None:
        self.bytes.clear()
        self.events.clear()
        self.invocations.clear()


def lifecycle(calls: Invocations, bearer: str, streams: Any, arn: str, after: set[tuple[str, str]]) -> None:
    """One lifecycle through the real handlers; `after` holds the keys of the items the stream already carried."""
    from interlude import wiring
    from interlude.local.http_gateway import to_event
    from interlude.store.stream import is_event_insert
    from tests.support.local_stack import wire
    from tests.support.stream import outbox_event

    headers = {"authorization": bearer, "content-type": "application/json"}

    routes = {f"{r.method} {r.path}" for r in wiring.ROUTES}

    def api(route: str, path: str, body: object = None) -> dict:
        # The deployed HTTP API declares each route (infra/interlude_cdk/api.py), so its events carry the route's key,
        # which the API function's metrics read; the local gateway's catch-all sends `$default`.
        if route not in routes:
            raise SystemExit(f"{route} is not a route of interlude.wiring: update this bench")
        method = route.split(" ", 1)[0]
        raw = b"" if body is None else json.dumps(body).encode()
        got = calls.invoke("api", {**to_event(method, path, headers, raw, "127.0.0.1"), "routeKey": route})
        calls.record("HTTP API access log", "access log lines (estimate)", access_log_line(route, got["statusCode"], len(got["body"].encode())))
        if got["statusCode"] >= 400:
            raise SystemExit(f"{method} {path} answered {got['statusCode']}: {got['body']}")
        return json.loads(got["body"])

    run = wire(api("POST /runs", "/runs", {"workflowId": "conformance-approval"})["runId"])
    api("GET /runs/{runId}", f"/runs/{run}")
    api("POST /runs/{runId}/interrupts/{nodeId}", f"/runs/{run}/interrupts/gate", {"resumeValue": {"action": "accept"}})
    api("GET /runs/{runId}/events/poll", f"/runs/{run}/events/poll?timeout=1")
    # moto in-process has no stream reader: the records are the event items this lifecycle created, as the stream
    # would carry them (INSERT, keys and new image), in the order they were written.
    items = streams.scan(TableName="bench", ConsistentRead=True)["Items"]
    for item in items:
        key = (item["pk"]["S"], item["sk"]["S"])
        if key in after:
            continue
        after.add(key)
        record = {
            "eventID": uuid.uuid4().hex,
            "eventName": "INSERT",
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1",
            "eventSourceARN": arn,
            "dynamodb": {
                "Keys": {"pk": item["pk"], "sk": item["sk"]},
                "NewImage": item,
                "SequenceNumber": str(len(after)),
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }
        if is_event_insert(record):
            # The stream function queues it on the outbox; the outbox queue hands dispatch its message.
            calls.invoke("stream", {"Records": [record]})
            answer = calls.invoke("dispatch", outbox_event([record])) or {}
            if answer.get("batchItemFailures"):
                raise SystemExit(f"dispatch failed a record: {answer}")


def measure() -> dict[str, Any]:
    """{function: {kind: bytes}}, events per function and kind, invocations per function, for one lifecycle."""
    from interlude import wiring
    from interlude.api import http
    from interlude.composition import Services
    from interlude.domain.models.requests import CreateKeyRequest
    from interlude.local.keyring import prepare_local_key_ring
    from interlude.local.schedules import create_local_deadline_resources
    from interlude.local.sqs_pump import create_queues, export_queue_urls
    from interlude.store.facade import Store
    from interlude.store.provisioning import create_tables

    with mock_aws():
        client = boto3.client("dynamodb")
        create_tables(client, "bench")
        os.environ.update(prepare_local_key_ring())
        os.environ.update(create_local_deadline_resources())
        export_queue_urls(create_queues(boto3.client("sqs"), "bench"))
        admin_with_approval(Services(Store("bench", "bench-entries", client)))
        created = http.services().keys.issue_key(
            "bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES))
        )
        bearer = f"Bearer {created['apiKey']}"
        arn = client.describe_table(TableName="bench")["Table"]["LatestStreamArn"]
        calls = Invocations()
        # A warm instance first (key, workflow and settings cached; the first invocation's imports done).
        seen: set[tuple[str, str]] = set()
        lifecycle(calls, bearer, client, arn, seen)
        calls.clear()
        lifecycle(calls, bearer, client, arn, seen)
    return {
        "log_level": LOG_LEVEL,
        "bytes": {name: dict(kinds) for name, kinds in calls.bytes.items()},
        "events": {name: dict(kinds) for name, kinds in calls.events.items()},
        "invocations": dict(calls.invocations),
        "samples": {kind: line.decode(errors="replace") for kind, line in calls.samples.items()},
        "event_overhead": EVENT_OVERHEAD_BYTES,
    }


def metered_bytes(measured: dict[str, Any], function: str | None = None, estimated: bool = True) -> int:
    """Bytes CloudWatch Logs meters for one lifecycle (of one function), with or without the platform records."""
    total = 0
    for name, kinds in measured["bytes"].items():
        if function is not None and name != function:
            continue
        for kind, size in kinds.items():
            if kind.endswith("(estimate)") and not estimated:
                continue
            total += size + measured["event_overhead"] * measured["events"][name][kind]
    return total


def main() -> None:
    measured = measure()
    if "--json" in sys.argv:
        print(json.dumps(measured))
        return
    print(
        f"Bytes one approval lifecycle writes to CloudWatch Logs, by function (LOG_LEVEL={measured['log_level']}, the "
        f"construct's default; + {EVENT_OVERHEAD_BYTES} bytes metered per log event):"
    )
    for name, kinds in measured["bytes"].items():
        invocations = measured["invocations"].get(name, 0)
        what = f"{invocations} invocation{'s' * (invocations != 1)}" if invocations else "its own log group"
        print(f"  {name} ({what}): {metered_bytes(measured, name)} bytes metered")
        for kind, size in sorted(kinds.items()):
            events = measured["events"][name][kind]
            print(f"    {kind:32s} {events:3d} lines {size:6d} bytes")
    print(
        f"  per lifecycle: {metered_bytes(measured, estimated=False)} bytes measured (the handlers' own lines + per-event "
        f"overhead), {metered_bytes(measured)} with the estimated lines (Lambda's platform records, the access log)"
    )
    print("One line of each kind, as captured:")
    for kind, line in measured["samples"].items():
        print(f"  {kind}: {line[:400]}")


if __name__ == "__main__":
    main()
