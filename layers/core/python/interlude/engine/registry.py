"""Every node type the engine runs, by typeId: the types of engine/nodetypes.py and the gates of engine/gates.py."""

from __future__ import annotations

from interlude.engine.gates import GATES
from interlude.engine.nodetypes import CORE_TYPES, NodeType

NODE_TYPES: dict[str, NodeType] = {t.type_id: t for t in (*CORE_TYPES, *GATES)}
