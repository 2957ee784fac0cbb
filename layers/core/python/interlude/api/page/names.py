"""What a person calls a run's parts, from its workflow definition: the workflow by its name, each step by its
name or the id its author wrote (a ModuleX node's own id, never its escaped engine id), and the labels a gate gives
its artifact's fields. The approval page and the console name things alike from here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules.answer_schema import field_labels


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


