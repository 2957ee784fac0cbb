"""Measure four lifecycles end to end on a whole deployment, and print what each one costs in AWS calls and units.

(a) create → callback notice → resolve (through the notice's link) → completion notice, with a 2 KB gate text and
    2 KB of inputs: what a tenant should use;
(b) create, get, resolve, get: the polling client;
(c) a gate that times out through EventBridge Scheduler (and the same with callback notices);
(d) a `core.task` served by a worker: create, claim, complete.

Each runs through the real handlers of every function, on moto in-process (bench/_deployment.py): HTTP requests to the
API function, each event-log record the stream filter passes to `dispatch` (one per invocation, as on a quiet
stream), each queue's messages to its consumer (callbacks to a receiver on 127.0.0.1), each one-time schedule to the
`timeouts` function when the process clock reaches it. After a lifecycle the clock moves two days on and every
schedule still pending fires: work that fires after the lifecycle is done is counted. Counted figures (calls, units,
bytes) do not depend on the machine's load; CPU is the thread's own time, less moto's and the meter's, the median
over the rounds (the load average is printed beside it).

Two paces, because some writes depend on the traffic, not on the lifecycle: busy (an API instance answering
BUSY_REQUESTS_PER_S of the tenant: the request counter leased; the audit chain already waiting for its checkpoint)
and quiet (every request counts itself; each decision is measured starting its audit chain's wait: how often its chain
is still marked from the one before, and how many decisions its checkpoint anchors, are priced by
bench/cost_per_million.py). The request counter's own writes are taken out of the invocations and priced per request
at each pace (app/limits.py's leases, run here), as are the secrets, API keys and tenant limits read through an
instance's cache (held for the run, counted per read); the audit checkpoint, the sweep that publishes a tenant's anchor while a chain waits, and the
idle sweep every minute are measured through the `timeouts` function and the audit service.

With --writer NAME (a writer switch of domain/formats.py, e.g. AUDIT_HEAD_LAGS_WRITTEN), that switch is turned on
for the run: what a writer a later release turns on will cost, measured before it ships (docs/adr/0172).
Usage: .venv/bin/python bench/lifecycles.py [rounds] [--json] [--writer NAME]
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote, urlsplit

from _bench import english_text, offline_aws

offline_aws(
    TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries",
    PUBLIC_BASE_URL="https://interlude.example.com",
    INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS="1",
    INTERLUDE_CALLBACK_BACKOFF_BASE_S="0",
    AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled",
)

from _deployment import TABLES, Deployment, Invocation, item_size, log_bytes  # noqa: E402
from _tls import HOST, LOOPBACK, TlsForwarder  # noqa: E402
from moto import mock_aws  # noqa: E402

from interlude import wiring  # noqa: E402

# An API instance's pace at a busy tenant (requests/s it answers), and the deployment's lifecycles/s at each pace.
BUSY_REQUESTS_PER_S = 25
PACES = {"busy": 25.0, "quiet": 0.2}
TWO_KB = english_text(2030, 2000)  # a gate's text: 2,030 bytes of prose (deflated ≈ 840 B)
TWO_KB_BRIEF = english_text(2030, 6000)  # a run's 2 KB input, other prose (deflated ≈ 950 B)
TASK_WORKFLOW = {
    "id": "bench-task",
    "name": "A task served by a worker",
    "nodes": [
        {"id": "draft", "typeId": "core.task", "config": {"taskType": "summarise", "input": {"order": "{{inputs.order}}"}}},
        {"id": "after", "typeId": "core.transform", "config": {"outputs": {"got": "{{draft.summary}}"}}},
    ],
    "edges": [{"id": "e", "sourceNodeId": "draft", "targetNodeId": "after"}],
    "variables": [{"name": "order", "type": "string"}],
}
TEXT_WORKFLOW = {
    "id": "bench-approval-2kb",
    "name": "An approval with a 2 KB text",
    "nodes": [
        {
            "id": "gate",
            "typeId": "core.approvalGate",
            "config": {"title": "Approve the brief?", "description": TWO_KB, "actions": ["accept", "reject"]},
        }
    ],
    "edges": [],
    "variables": [{"name": "brief", "type": "string"}],
}


class Tenant:
    """The tenant the lifecycles run as: an admin key, a worker key, its workflows."""

    def __init__(self, deployment: Deployment) -> None:
        from interlude.composition import Services
        from interlude.domain.models.requests import CreateKeyRequest
        from interlude.domain.models.workflow import WorkflowDefinition
        from interlude.store.facade import Store
        from tests.support.local_stack import FIXTURES

        self.services = Services(Store(deployment.table, deployment.entries_table))
        self.name = "bench"
        admin = self.services.keys.issue_key(self.name, CreateKeyRequest(subjectId="admin", scopes=list(wiring.ALL_SCOPES)))
        worker = self.services.keys.issue_key(self.name, CreateKeyRequest(subjectId="worker", scopes=["tasks:work"]))
        self.admin, self.worker = f"Bearer {admin['apiKey']}", f"Bearer {worker['apiKey']}"
        principal = self.services.keys.authenticate(self.admin)
        for definition in (
            json.loads((FIXTURES / "conformance-approval.json").read_text()),
            timed_gate(),
            TASK_WORKFLOW,
            TEXT_WORKFLOW,
        ):
            self.services.workflows.put_workflow(principal, definition["id"], WorkflowDefinition.model_validate(definition))


def wire(run_id: str) -> str:
    return quote(run_id, safe="")


def created(got: tuple[int, Any]) -> str:
    status, body = got
    if status != 201:
        raise SystemExit(f"createRun answered {status}: {body}")
    return str(body["runId"])


def ok(got: tuple[int, Any], what: str) -> Any:
    status, body = got
    if status >= 300:
        raise SystemExit(f"{what} answered {status}: {body}")
    return body


def notice(deployment: Deployment, run_id: str, kind: str) -> dict[str, Any]:
    for hit in reversed(deployment.receiver.hits):
        body = json.loads(hit.body)
        if body.get("runId") == run_id and body.get("type") == kind:
            return body
    raise SystemExit(f"no {kind} notice of {run_id} reached the receiver")


def callback_lifecycle(deployment: Deployment, tenant: Tenant) -> None:
    run = created(
        deployment.request(
            "POST /runs",
            "/runs",
            {"workflowId": TEXT_WORKFLOW["id"], "inputs": {"brief": TWO_KB_BRIEF}, "callbackUrl": deployment.receiver.url()},
            tenant.admin,
        )
    )
    deployment.drain()
    link = notice(deployment, run, "interrupt.requested")["links"]["resolve"]
    ok(
        deployment.request("POST /interrupts/{token}", urlsplit(link).path, {"resumeValue": {"action": "accept"}}),
        "the notice's resolve link",
    )
    deployment.drain()
    notice(deployment, run, "run.completed")


def polling_lifecycle(deployment: Deployment, tenant: Tenant) -> None:
    run = created(deployment.request("POST /runs", "/runs", {"workflowId": "conformance-approval"}, tenant.admin))
    ok(deployment.request("GET /runs/{runId}", f"/runs/{wire(run)}", bearer=tenant.admin), "getRun")
    ok(
        deployment.request(
            "POST /runs/{runId}/interrupts/{nodeId}",
            f"/runs/{wire(run)}/interrupts/gate",
            {"resumeValue": {"action": "accept"}},
            tenant.admin,
        ),
        "resolve",
    )
    ok(deployment.request("GET /runs/{runId}", f"/runs/{wire(run)}", bearer=tenant.admin), "getRun")
    deployment.drain()


# A gate's timeout as deployments set them (minutes, not the conformance fixture's 1.5 s): its deadline is listed in the
# due index under a bucket schedule (ADR 0132); one due within seconds of its record gets a schedule of its own.
TIMED_GATE_MS = 600_000


def timed_gate() -> dict[str, Any]:
    from tests.support.local_stack import FIXTURES

    definition = json.loads((FIXTURES / "conformance-approval-timeout.json").read_text())
    definition["nodes"][0]["config"]["timeoutMs"] = TIMED_GATE_MS
    return definition


def timeout_lifecycle(notices: bool) -> Callable[[Deployment, Tenant], None]:
    def lifecycle(deployment: Deployment, tenant: Tenant) -> None:
        body: dict[str, Any] = {"workflowId": "conformance-approval-timeout"}
        if notices:
            body["callbackUrl"] = deployment.receiver.url()
        run = created(deployment.request("POST /runs", "/runs", body, tenant.admin))
        deployment.drain()
        deployment.advance(TIMED_GATE_MS / 1000 + 2)  # past the gate's deadline and the second it is rounded up to
        deployment.drain(schedules=True)
        state, _ = tenant.services.runs.load_run(tenant.name, run)  # the bench's own look (no invocation: not counted)
        if state.status != "failed":
            raise SystemExit(f"the timed gate's run is {state.status}, not failed")

    return lifecycle


def task_lifecycle(deployment: Deployment, tenant: Tenant) -> None:
    run = created(
        deployment.request("POST /runs", "/runs", {"workflowId": TASK_WORKFLOW["id"], "inputs": {"order": "o-1"}}, tenant.admin)
    )
    deployment.drain()
    task = ok(
        deployment.request("POST /tasks:claim", "/tasks:claim", {"queues": ["summarise"], "waitSeconds": 0}, tenant.worker),
        "claimTask",
    )
    if not task or task.get("runId") != run:
        raise SystemExit(f"the claim did not hand out the run's task: {task}")
    token = wire(task["taskToken"])
    ok(
        deployment.request("POST /tasks/{taskToken}/complete", f"/tasks/{token}/complete", {"output": {"summary": "short"}}, tenant.worker),
        "completeTask",
    )
    deployment.drain()


LIFECYCLES: dict[str, tuple[str, Callable[[Deployment, Tenant], None]]] = {
    "a": ("create → callback notice → resolve → completion notice (2 KB gate text, 2 KB inputs)", callback_lifecycle),
    "b": ("create, get, resolve, get", polling_lifecycle),
    "c": ("a gate that times out through Scheduler", timeout_lifecycle(False)),
    "c+notices": ("the same, with callback notices", timeout_lifecycle(True)),
    "d": ("a core.task served by a worker (claim, complete)", task_lifecycle),
}


def settled(deployment: Deployment) -> None:
    """What fires after the lifecycle: every schedule still pending, two days on."""
    deployment.advance(2 * 24 * 3600)
    deployment.drain(schedules=True)


def audit_chain_settled(tenant: Tenant) -> None:
    """The tenant's chains checkpointed, anchored and off the pending index (not counted): the next decision starts a
    chain's wait and writes its marker (how often a quiet decision finds its chain still marked is priced apart:
    bench/cost_per_million.py)."""
    from interlude.rules import audit as audit_rules

    for chain in range(wiring.AUDIT_CHAINS):
        tenant.services.audit.checkpoint(tenant.name, chain)
    keep, audit_rules.MARKER_KEEP_SECONDS = audit_rules.MARKER_KEEP_SECONDS, 0
    try:
        tenant.services.audit.publish_anchor(tenant.name, list(range(wiring.AUDIT_CHAINS)))
    finally:
        audit_rules.MARKER_KEEP_SECONDS = keep


def run_once(deployment: Deployment, tenant: Tenant, lifecycle: Callable[[Deployment, Tenant], None]) -> tuple[list[Invocation], dict[str, Any]]:
    from interlude.domain import clock

    before = deployment.meter.stored()
    held = {(i["pk"]["S"], i["sk"]["S"]): i for i in deployment.meter.items()}
    deployment.take()
    lifecycle(deployment, tenant)
    # The run ended inside the lifecycle (its last transition, drained): each item's expiry is priced from here.
    ended = clock.now().timestamp()
    settled(deployment)
    after = deployment.meter.stored()
    stored: dict[str, Any] = {"items": after[0] - before[0], "bytes": after[1] - before[1], "indexed_bytes": after[2] - before[2]}
    items = deployment.meter.items()
    stored["kept"] = kept_items(held, items, ended, deployment.meter.gsi_keys)
    stored["kinds"] = stored_kinds(stored["kept"])
    return deployment.take(), stored


def item_kind(pk: str, sk: str) -> str:
    """What an item is, by its key (store/layout.py and the families beside their code): a run's own items by their
    sort key, the rest by their partition's family."""
    parts = pk.split("#")
    if len(parts) == 4 and parts[0] == "T" and parts[2] == "R":
        return "run " + ("head" if sk == "RUN" else sk.split("#", 1)[0] + "#")
    if pk.startswith("K#"):
        return "api key"
    return parts[2] if len(parts) > 2 and parts[0] == "T" else parts[0]


def stored_kinds(kept: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per kind of item the lifecycle added or grew: items, bytes as billed (+100 B each), and how many carry a ttl
    (deleted by DynamoDB's TTL once it passes)."""
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: {"items": 0, "bytes": 0, "expiring": 0})
    for item in kept:
        kind = kinds[item["kind"]]
        kind["items"] += item["new"]
        kind["bytes"] += item["bytes"]
        kind["expiring"] += item["kept_s"] is not None
    return dict(kinds)


def kept_items(
    before: dict[tuple[str, str], Any], after: list[dict[str, Any]], ended: float, gsi_keys: list[str]
) -> list[dict[str, Any]]:
    """Each item the lifecycle added or grew, as DynamoDB bills its storage: its kind, the bytes it added (+100 B if new)
    and as many again if an index holds it, and how long it is kept past the run's end by its own expiry attribute as the
    lifecycle left it (`kept_s`: its `ttl` less the end; None: no expiry, kept for ever)."""
    out = []
    for item in after:
        key = (item["pk"]["S"], item["sk"]["S"])
        old = before.get(key)
        grown = item_size(item) + 100 - (item_size(old) + 100 if old else 0)
        if old is not None and grown <= 0:
            continue
        ttl = item.get(wiring.TTL_ATTRIBUTE, {}).get("N")
        out.append({
            "kind": item_kind(*key),
            "new": old is None,
            "bytes": grown,
            "indexed_bytes": grown if any(k in item for k in gsi_keys) else 0,
            "kept_s": None if ttl is None else float(ttl) - ended,
        })
    return out


def tls_context_cpu_ms(rounds: int = 15) -> float:
    """CPU a warm callback's https POST spends on its TLS context (what adapters/delivery/pinned_http.py does for one:
    `_tls_context`, which a process makes once and keeps since ADR 0136's finding; before, ≈ 24 ms a POST), the
    median of `rounds` after the process's first: the bench's receiver is plain http on 127.0.0.1, so the measured
    invocations never make one."""
    from interlude.adapters.delivery import pinned_http

    pinned_http._tls_context(None)  # the instance's first POST (its cold start's share)
    spent = []
    for _ in range(rounds):
        started = time.thread_time()
        pinned_http._tls_context(None)
        spent.append(time.thread_time() - started)
    return statistics.median(spent) * 1000


def tls_handshake_cpu_ms(rounds: int = 15) -> float:
    """CPU the client side of a callback's TLS handshake spends, the median of `rounds`: every POST dials a connection
    of its own (pinned_http sends `Connection: close`), so each one verifies the receiver's chain and agrees a key
    again. Through the context a POST uses, against a server with AWS's chain shape (bench/_tls.py: RSA 2048, the
    client verifying two signatures up to a root it trusts); the bench's receiver is plain http, so the measured
    invocations never make one. What the server spends is another thread's, not counted."""
    from interlude.adapters.delivery import pinned_http

    spent = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-tls-") as directory,
        socket.create_server((LOOPBACK, 0)) as upstream,  # the forwarder dials it; nothing is sent through
        TlsForwarder(upstream.getsockname()[:2], Path(directory)) as server,
    ):
        root = Path(directory) / "root.pem"
        root.write_bytes(server.root.pem())
        context = pinned_http._tls_context(str(root))
        port = int(urlsplit(server.endpoint).port or 443)
        for _ in range(rounds + 1):
            with socket.create_connection((LOOPBACK, port)) as sock:
                started = time.thread_time()
                with context.wrap_socket(sock, server_hostname=HOST):
                    spent.append(time.thread_time() - started)
    return statistics.median(spent[1:]) * 1000


def as_dict(record: Invocation, cpu_ms: float) -> dict[str, Any]:
    counter = record.wru_by_kind.get("request counter", 0.0)
    kinds: dict[str, float] = defaultdict(float)
    for kind, units in record.wru_by_kind.items():
        if not kind.startswith("request counter"):
            kinds[kind] += units
    logs = Counter(log_bytes.kind_of(line) for line in record.log_lines)
    calls, billed = Counter(record.calls), Counter(record.billed)
    calls["dynamodb:UpdateItem"] -= record.counter_calls
    billed["dynamodb:UpdateItem"] -= record.counter_calls
    return {
        "function": record.function,
        "trigger": record.trigger,
        "route": record.route,
        "cpu_ms": round(cpu_ms, 3),
        "calls": {k: v for k, v in calls.items() if v > 0},
        "billed": {k: v for k, v in billed.items() if v > 0},
        # The request counter's writes are priced per request at each pace, not as this run's windows fell.
        "wru": record.wru - counter - record.wru_by_kind.get("request counter: GSI", 0.0),
        "rru": record.rru,
        "wru_by_kind": dict(kinds),
        # The request counter's are the first table's (its item is there).
        "wru_by_table": {
            name: units - (counter if name == TABLES[0] else 0.0)
            for name, units in record.wru_by_table.items()
        },
        "rru_by_table": dict(record.rru_by_table),
        "largest_by_kind": {k: v for k, v in record.largest_by_kind.items() if not k.startswith("request counter")},
        "wru_by_partition": {pk: u for pk, u in record.wru_by_partition.items() if "#RATE" not in pk},
        "failed_writes": record.failed_writes,
        "log_bytes": sum(len(line) for line in record.log_lines),
        "log_events": len(record.log_lines),
        "log_kinds": dict(logs),
        "outbound_http": record.outbound_http,
        "records": record.records,
        "head_reads": record.head_reads,
        "bucket": record.bucket,
        "secrets": dict(record.secrets),
        "cached": dict(record.cached),
        "authenticated": record.function == "api" and record.route not in UNAUTHENTICATED_ROUTES,
    }


UNAUTHENTICATED_ROUTES = {f"{r.method} {r.path}" for r in wiring.ROUTES if r.scope is None}


def shape(records: list[Invocation]) -> list[tuple[str, str]]:
    return [(r.function, r.route) for r in records]


def measured_rounds(
    deployment: Deployment,
    tenant: Tenant,
    lifecycle: Callable[[Deployment, Tenant], None],
    rounds: int,
    before: Callable[[], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One pace's invocations of one lifecycle: counts from the last round, CPU the median per invocation over the
    rounds of its shape. `before`: what sets each round up (the quiet pace: its audit chain settled, not counted)."""
    runs = []
    for _ in range(rounds):
        if before is not None:
            before()
            deployment.take()
        runs.append(run_once(deployment, tenant, lifecycle))
    last, stored = runs[-1]
    same = [records for records, _ in runs if shape(records) == shape(last)]
    cpu = [statistics.median(records[i].cpu_s for records in same) * 1000 for i in range(len(last))]
    return [as_dict(record, ms) for record, ms in zip(last, cpu, strict=True)], stored


def counter_writes_per_request(services: Any, rate: float, seconds: int = 600) -> float:
    """Request-counter writes per request of one warm API instance answering a tenant's `rate` requests/s, evenly
    spaced, at the default limit, once its leases have grown to that pace (app/limits.py, run against the table): the
    requests of the first minute not counted, the next `seconds` are (several spans: a lease counted ahead covers the
    windows its span still holds, rules/limits.AHEAD_WINDOWS)."""
    from interlude.app.limits import RequestLeases
    from interlude.config import settings
    from interlude.rules.limits import window_of
    from interlude.store.limits import LimitStore

    class Counted(LimitStore):
        writes = 0

        def count_request(self, *args: Any, **kwargs: Any) -> Any:
            Counted.writes += 1
            return super().count_request(*args, **kwargs)

    counters = Counted(services.store.table, services.store.client)
    leases = RequestLeases()
    limit = settings().tenant_requests_per_second
    warm, counted = round(60 * rate), round(seconds * rate)
    for k in range(warm + counted):
        if k == warm:
            Counted.writes = 0
        leases.admit(counters, f"rate-{rate}", window_of(10_020.5 + k / rate), limit)
    return Counted.writes / counted


def quiet_request_rates() -> list[float]:
    """A tenant's authenticated requests/s at the quiet pace for each count of them a lifecycle makes (1-4)."""
    return [round(n * PACES["quiet"], 6) for n in range(1, 5)]


def measure(rounds: int) -> dict[str, Any]:
    from interlude.app import keys as app_keys
    from interlude.app import limits as app_limits
    from interlude.config import settings
    from interlude.rules import audit as audit_rules

    chains = wiring.AUDIT_CHAINS
    key_cache, limits_cache = settings().key_cache_seconds, app_limits.LIMITS_CACHE_SECONDS
    # The keys and the tenants' limits are re-read once per cache period per instance: held for the run (so a slow
    # machine's clock puts no re-read in a measured lifecycle; the key cache's clock stands still) and priced per use
    # at each pace instead (each function's uses counted: Meter.caches_counted).
    app_keys.time = SimpleNamespace(monotonic=lambda: 0.0)  # type: ignore[assignment]
    app_limits.LIMITS_CACHE_SECONDS = 3600.0
    # One chain, so the busy pace's "already waiting for its checkpoint" holds for every lifecycle of the run.
    wiring.AUDIT_CHAINS = 1
    with mock_aws():
        deployment = Deployment("bench")
        try:
            with deployment.meter.secrets_counted(), deployment.meter.caches_counted():
                tenant = Tenant(deployment)
                found: dict[str, Any] = {}
                for name, (title, lifecycle) in LIFECYCLES.items():
                    run_once(deployment, tenant, lifecycle)  # a warm instance of every function: first use paid
                    busy, stored = measured_rounds(deployment, tenant, lifecycle, rounds)
                    # The quiet pace's CPU is a median over as many rounds as the busy pace's: one sample at this
                    # machine's load can be several times the work's (a 135 ms dispatch priced (d) quiet 2.2× busy).
                    quiet, _ = measured_rounds(deployment, tenant, lifecycle, rounds, lambda: audit_chain_settled(tenant))
                    found[name] = {"title": title, "busy": busy, "quiet": quiet, "stored": stored}
                audit = measure_audit(deployment, tenant)
                counter = {
                    "busy": {str(BUSY_REQUESTS_PER_S): counter_writes_per_request(tenant.services, BUSY_REQUESTS_PER_S)},
                    "quiet": {str(rate): counter_writes_per_request(tenant.services, rate) for rate in quiet_request_rates()},
                }
        finally:
            deployment.close()
    wiring.AUDIT_CHAINS = chains
    return {
        "load": os.getloadavg(),
        "rounds": rounds,
        "paces": PACES,
        "busy_requests_per_s": BUSY_REQUESTS_PER_S,
        "lifecycles": found,
        "audit": {
            **audit,
            "chains": chains,
            "interval_s": audit_rules.CHECKPOINT_INTERVAL_SECONDS,
            "interval_entries": audit_rules.CHECKPOINT_INTERVAL_ENTRIES,
            "marker_keep_s": audit_rules.MARKER_KEEP_SECONDS,
            "sweep_every_s": wiring.AUDIT_CHECKPOINT_SWEEP.every_s,
        },
        "counter_writes_per_request": counter,
        "tenant_requests_per_second": settings().tenant_requests_per_second,
        "tenant_open_runs": settings().tenant_open_runs,
        "caches_s": {"key": key_cache, "limits": limits_cache, "key_ring": settings().key_ring_cache_seconds},
        "logs": estimated_log_bytes(),
        "tls_context_cpu_ms": tls_context_cpu_ms(),
        "tls_handshake_cpu_ms": tls_handshake_cpu_ms(),
    }


def estimated_log_bytes() -> dict[str, Any]:
    """What CloudWatch Logs meters for what the code does not write (bench/log_bytes.py's estimates): Lambda's platform
    records per invocation, and the HTTP API's access log line per request, by route."""
    overhead = log_bytes.EVENT_OVERHEAD_BYTES
    platform = sum(len(line) + overhead for line in log_bytes.platform_records(str(uuid.uuid4()), "api"))
    return {
        "platform_bytes_per_invocation": platform,
        "access_log_bytes": {
            f"{r.method} {r.path}": len(log_bytes.access_log_line(f"{r.method} {r.path}", 200, 400)) + overhead
            for r in wiring.ROUTES
        },
        "event_overhead": overhead,
    }


def measure_audit(deployment: Deployment, tenant: Tenant) -> dict[str, Any]:
    """The timeouts function's audit sweep with nothing waiting (every minute, in every deployment), with a chain
    waiting (the tenant's anchor published), and what the sweep adds once the chain's interval has passed: the
    checkpoint and the chain's settling (the audit service's calls, as the sweep makes them: the interval is measured on
    the wall clock)."""
    sweep = {"sweep": "audit-checkpoints"}
    audit_chain_settled(tenant)
    deployment.take()
    deployment.invoke(wiring.SCHEDULES.target, sweep, "schedule")
    idle = deployment.take()
    polling_lifecycle(deployment, tenant)  # one decision: its chain waits
    deployment.drain()
    deployment.take()
    deployment.invoke(wiring.SCHEDULES.target, sweep, "schedule")
    waiting = deployment.take()
    # The checkpoint's own work in the sweep that makes it (the anchor then takes the head it left), and the
    # chain taken off the pending index once quiet for MARKER_KEEP_SECONDS (a sweep that settles publishes nothing
    # more). The anchor published between the two is the waiting sweep's (one per tenant and sweep, however many
    # chains it checkpoints), priced with it: not counted here again.
    checkpoint, settle = Invocation(wiring.SCHEDULES.target, "schedule"), Invocation(wiring.SCHEDULES.target, "schedule")
    audit, chains = tenant.services.audit, tenant.services.store.audit_log
    heads: dict[int, Any] = {}

    def checkpointed() -> None:
        made = audit.checkpoint_made(tenant.name, 0)
        if made is None:
            raise SystemExit("the bench's waiting chain had nothing to checkpoint")
        heads[0] = made[1]

    timed(deployment, checkpoint, checkpointed)
    audit.publish_anchor(tenant.name, [], heads)
    timed(deployment, settle, lambda: chains.settle(tenant.name, 0, heads[0]))
    return {
        "idle_sweep": [as_dict(r, r.cpu_s * 1000) for r in idle],
        "waiting_sweep": [as_dict(r, r.cpu_s * 1000) for r in waiting],
        "checkpoint": [as_dict(checkpoint, checkpoint.cpu_s * 1000)],
        "settle": [as_dict(settle, settle.cpu_s * 1000)],
    }


def timed(deployment: Deployment, record: Invocation, work: Callable[[], Any]) -> None:
    """`work` counted into `record`, its CPU added (the thread's, less moto's and the meter's)."""
    with deployment.meter.recording(record):
        excluded, started = deployment.meter.excluded, time.thread_time()
        work()
        record.cpu_s += time.thread_time() - started - (deployment.meter.excluded - excluded)


def summarise(invocations: list[dict[str, Any]]) -> dict[str, Any]:
    calls: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    tables: Counter[str] = Counter(dict.fromkeys(TABLES, 0.0))
    largest: dict[str, int] = {}
    for inv in invocations:
        calls.update(inv["calls"])
        if inv["trigger"] != "poller":
            by_function[inv["function"]] += 1
        kinds.update(inv["wru_by_kind"])
        tables.update(inv.get("wru_by_table", {}))
        for kind, size in inv.get("largest_by_kind", {}).items():
            largest[kind] = max(size, largest.get(kind, 0))
    return {
        "largest": largest,
        "calls": calls,
        "invocations": by_function,
        "wru": sum(i["wru"] for i in invocations),
        "rru": sum(i["rru"] for i in invocations),
        "kinds": kinds,
        "tables": tables,
        "cpu_ms": sum(i["cpu_ms"] for i in invocations),
    }


def item_sizes(largest: dict[str, int]) -> str:
    """Each kind's largest item as `1,666 B (382 B to 2 KB)`, largest first: an item a few bytes over a KB costs a
    write unit more (two in a transaction) than one a few bytes under it (docs/adr/0153)."""
    return ", ".join(
        f"{kind} {size:,} B ({-size % 1024 or 1024} B to {-(-size // 1024) or 1} KB)"
        for kind, size in sorted(largest.items(), key=lambda kv: -kv[1])
    )


def writer_switched_on(argv: list[str]) -> str | None:
    """Turn on the writer switch `--writer NAME` names (domain/formats.py), refusing a name that is not one; the name."""
    from interlude.domain import formats

    if "--writer" not in argv:
        return None
    name = argv[argv.index("--writer") + 1]
    if not name.endswith("_WRITTEN") or not isinstance(getattr(formats, name, None), bool):
        raise SystemExit(f"--writer {name}: not a writer switch of interlude.domain.formats")
    setattr(formats, name, True)
    return name


def main() -> None:
    writer = writer_switched_on(sys.argv)
    args = [a for a in sys.argv[1:] if not a.startswith("--") and a != writer]
    measured = measure(int(args[0]) if args else 3)
    if "--json" in sys.argv:
        print(json.dumps(measured))
        return
    load = ", ".join(f"{x:.1f}" for x in measured["load"])
    print(
        f"Lifecycles through every function's real handler on moto in-process (rounds={measured['rounds']}; CPU: the "
        f"median per invocation, this machine, load average {load}; counts are load-independent). WRU without the "
        "request counter (priced per request at each pace: bench/cost_per_million.py)."
        + (f" Writer switched on for this run: formats.{writer}." if writer else "")
    )
    for name, found in measured["lifecycles"].items():
        busy = summarise(found["busy"])
        quiet = summarise(found["quiet"])
        print(f"\n({name}) {found['title']}")
        print(
            f"  {busy['wru']:.1f} WRU, {busy['rru']:.1f} RRU at the busy pace ({quiet['wru']:.1f} / {quiet['rru']:.1f} "
            f"quiet); invocations: {', '.join(f'{k} {v}' for k, v in busy['invocations'].items())}; "
            f"CPU {busy['cpu_ms']:.0f} ms in all"
        )
        tables = ", ".join(f"{name} {busy['tables'][name]:g}" for name in TABLES)
        print(f"  write units by table: {tables} (each table's own 40,000 WRU/s)")
        print(f"  write units by item kind: {', '.join(f'{k} {v:g}' for k, v in busy['kinds'].most_common())}")
        print(f"  largest item written by kind (billed size, and the room left under its next KB): {item_sizes(busy['largest'])}")
        print(f"  stored after it: {found['stored']['items']} items, {found['stored']['bytes']} B")
        for inv in found["busy"]:
            what = inv["route"] or inv["trigger"]
            calls = ", ".join(f"{k}×{v}" for k, v in sorted(inv["calls"].items())) or "-"
            print(
                f"    {inv['function']:<18} {what:<42} {inv['cpu_ms']:6.1f} ms  {inv['wru']:4.1f} WRU {inv['rru']:4.1f} RRU"
                f"  {calls}"
            )
    audit = measured["audit"]
    for label, key in (
        ("idle audit sweep (every minute)", "idle_sweep"),
        ("audit sweep with a chain waiting", "waiting_sweep"),
        ("audit checkpoint", "checkpoint"),
        ("a quiet chain taken off the pending index", "settle"),
    ):
        s = summarise(audit[key])
        print(f"\n{label}: {s['wru']:.1f} WRU, {s['rru']:.1f} RRU, CPU {s['cpu_ms']:.1f} ms, calls {dict(s['calls'])}")
    print(f"\nrequest-counter writes per authenticated request: {measured['counter_writes_per_request']}")


if __name__ == "__main__":
    main()
