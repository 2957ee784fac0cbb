"""What the local stack (`interlude dev`) costs while idle, and to dispatch what an existing table's runs left behind.

Starts the stack as a subprocess in a process group of its own (its Lambda instances included), completes two
lifecycles to warm it, waits until it is quiet, then prints the CPU seconds the whole group spends over --idle
seconds with nothing asked; then seeds --runs existing runs as bench/local_load.py does (their event items reach the
stream all at once) and prints how long until every pump is quiet (`quiesce`) and the CPU spent meanwhile, per event
item seeded, then the idle CPU again beside those runs (the TTL sweep's and the audit checkpoints' ticks, every 60 s,
read a table that size). The machine's load average is printed beside each figure: the seconds depend on it.

    python bench/local_settle.py [--runs 5000] [--idle 60]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import _bench  # noqa: F401  (puts the repo root on sys.path for tests.support)
from local_load import SETTLE_LIMIT_S, Client, Seeder, lifecycle

from tests.support.local_stack import Api, LocalStackProcess, quiesce

# Event items a seeded run leaves on average (bench/local_load.py's seeds, half waiting at the gate and half resolved:
# ≈ 7,400 for 5,000 runs, ADR 0038).
EVENT_ITEMS_PER_RUN = 1.48


def group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of every living process of the group `pgid`."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def idle(pgid: int, seconds: float, label: str) -> None:
    before = group_cpu_s(pgid)
    time.sleep(seconds)
    print(f"idle, {label}: {group_cpu_s(pgid) - before:.2f} CPU s over {seconds:g} s (load {load()})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5000, help="existing runs seeded")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds the idle stack is watched, each time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stack = LocalStackProcess(Path(tmp), own_group=True)
        try:
            info = stack.wait(timeout_s=300.0)
            client = Client(Api.of(info), 180.0)
            for _ in range(2):
                lifecycle(client, defaultdict(list))
            quiesce(info, SETTLE_LIMIT_S)
            idle(stack.proc.pid, args.idle, "a new stack")
            took = Seeder(info).seed_to(args.runs)
            before, started = group_cpu_s(stack.proc.pid), time.monotonic()
            quiesce(info, SETTLE_LIMIT_S)
            waited, spent = time.monotonic() - started, group_cpu_s(stack.proc.pid) - before
            items = args.runs * EVENT_ITEMS_PER_RUN
            print(
                f"{args.runs} runs seeded in {took:.0f} s; quiet {waited:.0f} s later, {spent:.1f} CPU s "
                f"(≈ {spent / items * 1000:.1f} ms per event item) (load {load()})"
            )
            idle(stack.proc.pid, args.idle, f"beside {args.runs} runs")
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
