"""Node types a face registers on first use, by typeId prefix (interlude.composition: "modulex."): an entry point
whose requests never run or check such a node (an OpenWOP definition's) never imports the face's modules.

Apart from engine/registry.py (which registers the built-in types of the gates', actions' and tasks' modules here too,
ADR 0151), so that an entry point joins a face at start without loading the engine's node types (the dispatch function's records run none; docs/adr/0058, "The worker
functions' cold imports").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from interlude.engine.nodetypes import NodeType

# The registry loads and removes an entry the first time one of its typeIds is looked up.
LAZY: dict[str, Callable[[], Iterable[NodeType]]] = {}
LAZY_LOCK = threading.Lock()  # the local stack answers requests on threads


def register_lazily(prefix: str, load: Callable[[], Iterable[NodeType]]) -> None:
    """`load` returns the types whose typeIds start with `prefix`; it runs when such a typeId is first looked up."""
    LAZY[prefix] = load
