"""`make bench`: every figure of the scale-and-cost table (issue 13) next to its goal, from the scripts that measure it.

Runs each script as its own process (from the repository root, with this interpreter), keeps the lines that carry
the figure, and prints them under the row's name and goal, with how long the script took. A script this checkout
does not have, or one that fails, is reported as such and the rest still run; the exit status is then 1.
`make bench-all` runs every script in full.

The local-stack row runs bench/local_load.py with shorter cells than its defaults (the same sizes, 100 and 5,000
existing runs, and 1 / 4 / 16 clients), so the whole summary stays within a few minutes; the row says so.
Usage: .venv/bin/python bench/summary.py [--only NAME_PART]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL_LOAD_ARGS = ["--sizes", "100,5000", "--clients", "1,4,16", "--seconds", "4", "--rounds", "2"]


@dataclass(frozen=True)
class Row:
    name: str
    goal: str
    # A script under bench/ and its arguments; or a document under docs/ whose computed lines are the figure.
    command: tuple[str, ...] = ()
    document: str = ""
    # Lines of the output that carry the figure (None: every line).
    keep: str | None = None
    note: str = ""


ROWS = (
    Row(
        "Per-tenant and per-region ceiling of the index keys (on paper: the partition math)",
        "≥ 5,000 lifecycles/s per tenant, ≥ 50,000 per region, written down with the partition math",
        document="docs/scale.md",
        keep=r"(lifecycles/s|lifecycles per second).*(per tenant|per region)|(per tenant|per region).*lifecycles",
    ),
    Row(
        "Inbox page reads (unfiltered, by workflowId, by kind, narrowly eligible approver)",
        "bounded reads per page, the same at 10, 5,000 and 20,000 pending",
        command=("inbox_page_calls.py",),
    ),
    Row(
        "$ per million approval lifecycles, every write counted; Step Functions beside it",
        "≤ $8.00",
        command=("cost_per_million.py",),
        keep=r"total|Step Functions|Standard|Express|goal|per million|would take",
    ),
    Row(
        "In-process resolve ÷ one raw conditional put_item, same moto table",
        "≤ 3×",
        command=("resolve_overhead.py", "150"),
    ),
    Row(
        "Cold import of each handler ÷ `import boto3` (CPU time, paired runs)",
        "≤ 1.5× each",
        command=("cold_import.py", "5"),
    ),
    Row(
        "createRun reads",
        "bounded (a small pointer), the definition cached within its immutability",
        command=("calls_per_op.py",),
        keep=r"(?i)create|pointer|bytes",
    ),
    Row(
        "Local stack over HTTP: lifecycles/s at 5,000 existing runs ÷ at 100 (1 / 4 / 16 clients)",
        "within 30 % (ratio ≥ 0.70)",
        command=("local_load.py", *LOCAL_LOAD_ARGS),
        note="shortened for the summary: 4 s per (runs, clients) cell in 2 alternating rounds "
        "(the script's defaults: 6 s in 3); run bench/local_load.py alone for the full measurement",
    ),
    Row(
        "Deployed cold import, layers without bytecode (before) and with it (now), each ÷ `import boto3`",
        "the layers ship the runtime's bytecode: no cold start compiles them",
        command=("bytecode.py", "3"),
        note="this machine's Python stands in for the runtime's 3.14",
    ),
)


def kept(text: str, pattern: str | None) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    if pattern is None:
        return lines
    matching = [line for line in lines if re.search(pattern, line)]
    return matching or lines  # a script whose wording changed still shows its figure, in full


def run(row: Row) -> tuple[bool, list[str]]:
    if row.document:
        path = ROOT / row.document
        if not path.exists():
            return False, [f"{row.document} is not in this checkout"]
        return True, [line.strip() for line in kept(path.read_text(), row.keep)]
    script = ROOT / "bench" / row.command[0]
    if not script.exists():
        return False, [f"bench/{row.command[0]} is not in this checkout"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "layers/core/python"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(script), *row.command[1:]], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        return False, [f"bench/{row.command[0]} failed (exit {done.returncode}):", *done.stderr.strip().splitlines()[-8:]]
    return True, kept(done.stdout, row.keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="run only the rows whose name contains this text")
    args = parser.parse_args()
    failed = 0
    started = time.monotonic()
    for number, row in enumerate((r for r in ROWS if args.only.lower() in r.name.lower()), 1):
        print(f"\n[{number}] {row.name}\n    goal: {row.goal}", flush=True)
        if row.note:
            print(f"    ({row.note})")
        t0 = time.monotonic()
        ok, lines = run(row)
        source = row.document or "bench/" + " ".join(row.command)
        for line in lines:
            print(f"    | {line}")
        print(f"    source: {source}  ({time.monotonic() - t0:.0f} s){'' if ok else '  NOT MEASURED'}", flush=True)
        failed += not ok
    print(f"\n{time.monotonic() - started:.0f} s in all" + (f"; {failed} row(s) not measured" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
