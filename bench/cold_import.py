"""Print the cold import time of each Lambda entry point (what a cold start pays before the first request).

Each figure is the median of several fresh interpreters importing functions/<name>/handler.py.
Usage: .venv/bin/python bench/cold_import.py [runs]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers" / "core" / "python"))
from interlude import wiring  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import importlib.util, os, sys, time
os.environ.setdefault("TABLE_NAME", "bench")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(time.perf_counter() - t0)
"""


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"{'function':<12} median import (ms)   min (ms)   runs={runs}")
    for fn in wiring.FUNCTIONS:
        path = ROOT / "functions" / fn.name / (fn.handler.rpartition(".")[0] + ".py")
        samples = []
        for _ in range(runs):
            out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, check=True)
            samples.append(float(out.stdout.strip().splitlines()[-1]) * 1000)
        print(f"{fn.name:<12} {statistics.median(samples):>10.0f}            {min(samples):>6.0f}")


if __name__ == "__main__":
    main()
