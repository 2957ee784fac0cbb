"""What a notification says and how it travels (issue 14), pure: ids, queue messages, the e-mail and the Slack message.

A notification is one (interrupt visit, recipient, purpose): `raised` when the gate asks, `reminder-<n>` for its
n-th reminder, `escalation` when it timed out with `onTimeout: escalate`. Its id derives from those, so the same
notification queued twice is one notification.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime, tzinfo
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any

from interlude.domain.ids import derive_opaque
from interlude.rules.interrupts.delegation import still_asked

if TYPE_CHECKING:
    from interlude.domain.models.run import OpenInterrupt

MESSAGE_VERSION = 1
RAISED = "raised"
ESCALATION = "escalation"
REMINDER_PREFIX = "reminder-"


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
    """What the recipient reads, whatever the channel."""

    purpose: str
    title: str
    description: str
    workflow_id: str
    run_id: str
    # The personal decision link (None for an escalation: the gate is decided already).
    link: str | None
    # Epoch seconds, or None when the gate has no deadline; shown in `zone`.
    deadline: float | None
    zone: tzinfo
    recipient_name: str
    actions: tuple[str, ...] = ()
    # The principals whose votes the recipient is asked for as their delegate (issue 14 item 4; reminders).
    on_behalf_of: tuple[str, ...] = ()


def deadline_text(deadline: float | None, zone: tzinfo) -> str:
    if deadline is None:
        return "no deadline"
    moment = datetime.fromtimestamp(deadline, zone)
    # A ZoneInfo prints as its IANA key, datetime.UTC as "UTC".
    return f"{moment.strftime('%Y-%m-%d %H:%M')} {moment.tzname()} ({zone})"


def subject(content: Content) -> str:
    if content.purpose == ESCALATION:
        return f"Escalated: '{content.title}' timed out and was rejected"
    if is_reminder(content.purpose):
        return f"Reminder: your decision is needed: {content.title}"
    return f"Your decision is needed: {content.title}"


def _lead(content: Content) -> str:
    if content.purpose == ESCALATION:
        return (
            f"The approval '{content.title}' of workflow {content.workflow_id} timed out without a decision and was "
            "rejected. You are told because it asks to escalate on timeout."
        )
    delegated = ""
    if content.on_behalf_of:
        delegated = f" You may decide it on behalf of {', '.join(content.on_behalf_of)}, as their delegate."
    if is_reminder(content.purpose):
        return f"A reminder: '{content.title}' (workflow {content.workflow_id}) still waits for your decision.{delegated}"
    return f"'{content.title}' (workflow {content.workflow_id}) waits for your decision.{delegated}"


def email_parts(content: Content) -> tuple[str, str, str]:
    """(subject, plain text, HTML) of the e-mail."""
    lines = [f"Hello {content.recipient_name},", "", _lead(content), ""]
    if content.description:
        lines += [content.description, ""]
    if content.purpose != ESCALATION:
        lines.append(f"Decide by: {deadline_text(content.deadline, content.zone)}")
    if content.link:
        lines += ["", "Open your personal decision link (it records your decision as yours; do not forward it):",
                  content.link]
    lines += ["", f"Run: {content.run_id}"]
    text = "\n".join(lines) + "\n"
    e = html.escape
    body = [f"<p>Hello {e(content.recipient_name)},</p>", f"<p>{e(_lead(content))}</p>"]
    if content.description:
        body.append(f"<p>{e(content.description)}</p>")
    if content.purpose != ESCALATION:
        body.append(f"<p>Decide by: <strong>{e(deadline_text(content.deadline, content.zone))}</strong></p>")
    if content.link:
        body.append(f'<p><a href="{e(content.link, quote=True)}">Open your decision page</a></p>')
        body.append("<p><small>This link is yours: it records your decision as yours. Do not forward it.</small></p>")
    body.append(f"<p><small>Run {e(content.run_id)}</small></p>")
    page = f"<!doctype html><html><body>{''.join(body)}</body></html>"
    return subject(content), text, page


def mime_email(from_address: str, to_address: str, content: Content) -> bytes:
    """The e-mail as MIME (multipart/alternative: plain text and HTML), what SES's raw send takes."""
    title, text, page = email_parts(content)
    message = EmailMessage()
    message["Subject"] = title
    message["From"] = from_address
    message["To"] = to_address
    message.set_content(text)
    message.add_alternative(page, subtype="html")
    return message.as_bytes()


def slack_message(content: Content, slack_user_id: str | None, channel: str | None = None) -> dict[str, Any]:
    """The Slack message (Block Kit): a header with the title, the summary, and a button opening the approval page.

    `channel` is set for a bot token's chat.postMessage (the recipient's user id: a direct message); an incoming
    webhook posts to its own channel, and the recipient is mentioned instead.
    """
    mention = f"<@{slack_user_id}> " if slack_user_id and channel is None else ""
    summary = _lead(content)
    if content.purpose != ESCALATION:
        summary += f"\nDecide by: {deadline_text(content.deadline, content.zone)}"
    if content.description:
        summary += f"\n>{content.description[:2500]}"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": subject(content)[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": (mention + summary)[:3000]}},
    ]
    if content.link:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "open-approval-page",
                        "text": {"type": "plain_text", "text": "Open the approval page"},
                        "url": content.link,
                        "style": "primary",
                    }
                ],
            }
        )
    message: dict[str, Any] = {"text": f"{mention}{subject(content)}", "blocks": blocks}
    if channel is not None:
        message["channel"] = channel
    return message


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
