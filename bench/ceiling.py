"""Print how many lifecycles a second one deployment sustains at an account's default quotas, on paper, and which
quota binds first; and which tenant-wide item or partition caps one tenant.

From bench/lifecycles.py's counts (run here, or --measured FILE): each lifecycle's invocations per function with
their billed duration (bench/cost_per_million.py's model: the measured CPU at the function's vCPU share plus each
call's round trip), its HTTP requests, write and read units, schedules created, deleted and fired, and its write
units by partition key. Against the quotas of bench/_prices.py:

* Lambda: 1,000 concurrent executions per account, shared by every function (a lifecycle holds Σ its invocations'
  durations of concurrency-seconds); each SQS consumer at most its event source's maximum concurrency (the
  construct's default, wiring's own, or its reservation), `dispatch` at full batches (its runs side by side); the
  `stream` reader wiring.STREAM_PARALLELIZATION invocations per stream shard at a time, at full batches, a shard per
  table partition: at least the four of a new on-demand table, and as many as the writes need at 1,000 WRU/s each (a
  floor: DynamoDB splits sooner); with `account_concurrency_quota` set, the reservations of interlude.wiring cap them
  too (printed apart);
* API Gateway: 10,000 requests/s per account; DynamoDB: 40,000 WRU/s and 40,000 RRU/s per on-demand table;
  Scheduler: CreateSchedule and DeleteSchedule requests/s, and schedule invocations/s;
* per tenant: 1,000 WRU/s per partition, each tenant-wide key family spread over its declared shards (the inbox,
  run listing and task queues of interlude.wiring, the audit chains, the counters' shards at the default quotas),
  and each audit chain's appends serialised, one transaction round trip each.
Usage: .venv/bin/python bench/ceiling.py [--measured FILE] [--json]
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import defaultdict
from typing import Any

from _deployment import TABLES
from _prices import CALL_MS, QUOTAS, VCPU_MB
from cost_per_million import SIDE_BY_SIDE, construct_default, duration_ms, is_lambda, measured_lifecycles, memory_mb

from interlude import wiring
from interlude.adapters.queues import SQS_BATCH
from interlude.store.due_index import DUE_PK_PREFIX

GOAL_DEPLOYMENT = 2000
GOAL_TENANT = 1000


OUTBOX_CONSUMER = next(spec.name for spec in wiring.FUNCTIONS if spec.consumes == wiring.OUTBOX_QUEUE)
# Their concurrency as wiring declares it from the goal, and the Scheduler target's reservation (a bucket's deadlines
# side by side: ADR 0132).
GOAL_DERIVED = {
    OUTBOX_CONSUMER: "wiring.OUTBOX_CONCURRENCY",
    "callbacks": "wiring.CALLBACK_CONCURRENCY",
    wiring.SCHEDULES.target: "wiring.TIMEOUTS_CONCURRENCY",
}


def batched_s(inv: dict[str, Any]) -> float:
    """Seconds of concurrency `inv`'s records hold when its queue hands the function full batches (the goal's pace: a
    receive then finds a batch of SIDE_BY_SIDE records of as many runs), taken side by side by run: a batch lasts its
    records' CPU on the function's vCPU share, or one record's CPU and round trips, whichever is longer."""
    records = max(1, inv.get("records", 1))
    cpu = inv["cpu_ms"] / min(1.0, memory_mb(inv["function"]) / VCPU_MB) / records
    waits = duration_ms(inv) / records - cpu
    return max(cpu, (cpu + waits) / SIDE_BY_SIDE[inv["function"]]) * records / 1000


def bucket_batched_s(inv: dict[str, Any]) -> float:
    """Seconds a bucket schedule's invocation (ADR 0132) holds its target per deadline when buckets are full (the goal's
    pace): its deadlines fired wiring.DUE_BUCKET_WORKERS at a time, as batched_s takes a batch's runs."""
    records = max(1, inv.get("records", 1))
    cpu = inv["cpu_ms"] / min(1.0, memory_mb(inv["function"]) / VCPU_MB) / records
    waits = duration_ms(inv) / records - cpu
    return max(cpu, (cpu + waits) / wiring.DUE_BUCKET_WORKERS) * records / 1000


def stream_batched_s(inv: dict[str, Any]) -> float:
    """Seconds `inv`'s records hold the stream reader when the stream hands it full batches (wiring.STREAM_BATCH_SIZE
    records, the goal's pace): its CPU per record, and its sends shared by the records of a SendMessageBatch (SQS_BATCH)."""
    records = max(1, inv.get("records", 1))
    cpu = inv["cpu_ms"] / min(1.0, memory_mb(inv["function"]) / VCPU_MB) / records
    waits = duration_ms(inv) / records - cpu
    return (cpu + waits / min(SQS_BATCH, wiring.STREAM_BATCH_SIZE)) * records / 1000


def per_lifecycle(invocations: list[dict[str, Any]]) -> dict[str, Any]:
    busy_s: dict[str, float] = defaultdict(float)
    billed: dict[str, float] = defaultdict(float)
    requests = wru = rru = 0.0
    gsi_wru = 0.0
    table_wru: dict[str, float] = dict.fromkeys(TABLES, 0.0)
    table_rru: dict[str, float] = dict.fromkeys(TABLES, 0.0)
    outbox = {"records": 0, "head_reads": 0, "cpu_ms": 0.0, "one_at_a_time_s": 0.0}
    bucket_firings = 0
    for inv in invocations:
        if inv.get("bucket") and not is_lambda(inv):
            bucket_firings += inv["billed"].get("scheduler:invocation", 0)
        if inv.get("bucket") and is_lambda(inv):
            busy_s[inv["function"]] += bucket_batched_s(inv)
        elif inv["function"] == OUTBOX_CONSUMER:
            outbox["records"] += inv.get("records", 1)
            outbox["head_reads"] += inv.get("head_reads", 0)
            outbox["cpu_ms"] += inv["cpu_ms"]
            outbox["one_at_a_time_s"] += duration_ms(inv) / 1000
            busy_s[inv["function"]] += batched_s(inv)
        elif inv["function"] in SIDE_BY_SIDE and is_lambda(inv):
            busy_s[inv["function"]] += batched_s(inv)
        elif inv["trigger"] == "stream":
            busy_s[inv["function"]] += stream_batched_s(inv)
        elif is_lambda(inv):
            busy_s[inv["function"]] += duration_ms(inv) / 1000
        for call, n in inv["billed"].items():
            billed[call] += n
        requests += inv["trigger"] == "http"
        rru += inv["rru"]
        gsi = sum(units for kind, units in inv["wru_by_kind"].items() if kind.endswith(": GSI"))
        gsi_wru += gsi
        wru += inv["wru"] - gsi
        for table, units in inv.get("wru_by_table", {}).items():
            table_wru[table] += units
        for table, units in inv.get("rru_by_table", {}).items():
            table_rru[table] += units
    return {
        "busy_s": dict(busy_s), "billed": dict(billed), "requests": requests, "wru": wru, "gsi_wru": gsi_wru, "rru": rru,
        "table_wru": table_wru, "table_rru": table_rru,
        "outbox": outbox, "bucket_firings": bucket_firings,
        "due_wru": sum(u for inv in invocations for pk, u in inv["wru_by_partition"].items() if pk.startswith(DUE_PK_PREFIX)),
    }


def per_table(what: str, unit: str, quota: float, by_table: dict[str, float]) -> list[tuple[str, float, str]]:
    """Each table's own quota (40,000 WRU/s and RRU/s: no account-level quota on demand, docs/adr/0161): a row per
    table `what` (writes, reads) reaches."""
    return [(f"DynamoDB {what}, {table}", quota / units, f"{quota:g} {unit}/s ÷ {units:g}") for table, units in by_table.items() if units]


def deployment_limits(found: dict[str, Any], reserved: bool) -> list[tuple[str, float, str]]:
    """(constraint, lifecycles/s it allows, how) for one lifecycle's figures; `reserved`: with wiring's reservations."""
    q = {k: v.value for k, v in QUOTAS.items()}
    limits: list[tuple[str, float, str]] = []
    total_s = sum(found["busy_s"].values())
    limits.append(("Lambda account concurrency", q["lambda_concurrency"] / total_s,
                   f"{q['lambda_concurrency']:g} ÷ {total_s * 1000:.0f} ms of execution per lifecycle"))
    default_sqs = construct_default("DEFAULT_SQS_MAX_CONCURRENCY")
    for spec in wiring.FUNCTIONS:
        held = found["busy_s"].get(spec.name, 0.0)
        if not held:
            continue
        cap = spec.reserved_concurrency if reserved else None
        if spec.consumes:
            own = spec.max_concurrency
            cap = (own if cap is None else min(own, cap)) if own is not None else cap if cap is not None else default_sqs
            limits.append((f"{spec.name}: its queue's maximum concurrency {cap}", cap / held,
                           f"{cap} ÷ {held * 1000:.0f} ms per lifecycle"))
        elif spec.reads_stream:
            # STREAM_PARALLELIZATION invocations per shard at a time; shards ≥ max(initial partitions, WRU/s ÷ 1,000).
            # Only the first table has a stream (docs/adr/0161).
            wru = found["table_wru"][TABLES[0]] + found["gsi_wru"]
            lanes = wiring.STREAM_PARALLELIZATION
            initial = q["initial_partitions"] * lanes
            if reserved and cap is not None:
                limits.append((f"{spec.name}: reserved concurrency {cap}", cap / held, f"{cap} ÷ {held * 1000:.0f} ms per lifecycle"))
            # each lifecycle's writes add at least the shard-time it needs
            grows = wru / q["partition_wru"] * lanes >= held
            allowed = math.inf if grows else initial / held
            limits.append((f"{spec.name}: {lanes} invocations per stream shard", allowed,
                           f"{held * 1000:.1f} ms per lifecycle on a shard's lane at full batches of {wiring.STREAM_BATCH_SIZE}; "
                           f"{wru:g} WRU per lifecycle add {wru / q['partition_wru'] * lanes * 1000:.0f} ms of lanes "
                           f"({'enough' if grows else f'not enough: {initial:g} lanes'})"))
        elif reserved and cap is not None:
            limits.append((f"{spec.name}: reserved concurrency {cap}", cap / held, f"{cap} ÷ {held * 1000:.0f} ms per lifecycle"))
    if found["requests"]:
        limits.append(("HTTP API requests", q["http_api_rps"] / found["requests"], f"{q['http_api_rps']:g} ÷ {found['requests']:g}"))
    limits += per_table("writes", "WRU", q["table_wru"], found["table_wru"])
    if found["gsi_wru"]:
        limits.append(("DynamoDB GSI writes", q["table_wru"] / found["gsi_wru"], f"{q['table_wru']:g} ÷ {found['gsi_wru']:g}"))
    # A measurement without reads by table: the first table's, all of them.
    reads = found["table_rru"] if any(found["table_rru"].values()) else {TABLES[0]: found["rru"]}
    limits += per_table("reads", "RRU", q["table_rru"], reads)
    for call, quota in (("scheduler:CreateSchedule", "scheduler_create_tps"), ("scheduler:DeleteSchedule", "scheduler_delete_tps"),
                        ("scheduler:invocation", "scheduler_invocations_tps")):
        n = found["billed"].get(call, 0)
        if call == "scheduler:invocation":
            n -= found["bucket_firings"]
        if n:
            limits.append((f"Scheduler {call.split(':')[1]}", q[quota] / n, f"{q[quota]:g}/s ÷ {n:g}"))
    if found["bucket_firings"]:
        # ADR 0132: a bucket's invocation fires every deadline due in its second and shard, so at any pace a second of
        # deadlines takes at most DUE_INDEX_SHARDS invocations; their items spread over as many partitions.
        shards = wiring.DUE_INDEX_SHARDS
        enough = shards <= q["scheduler_invocations_tps"]
        limits.append(("Scheduler invocation (bucket schedules)", math.inf if enough else 0.0,
                       f"≤ {shards} a second at any pace, of {q['scheduler_invocations_tps']:g}/s"))
    if found["due_wru"]:
        limits.append((f"due index partitions ({wiring.DUE_INDEX_SHARDS} per second due)",
                       q["partition_wru"] * wiring.DUE_INDEX_SHARDS / found["due_wru"],
                       f"{q['partition_wru']:g} WRU/s × {wiring.DUE_INDEX_SHARDS} ÷ {found['due_wru']:g} WRU per lifecycle"))
    return limits


def family_of(pk: str) -> tuple[str, str] | None:
    """(family, kind of key) of a tenant-wide partition key, or None for one entity's own (a run's, a task's)."""
    gsi = pk.startswith("GSI ")
    rest = pk[4:] if gsi else pk.split("#", 2)[2] if pk.count("#") >= 2 else ""
    if pk.startswith(DUE_PK_PREFIX):
        return None  # the deployment's due index, not a tenant's (deployment_limits)
    if not gsi and rest.split("#", 1)[0] in ("R", "TK", "EF", "IDEM", "CONV", "EV", "W", "WH"):
        return None
    return ("GSI " if gsi else "") + re.sub(r"#\d+$", "", rest), "gsi" if gsi else "table"


def shards_of(family: str, measured: dict[str, Any]) -> tuple[int, str]:
    from interlude.store.audit import PENDING_SHARDS
    from interlude.store.limits import OPEN_RUNS_PER_SHARD, open_runs_shards
    from interlude.store.tenants import USAGE_PARTS

    head = family.split("#", 1)[0]
    for index in wiring.ITEM_INDEXES:
        if head == index.prefix:
            segment = family.split("#")[1] if "#" in family else ""
            unsharded = segment in index.unsharded_families
            return (1, f"{index.name}: a {segment} family is one partition") if unsharded else (index.shards, f"wiring {index.name}")
    if head in ("AUDIT", "AUDITHEAD"):
        return measured["audit"]["chains"], "wiring.AUDIT_CHAINS"
    if family in ("", "USAGE"):
        quota = measured["tenant_open_runs"]
        return open_runs_shards(quota), f"the default open-runs quota {quota:,} ÷ {OPEN_RUNS_PER_SHARD:,}"
    if family == "METER":
        return USAGE_PARTS, "store.tenants USAGE_PARTS"
    if family == "GSI AUDIT#PENDING":
        return PENDING_SHARDS, "store.audit PENDING_SHARDS"
    return 1, "not declared: taken as one"


def tenant_limits(measured: dict[str, Any], name: str) -> list[tuple[str, float, str]]:
    lifecycle = measured["lifecycles"][name]
    chains = measured["audit"]["chains"]
    seen: dict[str, set[str]] = {}
    per_family: dict[str, float] = defaultdict(float)
    for pace in ("busy", "quiet"):
        for inv in lifecycle[pace]:
            for pk, units in inv["wru_by_partition"].items():
                found = family_of(pk)
                if found is None:
                    continue
                seen.setdefault(found[0], set()).add(pace)
                if pace == "busy":
                    per_family[found[0]] += units
    limits = []
    partition = QUOTAS["partition_wru"].value
    for family, units in sorted(per_family.items()):
        shards, why = shards_of(family, measured)
        label = family or "open-runs counter"
        limits.append((f"{label} ({shards} partition{'s' * (shards > 1)}: {why})", partition * shards / units,
                       f"{units:g} WRU per lifecycle ÷ {shards}"))
    appends = sum(1 for inv in lifecycle["busy"] for pk in inv["wru_by_partition"] if "#AUDITHEAD#" in pk)
    if appends:
        per_chain = 1000 / CALL_MS["dynamodb:TransactWriteItems"]
        limits.append((f"audit chains' serialised appends ({chains} chains)", per_chain * chains / appends,
                       f"one {CALL_MS['dynamodb:TransactWriteItems']:g} ms transaction at a time per chain, {appends} per lifecycle"))
    return limits


def ceilings(measured: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, lifecycle in measured["lifecycles"].items():
        found = per_lifecycle(lifecycle["busy"])
        default = deployment_limits(found, reserved=False)
        reserved = deployment_limits(found, reserved=True)
        tenant = tenant_limits(measured, name)
        out[name] = {
            "title": lifecycle["title"],
            "default": default,
            "reserved": reserved,
            "tenant": tenant,
            "binding": min(default, key=lambda x: x[1]),
            "binding_reserved": min(reserved, key=lambda x: x[1]),
            "binding_tenant": min(tenant, key=lambda x: x[1]) if tenant else ("none", math.inf, ""),
            "outbox": {**found["outbox"], "batched_s": found["busy_s"].get(OUTBOX_CONSUMER, 0.0)},
            "busy_s": found["busy_s"],
        }
    return out


def outbox_rows(found: dict[str, Any]) -> list[tuple[str, str]]:
    """Per lifecycle, what dispatch does with its records: (lifecycle, figures), and the concurrency the goal needs."""
    rows = []
    for name, v in found.items():
        o = v["outbox"]
        if not o["records"]:
            continue
        rows.append((name, (
            f"{o['records']} records; run-head reads per record {o['head_reads'] / o['records']:.1f}; CPU per record "
            f"{o['cpu_ms'] / o['records']:.1f} ms; {o['batched_s'] * 1000:.0f} ms of dispatch concurrency per lifecycle "
            f"at full batches of {wiring.OUTBOX_BATCH_SIZE} (one record at a time: {o['one_at_a_time_s'] * 1000:.0f} ms)"
        )))
    return rows


def goal_concurrency(found: dict[str, Any], function: str) -> tuple[int, int, bool]:
    """(concurrency `function` needs at the goal's pace for its heaviest lifecycle, what wiring gives it: its queue's
    maximum concurrency, or for a function no queue feeds its reservation; covered)."""
    needed = math.ceil(GOAL_DEPLOYMENT * max(v["busy_s"].get(function, 0.0) for v in found.values()))
    spec = wiring.function(function)
    if spec.consumes:
        given = spec.max_concurrency or construct_default("DEFAULT_SQS_MAX_CONCURRENCY")
    else:
        given = spec.reserved_concurrency or 0
    return needed, given, given >= needed


def verdict(found: dict[str, Any]) -> tuple[str, str, bool]:
    now = "; ".join(
        f"({k}) {v['binding'][1]:,.0f}/s ({v['binding'][0]}), a tenant {v['binding_tenant'][1]:,.0f}/s ({v['binding_tenant'][0]})"
        for k, v in found.items()
    )
    met = all(v["binding"][1] >= GOAL_DEPLOYMENT and v["binding_tenant"][1] >= GOAL_TENANT for v in found.values())
    return now, f"≥ {GOAL_DEPLOYMENT:,}; no item or partition capping a tenant below {GOAL_TENANT:,}/s", met


def main() -> None:
    measured = measured_lifecycles(sys.argv[1:])
    found = ceilings(measured)
    if "--json" in sys.argv:
        print(json.dumps(found))
        return
    load = ", ".join(f"{x:.1f}" for x in measured["load"])
    print(
        "Lifecycles/s one deployment sustains at default account quotas, on paper (durations: the measured CPU at "
        f"the function's vCPU share + the calls' round trips; CPU measured at load average {load})."
    )
    for name, v in found.items():
        print(f"\n({name}) {v['title']}")
        for label, key in (("as deployed by default (no reservation)", "default"), ("with account_concurrency_quota set (wiring's reservations)", "reserved")):
            print(f"  {label}:")
            for what, allowed, how in sorted(v[key], key=lambda x: x[1]):
                print(f"    {allowed:>12,.0f}/s  {what}  ({how})")
        print("  one tenant (tenant-wide partitions, 1,000 WRU/s each):")
        for what, allowed, how in sorted(v["tenant"], key=lambda x: x[1]):
            print(f"    {allowed:>12,.0f}/s  {what}  ({how})")
        b, r, t = v["binding"], v["binding_reserved"], v["binding_tenant"]
        print(
            f"  ceiling ({name}): {b[1]:,.0f} lifecycles/s, bound by {b[0]}; with reservations {r[1]:,.0f}/s ({r[0]}); "
            f"a tenant {t[1]:,.0f}/s ({t[0]})"
        )
    print(f"\ndispatch, a batch consumer ({wiring.OUTBOX_BATCH_SIZE} records a batch, no batching window; runs side by side):")
    for name, figures in outbox_rows(found):
        print(f"  ({name}) {figures}")
    print("What the goal needs of the functions whose concurrency wiring derives from it:")
    for function, source in GOAL_DERIVED.items():
        needed, given, covered = goal_concurrency(found, function)
        if function in SIDE_BY_SIDE:
            how = f"full batches of {SIDE_BY_SIDE[function]}, runs side by side"
            held = "its queue's maximum concurrency"
        else:
            how, held = f"a bucket's deadlines {wiring.DUE_BUCKET_WORKERS} at a time", "its reservation"
        print(f"  at {GOAL_DEPLOYMENT:,} lifecycles/s {function} needs {needed} concurrent invocations ({how}); {held} "
              f"is {given} ({source}): {'covered' if covered else 'NOT covered'}")
    rps = measured["tenant_requests_per_second"]
    print("\nSQS standard queues have no throughput quota (nearly unlimited requests/s): their consumers' concurrency binds.")
    print(f"\nPolicy, not capacity: a tenant's default limit is {rps} requests/s (INTERLUDE_TENANT_REQUESTS_PER_SECOND; per tenant in its settings).")
    now, goal, met = verdict(found)
    print(f"Goal of issue 31: {now}; goal {goal}: {'met' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
