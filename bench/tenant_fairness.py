"""One tenant's churn against another tenant's webhook deliveries, on the local stack (issue 26, S5).

Starts the local stack (as `make dev` does, the loopback switch on) and two tenants:

* **quiet**: one webhook subscription to `interrupt.requested` on a receiver on 127.0.0.1, and a run of a one-gate
  workflow started every `--pace` seconds. Its latency is the time from `POST /runs` answering to the receiver
  holding the delivery.
* **churn**: open runs limited to 60 (its tenant settings), a workflow that starts two sub-workflows of itself
  (so each run fans out until the depth limit or the quota stops it), and a driver that starts a new root whenever
  the quota allows. With `--churn-subscribes` it also subscribes to every run event it makes (its own deliveries
  then share the callbacks queue with the quiet tenant's).

It prints the quiet tenant's delivery latency (p50, p95, max, count) alone, then under churn, and how many runs the
churn tenant started meanwhile. Nothing is asserted: this is a measurement (docs/scale.md, "Fairness across
tenants").

    python bench/tenant_fairness.py [--seconds 40] [--pace 1.0] [--churn-subscribes]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import _bench  # noqa: F401  (puts the repo root on sys.path for tests.support)
import requests

from tests.support.local_stack import Api, running_stack, tenant_admin_key
from tests.support.receiver import Receiver

GATE = {"nodes": [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Go?"}}], "edges": []}
SPAWN_ID = "spawn"
SPAWN = {
    "nodes": [
        {"id": "left", "typeId": "core.subWorkflow", "config": {"workflowId": SPAWN_ID}},
        {"id": "right", "typeId": "core.subWorkflow", "config": {"workflowId": SPAWN_ID}},
    ],
    "edges": [],
}
CHURN_OPEN_RUNS = 60
CHURN_EVENTS = ["run.started", "run.completed", "run.failed", "node.started", "node.completed", "node.failed"]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=40.0, help="time measured alone, then under churn")
    parser.add_argument("--pace", type=float, default=1.0, help="seconds between the quiet tenant's runs")
    parser.add_argument("--churn-subscribes", action="store_true", help="the churn tenant subscribes to its events")
    return parser.parse_args()


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def line(name: str, samples: list[float], missing: int) -> str:
    return (
        f"{name:<28} p50 {percentile(samples, 0.5):6.2f} s   p95 {percentile(samples, 0.95):6.2f} s   "
        f"max {max(samples, default=float('nan')):6.2f} s   deliveries {len(samples)}"
        + (f"   not delivered within the window: {missing}" if missing else "")
    )


class Quiet:
    """The quiet tenant: a run every `pace` seconds, each one's delivery timed."""

    def __init__(self, api: Api, key: str, receiver: Receiver) -> None:
        self.api, self.key, self.receiver = api, key, receiver
        self.started: dict[str, float] = {}

    def measure(self, seconds: float, pace: float) -> tuple[list[float], int]:
        self.started.clear()
        seen = len(self.receiver.hits)
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            got = self.api.call("POST", "/runs", {"workflowId": "gate"}, key=self.key)
            if got.status_code == 201:
                self.started[got.json()["runId"]] = time.monotonic()
            time.sleep(pace)
        # Deliveries still on their way get a grace period as long as the window.
        grace = time.monotonic() + max(seconds, 30.0)
        while time.monotonic() < grace and len(self.arrivals(seen)) < len(self.started):
            time.sleep(0.1)
        arrivals = self.arrivals(seen)
        latencies = [arrivals[run] - at for run, at in self.started.items() if run in arrivals]
        return latencies, len(self.started) - len(latencies)

    def arrivals(self, seen: int) -> dict[str, float]:
        return {json.loads(hit.body)["runId"]: hit.at for hit in self.receiver.hits[seen:]}


class Churn:
    """The churn tenant: starts a root whenever its open-runs quota allows, until stopped."""

    def __init__(self, api: Api, key: str) -> None:
        self.api, self.key = api, key
        self.roots = 0
        self.refused = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        session = requests.Session()
        while not self.stop.is_set():
            got = session.post(
                self.api.base_url + "/runs",
                json={"workflowId": SPAWN_ID},
                headers={"Authorization": f"Bearer {self.key}"},
                timeout=60,
            )
            if got.status_code == 201:
                self.roots += 1
            else:
                self.refused += 1
                self.stop.wait(0.2)


def main() -> None:
    args = parse_args()
    env = {"INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1", "INTERLUDE_CALLBACK_BACKOFF_BASE_S": "0"}
    receiver = TimedReceiver().start()
    churn_receiver = TimedReceiver().start()
    with tempfile.TemporaryDirectory() as tmp, running_stack(Path(tmp), env) as info:
        api = Api.of(info)
        quiet_key = tenant_admin_key(info, "quiet")
        churn_key = tenant_admin_key(info, "churn")
        assert api.put_workflow("gate", GATE, quiet_key).status_code == 201
        assert api.put_workflow(SPAWN_ID, SPAWN, churn_key).status_code == 201
        settings = {"limits": {"openRuns": CHURN_OPEN_RUNS}}
        assert api.call("PUT", "/tenant/settings", settings, key=churn_key).ok
        hook = {"url": receiver.url("/quiet"), "events": ["interrupt.requested"]}
        assert api.call("POST", "/webhooks", hook, key=quiet_key).status_code == 201
        if args.churn_subscribes:
            churn_hook = {"url": churn_receiver.url("/churn"), "events": CHURN_EVENTS}
            assert api.call("POST", "/webhooks", churn_hook, key=churn_key).status_code == 201

        quiet = Quiet(api, quiet_key, receiver)
        quiet.measure(5.0, args.pace)  # warm: every instance has served once
        alone = quiet.measure(args.seconds, args.pace)
        churn = Churn(api, churn_key)
        churn.thread.start()
        time.sleep(5.0)  # the fan-out reaches its quota
        loaded = quiet.measure(args.seconds, args.pace)
        churn.stop.set()
        churn.thread.join(timeout=120)
        print(f"quiet tenant's webhook delivery latency (POST /runs answered -> delivery received), pace {args.pace} s")
        print(line("alone", *alone))
        print(line("under the churn tenant", *loaded))
        print(
            f"churn tenant: {churn.roots} roots started ({churn.refused} refused at its quota of {CHURN_OPEN_RUNS} "
            f"open runs), {len(churn_receiver.hits)} deliveries to its own subscriber"
        )
    receiver.close()
    churn_receiver.close()


class TimedReceiver(Receiver):
    """The tests' receiver, stamping each hit with the moment it arrived."""

    def start(self) -> TimedReceiver:
        super().start()
        original = self.hits

        class Stamped(list[Any]):
            def append(self, hit: Any) -> None:
                hit.at = time.monotonic()
                super().append(hit)

        self.hits = Stamped(original)
        return self


if __name__ == "__main__":
    main()
