"""Sweep a gate's text and a run's inputs through their sizes and print the write units of the create and the resolve
of lifecycle (b) (bench/lifecycles.py's polling lifecycle: create, get, resolve, get) at each, and where a size costs
more than a larger one does (ADR 0153, "Units that never fall as a text grows").

Each size runs once through the real handlers on moto in-process (bench/_deployment.py); units are counted (DynamoDB's
accounting of each write's item), so the figures do not depend on the machine's load.

Usage: .venv/bin/python bench/gate_text_units.py [step] [largest]   (defaults: 32 and 2048 bytes)
"""

from __future__ import annotations

import sys
from typing import Any

from _bench import english_text, offline_aws

offline_aws(TABLE_NAME="bench", ENTRIES_TABLE_NAME="bench-entries", PUBLIC_BASE_URL="https://interlude.example.com", AWS_ACCOUNT_ID_ENDPOINT_MODE="disabled")

from _deployment import Deployment, Invocation  # noqa: E402
from lifecycles import Tenant, created, ok, wire  # noqa: E402
from moto import mock_aws  # noqa: E402

WORKFLOW_ID = "sweep"


def workflow(text: str) -> dict[str, Any]:
    config: dict[str, Any] = {"title": "Approve the brief?", "actions": ["accept", "reject"]}
    if text:
        config["description"] = text
    return {
        "id": WORKFLOW_ID,
        "name": "A gate whose text the sweep sizes",
        "nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": config}],
        "edges": [],
        "variables": [{"name": "brief", "type": "string"}],
    }


def put_workflow(tenant: Tenant, text: str) -> None:
    from interlude.domain.models.workflow import WorkflowDefinition

    principal = tenant.services.keys.authenticate(tenant.admin)
    tenant.services.workflows.put_workflow(principal, WORKFLOW_ID, WorkflowDefinition.model_validate(workflow(text)))


def lifecycle(deployment: Deployment, tenant: Tenant, inputs: str) -> list[Invocation]:
    deployment.take()
    body: dict[str, Any] = {"workflowId": WORKFLOW_ID, **({"inputs": {"brief": inputs}} if inputs else {})}
    run = created(deployment.request("POST /runs", "/runs", body, tenant.admin))
    ok(deployment.request("GET /runs/{runId}", f"/runs/{wire(run)}", bearer=tenant.admin), "getRun")
    ok(
        deployment.request(
            "POST /runs/{runId}/interrupts/{nodeId}", f"/runs/{wire(run)}/interrupts/gate", {"resumeValue": {"action": "accept"}}, tenant.admin
        ),
        "resolve",
    )
    ok(deployment.request("GET /runs/{runId}", f"/runs/{wire(run)}", bearer=tenant.admin), "getRun")
    deployment.drain()
    return deployment.take()


def units(record: Invocation) -> float:
    """The invocation's write units less the request counter's and the audit chain's (each depends on the pace, not on
    the lifecycle: bench/lifecycles.py prices them)."""
    return record.wru - sum(v for kind, v in record.wru_by_kind.items() if kind == "request counter" or kind.startswith("audit"))


def figures(records: list[Invocation]) -> dict[str, Any]:
    create = next(r for r in records if r.route == "POST /runs")
    resolve = next(r for r in records if r.route == "POST /runs/{runId}/interrupts/{nodeId}")
    return {
        "create": units(create),
        "resolve": units(resolve),
        "all": sum(units(r) for r in records),
        "rru": sum(r.rru for r in records),
        "head": max(create.largest_by_kind.get("run head", 0), resolve.largest_by_kind.get("run head", 0)),
        "batch": create.largest_by_kind.get("event batch", 0),
        "interrupt": create.largest_by_kind.get("interrupt", 0),
    }


def sweep(step: int, largest: int) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    found: dict[str, list[tuple[int, dict[str, Any]]]] = {"gate text": [], "inputs": []}
    with mock_aws():
        deployment = Deployment("bench")
        try:
            tenant = Tenant(deployment)
            put_workflow(tenant, "")
            lifecycle(deployment, tenant, "")  # every function warm: first use paid
            for size in range(0, largest + 1, step):
                put_workflow(tenant, english_text(size))
                found["gate text"].append((size, figures(lifecycle(deployment, tenant, ""))))
            put_workflow(tenant, "")
            for size in range(0, largest + 1, step):
                found["inputs"].append((size, figures(lifecycle(deployment, tenant, english_text(size, 6000)))))
        finally:
            deployment.close()
    return found


def inversions(rows: list[tuple[int, dict[str, Any]]], key: str) -> list[str]:
    """Each size that costs more `key` units than a larger size does (the largest such larger size's cost beside it)."""
    out = []
    for i, (size, row) in enumerate(rows):
        cheaper = [(s, r[key]) for s, r in rows[i + 1 :] if r[key] < row[key]]
        if cheaper:
            out.append(f"{size} B: {row[key]:g} > {cheaper[-1][1]:g} at {cheaper[-1][0]} B")
    return out


def main() -> None:
    args = [int(a) for a in sys.argv[1:]]
    step, largest = (args + [32, 2048][len(args) :])[:2]
    for what, rows in sweep(step, largest).items():
        print(f"\nLifecycle (b) by {what} size (WRU of the create, the resolve, the lifecycle; RRU; largest head, create batch, interrupt item in B)")
        print(f"  {'bytes':>6} {'create':>6} {'resolve':>7} {'all':>5} {'RRU':>5} {'head':>6} {'batch':>6} {'intr':>6}")
        for size, r in rows:
            print(
                f"  {size:>6} {r['create']:>6g} {r['resolve']:>7g} {r['all']:>5g} {r['rru']:>5g} {r['head']:>6} {r['batch']:>6} {r['interrupt']:>6}"
            )
        for key in ("create", "resolve", "all"):
            found = inversions(rows, key)
            print(f"  {key}: " + ("never costs more than a larger size" if not found else f"{len(found)} sizes cost more than a larger one: " + "; ".join(found)))


if __name__ == "__main__":
    main()
