"""Print what each function's cold import cost the deployment before its layers shipped bytecode, and costs now.

Before: the layers held sources only, `/opt` is read-only, so every cold start compiled everything the layers hold
(boto3 and botocore too: the dependencies layer ships its own, which shadows the runtime's) and kept nothing; only
the runtime's standard library came compiled. Now: the layers ship the runtime's bytecode (infra/interlude_cdk/bytecode.py).

Each round imports a handler in three fresh interpreters, back to back: (1) with the standard library's bytecode
only (a private PYTHONPYCACHEPREFIX holding just the standard library's caches, PYTHONDONTWRITEBYTECODE=1, so
boto3, every dependency and Interlude compile from source on every import, as they did on Lambda); (2) with every
module's bytecode (the same prefix filled by one untimed import of each target first: what the layers ship now);
(3) `import boto3` from bytecode, the denominator of bench/cold_import.py (what a plain function pays with the
runtime's compiled boto3). CPU time (process time), medians over the rounds of the paired ratios. The handler file
itself compiles in both (the function code asset ships no bytecode: `/var/task` is read-only too, ≤ 1 ms).

This machine's Python (3.11) stands in for the runtime's 3.14: the compile-from-source share differs between the
two versions, so the figures say how much, not exactly what Lambda pays.
Usage: .venv/bin/python bench/bytecode.py [rounds]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import sysconfig
import tempfile
from pathlib import Path

from cold_import import cpu_seconds, handler_paths, probe_env


def stdlib_only(full_cache: Path, into: Path) -> None:
    """Copy the standard library's part of a filled PYTHONPYCACHEPREFIX (it mirrors each source's absolute path)."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    part = full_cache / stdlib.relative_to(stdlib.anchor)
    if not list(part.glob("json/__init__.*.pyc")):
        sys.exit(f"no standard library caches under {part}: the cache prefix is laid out differently")
    # site-packages of a Python installed without a venv sits under the stdlib: never the runtime's.
    shutil.copytree(part, into / part.relative_to(full_cache), ignore=shutil.ignore_patterns("site-packages"))


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    targets = handler_paths()
    with tempfile.TemporaryDirectory(prefix="bytecode-bench-") as scratch:
        full, stdlib = Path(scratch) / "full", Path(scratch) / "stdlib"
        compiled = probe_env(str(full))
        for target in ["boto3", *targets.values()]:
            cpu_seconds(target, compiled)
        stdlib.mkdir()
        stdlib_only(full, stdlib)
        from_source = {**probe_env(str(stdlib)), "PYTHONDONTWRITEBYTECODE": "1"}
        print(
            f"{'function':<12} {'before (ms CPU)':>16} {'now (ms CPU)':>13} {'before ÷ now':>13} "
            f"{'÷ boto3, before':>16} {'÷ boto3, now':>13}   rounds={rounds}; boto3 from bytecode; Python "
            f"{sys.version.split()[0]} standing in for the runtime's 3.14"
        )
        rows = {"import boto3": "boto3", **targets}
        for name, target in rows.items():
            before, now, base = [], [], []
            for _ in range(rounds):
                before.append(cpu_seconds(target, from_source))
                now.append(cpu_seconds(target, compiled))
                base.append(cpu_seconds("boto3", compiled))
            print(
                f"{name:<12} {statistics.median(before) * 1000:>16.0f} {statistics.median(now) * 1000:>13.0f} "
                f"{statistics.median(b / n for b, n in zip(before, now, strict=True)):>12.2f}× "
                f"{statistics.median(b / o for b, o in zip(before, base, strict=True)):>15.2f}× "
                f"{statistics.median(n / o for n, o in zip(now, base, strict=True)):>12.2f}×"
            )
    print(f"load: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
