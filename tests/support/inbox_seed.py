"""Many pending interrupts in a moto table, fast: for the inbox scale test and bench/inbox_page_calls.py.

Items are the store's own (store/run_items: each interrupt item and its run's head as a transition writes them, and
its inbox entries as store/inbox.py makes them), written by BatchWriteItem (no events: a page reads none); only the
transport is shortened, straight into moto's backend.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from moto.dynamodb.models import dynamodb_backends

from interlude.domain.models.workflow import WorkflowDefinition
from interlude.store.facade import Store
from interlude.store.inbox import Entry, InboxIndex
from interlude.store.run_items import head_put, interrupt_put
from tests.support.moto_world import current_account


class DirectWrites:
    """A client whose BatchWriteItem puts each item straight into moto's backend (moto's own put: the same checks,
    without serialising tens of thousands of items through botocore); every other call goes to the real client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.backend = dynamodb_backends[current_account()][client.meta.region_name]

    def batch_write_item(self, RequestItems: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:  # noqa: N803
        for table, requests in RequestItems.items():
            for request in requests:
                self.backend.put_item(table, request["PutRequest"]["Item"])
        return {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def gated_workflow(group: str) -> WorkflowDefinition:
    """One approval gate that only members of `group` may decide."""
    config = {"title": "t", "approverGroupRefs": [group]}
    node = {"id": "gate", "typeId": "core.approvalGate", "config": config}
    return WorkflowDefinition.model_validate({"nodes": [node], "edges": []})


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
    index = InboxIndex(store.table, DirectWrites(store.client))
    index.batch_write([{"PutRequest": {"Item": item}} for state, i in opened for item in (head_put(state)["Item"], interrupt_put(state, i, 0)["Item"])])
    index.put(Entry.of(state.tenant, state.runId, state.workflowId, i) for state, i in opened)
