"""Many pending interrupts in a moto table, fast: for the inbox scale and kinds tests and bench/inbox_page_calls.py.

Items are the store's own (store/run_items: each interrupt item and its run's head as a transition writes them, and
its inbox entries as store/inbox.py makes them, in the table the gate's marks name), put straight into moto's table (tests/support/seeded_runs.put_straight:
moto's item and its size check, without serialising tens of thousands of items through botocore, nor a stream record
each: a page reads no events).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from interlude import wiring
from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules.auth import Principal
from interlude.store.facade import Store
from interlude.store.inbox import Entry
from interlude.store.provisioning import create_tables
from interlude.store.run_items import head_put, interrupt_put
from tests.support.seeded_runs import put_straight


def gated_workflow(group: str) -> WorkflowDefinition:
    """One approval gate that only members of `group` may decide."""
    config = {"title": "t", "approverGroupRefs": [group]}
    node = {"id": "gate", "typeId": "core.approvalGate", "config": config}
    return WorkflowDefinition.model_validate({"nodes": [node], "edges": []})


@contextmanager
def table_of_its_own(table: str) -> Iterator[tuple[Services, Any]]:
    """The services and a DynamoDB client over moto tables named after `table` (TABLE_NAME and ENTRIES_TABLE_NAME too), alone in its own moto:
    thousands of seeded gates would grow a shared table for every later test, and moto's Query costs in proportion to
    the table."""
    with pytest.MonkeyPatch.context() as env, mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        names = create_tables(client, table)
        env.setenv(wiring.TABLE_NAME_ENV, names[0])
        env.setenv(wiring.ENTRIES_TABLE_NAME_ENV, names[1])
        yield Services(Store(*names, client)), client


def gate_template(services: Services, admin: Principal, workflow_id: str, group: str) -> tuple[Any, Any]:
    """A run of `workflow_id` (put as gated_workflow(`group`)) and its open gate: what seed_like copies."""
    services.workflows.put_workflow(admin, workflow_id, gated_workflow(group))
    run = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow_id}))
    got = services.store.get_run(run.runId)
    assert got is not None
    state = got[0]
    return state, state.interrupts["gate"]


def seed_like(store: Store, template: tuple[Any, Any], start: int, stop: int, prefix: str = "bulk") -> None:
    """Pending interrupts start..stop-1 shaped like `template` (a run state and its open interrupt), each in a run
    of its own, raised one millisecond apart from 2026-12-01T00:00:00Z."""
    state, interrupt = template
    tenant = state.tenant
    base = datetime(2026, 12, 1, tzinfo=UTC)
    opened = []
    for n in range(start, stop):
        run_id = f"{tenant}/{prefix}{n:015d}"
        at = (base + timedelta(milliseconds=n)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        raised = interrupt.model_copy(
            update={"interruptId": f"{tenant}/{prefix}i{n:015d}", "key": f"{run_id}:gate:1", "raisedAt": at}
        )
        opened.append((state.model_copy(update={"runId": run_id, "interrupts": {raised.nodeId: raised}}), raised))
    items = [item for state, i in opened for item in (head_put(state)["Item"], interrupt_put(state, i, 0)["Item"])]
    put_straight(store.client, store.table, items)
    # Each gate's entries in the table its marks name (docs/adr/0161: the second, as this release opens a gate)
    entries = [Entry.of(state.tenant, state.runId, state.workflowId, i) for state, i in opened]
    for where in {e.where for e in entries}:
        put_straight(store.client, store.table_named(where), [item for e in entries if e.where == where for item in e.items()])
