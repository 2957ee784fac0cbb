"""The engine node types a translated ModuleX definition runs on (targets of faces/modulex/definition.py).

Registered into the engine's registry by interlude.composition; their semantics live in nodes.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlude.engine.nodetypes import GateSpec, NodeType
from interlude.faces.modulex import nodes
from interlude.faces.modulex.references import MODULEX
from interlude.faces.modulex.tasks import MODULEX_TASK_TYPES


def _interrupt(node_id: str, cfg: Any, scope: Mapping[str, Any]) -> GateSpec:
    # `custom` kind: the ModuleX resume_schema travels inside data, forwarded and never enforced.
    return GateSpec("custom", nodes.interrupt_data(node_id, cfg, scope), None, 0)


MODULEX_TYPES: tuple[NodeType, ...] = (
    NodeType("modulex.interrupt", nodes.InterruptConfig, ask=_interrupt, dialect=MODULEX),
    NodeType(
        "modulex.transformer", nodes.TransformerConfig, compute=nodes.transform, reads=nodes.reads, dialect=MODULEX
    ),
    NodeType("modulex.conditional", nodes.ConditionalConfig, compute=nodes.choose, route=nodes.route, dialect=MODULEX),
    *MODULEX_TASK_TYPES,
)
