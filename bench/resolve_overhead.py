"""Print what an in-process resolve costs relative to one raw conditional `put_item` on the same moto table.

Paired runs: each round creates a fresh waiting run (untimed), then times the real resolve (app/decisions.py) (load the
run, decide, commit the transaction) and one raw `put_item` with `attribute_not_exists(pk)` on the same table,
back to back, so machine load hits both alike, in CPU time (the process's own, so a loaded machine's waiting is not
counted; moto runs in-process, so its work is in it). The figures are medians of the per-round ratios: the whole resolve
(its read and its transaction included, as moto executes them), and Interlude's own time in it (the resolve less the
time spent inside the DynamoDB client), each ÷ the single write any approval service must make. Goal: ≤ 3×.
With --instructions [rounds] (default 40), the same rounds run once under valgrind's callgrind and the figure is
instructions executed instead of CPU time (load-independent; a timed ratio moves by ±0.2 between two runs on the
shared machine): each resolve runs inside `itertools.starmap` and each put inside `itertools.filterfalse`, whose
inclusive counts callgrind_annotate prints. It needs valgrind (with callgrind_annotate) on the PATH and an
interpreter built with symbols. With --profile FILE, callgrind collects inside the resolves alone and keeps its profile
there (per C function; `callgrind_annotate --inclusive=yes FILE`). With --split, each side's figure is parted into
botocore's handling of its calls, moto's, and the rest (Interlude's own work), each call run inside a C function of its
own (itertools' `takewhile`/`accumulate` for the client, `dropwhile`/`groupby` for moto's handler of it), and the bench
prints what the goal leaves the resolve's own work once its calls are paid (the wrappers add a few thousand instructions
a call to both sides). With --functions [rounds], on an interpreter that gives each Python function a machine-code
trampoline of its own (Python ≥ 3.12, `sys.activate_stack_trampoline`: `.venv-runtime/bin/python`, `make
runtime-python`), callgrind counts the resolves alone (their runs created first) and the bench prints each Python
function's inclusive instructions per resolve, named from the map the interpreter writes (/tmp/perf-PID.map): where
Interlude's own part goes, function by function (docs/adr/0162).
Usage: .venv/bin/python bench/resolve_overhead.py [rounds] | --instructions [rounds] [--profile FILE | --split]
       .venv-runtime/bin/python bench/resolve_overhead.py --functions [rounds]
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from _bench import admin_with_approval, offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

from moto import mock_aws  # noqa: E402

from interlude.app import limits as app_limits  # noqa: E402
from interlude.composition import Services  # noqa: E402
from interlude.domain.models.requests import CreateRunRequest  # noqa: E402
from interlude.local import moto_patches  # noqa: E402
from interlude.store.facade import Store  # noqa: E402
from interlude.store.provisioning import create_tables  # noqa: E402
from interlude.store.table import dynamodb_client  # noqa: E402

GOAL = 3.0


class ClientClock:
    """Seconds spent inside the watched client's calls (serialising, moto executing, parsing the answer)."""

    def __init__(self, client: object) -> None:
        self.spent = 0.0
        self._started = 0.0
        # The calls made since the last reset, named with the items a transaction wrote: "TransactWriteItems(6)".
        self.calls: list[str] = []
        events = client.meta.events  # type: ignore[attr-defined]
        events.register_first("provide-client-params.dynamodb", self._start)
        events.register_last("after-call.dynamodb", self._stop)

    def reset(self) -> None:
        self.spent = 0.0
        self.calls = []

    def _start(self, params: dict[str, object], model: object, **_: object) -> None:
        items = params.get("TransactItems")
        name = model.name  # type: ignore[attr-defined]
        self.calls.append(f"{name}({len(items)} items)" if isinstance(items, list) else name)
        self._started = time.process_time()

    def _stop(self, **_: object) -> None:
        self.spent += time.process_time() - self._started


@dataclass(frozen=True)
class World:
    """One moto table with an approval workflow, and the three things a round does on it."""

    client: Any
    services: Services
    principal: Any
    workflow_id: str

    def waiting_run(self) -> str:
        body = {"workflowId": self.workflow_id}
        return self.services.lifecycle.create_run(self.principal, CreateRunRequest.model_validate(body)).runId

    def resolve(self, run_id: str) -> None:
        self.services.decisions.resolve_interrupt(self.principal, run_id, "gate", {"action": "accept"})

    def put(self, i: int) -> bool:
        """The single write any approval service must make: one conditional put_item."""
        self.client.put_item(
            TableName="bench",
            Item={"pk": {"S": f"RAW#{i}"}, "sk": {"S": "RAW"}, "decision": {"S": "accept"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
        return True


@contextmanager
def world() -> Iterator[World]:
    moto_patches.apply()  # as the local stack and the suite run moto: a transaction costs what it touches
    # The tenant's limits (a resolve that ends its run reads its retentionDays with them) are read again once per cache
    # period per instance: held for the run, as bench/lifecycles.py holds them, so a slow machine's clock puts no
    # re-read in a measured resolve. Under callgrind a round runs ≈ 50× slower than natively, where 200 rounds take a
    # few seconds: a 10 s cache expired inside 1–2 of 40 counted resolves on a quiet machine and more on a loaded one,
    # each adding a GetItem (≈ 5 M instructions) to the figure. Natively each resolve makes its GetItem and its
    # TransactWriteItems and nothing else, which the counted rounds now check.
    app_limits.LIMITS_CACHE_SECONDS = 3600.0
    with mock_aws():
        client = dynamodb_client()  # configured as the functions' (the resolve's and the put's alike)
        create_tables(client, "bench")
        services = Services(Store("bench", "bench-entries", client))
        principal, _bearer, workflow_id = admin_with_approval(services)
        yield World(client, services, principal, workflow_id)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with world() as bench:
        clock = ClientClock(bench.client)
        ratios, own_ratios, resolves, puts = [], [], [], []
        calls: list[str] = []
        for i in range(rounds + 10):  # the first 10 warm the caches and the interpreter
            run_id = bench.waiting_run()
            clock.reset()
            t0 = time.process_time()
            bench.resolve(run_id)
            t1 = time.process_time()
            in_client, calls = clock.spent, list(clock.calls)
            bench.put(i)
            t2 = time.process_time()
            if i >= 10:
                resolves.append(t1 - t0)
                puts.append(t2 - t1)
                ratios.append((t1 - t0) / (t2 - t1))
                own_ratios.append((t1 - t0 - in_client) / (t2 - t1))
    ratio = statistics.median(ratios)
    print(f"rounds={rounds} (paired, moto in-process)")
    print(f"  resolve (in-process)            median {statistics.median(resolves) * 1000:7.2f} ms")
    print(f"  raw conditional put_item        median {statistics.median(puts) * 1000:7.2f} ms")
    verdict = "meets" if ratio <= GOAL else "misses"
    print(f"  resolve ÷ put_item              {ratio:5.2f}×   (goal ≤ {GOAL:.0f}×: {verdict})")
    own = statistics.median(own_ratios)
    print(f"  Interlude's own time ÷ put_item {own:5.2f}×   (the rest is moto executing the resolve's calls:")
    print(f"                                          {', '.join(calls)}; a floor the design's calls set)")


# While a counted round runs: which side's calls go through which C functions (--split), else None.
_SPLIT_SIDE: dict[str, str | None] = {"side": None}
# The C functions a side's client calls and moto's handling of them run inside, and what callgrind_annotate names them.
# None of them runs elsewhere inside a resolve or a put (docs/adr/0140), and callgrind collects inside those alone.
_SPLIT_WRAPPERS = {"resolve": ("takewhile_next", "dropwhile_next"), "put": ("accumulate_next", "groupby_next")}


def _split_calls() -> None:
    """Run every client call of a counted side inside itertools' `takewhile` (the resolve's) or `accumulate` (the put's),
    and moto's handling of it inside `dropwhile` or `groupby`, so that callgrind's inclusive counts of those C functions
    part each side."""
    from botocore.client import BaseClient
    from moto.core.botocore_stubber import BotocoreStubber

    def through(run: Any, side: str, client: bool) -> Any:
        answer: list[Any] = []

        def keep(_: object) -> None:  # falsy: each C function below calls it once and stops there
            answer.append(run())

        if side == "resolve":
            list(itertools.takewhile(keep, (0,))) if client else list(itertools.dropwhile(keep, (0,)))
        elif client:
            list(itertools.accumulate((0, 0), lambda _, __: keep(0)))
        else:
            list(itertools.groupby((0,), key=keep))
        return answer[0]

    make_api_call, handle = BaseClient._make_api_call, BotocoreStubber.__call__

    def api_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        side = _SPLIT_SIDE["side"]
        run = lambda: make_api_call(self, *args, **kwargs)  # noqa: E731
        return run() if side is None else through(run, side, True)

    def moto_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        side = _SPLIT_SIDE["side"]
        run = lambda: handle(self, *args, **kwargs)  # noqa: E731
        return run() if side is None else through(run, side, False)

    BaseClient._make_api_call = api_call
    BotocoreStubber.__call__ = moto_call


def counted_rounds(rounds: int, split: bool = False) -> None:
    """The rounds main() times, each resolve inside itertools.starmap and each put inside itertools.filterfalse (run
    under callgrind by counted()); `split`: their calls parted as _split_calls says."""
    if split:
        _split_calls()
    with world() as bench:
        # Each call's name, by the lightest handler (the put's one call runs it too).
        calls: list[str] = []
        bench.client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
        patterns: Counter[str] = Counter()
        for i in range(rounds + 10):
            run_id = bench.waiting_run()
            if i < 10:  # warming, uncounted, as main()'s first 10
                bench.resolve(run_id)
                bench.put(i)
                continue
            calls.clear()
            _SPLIT_SIDE["side"] = "resolve" if split else None
            list(itertools.starmap(bench.resolve, [(run_id,)]))
            patterns[", ".join(calls)] += 1
            _SPLIT_SIDE["side"] = "put" if split else None
            list(itertools.filterfalse(bench.put, [i]))
            _SPLIT_SIDE["side"] = None
    print("; ".join(f"{pattern} ×{times}" for pattern, times in patterns.items()))


def trampolined_rounds(rounds: int) -> None:
    """The counted resolves alone, every Python function through its own trampoline (functions() counts them): their
    waiting runs are created and the interpreter warmed before the trampolines are turned on, so nothing else runs
    through one."""
    with world() as bench:
        for _ in range(10):
            bench.resolve(bench.waiting_run())
        run_ids = [bench.waiting_run() for _ in range(rounds)]
        sys.activate_stack_trampoline("perf")  # type: ignore[attr-defined]  # Python ≥ 3.12
        for run_id in run_ids:
            bench.resolve(run_id)
        sys.deactivate_stack_trampoline()  # type: ignore[attr-defined]


def functions(rounds: int, shown: int = 60) -> None:
    """Each Python function's instructions per resolve, inclusive of what it calls (a recursive one's outermost
    calls): the `shown` largest, and Interlude's own functions (the store's, the engine's, the services') all."""
    if not hasattr(sys, "activate_stack_trampoline"):
        sys.exit("--functions needs Python ≥ 3.12 (sys.activate_stack_trampoline): .venv-runtime/bin/python")
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        sys.exit("--functions needs valgrind and callgrind_annotate on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__]
        counting = subprocess.Popen([*command, "--trampolined-rounds", str(rounds)], env={**os.environ, "PYTHONHASHSEED": "0"})
        if counting.wait() != 0:
            sys.exit(f"the counted run failed ({counting.returncode})")
        perf_map = f"/tmp/perf-{counting.pid}.map"  # the interpreter's own: valgrind runs it in the same process
        try:
            with open(perf_map) as names:
                named = {int(line.split(" ", 2)[0], 16): line.split(" ", 2)[2].strip() for line in names}
        finally:
            os.remove(perf_map)
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out], check=True, capture_output=True, text=True
        ).stdout
    rows = []
    for found in re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\?\?\?:0x([0-9a-f]+) ", annotated, re.MULTILINE):
        name = named.get(int(found.group(2), 16))
        if name is not None:
            rows.append((int(found.group(1).replace(",", "")) / rounds, name.removeprefix("py::")))
    rows.sort(reverse=True)
    print(f"rounds={rounds}: M instructions per resolve, inclusive, by Python function (callgrind, trampolines)")
    for rank, (count, name) in enumerate(rows):
        where, _, path = name.partition(":")
        ours = re.search(r"[/\\](interlude[/\\](?!local[/\\]).*)$", path)
        if rank < shown or ours:
            short = ours.group(1) if ours else re.split(r"site-packages[/\\]|lib[/\\]python3\.\d+[/\\]", path)[-1]
            print(f"  {count / 1e6:8.3f}  {where}  ({short})")


def counted(rounds: int, profile: str | None = None, split: bool = False) -> None:
    """`profile`: where to keep the resolves' own profile (callgrind collecting inside them alone), for
    `callgrind_annotate --inclusive=yes`; the figures are the same."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        sys.exit("--instructions needs valgrind and callgrind_annotate on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        out = profile or os.path.join(tmp, "callgrind.out")
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__]
        if profile:
            command.insert(2, "--toggle-collect=starmap_next")
        elif split:  # the rounds' resolves and puts alone: their C wrappers run nowhere else in them
            command[2:2] = ["--toggle-collect=starmap_next", "--toggle-collect=filterfalse_next"]
        calls = subprocess.run(
            [*command, "--counted-rounds", str(rounds), *(["--split"] if split else [])],
            check=True,
            capture_output=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            text=True,
        ).stdout.strip()
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    totals: dict[str, int] = {}
    names = ("starmap_next",) if profile else ("starmap_next", "filterfalse_next")
    for name in names + (sum(_SPLIT_WRAPPERS.values(), ()) if split else ()):
        found = re.search(r"^\s*([\d,]+) .*:" + name + r" ", annotated, re.MULTILINE)
        if found is None:
            sys.exit(f"callgrind_annotate names no {name}: an interpreter without symbols?")
        totals[name] = int(found.group(1).replace(",", ""))
    if profile:  # the puts were not collected: their figure is a plain run's
        print(
            f"rounds={rounds}: the resolves' profile is in {profile} ({totals['starmap_next'] / rounds / 1e6:.2f} M each)"
        )
        print(f"  calls per resolve               {calls}")
        return
    resolve, put = totals["starmap_next"] / rounds, totals["filterfalse_next"] / rounds
    ratio = resolve / put
    print(f"rounds={rounds} (counted under callgrind, moto in-process)")
    print(f"  resolve (in-process)            {resolve / 1e6:7.2f} M instructions")
    print(f"  raw conditional put_item        {put / 1e6:7.2f} M instructions")
    verdict = "meets" if ratio <= GOAL else "misses"
    print(f"  resolve ÷ put_item              {ratio:5.2f}×   (goal ≤ {GOAL:.0f}×: {verdict}; instructions, not time)")
    print(f"  calls per resolve               {calls}")
    if split:
        print_split(rounds, totals)


def print_split(rounds: int, totals: dict[str, int]) -> None:
    """Each side's instructions parted: botocore's handling of its calls, moto's (the test double's), and the rest
    (Interlude's own work, for the resolve); and what the goal leaves Interlude's own work once the calls are paid."""
    parts: dict[str, tuple[float, float, float]] = {}
    for side, total in (("resolve", "starmap_next"), ("put", "filterfalse_next")):
        client, moto = (totals[name] / rounds for name in _SPLIT_WRAPPERS[side])
        parts[side] = (client - moto, moto, totals[total] / rounds - client)
    print("  parted (--split; M instructions)   botocore      moto      the rest")
    for side, (botocore, moto, rest) in parts.items():
        print(f"    {side:<31}{botocore / 1e6:9.2f}{moto / 1e6:10.2f}{rest / 1e6:12.2f}")
    put = sum(parts["put"])
    left = GOAL * put - parts["resolve"][0] - parts["resolve"][1]
    print(
        f"  the goal leaves the resolve's own work {left / 1e6:.2f} M once its calls are paid ({GOAL:.0f} × the put less them)"
    )


if __name__ == "__main__":
    if "--trampolined-rounds" in sys.argv:
        trampolined_rounds(int(sys.argv[sys.argv.index("--trampolined-rounds") + 1]))
    elif "--functions" in sys.argv:
        rest = sys.argv[sys.argv.index("--functions") + 1 :]
        functions(int(rest[0]) if rest and rest[0].isdigit() else 20)
    elif "--counted-rounds" in sys.argv:
        counted_rounds(int(sys.argv[sys.argv.index("--counted-rounds") + 1]), "--split" in sys.argv)
    elif "--instructions" in sys.argv:
        rest = sys.argv[sys.argv.index("--instructions") + 1 :]
        kept = rest[rest.index("--profile") + 1] if "--profile" in rest else None
        counted(int(rest[0]) if rest and rest[0].isdigit() else 40, kept, "--split" in rest)
    else:
        main()
