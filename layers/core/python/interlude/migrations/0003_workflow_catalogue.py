"""Workflows registered before the catalogue existed are missing from GET /workflows, those before the latest-version
pointer read their newest version item instead, and entries written before the listing's filters (description,
version; ModuleX's category and visibility) match none of them: each workflow's pointer and catalogue entry are made
what a workflow registered now has, from its latest version (an OpenWOP workflow) or its record (a ModuleX one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from interlude.app.workflows import catalogue_entry as openwop_entry
from interlude.domain.ids import INLINE_WORKFLOW_PREFIX
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.faces.modulex.workflows import catalogue_entry as modulex_entry
from interlude.store import attributes as a
from interlude.store.layout import WORKFLOW_VERSION_SK_PREFIX
from interlude.store.migrations import Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "lists every workflow with what the listing filters on: pointer and catalogue entry made as now"
SCAN = Scan("begins_with(sk, :v)", {":v": WORKFLOW_VERSION_SK_PREFIX}, {"#v": "version"}, "pk, #v, createdAt")


def apply(store: Store, versions: list[a.Item]) -> int:
    newest: dict[str, tuple[int, str]] = {}
    for item in versions:
        pk, version = item["pk"]["S"], int(item["version"]["N"])
        if pk not in newest or newest[pk][0] < version:
            newest[pk] = (version, item["createdAt"]["S"])
    # Each workflow once, at the page holding its latest version (a later page holds a later one, if any).
    return sum(_relist(store, pk, version, created_at) for pk, (version, created_at) in newest.items())


def _relist(store: Store, pk: str, version: int, created_at: str) -> int:
    _, tenant, _, workflow_id = pk.split("#", 3)  # T#{tenant}#W#{workflow}
    latest = store.latest_workflow(tenant, workflow_id)
    if latest is None or latest[0] != version:
        return 0
    entry = None if workflow_id.startswith(INLINE_WORKFLOW_PREFIX) else _entry(store, tenant, workflow_id, latest, created_at)
    return store.relist_workflow(tenant, workflow_id, version, entry)


def _entry(
    store: Store, tenant: str, workflow_id: str, latest: tuple[int, dict[str, Any]], created_at: str
) -> dict[str, Any] | None:
    """The catalogue entry the workflow should have, when it has not that one (None: leave it as it is)."""
    current = store.catalogue_entry(tenant, workflow_id)
    record = store.get_modulex_workflow(tenant, workflow_id)
    if record is not None:
        if "deletedAt" in record:
            return None  # deleted: listed no more
        wanted = modulex_entry(record)
    else:
        updated_at = current["updatedAt"] if current else created_at
        definition = WorkflowDefinition.model_validate(latest[1])
        wanted = {**openwop_entry(definition, workflow_id, updated_at), "latestVersion": latest[0]}
    return None if current == wanted else wanted
