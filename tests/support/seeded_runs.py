"""Many finished runs written straight into a table, as the store writes them (a head and a run listing entry each),
for listings too long to fill through the API in a test."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from interlude.domain.clock import iso
from interlude.domain.ids import mint_opaque, tenant_bound
from interlude.domain.models.run import RunState
from interlude.store.inbox import InboxIndex
from interlude.store.run_items import head_put, run_entry


def seed_runs(client: Any, table: str, tenant: str, workflow_id: str, count: int, first: datetime) -> list[str]:
    """`count` completed runs of `workflow_id` (version 1), created a millisecond apart from `first`: their ids,
    oldest first. Written 25 items to a BatchWriteItem; the dispatch stream ignores heads and entries."""
    run_ids: list[str] = []
    requests = []
    for i in range(count):
        at = iso(first + timedelta(milliseconds=i))
        state = RunState(
            runId=tenant_bound(tenant, mint_opaque()),
            tenant=tenant,
            workflowId=workflow_id,
            workflowVersion=1,
            status="completed",
            owner={"tenant": tenant, "subject": {"subjectId": "seed"}},
            createdAt=at,
            startedAt=at,
            completedAt=at,
        )
        run_ids.append(state.runId)
        requests.append({"PutRequest": {"Item": head_put(state)["Item"]}})
        requests.append({"PutRequest": {"Item": run_entry(tenant, state.runId, workflow_id, at)[1]["Put"]["Item"]}})
    InboxIndex(table, client).batch_write(requests)
    return run_ids
