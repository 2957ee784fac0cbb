"""`make bench`: every row of issue 31's goals table with its figure, its goal and a verdict, and the command that
measured it; then the other figures the project tracks (issue 13's scale-and-cost table).

The lifecycles are measured once (bench/lifecycles.py --json, into a file) and priced and bounded from that one
measurement (bench/cost_per_million.py and bench/ceiling.py with --measured), so the rows agree with each other. Every
other row runs its script as its own process (from the repository root, with this interpreter) and keeps the lines
that carry the figure. A script that fails is reported and the rest still run; the exit status is then 1. Timed
figures carry the load average they were taken at; counted ones (calls, units, instructions) do not depend on it.

--write-docs regenerates the figures docs/scale.md prints, between its `bench:` markers, from this
run's numbers (nothing there is copied by hand). `make bench-all` runs every script in full.
Usage: .venv/bin/python bench/summary.py [--only NAME_PART] [--write-docs] [--no-others]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL_LOAD_ARGS = ["--sizes", "100,5000", "--clients", "1,4,16", "--seconds", "4", "--rounds", "2"]
MEASURED = "{measured}"  # stands for the lifecycles' measurement file in a row's command
RUNTIME_PYTHON = "{runtime_python}"  # stands for the functions' runtime Python (`make runtime-python`), else this one


@dataclass(frozen=True)
class Row:
    name: str
    goal: str
    command: tuple[str, ...]
    # Lines of the output that carry the figure (None: every line).
    keep: str | None = None
    note: str = ""
    # A goals-table row: its verdict is read from the kept lines (met / NOT MET, meets / misses).
    goal_row: bool = False


GOAL_ROWS = (
    Row(
        "$/M, infrastructure only, lifecycles (a) (b) (c) (d)",
        "below Lambda durable functions on each: ≤ 26 / 21 / 17 / 20",
        ("cost_per_million.py", "--measured", MEASURED),
        keep=r"^\s+\$/M, infrastructure only",
        goal_row=True,
    ),
    Row(
        "$/M all-in (logs and traces) at a busy and at a quiet pace",
        "all-in ≤ 1.3 × infrastructure-only, quiet ≤ 1.5 × busy",
        ("cost_per_million.py", "--measured", MEASURED),
        keep=r"^\s+\$/M all-in",
        goal_row=True,
    ),
    Row(
        "WRU per lifecycle (a), with a 2 KB gate text and 2 KB inputs",
        "≤ 20",
        ("cost_per_million.py", "--measured", MEASURED),
        keep=r"^\s+WRU per lifecycle",
        goal_row=True,
    ),
    Row(
        "Lifecycles/s per deployment at default account quotas (paper, from measured per-record CPU and units)",
        "≥ 2,000; no item or partition on the path capping a tenant below 1,000/s",
        ("ceiling.py", "--measured", MEASURED),
        keep=r"^  ceiling \(|^Goal of issue 31",
        goal_row=True,
    ),
    Row(
        "Resolve ÷ one raw conditional put (moto, paired; instructions)",
        "≤ 3×",
        ("resolve_overhead.py", "--instructions", "40"),
        keep=r"resolve ÷ put_item|instructions$|rounds=",
        note="counted under callgrind (load-independent); without valgrind, 150 timed rounds",
        goal_row=True,
    ),
    Row(
        "Cold resolve: CPU from process start to the answer, in a fresh process (import + first request)",
        "≤ 250 ms without SnapStart; with SnapStart primed, the first request after restore ≤ 60 ms of CPU",
        ("cold_resolve.py", "5", "--snapstart", "--python", RUNTIME_PYTHON, "--instructions"),
        note="the API instance on the functions' runtime Python (.venv-runtime) where it is made, else this one, "
        "reaching DynamoDB over TLS as deployed; the timed medians with the load average they were taken at, and the "
        "same cold resolve's instructions counted under callgrind (load-independent); without valgrind, the timed "
        "medians alone",
        goal_row=True,
    ),
)

OTHER_ROWS = (
    Row(
        "Inbox page reads (unfiltered, by workflowId, by kind, narrowly eligible approver)",
        "bounded reads per page, the same at 10, 5,000 and 20,000 pending",
        ("inbox_page_calls.py",),
    ),
    Row(
        "Cold import of each handler ÷ `import boto3` (CPU time, paired runs)",
        "≤ 1.5× each",
        ("cold_import.py", "5"),
    ),
    Row(
        "createRun reads",
        "bounded (a small pointer), the definition cached within its immutability",
        ("calls_per_op.py",),
        keep=r"(?i)create|pointer|bytes|cached",
    ),
    Row(
        "Local stack over HTTP: lifecycles/s at 5,000 existing runs ÷ at 100 (1 / 4 / 16 clients)",
        "within 30 % (ratio ≥ 0.70)",
        ("local_load.py", *LOCAL_LOAD_ARGS),
        note="shortened for the summary: 4 s per (runs, clients) cell in 2 alternating rounds "
        "(the script's defaults: 6 s in 3); run bench/local_load.py alone for the full measurement",
    ),
    Row(
        "Deployed cold import, layers without bytecode (before) and with it (now), each ÷ `import boto3`",
        "the layers ship the runtime's bytecode: no cold start compiles them",
        ("bytecode.py", "3"),
        note="this machine's Python stands in for the runtime's 3.14",
    ),
)


def kept(text: str, pattern: str | None) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    if pattern is None:
        return lines
    matching = [line for line in lines if re.search(pattern, line)]
    return matching or lines  # a script whose wording changed still shows its figure, in full


def verdict(lines: list[str]) -> str:
    text = "\n".join(lines)
    if re.search(r"NOT MET|\bmisses\b", text):
        return "not met"
    if re.search(r"\bmet\b|\bmeets\b", text):
        return "met"
    return "no verdict printed"


def command_of(row: Row, measured: str | None) -> list[str]:
    runtime = ROOT / ".venv-runtime" / "bin" / "python"
    args = [measured if a == MEASURED else a for a in row.command]
    args = [(str(runtime) if runtime.exists() else sys.executable) if a == RUNTIME_PYTHON else a for a in args]
    if row.command[0] == "resolve_overhead.py" and shutil.which("valgrind") is None:
        args = ["resolve_overhead.py", "150"]
    if row.command[0] == "cold_resolve.py" and shutil.which("valgrind") is None:
        args.remove("--instructions")
    return args


def run(row: Row, measured: str | None) -> tuple[bool, list[str], str]:
    args = command_of(row, measured)
    script = ROOT / "bench" / args[0]
    shown = "bench/" + " ".join(args).replace(measured or "\0", "<bench/lifecycles.py --json>").replace(str(ROOT) + os.sep, "")
    if not script.exists():
        return False, [f"bench/{args[0]} is not in this checkout"], shown
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "layers/core/python"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script), *args[1:]], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return False, [f"bench/{args[0]} failed (exit {done.returncode}):", *done.stderr.strip().splitlines()[-8:]], shown
    return True, kept(done.stdout, row.keep), shown


def measure_lifecycles(path: Path) -> tuple[bool, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "layers/core/python"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/lifecycles.py"), "3", "--json"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        return False, done.stderr.strip()[-2000:]
    path.write_text(done.stdout.strip().splitlines()[-1])
    return True, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="run only the rows whose name contains this text")
    parser.add_argument("--write-docs", action="store_true", help="regenerate docs/scale.md's figures")
    parser.add_argument("--no-others", action="store_true", help="issue 31's goals table only")
    args = parser.parse_args()
    rows = [r for r in (*GOAL_ROWS, *(() if args.no_others else OTHER_ROWS)) if args.only.lower() in r.name.lower()]
    failed = 0
    started = time.monotonic()
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-summary-") as scratch:
        measured: str | None = None
        if any(MEASURED in r.command for r in rows):
            path = Path(scratch) / "lifecycles.json"
            t0 = time.monotonic()
            ok, error = measure_lifecycles(path)
            print(f"bench/lifecycles.py 3 --json: the lifecycles measured once ({time.monotonic() - t0:.0f} s)")
            if ok:
                measured = str(path)
            else:
                print(f"    | bench/lifecycles.py failed:\n{error}")
                failed += 1
        section = None
        for number, row in enumerate(rows, 1):
            if row.goal_row != section:
                section = row.goal_row
                print("\n== Issue 31's goals ==" if section else "\n== Other figures (issue 13's scale-and-cost table) ==")
            print(f"\n[{number}] {row.name}\n    goal: {row.goal}", flush=True)
            if row.note:
                print(f"    ({row.note})")
            t0 = time.monotonic()
            if MEASURED in row.command and measured is None:
                ok, lines, shown = False, ["not measured: bench/lifecycles.py failed"], "bench/" + row.command[0]
            else:
                ok, lines, shown = run(row, measured)
            for line in lines:
                print(f"    | {line}")
            outcome = verdict(lines) if ok and row.goal_row else ""
            print(
                f"    source: {shown}  ({time.monotonic() - t0:.0f} s)"
                + (f"  verdict: {outcome}" if outcome else "")
                + ("" if ok else "  NOT MEASURED"),
                flush=True,
            )
            failed += not ok
            results.append({"row": row, "ok": ok, "lines": lines, "command": shown, "verdict": outcome})
        if args.write_docs and measured is not None:
            from _figures import write_docs

            written = write_docs(json.loads(Path(measured).read_text()), [r for r in results if r["row"].goal_row])  # type: ignore[union-attr]
            print(f"\nFigures rewritten from this run: {', '.join(written) or 'none (no bench: markers found)'}")
    print(f"\n{time.monotonic() - started:.0f} s in all; load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"
          + (f"; {failed} row(s) not measured" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
