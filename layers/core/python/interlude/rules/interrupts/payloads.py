"""Build InterruptPayloads from gate configs and validate them against suspend-request.schema.json."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from interlude.domain import schemas
from interlude.domain.models.run import RunStatus

SUSPEND_SCHEMA = "suspend-request.schema.json"

REFINE_FEEDBACK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["scope"],
    "additionalProperties": False,
    "properties": {
        "scope": {"enum": ["whole", "section", "items"]},
        "sectionPath": {"type": "string"},
        "itemIds": {"type": "array", "items": {"type": "string"}},
        "tags": {"type": "array", "items": {"type": "string"}},
        "text": {"type": "string"},
    },
}


def approval_resume_schema(actions: list[str]) -> dict[str, Any]:
    """The resume value an approval accepts: an action from the gate's list plus that action's fields."""
    return {
        "type": "object",
        "required": ["action"],
        "additionalProperties": False,
        "properties": {
            "action": {"enum": list(actions)},
            "refineFeedback": REFINE_FEEDBACK_SCHEMA,
            "editedArtifactData": {},
            "decidedAt": {"type": "string", "format": "date-time"},
            "decidedBy": {"type": "string", "maxLength": 512},
            "comment": {"type": "string", "maxLength": 10000},
        },
    }


def clarification_resume_schema(questions: list[dict[str, Any]]) -> dict[str, Any]:
    """An object keyed by question id; each answer follows the question's schema, else a string."""
    return {
        "type": "object",
        "required": [q["id"] for q in questions],
        "additionalProperties": False,
        "properties": {q["id"]: q.get("schema") or {"type": "string", "minLength": 1} for q in questions},
    }


def validate_payload(payload: dict[str, Any]) -> list[dict[str, str]]:
    return schemas.errors_of(schemas.validator(SUSPEND_SCHEMA), payload)


# The run status while an interrupt of each kind (suspend-request.schema.json) is open.
KIND_STATUS: dict[str, RunStatus] = {
    "approval": "waiting-approval",
    "low-confidence": "waiting-approval",
    "custom": "waiting-approval",
    "external-event": "waiting-external",
    "clarification": "waiting-input",
    "credential": "waiting-input",
    "conversation.start": "waiting-input",
    "conversation.exchange": "waiting-input",
    "conversation.close": "waiting-input",
}


def status_for_kind(kind: str) -> RunStatus:
    # A kind the schema does not list cannot be raised (validate_payload); waiting-approval as before, to be safe.
    return KIND_STATUS.get(kind, "waiting-approval")


# Which waiting status a run shows while several interrupts are open at once, strongest first.
# run-snapshot.schema.json: "`waiting-external` MUST be used when the suspended interrupt's `kind` is
# `external-event`", so one open external-event gate makes the run waiting-external whatever else is open.
# The spec orders nothing else; waiting-approval is the catch-all status (approval, low-confidence, custom), so
# the more specific waiting-input outranks it (docs/adr/0011, "Status with several gates open").
STATUS_PRECEDENCE: tuple[RunStatus, ...] = ("waiting-external", "waiting-input", "waiting-approval")


def holding_interrupt(kinds: Iterable[tuple[str, str]]) -> tuple[str, RunStatus] | None:
    """Of the open interrupts, given as (node id, kind) in the order they were raised, the one that sets the run's
    status and that status: the highest in STATUS_PRECEDENCE, the earliest raised among equals; None if none."""
    best: tuple[str, RunStatus] | None = None
    for node_id, kind in kinds:
        status = status_for_kind(kind)
        if best is None or STATUS_PRECEDENCE.index(status) < STATUS_PRECEDENCE.index(best[1]):
            best = (node_id, status)
    return best
