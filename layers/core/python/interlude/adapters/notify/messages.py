"""What a notification says and how it travels (issue 14), pure: ids, queue messages, the e-mail and the Slack message
(with Approve and Reject buttons where one click answers the gate: issue 28 item 6).

A notification is one (interrupt visit, recipient, purpose): `raised` when the gate asks, `reminder-<n>` for its
n-th reminder, `escalation` when it timed out with `onTimeout: escalate`, `closed` when the gate closed and the
recipient's Slack messages are to say so (issue 28 item 6). Its id derives from those, so the same notification
queued twice is one notification.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from email.message import EmailMessage
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlude.domain.ids import derive_opaque, principal_subject
from interlude.domain.moments import spoken
from interlude.domain.outcomes import in_words
from interlude.rules.interrupts.delegation import still_asked
from interlude.rules.slack import (
    APPROVE_ACTION,
    FORM_ACTION,
    MODAL_ACTION,
    OPEN_PAGE_ACTION,
    REJECT_ACTION,
    comment_input,
    escaped,
)

if TYPE_CHECKING:
    import jinja2

    from interlude.domain.models.run import OpenInterrupt

MESSAGE_VERSION = 1
RAISED = "raised"
ESCALATION = "escalation"
# The gate closed (decided, timed out, withdrawn): the recipient's Slack messages of it are updated in place.
CLOSED = "closed"
# What a closed gate's outcome says when its run was cancelled or failed with the gate open (`node.cancelled`).
WITHDRAWN = "withdrawn"
# ... and when a gate that asked for a form was answered.
ANSWERED = "answered"
# The kinds of gate answered with a form (rules/answer_schema.asked), notified like an approval (issue 28 item 6).
FORM_KINDS = ("clarification", "custom", "low-confidence")
REMINDER_PREFIX = "reminder-"
# The e-mail's templates: mail.html (autoescaped) and mail.txt, from one context.
TEMPLATES = Path(__file__).resolve().parent / "templates"


def notification_id(interrupt_id: str, purpose: str, principal_id: str) -> str:
    return "ntf_" + derive_opaque("notification", interrupt_id, purpose, principal_id)


def reminder_purpose(index: int) -> str:
    return f"{REMINDER_PREFIX}{index + 1}"


def is_reminder(purpose: str) -> bool:
    return purpose.startswith(REMINDER_PREFIX)


def queue_message(
    tenant: str, run_id: str, node_id: str, interrupt_id: str, principal_id: str, purpose: str, **extra: Any
) -> dict[str, Any]:
    """One recipient's notification as the notifications queue carries it: identity only, no link or secret."""
    return {
        "v": MESSAGE_VERSION,
        "id": notification_id(interrupt_id, purpose, principal_id),
        "tenant": tenant,
        "runId": run_id,
        "nodeId": node_id,
        "interruptId": interrupt_id,
        "principalId": principal_id,
        "purpose": purpose,
        **extra,
    }


@dataclass(frozen=True)
class Content:
    """What the recipient reads, whatever the channel: words and names only (no id a person does not know)."""

    purpose: str
    title: str
    description: str
    # What a person calls the workflow (its name, else its id; None for an unnamed inline ModuleX definition).
    workflow_name: str | None
    # The personal decision link (None for an escalation: the gate is decided already).
    link: str | None
    # Epoch seconds, or None when the gate has no deadline; shown in `time_zone` (None: UTC), as the page shows it.
    deadline: float | None
    time_zone: str | None
    recipient_name: str
    # Who started the run: their directory display name, else their subject id.
    asked_by: str | None = None
    actions: tuple[str, ...] = ()
    # The principals whose votes the recipient is asked for as their delegate (issue 14 item 4; reminders).
    on_behalf_of: tuple[str, ...] = ()
    # The Slack decision buttons' value (rules.slack.button_value), when one click can answer the gate: an approval
    # offering accept or reject that asks for nothing more (no form of its own). None: the page's button only.
    decision_value: str | None = None
    # A gate answered with a form: what it asks (its questions, one a line), and the "Answer…" button's value when
    # a Slack modal can ask it (rules/slack_forms.modal_form; a bot token's messages only).
    form: bool = False
    questions: tuple[str, ...] = ()
    form_value: str | None = None


def asks_a_person(payload: Any) -> bool:
    """Whether the interrupt asks a person, whom it is notified to: an approval, or a gate answered with a form."""
    kind = payload.get("kind") if isinstance(payload, dict) else None
    return kind == "approval" or kind in FORM_KINDS


def deadline_text(deadline: float | None, time_zone: str | None) -> str:
    if deadline is None:
        return "no deadline"
    return spoken(datetime.fromtimestamp(deadline, UTC), time_zone)


def subject(content: Content) -> str:
    if content.purpose == ESCALATION:
        return f"Escalated: '{content.title}' timed out and was rejected"
    needed = "your answer is needed" if content.form else "your decision is needed"
    if is_reminder(content.purpose):
        return f"Reminder: {needed}: {content.title}"
    return f"{needed[0].upper()}{needed[1:]}: {content.title}"


def _of_workflow(content: Content) -> str:
    return f" (workflow {content.workflow_name})" if content.workflow_name else ""


def _lead(content: Content) -> str:
    if content.purpose == ESCALATION:
        return (
            f"The approval '{content.title}'{_of_workflow(content)} timed out without a decision and was "
            "rejected. You are told because it asks to escalate on timeout."
        )
    delegated = ""
    if content.on_behalf_of:
        delegated = f" You may decide it on behalf of {', '.join(content.on_behalf_of)}, as their delegate."
    yours = "your answer" if content.form else "your decision"
    if is_reminder(content.purpose):
        return f"A reminder: '{content.title}'{_of_workflow(content)} still waits for {yours}.{delegated}"
    return f"'{content.title}'{_of_workflow(content)} waits for {yours}.{delegated}"


def _by_words(content: Content) -> str:
    return "Answer by" if content.form else "Decide by"


def _facts(content: Content) -> list[tuple[str, str]]:
    """The request's facts, as the approval page lists them."""
    facts = [("Request", content.title)]
    if content.workflow_name:
        facts.append(("Workflow", content.workflow_name))
    if content.asked_by:
        facts.append(("Asked by", content.asked_by))
    if content.purpose != ESCALATION:
        facts.append((_by_words(content), deadline_text(content.deadline, content.time_zone)))
    return facts


def email_parts(content: Content) -> tuple[str, str, str]:
    """(subject, plain text, HTML) of the e-mail, each from its template (the HTML one autoescaped)."""
    context = {
        "greeting": f"Hello {content.recipient_name},",
        "lead": _lead(content),
        "description": "\n".join([content.description, *(f"• {q}" for q in content.questions)]).strip(),
        "facts": _facts(content),
        "link": content.link,
        "subject": subject(content),
    }
    templates = _mail_templates()
    return subject(content), templates.get_template("mail.txt").render(context), templates.get_template("mail.html").render(context)


@cache
def _mail_templates() -> jinja2.Environment:
    # Imported at the first mail: a Slack-only notification never loads Jinja2.
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), disabled_extensions=("txt",), default=True),
        undefined=jinja2.StrictUndefined,
        auto_reload=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def mime_email(from_address: str, to_address: str, content: Content) -> bytes:
    """The e-mail as MIME (multipart/alternative: plain text and HTML), what SES's raw send takes."""
    title, text, page = email_parts(content)
    message = EmailMessage()
    # A header is one line: a gate's title (templated from a run's inputs) may hold line breaks, which the e-mail
    # policy refuses rather than sending a header of its own.
    message["Subject"] = " ".join(title.split())
    message["From"] = from_address
    message["To"] = to_address
    message.set_content(text)
    message.add_alternative(page, subtype="html")
    return message.as_bytes()


def slack_message(content: Content, slack_user_id: str | None, channel: str | None = None) -> dict[str, Any]:
    """The Slack message (Block Kit): a header with the title, the summary, Approve and Reject buttons when one click
    can answer the gate with, for a bot token, "Decide with a comment…" (a modal) and, for an incoming webhook, an
    optional comment field above them, and a button opening the approval page.

    `channel` is set for a bot token's chat.postMessage (the recipient's user id: a direct message); an incoming
    webhook posts to its own channel, and the recipient is mentioned instead.
    """
    mention = f"<@{slack_user_id}> " if slack_user_id and channel is None else ""
    summary = escaped(_lead(content))
    if content.asked_by:
        summary += f"\nAsked by: {escaped(content.asked_by)}"
    if content.purpose != ESCALATION:
        summary += f"\n{_by_words(content)}: {deadline_text(content.deadline, content.time_zone)}"
    if content.description:
        summary += f"\n>{escaped(content.description[:2500])}"
    if content.questions:
        summary += "\n" + "\n".join(f"• {escaped(q[:300])}" for q in content.questions[:20])
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": subject(content)[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": (mention + summary)[:3000]}},
    ]
    buttons: list[dict[str, Any]] = []
    if content.decision_value and content.link:
        for action_id, action, label, style in (
            (APPROVE_ACTION, "accept", "Approve", "primary"),
            (REJECT_ACTION, "reject", "Reject", "danger"),
        ):
            if action in content.actions:
                buttons.append(
                    {
                        "type": "button",
                        "action_id": action_id,
                        "text": {"type": "plain_text", "text": label},
                        "value": content.decision_value,
                        "style": style,
                    }
                )
    if buttons and channel is not None:
        # A bot token's message: the comment is asked in a modal (views.open needs the token the tenant gave).
        buttons.append(
            {
                "type": "button",
                "action_id": MODAL_ACTION,
                "text": {"type": "plain_text", "text": "Decide with a comment…"},
                "value": content.decision_value,
            }
        )
    elif buttons:
        # An incoming webhook's message: typed here, sent with the click (Slack's `state.values`), the vote's comment.
        blocks.append(comment_input("Comment (optional)"))
    if content.form_value and content.link and channel is not None:
        # A form Slack can show, for a bot token's message (the modal needs views.open); else the page's link alone.
        buttons.append(
            {
                "type": "button",
                "action_id": FORM_ACTION,
                "text": {"type": "plain_text", "text": "Answer…"},
                "value": content.form_value,
                "style": "primary",
            }
        )
    if content.link:
        page_button: dict[str, Any] = {
            "type": "button",
            "action_id": OPEN_PAGE_ACTION,
            "text": {"type": "plain_text", "text": "Open the answer page" if content.form else "Open the approval page"},
            "url": content.link,
        }
        if not buttons:
            page_button["style"] = "primary"
        buttons.append(page_button)
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    # The text Slack notifies with is mrkdwn too: the title a run's inputs wrote is shown as written, never as a link
    # or a mention (`<!channel>`).
    message: dict[str, Any] = {"text": f"{mention}{escaped(subject(content))}", "blocks": blocks}
    if channel is not None:
        message["channel"] = channel
    return message


def closed_words(outcome: dict[str, Any], who: str | None, time_zone: str | None) -> str:
    """How a closed gate reads in the messages that asked: "Approved by Ana", "Rejected automatically: timed out at
    Tue 1 Dec 2026, 13:00 (Europe/Paris) · 12:00 UTC", "Withdrawn: the run was cancelled"."""
    if outcome.get("action") == WITHDRAWN:
        return f"Withdrawn: {outcome.get('reason') or 'the run ended'}"
    if outcome.get("action") == ANSWERED:
        return f"Answered by {who}" if who else "Answered"
    if outcome.get("action") == "timeout":
        at = outcome.get("at")
        said, nobody = ("Closed unanswered", "nobody answered") if outcome.get("form") else ("Rejected automatically", "nobody decided")
        return f"{said}: " + (f"timed out at {spoken(at, time_zone)}" if isinstance(at, str) else f"{nobody} in time")
    return in_words(outcome, who)


def closed_message(title: str, words: str) -> dict[str, Any]:
    """What a Slack message that asked for a decision is replaced with once the gate closed: its title, and the outcome
    where the buttons were (Slack's chat.update takes the same text and blocks as chat.postMessage)."""
    return {
        "text": escaped(words),
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{escaped(words)}*"[:3000]}},
        ],
    }


def decision_buttons_fit(payload: dict[str, Any]) -> bool:
    """Whether one click can answer the interrupt: an approval offering accept or reject (the actions that need
    more than themselves, refine and edit-accept, are answered on the page)."""
    actions = (payload.get("data") or {}).get("actions") or ()
    return payload.get("kind") == "approval" and any(a in actions for a in ("accept", "reject"))


def reminds(interrupt: OpenInterrupt, principal_id: str) -> bool:
    """Whether a reminder goes to `principal_id`: to everyone asked, unless someone works the gate (issue 29 item 3:
    an assignee narrows who is reminded, never who may decide), then to them alone."""
    return interrupt.assignee is None or principal_subject(principal_id) == interrupt.assignee or principal_id == interrupt.assignee


def reminder_asks(interrupt: OpenInterrupt, message: dict[str, Any]) -> bool:
    """Whether a reminder still asks its recipient for a vote: their own (unless the message names them only as a
    delegate: `forSelf` false) or one of those they stand in for (`onBehalfOf`), none of them cast meanwhile.
    `delegation` false: the tenant did not allow delegation when it was queued, so a vote handed over is asked for.
    Here, not in the worker, so the dispatch function's outbox does not load the worker's HTTP client."""
    return still_asked(
        interrupt,
        message["principalId"],
        bool(message.get("forSelf", True)),
        list(message.get("onBehalfOf") or ()),
        bool(message.get("delegation", True)),
    )
