"""What a notification says (issue 14), pure: the deadline in the recipient's zone, the e-mail's two parts, the
Slack message's documented shape, and ids that make a notification once per recipient, purpose and visit."""

from __future__ import annotations

from email import message_from_bytes
from email.policy import default
from zoneinfo import ZoneInfo

from interlude.adapters.notify.messages import (
    ESCALATION,
    RAISED,
    Content,
    deadline_text,
    mime_email,
    notification_id,
    reminder_purpose,
    slack_message,
)
from interlude.domain.models.principals import PrincipalEntry

# 2026-12-01T12:00:00Z
NOON_UTC = 1796126400.0


def content(**overrides) -> Content:
    base = {
        "purpose": RAISED,
        "title": "Ship <7>?",
        "description": "Billing & more",
        "workflow_id": "ship",
        "run_id": "t1/abc",
        "link": "https://approvals.example.com/interrupts/ow2.x",
        "deadline": NOON_UTC,
        "zone": ZoneInfo("Europe/Paris"),
        "recipient_name": "Alice",
    }
    return Content(**{**base, **overrides})


def test_the_deadline_is_shown_in_the_recipients_zone():
    assert deadline_text(NOON_UTC, ZoneInfo("Europe/Paris")) == "2026-12-01 13:00 CET (Europe/Paris)"
    assert deadline_text(NOON_UTC, ZoneInfo("America/New_York")) == "2026-12-01 07:00 EST (America/New_York)"
    assert deadline_text(None, ZoneInfo("UTC")) == "no deadline"


def test_the_mail_has_a_plain_text_and_an_escaped_html_part_with_the_link():
    message = message_from_bytes(mime_email("from@example.com", "alice@example.com", content()), policy=default)
    assert message["Subject"] == "Your decision is needed: Ship <7>?"
    text = message.get_body(("plain",)).get_content()
    page = message.get_body(("html",)).get_content()
    assert "Decide by: 2026-12-01 13:00 CET (Europe/Paris)" in text
    assert "https://approvals.example.com/interrupts/ow2.x" in text
    assert "Ship &lt;7&gt;?" in page
    assert "Billing &amp; more" in page
    assert 'href="https://approvals.example.com/interrupts/ow2.x"' in page


def test_an_escalation_has_no_link_and_no_deadline():
    message = message_from_bytes(
        mime_email("f@example.com", "b@example.com", content(purpose=ESCALATION, link=None)), policy=default
    )
    text = message.get_body(("plain",)).get_content()
    assert message["Subject"] == "Escalated: 'Ship <7>?' timed out and was rejected"
    assert "Decide by" not in text
    assert "interrupts/" not in text


def test_the_slack_message_mentions_through_a_webhook_and_direct_messages_through_a_bot():
    hooked = slack_message(content(), "U123ABC")
    assert [b["type"] for b in hooked["blocks"]] == ["header", "section", "actions"]
    assert hooked["text"].startswith("<@U123ABC> ")
    assert "channel" not in hooked
    assert hooked["blocks"][2]["elements"][0]["url"] == "https://approvals.example.com/interrupts/ow2.x"
    direct = slack_message(content(), "U123ABC", channel="U123ABC")
    assert direct["channel"] == "U123ABC"
    assert "<@" not in direct["text"]


def test_a_notification_is_one_per_visit_purpose_and_recipient():
    assert notification_id("i1", RAISED, "alice") == notification_id("i1", RAISED, "alice")
    ids = {
        notification_id("i1", RAISED, "alice"),
        notification_id("i2", RAISED, "alice"),
        notification_id("i1", reminder_purpose(0), "alice"),
        notification_id("i1", RAISED, "bob"),
    }
    assert len(ids) == 4


def test_channels_follow_the_preference_and_the_addresses_held():
    assert PrincipalEntry(email="a@example.com").reachable_channels() == ["email"]
    both = PrincipalEntry(email="a@example.com", slackUserId="U123ABC", channels=["slack", "email"])
    assert both.reachable_channels() == ["slack", "email"]
    assert PrincipalEntry(slackUserId="U123ABC", channels=["email"]).reachable_channels() == []
