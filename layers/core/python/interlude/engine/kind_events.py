"""The kind-specific event types OpenWOP keeps registered beside `interrupt.requested` and `interrupt.resolved`.

interrupt.md §Events: "A host emitting `interrupt.requested` SHOULD also emit the legacy kind-specific type until
its consumers migrate." Their payload definitions are `$ref` aliases of `interruptRequested` and
`interruptResolved` (run-event-payloads.schema.json), so each carries the generic event's payload unchanged and
is written right after it. Only the approval and clarification kinds have such types; `approval.received`
(a vote that does not decide the gate) is emitted by the engine where a vote is recorded.
"""

from __future__ import annotations

from typing import Any

REQUESTED: dict[str, str] = {"approval": "approval.requested", "clarification": "clarification.requested"}
# An approval is named by its decision; a `refine` exits the suspend without one, so it has no kind-specific type.
APPROVAL_DECIDED: dict[str, str] = {
    "granted": "approval.granted",
    "rejected": "approval.rejected",
    "overridden": "approval.overridden",
}


def requested_type(kind: str) -> str | None:
    """The kind-specific type that accompanies `interrupt.requested`, if the kind has one."""
    return REQUESTED.get(kind)


def resolved_type(kind: str, resolved: dict[str, Any]) -> str | None:
    """The kind-specific type that accompanies `interrupt.resolved` (payload `resolved`), if there is one."""
    if kind == "clarification":
        return "clarification.resolved"
    if kind == "approval":
        return APPROVAL_DECIDED.get(resolved.get("decision", ""))
    return None
