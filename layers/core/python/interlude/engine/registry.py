"""Every node type the engine runs, by typeId: the types of engine/nodetypes.py and engine/subworkflows.py, the
gates of engine/gates.py, the actions of engine/actions.py and the tasks of engine/tasks.py (those three modules on
first lookup), plus the types a face registers (interlude.composition registers the ModuleX ones; the engine imports
no face).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import import_module

from interlude.engine.face_types import LAZY as _LAZY
from interlude.engine.face_types import LAZY_LOCK as _LAZY_LOCK
from interlude.engine.face_types import register_lazily as register_lazily
from interlude.engine.nodetypes import CORE_TYPES, NodeType
from interlude.engine.subworkflows import SUBWORKFLOW_TYPES

NODE_TYPES: dict[str, NodeType] = {t.type_id: t for t in (*CORE_TYPES, *SUBWORKFLOW_TYPES)}

# Built-in types whose modules (their config models, their helpers) load the first time one of their typeIds is looked
# up, as a face's do: a request that runs and checks none of them (a decision on an approval, the engine's run rules
# imported with it) never defines them (ADR 0151). typeId -> (module, the tuple of its types).
LATER_BUILT_INS = {
    "core.clarificationGate": ("interlude.engine.gates", "GATES"),
    "core.interrupt": ("interlude.engine.gates", "GATES"),
    "core.conversationGate": ("interlude.engine.gates", "GATES"),
    "core.confidenceGate": ("interlude.engine.gates", "GATES"),
    "core.credentialGate": ("interlude.engine.gates", "GATES"),
    "core.http": ("interlude.engine.actions", "ACTION_TYPES"),
    "core.task": ("interlude.engine.tasks", "TASK_TYPES"),
}


def _built_in(type_id: str) -> Callable[[], Iterable[NodeType]]:
    def load() -> Iterable[NodeType]:
        module, types = LATER_BUILT_INS[type_id]
        return [t for t in getattr(import_module(module), types) if t.type_id == type_id]

    return load


for _type_id in LATER_BUILT_INS:
    register_lazily(_type_id, _built_in(_type_id))


def register(types: Iterable[NodeType]) -> None:
    """Idempotent for the same objects; a second, different type under a known typeId is a wiring mistake."""
    for node_type in types:
        known = NODE_TYPES.get(node_type.type_id)
        if known is not None and known is not node_type:
            raise ValueError(f"node type {node_type.type_id!r} is already registered")
        NODE_TYPES[node_type.type_id] = node_type


def _load(prefixes: Iterable[str]) -> None:
    with _LAZY_LOCK:
        for prefix in [p for p in prefixes if p in _LAZY]:
            types = tuple(_LAZY[prefix]())
            if any(not t.type_id.startswith(prefix) for t in types):
                raise ValueError(f"a node type registered under {prefix!r} does not start with it")
            register(types)
            del _LAZY[prefix]


def node_type(type_id: str) -> NodeType | None:
    """The node type of this typeId (None: unknown), loading a face's types the first time one is asked for."""
    found = NODE_TYPES.get(type_id)
    if found is None and _LAZY:
        _load([p for p in list(_LAZY) if type_id.startswith(p)])
        found = NODE_TYPES.get(type_id)
    return found


def known_type_ids() -> list[str]:
    """Every typeId, the lazily registered ones included (they load)."""
    _load(list(_LAZY))
    return sorted(NODE_TYPES)


def is_gate(type_id: str) -> bool:
    """Whether nodes of this type raise interrupts (an unknown type raises none)."""
    found = node_type(type_id)
    return found is not None and found.ask is not None
