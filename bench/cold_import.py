"""Print each Lambda entry point's cold import cost as a ratio to `import boto3` (what any Python function on AWS pays).

Paired runs: each round imports functions/<name>/handler.py in one fresh interpreter and `boto3` in another, back to
back, and takes the ratio of their CPU times (process time, so a loaded machine's waiting is not counted). The figure
is the median ratio over the rounds. Goal: ≤ 1.5× each.
Usage: .venv/bin/python bench/cold_import.py [rounds]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers" / "core" / "python"))
from interlude import wiring  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.5
PROBE = """
import importlib.util, os, sys, time
os.environ.setdefault("TABLE_NAME", "bench")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
t0 = time.process_time()
if sys.argv[1] == "boto3":
    import boto3
else:
    spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
print(time.process_time() - t0)
"""


def cpu_seconds(target: str) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE, target], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"{'function':<12} {'import (ms CPU)':>16} {'boto3 (ms CPU)':>15} {'ratio':>7}   goal ≤ {GOAL}×, rounds={rounds}")
    for fn in wiring.FUNCTIONS:
        path = str(ROOT / "functions" / fn.name / (fn.handler.rpartition(".")[0] + ".py"))
        own, base, ratios = [], [], []
        for _ in range(rounds):
            handler, boto = cpu_seconds(path), cpu_seconds("boto3")
            own.append(handler)
            base.append(boto)
            ratios.append(handler / boto)
        ratio = statistics.median(ratios)
        verdict = "meets" if ratio <= GOAL else "misses"
        print(
            f"{fn.name:<12} {statistics.median(own) * 1000:>16.0f} {statistics.median(base) * 1000:>15.0f} "
            f"{ratio:>6.2f}×   {verdict}"
        )


if __name__ == "__main__":
    main()
