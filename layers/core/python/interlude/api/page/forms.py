"""A gate's form both ways: from an interrupt's payload to what a page shows, and from a submitted form back to the
resume value.

Out: `gate_forms` turns a payload into `Form`s of `Field`s and `Button`s, a model that knows no markup; the macros of
templates/forms.html draw it, the same on the approval page and in the console (only the action, the hidden fields
and the ids' prefix differ). An approval offers its `actions` (refine and edit-accept fold their fields under a
disclosure; edit-accept asks the artifact field by field); every other kind asks what its answer's schema asks
(`asked`): a clarification its questions, a ModuleX interrupt its `resume_schema` (with its `examples` as buttons that
fill the form in), a conversation turn its `outcomeSchema`, any other kind its `resumeSchema`; without a schema, a
text answer (or JSON, under "Advanced"). fields.py turns each schema into fields.

Back: `resume_from_form` reads the same questions out of a submitted form and checks the value against the schema it
was drawn from, or raises a FormError that says what to fix beside each field. `Answer` carries what was posted (and
what was wrong) into the next drawing, so nothing a person typed is lost.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from interlude.api.page.fields import (
    Choice,
    Field,
    defaults_of,
    draw,
    posted_of,
    posted_of_object,
    read,
    read_object,
)
from interlude.api.page.posted import one
from interlude.domain.errors import Invalid
from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.rules.answer_schema import (
    MAX_CONTROLS,
    MISSING,
    Ask,
    Asked,
    asked,
    check,
    count_controls,
    field_at,
    relabelled,
    schema_asked,
)

__all__ = ["Answer", "Button", "Choice", "Field", "Form", "FormError", "gate_forms", "resume_from_form"]

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
EXAMPLE_FIELD = "example"
# An artifact's text up to this long, on one line, is edited in a one-line field.
ONE_LINE_ARTIFACT = 80


class FormError(ValueError):
    """A submitted form that does not make a resume value: the message for the page, and what to fix beside each
    field (by the field's name)."""

    def __init__(self, message: str, fields: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.fields = dict(fields or {})

    def as_refusal(self) -> Invalid:
        """This form's problem as an API client is told it (http.refused_as_asked): what to fix beside each field, by
        the field's name."""
        return Invalid(str(self), {"fields": self.fields} if self.fields else None)


# -- the model the templates draw ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Button:
    # What the form posts under `name` when this button is pressed.
    value: str
    label: str
    # "" (the main action) | "reject" | "secondary"
    tone: str = ""
    name: str = "action"


@dataclass(frozen=True)
class Form:
    fields: tuple[Field, ...]
    buttons: tuple[Button, ...]
    # Set: the form is folded away under a disclosure with this summary (`opened`: unfolded, it has something to say).
    folded: str | None = None
    opened: bool = False
    # A sentence above the form's buttons.
    intro: str | None = None


@dataclass(frozen=True)
class Answer:
    """What a form is filled with: a person's submitted form (with what was wrong), or an example."""

    posted: Mapping[str, Sequence[str]]
    errors: Mapping[str, str] = field(default_factory=dict)
    # The example it was filled in from, by the words on its button.
    example: str | None = None


def gate_forms(payload: Mapping[str, Any], answer: Answer | None = None, labels: Mapping[str, str] | None = None) -> list[Form]:
    """The forms a person answers this interrupt with; `labels` (a gate's `fieldLabels`) name its fields by dotted
    path: an approval's artifact's, any other kind's questions."""
    if payload.get("kind") == "approval":
        return _approval_forms(payload, answer, labels or {})
    spec = asked(payload)
    posted = answer.posted if answer is not None else defaults_of(spec.asks)
    errors = answer.errors if answer is not None else {}
    drawn = tuple(draw(a, posted, errors) for a in relabelled(spec.asks, labels or {}))
    forms = []
    examples = examples_of(payload)
    if examples:
        buttons = tuple(Button(str(i), label, "secondary", EXAMPLE_FIELD) for i, (label, _) in enumerate(examples))
        intro = "Start from an example, then check it and send:"
        if answer is not None and answer.example is not None:
            intro = f"Filled in from “{answer.example}”: check it, change what you need, then send. Or start from another:"
        forms.append(Form((), buttons, intro=intro))
    forms.append(Form(drawn, (Button("submit", "Send"),)))
    return forms


def _approval_forms(payload: Mapping[str, Any], answer: Answer | None, labels: Mapping[str, str]) -> list[Form]:
    data = payload.get("data") or {}
    actions = _offered_actions(payload)
    posted = answer.posted if answer is not None else {}
    errors = answer.errors if answer is not None else {}
    said = _said(posted, errors)
    forms = []
    simple = [a for a in SIMPLE_ACTIONS if a in actions]
    if simple:
        comment = Field("feedback", "Comment (optional)", "textarea", max_length=COMMENT_MAX, **said("feedback"))
        buttons = tuple(Button(a, ACTION_LABELS[a], "reject" if a == "reject" else "") for a in simple)
        forms.append(Form((comment,), buttons))
    if "refine" in actions:
        scope = Field("refine_scope", "What should change", "select", choices=tuple(Choice(v, t) for v, t in REFINE_SCOPES), **said("refine_scope"))
        text = Field("refine_text", "What to change, and why", "textarea", required=True, max_length=COMMENT_MAX, **said("refine_text"))
        label = ACTION_LABELS["refine"]
        forms.append(Form((scope, text), (Button("refine", label, "secondary"),), label, _has_error((scope, text))))
    if "edit-accept" in actions:
        artifact = data.get("artifactData", MISSING)
        asks, whole = artifact_asks(artifact, labels)
        filled = posted if answer is not None else _posted_answer(asks, whole, artifact)
        edited = tuple(draw(a, filled, errors) for a in asks)
        label = ACTION_LABELS["edit-accept"]
        forms.append(Form(edited, (Button("edit-accept", label, "secondary"),), label, _has_error(edited)))
    return forms


def _said(posted: Mapping[str, Sequence[str]], errors: Mapping[str, str]) -> Any:
    def said(name: str) -> dict[str, Any]:
        values = posted.get(name)
        return {"value": values[0] if values else "", "error": errors.get(name)}

    return said


def _has_error(fields: Sequence[Field]) -> bool:
    return any(f.error or _has_error(f.fields) for f in fields)


def _offered_actions(payload: Mapping[str, Any]) -> list[str]:
    return [a for a in (payload.get("data") or {}).get("actions") or [] if a in ACTION_LABELS]


# -- what a kind asks (rules/answer_schema.asked) ------------------------------------------------------------


def examples_of(payload: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A ModuleX interrupt's `examples` as (button words, value): a mapping by its names, a list in its order."""
    data = payload.get("data") or {}
    if payload.get("kind") != "custom" or data.get("customKind") != MODULEX_INTERRUPT_KIND:
        return []
    examples = (data.get("payload") or {}).get("examples")
    if isinstance(examples, Mapping):
        return [(str(name), value) for name, value in examples.items()][:20]
    if isinstance(examples, list):
        return [(_example_words(i, v), v) for i, v in enumerate(examples)][:20]
    return []


def _example_words(i: int, value: Any) -> str:
    if isinstance(value, str | int | float) and not isinstance(value, bool) and len(str(value)) <= 40:
        return str(value)
    return f"Example {i + 1}"


def example_answer(payload: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> Answer | None:
    """The form filled in from the example a person pressed; None when the form did not press one."""
    chosen = one(form, EXAMPLE_FIELD)
    if chosen is None:
        return None
    examples = examples_of(payload)
    # Only the indexes the buttons carry: str.isdigit() also passes "²", which int() refuses.
    index = int(chosen) if re.fullmatch(r"[0-9]{1,2}", chosen) else len(examples)
    if index >= len(examples):
        raise FormError("Choose one of the examples shown.")
    words, value = examples[index]
    return Answer(posted_from(asked(payload), value), example=words)


def posted_from(spec: Asked, value: Any) -> dict[str, list[str]]:
    """The form filled in with `value`: a free answer's text (or its JSON), the one field, or a field per key."""
    if spec.free:
        return posted_of(spec.asks[0] if isinstance(value, str) else spec.asks[1], value)
    return _posted_answer(spec.asks, spec.whole, value)


def _read_answer(asks: Sequence[Ask], whole: bool, form: Mapping[str, Sequence[str]], errors: dict[str, str]) -> Any:
    return read(asks[0], form, errors) if whole else read_object(asks, form, errors)


# -- the artifact, field by field -------------------------------------------------------------------------------


def artifact_asks(artifact: Any, labels: Mapping[str, str]) -> tuple[tuple[Ask, ...], bool]:
    """The fields that edit an approval's artifact, one per key in the author's order (a nested object as a group),
    and whether the one field is the whole artifact (a value that is no object, or too large to ask key by key)."""
    if isinstance(artifact, Mapping) and artifact:
        asks = tuple(_inferred(v, f"e{i}", (str(k),), labels, 0) for i, (k, v) in enumerate(artifact.items()))
        if count_controls(asks) <= MAX_CONTROLS:
            return asks, False
        return (_inferred(dict(artifact), "edited", (), labels, 1),), True
    return (_inferred(artifact, "edited", (), labels, 1),), True


def _inferred(value: Any, name: str, key: tuple[str, ...], labels: Mapping[str, str], depth: int) -> Ask:
    """How one value of the artifact is edited: by the type of what it holds now."""
    label = labels.get(".".join(key)) or (key[-1] if key else "The artifact")
    if isinstance(value, bool):
        return Ask(name, key, label, {"type": "boolean"}, True, "boolean")
    if isinstance(value, int | float):
        return Ask(name, key, label, {"type": "number"}, True, "number")
    if isinstance(value, str):
        kind = "text" if len(value) <= ONE_LINE_ARTIFACT and "\n" not in value else "textarea"
        return Ask(name, key, label, {"type": "string"}, True, kind, blank="")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return Ask(name, key, label, {"type": "array", "items": {"type": "string"}}, True, "lines", blank=[])
    if isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        return Ask(name, key, label, {"type": "array", "items": {"type": "number"}}, True, "lines", blank=[])
    if isinstance(value, Mapping) and value and depth == 0:
        parts = tuple(_inferred(v, f"{name}_{i}", (*key, str(k)), labels, 1) for i, (k, v) in enumerate(value.items()))
        return Ask(name, key, label, {"type": "object"}, True, "group", parts)
    return Ask(name, key, label, {}, True, "json")


def _posted_answer(asks: Sequence[Ask], whole: bool, value: Any) -> dict[str, list[str]]:
    return posted_of(asks[0], value) if whole else posted_of_object(asks, value)


# -- from a submitted form to a resume value ---------------------------------------------------------------


NEEDS_ANOTHER_LOOK = "Some answers need another look; each says why beside it."


def resume_from_form(payload: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> Any:
    """The resume value a submitted form stands for; FormError when the form cannot make one."""
    if payload.get("kind") == "approval":
        return _approval_resume(payload, form)
    spec = asked(payload)
    errors: dict[str, str] = {}
    value = _free_answer(spec, form, errors) if spec.free else _read_answer(spec.asks, spec.whole, form, errors)
    if not errors and spec.schema is not None:
        check(spec.schema, value, spec.asks, errors)
    if errors:
        raise FormError(NEEDS_ANOTHER_LOOK, errors)
    return value


# -- a form from a schema alone (the console's Start run: a workflow's declared inputs) ------------------------


def schema_form(schema: Mapping[str, Any], answer: Answer | None, button: Button) -> Form:
    """The fields that ask `schema`, drawn as a gate's answer is (its defaults filled in, or what was sent with
    what was wrong beside it)."""
    spec = schema_asked(schema)
    posted = answer.posted if answer is not None else defaults_of(spec.asks)
    errors = answer.errors if answer is not None else {}
    return Form(tuple(draw(a, posted, errors) for a in spec.asks), (button,))


def value_from_form(schema: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> Any:
    """The value a form drawn by `schema_form` stands for, checked against the schema; FormError otherwise."""
    spec = schema_asked(schema)
    errors: dict[str, str] = {}
    value = _read_answer(spec.asks, spec.whole, form, errors)
    if not errors:
        check(spec.schema or schema, value, spec.asks, errors)
    if errors:
        raise FormError(NEEDS_ANOTHER_LOOK, errors)
    return value


def _free_answer(spec: Asked, form: Mapping[str, Sequence[str]], errors: dict[str, str]) -> Any:
    text, raw = spec.asks
    as_json = read(raw, form, errors)
    if as_json is not MISSING or errors:
        return as_json
    value = read(text, form, errors)
    if value is MISSING:
        errors[text.name] = "Please write your answer."
    return value


def _approval_resume(payload: Mapping[str, Any], form: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    data = payload.get("data") or {}
    actions = data.get("actions") or []
    # A page posts only the button pressed: a form naming two decisions says neither (the first is not taken for it).
    chosen = form.get("action") or []
    action = chosen[0] if len(chosen) == 1 else None
    if action not in actions or action not in ACTION_LABELS:
        raise FormError("Choose one of the buttons this request offers.")
    value: dict[str, Any] = {"action": action}
    feedback = (one(form, "feedback") or "").strip()
    if feedback and action in SIMPLE_ACTIONS:
        value["comment"] = feedback  # the comment's one name on every surface (issue 28, item 4)
    if action == "ask" and not feedback:
        raise FormError("Write your question in the comment box, then press “Ask a question”.", {"feedback": "Write your question here."})
    if action == "refine":
        value["refineFeedback"] = _refine_feedback(form)
    if action == "edit-accept":
        value["editedArtifactData"] = _edited_artifact(data.get("artifactData", MISSING), form)
    return value


def _refine_feedback(form: Mapping[str, Sequence[str]]) -> dict[str, str]:
    scope = one(form, "refine_scope") or "whole"
    if scope not in {v for v, _ in REFINE_SCOPES}:
        raise FormError(NEEDS_ANOTHER_LOOK, {"refine_scope": "Choose what should change."})
    text = (one(form, "refine_text") or "").strip()
    if not text:
        raise FormError(NEEDS_ANOTHER_LOOK, {"refine_text": "Say what should change before requesting changes."})
    return {"scope": scope, "text": text}


def _edited_artifact(artifact: Any, form: Mapping[str, Sequence[str]]) -> Any:
    asks, whole = artifact_asks(artifact, {})
    errors: dict[str, str] = {}
    edited = _read_answer(asks, whole, form, errors)
    if errors:
        raise FormError(NEEDS_ANOTHER_LOOK, errors)
    return edited


# -- what the service refused, said beside the fields ---------------------------------------------------------

# Protocol words the service's refusals may use, as a person reads them.
PLAIN_WORDS = (
    ("resumeValue", "the answer"),
    ("resumeSchema", "the form"),
    ("outcomeSchema", "the form"),
    ("refineFeedback", "the requested changes"),
    ("editedArtifactData", "the edits"),
)
CREDENTIAL_WORDS = "This looks like a password, token or key. Never send one through a request; leave it out."


def refusal(payload: Mapping[str, Any], message: str, details: Mapping[str, Any] | None) -> FormError:
    """The service's `validation_error` for a page's answer, as the form says it: each schema failure beside the
    field its path names, credential material beside the field that holds it, anything else in plain words."""
    details = details or {}
    fields: dict[str, str] = {}
    for problem in details.get("errors") or []:
        target = _field_of_path(payload, str(problem.get("path") or ""))
        if target is not None:
            fields.setdefault(target, "This answer is not accepted here.")
    if isinstance(details.get("path"), str):
        target = _field_of_path(payload, details["path"])
        if target is not None:
            fields[target] = CREDENTIAL_WORDS
    if fields:
        return FormError(NEEDS_ANOTHER_LOOK, fields)
    return FormError(in_plain_words(message))


def in_plain_words(message: str) -> str:
    """A service's refusal as a sentence a person reads: its protocol words replaced."""
    for word, plain in PLAIN_WORDS:
        message = message.replace(word, plain)
    return message[:1].upper() + message[1:] + ("" if message.endswith(".") else ".")


def _field_of_path(payload: Mapping[str, Any], path: str) -> str | None:
    """The field that holds the value at `path` ("a/b") of the resume value."""
    keys = [p for p in path.split("/") if p]
    if payload.get("kind") != "approval":
        return field_at(asked(payload).asks, keys)
    if keys[:1] == ["editedArtifactData"]:
        return field_at(artifact_asks((payload.get("data") or {}).get("artifactData", MISSING), {})[0], keys[1:])
    return "feedback" if keys[:1] in (["feedback"], ["comment"]) else None
