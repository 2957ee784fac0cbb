"""Build InterruptPayloads from gate configs and validate them against suspend-request.schema.json."""

from __future__ import annotations

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
            "feedback": {"type": "string", "maxLength": 10000},
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
