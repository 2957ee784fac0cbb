"""From a JSON Schema to the fields a person fills in, and from what they posted back to a value, with each problem
said beside its field in plain words.

`rules/answer_schema.ask_of` reads a schema once into an `Ask` tree (which control, which posted name, which key of
the value) and places the schema validator's refusals beside the fields (`check`); here the same tree draws the
fields (`draw`), reads a submitted form (`read`) and fills a form from a value (`posted_of`: defaults, an example,
an artifact to edit). Names are positional (`f0`, `f0_1`), never a key, so no key can collide with the form's own fields.

Drawn: `type` string (one line when `maxLength` is short, or it has a `pattern` or a `format`: email, date, date-time, uri), number,
integer, boolean (yes / no, unselected until chosen unless it has a default), object (one level deep, as a group),
array of primitives (one item a line; an array of choices as check boxes); `enum` and `const`; `title`,
`description`, `default`, `minimum`/`maximum`, `minLength`/`maxLength`, `pattern`, `required`, `readOnly`. Anything
else is asked as JSON, folded under "Advanced".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from interlude.api import strict_json
from interlude.domain import written_numbers
from interlude.rules import answer_schema
from interlude.rules.answer_schema import MISSING, Ask, first_posted, fixed_value
from interlude.rules.wording import as_written

# -- the model the templates draw ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    value: str
    label: str


@dataclass(frozen=True)
class Field:
    """One control with its label. `name` is what the form posts; `value` fills it (`values`: the boxes checked);
    `error` is said beside it, `hint` under its label."""

    name: str
    label: str
    # text | email | url | date | datetime-local | number | textarea | lines | select | radio | checkboxes | group |
    # json | shown (read only)
    widget: str
    value: str = ""
    error: str | None = None
    required: bool = False
    max_length: int | None = None
    # number: "1" for whole numbers, "any" otherwise
    step: str | None = None
    choices: tuple[Choice, ...] = ()
    hint: str | None = None
    min_length: int | None = None
    minimum: str | None = None
    maximum: str | None = None
    values: tuple[str, ...] = ()
    # group: the fields it holds
    fields: tuple[Field, ...] = ()
    # json: folded under "Advanced" (open when it must be answered or has something to say)
    advanced: bool = False


# -- drawing ------------------------------------------------------------------------------------------------------


def draw(ask: Ask, posted: Mapping[str, Sequence[str]], errors: Mapping[str, str]) -> Field:
    """The field that asks `ask`, filled with what was posted (or prefilled) and its error, if any."""
    label = ask.label
    common: dict[str, Any] = {"error": errors.get(ask.name), "hint": ask.hint}
    given = first_posted(posted, ask.name)
    kind, schema = ask.kind, ask.schema
    if kind == "group":
        parts = tuple(draw(p, posted, errors) for p in ask.parts)
        return Field(ask.name, label, "group", fields=parts, required=ask.required, **common)
    if kind == "fixed":
        fixed = fixed_value(ask)
        return Field(ask.name, label, "shown", value="" if fixed is MISSING else as_written(fixed), **common)
    shown = label if ask.required else f"{label} (optional)"
    # An answer that may be blank (an edited artifact's text) is not one the browser insists on.
    common["required"] = ask.required and ask.blank is MISSING
    if kind == "boolean":
        choices = (Choice("true", ask.choice_words.get("true", "Yes")), Choice("false", ask.choice_words.get("false", "No")))
        return Field(ask.name, shown, "radio", value=given, choices=choices, **common)
    if kind == "choice":
        options = tuple(Choice(as_written(v), ask.choice_words.get(as_written(v), as_written(v))) for v in schema["enum"])
        # No option is chosen until the person chooses one (the empty first option says so).
        placeholder = Choice("", "Choose…" if ask.required else "(none)")
        return Field(ask.name, shown, "select", value=given, choices=(placeholder, *options), **common)
    if kind == "choices":
        options = tuple(Choice(as_written(v), as_written(v)) for v in schema["items"]["enum"])
        common["required"] = False  # a browser cannot insist on one box of several
        return Field(ask.name, shown, "checkboxes", values=tuple(posted.get(ask.name) or ()), choices=options, **common)
    if kind in ("number", "integer"):
        return Field(
            ask.name,
            shown,
            "number",
            value=given,
            step="1" if kind == "integer" else "any",
            minimum=_bound(schema.get("minimum")),
            maximum=_bound(schema.get("maximum")),
            **common,
        )
    if kind == "lines":
        hint = "One a line." + (f" {ask.hint}" if ask.hint else "")
        return Field(ask.name, shown, "lines", value=given, **{**common, "hint": hint})
    if kind == "json":
        opened = ask.required or bool(common["error"])
        return Field(ask.name, f"{label} (JSON)", "json", value=given, advanced=not opened, **common)
    lengths: dict[str, Any] = {
        "max_length": schema.get("maxLength") if isinstance(schema.get("maxLength"), int) else None,
        "min_length": schema.get("minLength") if isinstance(schema.get("minLength"), int) else None,
    }
    if kind == "datetime-local":
        shown += " (UTC)"
        lengths = {}
    return Field(ask.name, shown, kind, value=given, **lengths, **common)


def _bound(value: Any) -> str | None:
    return as_written(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# -- filling a form from a value -------------------------------------------------------------------------------


def posted_of(ask: Ask, value: Any) -> dict[str, list[str]]:
    """The form a person would have posted to answer `value` (what a default, an example or an artifact fills in)."""
    if value is MISSING or value is None and ask.kind != "json":
        return {}
    kind = ask.kind
    if kind == "group":
        return posted_of_object(ask.parts, value)
    if kind == "fixed":
        return {}
    if kind == "boolean":
        return {ask.name: [as_written(value)]} if isinstance(value, bool) else {}
    if kind == "choices":
        return {ask.name: [as_written(v) for v in value]} if isinstance(value, list) else {}
    if kind == "lines":
        return {ask.name: ["\n".join(as_written(v) for v in value)]} if isinstance(value, list) else {}
    if kind == "json":
        return {ask.name: [json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)]}
    if kind == "datetime-local" and isinstance(value, str):
        return {ask.name: [_local_input(value)]}
    if isinstance(value, dict | list):
        return {}
    return {ask.name: [as_written(value)]}


def posted_of_object(asks: Sequence[Ask], value: Any) -> dict[str, list[str]]:
    """The form that answers an object, each ask its key of it."""
    posted: dict[str, list[str]] = {}
    if isinstance(value, Mapping):
        for ask in asks:
            posted.update(posted_of(ask, value.get(ask.key[-1], MISSING)))
    return posted


def defaults_of(asks: Sequence[Ask]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for ask in asks:
        if ask.parts:
            out.update(defaults_of(ask.parts))
        elif "default" in ask.schema:
            out.update(posted_of(ask, ask.schema["default"]))
    return out


def _local_input(value: str) -> str:
    """An RFC 3339 date-time as a datetime-local control shows it (in UTC, to the minute or second)."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M" if moment.second == 0 else "%Y-%m-%dT%H:%M:%S")


# -- reading a form back (rules/answer_schema.read; a JSON answer parsed strictly here) ------------------------


def read(ask: Ask, posted: Mapping[str, Sequence[str]], errors: dict[str, str]) -> Any:
    return answer_schema.read(ask, posted, errors, _json_answer)


def read_object(asks: Sequence[Ask], posted: Mapping[str, Sequence[str]], errors: dict[str, str]) -> dict[str, Any]:
    return answer_schema.read_object(asks, posted, errors, _json_answer)


def _json_answer(raw: str) -> Any:
    try:
        return strict_json.loads(raw)
    except strict_json.StrictJsonError:
        raise ValueError("This is not valid JSON; check the brackets, commas and quotes.") from None


# A JSON number as a person may type it into a number field (`1.50`, `1e3`).
JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def typed_spellings(posted: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """How a person typed a form's numbers, kept as `written_numbers.spellings` keeps a body's (RunState.writtenNumbers)."""
    typed = [v.strip() for values in posted.values() for v in values if JSON_NUMBER.fullmatch(v.strip())]
    return written_numbers.spellings("[" + ",".join(typed) + "]") if typed else {}
