"""How a request and its values read to a person, pure: a request's headline (its title and the words under it, in its
author's words where it has any), a primitive as a person reads and types it (`as_written`) and a value as lines of
plain text (`in_lines`). The approval page, the e-mail and the Slack message show a request's headline;
rules/answer_schema.py's forms write and read values with `as_written`. Apart from the forms' schema reading, which
only a form's gate loads (the notify worker's messages say every request's headline).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from interlude.domain.ids import MODULEX_INTERRUPT_KIND


def as_written(value: Any) -> str:
    """A primitive as a person reads and types it: a number as its caller wrote it (`Written`), else as JSON writes it
    (never reformatted), a boolean as JSON's true / false, text as it is; anything else as its JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, Written):
        return value.text
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


class Written(float):
    """A number that reads as its caller wrote it (`1.50`, `1e3`): equal to, and computed with, as the float it is."""

    text: str

    def __new__(cls, value: float, text: str) -> Written:
        number = super().__new__(cls, value)
        number.text = text
        return number

    def __reduce__(self) -> tuple[Any, ...]:
        return (Written, (float(self), self.text))


# A request's first line longer than this is not its title.
TITLE_MAX = 200


def in_lines(value: Any) -> str:
    """A value as plain text a person reads, where a page draws it as a table (interlude.api.page.text.cell_of): text
    as it is; an object a line per key in the author's order (`key: value`, what a key holds in lines of its own
    under it, indented); a list a line per item (`• item`); a number as written; a boolean as yes / no; nothing as
    nothing. Never a value's JSON or its Python spelling."""
    return "\n".join(_lines(value, ""))


def _lines(value: Any, indent: str) -> list[str]:
    if isinstance(value, Mapping):
        out = []
        for key, item in value.items():
            inner = _lines(item, indent + "  ")
            if len(inner) == 1 and not isinstance(item, Mapping | list):
                out.append(f"{indent}{key}: {inner[0].strip()}")
            else:
                out += [f"{indent}{key}:", *inner]
        return out
    if isinstance(value, list):
        out = []
        for item in value:
            inner = _lines(item, indent + "  ")
            out += [f"{indent}• {inner[0].strip()}", *inner[1:]] if inner else []
        return out
    if value is None or value == "":
        return []
    if isinstance(value, bool):
        return [indent + ("yes" if value else "no")]
    return [indent + line for line in as_written(value).splitlines()]


def headline(payload: Mapping[str, Any]) -> tuple[str, str | None]:
    """(the title, the message under it) of a request, in its author's words where it has any."""
    data = payload.get("data") or {}
    kind = str(payload.get("kind"))
    if kind == "approval":
        return str(data.get("title") or "Approval requested"), data.get("description") or None
    if kind == "custom" and data.get("customKind") == MODULEX_INTERRUPT_KIND:
        return _first_line(str((data.get("payload") or {}).get("message") or ""), "Your input is needed")
    if kind == "custom":
        inner = data.get("payload")
        inner = inner if isinstance(inner, Mapping) else {}
        title = inner.get("title")
        # A title is text (or a number): an object or a list is no title, never shown as its JSON.
        shown = as_written(title) if isinstance(title, str | int | float) and not isinstance(title, bool) else ""
        return shown or "Your input is needed", inner.get("description") or None
    if kind == "conversation.exchange":
        return _first_line(str(data.get("prompt") or ""), "Your reply is needed")
    if kind == "conversation.start":
        return str(data.get("title") or "A conversation is starting"), data.get("initialPrompt") or None
    if kind == "conversation.close":
        return "The conversation is closing", data.get("reason") or None
    if kind == "credential":
        return f"Connect your {data.get('provider', '')} account".replace("  ", " "), _credential_words(data)
    if kind == "low-confidence":
        return "Check an agent's decision", _confidence_words(data)
    if kind == "clarification":
        return "A few questions need your answer", None
    if kind == "external-event":
        return f"Waiting for {data.get('eventType', 'an event')}", None
    return "Your input is needed", None


def _first_line(text: str, fallback: str) -> tuple[str, str | None]:
    """A message's first line as the title (when it reads as one), the rest under it with its line breaks."""
    first, _, rest = text.strip().partition("\n")
    if first.strip() and len(first) <= TITLE_MAX:
        return first.strip(), rest.strip() or None
    return fallback, text.strip() or None


def _credential_words(data: Mapping[str, Any]) -> str:
    provider = data.get("provider", "the provider")
    scopes = ", ".join(str(s) for s in data.get("scopes") or [])
    why = {
        "expired": f"Your connection to {provider} has expired.",
        "insufficient_scope": f"Your connection to {provider} does not allow enough.",
    }.get(str(data.get("reason")), f"This step needs your {provider} account.")
    access = f" It asks for: {scopes}." if scopes else ""
    return f"{why}{access} Connect it, then come back and say so below."


def _confidence_words(data: Mapping[str, Any]) -> str:
    observed, threshold = data.get("observed"), data.get("threshold")
    return (
        f"Agent {data.get('agentId', '')} decided with confidence {_number(observed)}, below the {_number(threshold)} "
        "this run asks for. Let its decision stand, or reject it."
    )


def _number(value: Any) -> str:
    return as_written(value) if isinstance(value, int | float) and not isinstance(value, bool) else str(value)
