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
import json
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _bench  # noqa: F401  (puts the repo root on sys.path for tests.support)
import boto3
import requests

from interlude.local.stack import TABLE_NAME, configure_environment
from interlude.service import Service
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
    parser.add_argument("--attach", type=Path, help="state file of a running stack instead of starting one")
    return parser.parse_args()


def percentile(samples: list[float], fraction: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Seeder:
    """Existing runs, written by the real Service into the stack's own moto server: half left waiting at the
    gate (open interrupts, inbox entries), half resolved — what a table that has been used holds."""

    def __init__(self, info: dict[str, str]) -> None:
        configure_environment(info["motoEndpoint"], TABLE_NAME)
        self.service = Service(Store(TABLE_NAME, boto3.client("dynamodb")))
        self.principal = self.service.authenticate(f"Bearer {info['apiKey']}")
        self.count = 0

    def seed_to(self, total: int) -> float:
        started = time.monotonic()
        while self.count < total:
            state = self.service.create_run(self.principal, {"workflowId": WORKFLOW, "inputs": {"title": "seed"}})
            if self.count % 2:
                self.service.resolve_interrupt(self.principal, state.runId, GATE, ACCEPT)
            self.count += 1
        return time.monotonic() - started


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


def drive(
    info: dict[str, str], clients: int, seconds: float, step: Callable[[Api, dict[str, list[float]]], None]
) -> tuple[float, dict[str, list[float]]]:
    """Run `step` in a loop on `clients` threads (one HTTP session each) for `seconds`; (completed/s, timings)."""
    merged: dict[str, list[float]] = {k: [] for k in ("create", "get", "resolve", "lifecycle", "discovery")}
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
    return done[0] / (time.monotonic() - started), merged


def ms(samples: list[float], fraction: float) -> str:
    return f"{percentile(samples, fraction) * 1000:7.1f}"


def measure(seeder: Seeder, info: dict[str, str], client_counts: list[int], seconds: float) -> dict[int, float]:
    rates: dict[int, float] = {}
    size = seeder.count
    for clients in client_counts:
        base_rate, base = drive(info, clients, min(seconds, 2.0), discovery)
        rate, timings = drive(info, clients, seconds, lifecycle)
        rates[clients] = rate
        seeder.count += len(timings["lifecycle"])  # these runs exist from now on too
        print(
            f"{size:>6} {clients:>3} {rate:9.2f} "
            + " ".join(f"{ms(timings[k], 0.5)} {ms(timings[k], 0.95)}" for k in ("create", "get", "resolve"))
            + f" {ms(timings['lifecycle'], 0.5)}   {base_rate:8.1f} {ms(base['discovery'], 0.5)}",
            flush=True,
        )
    return rates


def main() -> None:
    args = parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    client_counts = [int(c) for c in args.clients.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        stack = None
        if args.attach:
            state = json.loads(args.attach.read_text())
        else:
            stack = LocalStackProcess(Path(tmp))
            state = stack.wait()
        try:
            requests.get(state["baseUrl"] + "/.well-known/openwop", timeout=10).raise_for_status()
            seeder = Seeder(state)
            print(f"local stack {state['baseUrl']}; {args.seconds:g} s per cell; times in ms (p50 p95)")
            print("  runs cli  lifes/s  create p50/p95   get p50/p95   resolve p50/p95  life p50   disc/s  disc p50")
            # The first request spawns the API's instances and imports the handler: not part of any figure.
            for _ in range(2):
                lifecycle(Api.of(state), defaultdict(list))
                discovery(Api.of(state), defaultdict(list))
            results: dict[int, dict[int, float]] = {}
            for size in sizes:
                took = seeder.seed_to(size)
                print(f"  (seeded to {seeder.count} runs in {took:.1f} s)", flush=True)
                results[size] = measure(seeder, state, client_counts, args.seconds)
            small, large = sizes[0], sizes[-1]
            if small != large:
                for clients in client_counts:
                    ratio = results[large][clients] / results[small][clients]
                    verdict = "ok" if ratio >= 1 - GOAL_RATIO else "SLOWER than goal"
                    print(
                        f"lifecycles/s at {large} ÷ at {small} runs, {clients:>2} clients: {ratio:.2f} "
                        f"(goal ≥ {1 - GOAL_RATIO:.2f}: {verdict})"
                    )
        finally:
            if stack is not None:
                stack.stop()


if __name__ == "__main__":
    main()
