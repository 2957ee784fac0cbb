"""Print what recording each step's bound inputs on its node.started event (engine/nodetypes.recorded_inputs) adds to
the write units of a lifecycle, for steps that declare inputs (a step that declares none records nothing).

A lifecycle here is an approval run: created (the transition that starts the gate and writes its node.started), then
resolved. Each transition writes its events as one batch item (store/run_items.event_batch_put: compact JSON,
deflated) inside the commit's TransactWriteItems, which DynamoDB bills at 2 write units per started KB of the item.
The item is built by the store's own code from the engine's own transition and sized as DynamoDB sizes items
(store/attributes.billed_size), once as written and once with the recorded inputs taken out of node.started: the
difference is the cost. The units of one batch step by 2 where its size crosses a KB, so a step's extra bytes cost
either nothing or 2 units in one run; `expected` is their average over runs, 2 units per KB of extra bytes. Counted
figures: they do not depend on the machine.

Usage: .venv/bin/python bench/step_inputs.py [--json]
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from _bench import english_text, offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries")

from _deployment import item_size  # noqa: E402

from interlude.domain.models.workflow import WorkflowDefinition  # noqa: E402
from interlude.engine import run as engine  # noqa: E402
from interlude.engine.events import to_docs  # noqa: E402
from interlude.engine.nodetypes import STEP_INPUTS, STEP_INPUTS_DIGEST  # noqa: E402
from interlude.rules.interrupts.decide import Resolver, decide  # noqa: E402
from interlude.store import run_items  # noqa: E402
from tests.support.engine import ALICE, NOW, new_state  # noqa: E402

TWO_KB = english_text(2030, 2000)  # 2,030 bytes of prose (deflated ≈ 840 B)
ALMOST_ONE_KIB = TWO_KB[:950]

# (name, the gate's declared inputs, the run's inputs)
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("no declared inputs", {}, {"orderId": "o-1", "amount": 2150, "reason": "damaged"}),
    (
        "3 small inputs (order, amount, reason)",
        {k: {"type": "variable", "variableName": k} for k in ("orderId", "amount", "reason")},
        {"orderId": "o-1", "amount": 2150, "reason": "damaged"},
    ),
    ("a 0.95 KB text (kept whole)", {"brief": {"type": "variable", "variableName": "brief"}}, {"brief": ALMOST_ONE_KIB}),
    ("a 2 KB text (over 1 KiB: size and digest)", {"brief": {"type": "variable", "variableName": "brief"}}, {"brief": TWO_KB}),
]


def workflow(inputs: dict[str, Any]) -> WorkflowDefinition:
    gate: dict[str, Any] = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Approve the refund?"}}
    if inputs:
        gate["inputs"] = inputs
    return WorkflowDefinition.model_validate({"id": "wf", "nodes": [{"id": "start", "typeId": "core.noop"}, gate], "edges": [
        {"sourceNodeId": "start", "targetNodeId": "gate"}
    ]})


def without_recorded(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**d, "payload": {k: v for k, v in d["payload"].items() if k not in (STEP_INPUTS, STEP_INPUTS_DIGEST)}}
        if d["type"] == "node.started"
        else d
        for d in docs
    ]


def units(docs: list[dict[str, Any]], first: int) -> tuple[int, int]:
    """(bytes, transactional write units) of the batch item a transition's events are written as."""
    _, put = run_items.event_batch_put(docs[0]["runId"], first, docs, {})
    size = item_size(put["Put"]["Item"])
    return size, 2 * math.ceil(size / 1024)


def measure() -> list[dict[str, Any]]:
    rows = []
    for name, declared, inputs in CASES:
        wf = workflow(declared)
        started = engine.start(new_state(wf, inputs=inputs), wf, NOW)
        interrupt = started.state.interrupts["gate"]
        decision = decide(interrupt, {"action": "accept"}, Resolver(ALICE, "run"), engine.iso(NOW), wf.node("gate").config)
        resolved = engine.resolve(started.state, wf, "gate", decision, NOW)
        first = to_docs(started.state.runId, started.events, 0, engine.iso(NOW))
        second = to_docs(resolved.state.runId, resolved.events, len(first), engine.iso(NOW))
        (with_b, with_u), (bare_b, bare_u) = units(first, 0), units(without_recorded(first), 0)
        _, resolve_u = units(second, len(first))
        rows.append(
            {
                "case": name,
                "startBatchBytes": with_b,
                "startBatchBytesWithout": bare_b,
                "extraBytes": with_b - bare_b,
                "lifecycleWru": with_u + resolve_u,
                "lifecycleWruWithout": bare_u + resolve_u,
                "extraWruPerStep": with_u - bare_u,
                # Where the batch's size falls within its last KB is a matter of the run's other bytes: on average a
                # step's extra bytes cost 2 units per KB of them.
                "expectedExtraWruPerStep": round(2 * (with_b - bare_b) / 1024, 3),
            }
        )
    return rows


def main() -> None:
    rows = measure()
    if "--json" in sys.argv:
        print(json.dumps(rows, indent=2))
        return
    print("Recorded step inputs (node.started) per approval lifecycle: event batch items, transactional WRU")
    print(
        f"{'case':46} {'start batch B':>14} {'without':>8} {'+B':>5} {'lifecycle WRU':>14} {'without':>8} "
        f"{'+WRU/step':>10} {'expected':>9}"
    )
    for r in rows:
        print(
            f"{r['case']:46} {r['startBatchBytes']:>14} {r['startBatchBytesWithout']:>8} {r['extraBytes']:>5} "
            f"{r['lifecycleWru']:>14} {r['lifecycleWruWithout']:>8} {r['extraWruPerStep']:>10} "
            f"{r['expectedExtraWruPerStep']:>9}"
        )


if __name__ == "__main__":
    main()
