"""The local stack (`interlude dev`) under load over HTTP, with a small and a large table behind it.

Starts the stack as a subprocess (as `make dev` does), seeds existing runs straight into its moto server through
the real services (an HTTP create per seed would take as long as the measurement), then drives approval
lifecycles — create, get, resolve — from 1, 4 and 16 client threads for a fixed time each, and prints
lifecycles/s and p50/p95 per call, next to a trivial `GET /.well-known/openwop` baseline measured the same way.
Goal (issue 13): lifecycles/s with 5,000 existing runs within 30 % of the figure with 100.

    python bench/local_load.py [--sizes 100,5000] [--clients 1,4,16] [--seconds 6]
    python bench/local_load.py --attach .interlude/local.json    # a stack that is already running

Under load every request may take long: each waits up to --timeout seconds (generous by default), a request that
fails or times out is counted and named in the report instead of stopping the run, and a stack that does not
start, or answers nothing, ends the script with a one-line message.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _bench  # noqa: F401  (puts the repo root on sys.path for tests.support)
import boto3
import requests
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest  # noqa: E402
from interlude.local.stack import ENTRIES_TABLE_NAME, TABLE_NAME, configure_environment
from interlude.store.facade import Store
from tests.support.local_stack import Api, LocalStackProcess, quiesce, wire
from tests.support.run_copies import RunCopies

WORKFLOW = "demo-approval"
GATE = "review"
ACCEPT = {"action": "accept"}
GOAL_RATIO = 0.30
# Seconds a request may take before it counts as failed (a loaded 2-CPU machine can stall one for many seconds).
TIMEOUT_S = 180.0
# How long the seeds' records may take to be dispatched (5,000 runs: 7,400 event items, about 35 ms of the stack's
# CPU each; minutes on a loaded 2-CPU machine).
SETTLE_LIMIT_S = 900.0
# The seeding client's patience: one BatchWriteItem may wait behind the stack's own requests on moto's lock.
SEED_CLIENT = Config(connect_timeout=60, read_timeout=600, retries={"max_attempts": 10, "mode": "standard"})


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,5000", help="existing runs before each measurement (ascending)")
    parser.add_argument("--clients", default="1,4,16", help="concurrent HTTP clients")
    parser.add_argument("--seconds", type=float, default=6.0, help="time spent per (size, clients) cell")
    parser.add_argument("--rounds", type=int, default=3, help="alternations between the stacks")
    parser.add_argument("--attach", type=Path, help="state file of a running stack instead of starting one")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds one request may take")
    return parser.parse_args()


def percentile(samples: list[float], fraction: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class Seeder:
    """Existing runs in the stack's own moto server. A few real ones come from the services (half left waiting at
    the gate with an open interrupt in the inbox, half resolved); the rest are copies of their items under new
    run and interrupt ids (tests/support/run_copies.py): the same items a used table holds, without paying a
    create per seed."""

    TEMPLATES = 10

    def __init__(self, info: dict[str, str]) -> None:
        configure_environment(info["motoEndpoint"], TABLE_NAME, ENTRIES_TABLE_NAME)
        self.client = boto3.client("dynamodb", config=SEED_CLIENT)
        self.services = Services(Store(TABLE_NAME, ENTRIES_TABLE_NAME, self.client))
        self.principal = self.services.keys.authenticate(f"Bearer {info['apiKey']}")
        self.copies: RunCopies | None = None
        self.count = 0

    def _make_templates(self) -> RunCopies:
        run_ids = []
        for n in range(self.TEMPLATES):
            request = CreateRunRequest.model_validate({"workflowId": WORKFLOW, "inputs": {"title": "seed"}})
            state = self.services.lifecycle.create_run(self.principal, request)
            if n % 2:
                self.services.decisions.resolve_interrupt(self.principal, state.runId, GATE, ACCEPT)
            run_ids.append(state.runId)
        self.count += self.TEMPLATES
        return RunCopies(self.client, TABLE_NAME, run_ids)

    def seed_to(self, total: int) -> float:
        started = time.monotonic()
        if self.copies is None and self.count < total:
            self.copies = self._make_templates()
        if self.copies is not None and self.count < total:
            self.copies.write(total - self.count)
            self.count = total
        return time.monotonic() - started


def settle(info: dict[str, str], limit_s: float = SETTLE_LIMIT_S) -> float:
    """Wait until the stack has carried every seeded item's records through the stream and the outbox (its control
    endpoint answers once each pump has found nothing to move: interlude.local.pump.quiesce); returns the seconds
    waited. The stack's CPU falling back to its idle use was the sign before: on a busy machine it fell short of that
    while the stack still dispatched, and the larger table's cells were measured beside the seeds' dispatch."""
    started = time.monotonic()
    try:
        quiesce(info, limit_s)
    except AssertionError as exc:
        raise StackDown(f"the stack was not quiet {limit_s:g} s after seeding: {exc}") from exc
    return time.monotonic() - started


class Failed(Exception):
    """A request that timed out, failed, or did not answer as a lifecycle expects."""


@dataclass(frozen=True)
class Client:
    """One HTTP client of the stack: its session, and how long it waits for each answer."""

    api: Api
    timeout_s: float

    def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> dict[str, Any]:
        data = None if body is None else json.dumps(body)
        try:
            got = self.api.session.request(
                method, self.api.base_url + path, data=data, headers=self.api.headers(), timeout=self.timeout_s
            )
        except requests.Timeout as exc:
            raise Failed(f"{method} {path.split('/')[1]}: no answer within {self.timeout_s:g} s") from exc
        except requests.RequestException as exc:
            raise Failed(f"{method} {path.split('/')[1]}: {type(exc).__name__}") from exc
        if got.status_code != expect:
            raise Failed(f"{method} {path.split('/')[1]}: {got.status_code} {got.text[:160]}")
        answer: dict[str, Any] = got.json()
        return answer


def lifecycle(client: Client, timings: dict[str, list[float]]) -> None:
    started = time.monotonic()
    run_id = wire(client.call("POST", "/runs", {"workflowId": WORKFLOW, "inputs": {"title": "load"}}, 201)["runId"])
    created = time.monotonic()
    status = client.call("GET", f"/runs/{run_id}")["status"]
    read = time.monotonic()
    if status != "waiting-approval":
        raise Failed(f"GET runs: the new run is {status}, not waiting-approval")
    client.call("POST", f"/runs/{run_id}/interrupts/{GATE}", {"resumeValue": ACCEPT})
    resolved = time.monotonic()
    timings["create"].append(created - started)
    timings["get"].append(read - created)
    timings["resolve"].append(resolved - read)
    timings["lifecycle"].append(resolved - started)


def discovery(client: Client, timings: dict[str, list[float]]) -> None:
    started = time.monotonic()
    client.call("GET", "/.well-known/openwop")
    timings["discovery"].append(time.monotonic() - started)


STEPS = ("create", "get", "resolve", "lifecycle", "discovery")
Step = Callable[[Client, dict[str, list[float]]], None]


@dataclass
class Drive:
    """What `clients` threads did in one timed drive."""

    done: int
    elapsed: float
    timings: dict[str, list[float]]
    failures: Counter[str]


@dataclass
class Cell:
    """What one (table size, clients) pair measured, summed over its rounds."""

    lifecycles: int = 0
    lifecycle_s: float = 0.0
    discoveries: int = 0
    discovery_s: float = 0.0
    timings: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in STEPS})
    failures: Counter[str] = field(default_factory=Counter)


def drive(info: dict[str, str], clients: int, seconds: float, step: Step, timeout_s: float) -> Drive:
    """Run `step` in a loop on `clients` threads (one HTTP session each) for `seconds`. A step that fails is
    counted by its message, not retried, and the client goes on."""
    result = Drive(0, 0.0, {k: [] for k in STEPS}, Counter())
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run_client() -> None:
        client = Client(Api.of(info), timeout_s)
        mine: dict[str, list[float]] = {k: [] for k in STEPS}
        count = 0
        failures: Counter[str] = Counter()
        while time.monotonic() < deadline:
            try:
                step(client, mine)
                count += 1
            except Failed as exc:
                failures[str(exc)] += 1
        with lock:
            result.done += count
            result.failures.update(failures)
            for k, v in mine.items():
                result.timings[k].extend(v)

    started = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(run_client) for _ in range(clients)]:
            future.result()
    result.elapsed = time.monotonic() - started
    return result


def measure(cell: Cell, info: dict[str, str], clients: int, seconds: float, timeout_s: float) -> None:
    baseline = drive(info, clients, min(seconds / 3, 2.0), discovery, timeout_s)
    cell.discoveries += baseline.done
    cell.discovery_s += baseline.elapsed
    load = drive(info, clients, seconds, lifecycle, timeout_s)
    cell.lifecycles += load.done
    cell.lifecycle_s += load.elapsed
    for k in STEPS:
        cell.timings[k] += load.timings[k] + baseline.timings[k]
    cell.failures.update(baseline.failures + load.failures)


def ms(samples: list[float], fraction: float) -> str:
    return f"{percentile(samples, fraction) * 1000:7.1f}"


def report(size: int, clients: int, cell: Cell) -> float:
    rate = cell.lifecycles / cell.lifecycle_s if cell.lifecycle_s else 0.0
    t = cell.timings
    failed = sum(cell.failures.values())
    print(
        f"{size:>6} {clients:>3} {rate:9.2f} "
        + " ".join(f"{ms(t[k], 0.5)} {ms(t[k], 0.95)}" for k in ("create", "get", "resolve"))
        + f" {ms(t['lifecycle'], 0.5)}   {cell.discoveries / cell.discovery_s if cell.discovery_s else 0:8.1f}"
        + f" {ms(t['discovery'], 0.5)}"
        + (f"   {failed} failed" if failed else "")
    )
    return rate


class StackDown(Exception):
    """The stack did not start, or did not answer at all: nothing could be measured."""


def start_stacks(sizes: list[int], tmp: Path, cleanup: contextlib.ExitStack) -> dict[int, dict[str, str]]:
    infos: dict[int, dict[str, str]] = {}
    for size in sizes:
        (tmp / str(size)).mkdir()
        stack = LocalStackProcess(tmp / str(size))
        cleanup.callback(stack.stop)
        try:
            infos[size] = stack.wait(timeout_s=300.0)
        except (RuntimeError, TimeoutError) as exc:
            log = (tmp / str(size) / "local-stack.log").read_text().strip().splitlines()[-5:]
            raise StackDown(f"the local stack did not start ({exc}); its log ends:\n  " + "\n  ".join(log)) from exc
    return infos


def warm_up(infos: dict[int, dict[str, str]], timeout_s: float) -> None:
    """The first requests spawn the API's instances and import the handler: not part of any figure."""
    for info in {id(i): i for i in infos.values()}.values():
        client = Client(Api.of(info), timeout_s)
        for _ in range(2):
            try:
                lifecycle(client, defaultdict(list))
                discovery(client, defaultdict(list))
            except Failed as exc:
                raise StackDown(f"the stack at {info['baseUrl']} does not complete a lifecycle: {exc}") from exc


def compare(sizes: list[int], client_counts: list[int], rates: dict[tuple[int, int], float]) -> None:
    small, large = sizes[0], sizes[-1]
    if small == large:
        return
    for clients in client_counts:
        label = f"lifecycles/s at {large} ÷ at {small} existing runs, {clients:>2} clients"
        if not rates[(small, clients)] or not rates[(large, clients)]:
            print(f"{label}: not measured (no lifecycle completed in one of the cells)")
            continue
        ratio = rates[(large, clients)] / rates[(small, clients)]
        verdict = "ok" if ratio >= 1 - GOAL_RATIO else "SLOWER than goal"
        print(f"{label}: {ratio:.2f} (goal ≥ {1 - GOAL_RATIO:.2f}: {verdict})")


def measure_all(args: argparse.Namespace, tmp: Path, cleanup: contextlib.ExitStack) -> None:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    client_counts = [int(c) for c in args.clients.split(",")]
    # One stack per size, measured in alternation: load from elsewhere on the machine drifts, and a
    # comparison made minutes apart would mostly measure that. Attached, one stack grows size by size.
    if args.attach:
        infos = dict.fromkeys(sizes, json.loads(args.attach.read_text()))
        plan = [[(size, [(c, args.seconds) for c in client_counts])] for size in sizes]
    else:
        infos = start_stacks(sizes, tmp, cleanup)
        share = args.seconds / args.rounds
        plan = [[(size, [(c, share) for c in client_counts]) for size in sizes] for _ in range(args.rounds)]
    print(f"{args.seconds:g} s per (runs, clients) in {len(plan)} round(s); times in ms (p50 p95)", flush=True)
    warm_up(infos, args.timeout)
    seeders = {size: Seeder(infos[size]) for size in sizes} if not args.attach else None
    shared = Seeder(infos[sizes[0]]) if args.attach else None
    cells = {(size, c): Cell() for size in sizes for c in client_counts}
    seeded: set[int] = set()
    for round_ in plan:
        for size, steps in round_:
            if size not in seeded:
                seeder = shared or seeders[size]  # type: ignore[index]
                try:
                    took = seeder.seed_to(size)
                except (BotoCoreError, ClientError) as exc:
                    raise StackDown(f"seeding {size} runs into the stack's moto failed: {exc}") from exc
                waited = settle(infos[size])
                print(f"  ({size} runs seeded in {took:.1f} s, stack settled in {waited:.1f} s)", flush=True)
                seeded.add(size)
            for clients, seconds in steps:
                measure(cells[(size, clients)], infos[size], clients, seconds, args.timeout)
    print("  runs cli  lifes/s  create p50/p95   get p50/p95   resolve p50/p95  life p50   disc/s  disc p50")
    rates = {key: report(key[0], key[1], cell) for key, cell in cells.items()}
    failures = sum((cell.failures for cell in cells.values()), Counter())
    for message, count in failures.most_common(5):
        print(f"  failed {count}×: {message}")
    compare(sizes, client_counts, rates)


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as cleanup:
        try:
            measure_all(args, Path(tmp), cleanup)
        except StackDown as exc:
            print(f"local_load: nothing measured: {exc}", file=sys.stderr)
            sys.exit(2)


if __name__ == "__main__":
    main()
