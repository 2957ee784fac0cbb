"""Every node type the engine runs, by typeId: the types of engine/nodetypes.py and the gates of engine/gates.py,
plus the types a face registers (interlude.composition registers the ModuleX ones; the engine imports no face).
"""

from __future__ import annotations

from collections.abc import Iterable

from interlude.engine.actions import ACTION_TYPES
from interlude.engine.gates import GATES
from interlude.engine.nodetypes import CORE_TYPES, NodeType
from interlude.engine.subworkflows import SUBWORKFLOW_TYPES
from interlude.engine.tasks import TASK_TYPES

NODE_TYPES: dict[str, NodeType] = {t.type_id: t for t in (*CORE_TYPES, *GATES, *ACTION_TYPES, *SUBWORKFLOW_TYPES, *TASK_TYPES)}


def register(types: Iterable[NodeType]) -> None:
    """Idempotent for the same objects; a second, different type under a known typeId is a wiring mistake."""
    for node_type in types:
        known = NODE_TYPES.get(node_type.type_id)
        if known is not None and known is not node_type:
            raise ValueError(f"node type {node_type.type_id!r} is already registered")
        NODE_TYPES[node_type.type_id] = node_type


def is_gate(type_id: str) -> bool:
    """Whether nodes of this type raise interrupts (an unknown type raises none)."""
    node_type = NODE_TYPES.get(type_id)
    return node_type is not None and node_type.ask is not None
