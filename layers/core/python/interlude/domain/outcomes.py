"""What a decided approval gate tells the steps after it, and how a person reads it. Pure.

A gate that was accepted, rejected, sent back (`refine`) or timed out exposes one outcome to its successors, under
its node id in the run's outputs (`{{review.comment}}`, an edge condition's `action`): every field of
OUTCOME_FIELDS, null where it does not apply, then what the deciding vote recorded besides (`decidedAt`,
`onBehalfOf`). The names are the protocol's (`interrupt.resolved`: action, decision, reason, refineFeedback,
editedArtifactData) and the resume value's (comment, decidedBy): one name for each fact on every surface.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# action: accept | reject | refine | edit-accept | timeout; decision: granted | rejected | overridden (none for a
# refine, which grants nothing); reason: "timeout", "quorum-reject" or null; decidedBy: the deciding subject (null
# when nobody decided: a timeout).
OUTCOME_FIELDS = ("action", "decision", "comment", "decidedBy", "reason", "refineFeedback", "editedArtifactData")
# What a vote may add to the outcome beyond those (rules/interrupts/decide.py stamps them).
RECORDED_FIELDS = ("decidedAt", "onBehalfOf")
APPROVAL_OUTPUT_FIELDS = frozenset(OUTCOME_FIELDS + RECORDED_FIELDS)


def approval_outcome(recorded: Any, action: str, decision: str | None = None, reason: str | None = None) -> dict[str, Any]:
    """The outcome of a gate whose deciding vote recorded `recorded` (the resume value as stamped; None for a
    timeout)."""
    outcome: dict[str, Any] = dict.fromkeys(OUTCOME_FIELDS)
    if isinstance(recorded, Mapping):
        outcome.update({k: v for k, v in recorded.items() if k in APPROVAL_OUTPUT_FIELDS})
    outcome.update(action=action, decision=decision, reason=reason)
    return outcome


# How each action reads to a person, before "by <who>".
_SAID = {
    "accept": "Approved",
    "edit-accept": "Approved with edits",
    "refine": "Sent back for changes",
    "reject": "Rejected",
}


def in_words(outcome: Mapping[str, Any], who: str | None = None) -> str:
    """"Rejected by Ana: too casual", "Sent back for changes by Ana: shorter", "Rejected automatically: nobody
    decided in time": how a gate's outcome reads where the protocol records `failed` / `approval_rejected`. `who`:
    the decider as a person knows them (the directory's display name), else the outcome's decidedBy."""
    if outcome.get("action") == "timeout":
        return "Rejected automatically: nobody decided in time"
    said = _SAID.get(str(outcome.get("action")), "Decided")
    if outcome.get("decision") == "rejected":
        said = "Rejected"
    by = who or outcome.get("decidedBy")
    said += f" by {by}" if by else ""
    feedback = outcome.get("refineFeedback")
    why = outcome.get("comment") or (feedback.get("text") if isinstance(feedback, Mapping) else None)
    if not why and outcome.get("reason") == "quorum-reject":
        why = "a majority rejected"
    return said + (f": {why}" if why else "")
