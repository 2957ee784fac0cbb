"""A deployment on moto in-process, driven the way AWS drives it, with every AWS call it makes counted and metered.

Every function runs through its real handler (interlude.local.lambda_runtime, functions/<name>/handler.py): the API
function for HTTP requests, the stream's reader for each event-log record the stream filter passes (one record per
invocation, as on a quiet stream), each queue's consumer for what its event source mapping would receive (the outbox's
`dispatch` among them), and the Scheduler's target for each one-time schedule that comes due by the process clock. What each invocation costs is recorded:

* every AWS call it makes (service:operation), whatever session or client made it (botocore's client is wrapped);
* DynamoDB write and read units from the items' measured sizes (DynamoDB's size rules; a transaction's items count
  twice; a GSI write once per KB of the indexed item), by item kind and by partition key;
* SQS requests as billed (each 64 KB of a payload is a request), the event source mappings' own receives and deletes
  recorded as the poller's, not the function's;
* the CPU it spent (thread time, less what moto spent serving its calls and what this meter spent measuring);
* the bytes it wrote to stdout and stderr (what Lambda forwards to CloudWatch Logs), and its outbound HTTP requests.

The stream's own reads, the local Scheduler's listings and this meter's item reads are the harness's: not counted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import log_bytes  # the construct's log environment (LOG_LEVEL, trace header) is set by importing it

# Item kinds, by key: the first whose test passes names the item (the breakdown's rows, in this order).
KINDS: list[tuple[str, Callable[[str, str], bool]]] = [
    ("request counter", lambda pk, sk: "#RATE" in pk),
    ("inbox entries", lambda pk, sk: "#INBOX#" in pk),
    ("run index entry", lambda pk, sk: "#RUNS#" in pk),
    ("due item", lambda pk, sk: pk.startswith("DL#")),
    ("open-runs counter", lambda pk, sk: sk == "USAGE"),
    ("audit pending marker", lambda pk, sk: "#AUDITHEAD" in pk and sk != "AUDITHEAD"),
    ("audit chain head", lambda pk, sk: "#AUDITHEAD" in pk),
    ("audit checkpoint", lambda pk, sk: "#AUDIT#" in pk and sk.startswith("C#")),
    ("audit entry", lambda pk, sk: "#AUDIT#" in pk),
    ("idempotency", lambda pk, sk: "#IDEM#" in pk),
    ("task", lambda pk, sk: "#TK#" in pk or "#TASKQ#" in pk),
    ("effect records", lambda pk, sk: "#EF#" in pk),
    ("delivery records", lambda pk, sk: "#R#" in pk and sk.startswith(("N#", "D#"))),
    ("run head", lambda pk, sk: sk == "RUN"),
    ("event batch", lambda pk, sk: sk.startswith("E#")),
    ("interrupt", lambda pk, sk: sk.startswith("I#")),
]


def kind_of(pk: str, sk: str) -> str:
    other = pk.split("#")[2] if pk.count("#") > 1 else sk.split("#", 1)[0]
    return next((name for name, test in KINDS if test(pk, sk)), f"other ({other})")


def item_size(item: dict[str, Any]) -> int:
    """The item's size as DynamoDB bills it: the store's own reckoning (store/attributes.billed_size), imported here
    as this module imports Interlude, when first used."""
    from interlude.store.attributes import billed_size

    return billed_size(item)


@dataclass
class Invocation:
    """One invocation of one function (or one poller's requests): what it cost."""

    function: str
    trigger: str  # http, stream, sqs, schedule, poller
    cpu_s: float = 0.0
    calls: Counter[str] = field(default_factory=Counter)
    # Requests as each service bills them (SQS: one per 64 KB of payload).
    billed: Counter[str] = field(default_factory=Counter)
    wru: float = 0.0
    rru: float = 0.0
    wru_by_kind: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    # The largest item of each kind it wrote, in bytes as billed (the image a write is billed by): how near the next KB,
    # where a write costs a unit more (two in a transaction), each kind is.
    largest_by_kind: dict[str, int] = field(default_factory=dict)
    # Write units by partition key (the base table's and each GSI's), for the hot-partition ceilings.
    wru_by_partition: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    # Write units by table (TABLES: each table's 40,000 WRU/s is its own, docs/adr/0161), its GSIs' apart.
    wru_by_table: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    # Read units by table, as write units (each table's 40,000 RRU/s is its own too).
    rru_by_table: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    failed_writes: int = 0
    # Calls that wrote the request counter (priced apart, per request at a pace: not this run's windows).
    counter_calls: int = 0
    log_lines: list[bytes] = field(default_factory=list)
    outbound_http: int = 0
    route: str = ""
    # The records its event held (an SQS batch's messages; 1 for any other invocation).
    records: int = 1
    # Run heads it read (a GetItem of one, each key of a BatchGetItem naming one).
    head_reads: int = 0
    # A bucket schedule's (ADR 0132): its firing and its target's invocation serve every deadline due in one second and
    # shard (`records` of them), not one lifecycle's.
    bucket: bool = False
    # Secrets it read through a warm instance's cache ("{name}@{max_age_s}": Powertools' get_secret), which fetches one
    # once per max_age: the bench's warm instances hold them, so a pace's fetches are priced per use (cost_per_million).
    secrets: Counter[str] = field(default_factory=Counter)
    # Reads it made through an instance's cache of the API keys (app/keys.py) and of the tenants' settings and limits
    # (app/limits.py), by cache ("key", "limits"): held for the run, each re-read once per cache period per instance,
    # priced per use at each pace like the secrets (cost_per_million).
    cached: Counter[str] = field(default_factory=Counter)


# The deployment's tables as the bench names them (wiring.TABLES: the first, and the second, docs/adr/0161).
TABLES = ("table", "entries table")


class Meter:
    """Counts and meters every AWS call made while an invocation (or a poller) is being recorded."""

    def __init__(self, table: str, entries_table: str) -> None:
        import boto3
        from botocore.client import BaseClient
        from moto.core.botocore_stubber import BotocoreStubber

        self.table = table
        self.entries_table = entries_table
        self.current: Invocation | None = None
        # CPU seconds that were not the function's (on any of its threads): moto serving a call, this meter measuring it.
        self.excluded = 0.0
        # CPU seconds the function spent on its thread pool's threads (dispatch runs a batch's runs side by side).
        self.pooled = 0.0
        self._local = threading.local()
        self._lock = threading.Lock()
        self.reader = boto3.Session().client("dynamodb")
        self.gsi_keys = self._gsi_keys()
        meter = self
        original_call = BaseClient._make_api_call
        original_stub = BotocoreStubber.__call__

        def make_api_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            record = meter.current
            if record is None or meter._depth():
                return original_call(client, operation, params)
            service = client.meta.service_model.endpoint_prefix
            with meter.excluding(), meter._lock:
                pending = meter.before(record, service, operation, params)
            try:
                answer = original_call(client, operation, params)
            except Exception:
                with meter.excluding(), meter._lock:
                    meter.after(record, service, operation, params, pending, None)
                raise
            with meter.excluding(), meter._lock:
                meter.after(record, service, operation, params, pending, answer)
            return answer

        def stub(stubber: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
            with meter.excluding():
                return original_stub(stubber, event_name, request, **kwargs)

        def submit(pool: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
            def timed() -> Any:
                started = time.thread_time()
                try:
                    return fn(*args, **kwargs)
                finally:
                    with meter._lock:
                        meter.pooled += time.thread_time() - started

            return original_submit(pool, timed)

        from concurrent.futures import ThreadPoolExecutor

        original_submit = ThreadPoolExecutor.submit
        BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
        BotocoreStubber.__call__ = stub  # type: ignore[method-assign]
        ThreadPoolExecutor.submit = submit  # type: ignore[method-assign]

    def _gsi_keys(self) -> list[str]:
        from interlude import wiring

        return [index.partition_key for index in wiring.GLOBAL_INDEXES]

    def _depth(self) -> int:
        return int(getattr(self._local, "depth", 0))

    @contextlib.contextmanager
    def excluding(self) -> Iterator[None]:
        """CPU spent inside (on this thread) is not the function's; calls made inside are not counted (nested: the
        outermost times)."""
        depth = self._local.depth = self._depth() + 1
        started = time.thread_time() if depth == 1 else 0.0
        try:
            yield
        finally:
            if depth == 1:
                spent = time.thread_time() - started
                with self._lock:
                    self.excluded += spent
            self._local.depth = depth - 1

    def secret_read(self, name: str, max_age_s: float) -> None:
        if self.current is not None:
            self.current.secrets[f"{name}@{max_age_s:g}"] += 1

    @contextlib.contextmanager
    def secrets_counted(self) -> Iterator[None]:
        """Every read of a secret through the functions' kept values (interlude/adapters/secret_values.py: the key
        ring, the audit key, a tenant's Slack secrets) counted on the invocation recorded with the age it keeps it for,
        and kept for the run instead (so a slow machine's clock puts no fetch in a measured lifecycle: a pace's fetches
        are priced per read, bench/cost_per_million.py)."""
        from interlude.adapters import secret_values

        real = secret_values._value

        def counted(name: str, max_age_s: float, *args: Any, **kwargs: Any) -> Any:
            self.secret_read(name, max_age_s)
            return real(name, 24 * 3600, *args, **kwargs)

        secret_values._value = counted
        try:
            yield
        finally:
            secret_values._value = real

    @contextlib.contextmanager
    def caches_counted(self) -> Iterator[None]:
        """Every read through the API key cache and the tenant limits' cache counted on the invocation recorded (the
        caches themselves held for the run by the caller: a pace's re-reads are priced per use)."""
        from interlude.app.keys import Keys
        from interlude.app.limits import TenantLimiter

        key_record, in_force = Keys._key_record, TenantLimiter._in_force

        def counted(cache: str, read: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
            def reading(owner: Any, name: str) -> Any:
                if self.current is not None:
                    self.current.cached[cache] += 1
                return read(owner, name)

            return reading

        Keys._key_record = counted("key", key_record)  # type: ignore[method-assign]
        TenantLimiter._in_force = counted("limits", in_force)  # type: ignore[method-assign]
        try:
            yield
        finally:
            Keys._key_record, TenantLimiter._in_force = key_record, in_force  # type: ignore[method-assign]

    @contextlib.contextmanager
    def recording(self, record: Invocation) -> Iterator[Invocation]:
        outer, self.current = self.current, record
        try:
            yield record
        finally:
            self.current = outer

    # -- per call ---------------------------------------------------------------------------------------------------

    def before(self, record: Invocation, service: str, operation: str, params: dict[str, Any]) -> Any:
        record.calls[f"{service}:{operation}"] += 1
        if service == "sqs":
            record.billed[f"sqs:{operation}"] += self._sqs_requests(operation, params)
        elif service != "dynamodb":
            record.billed[f"{service}:{operation}"] += 1
        if service != "dynamodb":
            return None
        record.billed[f"dynamodb:{operation}"] += 1
        record.head_reads += self._head_reads(operation, params)
        writes = self._writes(operation, params)
        olds = [self._item(table, key) for table, key, _, _ in writes]
        unit = 1.0 if params.get("ConsistentRead") or any(
            body.get("ConsistentRead") for body in (params.get("RequestItems") or {}).values() if isinstance(body, dict)
        ) else 0.5
        return writes, olds, unit

    def after(
        self, record: Invocation, service: str, operation: str, params: dict[str, Any], pending: Any, answer: Any
    ) -> None:
        if service != "dynamodb" or pending is None:
            return
        writes, olds, unit = pending
        if any("#RATE" in key["pk"]["S"] for _, key, _, _ in writes):
            record.counter_calls += 1
        for (table, key, factor, deleted), old in zip(writes, olds, strict=True):
            now = self._item(table, key)
            if answer is None:
                record.failed_writes += 1
            # A delete is billed by the item it removed; a put or an update by the larger of the item it met and the
            # item it leaves, as DynamoDB bills them (an update that shrinks an item pays for what it was); refused,
            # by the item it met (a failed conditional write is billed too).
            billed = old if deleted or answer is None else max(old or {}, now or {}, key=item_size)
            size = item_size(billed or key)
            units = factor * math.ceil(size / 1024)
            pk, sk = key["pk"]["S"], key["sk"]["S"]
            kind = kind_of(pk, sk)
            record.wru += units
            record.wru_by_table[self._named(table)] += units
            record.wru_by_kind[kind] += units
            record.largest_by_kind[kind] = max(size, record.largest_by_kind.get(kind, 0))
            record.wru_by_partition[pk] += units
            for gsi_key in self.gsi_keys:
                indexed = [i for i in (old, now) if i is not None and gsi_key in i]
                if indexed and answer is not None:
                    # One GSI write per KB of the item as indexed (put, moved or removed: the larger image).
                    gsi_units = max(math.ceil(item_size(i) / 1024) for i in indexed)
                    record.wru += gsi_units
                    record.wru_by_kind[f"{kind}: GSI"] += gsi_units
                    record.wru_by_partition[f"GSI {indexed[-1][gsi_key]['S']}"] += gsi_units
        if answer is None:
            return
        for table, units in self._reads(operation, params, answer, unit):
            record.rru += units
            record.rru_by_table[self._named(table)] += units

    @staticmethod
    def _reads(operation: str, params: dict[str, Any], answer: Any, unit: float) -> list[tuple[str, float]]:
        """(table, read units) of a read call's answer."""
        if operation == "GetItem":
            return [(params["TableName"], unit * max(1, math.ceil(item_size(answer.get("Item") or {}) / 4096)))]
        if operation == "Query" or operation == "Scan":
            return [(params["TableName"], unit * max(1, math.ceil(sum(item_size(i) for i in answer.get("Items", [])) / 4096)))]
        if operation == "BatchGetItem":
            return [
                (table, sum(unit * max(1, math.ceil(item_size(i) / 4096)) for i in items))
                for table, items in (answer.get("Responses") or {}).items()
            ]
        if operation == "TransactGetItems":
            return [
                (op["Get"]["TableName"], 2 * max(1, math.ceil(item_size(r.get("Item") or {}) / 4096)))
                for op, r in zip(params["TransactItems"], answer.get("Responses", []), strict=False)
            ]
        return []

    @staticmethod
    def _sqs_requests(operation: str, params: dict[str, Any]) -> int:
        if operation == "SendMessage":
            return max(1, math.ceil(len(params.get("MessageBody", "").encode()) / 65536))
        if operation == "SendMessageBatch":
            return max(1, math.ceil(sum(len(e.get("MessageBody", "").encode()) for e in params["Entries"]) / 65536))
        return 1

    @staticmethod
    def _head_reads(operation: str, params: dict[str, Any]) -> int:
        if operation == "GetItem":
            return int(params["Key"]["sk"]["S"] == "RUN")
        if operation == "BatchGetItem":
            return sum(k["sk"]["S"] == "RUN" for body in params["RequestItems"].values() for k in body["Keys"])
        return 0

    @staticmethod
    def _writes(operation: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], int, bool]]:
        """(table, key, factor, is a delete) per item the call writes."""
        if operation == "TransactWriteItems":
            out = []
            for op in params["TransactItems"]:
                kind, body = next(iter(op.items()))
                key = body.get("Key") or {k: body["Item"][k] for k in ("pk", "sk")}
                out.append((body["TableName"], key, 2, kind == "Delete"))
            return out
        if operation in ("PutItem", "UpdateItem", "DeleteItem"):
            key = params.get("Key") or {k: params["Item"][k] for k in ("pk", "sk")}
            return [(params["TableName"], key, 1, operation == "DeleteItem")]
        if operation == "BatchWriteItem":
            out = []
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        item = request["PutRequest"]["Item"]
                        out.append((table, {k: item[k] for k in ("pk", "sk")}, 1, False))
                    else:
                        out.append((table, request["DeleteRequest"]["Key"], 1, True))
            return out
        return []

    def _named(self, table: str) -> str:
        return TABLES[1] if table == self.entries_table else TABLES[0]

    def _item(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        got: dict[str, Any] | None = self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
        return got

    def stored(self) -> tuple[int, int, int]:
        """(items, bytes DynamoDB bills as stored: each item's size + 100 B, GSI entries: their item + 100 B) of the
        whole table, read by this meter (not counted)."""
        items = size = indexed = 0
        for item in self.items():
            items += 1
            size += item_size(item) + 100
            if any(k in item for k in self.gsi_keys):
                indexed += item_size(item) + 100
        return items, size, indexed

    def items(self) -> list[dict[str, Any]]:
        """Every item of both tables, read by this meter (not counted)."""
        with self.excluding():
            scan = self.reader.get_paginator("scan").paginate
            pages = [page for table in (self.table, self.entries_table) for page in scan(TableName=table, ConsistentRead=True)]
            return [item for page in pages for item in page["Items"]]


class Deployment:
    """The world, the functions' environment, the meter and the pollers. Make one inside `mock_aws()`."""

    def __init__(self, table: str = "bench") -> None:
        import tempfile

        import boto3

        from interlude import sdk_clients
        from interlude.domain import clock
        from interlude.local import lambda_runtime
        from tests.support.moto_world import create_world
        from tests.support.receiver import Receiver
        from tests.support.stream import Stream

        self.table = table
        self.invocations: list[Invocation] = []
        # The functions' clients come from a session made after moto started (its stubber in place).
        sdk_clients.forget_clients()
        self.clock_file = Path(tempfile.mkdtemp(prefix="interlude-bench-")) / "clock"
        clock.reset(self.clock_file)
        os.environ[clock.CLOCK_FILE_ENV] = str(self.clock_file)
        world = create_world(self.table)
        self.entries_table = world.entries_table
        os.environ.update(world.env)
        self.queues = world.queues
        self.receiver = Receiver().start()
        self.stream = Stream(self.table)
        self.stream.take()  # nothing yet; makes its clients outside any measurement
        self.meter = Meter(self.table, self.entries_table)
        self.sqs = boto3.client("sqs")
        self.arns = {
            name: self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
            for name, url in self.queues.items()
        }
        lambda_runtime.fresh_instances()

    def close(self) -> None:
        self.receiver.close()

    # -- invoking ---------------------------------------------------------------------------------------------------

    def invoke(self, name: str, event: dict[str, Any], trigger: str, route: str = "") -> Any:
        from interlude.local import lambda_runtime

        record = Invocation(name, trigger, route=route)
        hits = len(self.receiver.hits)
        with log_bytes.running_as(name), log_bytes.captured_output() as output, self.meter.recording(record):
            excluded, pooled, started = self.meter.excluded, self.meter.pooled, time.thread_time()
            answer = lambda_runtime.invoke(name, event)
            own = time.thread_time() - started + self.meter.pooled - pooled
            record.cpu_s = own - (self.meter.excluded - excluded)
        record.log_lines = [line for line in output().splitlines() if line.strip()]
        record.outbound_http = len(self.receiver.hits) - hits
        self.invocations.append(record)
        return answer

    def request(
        self, route: str, path: str, body: Any = None, bearer: str | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """One HTTP API request to the API function; the route key as the deployed HTTP API sends it."""
        from interlude import wiring
        from interlude.local.http_gateway import to_event

        if route not in {f"{r.method} {r.path}" for r in wiring.ROUTES}:
            raise SystemExit(f"{route} is not a route of interlude.wiring: update this bench")
        method = route.split(" ", 1)[0]
        sent = {"content-type": "application/json", **({"authorization": bearer} if bearer else {}), **(headers or {})}
        raw = b"" if body is None else json.dumps(body).encode()
        got = self.invoke("api", {**to_event(method, path, sent, raw, "127.0.0.1"), "routeKey": route}, "http", route)
        text = got.get("body") or ""
        return got["statusCode"], (json.loads(text) if text.startswith(("{", "[")) else text)

    # -- the pollers ------------------------------------------------------------------------------------------------

    def pump_stream(self) -> int:
        """Each new event-log record the stream filter passes to the function that reads the stream, one per
        invocation (a quiet stream's batches)."""
        from interlude.local.pumps import STREAM_READER
        from interlude.store.stream import is_event_insert

        with self.meter.excluding():
            records = [r for r in self.stream.take() if is_event_insert(r)]
        for record in records:
            answer = self.invoke(STREAM_READER, {"Records": [record]}, "stream") or {}
            if answer.get("batchItemFailures"):
                raise SystemExit(f"{STREAM_READER} failed a record: {answer}")
        return len(records)

    def pump_queues(self) -> int:
        """What each SQS event source mapping receives, to its function; its receives and deletes are the poller's
        requests (billed to the account like any other)."""
        from interlude import wiring
        from interlude.local.sqs_pump import to_event_record

        moved = 0
        for spec in wiring.FUNCTIONS:
            if not spec.consumes:
                continue
            url = self.queues[spec.consumes]
            poller = Invocation(f"poller:{spec.consumes}", "poller")
            with self.meter.recording(poller):
                messages = self.sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=spec.batch_size,
                    MessageSystemAttributeNames=["All"],
                    MessageAttributeNames=["All"],
                ).get("Messages", [])
            if not messages:
                continue  # an empty receive: the pollers' idle rate is priced apart (per month, not per lifecycle)
            self.invocations.append(poller)
            records = [to_event_record(m, self.arns[spec.consumes]) for m in messages]
            answer = self.invoke(spec.name, {"Records": records}, "sqs") or {}
            self.invocations[-1].records = len(records)
            failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
            done = [r for r in records if r["messageId"] not in failed]
            if done:
                with self.meter.recording(poller):
                    self.sqs.delete_message_batch(
                        QueueUrl=url,
                        Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)],
                    )
            moved += len(messages)
        return moved

    def pump_schedules(self) -> int:
        """Fire every one-time schedule due by the process clock (Scheduler's own listing and its deletion after
        completion are free: not counted); each firing is a Scheduler invocation, billed."""
        from interlude import wiring
        from interlude.local.schedules import SchedulePump

        pump = getattr(self, "_schedule_pump", None)
        if pump is None:
            with self.meter.excluding():
                pump = self._schedule_pump = SchedulePump(wiring.LOCAL_SCHEDULE_GROUP)
        with self.meter.excluding():
            due = pump.due_schedules()
        for schedule in due:
            firing = Invocation("scheduler", "schedule")
            firing.billed["scheduler:invocation"] += 1
            self.invocations.append(firing)
            body = json.loads(schedule["Target"].get("Input") or "{}")
            answer = self.invoke(wiring.SCHEDULES.target, body, "schedule") or {}
            if "dueSecond" in body:
                for inv in (firing, self.invocations[-1]):
                    inv.bucket, inv.records = True, max(1, int(answer.get("deadlines", 1)))
            if schedule.get("ActionAfterCompletion") == "DELETE":
                with self.meter.excluding(), contextlib.suppress(Exception):
                    pump.client.delete_schedule(Name=schedule["Name"], GroupName=pump.group)
        return len(due)

    def drain(self, schedules: bool = False) -> None:
        """Deliver whatever is in flight until nothing moves (the due schedules too, when asked)."""
        for _ in range(50):
            moved = self.pump_stream() + self.pump_queues() + (self.pump_schedules() if schedules else 0)
            if not moved:
                return
        raise SystemExit("the deployment did not settle")

    def advance(self, seconds: float) -> None:
        from interlude.domain import clock

        clock.advance(self.clock_file, seconds)

    def take(self) -> list[Invocation]:
        taken, self.invocations = self.invocations, []
        return taken
