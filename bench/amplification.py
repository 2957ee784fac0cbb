"""What a template-amplifying workflow costs now (issue 11, finding 1): time and peak memory of starting a chain of
transforms that each repeat the previous output ten times, and of evaluating a 990-term condition.

Before the budgets, 7 levels hung past 120 s and grew the process past 10 GB; each level is now stopped when its
output would pass 64 KiB. Prints one line per case.
"""

from __future__ import annotations

import time
import tracemalloc

from _bench import offline_aws  # noqa: F401 - puts the repo root on sys.path

from interlude.composition import compose
from interlude.engine import run as engine
from interlude.faces.modulex.expressions import compile_expression, evaluate
from tests.support.engine import start, wf_of


def chain(levels: int):
    nodes = [{"id": "t0", "typeId": "core.transform", "config": {"outputs": {"v": "{{inputs.seed}}" * 10}}}]
    nodes += [
        {"id": f"t{i}", "typeId": "core.transform", "config": {"outputs": {"v": f"{{{{t{i - 1}.v}}}}" * 10}}}
        for i in range(1, levels)
    ]
    edges = [{"sourceNodeId": f"t{i - 1}", "targetNodeId": f"t{i}"} for i in range(1, levels)]
    return wf_of(nodes, edges, [{"name": "seed", "type": "string"}])


def measure(label: str, work) -> None:
    tracemalloc.start()
    began = time.perf_counter()
    outcome = work()
    elapsed = time.perf_counter() - began
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label}: {elapsed * 1000:.1f} ms, peak {peak / 1_048_576:.2f} MiB, {outcome}")


def main() -> None:
    compose()
    for levels in (5, 7, 12):
        wf = chain(levels)
        assert engine.check_config(wf) == []

        def run(wf=wf) -> str:
            t = start(wf, inputs={"seed": "s" * 100})
            return f"run {t.state.status} at {t.state.failedNodeId} ({(t.state.error or {}).get('code')})"

        measure(f"{levels}-level tenfold chain", run)
    condition = compile_expression("+".join(["1"] * 990) + " == 990")
    measure("990-term condition", lambda: f"evaluates to {evaluate(condition, {})}")


if __name__ == "__main__":
    main()
