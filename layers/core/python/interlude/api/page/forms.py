"""A gate's form both ways: from an interrupt's payload to what a page shows, and from a submitted form back to the
resume value.

Out: `gate_forms` turns a payload into `Form`s of `Field`s and `Button`s, a model that knows no markup; the macros of
templates/forms.html draw it, the same on the approval page and in the console (only the action, the hidden fields
and the ids' prefix differ). An approval offers its `actions` (refine and edit-accept fold their fields under a
disclosure); a clarification asks its questions; any other kind asks the top-level properties of its `resumeSchema`,
or for the whole value as JSON. `questions` says which key of the resume value each field answers; `field_of` is
the converter from one question's schema to a field, where a richer schema-to-fields converter plugs in.

Back: `resume_from_form` reads the same questions out of a submitted form, or says in a FormError what to fix.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from interlude.api import strict_json
from interlude.api.page.text import pretty

MAX_FORM_FIELDS = 200

ACTION_LABELS = {
    "accept": "Approve",
    "reject": "Reject",
    "ask": "Ask a question",
    "refine": "Request changes",
    "edit-accept": "Approve with my edits",
}
REFINE_SCOPES = (("whole", "The whole thing"), ("section", "One section"), ("items", "Some items"))
# The approval actions that need nothing but a press (and the optional comment), in the order they are offered.
SIMPLE_ACTIONS = ("accept", "reject", "ask")
COMMENT_MAX = 10_000
# A string field whose schema bounds it to this many characters or fewer is one line; longer, a text area.
ONE_LINE_MAX = 200


class FormError(ValueError):
    """A submitted form that does not make a resume value; the message is shown to the person."""


# -- the model the templates draw ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True)
class Field:
    """One control with its label. `name` is what the form posts; `value` fills it (a checkbox: checked when set);
    `error` is said beside it."""

    name: str
    label: str
    # text | textarea | json (a text area for JSON) | number | checkbox | select
    widget: str
    value: str = ""
    error: str | None = None
    required: bool = False
    max_length: int | None = None
    # number: "1" for whole numbers, "any" otherwise
    step: str | None = None
    choices: tuple[Choice, ...] = ()


@dataclass(frozen=True)
class Button:
    # The `action` the form posts when this button is pressed.
    value: str
    label: str
    # "" (the main action) | "reject" | "secondary"
    tone: str = ""


@dataclass(frozen=True)
class Form:
    fields: tuple[Field, ...]
    buttons: tuple[Button, ...]
    # Set: the form is folded away under a disclosure with this summary.
    folded: str | None = None


def gate_forms(payload: Mapping[str, Any]) -> list[Form]:
    """The forms a person answers this interrupt with."""
    if payload.get("kind") == "approval":
        return _approval_forms(payload)
    fields = tuple(field_of(q) for q in questions(payload))
    return [Form(fields, (Button("submit", "Send"),))]


def _approval_forms(payload: Mapping[str, Any]) -> list[Form]:
    data = payload.get("data") or {}
    actions = _offered_actions(payload)
    forms = []
    simple = [a for a in SIMPLE_ACTIONS if a in actions]
    if simple:
        comment = Field("feedback", "Comment (optional)", "textarea", max_length=COMMENT_MAX)
        buttons = tuple(Button(a, ACTION_LABELS[a], "reject" if a == "reject" else "") for a in simple)
        forms.append(Form((comment,), buttons))
    if "refine" in actions:
        scope = Field("refine_scope", "What should change", "select", choices=tuple(Choice(v, t) for v, t in REFINE_SCOPES))
        text = Field("refine_text", "What to change, and why", "textarea", required=True, max_length=COMMENT_MAX)
        forms.append(Form((scope, text), (Button("refine", ACTION_LABELS["refine"], "secondary"),), ACTION_LABELS["refine"]))
    if "edit-accept" in actions:
        current = pretty(data.get("artifactData")) if "artifactData" in data else ""
        edited = Field("edited", "The artifact as it should be (JSON)", "json", value=current, required=True)
        label = ACTION_LABELS["edit-accept"]
        forms.append(Form((edited,), (Button("edit-accept", label, "secondary"),), label))
    return forms


def _offered_actions(payload: Mapping[str, Any]) -> list[str]:
    return [a for a in (payload.get("data") or {}).get("actions") or [] if a in ACTION_LABELS]


# -- questions: which key of the resume value each field answers ---------------------------------------------


@dataclass(frozen=True)
class Question:
    name: str  # the form field's name: f0, f1, …
    key: str  # the resume value's key ("" for a whole-value JSON field)
    label: str
    schema: Mapping[str, Any]
    required: bool


def questions(payload: Mapping[str, Any]) -> list[Question]:
    schema = payload.get("resumeSchema") or {}
    if payload.get("kind") == "clarification":
        return _clarification_questions(payload.get("data") or {}, schema)
    props = schema.get("properties") if schema.get("type") == "object" else None
    if isinstance(props, dict) and props:
        required = set(schema.get("required") or [])
        return [
            Question(f"f{i}", key, str(sub.get("title") or key) if isinstance(sub, dict) else key, sub or {}, key in required)
            for i, (key, sub) in enumerate(props.items())
        ]
    return [Question("resume_json", "", "Your answer (JSON)", {"type": "json"}, True)]


def _clarification_questions(data: Mapping[str, Any], schema: Mapping[str, Any]) -> list[Question]:
    """A clarification's questions, each answered in its own field (all required)."""
    props = schema.get("properties") or {}
    return [
        Question(f"f{i}", q["id"], q.get("question") or q["id"], q.get("schema") or props.get(q["id"]) or {}, True)
        for i, q in enumerate(data.get("questions") or [])
    ]


def answer_kind(schema: Mapping[str, Any]) -> str:
    """enum | boolean | number | integer | string | json: how a value of this schema is asked for and read."""
    if isinstance(schema.get("enum"), list) and schema["enum"] and all(
        isinstance(v, str | int | float) and not isinstance(v, bool) for v in schema["enum"]
    ):
        return "enum"
    t = schema.get("type")
    if t in ("boolean", "number", "integer"):
        return str(t)
    if t == "string" or not schema:
        return "string"
    return "json"


def field_of(question: Question) -> Field:
    kind = answer_kind(question.schema)
    name, required = question.name, question.required
    if kind == "boolean":
        return Field(name, question.label, "checkbox")
    label = question.label if required else f"{question.label} (optional)"
    if kind == "enum":
        options = tuple(Choice(str(v), str(v)) for v in question.schema["enum"])
        return Field(name, label, "select", required=required, choices=options if required else (Choice("", ""), *options))
    if kind in ("number", "integer"):
        return Field(name, label, "number", required=required, step="1" if kind == "integer" else "any")
    if kind == "string":
        limit = question.schema.get("maxLength")
        if isinstance(limit, int) and limit <= ONE_LINE_MAX:
            return Field(name, label, "text", required=required, max_length=limit)
        return Field(name, label, "textarea", required=required)
    return Field(name, label, "json", required=required)


# -- from a submitted form to a resume value ---------------------------------------------------------------


def one(form: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = form.get(name)
    return values[0] if values else None


def resume_from_form(payload: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> Any:
    """The resume value a submitted form stands for; FormError when the form cannot make one."""
    if payload.get("kind") == "approval":
        return _approval_resume(payload, form)
    asked = questions(payload)
    if len(asked) == 1 and asked[0].key == "":
        return _json_field(one(form, asked[0].name), "your answer")
    value: dict[str, Any] = {}
    for q in asked:
        raw = one(form, q.name)
        kind = answer_kind(q.schema)
        if kind == "boolean":
            value[q.key] = raw is not None
            continue
        if raw is None or raw.strip() == "":
            if q.required:
                raise FormError(f"Please answer “{q.label}”.")
            continue
        value[q.key] = _coerce(raw, kind, q)
    return value


def _coerce(raw: str, kind: str, q: Question) -> Any:
    if kind == "enum":
        for option in q.schema["enum"]:
            if str(option) == raw:
                return option
        raise FormError(f"“{q.label}” must be one of the listed choices.")
    if kind == "integer":
        try:
            return int(raw.strip())
        except ValueError:
            raise FormError(f"“{q.label}” must be a whole number.") from None
    if kind == "number":
        try:
            number = float(raw.strip())
        except ValueError:
            raise FormError(f"“{q.label}” must be a number.") from None
        if not math.isfinite(number):
            raise FormError(f"“{q.label}” must be a number.")
        return int(number) if number.is_integer() and "." not in raw and "e" not in raw.lower() else number
    if kind == "json":
        return _json_field(raw, f"“{q.label}”")
    return raw


def _json_field(raw: str | None, what: str) -> Any:
    if raw is None or not raw.strip():
        raise FormError(f"Please fill in {what}.")
    try:
        return strict_json.loads(raw)
    except strict_json.StrictJsonError as exc:
        # Strict as a body: a page answer lands in the same event log as an API one.
        detail = "" if exc.field == "body" else f" (at {exc.field})"
        raise FormError(f"{what[0].upper()}{what[1:]} is not valid JSON{detail}.") from None


def _approval_resume(payload: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    actions = (payload.get("data") or {}).get("actions") or []
    action = one(form, "action")
    if action not in actions or action not in ACTION_LABELS:
        raise FormError("Choose one of the buttons this request offers.")
    value: dict[str, Any] = {"action": action}
    feedback = (one(form, "feedback") or "").strip()
    if feedback and action in SIMPLE_ACTIONS:
        value["feedback"] = feedback
    if action == "ask" and not feedback:
        raise FormError("Write your question in the comment box, then press “Ask a question”.")
    if action == "refine":
        value["refineFeedback"] = _refine_feedback(form)
    if action == "edit-accept":
        value["editedArtifactData"] = _json_field(one(form, "edited"), "the edited artifact")
    return value


def _refine_feedback(form: Mapping[str, Sequence[str]]) -> dict[str, str]:
    scope = one(form, "refine_scope") or "whole"
    if scope not in {v for v, _ in REFINE_SCOPES}:
        raise FormError("Choose what should change.")
    text = (one(form, "refine_text") or "").strip()
    if not text:
        raise FormError("Say what should change before requesting changes.")
    return {"scope": scope, "text": text}
