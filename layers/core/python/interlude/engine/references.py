"""What a definition reads, checked when it is registered (engine.run.check_config). Pure.

* Every `{{…}}` reference in a node's config and input bindings names a step of the workflow or the run's inputs,
  and, where the step's type says what it outputs (NodeType.fields), a field it outputs: `{{review.coment}}` and
  `{{reveiw.comment}}` are refused, naming them, instead of reaching a person as raw `{{…}}`. At run time a
  reference that exists but has no value yet is null, or empty inside text (domain/templates.py). Each face writes
  references its own way (NodeType.dialect): ModuleX nodes name ModuleX ids and `input.x`, and their outputs are
  free-form, so only the step is checked there.
* Every edge condition can be evaluated and reads what its source outputs (engine/conditions.py).
* Every outcome a node sends on only where a condition routes it (an approval's `refine`) has an edge that does.

Config values passed on verbatim, never rendered (schemas, examples), are not read for references.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.templates import OPENWOP, Dialect
from interlude.engine import conditions
from interlude.engine.registry import node_type as registered_type

# Config keys whose values are passed on as they are (JSON Schemas, examples, state keys), never rendered.
VERBATIM_KEYS = frozenset({"resumeSchema", "outcomeSchema", "schema", "resume_schema", "examples", "data_keys"})
Fields = dict[str, frozenset[str] | None]


def output_fields(workflow: WorkflowDefinition, configs: dict[str, Any]) -> Fields:
    """Each node's output fields (None: not known before it runs), from its validated config in `configs`."""
    fields: Fields = {}
    for node in workflow.nodes:
        node_type = registered_type(node.typeId)
        declared = node_type.fields if node_type is not None else None
        fields[node.id] = declared(configs[node.id]) if declared is not None and node.id in configs else None
    return fields


def problems(workflow: WorkflowDefinition, configs: dict[str, Any]) -> list[dict[str, str]]:
    """`configs`: each node's validated config (a node whose config is not valid is left out, reported already)."""
    fields = output_fields(workflow, configs)
    return [
        *_reference_problems(workflow, fields),
        *_condition_problems(workflow, fields),
        *_routing_problems(workflow, configs),
    ]


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, text) of every string in `value` outside VERBATIM_KEYS, walked without recursion."""
    stack = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            yield at, item
        elif isinstance(item, dict):
            stack.extend((sub, f"{at}/{key}") for key, sub in item.items() if key not in VERBATIM_KEYS)
        elif isinstance(item, list):
            stack.extend((sub, f"{at}/{n}") for n, sub in enumerate(item))


def _reference_problems(workflow: WorkflowDefinition, fields: Fields) -> list[dict[str, str]]:
    found = []
    for i, node in enumerate(workflow.nodes):
        node_type = registered_type(node.typeId)
        if node_type is None:
            continue  # reported already
        dialect = node_type.dialect or OPENWOP
        for at, text in _strings({"config": node.config, "inputs": node.inputs}, f"nodes/{i}"):
            for ref in dialect.pattern.findall(text):
                message = _unknown(ref, dialect, fields)
                if message is not None:
                    found.append({"path": at, "message": f"{{{{{ref}}}}} {message}"})
    return sorted(found, key=lambda p: p["path"])


def _unknown(ref: str, dialect: Dialect, fields: Fields) -> str | None:
    """Why the reference `ref` reads nothing that can exist (None: it may)."""
    parts = ref.split(".")
    if parts[0] in dialect.input_heads:
        return None
    for n in range(len(parts), 0, -1):
        node_id = dialect.to_id(".".join(parts[:n]))
        if node_id not in fields:
            continue
        known, rest = fields[node_id], parts[n:]
        if not dialect.fields_checked or not rest or known is None:
            return None
        if any(".".join(rest[:k]) in known for k in range(len(rest), 0, -1)):
            return None
        listed = ", ".join(sorted(known)) or "nothing"
        return f"reads {rest[0]!r}, which step {'.'.join(parts[:n])!r} does not output (it outputs: {listed})"
    inputs = " or ".join(f"{head}.<name>" for head in dialect.input_heads)
    return f"names no step of this workflow (a run input is {inputs})"


def _condition_problems(workflow: WorkflowDefinition, fields: Fields) -> list[dict[str, str]]:
    found = []
    for i, edge in enumerate(workflow.edges):
        if edge.condition is None:
            continue
        source_fields = fields.get(edge.sourceNodeId)
        for at, message in conditions.problems(edge.condition, source_fields, edge.sourceNodeId):
            found.append({"path": f"edges/{i}/condition/{at}", "message": f"{edge.named}: {message}"})
    return found


def _routing_problems(workflow: WorkflowDefinition, configs: dict[str, Any]) -> list[dict[str, str]]:
    found = []
    for i, node in enumerate(workflow.nodes):
        node_type = registered_type(node.typeId)
        if node_type is None or node_type.routed_only is None or node.id not in configs:
            continue
        outgoing = [e.condition for e in workflow.outgoing(node.id) if e.condition is not None]
        for name, sample in node_type.routed_only(configs[node.id]):
            context = conditions.condition_context("completed", sample)
            if not any(conditions.holds(condition, context) for condition in outgoing):
                found.append(
                    {
                        "path": f"nodes/{i}/config/actions",
                        "message": f"step {node.id!r} offers {name}, but no edge out of it routes a {name}: give the "
                        f"edge back to the step that drafts a condition that holds for it, e.g. "
                        f'{{"type": "equals", "left": "action", "right": "{name}"}}',
                    }
                )
    return found
