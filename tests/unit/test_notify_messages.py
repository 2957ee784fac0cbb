"""What a notification says (issue 14), pure: the deadline in the recipient's zone, the e-mail's two parts, the
Slack message's documented shape, and ids that make a notification once per recipient, purpose and visit."""

from __future__ import annotations

from datetime import UTC, datetime
from email import message_from_bytes
from email.policy import default

from interlude.adapters.notify.messages import (
    ESCALATION,
    RAISED,
    Content,
    deadline_text,
    decision_buttons_fit,
    mime_email,
    notification_id,
    reminder_purpose,
    slack_message,
)
from interlude.api.page import approval
from interlude.domain.models.principals import PrincipalEntry, sendable_address
from interlude.rules.slack import button_value
from interlude.rules.wording import headline, in_lines

# 2026-12-01T12:00:00Z
NOON_UTC = 1796126400.0


def content(**overrides) -> Content:
    base = {
        "purpose": RAISED,
        "title": "Ship <7>?",
        "description": "Billing & more",
        "workflow_name": "Release train",
        "link": "https://approvals.example.com/interrupts/ow2.x",
        "deadline": NOON_UTC,
        "time_zone": "Europe/Paris",
        "recipient_name": "Alice",
        "asked_by": "Ana & Co",
    }
    return Content(**{**base, **overrides})


def test_the_deadline_is_shown_in_the_recipients_zone_as_the_approval_page_shows_times():
    assert deadline_text(NOON_UTC, "Europe/Paris") == "Tue 1 Dec 2026, 13:00 (Europe/Paris) · 12:00 UTC"
    assert deadline_text(NOON_UTC, "America/New_York") == "Tue 1 Dec 2026, 07:00 (America/New_York) · 12:00 UTC"
    assert deadline_text(NOON_UTC, None) == "Tue 1 Dec 2026, 12:00 UTC"
    assert deadline_text(NOON_UTC, "Europe/Paris") == approval.when(datetime.fromtimestamp(NOON_UTC, UTC), "Europe/Paris")
    assert deadline_text(None, "UTC") == "no deadline"


def test_the_mail_has_a_plain_text_and_an_escaped_html_part_with_the_link():
    message = message_from_bytes(mime_email("from@example.com", "alice@example.com", content()), policy=default)
    assert message["Subject"] == "Your decision is needed: Ship <7>?"
    text = message.get_body(("plain",)).get_content()
    page = message.get_body(("html",)).get_content()
    assert "Decide by: Tue 1 Dec 2026, 13:00 (Europe/Paris) · 12:00 UTC" in text
    assert "https://approvals.example.com/interrupts/ow2.x" in text
    # The text part is text: nothing in it is escaped.
    assert "Request: Ship <7>?" in text
    assert "Asked by: Ana & Co" in text
    assert "Workflow: Release train" in text
    assert "Ship &lt;7&gt;?" in page
    assert "Billing &amp; more" in page
    assert "Ana &amp; Co" in page
    assert "Release train" in page
    assert "13:00 (Europe/Paris)" in page
    assert 'href="https://approvals.example.com/interrupts/ow2.x"' in page
    assert ">Open your decision page</a>" in page
    assert "<7>" not in page


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
    # Slack's markup reads <, > and &: what the request says is shown as written.
    assert "'Ship &lt;7&gt;?'" in direct["blocks"][1]["text"]["text"]
    assert "Asked by: Ana &amp; Co" in direct["blocks"][1]["text"]["text"]


def test_approve_and_reject_buttons_come_where_one_click_answers_the_gate():
    value = button_value("t1/abc", "review", "int_1")
    both = slack_message(content(actions=("accept", "reject", "refine"), decision_value=value), "U1", channel="U1")
    (buttons,) = [b["elements"] for b in both["blocks"] if b["type"] == "actions"]
    # A bot token's message asks for a comment in a modal (views.open needs the token)...
    assert [(b["action_id"], b["text"]["text"], b.get("value")) for b in buttons] == [
        ("interlude-approve", "Approve", value),
        ("interlude-reject", "Reject", value),
        ("interlude-decide-with-comment", "Decide with a comment…", value),
        ("open-approval-page", "Open the approval page", None),
    ]
    assert not [b for b in both["blocks"] if b["type"] == "input"]
    # ...an incoming webhook's holds the comment field above the buttons, sent with the click.
    hooked = slack_message(content(actions=("accept", "reject", "refine"), decision_value=value), "U1")
    (buttons,) = [b["elements"] for b in hooked["blocks"] if b["type"] == "actions"]
    assert [b["action_id"] for b in buttons] == ["interlude-approve", "interlude-reject", "open-approval-page"]
    (field,) = [b for b in hooked["blocks"] if b["type"] == "input"]
    assert (field["optional"], field["element"]["type"], field["label"]["text"]) == (True, "plain_text_input", "Comment (optional)")
    only_page = slack_message(content(actions=("accept", "reject")), "U1", channel="U1")
    (buttons,) = [b["elements"] for b in only_page["blocks"] if b["type"] == "actions"]
    assert [b["action_id"] for b in buttons] == ["open-approval-page"]
    assert not [b for b in only_page["blocks"] if b["type"] == "input"]
    approval = {"kind": "approval", "data": {"actions": ["accept", "reject"]}}
    assert decision_buttons_fit(approval)
    assert not decision_buttons_fit({"kind": "approval", "data": {"actions": ["edit-accept", "refine"]}})
    assert not decision_buttons_fit({"kind": "clarification", "data": {}})


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


def test_an_address_is_mailed_only_as_one_address_sendable_as_written():
    """What a mail reader would read as no address, several, or another one, and what SES cannot send (a part before
    the @ beyond ASCII), is no address to mail; a domain in another script is sent as its ASCII form (IDNA)."""
    assert sendable_address("ann@example.com") == "ann@example.com"
    assert sendable_address("ann@exämple.com") == "ann@xn--exmple-cua.com"
    assert sendable_address("ann@日本.jp") == "ann@xn--wgv71a.jp"
    assert sendable_address('"a,b"@example.com') == '"a,b"@example.com'
    unsendable = ("a,b@example.com", "a<b>@example.com", "a(b)@example.com", "a;b@x.com", "zoë@example.com", "a..b@x.com", "a@")
    for address in unsendable:
        assert sendable_address(address) is None, address


def test_a_value_under_a_request_reads_as_lines_of_text_never_as_its_json():
    value = {"order": 7, "note": "<i>x</i> &amp;", "items": ["one", {"sku": "A-1", "gift": True}], "empty": None}
    assert in_lines(value) == "order: 7\nnote: <i>x</i> &amp;\nitems:\n  • one\n  • sku: A-1\n    gift: yes\nempty:"
    assert in_lines("line one\nline two") == "line one\nline two"
    assert in_lines(None) == ""


def test_a_custom_requests_title_is_text_or_the_words_for_its_kind():
    def custom(title):
        return headline({"kind": "custom", "data": {"customKind": "k", "payload": {"title": title}}})[0]

    assert custom("Check the refund") == "Check the refund"
    assert custom(7) == "7"
    assert custom({"x": 1}) == "Your input is needed"
    assert custom(["x"]) == "Your input is needed"
