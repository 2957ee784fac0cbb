"""What a person calls a run's parts, from its workflow definition: the workflow by its name, each step by its
name or the id its author wrote (a ModuleX node's own id, never its escaped engine id), and the labels a gate gives
its artifact's fields. The approval page and the console name things alike from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from interlude.domain.models.workflow import WorkflowDefinition


@dataclass(frozen=True)
class Names:
    # None: an unnamed inline ModuleX definition (its id is a content hash no one chose).
    workflow: str | None
    steps: Mapping[str, str] = field(default_factory=dict)
    # node id -> the gate's fieldLabels
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def step(self, node_id: str) -> str:
        return self.steps.get(node_id, node_id)

    def labels_of(self, node_id: str) -> Mapping[str, str]:
        return self.labels.get(node_id, {})


def names_of(definition: WorkflowDefinition, workflow_id: str) -> Names:
    return Names(
        definition.display_name(workflow_id),
        {n.id: definition.step_name(n.id) for n in definition.nodes},
        {n.id: labels for n in definition.nodes if (labels := field_labels(n.config))},
    )


def field_labels(config: Mapping[str, Any]) -> dict[str, str]:
    """A gate's `fieldLabels` (any gate type): what a person reads for each field of its artifact and its form."""
    # A ModuleX interrupt's config keeps ModuleX's spelling (field_labels).
    labels = config.get("fieldLabels", config.get("field_labels"))
    return {str(k): str(v) for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, Mapping) else {}
