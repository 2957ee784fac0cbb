"""Issue 28 item 6, pure: Slack's request signature as Slack documents it (its published worked example, from
"Verifying requests from Slack", docs.slack.dev), the five-minute window both ways, and a click read from its payload."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from interlude.domain.errors import Invalid
from interlude.rules.slack import button_value
from interlude.rules.slack_requests import SignatureRefused, click_of, signature, verify_signature

# Slack's published example: the signing secret, timestamp, body and signature of one slash-command request.
DOC_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
DOC_TIMESTAMP = "1531420618"
DOC_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar"
    b"&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack."
    b"com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887"
    b"a14d10d2c447fce8b6703c"
)
DOC_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def test_slacks_own_worked_example_verifies():
    assert signature(DOC_SECRET, DOC_TIMESTAMP, DOC_BODY) == DOC_SIGNATURE
    verify_signature(DOC_SECRET, DOC_TIMESTAMP, DOC_SIGNATURE, DOC_BODY, float(DOC_TIMESTAMP) + 60)


@pytest.mark.parametrize(
    ("timestamp", "sent", "body", "now_after", "reason"),
    [
        (DOC_TIMESTAMP, DOC_SIGNATURE, DOC_BODY + b"&x=1", 0, "signature"),
        (DOC_TIMESTAMP, DOC_SIGNATURE.upper(), DOC_BODY, 0, "signature"),
        (DOC_TIMESTAMP, DOC_SIGNATURE, DOC_BODY, 301, "timestamp"),
        (DOC_TIMESTAMP, DOC_SIGNATURE, DOC_BODY, -301, "timestamp"),
        ("soon", DOC_SIGNATURE, DOC_BODY, 0, "timestamp"),
        (None, DOC_SIGNATURE, DOC_BODY, 0, "missing"),
        (DOC_TIMESTAMP, None, DOC_BODY, 0, "missing"),
    ],
)
def test_a_request_not_signed_with_the_secret_within_five_minutes_is_refused(timestamp, sent, body, now_after, reason):
    with pytest.raises(SignatureRefused) as refused:
        verify_signature(DOC_SECRET, timestamp, sent, body, float(DOC_TIMESTAMP) + now_after)
    assert refused.value.reason == reason


def test_a_click_names_its_user_button_and_interrupt():
    value = button_value("t1/abc", "review", "int_1")
    payload = {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": "U1"},
        "response_url": "https://hooks.slack.com/actions/T1/1/x",
        "actions": [{"action_id": "interlude-reject", "value": value}],
    }
    click = click_of(urlencode({"payload": json.dumps(payload)}).encode())
    assert (click.user_id, click.action, click.run_id, click.node_id, click.interrupt_id) == ("U1", "reject", "t1/abc", "review", "int_1")
    assert click.comment is None
    payload["state"] = {"values": {"interlude-comment": {"comment": {"type": "plain_text_input", "value": "  not yet \n"}}}}
    assert click_of(urlencode({"payload": json.dumps(payload)}).encode()).comment == "not yet"
    payload["actions"] = [{"action_id": "interlude-approve", "value": "{not ours"}]
    with pytest.raises(Invalid) as refused:
        click_of(urlencode({"payload": json.dumps(payload)}).encode())
    assert refused.value.details == {"field": "payload.actions.value"}
