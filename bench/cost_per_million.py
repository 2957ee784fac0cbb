"""Print what one approval lifecycle costs on AWS, per million lifecycles, from measured DynamoDB item sizes.

Lifecycle: createRun, getRun, a winning resolve, one poll of the events; plus what the stream consumer does
for each event-log item (with the business metrics' reads, as a deployed `dispatch` makes them). The real Service and Store run against moto in-process; each write's resulting
item sizes are measured with DynamoDB's size rules, so the figures follow the code. Prices are us-east-1
on-demand list prices (edit PRICES to compare). It prints the write units of each request and of each item kind
(run head, events, interrupts, inbox entries, run index, counters, audit, idempotency), the `dispatch`
invocations as the stream filter passes them, and the request counter's writes per request at a stated pace
(the counter is leased by each warm instance: app/limits.py), since they depend on the traffic, not the lifecycle.
What every deployment also pays per lifecycle is in the total: CloudWatch Logs ingestion of the bytes the six
invocations write (measured by bench/log_bytes.py through the real handlers, run as its own process; Lambda's platform
records and the HTTP API's access log lines estimated from their documented or declared shapes) and X-Ray traces of the functions' active tracing at the default
sampling rule, at the same stated pace as the request counter (the quiet pace printed beside it).
Usage: .venv/bin/python bench/cost_per_million.py
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

from _bench import admin_with_approval, offline_aws

offline_aws(TABLE_NAME="bench")

import boto3  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402
from interlude.adapters import metrics  # noqa: E402
from interlude.adapters.outbox_feed import queued  # noqa: E402
from interlude.app import dispatch  # noqa: E402
from interlude.app.service import Service  # noqa: E402
from interlude.store import Store, create_table  # noqa: E402
from interlude.store.stream import OutboxRecords, is_event_insert  # noqa: E402

PRICES = {
    "write_request_unit": 0.625 / 1e6,  # DynamoDB on-demand WRU
    "read_request_unit": 0.125 / 1e6,  # DynamoDB on-demand RRU
    "http_api_request": 1.00 / 1e6,  # API Gateway HTTP API, first 300 M
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm": 0.0000133334,
    "sfn_standard_transition": 0.025 / 1000,  # Step Functions Standard, per state transition
    "sfn_express_request": 1.00 / 1e6,  # Step Functions Express, per request (plus duration)
    "sfn_express_gb_second": 0.00001667,  # Express duration, first 1,000 h per month, 64 MB billed minimum
    # CloudWatch Logs ingestion per GB (10^9 bytes), us-east-1 (aws.amazon.com/cloudwatch/pricing): Standard log class,
    # or Infrequent Access if the construct's log groups use it (infra/interlude_cdk/functions.py, read below).
    "logs_ingested_gb_standard": 0.50,
    "logs_ingested_gb_infrequent_access": 0.25,
    "xray_trace_recorded": 5.00 / 1e6,  # X-Ray traces recorded (aws.amazon.com/xray/pricing); retrieval is per query
    "sqs_request": 0.40 / 1e6,  # SQS standard queue requests (each 64 KB chunk of a payload is one), past the first 1 M
}
# SQS requests per event item on the outbox queue when the stream is quiet (one item a batch): the stream function's
# SendMessageBatch, the event source's ReceiveMessage and DeleteMessageBatch.
OUTBOX_SQS_REQUESTS_PER_ITEM = 3
# The same lifecycle as a Standard state machine: a Task with .waitForTaskToken that hands the token to the
# approver, a Choice on the decision, Succeed: one billed transition per state executed.
SFN_STANDARD_TRANSITIONS = 3
LAMBDA_MEMORY_GB = 0.5
ASSUMED_WARM_MS = 40  # per invocation; measure in your account and edit
# The request counter's writes depend on how many requests of a tenant one warm instance answers per second (its
# leases grow to that pace): the bill is priced at a busy instance's pace (one request per ASSUMED_WARM_MS) under the
# host's default limit, and the quiet case (each request counts itself) is printed beside it.
BUSY_PACE = 1000 // ASSUMED_WARM_MS
# X-Ray's default sampling rule: the first request each second (the reservoir), then this share of the rest. HTTP APIs
# send no trace header, so each invocation (API or stream) is sampled on its own and is one trace.
XRAY_RESERVOIR_PER_SECOND = 1
XRAY_FIXED_RATE = 0.05
ROOT = Path(__file__).resolve().parent.parent


def traced_share(pace: float) -> float:
    """The share of a function's invocations X-Ray's default rule records when they arrive at `pace` per second."""
    if pace <= XRAY_RESERVOIR_PER_SECOND:
        return 1.0
    return (XRAY_RESERVOIR_PER_SECOND + XRAY_FIXED_RATE * (pace - XRAY_RESERVOIR_PER_SECOND)) / pace


@contextlib.contextmanager
def lambda_environment(name: str):
    """Inside a Lambda named for wiring function `name` (interlude.adapters.metrics writes only there)."""
    os.environ["AWS_LAMBDA_FUNCTION_NAME"] = f"interlude-{name}"
    try:
        yield
    finally:
        os.environ.pop("AWS_LAMBDA_FUNCTION_NAME", None)


def log_ingestion_price() -> tuple[float, str]:
    """$ per GB ingested and the log class, as the construct's function and access log groups are declared."""
    sources = [(ROOT / f"infra/interlude_cdk/{name}.py").read_text() for name in ("functions", "api")]
    if all("INFREQUENT_ACCESS" in source for source in sources):
        return PRICES["logs_ingested_gb_infrequent_access"], "Infrequent Access"
    return PRICES["logs_ingested_gb_standard"], "Standard"


def measured_log_bytes() -> dict:
    """bench/log_bytes.py's measurement of one lifecycle, in its own process (it sets a Lambda's environment)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/log_bytes.py"), "--json"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"bench/log_bytes.py failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])

# Item kinds, by key: the first whose test passes names the item (the breakdown's rows, in this order).
KINDS: list[tuple[str, object]] = [
    ("request counter", lambda pk, sk: "#RATE" in pk),
    ("inbox entries", lambda pk, sk: f"#{wiring.INBOX.prefix}#" in pk),
    ("run index entry", lambda pk, sk: "#RUNS#" in pk),
    ("open-runs counter", lambda pk, sk: sk == "USAGE"),
    ("audit trail (S3)", lambda pk, sk: "#AUDIT" in pk),
    ("idempotency", lambda pk, sk: "#IDEM#" in pk),
    ("run head", lambda pk, sk: sk == "RUN"),
    ("event batch", lambda pk, sk: sk.startswith("E#")),
    ("interrupt", lambda pk, sk: sk.startswith("I#")),
]


def kind_of(key: dict) -> str:
    pk, sk = key["pk"]["S"], key["sk"]["S"]
    return next((name for name, test in KINDS if test(pk, sk)), f"other ({sk.split('#', 1)[0]})")


def attr_size(value: dict) -> int:
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        digits = len(str(Decimal(v)).replace("-", "").replace(".", "").lstrip("0")) or 1
        return math.ceil(digits / 2) + 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + attr_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(attr_size(x) + 1 for x in v)
    if kind == "B":
        return len(v)
    if kind == "BOOL" or kind == "NULL":
        return 1
    return len(str(v))


def item_size(item: dict) -> int:
    return sum(len(k.encode()) + attr_size(v) for k, v in item.items())


class Meter:
    """Write and read units of every DynamoDB call, from the items' sizes before and after each write."""

    def __init__(self, client, reader) -> None:
        self.wru = 0.0
        self.rru = 0.0
        # Index writes: the inbox's entry items (store/inbox.py), and a GSI write for any item that holds the
        # `inbox` GSI's key after a write or lost it in one (the audit head's pending-checkpoint entry): a GSI write
        # is never doubled by a transaction.
        self.index_wru = 0.0
        self.old: list[dict | None] = []
        # Write units by item kind (GSI writes as "<kind>: GSI"), and the stream records of the items created.
        self.kinds: dict[str, float] = defaultdict(float)
        self.inserts: list[dict] = []
        self.read_unit = 0.5
        self.reader = reader
        # (key, factor, is a delete) per item the pending call writes.
        self.pending: list[tuple[dict, int, bool]] = []
        client.meta.events.register("before-parameter-build.dynamodb", self.before)
        client.meta.events.register("after-call.dynamodb", self.after)

    def before(self, model, params, **_):
        name = model.name
        # A strongly consistent read is billed a whole unit per 4 KB, an eventually consistent one half.
        batch = next(iter((params.get("RequestItems") or {}).values()), {}) if name == "BatchGetItem" else {}
        self.read_unit = 1.0 if params.get("ConsistentRead") or batch.get("ConsistentRead") else 0.5
        if name == "TransactWriteItems":
            for op in params["TransactItems"]:
                kind, body = next(iter(op.items()))
                key = body.get("Key") or {k: body["Item"][k] for k in ("pk", "sk")}
                self.pending.append((key, 2, kind == "Delete"))
        elif name in ("PutItem", "UpdateItem", "DeleteItem"):
            key = params.get("Key") or {k: params["Item"][k] for k in ("pk", "sk")}
            self.pending.append((key, 1, name == "DeleteItem"))
        elif name == "BatchWriteItem":
            for requests in params["RequestItems"].values():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        self.pending.append(({k: item[k] for k in ("pk", "sk")}, 1, False))
                    else:
                        self.pending.append((request["DeleteRequest"]["Key"], 1, True))
        self.old = [self.reader.get_item(TableName="bench", Key=key).get("Item") for key, _, _ in self.pending]

    def after(self, model, parsed, **_):
        name = model.name
        gsi_key = wiring.INBOX_INDEX.partition_key
        for (key, factor, deleted), old in zip(self.pending, self.old, strict=True):
            got = self.reader.get_item(TableName="bench", Key=key).get("Item")
            # A delete is billed by the size of the item it removed; any other write by the item it leaves.
            billed = old if deleted else got
            units = factor * math.ceil(item_size(billed or key) / 1024)
            kind = kind_of(key)
            self.kinds[kind] += units
            if old is None and got is not None:
                self.inserts.append({"eventName": "INSERT", "dynamodb": {"Keys": key, "NewImage": got}})
            if f"#{wiring.INBOX.prefix}#" in key["pk"]["S"]:
                self.index_wru += units
                continue
            self.wru += units
            gsi = got if got is not None and gsi_key in got else old if old is not None and gsi_key in old else None
            if gsi is not None:
                self.index_wru += math.ceil(item_size(gsi) / 1024)
                self.kinds[f"{kind}: GSI"] += math.ceil(item_size(gsi) / 1024)
        self.pending = []
        self.old = []
        unit = self.read_unit
        if name == "GetItem":
            # A read that finds nothing is billed as one unit step too.
            self.rru += unit * max(1, math.ceil(item_size(parsed.get("Item") or {}) / 4096))
        elif name == "Query":
            self.rru += unit * max(1, math.ceil(sum(item_size(i) for i in parsed.get("Items", [])) / 4096))
        elif name == "BatchGetItem":
            for items in (parsed.get("Responses") or {}).values():
                self.rru += sum(unit * math.ceil(item_size(i) / 4096) for i in items)


class Api:
    """Requests to the real API function (the local stack's Lambda runtime), each metered on its own."""

    def __init__(self) -> None:
        from interlude.api import http
        from interlude.domain.models.requests import CreateKeyRequest

        self.service = http.service()
        created = self.service.issue_key("bench", CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        self.bearer = f"Bearer {created['apiKey']}"
        self.meter = Meter(self.service.store.client, boto3.client("dynamodb"))

    def call(self, method: str, path: str, body: object = None, key: str | None = None) -> tuple[dict, float, float]:
        """(answer, WRU without the request counter's, RRU) of one request."""
        from interlude.local import lambda_runtime
        from interlude.local.http_gateway import to_event

        headers = {"authorization": self.bearer, "content-type": "application/json"}
        if key:
            headers["idempotency-key"] = key
        raw = b"" if body is None else json.dumps(body).encode()
        self.meter.wru = self.meter.rru = self.meter.index_wru = 0.0
        self.meter.kinds.clear()
        got = lambda_runtime.invoke("api", to_event(method, path, headers, raw, "127.0.0.1"))
        # The request counter's share is the leases' (priced at a stated pace in main), not this request's luck.
        counter = self.meter.kinds.get("request counter", 0.0)
        return json.loads(got["body"]), self.meter.wru + self.meter.index_wru - counter, self.meter.rru


class CountedLimitStore:
    """The real request counter, with the UpdateItems it sends counted (a refused one is billed too)."""

    def __init__(self, client) -> None:
        from interlude.store.limits import LimitStore

        self.store = LimitStore("bench", client)
        self.writes = 0

    def count_request(self, tenant, window, limit, requests=1):
        self.writes += 1
        return self.store.count_request(tenant, window, limit, requests)


def counter_writes_per_request(client, tenant: str, pace: int, limit: int, windows: int = 10) -> float:
    """Request-counter writes per request of one warm instance answering `pace` requests of a tenant each second,
    once its leases have grown to that pace (every window after the first)."""
    from interlude.app.limits import RequestLeases
    from interlude.rules.limits import window_of

    counted = CountedLimitStore(client)
    leases = RequestLeases()
    for second in range(windows + 1):
        if second == 1:
            counted.writes = 0
        for _ in range(pace):
            leases.admit(counted, tenant, window_of(10_000 + second + 0.5), limit)
    return counted.writes / (pace * windows)


def lifecycle(api: Api, create: dict, resume: dict) -> list[tuple[str, float, float, dict[str, float]]]:
    """(request, WRU incl. index, RRU, WRU by kind) of each request of one lifecycle, then of the stream consumer."""
    from tests.support.local_stack import wire

    meter = api.meter
    rows = []

    def take(name: str) -> None:
        rows.append((name, meter.wru + meter.index_wru, meter.rru, dict(meter.kinds)))
        meter.wru = meter.rru = meter.index_wru = 0.0
        meter.kinds.clear()

    meter.inserts.clear()
    run = api.call("POST", "/runs", create)[0]["runId"]
    take("createRun")
    for name, method, path, body in (
        ("getRun", "GET", f"/runs/{wire(run)}", None),
        ("resolve", "POST", f"/runs/{wire(run)}/interrupts/gate", resume),
        ("poll events", "GET", f"/runs/{wire(run)}/events/poll?timeout=1", None),
    ):
        api.call(method, path, body)
        take(name)
    passed = [record for record in meter.inserts if is_event_insert(record)]
    store = api.service.store
    for record in passed:
        # What `dispatch` does with each record the stream filter passes: the outbox message names the item, which
        # it reads back (one strongly consistent GetItem), then the closed interrupts' inbox entries deleted, the run
        # advanced, with the business metrics' outbox handler as in Lambda: its time-to-decision reads the run head
        # and the interrupt back (two GetItems per decided interrupt). The other adapters write nothing to the table
        # here; the metrics' EMF lines are counted by bench/log_bytes.py, not printed here.
        read_back = OutboxRecords(store.client, store.table).record_of(queued(record))
        with lambda_environment("dispatch"), contextlib.redirect_stdout(io.StringIO()):
            dispatch.handle_record(api.service, read_back, (metrics.on_events,))
    take(f"dispatch ×{len(passed)}")
    return rows


def main() -> None:
    from interlude.app import limits as app_limits
    from interlude.config import settings
    from tests.support.local_stack import wire

    # Steady state for the audit log too: the measured resolve appends to a chain that already waits for its next
    # checkpoint, as the warm-up's append left it (a chain's pending marker is written once per checkpoint, at most
    # one append in 1,000; with 128 chains the measured run would otherwise land on a fresh one).
    wiring.AUDIT_CHAINS = 1
    # The key and the tenant's limits are re-read once per cache period per instance, not per lifecycle: held for
    # the whole run so a slow machine's clock does not put a re-read in the measured lifecycle (printed below).
    key_cache, limits_cache = Service.KEY_CACHE_SECONDS, app_limits.LIMITS_CACHE_SECONDS
    Service.KEY_CACHE_SECONDS = app_limits.LIMITS_CACHE_SECONDS = 3600.0
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, "bench")
        admin_with_approval(Service(Store("bench", client)))
        api = Api()
        meter = api.meter
        create = {"workflowId": "conformance-approval"}
        resume = {"resumeValue": {"action": "accept"}}

        # A warm instance first: the key and the workflow cached, as in steady state.
        lifecycle(api, create, resume)
        rows = lifecycle(api, create, resume)
        dispatch_invocations = int(rows[-1][0].split("×")[1])
        kinds: dict[str, float] = defaultdict(float)
        for _, _, _, by_kind in rows:
            for kind, units in by_kind.items():
                kinds[kind] += units
        rru = sum(r for _, _, r, _ in rows)
        # The request counter as this run happened to lease it is replaced by its steady state at a stated pace.
        measured_counter = kinds.pop("request counter", 0.0)
        default_limit = settings().tenant_requests_per_second
        api_requests = 4
        paces = {
            (pace, limit): counter_writes_per_request(client, f"pace-{pace}-{limit}", pace, limit)
            for pace in (1, 5, BUSY_PACE)
            for limit in (default_limit, 500)
        }
        counter_wru = api_requests * paces[(BUSY_PACE, default_limit)]
        quiet_counter_wru = api_requests * paces[(1, default_limit)]
        wru = sum(units for kind, units in kinds.items() if ": GSI" not in kind and kind != "inbox entries")
        index_wru = sum(units for kind, units in kinds.items() if ": GSI" in kind or kind == "inbox entries")
        # The same lifecycle with an Idempotency-Key on createRun and on the resolve.
        meter.wru = meter.rru = meter.index_wru = 0.0
        plain_create = api.call("POST", "/runs", create)
        keyed = api.call("POST", "/runs", create, "bench-create-key-000000001")
        resolved = api.call(
            "POST", f"/runs/{wire(keyed[0]['runId'])}/interrupts/gate", resume, "bench-resolve-key-00000001"
        )
        plain_resolve = api.call("POST", f"/runs/{wire(plain_create[0]['runId'])}/interrupts/gate", resume)
        idem_wru = keyed[1] - plain_create[1] + resolved[1] - plain_resolve[1]
        # Either plain request may have re-read the tenant's limits (a 10 s cache): the lesser read is the request's.
        idem_rru = keyed[2] - min(plain_create[2], rows[0][2]) + resolved[2] - min(plain_resolve[2], rows[2][2])

    per_million = 1e6
    print("Write units of each request (the request counter's own write left out: its steady state is below):")
    for name, w, r, by_kind in rows:
        w -= by_kind.get("request counter", 0.0)
        print(
            f"  {name:16s} {w:5.1f} WRU  {r:4.1f} RRU   "
            + ", ".join(f"{k} {v:g}" for k, v in by_kind.items() if k != "request counter")
        )
    print("Write units by item kind, one lifecycle (a transaction's items count twice; GSI writes once each):")
    for kind, units in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:28s} {units:5.1f}")
    print(
        f"  {'request counter':28s} {counter_wru:5.2f}  ({api_requests} requests × {paces[(BUSY_PACE, default_limit)]:.2f}: "
        f"a warm instance at {BUSY_PACE} requests/s of the tenant, limit {default_limit}/s; "
        f"{measured_counter:g} as this run's windows fell)"
    )
    print(
        "Request-counter writes per request, by a warm instance's pace (requests/s of one tenant) and the tenant's limit:"
    )
    for (pace, limit), per_request in paces.items():
        print(f"  pace {pace:3d}/s, limit {limit:3d}/s: {per_request:.2f}")

    rereads = api_requests / BUSY_PACE * (1 / key_cache + 1 / limits_cache)
    print(
        f"Key and limits re-reads: one strongly consistent GetItem each per {key_cache:g} s / {limits_cache:g} s per "
        f"instance, ≈ {rereads:.3f} RRU per lifecycle at {BUSY_PACE} requests/s (added to the reads below)"
    )
    rru += rereads
    # Each event item invokes `stream` (queued on the outbox) and `dispatch` (the outbox's message): one each when quiet.
    invocations = api_requests + 2 * dispatch_invocations
    sqs_requests = OUTBOX_SQS_REQUESTS_PER_ITEM * dispatch_invocations
    queues = sqs_requests * PRICES["sqs_request"]
    wru += counter_wru
    dynamo = (wru + index_wru) * PRICES["write_request_unit"] + rru * PRICES["read_request_unit"]
    gateway = api_requests * PRICES["http_api_request"]
    per_invocation = (
        PRICES["lambda_request"] + LAMBDA_MEMORY_GB * ASSUMED_WARM_MS / 1000 * PRICES["lambda_gb_second_arm"]
    )
    lam = invocations * per_invocation
    print(
        "One approval lifecycle through the API function (create, get, resolve, poll; key checks and the request counter included; stream consumer per event item):"
    )
    print(
        f"  DynamoDB write request units  {wru:6.1f}   -> ${wru * PRICES['write_request_unit'] * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  index write units             {index_wru:6.1f}   -> ${index_wru * PRICES['write_request_unit'] * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  DynamoDB read request units   {rru:6.1f}   -> ${rru * PRICES['read_request_unit'] * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  API Gateway HTTP requests     {api_requests:6d}   -> ${gateway * per_million:8.2f} per million lifecycles"
    )
    print(
        f"  Lambda invocations            {invocations:6d}   -> ${lam * per_million:8.2f} per million lifecycles "
        f"({LAMBDA_MEMORY_GB} GB, {ASSUMED_WARM_MS} ms assumed each; {dispatch_invocations} each of stream and dispatch: "
        "the event items the stream filter passes, one record each as when the stream is quiet)"
    )
    print(
        f"  SQS requests (the outbox)     {sqs_requests:6d}   -> ${queues * per_million:8.2f} per million lifecycles "
        f"({OUTBOX_SQS_REQUESTS_PER_ITEM} per event item: the stream's send, the event source's receive and delete; "
        "an idle event source's long polls are a fixed cost, not a lifecycle's)"
    )
    logs_measured = measured_log_bytes()
    log_price, log_class = log_ingestion_price()
    overhead = logs_measured["event_overhead"]
    # Metered bytes of each (function, kind of line): the lines' bytes plus each event's overhead.
    metered = {
        (name, kind): size + overhead * logs_measured["events"][name][kind]
        for name, kinds in logs_measured["bytes"].items()
        for kind, size in kinds.items()
    }
    by_function: dict[str, int] = defaultdict(int)
    for (name, _), size in metered.items():
        by_function[name] += size
    estimated = sum(size for (_, kind), size in metered.items() if kind.endswith("(estimate)"))
    log_bytes = sum(by_function.values())
    logs = log_bytes / 1e9 * log_price
    print(
        f"  CloudWatch Logs ingestion     {log_bytes:6d} B -> ${logs * per_million:8.2f} per million lifecycles "
        f"(${log_price:.2f}/GB, {log_class} class; LOG_LEVEL={logs_measured['log_level']}; "
        + ", ".join(f"{name} {size} B" for name, size in by_function.items())
        + f"; {log_bytes - estimated} B measured from the handlers' output, {estimated} B estimated: Lambda's "
        "platform records and the access log's lines; bench/log_bytes.py)"
    )
    busy_share, quiet_share = traced_share(BUSY_PACE), traced_share(1)
    traces = invocations * busy_share
    xray = traces * PRICES["xray_trace_recorded"]
    print(
        f"  X-Ray traces                  {traces:6.3f}   -> ${xray * per_million:8.2f} per million lifecycles "
        f"($5.00 per million recorded; default rule: {XRAY_RESERVOIR_PER_SECOND}/s then {XRAY_FIXED_RATE:.0%}, each "
        f"function's invocations at {BUSY_PACE}/s: {busy_share:.3f} of {invocations} invocations traced)"
    )
    total = (dynamo + gateway + lam + queues + logs + xray) * per_million
    print(f"  total                                  ${total:8.2f} per million lifecycles   (goal ≤ $8.00)")
    quiet_xray = invocations * (quiet_share - busy_share) * PRICES["xray_trace_recorded"] * per_million
    print(
        f"  X-Ray at a quiet pace (≤ 1 invocation/s per function: every one traced, {invocations * quiet_share:g} traces): "
        f"${(xray * per_million) + quiet_xray:.2f} per million lifecycles, + ${quiet_xray:.2f} on the total"
    )
    quiet = (quiet_counter_wru - counter_wru) * PRICES["write_request_unit"] * per_million
    print(
        f"  at a quiet pace (every request counts itself, {quiet_counter_wru:g} WRU, and every invocation traced): "
        f"${total + quiet + quiet_xray:.2f} per million; "
        f"gap to $8.00: ${total - 8:.2f} ({(total - 8) / (PRICES['write_request_unit'] * per_million):.1f} WRU)"
    )
    fixed = (gateway + lam + logs + xray) * per_million
    budget = 8.00 - fixed
    transitions = sum(kinds.get(k, 0.0) for k in ("run head", "event batch", "interrupt", "open-runs counter"))
    print(
        f"  what $8.00 would take: HTTP API, Lambda, its logs and traces alone are ${fixed:.2f}, leaving ${budget:.2f} for DynamoDB "
        f"(≈ {budget / (PRICES['write_request_unit'] * per_million):.1f} WRU with no reads); the two transitions' "
        f"own items are {transitions:g} WRU, the inbox {kinds.get('inbox entries', 0.0):g}, the audit trail "
        f"{kinds.get('audit trail (S3)', 0.0) + kinds.get('audit trail (S3): GSI', 0.0):g} "
        '(docs/decisions.md, "The write bill, item by item")'
    )
    idem = idem_wru * PRICES["write_request_unit"] + idem_rru * PRICES["read_request_unit"]
    print(
        f"  + Idempotency-Key on create and resolve: {idem_wru:.1f} WRU, {idem_rru:.1f} RRU -> ${idem * per_million:.2f} "
        f"per million more (${total + idem * per_million:.2f} with it; bench/idempotency_calls.py has each request)"
    )
    standard = SFN_STANDARD_TRANSITIONS * PRICES["sfn_standard_transition"] * per_million
    print(
        "The same lifecycle on Step Functions, list prices, the state machine alone (no logs or traces: Standard logs "
        "nothing unless logging is configured, and X-Ray tracing is off unless enabled):"
    )
    print(
        f"  Standard: {SFN_STANDARD_TRANSITIONS} state transitions        ${standard:8.2f} per million lifecycles "
        "(+ whatever receives the token and calls SendTaskSuccess: an API and a function, as above)"
    )
    express_one_minute = PRICES["sfn_express_request"] + 0.0625 * 60 * PRICES["sfn_express_gb_second"]
    print(
        f"  Express:  not applicable             (≤ 5 minutes per execution and no .waitForTaskToken; "
        f"even a 1-minute wait would be ${express_one_minute * per_million:.2f} per million)"
    )


if __name__ == "__main__":
    main()
