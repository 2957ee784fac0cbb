"""How a JSON Schema is asked of a person, whatever draws it (the answer page, a Slack modal): which control each
property becomes (`ask_of` reads a schema once into an `Ask` tree), its label (`title`, else the key), whether it is
required, its choices and bounds; and the schema validator's refusals placed beside the field they concern, in words
(`check`). Pure: no markup, no HTTP. The page's fields (api/page/fields.py) and the Slack modal (rules/slack_forms.py)
both read it, so a gate's form asks the same on every surface.

Asked: `type` string (one line when `maxLength` is short, or it has a `pattern` or a `format`: email, date,
date-time, uri), number, integer, boolean, object (one level deep, as a group), array of primitives (one item a
line; an array of choices as check boxes); `enum` and `const`; `title`, `description`, `default`,
`minimum`/`maximum`, `minLength`/`maxLength`, `pattern`, `required`, `readOnly`. Anything else is asked as JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from interlude.domain.ids import MODULEX_INTERRUPT_KIND
from interlude.rules.wording import as_written

# A string field whose schema bounds it to this many characters or fewer is one line; longer, a text area.
ONE_LINE_MAX = 200
# How many controls one answer may draw before it is asked as JSON instead (a form posts at most forms.MAX_FORM_FIELDS).
MAX_CONTROLS = 150
FORMAT_INPUTS = {"email": "email", "date": "date", "date-time": "datetime-local", "uri": "url"}
FORMAT_WORDS = {
    "email": "an e-mail address",
    "date": "a date",
    "date-time": "a date and time",
    "uri": "a web address, with https:// in front",
}
TYPE_WORDS = {
    "string": "text",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "yes or no",
    "object": "a group of answers",
    "array": "a list",
    "null": "left empty",
}
EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
PRIMITIVE_TYPES = ("string", "number", "integer")
REPEATED_ANSWER = "The form sent more than one answer here; give one."
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()


@dataclass(frozen=True)
class Ask:
    """One question of a form: the control that asks it, the name it posts and the key of the value it answers."""

    name: str
    key: tuple[str, ...]
    label: str
    schema: Mapping[str, Any]
    required: bool
    # text | email | url | date | datetime-local | number | integer | textarea | boolean | choice | choices | lines |
    # group | json | fixed
    kind: str
    parts: tuple[Ask, ...] = ()
    # What a blank answer reads as (MISSING: the key is left out): an edited artifact keeps its empty strings.
    blank: Any = MISSING
    choice_words: Mapping[str, str] = field(default_factory=dict)
    hint: str | None = None


def ask_of(
    schema: Any,
    name: str,
    label: str,
    required: bool,
    key: tuple[str, ...] = (),
    depth: int = 0,
    choice_words: Mapping[str, str] | None = None,
) -> Ask:
    """How `schema` is asked: `depth` 0 may be a group, 1 may not (an object inside a group is asked as JSON)."""
    schema = schema if isinstance(schema, Mapping) else {}
    title = schema.get("title")
    label = str(title) if isinstance(title, str) and title.strip() else label
    hint = schema.get("description") if isinstance(schema.get("description"), str) else None
    kind = _kind(schema, depth)
    parts: tuple[Ask, ...] = ()
    if kind == "group":
        needed = set(_strings(schema.get("required")))
        parts = tuple(
            ask_of(sub, f"{name}_{i}", str(prop), prop in needed, (*key, str(prop)), depth + 1)
            for i, (prop, sub) in enumerate(schema["properties"].items())
        )
    return Ask(name, key, label, schema, required, kind, parts, choice_words=choice_words or {}, hint=hint)


def _kind(schema: Mapping[str, Any], depth: int) -> str:
    if schema.get("readOnly") is True or "const" in schema:
        return "fixed"
    if _is_choice_list(schema.get("enum")):
        return "choice"
    kind = type_of(schema)
    if kind == "string":
        fmt = schema.get("format")
        if fmt in FORMAT_INPUTS:
            return FORMAT_INPUTS[fmt]
        limit = schema.get("maxLength")
        short = (isinstance(limit, int) and limit <= ONE_LINE_MAX) or "pattern" in schema
        return "text" if short else "textarea"
    if kind in ("number", "integer", "boolean"):
        return kind
    if kind == "object" and depth == 0 and isinstance(schema.get("properties"), Mapping) and schema["properties"]:
        return "group"
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        if _is_choice_list(items.get("enum")):
            return "choices"
        if type_of(items) in PRIMITIVE_TYPES and not items.get("format"):
            return "lines"
    return "json"


def type_of(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        # ["string", "null"]: asked as a string that may be left out.
        named = [k for k in kind if k != "null"]
        kind = named[0] if len(named) == 1 else None
    if kind is None and isinstance(schema.get("properties"), Mapping):
        return "object"
    return kind if isinstance(kind, str) else None


def _is_choice_list(values: Any) -> bool:
    return (
        isinstance(values, list)
        and bool(values)
        and all(isinstance(v, str | int | float) for v in values)
        and len({as_written(v) for v in values}) == len(values)
    )


def _strings(values: Any) -> list[str]:
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []


def count_controls(asks: Sequence[Ask]) -> int:
    return sum(count_controls(a.parts) if a.parts else 1 for a in asks)


def fixed_value(ask: Ask) -> Any:
    if "const" in ask.schema:
        return ask.schema["const"]
    return ask.schema.get("default", MISSING)


def number_of(raw: str, kind: str) -> int | float:
    text = raw.strip()
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("Must be a whole number.") from None
    try:
        number = float(text)
    except ValueError:
        raise ValueError("Must be a number.") from None
    if not math.isfinite(number):
        raise ValueError("Must be a number.")
    # As written: 812 stays an integer, 812.0 a number.
    return int(text) if re.fullmatch(r"[+-]?\d+", text) else number


# A JSON number as a person may type it into a number field (`1.50`, `1e3`).


# -- reading a form back ------------------------------------------------------------------------------------------


def read(
    ask: Ask, posted: Mapping[str, Sequence[str]], errors: dict[str, str], parse_json: Callable[[str], Any] | None = None
) -> Any:
    """What `ask` was answered with (MISSING: left out); a problem goes into `errors` under the field's name.
    `parse_json` reads a field asked as JSON (the page's strict parser; None: no JSON answer is taken)."""
    kind = ask.kind
    if kind == "group":
        got = read_object(ask.parts, posted, errors, parse_json)
        return got if got or ask.required else MISSING
    if kind == "fixed":
        return fixed_value(ask)
    if kind == "choices":
        picked = set(posted.get(ask.name) or ())
        chosen = [v for v in ask.schema["items"]["enum"] if as_written(v) in picked]
        if len(chosen) < len(picked):
            errors[ask.name] = "Choose among the listed options."
        return chosen if chosen or ask.required else MISSING
    if len(posted.get(ask.name) or ()) > 1:
        # A crafted form, never a page's: its first value is not taken for the answer (api/page/posted.py).
        errors[ask.name] = REPEATED_ANSWER
        return MISSING
    raw = first_posted(posted, ask.name)
    if not raw.strip():
        if ask.blank is not MISSING:
            return ask.blank
        if ask.required:
            errors[ask.name] = "Please answer this."
        return MISSING
    try:
        return _coerce(ask, raw, parse_json)
    except ValueError as exc:
        errors[ask.name] = str(exc)
        return MISSING


def read_object(
    asks: Sequence[Ask],
    posted: Mapping[str, Sequence[str]],
    errors: dict[str, str],
    parse_json: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """An object of what each ask was answered with, under its key, in the asks' order (keys left out stay out)."""
    got: dict[str, Any] = {}
    for ask in asks:
        value = read(ask, posted, errors, parse_json)
        if value is not MISSING:
            got[ask.key[-1]] = value
    return got


def _coerce(ask: Ask, raw: str, parse_json: Callable[[str], Any] | None) -> Any:
    kind, schema = ask.kind, ask.schema
    if kind == "boolean":
        if raw in ("true", "false"):
            return raw == "true"
        raise ValueError("Choose yes or no.")
    if kind == "choice":
        for option in schema["enum"]:
            if as_written(option) == raw:
                return option
        raise ValueError("Choose one of the listed options.")
    if kind in ("number", "integer"):
        return number_of(raw, kind)
    if kind == "lines":
        item_kind = type_of(schema["items"])
        items = [line.strip() for line in raw.splitlines() if line.strip()]
        return items if item_kind == "string" else [number_of(item, str(item_kind)) for item in items]
    if kind == "json":
        if parse_json is None:
            raise ValueError("This answer cannot be given here.")
        return parse_json(raw)
    if kind == "datetime-local":
        return _date_time(raw)
    _check_format(schema.get("format"), raw)
    return raw


def first_posted(posted: Mapping[str, Sequence[str]], name: str) -> str:
    values = posted.get(name)
    return values[0] if values else ""


def _date_time(raw: str) -> str:
    text = raw.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"Must be {FORMAT_WORDS['date-time']}.") from None
    if moment.tzinfo is None:
        # A datetime-local control has no zone; the label says UTC.
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat().replace("+00:00", "Z")


def _check_format(fmt: Any, raw: str) -> None:
    if fmt == "email" and not EMAIL_RE.fullmatch(raw.strip()):
        raise ValueError(f"Must be {FORMAT_WORDS['email']}.")
    if fmt == "date":
        try:
            date.fromisoformat(raw.strip())
        except ValueError:
            raise ValueError(f"Must be {FORMAT_WORDS['date']}.") from None
    if fmt == "uri":
        parts = urlsplit(raw.strip())
        if not parts.scheme or not (parts.netloc or parts.path):
            raise ValueError(f"Must be {FORMAT_WORDS['uri']}.")

# -- what a kind of gate asks ----------------------------------------------------------------------------------

# The words a kind's fixed schema is asked in: (kind, key) -> (label, {value: words}).
KIND_WORDS: dict[tuple[str, str], tuple[str, dict[str, str]]] = {
    ("credential", "outcome"): ("Did you connect the account?", {"authorized": "Yes, I connected it", "declined": "No, I decline"}),
    ("low-confidence", "action"): ("Your decision", {"accept": "Let the agent's decision stand", "reject": "Reject it"}),
    ("low-confidence", "decision"): ("A different decision", {}),
    ("low-confidence", "comment"): ("Comment", {}),
}
# A schema-less answer: text, or JSON under "Advanced".
TEXT_ANSWER = "answer"
JSON_ANSWER = "answer_json"


@dataclass(frozen=True)
class Asked:
    """The questions of a non-approval interrupt: the answer is an object keyed by them, or (`whole`) the one
    question's value; `schema` is what the answer is checked against; `free`: no schema, a text or JSON answer."""

    asks: tuple[Ask, ...]
    whole: bool
    schema: Mapping[str, Any] | None
    free: bool = False


def asked(payload: Mapping[str, Any]) -> Asked:
    kind = str(payload.get("kind"))
    data = payload.get("data") or {}
    if kind == "clarification":
        return _clarification(data, payload.get("resumeSchema"))
    schema = answer_schema(payload)
    if schema is None:
        text = Ask(TEXT_ANSWER, (), "Your answer", {"type": "string"}, False, "textarea")
        raw = Ask(JSON_ANSWER, (), "Or answer with JSON instead", {}, False, "json")
        return Asked((text, raw), True, None, free=True)
    return schema_asked(schema, kind)


def field_labels(config: Mapping[str, Any]) -> dict[str, str]:
    """A gate's `fieldLabels` (any gate type): what a person reads for each field of its artifact and its form."""
    # A ModuleX interrupt's config keeps ModuleX's spelling (field_labels).
    labels = config.get("fieldLabels", config.get("field_labels"))
    return {str(k): str(v) for k, v in labels.items() if isinstance(v, str)} if isinstance(labels, Mapping) else {}


def relabelled(asks: Sequence[Ask], labels: Mapping[str, str]) -> tuple[Ask, ...]:
    """`asks` with the gate's own words for them (its `fieldLabels`, by dotted path) in place of the schema's or the
    key's."""
    if not labels:
        return tuple(asks)
    return tuple(
        replace(a, label=labels.get(".".join(a.key)) or a.label, parts=relabelled(a.parts, labels)) for a in asks
    )


def schema_asked(schema: Mapping[str, Any], kind: str = "") -> Asked:
    """What a JSON Schema asks: an object's properties each in its own field, anything else in one."""
    props = schema.get("properties")
    if schema.get("type") == "object" and isinstance(props, Mapping) and props:
        required = set(schema.get("required") or [])
        asks = tuple(_ask_of(kind, key, sub, f"f{i}", key in required) for i, (key, sub) in enumerate(props.items()))
        if count_controls(asks) <= MAX_CONTROLS:
            return Asked(asks, False, schema)
        return Asked((ask_of({}, "f0", "Your answer", True),), True, schema)
    return Asked((ask_of(schema, "f0", "Your answer", True, depth=1),), True, schema)


def _ask_of(kind: str, key: str, schema: Any, name: str, required: bool) -> Ask:
    label, words = KIND_WORDS.get((kind, key), (key, {}))
    return ask_of(schema, name, label, required, (key,), choice_words=words)


def answer_schema(payload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON Schema the answer is asked from: a ModuleX interrupt's `resume_schema`, a conversation turn's
    `outcomeSchema`, else the payload's `resumeSchema`; None when there is none (or it is no JSON Schema)."""
    data = payload.get("data") or {}
    schema = payload.get("resumeSchema")
    if payload.get("kind") == "custom" and data.get("customKind") == MODULEX_INTERRUPT_KIND:
        schema = (data.get("payload") or {}).get("resume_schema")
    elif payload.get("kind") == "conversation.exchange":
        schema = data.get("outcomeSchema") or schema
    return schema if schema and is_schema(schema) else None


def _clarification(data: Mapping[str, Any], schema: Any) -> Asked:
    """A clarification's questions, each answered in its own field (its schema, else a line of text)."""
    props = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    asks = tuple(
        ask_of(q.get("schema") or props.get(q["id"]) or {"type": "string", "minLength": 1}, f"f{i}", str(q.get("question") or q["id"]), q["id"] in required, (q["id"],))
        for i, q in enumerate(data.get("questions") or [])
    )
    return Asked(asks, False, schema if schema and is_schema(schema) else None)


# -- the validator's refusals beside their fields --------------------------------------------------------------


def check(schema: Mapping[str, Any], value: Any, asks: Sequence[Ask], errors: dict[str, str]) -> None:
    """Validate `value` against `schema` and put each refusal, in words, beside the field it concerns (the field
    whose key is the longest start of the refusal's path; else the first field)."""
    validator = validator_of(schema)
    if validator is None:
        return
    for error in validator.iter_errors(value):
        path = tuple(str(p) for p in error.absolute_path)
        if error.validator == "required" and isinstance(error.instance, Mapping):
            missing = [p for p in _strings(error.validator_value) if p not in error.instance]
            path = (*path, missing[0]) if missing else path
        target = field_at(asks, path)
        if target is not None and target not in errors:
            errors[target] = in_words(error)


def field_at(asks: Sequence[Ask], path: Sequence[str]) -> str | None:
    """The name of the field answering the value at `path` (the deepest whose key starts it); the first field when
    none does."""
    best: Ask | None = None
    for ask in _leaves_and_groups(asks):
        if tuple(path[: len(ask.key)]) == ask.key and (best is None or len(ask.key) > len(best.key)):
            best = ask
    if best is None and asks:
        best = asks[0]
    return best.name if best is not None else None


def _leaves_and_groups(asks: Sequence[Ask]) -> list[Ask]:
    out: list[Ask] = []
    for ask in asks:
        out.append(ask)
        out.extend(_leaves_and_groups(ask.parts))
    return out


def validator_of(schema: Mapping[str, Any]) -> Any:
    """A validator for `schema`, or None when it is not a JSON Schema (nothing can be checked against it)."""
    try:
        return _validator_of(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError):
        return None


@lru_cache(maxsize=256)
def _validator_of(schema_text: str) -> Any:
    # Built once per schema text: a gate's schema is the same for every page that draws or reads its form.
    from jsonschema import Draft202012Validator  # first use only (cold starts)
    from jsonschema.exceptions import SchemaError

    schema = json.loads(schema_text)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def is_schema(schema: Any) -> bool:
    return isinstance(schema, Mapping) and validator_of(schema) is not None


def in_words(error: Any) -> str:
    """One validator refusal as a person reads it, never the validator's own sentence."""
    keyword, bound = error.validator, error.validator_value
    shown = as_written(bound) if isinstance(bound, int | float) and not isinstance(bound, bool) else ""
    words = {
        "minimum": f"Must be at least {shown}.",
        "exclusiveMinimum": f"Must be more than {shown}.",
        "maximum": f"Must be at most {shown}.",
        "exclusiveMaximum": f"Must be less than {shown}.",
        "multipleOf": f"Must be a multiple of {shown}.",
        "minLength": "Please answer this." if bound == 1 else f"Must be at least {shown} characters long.",
        "maxLength": f"Must be at most {shown} characters long.",
        "pattern": "This is not in the form this answer needs.",
        "enum": "Choose one of the listed options.",
        "const": "Choose one of the listed options.",
        "required": "Please answer this.",
        "minItems": f"Give at least {shown}.",
        "maxItems": f"Give at most {shown}.",
        "uniqueItems": "Give each item once.",
    }
    if keyword in words:
        return words[keyword]
    if keyword == "format":
        return f"Must be {FORMAT_WORDS.get(str(bound), 'in the expected form')}."
    if keyword == "type":
        wanted = bound if isinstance(bound, str) else next((t for t in bound if t != "null"), "")
        return f"Must be {TYPE_WORDS.get(str(wanted), 'another kind of answer')}."
    return "This answer is not accepted here."
