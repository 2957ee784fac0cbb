"""The engine's test vocabulary: a fixed clock, a run owner, tiny workflow builders and start/answer shortcuts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interlude.domain.models.run import RunState
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import run as engine
from interlude.rules.interrupts.decide import Resolver, decide
from tests.support.local_stack import FIXTURES

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RUN_ID = "t1/AAAAAAAAAAAAAAAAAAAA"


def subject(sid: str) -> dict[str, Any]:
    return {"issuer": "urn:test", "subjectId": sid, "tenant": "t1", "lane": "api-key", "kind": "user"}


ALICE = subject("alice")


def fixture(name: str) -> WorkflowDefinition:
    """A shared OpenWOP conformance fixture."""
    return WorkflowDefinition.model_validate(json.loads((FIXTURES / f"{name}.json").read_text()))


# The refund workflow of examples/: refine loops back to its draft, approve pays, reject tells the requester.
REFUND = Path(__file__).resolve().parents[2] / "examples" / "refund-with-changes.json"


def refund_definition() -> dict[str, Any]:
    return json.loads(REFUND.read_text())


def wf_of(nodes, edges=(), variables=()) -> WorkflowDefinition:
    return WorkflowDefinition.model_validate(
        {"id": "wf", "nodes": nodes, "edges": list(edges), "variables": list(variables)}
    )


def noop(i):
    return {"id": i, "typeId": "core.noop"}


def gate(i="g", **config) -> dict[str, Any]:
    return {"id": i, "typeId": "core.approvalGate", "config": {"title": f"Approve {i}", **config}}


def edge(a, b, rule="all_success"):
    return {"sourceNodeId": a, "targetNodeId": b, "triggerRule": rule}


def new_state(wf: WorkflowDefinition, **state_fields) -> RunState:
    """A fresh run of `wf` owned by alice in tenant t1; `state_fields` (runId, inputs, configurable, owner, ...)
    override the defaults."""
    fields: dict[str, Any] = {
        "runId": RUN_ID,
        "tenant": "t1",
        "workflowId": wf.id or "wf",
        "workflowVersion": 1,
        "owner": {"tenant": "t1", "subject": ALICE},
        "createdAt": engine.iso(NOW),
    }
    return RunState(**{**fields, **state_fields})


def start(wf: WorkflowDefinition, **state_fields) -> engine.Transition:
    return engine.start(new_state(wf, **state_fields), wf, NOW)


def answer(
    t: engine.Transition, wf: WorkflowDefinition, node: str, value, who: dict[str, Any] | Resolver = ALICE
) -> engine.Transition:
    """Resolve `node`'s interrupt with `value`, answered by `who` (a subject, or a full Resolver) through the run."""
    resolver = who if isinstance(who, Resolver) else Resolver(who, "run")
    decision = decide(t.state.interrupts[node], value, resolver, engine.iso(NOW), wf.node(node).config)
    return engine.resolve(t.state, wf, node, decision, NOW)


def types(t: engine.Transition) -> list[str]:
    return [e.type for e in t.events]
