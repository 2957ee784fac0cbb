"""A stored workflow version read alone: what a function that moves no run reads of a workflow (the notify worker
names it in its messages), without the transactional writers store/workflows.py loads."""

from __future__ import annotations

from typing import Any

from interlude.store import attributes as a
from interlude.store.layout import workflow_pk, workflow_version_sk
from interlude.store.table import Table


def read_workflow(table: Table, tenant: str, workflow_id: str, version: int) -> dict[str, Any] | None:
    """The definition of one stored version, or None."""
    got = table.client.get_item(
        TableName=table.table, Key=a.key(workflow_pk(tenant, workflow_id), workflow_version_sk(version))
    )
    item = got.get("Item")
    return a.unpacked(item["definition"]) if item else None
