"""A stored workflow version read alone: what a function that moves no run reads of a workflow (the notify worker
names it in its messages), without the transactional writers store/workflows.py loads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.rules.run_search import stored_name
from interlude.store import attributes as a
from interlude.store.layout import workflow_pk, workflow_version_sk
from interlude.store.table import Table

if TYPE_CHECKING:
    from interlude.domain.models.run import RunState

# WorkflowNames keeps at most this many names (a turn or a migration page reads runs of a few workflows).
NAMES_KEPT = 256


def read_workflow(table: Table, tenant: str, workflow_id: str, version: int) -> dict[str, Any] | None:
    """The definition of one stored version, or None."""
    got = table.client.get_item(
        TableName=table.table, Key=a.key(workflow_pk(tenant, workflow_id), workflow_version_sk(version))
    )
    item = got.get("Item")
    return a.unpacked(item["definition"]) if item else None


class WorkflowNames:
    """The name each workflow version was registered under, read once each: a run created before runs kept their
    workflow's name (RunState.workflowName) is titled by it all the same (its search entries: migration 0006; their
    expiry: store/retention.py)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.known: dict[tuple[str, str, int], str | None] = {}

    def named(self, state: RunState) -> RunState:
        if state.workflowName is not None:
            return state
        key = (state.tenant, state.workflowId, state.workflowVersion)
        if key not in self.known:
            if len(self.known) >= NAMES_KEPT:
                self.known.clear()
            name = (read_workflow(self.table, *key) or {}).get("name")
            self.known[key] = stored_name(name) if isinstance(name, str) else None
        name = self.known[key]
        return state.model_copy(update={"workflowName": name}) if name else state
