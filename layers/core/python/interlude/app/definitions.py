"""Workflow versions as runs use them: each read once and kept for the process's life (a version is immutable)."""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from interlude.domain.errors import Internal
from interlude.domain.models.workflow import WorkflowDefinition

if TYPE_CHECKING:
    from interlude.app.ports import WorkflowVersions


class Definitions:
    # The most versions one process keeps, least recently used dropped first.
    SIZE = 256

    def __init__(self, versions: WorkflowVersions) -> None:
        self.versions = versions
        self._kept: OrderedDict[tuple[str, str, int], WorkflowDefinition] = OrderedDict()

    def workflow(self, tenant: str, workflow_id: str, version: int) -> WorkflowDefinition:
        cache_key = (tenant, workflow_id, version)
        hit = self._kept.get(cache_key)
        if hit is None:
            raw = self.versions.get_workflow(tenant, workflow_id, version)
            if raw is None:
                raise Internal("a run refers to a workflow version that is missing")
            hit = WorkflowDefinition.model_validate(raw)
            self._kept[cache_key] = hit
            if len(self._kept) > self.SIZE:
                self._kept.popitem(last=False)
        return hit

    def forget(self) -> None:
        self._kept.clear()
