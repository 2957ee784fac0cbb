"""Slack interactivity (issue 28 item 6), pure: what Interlude sends Slack — the decision buttons and their value, the
decision modal (a view opened with `views.open`), and the words Slack shows after a click or a submission. What Slack
sends (its signature, a click, a modal's submission) is read by rules/slack_requests.py, which only the API loads.

A modal and its answers: https://docs.slack.dev/surfaces/modals (a `view_submission` is answered `{"response_action":
"errors", "errors": {block_id: words}}` to show words beside an input block, or `{"response_action": "clear"}` to
close the modal); https://api.slack.com/methods/views.open (a `trigger_id` is spent once, within 3 seconds of the
click).
"""

from __future__ import annotations

import json
from typing import Any

# The decision buttons' action ids; the page button's (a link: Slack still reports its click) is acknowledged only.
APPROVE_ACTION = "interlude-approve"
REJECT_ACTION = "interlude-reject"
OPEN_PAGE_ACTION = "open-approval-page"
# The button that opens the decision modal (a bot token's messages: views.open needs the token), its view's
# callback_id, and its decision field (a static_select of the gate's one-click actions).
MODAL_ACTION = "interlude-decide-with-comment"
MODAL_CALLBACK = "interlude-decide"
DECISION_BLOCK = "interlude-decision"
DECISION_ACTION = "decision"
# The "Answer…" button of a gate whose answer is a short form (a bot token's messages), and its modal's callback_id
# (rules/slack_forms.py draws it).
FORM_ACTION = "interlude-answer"
FORM_CALLBACK = "interlude-answer-form"
ACTION_LABELS = {"accept": "Approve", "reject": "Reject"}
ACTION_VALUES = {APPROVE_ACTION: "accept", REJECT_ACTION: "reject"}
# What a button's value holds: which interrupt it answers (Slack's limit for a value is 2000 characters).
MAX_BUTTON_VALUE_CHARS = 2000
# The message's optional comment field (an input block): Slack sends what is typed in it with the click
# (`state.values`), and it is recorded as the vote's comment. Slack's own limit for a text input is 3000 characters.
COMMENT_BLOCK = "interlude-comment"
COMMENT_ACTION = "comment"
MAX_COMMENT_CHARS = 3000


def button_value(run_id: str, node_id: str, interrupt_id: str, reply_to: str | None = None) -> str:
    """Which interrupt a decision button answers. Not a credential: the click is Slack's (signed), the clicker a
    directory principal, and the decision is refused unless they may decide. A modal's private_metadata also
    carries the click's `response_url` (`reply_to`), so a vote that does not decide says so on the clicker's
    message (private_metadata is not shown in the modal; the URL only answers that click, for 30 minutes)."""
    named = {"r": run_id, "n": node_id, "i": interrupt_id}
    value = json.dumps(named, separators=(",", ":"), allow_nan=False)
    if reply_to and len(value) + len(reply_to) + 8 <= MAX_BUTTON_VALUE_CHARS:
        value = json.dumps({**named, "u": reply_to}, separators=(",", ":"), allow_nan=False)
    return value


def decision_modal(title: str, actions: list[str], value: str) -> dict[str, Any]:
    """The modal a "Decide with a comment…" click opens: the request's title, the decision (the gate's one-click
    actions) and a comment; `value` (button_value) is carried as the view's private_metadata to the submission."""
    options = [
        {"text": {"type": "plain_text", "text": ACTION_LABELS[a]}, "value": a} for a in ACTION_LABELS if a in actions
    ]
    return modal(
        MODAL_CALLBACK,
        "Your decision",
        value,
        [
            titled(title),
            {
                "type": "input",
                "block_id": DECISION_BLOCK,
                "label": {"type": "plain_text", "text": "Your decision"},
                "element": {"type": "static_select", "action_id": DECISION_ACTION, "options": options},
            },
            comment_input("Comment (optional)"),
        ],
    )


def modal(callback_id: str, heading: str, value: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """A modal view sent with "Send" and "Cancel"; `value` (a button_value) rides as its private_metadata to the
    submission."""
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": value,
        "title": {"type": "plain_text", "text": heading},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def titled(title: str) -> dict[str, Any]:
    """A modal's first block: the request's title in bold."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": f"*{escaped(title)[:2900]}*"}}


def comment_input(label: str) -> dict[str, Any]:
    """The optional comment field (an input block), in a message or a modal: what is typed is the vote's comment."""
    return {
        "type": "input",
        "block_id": COMMENT_BLOCK,
        "optional": True,
        "label": {"type": "plain_text", "text": label},
        "element": {"type": "plain_text_input", "action_id": COMMENT_ACTION, "multiline": True, "max_length": MAX_COMMENT_CHARS},
    }


def field_errors(errors: dict[str, str]) -> dict[str, Any]:
    """A refused submission's answer: each message beside its input block; the modal stays open."""
    return {"response_action": "errors", "errors": errors}


CLOSE_MODAL: dict[str, Any] = {"response_action": "clear"}


# -- what Slack shows after a click ------------------------------------------------------------------------


def ephemeral(text: str) -> dict[str, Any]:
    """A message only the clicker sees, leaving the original as it was."""
    return {"response_type": "ephemeral", "replace_original": False, "text": text}


def escaped(text: str) -> str:
    """Text as Slack shows it literally (its markup reads `&`, `<` and `>`)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def outcome_text(action: str, decided: bool, who: str, comment: str | None = None) -> str:
    """"Approved by Ana", "Rejected by Bob: too risky", or a vote that did not decide yet."""
    verb = "Approved" if action == "accept" else "Rejected"
    said = f"{verb} by {who}" if decided else f"{who} {verb.lower()}; the request waits for more approvals"
    return f"{said}: {comment}" if comment else said


def replaced_message(original: dict[str, Any] | None, outcome: str) -> dict[str, Any]:
    """The original message with its buttons and comment field gone and the outcome beneath it: what replaces it in
    place."""
    blocks = [
        b
        for b in (original or {}).get("blocks") or []
        if isinstance(b, dict) and b.get("type") != "actions" and b.get("block_id") != COMMENT_BLOCK
    ]
    blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*{escaped(outcome)}*"}})
    return {"replace_original": True, "text": escaped(outcome), "blocks": blocks}
