"""A gate's short form as a Slack modal (issue 28 item 6), pure: which gates can be answered in one, its blocks, and
the answer read back from its `view_submission`.

The questions are the page's (rules/answer_schema.asked, with the gate's `fieldLabels`); each becomes one input block
whose block_id is the question's field name (`f0`, `f0_1`), so a refusal is said beside it
(`{"response_action": "errors", "errors": {block_id: words}}`). Controls: one line of text or several
(`plain_text_input`, `multiline` for long text and for lists, one item a line), numbers as text checked when sent
(Slack has no number input that every client shows), a date as a `datepicker`, a choice or yes / no as a
`static_select`, several choices as `checkboxes`; an object one level deep is asked field by field ("Group: field").
A form Slack cannot show — a question asked as JSON, a date and time, an object deeper than that, more than
MAX_MODAL_INPUTS questions, a choice of more options than Slack lists — is not drawn: its message links to the page.

Slack's limits followed (https://docs.slack.dev/reference/block-kit/blocks/input-block,
https://docs.slack.dev/reference/block-kit/block-elements): 100 blocks a view, a label 2000 characters, a
plain_text_input 3000, a static_select 100 options, checkboxes 10, an option's text 75 and value 150 characters, a
view's title 24 and private_metadata 3000.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from interlude.rules.answer_schema import MISSING, Ask, Asked, asked, read, read_object, relabelled
from interlude.rules.slack import FORM_CALLBACK, escaped, modal, titled
from interlude.rules.wording import as_written

# Every input's action_id (its block_id names the question).
VALUE_ACTION = "value"
# Questions one modal asks at most (Slack allows 100 blocks; a longer form is the page's).
MAX_MODAL_INPUTS = 50
MAX_SELECT_OPTIONS = 100
MAX_CHECKBOXES = 10
MAX_OPTION_TEXT = 75
MAX_OPTION_VALUE = 150
MAX_LABEL = 2000
MAX_TEXT_INPUT = 3000
# The form-drawn controls Slack shows (answer_schema's kinds); anything else sends the person to the page.
TEXT_KINDS = ("text", "email", "url", "textarea", "lines", "number", "integer")
DRAWN_KINDS = (*TEXT_KINDS, "date", "boolean", "choice", "choices", "fixed", "group")


def modal_form(payload: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> Asked | None:
    """What a Slack modal asks for this interrupt's answer (the page's questions, in the gate's words), or None when
    Slack cannot show it (the message then links to the page). An answer with no schema is asked as text."""
    if payload.get("kind") == "approval":
        return None
    spec = asked(payload)
    if spec.free:
        # Text only (the page's JSON alternative is not offered), and asked for.
        spec = replace(spec, asks=(replace(spec.asks[0], required=True),))
    asks = relabelled(spec.asks, labels or {})
    if not asks or sum(len(a.parts) or 1 for a in asks) > MAX_MODAL_INPUTS or not all(_drawn(a, 0) for a in asks):
        return None
    return replace(spec, asks=asks)


def _drawn(ask: Ask, depth: int) -> bool:
    if ask.kind == "group":
        return depth == 0 and all(_drawn(p, 1) for p in ask.parts)
    if ask.kind not in DRAWN_KINDS:
        return False
    if ask.kind == "choice":
        return len(ask.schema["enum"]) <= MAX_SELECT_OPTIONS and _options_fit(ask.schema["enum"])
    if ask.kind == "choices":
        return len(ask.schema["items"]["enum"]) <= MAX_CHECKBOXES and _options_fit(ask.schema["items"]["enum"])
    return True


def _options_fit(values: Sequence[Any]) -> bool:
    return all(len(as_written(v)) <= MAX_OPTION_VALUE for v in values)


# -- the modal ---------------------------------------------------------------------------------------------------


def form_modal(title: str, spec: Asked, value: str) -> dict[str, Any]:
    """The modal an "Answer…" click opens: the request's title, then one input block per question; `value`
    (rules.slack.button_value) is carried as private_metadata to the submission."""
    blocks: list[dict[str, Any]] = [titled(title)]
    for ask in spec.asks:
        if ask.kind == "group":
            blocks += [_input(p, f"{ask.label}: {p.label}") for p in ask.parts if p.kind != "fixed"]
        elif ask.kind != "fixed":
            blocks.append(_input(ask, ask.label))
    return modal(FORM_CALLBACK, "Your answer", value, blocks)


def _input(ask: Ask, label: str) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": ask.name,
        "optional": not ask.required,
        "label": {"type": "plain_text", "text": label[:MAX_LABEL]},
        "element": _element(ask),
    }
    hint = _hint(ask)
    if hint:
        block["hint"] = {"type": "plain_text", "text": hint[:MAX_LABEL]}
    return block


def _element(ask: Ask) -> dict[str, Any]:
    kind, schema = ask.kind, ask.schema
    if kind == "boolean":
        options = [_option(ask.choice_words.get(v, words), v) for v, words in (("true", "Yes"), ("false", "No"))]
        return {"type": "static_select", "action_id": VALUE_ACTION, "options": options}
    if kind == "choice":
        options = [_option(ask.choice_words.get(as_written(v), as_written(v)), as_written(v)) for v in schema["enum"]]
        return {"type": "static_select", "action_id": VALUE_ACTION, "options": options}
    if kind == "choices":
        options = [_option(as_written(v), as_written(v)) for v in schema["items"]["enum"]]
        return {"type": "checkboxes", "action_id": VALUE_ACTION, "options": options}
    if kind == "date":
        return {"type": "datepicker", "action_id": VALUE_ACTION}
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": VALUE_ACTION}
    if kind in ("textarea", "lines"):
        element["multiline"] = True
    if kind in ("text", "email", "url", "textarea"):
        most, least = schema.get("maxLength"), schema.get("minLength")
        element["max_length"] = min(most, MAX_TEXT_INPUT) if isinstance(most, int) and most > 0 else MAX_TEXT_INPUT
        if isinstance(least, int) and 0 < least <= element["max_length"]:
            element["min_length"] = least
    return element


def _hint(ask: Ask) -> str | None:
    """What is said under the field: the schema's description, and the bounds a number or a list is held to."""
    said = [ask.hint] if ask.hint else []
    if ask.kind in ("number", "integer"):
        said.append("A whole number." if ask.kind == "integer" else "A number.")
        low, high = ask.schema.get("minimum"), ask.schema.get("maximum")
        if _is_number(low):
            said.append(f"At least {as_written(low)}.")
        if _is_number(high):
            said.append(f"At most {as_written(high)}.")
    if ask.kind == "lines":
        said.append("One a line.")
    return " ".join(said) or None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text[:MAX_OPTION_TEXT]}, "value": value}


def said_view(words: str) -> dict[str, Any]:
    """A submission answered with words instead of a decision: the modal shows them (and no form)."""
    return {
        "response_action": "update",
        "view": {
            "type": "modal",
            "title": {"type": "plain_text", "text": "Your answer"},
            "close": {"type": "plain_text", "text": "Close"},
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": escaped(words)}}],
        },
    }


# -- the answer read back ------------------------------------------------------------------------------------------


def answer_of(spec: Asked, values: Mapping[str, Any]) -> tuple[Any, dict[str, str]]:
    """The answer a submitted modal stands for (`view.state.values`: block_id -> action_id -> state), read as the
    page reads its form (answer_schema.read: a blank required field, a number that is none, a choice not offered are
    said beside their block). The schema's own checks are the caller's (answer_schema.check), as on the page."""
    errors: dict[str, str] = {}
    posted = {name: typed for name, typed in _posted(values).items() if typed}
    if spec.whole:
        got = read(spec.asks[0], posted, errors)
        return (None if got is MISSING else got), errors
    return read_object(spec.asks, posted, errors), errors


def _posted(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """Slack's input states as the strings a page's form would have posted under the same names."""
    posted: dict[str, list[str]] = {}
    for name, block in values.items():
        state = block.get(VALUE_ACTION) if isinstance(block, Mapping) else None
        if not isinstance(state, Mapping):
            continue
        options = state.get("selected_options")
        option = state.get("selected_option")
        if isinstance(options, list):
            posted[name] = [str(o.get("value")) for o in options if isinstance(o, Mapping)]
        elif isinstance(option, Mapping):
            posted[name] = [str(option.get("value"))]
        else:
            typed = state.get("selected_date") if "selected_date" in state else state.get("value")
            posted[name] = [typed] if isinstance(typed, str) else []
    return posted
