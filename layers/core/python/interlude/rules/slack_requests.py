"""What Slack sends an app's interactivity URL (issue 28 item 6), pure: the request's signature, and the click or modal
submission its payload reports. What Interlude sends Slack is rules/slack.py's (the notify worker loads only that).

Payload shapes as Slack documents them: https://api.slack.com/reference/interaction-payloads/block-actions and
https://api.slack.com/reference/interaction-payloads/views (`view.private_metadata`, `view.state.values` keyed by
block_id then action_id).

Slack signs each request it sends an app's interactivity URL with the app's signing secret: `X-Slack-Signature` is
`v0=` + hex HMAC-SHA256(secret, `v0:{X-Slack-Request-Timestamp}:{raw body}`); a request whose timestamp is more than
five minutes from the clock is refused whatever its signature, so a captured request cannot be replayed later
(Slack's "Verifying requests from Slack"). The body is `payload=<JSON>`, form-encoded.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from interlude.domain.errors import Invalid
from interlude.rules.slack import (
    ACTION_LABELS,
    ACTION_VALUES,
    COMMENT_ACTION,
    COMMENT_BLOCK,
    DECISION_ACTION,
    DECISION_BLOCK,
    FORM_ACTION,
    FORM_CALLBACK,
    MAX_BUTTON_VALUE_CHARS,
    MAX_COMMENT_CHARS,
    MODAL_ACTION,
    MODAL_CALLBACK,
)

SIGNATURE_VERSION = "v0"
# Slack's own bound: a request signed further from now than this is refused.
MAX_CLOCK_SKEW_S = 300


class SignatureRefused(Exception):
    """The request is not one Slack signed with this secret now: `reason` says which check failed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def signature(secret: str, timestamp: str, body: bytes) -> str:
    base = f"{SIGNATURE_VERSION}:{timestamp}:".encode() + body
    return f"{SIGNATURE_VERSION}=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def verify_signature(secret: str, timestamp: str | None, sent: str | None, body: bytes, now: float) -> None:
    """Refuses (SignatureRefused) a request without both headers, signed more than five minutes from `now`, or whose
    signature is not this secret's over exactly these bytes (compared in constant time)."""
    if not timestamp or not sent:
        raise SignatureRefused("missing", "the request carries no Slack signature")
    try:
        signed_at = int(timestamp)
    except ValueError:
        raise SignatureRefused("timestamp", "the request's Slack timestamp is not a number") from None
    if abs(now - signed_at) > MAX_CLOCK_SKEW_S:
        raise SignatureRefused("timestamp", "the request was signed more than 5 minutes from now")
    if not hmac.compare_digest(signature(secret, timestamp, body).encode(), sent.encode()):
        raise SignatureRefused("signature", "the request's Slack signature does not match the signing secret")


@dataclass(frozen=True)
class Click:
    """One button clicked in a message: by whom (Slack's user and workspace ids), which, and where to answer."""

    user_id: str
    team_id: str
    action_id: str
    response_url: str | None
    # The decision buttons' (None for any other action).
    run_id: str | None = None
    node_id: str | None = None
    interrupt_id: str | None = None
    # The message clicked in, as Slack sent it (its blocks are kept when it is updated in place).
    message: dict[str, Any] | None = None
    # What the clicker typed in the message's comment field (None: nothing).
    comment: str | None = None
    # What a modal is opened with (Slack's, spent once, valid 3 seconds).
    trigger_id: str | None = None

    @property
    def action(self) -> str | None:
        """The resume value's action the click takes (None: not a decision button)."""
        return ACTION_VALUES.get(self.action_id) if self.run_id else None

    @property
    def opens_modal(self) -> bool:
        return self.action_id in (MODAL_ACTION, FORM_ACTION) and self.run_id is not None and self.trigger_id is not None


@dataclass(frozen=True)
class Submission:
    """A modal sent: by whom, which interrupt (the view's private_metadata, Interlude's own), the action chosen and
    the comment typed (the decision modal), or the form's inputs as Slack sent them (`form`: `state.values`)."""

    user_id: str
    run_id: str
    node_id: str
    interrupt_id: str
    action: str | None
    comment: str | None
    form: dict[str, Any] | None = None
    # The click's response_url that opened the modal (where a vote that did not decide is said).
    response_url: str | None = None


def _text(value: Any, what: str, most: int = 256) -> str:
    if not isinstance(value, str) or not value or len(value) > most:
        raise Invalid(f"the Slack payload's {what} is missing or malformed", {"field": f"payload.{what}"})
    return value


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _payload(body: bytes) -> dict[str, Any]:
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=4)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError):
        raise Invalid("the body must be Slack's form-encoded payload=<JSON>", {"field": "payload"}) from None
    if not isinstance(payload, dict):
        raise Invalid("the Slack payload must be an object", {"field": "payload"})
    return payload


def _typed(values: Any, block_id: str, action_id: str) -> dict[str, Any]:
    """One input's state (`state.values[block_id][action_id]`), {} when absent."""
    return _object(_object(_object(values).get(block_id)).get(action_id))


def _comment(values: Any) -> str | None:
    value = _typed(values, COMMENT_BLOCK, COMMENT_ACTION).get("value")
    return (value.strip() if isinstance(value, str) else "")[:MAX_COMMENT_CHARS] or None


def _interrupt_named(text: Any, field: str) -> tuple[str, str, str]:
    """(run, node, interrupt) from a value Interlude wrote (rules.slack.button_value)."""
    try:
        named = json.loads(_text(text, field, MAX_BUTTON_VALUE_CHARS))
        run_id, node_id, interrupt_id = (_text(named[k], f"{field}.{k}") for k in ("r", "n", "i"))
    except (ValueError, TypeError, KeyError):
        raise Invalid("the decision button's value is not one Interlude wrote", {"field": f"payload.{field}"}) from None
    return run_id, node_id, interrupt_id


def _reply_to(text: str) -> str | None:
    """The response_url a modal's private_metadata carries (button_value's `reply_to`), if any (posted to through the
    egress guard, like a click's)."""
    url = json.loads(text).get("u")
    return url if isinstance(url, str) and url else None


def interaction_of(body: bytes) -> Click | Submission:
    """The click or the modal's submission a (verified) interactivity request reports; 400 validation_error for any
    other payload."""
    payload = _payload(body)
    kind = payload.get("type")
    if kind == "view_submission":
        return _submission_of(payload)
    if kind != "block_actions":
        raise Invalid(
            f"Slack payloads of type {kind!r} are not answered here (only block_actions and view_submission)",
            {"field": "payload.type"},
        )
    return _click_of(payload)


def click_of(body: bytes) -> Click:
    """The click a (verified) interactivity request reports; 400 validation_error for any other payload."""
    got = interaction_of(body)
    if not isinstance(got, Click):
        raise Invalid("the Slack payload is not a click", {"field": "payload.type"})
    return got


def _click_of(payload: dict[str, Any]) -> Click:
    user = _object(payload.get("user"))
    team = _object(payload.get("team"))
    actions = payload.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise Invalid("the Slack payload must report exactly one action", {"field": "payload.actions"})
    action = actions[0]
    response_url = payload.get("response_url")
    message = payload.get("message")
    trigger_id = payload.get("trigger_id")
    click = Click(
        user_id=_text(user.get("id"), "user.id", 32),
        team_id=_text(team.get("id") or user.get("team_id"), "team.id", 32),
        action_id=_text(action.get("action_id"), "actions.action_id"),
        response_url=response_url if isinstance(response_url, str) and response_url else None,
        message=message if isinstance(message, dict) else None,
        comment=_comment(_object(payload.get("state")).get("values")),
        trigger_id=trigger_id if isinstance(trigger_id, str) and 0 < len(trigger_id) <= 256 else None,
    )
    if click.action_id not in ACTION_VALUES and click.action_id not in (MODAL_ACTION, FORM_ACTION):
        return click
    run_id, node_id, interrupt_id = _interrupt_named(action.get("value"), "actions.value")
    return Click(**{**click.__dict__, "run_id": run_id, "node_id": node_id, "interrupt_id": interrupt_id})


def _submission_of(payload: dict[str, Any]) -> Submission:
    view = _object(payload.get("view"))
    if view.get("callback_id") not in (MODAL_CALLBACK, FORM_CALLBACK):
        raise Invalid("the submitted view is not one Interlude opened", {"field": "payload.view.callback_id"})
    run_id, node_id, interrupt_id = _interrupt_named(view.get("private_metadata"), "view.private_metadata")
    values = _object(view.get("state")).get("values")
    if view["callback_id"] == FORM_CALLBACK:
        user_id = _text(_object(payload.get("user")).get("id"), "user.id", 32)
        return Submission(user_id, run_id, node_id, interrupt_id, None, None, form=_object(values))
    chosen = _object(_typed(values, DECISION_BLOCK, DECISION_ACTION).get("selected_option")).get("value")
    return Submission(
        user_id=_text(_object(payload.get("user")).get("id"), "user.id", 32),
        run_id=run_id,
        node_id=node_id,
        interrupt_id=interrupt_id,
        action=chosen if chosen in ACTION_LABELS else None,
        comment=_comment(values),
        response_url=_reply_to(view["private_metadata"]),
    )
