"""Price lifecycles (a)–(d) per million, every line counted, beside Step Functions Standard, Temporal Cloud and Lambda
durable functions doing the same work.

The counted figures are bench/lifecycles.py's (run here, or read with --measured FILE from its --json): every request,
invocation, AWS call, write and read unit and stored byte of each lifecycle, through every function's real handler.
Priced at list prices (bench/_prices.py: each with its page and the date it was read):

* infrastructure: HTTP API requests; Lambda requests and GB-seconds (duration = the measured CPU scaled to the
  function's share of a vCPU, what each callback POST spends on its TLS context and handshake included, plus each AWS call's
  round trip and each outbound HTTP request's: bench/_prices.py's estimates, rounded up once per invocation); DynamoDB write and read
  units as counted, the request counter at the pace's writes per request, the key and limits re-reads per cache period;
  SQS requests (the functions' and the event source mappings' receives and deletes); Scheduler invocations; Secrets
  Manager and S3 calls; the audit chain's pending marker, checkpoint and the sweeps that publish the tenant's anchor
  while it waits, shared over the decisions of a checkpoint interval; storage while retained (each item the lifecycle
  leaves, measured, + 100 B, from the run's end to its own expiry attribute as the lifecycle left it and TTL's deletion
  lag after it; an item with none is kept for ever, priced for the default retention's 3 months and said so; the
  retention job's writes are counted with the rest); and the deployment's fixed monthly costs (the pollers' empty
  receives, the audit sweep every minute, its secrets) spread over the month's lifecycles at the pace;
* what a batch holds at the pace (batch_sizes, from the deployed mappings and AWS's documented polling: bench/_prices.py):
  an invocation of the stream reader, of a queue's consumer or of a bucket schedule's target, the mapping's receive and
  delete, the stream's SendMessageBatch and the bucket's firing are shared by the records the batch holds, and the
  batch's duration is billed once, its records side by side where the function takes them so; each record's own calls,
  units and CPU stay whole. The quiet pace leaves each record alone in its batch;
* observability: CloudWatch Logs ingestion and one month's storage of what the invocations wrote (measured) and of
  Lambda's platform records and the HTTP API's access log (estimated: bench/log_bytes.py), the dashboard; X-Ray traces
  at the construct's sampling rule (interlude_cdk/props.py TraceSampling's defaults, read from its source; the
  account's default rule, 1/s then 5%, before issue 31) at the pace (an SQS-triggered invocation continues its
  sender's trace).

Two paces (bench/lifecycles.py): busy (25 lifecycles/s of one tenant) and quiet (0.2/s). The peers are priced for the
same lifecycle with what their user also pays (the Lambda tasks and the HTTP front door a decision arrives through),
as ranges where a choice of design moves them; their lines are printed.
Usage: .venv/bin/python bench/cost_per_million.py [--measured FILE] [--json]
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers" / "core" / "python"))

from _prices import (  # noqa: E402
    CALL_MS,
    DEFAULT_CALL_MS,
    IDLE_POLLERS_PER_QUEUE,
    INVOKE_OVERHEAD_MS,
    LONG_POLL_S,
    OUTBOUND_HTTP_MS,
    PRICES,
    QUOTAS,
    READ_ON,
    STREAM_POLLS_PER_S,
    TTL_DELETION_LAG_DAYS,
    VCPU_MB,
    price,
)

from interlude import wiring  # noqa: E402
from interlude.adapters.queues import SQS_BATCH  # noqa: E402
from interlude.domain.models.tenants import DEFAULT_RETENTION_DAYS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MONTH_S = 30 * 24 * 3600
# A lifecycle's items are kept the tenant's retention past the run's end (issue 30 item 4): at the default, they are
# billed this many months (the lifecycle itself lasts minutes; the audit entries it leaves, kept forever, are a few
# hundred bytes of it).
RETAINED_MONTHS = DEFAULT_RETENTION_DAYS * 24 * 3600 / MONTH_S
MILLION = 1e6
# Following a run live over the WebSocket API (ADR 0143): the table calls each step makes, as
# tests/integration/test_live.py counts them through the real handlers (it fails when these drift), and the units
# they cost. A connection's item is on the inbox index (its tenant's connections are counted there): each write of it
# is 2 WRU. Reads are a few hundred bytes: a consistent GetItem 1 RRU, a Query 0.5.
LIVE_FOLLOWING_CALLS: dict[str, list[str]] = {
    # The tenant's open connections counted (index Query), the connection's item put.
    "connect": ["PutItem", "Query"],
    # The connection's item and the run head read, the log read (Query); the run's first follower: the conditional
    # update that holds the run's limit finds no followers item, which is put; the run added to the connection's item.
    # (Each $connect and message is admitted against the tenant's rate as a request is: its counter's writes, a
    # lease's every few requests, are priced with the requests.)
    "subscribe": ["GetItem", "GetItem", "PutItem", "Query", "UpdateItem", "UpdateItem"],
    # The outbox: the run's followers read (in dispatch, in the BatchGetItem of the batch's run heads: no call of its
    # own); at the run's end each follower taken off the run's item and the run off its connection's item.
    "the run's last batch, to its one follower": ["GetItem", "UpdateItem", "UpdateItem"],
    "a batch of a run nobody follows": ["GetItem"],
    "disconnect": ["DeleteItem"],
}
LIVE_FOLLOWING_UNITS: dict[str, tuple[float, float]] = {  # (WRU, RRU)
    "connect": (2, 0.5),
    "subscribe": (1 + 1 + 2, 1 + 1 + 0.5),  # the refused update is billed as a write
    "the run's last batch, to its one follower": (1 + 2, 1),
    "disconnect": (2, 0),
}
# A batch of a run nobody follows: what every event batch of every run costs where the WebSocket API is deployed
# (its followers key in the batch's strongly consistent BatchGetItem: no call, no time of its own).
LIVE_UNFOLLOWED_BATCH_RRU = 1.0
LOG_EVENT_OVERHEAD = 26
# Goals of issue 31 (below Lambda durable functions, as that issue priced them).
GOALS_INFRA = {"a": 26.0, "b": 21.0, "c": 17.0, "d": 20.0}
GOAL_ALL_IN_RATIO = 1.3
GOAL_QUIET_RATIO = 1.5
GOAL_WRU_A = 20.0
# A table with provisioned capacity (InterludeProps.table_capacity) pays for the units it holds: at a steady pace auto
# scaling keeps what it uses near its target (TableCapacity's default, 70 %); a pace that swings between scaling steps
# uses less of what it holds, priced at LOW_UTILIZATION beside it.
TARGET_UTILIZATION = 0.70
LOW_UTILIZATION = 0.50
TRACE_STARTING = ("http", "stream", "schedule")
# The memory a peer's Lambda functions (its tasks, its front door) are priced at: a common size, stated on their lines.
PEER_MEMORY_MB = 512


def measured_lifecycles(args: list[str]) -> dict[str, Any]:
    if "--measured" in args:
        return with_tls(json.loads(Path(args[args.index("--measured") + 1]).read_text()))
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/lifecycles.py"), "--json"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"bench/lifecycles.py failed:\n{done.stderr[-3000:]}")
    return with_tls(json.loads(done.stdout.strip().splitlines()[-1]))


def with_tls(measured: dict[str, Any]) -> dict[str, Any]:
    """Each invocation that POSTed to a receiver given the CPU an https POST spends on its TLS context and its handshake
    (measured apart: the bench's receiver is plain http, so its invocations never made either; a process keeps its
    context since ADR 0136, each POST's connection is its own)."""
    per_post = measured.get("tls_context_cpu_ms", 0.0) + measured.get("tls_handshake_cpu_ms", 0.0)
    for found in measured["lifecycles"].values():
        for pace in measured["paces"]:
            for inv in found[pace]:
                inv["tls_cpu_ms"] = inv.get("outbound_http", 0) * per_post
    return measured


def construct_source(module: str) -> str:
    """A module of the CDK construct (interlude_cdk), read as text: its defaults without importing aws_cdk (seconds
    of import for a few constants)."""
    for directory in (ROOT / "infra" / "interlude_cdk", ROOT / "interlude_cdk"):
        if (directory / f"{module}.py").exists():
            return (directory / f"{module}.py").read_text()
    raise SystemExit(f"interlude_cdk/{module}.py is not where this bench looks: update construct_source")


def construct_default(name: str) -> int:
    """A default of interlude_cdk/props.py."""
    found = re.search(rf"^{name} = (\d+)", construct_source("props"), re.M)
    if found is None:
        raise SystemExit(f"interlude_cdk/props.py no longer declares {name}: update this bench")
    return int(found.group(1))


STREAM_READER = next(spec.name for spec in wiring.FUNCTIONS if spec.reads_stream)


def memory_mb(function: str) -> int:
    return wiring.function(function).memory_mb


def cpu_and_waits(inv: dict[str, Any], memory: int | None = None) -> tuple[float, float]:
    """(ms of `inv`'s CPU at its function's share of a vCPU (or at `memory`, MB), the TLS its POSTs do included; ms it
    waits on its calls' and HTTP requests' round trips: estimates)."""
    share = min(1.0, (memory or memory_mb(inv["function"])) / VCPU_MB)
    waits = sum(CALL_MS.get(call, DEFAULT_CALL_MS) * n for call, n in inv["calls"].items())
    return (inv["cpu_ms"] + inv.get("tls_cpu_ms", 0.0)) / share, waits + inv["outbound_http"] * OUTBOUND_HTTP_MS


def duration_ms(inv: dict[str, Any], memory: int | None = None) -> float:
    """Billed duration of `inv` as one invocation (of its function, or of one of `memory` MB): its CPU and its waits,
    rounded up to Lambda's 1 ms."""
    return share_ms(inv, 1.0, 1, memory)


def share_ms(inv: dict[str, Any], units: float, lanes: int, memory: int | None = None) -> float:
    """`inv`'s share of the billed duration of one invocation holding `units` of work like it (a batch's records, a
    bucket's deadlines), `lanes` of them side by side (their waits overlap; their CPU does not): the batch's duration,
    rounded up to Lambda's 1 ms once, over `units`."""
    cpu, waits = cpu_and_waits(inv, memory)
    batch = max(units * cpu, math.ceil(units / lanes) * (cpu + waits))
    return math.ceil(batch + INVOKE_OVERHEAD_MS) / units


def is_lambda(inv: dict[str, Any]) -> bool:
    return inv["trigger"] not in ("poller",) and inv["function"] != "scheduler"


def log_bytes_of(inv: dict[str, Any], logs: dict[str, Any]) -> float:
    """Metered log bytes of one invocation: its lines, Lambda's platform records and, for a request, the HTTP API's
    access log line (those two estimated from their documented and declared shapes: bench/log_bytes.py)."""
    if not is_lambda(inv):
        return 0.0
    own = inv["log_bytes"] + LOG_EVENT_OVERHEAD * inv["log_events"]
    access = logs["access_log_bytes"].get(inv["route"], 0) if inv["trigger"] == "http" else 0
    return own + logs["platform_bytes_per_invocation"] * inv.get("invocations", 1.0) + access


def trace_sampling() -> tuple[float, float]:
    """(reservoir per second, fixed rate) of the construct's default sampling rule, as its props declare them."""
    source = construct_source("props")
    found = [re.search(rf"\n    {name}: \w+ = ([0-9.]+)\n", source) for name in ("reservoir_per_s", "fixed_rate")]
    if not all(found):
        raise SystemExit("TraceSampling's defaults are not where this bench looks: update trace_sampling")
    reservoir, rate = (float(m.group(1)) for m in found if m)
    return reservoir, rate


def traced_share(pace: float) -> float:
    reservoir, rate = trace_sampling()
    if pace <= reservoir:
        return 1.0
    return (reservoir + rate * (pace - reservoir)) / pace


def log_ingestion() -> tuple[str, str]:
    sources = [construct_source(name) for name in ("functions", "api")]
    if all("INFREQUENT_ACCESS" in s for s in sources):
        return "logs_ingested_gb_infrequent_access", "Infrequent Access"
    return "logs_ingested_gb_standard", "Standard"


def log_retention_months() -> float:
    found = re.search(r"log_retention: logs\.RetentionDays = logs\.RetentionDays\.(\w+)", construct_source("props"))
    days = {"ONE_WEEK": 7, "TWO_WEEKS": 14, "ONE_MONTH": 30, "THREE_MONTHS": 90, "SIX_MONTHS": 180, "ONE_YEAR": 365}
    return days.get(found.group(1) if found else "ONE_MONTH", 30) / 30


@dataclass
class Share:
    """An invocation's figures, counted `weight` times per lifecycle; `request`: whether it is an invocation of its
    own (a checkpoint made inside a sweep that runs anyway is not)."""

    inv: dict[str, Any]
    weight: float = 1.0
    request: bool = True


@dataclass
class Line:
    name: str
    quantity: float  # per lifecycle
    unit: str
    usd: float  # per lifecycle
    note: str = ""


@dataclass
class Bill:
    lifecycle: str
    pace: str
    infra: list[Line] = field(default_factory=list)
    observability: list[Line] = field(default_factory=list)
    # What Lambda's own records of each invocation add to the CloudWatch Logs line (none at system_log_level WARN).
    platform_logs_usd: float = 0.0

    def total(self, lines: list[Line]) -> float:
        return sum(line.usd for line in lines) * MILLION

    @property
    def infra_per_million(self) -> float:
        return self.total(self.infra)

    @property
    def all_in_per_million(self) -> float:
        return self.total(self.infra) + self.total(self.observability)

    def wru(self) -> float:
        return sum(line.quantity for line in self.infra if line.unit == "WRU")


# -- what a batch holds at a pace ----------------------------------------------------------------------------------

# The queue consumers that take a batch's runs side by side (dispatch: ADR 0111; callbacks: issue 31), and their batch
# sizes; any other consumer takes its batch's records one after another.
SIDE_BY_SIDE = {
    next(spec.name for spec in wiring.FUNCTIONS if spec.consumes == wiring.OUTBOX_QUEUE): wiring.OUTBOX_BATCH_SIZE,
    "callbacks": wiring.CALLBACK_BATCH_SIZE,
}


def at_least_one(mean: float) -> float:
    """The records a non-empty batch holds when `mean` arrive on average in its interval (Poisson arrivals): a poll that
    finds none invokes nothing."""
    return mean / -math.expm1(-mean) if mean > 0 else 1.0


def sqs_pollers(spec: wiring.Function) -> int:
    """The batches an SQS mapping has in flight while its queue keeps up (services-sqs-scaling.html: five, never more
    than its maximum concurrency, which the construct always sets: so never the two of its low-traffic optimisation)."""
    maximum = spec.max_concurrency or construct_default("DEFAULT_SQS_MAX_CONCURRENCY")
    return min(IDLE_POLLERS_PER_QUEUE, maximum)


def sqs_batch(spec: wiring.Function, invs: list[dict[str, Any]], lifecycles_per_s: float) -> float:
    """Messages a receive of `spec`'s mapping hands it at the pace, with no batching window (wiring sets none): what
    arrived while each of its pollers was away (the receive, the invocation, the delete), at least one and at most the
    batch size. The invocation is held for its round trips only (a batch's runs side by side overlap theirs): its CPU,
    which moves with the machine's load, is left out, so the figure is as load-independent as the counts it divides (a
    lower bound on the hold, so on the batch); the hold grows with the batch where runs go one after another, so the
    figure is solved for (a few rounds settle it)."""
    records = sum(i["records"] for i in invs)
    lanes = SIDE_BY_SIDE.get(spec.name, 1)
    poll_ms = CALL_MS["sqs:ReceiveMessage"] + CALL_MS["sqs:DeleteMessageBatch"]
    batch = 1.0
    for _ in range(30):
        held_ms = sum(math.ceil(units(batch, i) / lanes) * cpu_and_waits(i)[1] for i in invs) / len(invs) + poll_ms
        batch = min(float(spec.batch_size), max(1.0, lifecycles_per_s * records * held_ms / 1000 / sqs_pollers(spec)))
    return batch


def units(batch: float, inv: dict[str, Any]) -> float:
    """Invocations like `inv` one batch of `batch` messages holds: at least the one (its records, one run's, arrived
    together)."""
    return max(1.0, batch / inv["records"])


def stream_shards(measured: dict[str, Any], name: str, pace: str) -> int:
    """The stream's shards: one per table partition, at least a new on-demand table's, and as many as the pace's writes
    need at 1,000 WRU/s each (a floor: bench/ceiling.py's assumption)."""
    wru = sum(i["wru"] for i in measured["lifecycles"][name][pace]) * measured["paces"][pace]
    return max(int(QUOTAS["initial_partitions"].value), math.ceil(wru / QUOTAS["partition_wru"].value))


def batch_sizes(measured: dict[str, Any], name: str, pace: str, queues_alone: bool = False) -> dict[str, float]:
    """Records one invocation holds at `pace`, per function a mapping or a bucket schedule invokes in the lifecycle (the
    stream reader, each queue's consumer, the deadlines' target), from the deployed settings (interlude.wiring) and
    the documented polling (bench/_prices.py): one lifecycle alone when the pace leaves each alone, more when not.
    `queues_alone`: each queue's message alone in its batch (the bound on the other side of sqs_batch's)."""
    found = measured["lifecycles"][name][pace]
    per_s = measured["paces"][pace]
    out: dict[str, float] = {}
    streamed = sum(i["records"] for i in found if i["trigger"] == "stream")
    if streamed:
        # A poll of a shard takes what reached it since the last (4 a second), spread by run over its lanes.
        lanes = stream_shards(measured, name, pace) * STREAM_POLLS_PER_S * wiring.STREAM_PARALLELIZATION
        out[STREAM_READER] = min(float(wiring.STREAM_BATCH_SIZE), at_least_one(per_s * streamed / lanes))
    for spec in wiring.FUNCTIONS:
        invs = [i for i in found if i["function"] == spec.name and i["trigger"] == "sqs"]
        if spec.consumes and invs:
            out[spec.name] = 1.0 if queues_alone else sqs_batch(spec, invs, per_s)
    due = sum(i["records"] for i in found if i.get("bucket") and is_lambda(i))
    if due:
        # ADR 0132: the deadlines due in one second spread over DUE_INDEX_SHARDS buckets, one invocation each.
        shards = wiring.DUE_INDEX_SHARDS
        out[wiring.SCHEDULES.target] = at_least_one(per_s * due / shards)
    return out


def batched(measured: dict[str, Any], name: str, pace: str, queues_alone: bool = False) -> list[dict[str, Any]]:
    """The lifecycle's invocations at `pace`, each with its share of what a batch's records share (batch_sizes): the
    invocation (`invocations`), its billed duration (`billed_ms`), the mapping's receive and delete, the stream's
    SendMessageBatch and the bucket schedule's firing (in `billed`). Its own calls, units, bytes and CPU stay whole."""
    sizes = batch_sizes(measured, name, pace, queues_alone)
    found = measured["lifecycles"][name][pace]
    consumer_of = {f"poller:{spec.consumes}": spec.name for spec in wiring.FUNCTIONS if spec.consumes}
    out = []
    for at, inv in enumerate(found):
        function = consumer_of.get(inv["function"], inv["function"])
        if inv["trigger"] == "poller":
            # The poller's receive and delete are those of the consumer's invocation right after it (bench/_deployment.py).
            share = 1 / units(sizes[function], found[at + 1])
            out.append({**inv, "billed": {k: v * share for k, v in inv["billed"].items()}})
        elif inv.get("bucket"):
            deadlines = sizes[wiring.SCHEDULES.target]
            if is_lambda(inv):
                share = inv["records"] / deadlines
                out.append({**inv, "invocations": share, "billed_ms": share_ms(inv, deadlines, wiring.DUE_BUCKET_WORKERS)})
            else:
                out.append({**inv, "billed": {k: v * inv["records"] / deadlines for k, v in inv["billed"].items()}})
        elif inv["trigger"] == "stream":
            records = sizes[STREAM_READER]
            sends = math.ceil(records / SQS_BATCH) / records
            billed = {k: v * sends if k == "sqs:SendMessageBatch" else v for k, v in inv["billed"].items()}
            out.append({**inv, "invocations": 1 / records, "billed_ms": stream_share_ms(inv, records), "billed": billed})
        elif inv["trigger"] == "sqs" and function in sizes:
            held = units(sizes[function], inv)
            out.append({**inv, "invocations": 1 / held, "billed_ms": share_ms(inv, held, SIDE_BY_SIDE.get(function, 1))})
        else:
            out.append(inv)
    return out


def stream_share_ms(inv: dict[str, Any], records: float) -> float:
    """A stream record's share of its batch's billed duration: its own CPU, and a SendMessageBatch per ten records."""
    cpu, waits = cpu_and_waits(inv)
    return math.ceil(records * cpu + math.ceil(records / SQS_BATCH) * waits + INVOKE_OVERHEAD_MS) / records


MARKER_KINDS = ("audit pending marker", "audit pending marker: GSI")


def checkpoint_wait_s(audit: dict[str, Any]) -> float:
    """How long a chain's first entry waits for its checkpoint: the first sweep once it is the interval less a sweep
    old (app/audit.py `checkpoint_pending`), so between those two, half a sweep short of the interval on average (at
    a busy pace an append that finds one due makes it at the interval, if no sweep came first)."""
    return audit["interval_s"] - audit["sweep_every_s"] / 2


def marker_kept(audit: dict[str, Any], lifecycles_per_s: float) -> float:
    """How likely a decision finds its chain still marked (rules/audit.MARKER_KEEP_SECONDS, ADR 0122): its chain's
    previous decision came within the wait for its checkpoint and the keep after it. Decisions are taken as arriving
    at random over the tenant's chains, one per lifecycle at most."""
    window = checkpoint_wait_s(audit) + audit.get("marker_keep_s", 0)
    return 1 - math.exp(-lifecycles_per_s / audit["chains"] * window)


def decisions_per_checkpoint(audit: dict[str, Any], lifecycles_per_s: float) -> float:
    """The decisions one checkpoint of a chain anchors at the pace: the one that starts the chain's wait and those
    that arrive at the chain during it (decisions at random over the chains), at most CHECKPOINT_INTERVAL_ENTRIES. At a
    quiet pace that is more than one: 1.42 at 0.2/s over 128 chains (it was priced as exactly one)."""
    return min(audit["interval_entries"], 1 + lifecycles_per_s / audit["chains"] * checkpoint_wait_s(audit))


HEAD_KIND = "audit chain head"


def unmarked(inv: dict[str, Any], kept: float) -> dict[str, Any]:
    """`inv` with its pending marker's units written only when its chain is not still marked. The append measured
    found its chain unmarked, so it moved the head in the marker's transaction (2 units a KB); a chain still marked
    has its head moved by one plain UpdateItem (1 a KB: store/audit.py `_append_plain`, ADR 0135), so the head's
    units are halved that often too."""
    units = sum(inv["wru_by_kind"].get(kind, 0.0) for kind in MARKER_KINDS)
    if not units:
        return inv
    head = inv["wru_by_kind"].get(HEAD_KIND, 0.0)
    kinds = {k: v * (1 - kept) if k in MARKER_KINDS else v for k, v in inv["wru_by_kind"].items()}
    if head:
        kinds[HEAD_KIND] = head * (1 - kept / 2)
    return {**inv, "wru": inv["wru"] - units * kept - head * kept / 2, "wru_by_kind": kinds}


def shares(measured: dict[str, Any], name: str, pace: str, queues_alone: bool = False) -> list[Share]:
    """The lifecycle's invocations at `pace`, with its share of the audit chain's marker, checkpoint and sweeps."""
    found = measured["lifecycles"][name]
    audit = measured["audit"]
    lifecycles_per_s = measured["paces"][pace]
    quiet = found["quiet"]
    marker_invs = [i for i in quiet if i["wru_by_kind"].get("audit pending marker")]
    decisions = len(marker_invs)
    kept = marker_kept(audit, lifecycles_per_s)
    out = [Share(unmarked(i, kept)) for i in batched(measured, name, pace, queues_alone)]
    if decisions:
        # The decisions of a chain that one checkpoint anchors at this pace (one tenant) share it.
        per_checkpoint = decisions_per_checkpoint(audit, lifecycles_per_s)
        if pace == "busy":
            marker = {
                **marker_invs[0],
                "calls": {},
                "billed": {},
                "cpu_ms": 0.0,
                "rru": 0.0,
                "log_bytes": 0,
                "log_events": 0,
                "wru": sum(
                    i["wru_by_kind"].get(HEAD_KIND, 0) / 2 + sum(i["wru_by_kind"].get(kind, 0) for kind in MARKER_KINDS)
                    for i in marker_invs
                ),
            }
            # its units: every decision's marker and its head's move in a transaction, when its chain is not still
            # marked (the busy measurement's append found its chain marked: a plain UpdateItem of the head)
            out.append(Share(marker, 1 - kept, request=False))
        out += [Share(i, decisions / per_checkpoint, request=False) for i in audit["checkpoint"]]
        # A chain leaves the pending index once for each marker written (a decision writes one when it finds its chain
        # unmarked: 1 - kept of them).
        out += [Share(i, decisions * (1 - kept), request=False) for i in audit.get("settle", [])]
        # While a chain waits, every sweep (each minute) publishes the tenant's anchor: its extra over an idle sweep.
        # (the tenant has a chain waiting nearly always at either pace: one such sweep a minute, shared by the minute's
        # lifecycles, and never more than the sweeps of one decision's own wait)
        waiting_sweeps = min(audit["interval_s"], 1 / lifecycles_per_s) / audit["sweep_every_s"]
        idle = {k: audit["idle_sweep"][0][k] for k in ("cpu_ms", "rru")}
        waiting = audit["waiting_sweep"][0]
        # Its reads are the tenant's heads, one BatchGetItem key per chain: the bench runs one chain, a tenant has
        # wiring.AUDIT_CHAINS (each holding a head once the tenant has been busy a while).
        extra = {
            **waiting,
            "cpu_ms": max(0.0, waiting["cpu_ms"] - idle["cpu_ms"]),
            "rru": (waiting["rru"] - idle["rru"]) * audit["chains"],
            "calls": subtract(waiting["calls"], audit["idle_sweep"][0]["calls"]),
            "billed": subtract(waiting["billed"], audit["idle_sweep"][0]["billed"]),
            "log_bytes": 0,
            "log_events": 0,
        }
        out.append(Share(extra, waiting_sweeps, request=False))
    return out


def subtract(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: v - b.get(k, 0) for k, v in a.items() if v - b.get(k, 0) > 0}


def refetches(
    measured: dict[str, Any], parts: list[Share], pace: str, counted: str, period_s: Callable[[str], float]
) -> float:
    """Fetches per lifecycle at `pace` of what each function reads through a warm instance's cache (`counted`: the
    invocations' counter of those reads, by what was read), once per cache period (`period_s` of what was read) however
    often it reads it. Busy, an instance at BUSY_REQUESTS_PER_S uses of it; quiet, one instance of each function reading
    it at the pace's uses (at 0.2 lifecycles/s, a function reading the key ring once a lifecycle fetches it for one
    lifecycle in 12)."""
    uses: dict[tuple[str, str], float] = defaultdict(float)
    for s in parts:
        for read, n in s.inv.get(counted, {}).items():
            uses[(s.inv["function"], read)] += s.weight * n
    fetched = 0.0
    for (_, read), n in uses.items():
        per_s = measured["busy_requests_per_s"] if pace == "busy" else measured["paces"][pace] * n
        fetched += n * min(1.0, 1 / (per_s * period_s(read)))
    return fetched


def secret_fetches(measured: dict[str, Any], parts: list[Share], pace: str) -> float:
    """GetSecretValue calls per lifecycle at `pace`: the key ring's cache period 60 s, the audit key's 3,600 s (the `@`
    of each read the bench counted)."""
    return refetches(measured, parts, pace, "secrets", lambda read: float(read.rsplit("@", 1)[1]))


def cache_rereads(measured: dict[str, Any], parts: list[Share], pace: str) -> float:
    """Strongly consistent GetItems per lifecycle at `pace` of the API keys and the tenants' limits (a tenant's
    settings) that the functions read through their caches (`caches_s`: the key's 5 s, the limits' 10 s)."""
    return refetches(measured, parts, pace, "cached", lambda read: float(measured["caches_s"][read]))


def secrets_read(parts: list[Share]) -> str:
    read = sorted({(s.inv["function"], key.rsplit("@", 1)[1]) for s in parts for key in s.inv.get("secrets", {})})
    return ", ".join(f"{function} one cached {age} s" for function, age in read) or "none read"


def counter_writes(measured: dict[str, Any], pace: str, authed: float) -> float:
    """Request-counter writes per authenticated request at `pace`, by the request rates they were measured at: busy,
    an instance at BUSY_REQUESTS_PER_S; quiet, one instance answering the tenant's requests at the lifecycle's own rate
    (`authed` a lifecycle), measured at the rates of 1-4 requests a lifecycle. The highest rate measured at or under
    the lifecycle's (fewer requests a second share a lease counted ahead less: more writes each)."""
    found = sorted((float(at), float(writes)) for at, writes in measured["counter_writes_per_request"][pace].items())
    rate = authed * measured["paces"][pace]
    under = [writes for at, writes in found if at <= rate + 1e-9]
    return under[-1] if under else found[0][1]


def fixed_monthly(measured: dict[str, Any]) -> tuple[list[Line], list[Line]]:
    """A deployment's own costs each month, whatever its traffic: (infrastructure, observability), $ per month."""
    consumers = [f for f in wiring.FUNCTIONS if f.consumes]
    receives = len(consumers) * IDLE_POLLERS_PER_QUEUE * MONTH_S / LONG_POLL_S
    sweeps = MONTH_S / measured["audit"]["sweep_every_s"]
    idle = measured["audit"]["idle_sweep"][0]
    gb_s = duration_ms(idle) / 1000 * memory_mb(idle["function"]) / 1024
    infra = [
        Line("SQS pollers' empty receives", receives, "requests", receives * price("sqs_request"),
             f"{len(consumers)} queues × {IDLE_POLLERS_PER_QUEUE} pollers × one {LONG_POLL_S} s long poll each"),
        Line("audit sweep: Scheduler invocations", sweeps, "invocations", sweeps * price("scheduler_invocation"),
             f"every {measured['audit']['sweep_every_s']} s"),
        Line("audit sweep: Lambda", sweeps, "invocations",
             sweeps * (price("lambda_request") + gb_s * price("lambda_gb_second_arm")), f"{duration_ms(idle):.0f} ms each"),
        Line("audit sweep: DynamoDB reads", sweeps * idle["rru"], "RRU", sweeps * idle["rru"] * price("dynamodb_rru"),
             f"{sum(idle['calls'].values())} Queries of the pending index"),
        Line("secrets (token key ring, audit key)", len(wiring.SECRETS), "secrets", len(wiring.SECRETS) * price("secret_month")),
    ]
    ingest, _ = log_ingestion()
    log_gb = sweeps * log_bytes_of(idle, measured["logs"]) / 1e9
    observability = [
        Line("audit sweep: logs", log_gb, "GB", log_gb * (price(ingest) + log_retention_months() * price("logs_stored_gb_month"))),
        Line("audit sweep: X-Ray traces", sweeps * traced_share(1 / 60), "traces",
             sweeps * traced_share(1 / 60) * price("xray_trace_recorded"), f"one a minute: {traced_share(1 / 60):.2f} sampled"),
        Line("CloudWatch dashboard", 1, "dashboard", price("dashboard_month"), "InterludeProps.dashboard (default on)"),
    ]
    return infra, observability


def bill(measured: dict[str, Any], name: str, pace: str, queues_alone: bool = False) -> Bill:
    lifecycles_per_s = measured["paces"][pace]
    per_month = lifecycles_per_s * MONTH_S
    parts = shares(measured, name, pace, queues_alone)
    result = Bill(name, pace)
    add = result.infra.append

    def total(key: str, pick: Any = None) -> float:
        return sum(s.weight * (pick(s) if pick else s.inv[key]) for s in parts)

    requests = total("", lambda s: 1 if s.request and s.inv["trigger"] == "http" else 0)
    authed = total("", lambda s: 1 if s.request and s.inv.get("authenticated") else 0)
    add(Line("HTTP API requests", requests, "requests", requests * price("http_api_request")))
    invocations = total("", lambda s: s.inv.get("invocations", 1.0) if is_lambda(s.inv) and s.request else 0)
    sizes = batch_sizes(measured, name, pace, queues_alone)
    add(Line("Lambda requests", invocations, "invocations", invocations * price("lambda_request"),
             f"{by_function(parts)}; records an invocation holds: {held(sizes)}"))
    per_request = counter_writes(measured, pace, authed)
    counter = authed * per_request
    # The request counter's own writes (priced per request below) hold the API function for their round trips too.
    counter_ms = counter * CALL_MS["dynamodb:UpdateItem"]
    ms = total("", lambda s: billed_ms(s.inv) if is_lambda(s.inv) else 0) + counter_ms
    gb_s = total("", lambda s: billed_ms(s.inv) / 1000 * memory_mb(s.inv["function"]) / 1024 if is_lambda(s.inv) else 0)
    gb_s += counter_ms / 1000 * memory_mb("api") / 1024
    tls = total("", lambda s: s.inv.get("tls_cpu_ms", 0.0))
    add(Line("Lambda duration", gb_s, "GB-s", gb_s * price("lambda_gb_second_arm"),
             f"{ms:.0f} ms billed in all: CPU {total('cpu_ms'):.1f} ms measured (+ {tls:.1f} ms of TLS contexts and handshakes), scaled "
             f"to each function's share of a vCPU ({sized(parts)}), + calls' round trips (a POST {OUTBOUND_HTTP_MS} ms), once per batch"))
    wru = total("wru")
    add(Line("DynamoDB writes", wru + counter, "WRU", (wru + counter) * price("dynamodb_wru"),
             f"{wru:g} as counted (GSI and the audit marker's share included) + request counter {counter:.2f} "
             f"({authed:g} authenticated requests × {per_request:.2f})"))
    rereads = cache_rereads(measured, parts, pace)
    rru = total("rru")
    add(Line("DynamoDB reads", rru + rereads, "RRU", (rru + rereads) * price("dynamodb_rru"),
             f"{rru:g} as counted + key and limits re-reads {rereads:.3f}"))
    billed: dict[str, float] = defaultdict(float)
    for s in parts:
        for call, n in s.inv["billed"].items():
            billed[call] += s.weight * n
    sqs = sum(n for call, n in billed.items() if call.startswith("sqs:"))
    pollers = total("", lambda s: sum(s.inv["billed"].values()) if s.inv["trigger"] == "poller" else 0)
    add(Line("SQS requests", sqs, "requests", sqs * price("sqs_request"),
             f"{pollers:.3g} of them the event source mappings' receives and deletes, one of each per batch; the stream's "
             "SendMessageBatch one per batch of ten"))
    scheduled = billed.get("scheduler:invocation", 0.0)
    creates = billed.get("scheduler:CreateSchedule", 0.0)
    bucket = sizes.get(wiring.SCHEDULES.target)
    shared = f"; a bucket schedule's firing shared by the {bucket:.2f} deadlines due in its second and shard" if bucket else ""
    add(Line("Scheduler invocations", scheduled, "invocations", scheduled * price("scheduler_invocation"),
             f"{creates:g} schedules created, {billed.get('scheduler:DeleteSchedule', 0.0):g} deleted (API calls: free){shared}"))
    fetched = secret_fetches(measured, parts, pace)
    secrets = sum(n for call, n in billed.items() if call.startswith("secretsmanager:")) + fetched
    add(Line("Secrets Manager calls", secrets, "calls", secrets * price("secrets_api_call"),
             f"GetSecretValue once per instance per cache period of each secret read ({secrets_read(parts)}): busy an "
             "instance's reads share it, quiet one instance reads it a few times a period"))
    puts, gets = billed.get("s3:PutObject", 0.0), billed.get("s3:GetObject", 0.0)
    add(Line("S3 (audit anchors)", puts + gets, "requests", puts * price("s3_put") + gets * price("s3_get"), f"{puts:.3f} PUTs"))
    stored = measured["lifecycles"][name]["stored"]
    gb_months, how = retained(stored)
    add(Line("DynamoDB storage", gb_months, "GB-month", gb_months * price("dynamodb_storage_gb_month"), how))
    fixed_infra, fixed_observability = fixed_monthly(measured)
    fixed = sum(line.usd for line in fixed_infra)
    add(Line("deployment's fixed costs, shared", fixed, "$/mo", fixed / per_month,
             f"${fixed:.2f} a month over {per_month / MILLION:.2f} M lifecycles (below)"))

    ingest, log_class = log_ingestion()
    log_gb = total("", lambda s: log_bytes_of(s.inv, measured["logs"]) if s.request else 0) / 1e9
    months = log_retention_months()
    per_gb = price(ingest) + months * price("logs_stored_gb_month")
    result.observability.append(
        Line("CloudWatch Logs", log_gb, "GB", log_gb * per_gb,
             f"{log_gb * 1e9:.0f} B: ingestion ({log_class}) and {months:g} month stored (raw bytes: an upper bound)")
    )
    platform = measured["logs"]["platform_bytes_per_invocation"]
    result.platform_logs_usd = total("", lambda s: platform * s.inv.get("invocations", 1.0) if s.request and is_lambda(s.inv) else 0) / 1e9 * per_gb
    starts: dict[str, float] = defaultdict(float)
    for s in parts:
        if s.request and s.inv["trigger"] in TRACE_STARTING and is_lambda(s.inv):
            starts[s.inv["function"]] += s.weight * s.inv.get("invocations", 1.0)
    traces = sum(n * traced_share(lifecycles_per_s * n) for n in starts.values())
    result.observability.append(
        Line("X-Ray traces", traces, "traces", traces * price("xray_trace_recorded"),
             ", ".join(f"{f} {traced_share(lifecycles_per_s * n):.2f} of {n:g}" for f, n in starts.items()) + " sampled")
    )
    fixed_obs = sum(line.usd for line in fixed_observability)
    result.observability.append(Line("dashboard, sweep's logs and traces", fixed_obs, "$/mo", fixed_obs / per_month, "a month, shared"))
    return result


def on_demand_usd(bill: Bill) -> float:
    """$/M of `bill`'s DynamoDB reads and writes on demand, as its lines price them."""
    return sum(line.usd for line in bill.infra if line.unit in ("WRU", "RRU")) * MILLION


def provisioned_usd(bill: Bill, utilization: float) -> float:
    """$/M of `bill`'s DynamoDB reads and writes on tables provisioned with auto scaling, using `utilization` of the
    units held: a unit-hour holds 3,600 units, of which the lifecycle's read and write units take their share (the
    same units as on demand: 2 a KB in a transaction, half for an eventually consistent read)."""
    per_unit = {"WRU": price("dynamodb_wcu_hour"), "RRU": price("dynamodb_rcu_hour")}
    return sum(line.quantity * per_unit[line.unit] / 3600 / utilization for line in bill.infra if line.unit in per_unit) * MILLION


def with_provisioned_tables(bill: Bill, utilization: float) -> float:
    """`bill`'s infrastructure $/M with its DynamoDB reads and writes priced as provisioned capacity instead."""
    return bill.infra_per_million - on_demand_usd(bill) + provisioned_usd(bill, utilization)


def sized(parts: list[Share]) -> str:
    """The memory of each Lambda function `parts` invoke, as "api 512, callbacks 256 MB"."""
    functions = dict.fromkeys(s.inv["function"] for s in parts if is_lambda(s.inv))
    return ", ".join(f"{f} {memory_mb(f)}" for f in functions) + " MB"


def by_function(parts: list[Share]) -> str:
    counts: dict[str, float] = defaultdict(float)
    for s in parts:
        if is_lambda(s.inv) and s.request:
            counts[s.inv["function"]] += s.weight * s.inv.get("invocations", 1.0)
    return ", ".join(f"{f} {n:.3g}" for f, n in counts.items())


def live_following(minutes: float, pushed_batches: int = 1) -> list[Line]:
    """One client following one run for `minutes` over the WebSocket API (ADR 0143), per lifecycle followed: it
    connects, subscribes (its replay in one message), receives `pushed_batches` batches from dispatch and
    disconnects. Nothing is held while it waits: API Gateway keeps the connection."""
    api_mb = memory_mb("api") / 1024
    invocations = 3  # $connect, subscribe, $disconnect: each a few table calls (LIVE_FOLLOWING_CALLS)
    calls = sum(len(LIVE_FOLLOWING_CALLS[step]) for step in ("connect", "subscribe", "disconnect"))
    api_ms = invocations * INVOKE_OVERHEAD_MS + (calls + 2) * DEFAULT_CALL_MS  # + the two sends of the subscribe
    # dispatch's share: each pushed batch's send (one POST) and its follower's writes at the run's end (its read is the
    # batch's own BatchGetItem).
    writes = [op for op in LIVE_FOLLOWING_CALLS["the run's last batch, to its one follower"] if op != "GetItem"]
    pushes_ms = (pushed_batches + len(writes)) * DEFAULT_CALL_MS
    messages = 1 + 2 + pushed_batches  # the subscribe in; `subscribed` and the replay out; each pushed batch
    wru = sum(units[0] for units in LIVE_FOLLOWING_UNITS.values())
    rru = sum(units[1] for units in LIVE_FOLLOWING_UNITS.values())
    return [
        Line("API Gateway WebSocket connection-minutes", minutes, "minutes", minutes * price("apigw_ws_connection_minute")),
        Line("API Gateway WebSocket messages", messages, "messages", messages * price("apigw_ws_message"),
             "each at most 32 KB of events (app/live.py)"),
        Line("Lambda requests (api)", invocations, "requests", invocations * price("lambda_request")),
        Line("Lambda duration (api, dispatch's sends)", (api_ms + pushes_ms) / 1000 * api_mb, "GB-s",
             (api_ms + pushes_ms) / 1000 * api_mb * price("lambda_gb_second_arm"), f"{DEFAULT_CALL_MS} ms a call"),
        Line("DynamoDB writes", wru, "WRU", wru * price("dynamodb_wru"), "a connection's item is indexed: 2 WRU a write"),
        Line("DynamoDB reads", rru, "RRU", rru * price("dynamodb_rru")),
    ]


def print_live_following(held_per_minute: float) -> None:
    """Following a run live over the WebSocket API, beside the held Lambda (issue 31 item 4)."""
    print("\nFollowing a run live over the WebSocket API instead (ADR 0143; per million lifecycles followed, one batch "
          "pushed after the subscription):")
    for minutes in (1, 10):
        lines = live_following(minutes)
        total = sum(line.usd for line in lines) * MILLION
        detail = "; ".join(f"{line.name} ${line.usd * MILLION:.2f}" for line in lines)
        print(f"  {minutes:>2} minute(s): ${total:.2f} (held Lambda: ${minutes * held_per_minute:,.0f})   ({detail})")
    every_batch = LIVE_UNFOLLOWED_BATCH_RRU * price("dynamodb_rru") * MILLION
    print(f"  with the API deployed, every event batch of every run reads its followers with its run head: "
          f"${every_batch:.4f} per million batches ({LIVE_UNFOLLOWED_BATCH_RRU:g} RRU, no call of its own), followed "
          "or not")


def held(sizes: dict[str, float]) -> str:
    """Each function's records an invocation holds; `full` where a queue's five pollers do not keep up even with full
    batches (Lambda then adds pollers, and a batch holds less than its size)."""
    def full(function: str, n: float) -> bool:
        spec = wiring.function(function)
        return bool(spec.consumes) and n >= spec.batch_size

    return ", ".join(f"{f} {n:.2f}" + (" (full)" if full(f, n) else "") for f, n in sizes.items()) or "none batched"


def billed_ms(inv: dict[str, Any]) -> float:
    """`inv`'s billed duration: its share of its batch's (batched), else its own as one invocation."""
    return float(inv["billed_ms"]) if "billed_ms" in inv else duration_ms(inv)


def retained(stored: dict[str, Any]) -> tuple[float, str]:
    """(GB-months a lifecycle's items are billed, how): each item the lifecycle left from the run's end to its own
    expiry (its `ttl` as the lifecycle left it) and TTL's deletion lag after it; an item with no expiry is kept for ever,
    priced here for the default retention's months (what every item was priced before each one's own was read)."""
    items = stored.get("kept")
    if items is None:  # a measurement from before items' own expiries were read
        items = [{"bytes": stored["bytes"], "indexed_bytes": stored["indexed_bytes"], "kept_s": DEFAULT_RETENTION_DAYS * 86400.0}]
    gb_months = 0.0
    by_days: dict[str, int] = defaultdict(int)
    forever = 0
    for item in items:
        size = item["bytes"] + item["indexed_bytes"]
        if item["kept_s"] is None:
            forever += size
            months = RETAINED_MONTHS
        else:
            kept_s = max(0.0, item["kept_s"])
            by_days[f"{kept_s / 86400:.0f}"] += size
            months = (kept_s + TTL_DELETION_LAG_DAYS * 86400) / MONTH_S
        gb_months += size / 1e9 * months
    kept = ", ".join(f"{size} B {days} days" for days, size in sorted(by_days.items(), key=lambda x: -float(x[0])))
    month = forever / 1e9 * price("dynamodb_storage_gb_month") * MILLION
    how = (
        f"{len(items)} items (+100 B each), kept past the run's end by their own ttl (+ TTL's lag, ≤ "
        f"{TTL_DELETION_LAG_DAYS} days): {kept or 'none'}"
        + (f"; {forever} B with no ttl, kept for ever: priced {RETAINED_MONTHS:.0f} months here, then ${month:.2f}/M "
           "each month more" if forever else "")
    )
    return gb_months, how


# -- the peers ---------------------------------------------------------------------------------------------------


@dataclass
class PeerLine:
    name: str
    low: float  # quantity per lifecycle
    high: float
    unit_price: float
    note: str = ""
    # Logs: in the all-in figure only, as Interlude's are.
    observability: bool = False


def peers(measured: dict[str, Any], name: str) -> dict[str, list[PeerLine]]:
    """The same lifecycle on each peer, with what its user also pays; (low, high) where a design choice moves it."""
    lam = lambda_figures(measured)
    peer_gb = PEER_MEMORY_MB / 1024
    notice_gb_s, front_gb_s = lam["notice_ms"] / 1000 * peer_gb, lam["front_door_ms"] / 1000 * peer_gb
    history_gb = measured["lifecycles"][name]["stored"]["bytes"] / 1e9
    invoke = price("lambda_request")
    gbs = price("lambda_gb_second_arm")
    front_door = [
        PeerLine("HTTP API request (the decision's front door)", 1, 1, price("http_api_request")),
        PeerLine("Lambda: front door request", 1, 1, invoke, "reads the token and hands the answer on"),
        PeerLine("Lambda: front door duration (GB-s)", front_gb_s, front_gb_s, gbs, f"{lam['front_door_ms']:.0f} ms at {PEER_MEMORY_MB} MB"),
    ]
    decided = name in ("a", "b")
    notices = {"a": 2, "c+notices": 2}.get(name, 0)
    transitions = {"a": (3, 4), "b": (2, 3), "c": (2, 3), "c+notices": (4, 5), "d": (2, 3)}[name]
    record_token = name in ("b", "c", "c+notices")
    sfn = [
        PeerLine("state transitions", *transitions, price("sfn_standard_transition"),
                 "a Task .waitForTaskToken, a Choice on the decision (or not), the end state; a notice is a Lambda Task"),
    ]
    if notices or record_token:
        tasks = notices + (1 if record_token else 0)
        sfn += [
            PeerLine("Lambda: task requests", tasks, tasks, invoke, "a notice's POST, or storing the task token"),
            PeerLine("Lambda: task duration (GB-s)", tasks * notice_gb_s, tasks * notice_gb_s, gbs, f"{lam['notice_ms']:.0f} ms each at {PEER_MEMORY_MB} MB, Interlude's notice's work"),
        ]
    if record_token:
        sfn.append(PeerLine("DynamoDB: the task token stored and read", 1, 1, price("dynamodb_wru") + 0.5 * price("dynamodb_rru")))
    if decided:
        sfn += front_door
    actions = {"a": 4, "b": 4, "c": 2, "c+notices": 4, "d": 2}[name]
    temporal = [
        PeerLine("Actions (with the plan's 10%)", actions, actions, 0.0, "start, signal, queries, timers, activities"),
        PeerLine("Active storage (GBh, the history open an hour)", history_gb, history_gb, price("temporal_active_gbh")),
        PeerLine("Retained storage (GBh, 30 days)", history_gb * 720, history_gb * 720, price("temporal_retained_gbh")),
    ]
    if decided:
        temporal += front_door
    operations = {"a": (3, 4), "b": (2, 3), "c": (1, 2), "c+notices": (3, 4), "d": (2, 3)}[name]
    durable = [
        PeerLine("durable operations", *operations, price("durable_operation"), "steps, the callback (with its timeout), the start or not"),
        PeerLine("Lambda requests (start; resumed after the callback)", 2, 2, invoke),
        PeerLine("Lambda duration (GB-s)", 2 * notice_gb_s, 2 * notice_gb_s, gbs, f"{lam['notice_ms']:.0f} ms each at {PEER_MEMORY_MB} MB"),
        PeerLine("data written (GB; ESTIMATE rate)", history_gb, history_gb, price("durable_data_written_gb")),
        PeerLine("data retained 14 days (GB-month; ESTIMATE rate)", history_gb * 14 / 30, history_gb * 14 / 30, price("durable_data_retained_gb_month")),
    ]
    if name == "d":
        durable.append(PeerLine("SQS: the task sent, received, deleted", 3, 3, price("sqs_request")))
    if decided:
        durable += front_door
    found = {"Step Functions Standard": sfn, "Temporal Cloud": temporal, "Lambda durable functions": durable}
    # Their Lambda functions' logs (Lambda's platform records; the front door's access log line), at Interlude's price
    # per GB; Step Functions Standard logs nothing of its own unless logging is configured, tracing is off by default.
    ingest, _ = log_ingestion()
    per_gb = price(ingest) + log_retention_months() * price("logs_stored_gb_month")
    logs = measured["logs"]
    access = max(logs["access_log_bytes"].values())
    for lines in found.values():
        invocations = sum(line.low for line in lines if line.name.startswith("Lambda") and "request" in line.name)
        gb = (invocations * logs["platform_bytes_per_invocation"] + (access if decided else 0)) / 1e9
        lines.append(PeerLine("CloudWatch Logs (GB; all-in only)", gb, gb, per_gb, observability=True))
    return found


def peer_total(measured: dict[str, Any], peer: str, lines: list[PeerLine], all_in: bool = False) -> tuple[float, float]:
    low = high = 0.0
    for line in lines:
        if line.observability and not all_in:
            continue
        if peer == "Temporal Cloud" and line.name.startswith("Actions"):
            share = 1 + price("temporal_plan_share")
            low += line.low * price("temporal_action_low") * share
            high += line.high * price("temporal_action_high") * share
        else:
            low += line.low * line.unit_price
            high += line.high * line.unit_price
    return low * MILLION, high * MILLION


def lambda_figures(measured: dict[str, Any]) -> dict[str, float]:
    """Durations the peers' Lambda work takes at their own stated memory (PEER_MEMORY_MB), from Interlude's own measured
    work of the same kind: a notice's POST (the callbacks function's CPU and round trips, per notice delivered, without
    what its POST spends on TLS: a peer's function keeps its client and its connection) and a front door (an
    authenticated one-item read) plus one more AWS call (SendTaskSuccess or its like: an estimate). Their CPU is scaled
    to that memory, not to Interlude's functions': how Interlude sizes its own leaves a peer's price where it was."""
    callbacks = [i for i in measured["lifecycles"]["a"]["busy"] if i["function"] == "callbacks"]
    delivered = sum(i["outbound_http"] for i in callbacks) or 1
    gets = [i for i in measured["lifecycles"]["b"]["busy"] if i["route"] == "GET /runs/{runId}"]
    return {
        "notice_ms": sum(duration_ms({**i, "tls_cpu_ms": 0.0}, PEER_MEMORY_MB) for i in callbacks) / delivered,
        "front_door_ms": min(duration_ms(i, PEER_MEMORY_MB) for i in gets) + DEFAULT_CALL_MS * 2,
    }


# -- the report --------------------------------------------------------------------------------------------------


def priced(measured: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"lifecycles": {}, "load": measured["load"], "paces": measured["paces"]}
    for name, found in measured["lifecycles"].items():
        busy, quiet = bill(measured, name, "busy"), bill(measured, name, "quiet")
        out["lifecycles"][name] = {
            "title": found["title"],
            "infra_busy": busy.infra_per_million,
            "all_in_busy": busy.all_in_per_million,
            "infra_quiet": quiet.infra_per_million,
            "infra_busy_provisioned": with_provisioned_tables(busy, TARGET_UTILIZATION),
            "infra_busy_provisioned_low": with_provisioned_tables(busy, LOW_UTILIZATION),
            "all_in_quiet": quiet.all_in_per_million,
            "wru_busy": busy.wru(),
            "wru_quiet": quiet.wru(),
            "peers": {peer: peer_total(measured, peer, lines) for peer, lines in peers(measured, name).items()},
            "peers_all_in": {peer: peer_total(measured, peer, lines, True) for peer, lines in peers(measured, name).items()},
        }
    infra, observability = fixed_monthly(measured)
    out["fixed_monthly"] = {"infra": sum(x.usd for x in infra), "observability": sum(x.usd for x in observability)}
    return out


def verdicts(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(figure, now, goal, met) for the rows of issue 31's goals table this script measures."""
    lc = result["lifecycles"]
    rows = []
    now = " / ".join(f"{lc[k]['infra_busy']:.2f}" for k in GOALS_INFRA)
    goal = " / ".join(f"{v:g}" for v in GOALS_INFRA.values())
    durable = " / ".join(f"{lc[k]['peers']['Lambda durable functions'][0]:.0f}–{lc[k]['peers']['Lambda durable functions'][1]:.0f}" for k in GOALS_INFRA)
    rows.append((
        "$/M, infrastructure only, lifecycles (a) (b) (c) (d), busy pace",
        f"{now} (Lambda durable functions as priced here: {durable})",
        f"≤ {goal}",
        all(lc[k]["infra_busy"] <= v for k, v in GOALS_INFRA.items()),
    ))
    provisioned = " / ".join(f"{lc[k]['infra_busy_provisioned']:.2f}" for k in GOALS_INFRA)
    low = " / ".join(f"{lc[k]['infra_busy_provisioned_low']:.2f}" for k in GOALS_INFRA)
    rows.append((
        "$/M, infrastructure only, (a) (b) (c) (d), busy pace, the tables provisioned with auto scaling "
        "(`table_capacity`, docs/adr/0168; on demand is the default)",
        f"{provisioned} at {TARGET_UTILIZATION:.0%} of the units held (auto scaling's target); {low} at "
        f"{LOW_UTILIZATION:.0%}",
        f"≤ {goal}",
        all(lc[k]["infra_busy_provisioned"] <= v for k, v in GOALS_INFRA.items()),
    ))
    ratios = {k: (lc[k]["all_in_busy"] / lc[k]["infra_busy"], lc[k]["all_in_quiet"] / lc[k]["all_in_busy"]) for k in GOALS_INFRA}
    rows.append((
        "$/M all-in (logs and traces), busy and quiet pace",
        "; ".join(f"({k}) {lc[k]['all_in_busy']:.2f} busy ({r[0]:.2f}× infra), {lc[k]['all_in_quiet']:.2f} quiet ({r[1]:.2f}× busy)" for k, r in ratios.items()),
        f"all-in ≤ {GOAL_ALL_IN_RATIO} × infrastructure-only, quiet ≤ {GOAL_QUIET_RATIO} × busy",
        all(a <= GOAL_ALL_IN_RATIO and q <= GOAL_QUIET_RATIO for a, q in ratios.values()),
    ))
    rows.append((
        "WRU per lifecycle (a), 2 KB gate text and 2 KB inputs",
        f"{lc['a']['wru_busy']:.1f} busy, {lc['a']['wru_quiet']:.1f} quiet",
        f"≤ {GOAL_WRU_A:g}",
        lc["a"]["wru_busy"] <= GOAL_WRU_A,
    ))
    return rows


def print_report(measured: dict[str, Any]) -> None:
    load = ", ".join(f"{x:.1f}" for x in measured["load"])
    print(
        f"$ per million lifecycles, us-east-1 list prices read {READ_ON} (bench/_prices.py); counted by "
        f"bench/lifecycles.py (rounds={measured['rounds']}, CPU medians at load average {load}). Paces: busy "
        f"{measured['paces']['busy']:g} lifecycles/s, quiet {measured['paces']['quiet']:g}/s, one tenant."
    )
    for name in measured["lifecycles"]:
        busy, quiet = bill(measured, name, "busy"), bill(measured, name, "quiet")
        print(f"\n({name}) {measured['lifecycles'][name]['title']}")
        print(f"  {'line':<36} {'per lifecycle':>16} {'$/M busy':>9} {'$/M quiet':>9}")
        for b_lines, q_lines in ((busy.infra, quiet.infra), (busy.observability, quiet.observability)):
            for b, q in zip(b_lines, q_lines, strict=True):
                print(f"  {b.name:<36} {b.quantity:>10.4g} {b.unit:<5} {b.usd * MILLION:>9.2f} {q.usd * MILLION:>9.2f}   {b.note}")
        print(
            f"  infrastructure only: ${busy.infra_per_million:.2f} busy, ${quiet.infra_per_million:.2f} quiet; all-in: "
            f"${busy.all_in_per_million:.2f} busy, ${quiet.all_in_per_million:.2f} quiet; "
            f"{busy.wru():.1f} WRU busy, {quiet.wru():.1f} quiet"
        )
        print(
            f"  with the tables provisioned (table_capacity), auto scaling at its target: "
            f"${with_provisioned_tables(busy, TARGET_UTILIZATION):.2f} busy (DynamoDB reads and writes "
            f"${provisioned_usd(busy, TARGET_UTILIZATION):.2f} instead of "
            f"${on_demand_usd(busy):.2f}); "
            f"${with_provisioned_tables(busy, LOW_UTILIZATION):.2f} at {LOW_UTILIZATION:.0%} of the units held"
        )
        print(
            f"  with Lambda's own records of each invocation left out (system_log_level WARN): all-in "
            f"${busy.all_in_per_million - busy.platform_logs_usd * MILLION:.2f} busy, "
            f"${quiet.all_in_per_million - quiet.platform_logs_usd * MILLION:.2f} quiet (their logs "
            f"${busy.platform_logs_usd * MILLION:.2f} busy)"
        )
        for peer, lines in peers(measured, name).items():
            low, high = peer_total(measured, peer, lines)
            all_low, all_high = peer_total(measured, peer, lines, all_in=True)
            detail = "; ".join(
                f"{line.name} {line.low:.3g}" + (f"–{line.high:.3g}" if line.high != line.low else "") for line in lines
            )
            print(f"  {peer:<26} ${low:.2f}–{high:.2f} infrastructure, ${all_low:.2f}–{all_high:.2f} with logs   ({detail})")
    print_batches(measured)
    held = 60 * memory_mb("api") / 1024 * price("lambda_gb_second_arm") * MILLION
    print(
        f"\nNot in these lifecycles: a client that follows a run by long poll or SSE, or a worker's claim that waits for a "
        f"task, holds an API invocation while it waits: ${held:.0f} per million lifecycles per minute held "
        f"({memory_mb('api')} MB; a 10-minute decision followed live: ${10 * held:,.0f})."
    )
    print_live_following(held)
    infra, observability = fixed_monthly(measured)
    print("\nThe deployment's own monthly costs, whatever its traffic (shared over the lifecycles above):")
    for line in infra + observability:
        print(f"  {line.name:<40} {line.quantity:>12.6g} {line.unit:<11} ${line.usd:8.2f} a month   {line.note}")
    print("\nPrices (per unit) and where they were read:")
    for key, p in PRICES.items():
        print(f"  {key:<34} ${p.usd:.10g} per {p.per}  — {p.source}{'  [ESTIMATE]' if p.estimate else ''}")
    print("\nGoals of issue 31 measured here:")
    for figure, now, goal, met in verdicts(priced(measured)):
        print(f"  {figure}: {now}; goal {goal}: {'met' if met else 'NOT MET'}")


def print_batches(measured: dict[str, Any]) -> None:
    print(
        f"\nWhat an invocation holds at each pace (batch_sizes): the stream's records ({STREAM_POLLS_PER_S} polls a second of "
        f"each of ≥ {QUOTAS['initial_partitions'].value:g} shards, {wiring.STREAM_PARALLELIZATION} lanes each, no batching "
        f"window), each queue's messages ({IDLE_POLLERS_PER_QUEUE} pollers holding theirs through the invocation's round "
        "trips, no batching window: what arrived meanwhile, at least one, at most the batch size; Lambda may add "
        "pollers while messages wait, hence the bound beside), a bucket's deadlines (a second's spread over "
        f"{wiring.DUE_INDEX_SHARDS} shards):"
    )
    for name in measured["lifecycles"]:
        figures = []
        for pace in measured["paces"]:
            sizes = batch_sizes(measured, name, pace)
            few = pace == "busy" and all(n < 2 for f, n in sizes.items() if f != wiring.SCHEDULES.target)
            figures.append(f"{pace} {held(sizes)}" + (" (1–2: batches barely form at this pace)" if few else ""))
        alone = bill(measured, name, "busy", queues_alone=True).infra_per_million
        figures.append(f"busy with each queue's message alone in its batch: ${alone:.2f} infrastructure")
        print(f"  ({name}) " + "; ".join(figures))


def main() -> None:
    measured = measured_lifecycles(sys.argv[1:])
    if "--json" in sys.argv:
        print(json.dumps(priced(measured)))
        return
    print_report(measured)


if __name__ == "__main__":
    main()
