"""A gate's derived names per visit: its interrupt id and the key its interrupt item is stored under. Pure.

Apart from the engine's run rules (engine/run.py), which raise interrupts under these names, because the outbox
handlers, the callback notices and the token pages find a visit by them without running the engine: the dispatch
function's records load this, not the engine (docs/adr/0058).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.domain.ids import derive_opaque, tenant_bound

if TYPE_CHECKING:
    from interlude.domain.models.run import RunState

KEY_MAX = 256


def interrupt_id(state: RunState, node_id: str, visit: int) -> str:
    """Derived from (run, node, visit), so replaying a step raises the same id and any id names its visit."""
    return tenant_bound(state.tenant, derive_opaque(state.runId, node_id, str(visit)))


def visit_of(state: RunState, node_id: str, interrupt_id_: str | None) -> int | None:
    """Which visit of `node_id` raised `interrupt_id_`, found without a read; None if none did."""
    ns = state.nodes.get(node_id)
    if ns is None or not interrupt_id_:
        return None
    return next((v for v in range(ns.visits, 0, -1) if interrupt_id(state, node_id, v) == interrupt_id_), None)


def interrupt_key(run_id: str, node_id: str, visit: int) -> str:
    key = f"{run_id}:{node_id}:{visit}"
    return key if len(key) <= KEY_MAX else f"{derive_opaque(run_id)}:{node_id}:{visit}"[:KEY_MAX]


def visit_keys(state: RunState, node_id: str) -> list[str]:
    """The key each visit of `node_id` so far would have raised its interrupt under, latest first."""
    ns = state.nodes.get(node_id)
    return [interrupt_key(state.runId, node_id, v) for v in range(ns.visits if ns else 0, 0, -1)]
