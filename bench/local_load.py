"""The local stack (`interlude dev`) under load over HTTP, with a small and a large table behind it.

Starts the stack as a subprocess (as `make dev` does), seeds existing runs straight into its moto server through
the real Service (an HTTP create per seed would take as long as the measurement), then drives approval
lifecycles — create, get, resolve — from 1, 4 and 16 client threads for a fixed time each, and prints
lifecycles/s and p50/p95 per call, next to a trivial `GET /.well-known/openwop` baseline measured the same way.
Goal (issue 13): lifecycles/s with 5,000 existing runs within 30 % of the figure with 100.

    python bench/local_load.py [--sizes 100,5000] [--clients 1,4,16] [--seconds 6]
    python bench/local_load.py --attach .interlude/local.json    # a stack that is already running
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _bench  # noqa: F401  (puts the repo root on sys.path for tests.support)
import boto3

from interlude.app.service import Service
from interlude.domain.models.requests import CreateRunRequest  # noqa: E402
from interlude.local.stack import TABLE_NAME, configure_environment
from interlude.store import Store
from tests.support.local_stack import Api, LocalStackProcess, wire

WORKFLOW = "demo-approval"
GATE = "review"
ACCEPT = {"action": "accept"}
GOAL_RATIO = 0.30


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,5000", help="existing runs before each measurement (ascending)")
    parser.add_argument("--clients", default="1,4,16", help="concurrent HTTP clients")
    parser.add_argument("--seconds", type=float, default=6.0, help="time spent per (size, clients) cell")
    parser.add_argument("--rounds", type=int, default=3, help="alternations between the stacks")
    parser.add_argument("--attach", type=Path, help="state file of a running stack instead of starting one")
    return parser.parse_args()


def percentile(samples: list[float], fraction: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Seeder:
    """Existing runs in the stack's own moto server. A few real ones come from the Service (half left waiting at
    the gate with an open interrupt in the inbox, half resolved); the rest are copies of their items under new
    run ids, written 25 to a call: the same items a used table holds, without paying a create per seed."""

    TEMPLATES = 10

    def __init__(self, info: dict[str, str]) -> None:
        configure_environment(info["motoEndpoint"], TABLE_NAME)
        self.client = boto3.client("dynamodb")
        self.service = Service(Store(TABLE_NAME, self.client))
        self.principal = self.service.authenticate(f"Bearer {info['apiKey']}")
        self.templates: list[tuple[str, list[dict[str, Any]]]] = []
        self.count = 0

    def _make_templates(self) -> None:
        opaques = []
        for n in range(self.TEMPLATES):
            state = self.service.create_run(self.principal, CreateRunRequest.model_validate({"workflowId": WORKFLOW, "inputs": {"title": "seed"}}))
            if n % 2:
                self.service.resolve_interrupt(self.principal, state.runId, GATE, ACCEPT)
            opaques.append(state.runId.split("/", 1)[1])
        items = [i for page in self.client.get_paginator("scan").paginate(TableName=TABLE_NAME) for i in page["Items"]]
        for opaque in opaques:
            # Every item whose partition key names the run: its state, event batches, interrupt.
            self.templates.append((opaque, [i for i in items if opaque in i["pk"]["S"]]))
        self.count += self.TEMPLATES

    def seed_to(self, total: int) -> float:
        started = time.monotonic()
        if not self.templates and self.count < total:
            self._make_templates()
        pending: list[dict[str, Any]] = []
        while self.count < total:
            opaque, items = self.templates[self.count % len(self.templates)]
            fresh = secrets.token_urlsafe(18)
            for item in items:
                pending.append({k: {"S": v["S"].replace(opaque, fresh)} if "S" in v else v for k, v in item.items()})
            self.count += 1
            if len(pending) >= 25 or self.count == total:
                for start in range(0, len(pending), 25):
                    batch = [{"PutRequest": {"Item": i}} for i in pending[start : start + 25]]
                    self.client.batch_write_item(RequestItems={TABLE_NAME: batch})
                pending = []
        return time.monotonic() - started


def settle(pid: int | None, idle: float, limit_s: float = 120.0) -> float:
    """Wait until the stack process is back to its idle CPU use (the stream pump has dispatched every new
    item's records); returns the seconds waited."""
    if pid is None:
        return 0.0
    started = time.monotonic()
    while time.monotonic() - started < limit_s and cpu_use(pid) > idle + 0.15:
        pass
    return time.monotonic() - started


def cpu_use(pid: int, window_s: float = 1.0) -> float:
    """CPU seconds per second the process used over `window_s`."""

    def spent() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = spent()
    time.sleep(window_s)
    return (spent() - before) / window_s


def lifecycle(api: Api, timings: dict[str, list[float]]) -> None:
    started = time.monotonic()
    got = api.call("POST", "/runs", {"workflowId": WORKFLOW, "inputs": {"title": "load"}})
    created = time.monotonic()
    assert got.status_code == 201, got.text
    run_id = wire(got.json()["runId"])
    got = api.call("GET", f"/runs/{run_id}")
    read = time.monotonic()
    assert got.status_code == 200, got.text
    assert got.json()["status"] == "waiting-approval", got.text
    got = api.call("POST", f"/runs/{run_id}/interrupts/{GATE}", {"resumeValue": ACCEPT})
    resolved = time.monotonic()
    assert got.status_code == 200, got.text
    timings["create"].append(created - started)
    timings["get"].append(read - created)
    timings["resolve"].append(resolved - read)
    timings["lifecycle"].append(resolved - started)


def discovery(api: Api, timings: dict[str, list[float]]) -> None:
    started = time.monotonic()
    got = api.session.get(api.base_url + "/.well-known/openwop", timeout=30)
    assert got.status_code == 200, got.text
    timings["discovery"].append(time.monotonic() - started)


STEPS = ("create", "get", "resolve", "lifecycle", "discovery")


@dataclass
class Cell:
    """What one (table size, clients) pair measured, summed over its rounds."""

    lifecycles: int = 0
    lifecycle_s: float = 0.0
    discoveries: int = 0
    discovery_s: float = 0.0
    timings: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in STEPS})


def drive(
    info: dict[str, str], clients: int, seconds: float, step: Callable[[Api, dict[str, list[float]]], None]
) -> tuple[int, float, dict[str, list[float]]]:
    """Run `step` in a loop on `clients` threads (one HTTP session each) for `seconds`: (done, elapsed, timings)."""
    merged: dict[str, list[float]] = {k: [] for k in STEPS}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    done = [0]

    def client() -> None:
        api = Api.of(info)
        mine: dict[str, list[float]] = {k: [] for k in merged}
        count = 0
        while time.monotonic() < deadline:
            step(api, mine)
            count += 1
        with lock:
            done[0] += count
            for k, v in mine.items():
                merged[k].extend(v)

    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    return done[0], time.monotonic() - started, merged


def measure(cell: Cell, info: dict[str, str], clients: int, seconds: float) -> None:
    done, elapsed, timings = drive(info, clients, min(seconds / 3, 2.0), discovery)
    cell.discoveries += done
    cell.discovery_s += elapsed
    done, elapsed, more = drive(info, clients, seconds, lifecycle)
    cell.lifecycles += done
    cell.lifecycle_s += elapsed
    for k in STEPS:
        cell.timings[k] += more[k] + timings[k]


def ms(samples: list[float], fraction: float) -> str:
    return f"{percentile(samples, fraction) * 1000:7.1f}"


def report(size: int, clients: int, cell: Cell) -> float:
    rate = cell.lifecycles / cell.lifecycle_s
    t = cell.timings
    print(
        f"{size:>6} {clients:>3} {rate:9.2f} "
        + " ".join(f"{ms(t[k], 0.5)} {ms(t[k], 0.95)}" for k in ("create", "get", "resolve"))
        + f" {ms(t['lifecycle'], 0.5)}   {cell.discoveries / cell.discovery_s:8.1f} {ms(t['discovery'], 0.5)}"
    )
    return rate


def main() -> None:
    args = parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    client_counts = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as cleanup:
        # One stack per size, measured in alternation: load from elsewhere on the machine drifts, and a
        # comparison made minutes apart would mostly measure that. Attached, one stack grows size by size.
        infos: dict[int, dict[str, str]] = {}
        pids: dict[int, int | None] = {}
        if args.attach:
            infos = dict.fromkeys(sizes, json.loads(args.attach.read_text()))
            pids = dict.fromkeys(sizes)
            plan = [[(size, [(c, args.seconds) for c in client_counts])] for size in sizes]
        else:
            for size in sizes:
                (Path(tmp) / str(size)).mkdir()
                stack = LocalStackProcess(Path(tmp) / str(size))
                cleanup.callback(stack.stop)
                infos[size], pids[size] = stack.wait(), stack.proc.pid
            share = args.seconds / args.rounds
            plan = [[(size, [(c, share) for c in client_counts]) for size in sizes] for _ in range(args.rounds)]
        print(f"{args.seconds:g} s per (runs, clients) in {len(plan)} round(s); times in ms (p50 p95)")
        idle = {size: cpu_use(pid, 2.0) if pid else 0.0 for size, pid in pids.items()}  # pumps polling, at rest
        seeders = {size: Seeder(infos[size]) for size in sizes} if not args.attach else None
        shared = Seeder(infos[sizes[0]]) if args.attach else None
        for info in {id(i): i for i in infos.values()}.values():
            # The first request spawns the API's instances and imports the handler: not part of any figure.
            for _ in range(2):
                lifecycle(Api.of(info), defaultdict(list))
                discovery(Api.of(info), defaultdict(list))
        cells = {(size, c): Cell() for size in sizes for c in client_counts}
        seeded: set[int] = set()
        for round_ in plan:
            for size, steps in round_:
                if size not in seeded:
                    seeder = shared or seeders[size]  # type: ignore[index]
                    took = seeder.seed_to(size)
                    waited = settle(pids[size], idle[size])
                    print(f"  ({size} runs seeded in {took:.1f} s, stack settled in {waited:.1f} s)", flush=True)
                    seeded.add(size)
                for clients, seconds in steps:
                    measure(cells[(size, clients)], infos[size], clients, seconds)
        print("  runs cli  lifes/s  create p50/p95   get p50/p95   resolve p50/p95  life p50   disc/s  disc p50")
        rates = {key: report(key[0], key[1], cell) for key, cell in cells.items()}
        small, large = sizes[0], sizes[-1]
        if small != large:
            for clients in client_counts:
                ratio = rates[(large, clients)] / rates[(small, clients)]
                verdict = "ok" if ratio >= 1 - GOAL_RATIO else "SLOWER than goal"
                print(
                    f"lifecycles/s at {large} ÷ at {small} existing runs, {clients:>2} clients: {ratio:.2f} "
                    f"(goal ≥ {1 - GOAL_RATIO:.2f}: {verdict})"
                )


if __name__ == "__main__":
    main()
