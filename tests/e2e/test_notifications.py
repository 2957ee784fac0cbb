"""Issue 14 (items 2, 3, 6) over HTTP against a local stack of its own: people are asked.

Mail lands in moto's SES (read back through the local stack's outbox); Slack posts land in a loopback receiver
(development mode admits loopback, as the callbacks tests do); reminders and timeouts are brought forward with
the stack's clock (`interlude clock advance`), not waited for.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from html.parser import HTMLParser
from typing import Any

import pytest
import requests

from tests.support.browser import CHROMIUM, chromium
from tests.support.local_stack import Api, cli, quiesce, running_stack, tenant_admin_key, until, wire
from tests.support.receiver import Receiver

LINK = re.compile(r"http://127\.0\.0\.1:\d+/interrupts/[A-Za-z0-9._~-]+")
# A loaded machine: every wait polls with a generous bound.
WAIT_S = 60.0


@pytest.fixture(scope="module")
def slack() -> Any:
    receiver = Receiver().start()
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, slack) -> Any:
    env = {
        "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1",
        "INTERLUDE_NOTIFY_BACKOFF_BASE_S": "0",
        "INTERLUDE_SLACK_API_URL": slack.url("/api"),
    }
    with running_stack(tmp_path_factory.mktemp("notify"), env) as info:
        yield info


def tenant_api(stack: dict[str, str], name: str) -> Api:
    tenant = f"{name}-{uuid.uuid4().hex[:6]}"
    return Api(stack["baseUrl"], tenant_admin_key(stack, tenant), tenant)


def put_principal(api: Api, principal_id: str, **entry: Any) -> None:
    got = api.call("PUT", f"/principals/{principal_id}", entry)
    assert got.status_code == 201, got.text


def gate(api: Api, **config: Any) -> str:
    workflow_id = f"ask-{uuid.uuid4().hex[:8]}"
    nodes = [
        {"id": "review", "typeId": "core.approvalGate", "config": {"title": "Ship release 7?", **config}},
        {"id": "ship", "typeId": "core.noop"},
    ]
    edges = [{"sourceNodeId": "review", "targetNodeId": "ship"}]
    assert api.put_workflow(workflow_id, {"nodes": nodes, "edges": edges}).status_code == 201
    return workflow_id


def mail_to(stack: dict[str, str], *addresses: str, count: int | None = None) -> list[dict[str, Any]]:
    """The outbox's messages to these addresses, once there are `count` of them (default: one each)."""
    wanted = count if count is not None else len(addresses)

    def found() -> list[dict[str, Any]] | None:
        messages = requests.get(f"{stack['baseUrl']}/_local/outbox", timeout=10).json()["messages"]
        mine = [m for m in messages if any(a in " ".join(m["to"]) for a in addresses)]
        return mine if len(mine) >= wanted else None

    mail = until(found, WAIT_S, 0.2)
    assert mail is not None, f"no mail to {addresses}"
    return mail


def notifications(api: Api, run_id: str) -> list[dict[str, Any]]:
    got = api.call("GET", f"/runs/{wire(run_id)}/notifications")
    assert got.status_code == 200, got.text
    assert "ow2." not in got.text, "the log carries no link or token"
    assert "@" not in got.text, "the log carries no address"
    return got.json()["notifications"]


def advance_clock(stack: dict[str, str], seconds: float) -> None:
    cli(stack, "clock", "advance", str(seconds))


# -- three principals, three mails, three votes ------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"), reason="Debian's chromium is not installed")
def test_three_principals_are_mailed_personal_links_and_their_votes_complete_the_quorum(stack) -> None:
    api = tenant_api(stack, "mail")
    tag = uuid.uuid4().hex[:6]
    emails = {who: f"{who}-{tag}@example.com" for who in ("alice", "bob", "carol")}
    put_principal(api, "alice", displayName="Alice", email=emails["alice"], timeZone="Europe/Paris")
    put_principal(api, "bob", displayName="Bob", email=emails["bob"], groups=["reviewers"])
    put_principal(api, "carol", email=emails["carol"], groups=["reviewers"], timeZone="America/New_York")
    workflow = gate(
        api,
        description="Release 7 bundles the new billing engine.",
        approversList=["alice"],
        approverGroupRefs=["reviewers"],
        requiredApprovals=3,
        timeoutMs=3_600_000,
    )
    run_id = api.start(workflow)["runId"]

    mails = {m["to"][0].split("-")[0]: m for m in mail_to(stack, *emails.values())}
    assert sorted(mails) == ["alice", "bob", "carol"]
    links = {who: LINK.findall(m["text"]) for who, m in mails.items()}
    assert all(len(found) == 1 for found in links.values()), links
    assert len({found[0] for found in links.values()}) == 3, "each principal has a link of their own"
    alice = mails["alice"]
    assert alice["subject"] == "Your decision is needed: Ship release 7?"
    assert "Hello Alice," in alice["text"]
    assert "Release 7 bundles the new billing engine." in alice["text"]
    assert "(Europe/Paris)" in alice["text"]
    assert "(America/New_York)" in mails["carol"]["text"]
    assert links["alice"][0] in alice["html"]
    assert "<a href=" in alice["html"]
    page = requests.get(f"{stack['baseUrl']}/_local/outbox/{alice['id']}", timeout=10)
    assert page.status_code == 200
    assert "Open your decision page" in page.text

    # Each principal in a browser context of their own, in the suite's Chromium with its flags (no background work).
    with chromium() as browser:
        for who, said in (("alice", "Your vote was counted"), ("bob", "Your vote was counted"), ("carol", "Decision recorded")):
            context = browser.new_context()
            tab = context.new_page()
            tab.goto(links[who][0])
            tab.get_by_role("button", name="Approve", exact=True).click()
            tab.wait_for_load_state()
            assert tab.get_by_role("heading", level=1).first.inner_text() == said
            context.close()

    assert api.wait_status(run_id, {"completed"}, timeout_s=WAIT_S)["status"] == "completed"
    voters = {
        (e["payload"].get("resolvedBy") or {}).get("subjectId")
        for e in api.events(run_id)
        if e["type"] in ("approval.received", "interrupt.resolved")
    }
    assert voters == {"alice", "bob", "carol"}
    log = notifications(api, run_id)
    assert {(n["principalId"], n["channel"], n["outcome"], n["purpose"]) for n in log} == {
        (who, "email", "sent", "raised") for who in ("alice", "bob", "carol")
    }


# -- Slack ---------------------------------------------------------------------------------------------------


def slack_posts(slack: Receiver, path: str, count: int = 1) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]] | None:
        hits = [json.loads(h.body) for h in list(slack.hits) if h.path == path]
        return hits if len(hits) >= count else None

    return until(found, WAIT_S, 0.2)


def assert_documented_shape(message: dict[str, Any], title: str, bot_token: bool = False) -> str:
    """docs/gates.md: text, then a header, a section and an actions block: Approve and Reject (the gate offers
    accept and reject), then one URL button to the page. An incoming webhook's message has an optional comment field
    above the buttons; a bot token's has a "Decide with a comment…" button (a modal) after Reject instead."""
    if bot_token:
        header, section, actions = message["blocks"]
    else:
        header, section, comment, actions = message["blocks"]
        assert (comment["type"], comment["optional"], comment["element"]["type"]) == ("input", True, "plain_text_input")
    assert header == {"type": "header", "text": {"type": "plain_text", "text": f"Your decision is needed: {title}"}}
    assert section["type"] == "section"
    assert section["text"]["type"] == "mrkdwn"
    if bot_token:
        approve, reject, with_comment, button = actions["elements"]
        assert (with_comment["action_id"], with_comment["text"]["text"]) == ("interlude-decide-with-comment", "Decide with a comment…")
    else:
        approve, reject, button = actions["elements"]
    assert [(b["action_id"], b["text"]["text"]) for b in (approve, reject)] == [
        ("interlude-approve", "Approve"),
        ("interlude-reject", "Reject"),
    ]
    assert approve["value"] == reject["value"]
    assert (button["type"], button["action_id"], button["text"]["text"]) == (
        "button",
        "open-approval-page",
        "Open the approval page",
    )
    assert LINK.fullmatch(button["url"]), button["url"]
    return str(section["text"]["text"])


def test_a_slack_message_through_the_incoming_webhook_matches_its_documented_shape(stack, slack) -> None:
    api = tenant_api(stack, "slack")
    path = f"/hooks/{uuid.uuid4().hex}"
    stored = api.call("PUT", "/tenant/notifications/slack", {"webhookUrl": slack.url(path)})
    assert stored.status_code == 200, stored.text
    assert stored.json() == {"tenant": api.tenant, "configured": "webhook", "webhookHost": "127.0.0.1"}
    assert path not in stored.text
    put_principal(api, "dave", slackUserId="U0DAVE123", channels=["slack"])
    run_id = api.start(gate(api, approversList=["dave"]))["runId"]

    (message,) = slack_posts(slack, path)
    summary = assert_documented_shape(message, "Ship release 7?")
    assert summary.startswith("<@U0DAVE123> ")
    assert message["text"].startswith("<@U0DAVE123> ")
    # The button's link is dave's: it decides as dave.
    url = message["blocks"][-1]["elements"][-1]["url"]
    decided = requests.post(url, json={"resumeValue": {"action": "accept"}}, timeout=10)
    assert decided.status_code == 200, decided.text
    assert api.wait_status(run_id, {"completed"}, timeout_s=WAIT_S)["status"] == "completed"
    resolved = next(e for e in api.events(run_id) if e["type"] == "interrupt.resolved")
    assert resolved["payload"]["resolvedBy"]["subjectId"] == "dave"
    log = notifications(api, run_id)
    assert [(n["channel"], n["outcome"]) for n in log] == [("slack", "sent")]


def test_a_bot_token_posts_a_direct_message_and_is_never_returned(stack, slack) -> None:
    api = tenant_api(stack, "bot")
    token = f"xoxb-{uuid.uuid4().hex}"
    stored = api.call("PUT", "/tenant/notifications/slack", {"botToken": token})
    assert stored.status_code == 200
    assert token not in stored.text
    put_principal(api, "erin", slackUserId="U0ERIN123", email=f"erin-{uuid.uuid4().hex[:6]}@example.com")
    before = len([h for h in slack.hits if h.path == "/api/chat.postMessage"])
    api.start(gate(api, approversList=["erin"]))
    hits = until(
        lambda: [h for h in list(slack.hits) if h.path == "/api/chat.postMessage"][before:] or None, WAIT_S, 0.2
    )
    assert hits[0].headers["authorization"] == f"Bearer {token}"
    message = json.loads(hits[0].body)
    assert message["channel"] == "U0ERIN123"
    assert_documented_shape(message, "Ship release 7?", bot_token=True)


def test_slack_settings_refusals(stack) -> None:
    api = tenant_api(stack, "slackbad")
    both = api.call("PUT", "/tenant/notifications/slack", {"webhookUrl": "https://hooks.example/x", "botToken": "xoxb-123456789"})
    assert both.status_code == 400
    assert both.json()["error"] == "validation_error"
    private = api.call("PUT", "/tenant/notifications/slack", {"webhookUrl": "http://10.1.2.3/hook"})
    assert private.status_code == 400
    assert private.json()["details"]["field"] == "webhookUrl"


# -- reminders and escalation ------------------------------------------------------------------------------


def test_a_reminder_goes_only_to_those_who_have_not_voted_and_none_after_the_decision(stack) -> None:
    api = tenant_api(stack, "remind")
    tag = uuid.uuid4().hex[:6]
    frank, gina = f"frank-{tag}@example.com", f"gina-{tag}@example.com"
    put_principal(api, "frank", email=frank)
    put_principal(api, "gina", email=gina)
    workflow = gate(api, approversList=["frank", "gina"], requiredApprovals=2, remindersMs=[600_000, 1_200_000])
    run_id = api.start(workflow)["runId"]
    first = {m["to"][0]: m for m in mail_to(stack, frank, gina)}
    # frank votes through his link before any reminder
    link = LINK.findall(first[frank]["text"])[0]
    assert requests.post(link, json={"resumeValue": {"action": "accept"}}, timeout=10).status_code == 200

    advance_clock(stack, 601)
    reminded = mail_to(stack, frank, gina, count=3)
    reminders = [m for m in reminded if m["subject"].startswith("Reminder:")]
    assert [m["to"][0] for m in reminders] == [gina]
    # The CLI lists the local outbox, each message with the page that shows it.
    listed = [json.loads(line) for line in cli(stack, "outbox", "--local").stdout.splitlines()]
    (line,) = [m for m in listed if m["id"] == reminders[0]["id"]]
    assert line["subject"] == reminders[0]["subject"]
    assert requests.get(line["page"], timeout=10).status_code == 200
    link = LINK.findall(reminders[0]["text"])[0]
    assert requests.post(link, json={"resumeValue": {"action": "accept"}}, timeout=10).status_code == 200
    assert api.wait_status(run_id, {"completed"}, timeout_s=WAIT_S)["status"] == "completed"

    # The second reminder's time comes after the decision: nothing is sent.
    advance_clock(stack, 700)
    quiesce(stack)  # every schedule due by then has fired and its mail landed: the reminder would have too
    assert len(mail_to(stack, frank, gina, count=3)) == 3
    log = notifications(api, run_id)
    assert sorted((n["principalId"], n["purpose"]) for n in log) == [
        ("frank", "raised"),
        ("gina", "raised"),
        ("gina", "reminder-1"),
    ]


def test_an_escalation_on_timeout_notifies_and_the_gate_is_rejected(stack) -> None:
    api = tenant_api(stack, "escalate")
    tag = uuid.uuid4().hex[:6]
    ivy, boss = f"ivy-{tag}@example.com", f"boss-{tag}@example.com"
    put_principal(api, "ivy", email=ivy)
    put_principal(api, "boss", email=boss, displayName="The Boss")
    workflow = gate(api, approversList=["ivy"], timeoutMs=600_000, onTimeout="escalate", escalationPrincipals=["boss"])
    run_id = api.start(workflow)["runId"]
    mail_to(stack, ivy)
    advance_clock(stack, 601)
    assert api.wait_status(run_id, {"failed"}, timeout_s=WAIT_S)["status"] == "failed"
    (escalated,) = mail_to(stack, boss)
    assert escalated["subject"] == "Escalated: 'Ship release 7?' timed out and was rejected"
    assert "Hello The Boss," in escalated["text"]
    assert not LINK.search(escalated["text"])
    resolved = next(e for e in api.events(run_id) if e["type"] == "interrupt.resolved")
    assert (resolved["payload"]["decision"], resolved["payload"]["reason"]) == ("rejected", "timeout")
    assert ("boss", "escalation", "sent") in {(n["principalId"], n["purpose"], n["outcome"]) for n in notifications(api, run_id)}


# -- text someone else wrote -----------------------------------------------------------------------------------------

# Line breaks that would start a header (and a blank line that would end them), markup, an entity already escaped,
# quotes and text beyond ASCII: in every value a mail shows that its recipient did not write.
HOSTILE = 'Zoë <b>bold</b> & "q" \'s &amp; 日本\r\nBcc: evil@example.net\r\n\r\n<a href="https://evil.example">x</a>'
# The headers a mail has, and the tags its HTML part is made of (adapters/notify/templates/mail.html): none else.
MAIL_HEADERS = {"Subject", "From", "To", "MIME-Version", "Content-Type"}
MAIL_TAGS = {"html", "head", "meta", "title", "body", "table", "tr", "td", "th", "p", "a"}


class Read(HTMLParser):
    """An HTML part as a mail program renders it: its elements and attributes, and the text a person reads."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def words(self) -> str:
        return " ".join(" ".join(self.text).split())


def one_line(text: str) -> str:
    return " ".join(text.split())


def reads_as_written(mail: dict[str, Any], to: str, subject: str, *written: str) -> None:
    """The mail went to `to` alone, with its own headers alone; its subject is `subject`; every value in `written`
    reads as written in both parts (line breaks kept in the plain text, the HTML part's text as a mail program shows
    it); its HTML holds only the template's markup, and links only to the decision page."""
    assert {name for name, _ in mail["headers"]} == MAIL_HEADERS, mail["headers"]
    assert mail["to"] == [to]
    assert mail["subject"] == subject
    page = Read(mail["html"])
    for tag, attrs in page.tags:
        assert tag in MAIL_TAGS, tag
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            assert "evil" not in (value or ""), (tag, name, value)
    assert [dict(attrs)["href"] for tag, attrs in page.tags if tag == "a"] == LINK.findall(mail["text"])
    for value in written:
        assert value.replace("\r\n", "\n") in mail["text"], (value, mail["text"])
        assert one_line(value) in page.words(), (value, page.words())
    # No entity escaped twice or shown as text, no template, no Python or JSON spelling of a value.
    for shown in (mail["text"], page.words()):
        for never in ("&amp;amp;", "&lt;", "{{", "{'", '{"'):
            assert never not in shown, (never, shown)


def test_what_others_wrote_reads_as_written_in_every_mail_and_adds_no_header_recipient_or_markup(stack) -> None:
    api = tenant_api(stack, "hostile")
    tag = uuid.uuid4().hex[:6]
    # A domain in another script is mailed as its ASCII form (IDNA), which SES takes; the directory keeps it as written.
    ann, boss = f"ann-{tag}@exämple.com", f"boss-{tag}@example.com"
    put_principal(api, "ann", displayName=f"Ann {HOSTILE}", email=ann)
    put_principal(api, "boss", displayName=f"Boss {HOSTILE}", email=boss)
    starter = f"starter-{tag}"
    put_principal(api, starter, displayName=f"Starter {HOSTILE}")
    workflow = f"hostile-{tag}"
    nodes = [
        {
            "id": "review",
            "typeId": "core.approvalGate",
            "name": f"Step {HOSTILE}",
            "config": {
                "title": "Ship {{inputs.what}}?",
                "description": f"Why: {HOSTILE}",
                "approversList": ["ann"],
                "remindersMs": [600_000],
                "timeoutMs": 1_200_000,
                "onTimeout": "escalate",
                "escalationPrincipals": ["boss"],
            },
        }
    ]
    assert api.put_workflow(workflow, {"name": f"Flow {HOSTILE[:100]}", "nodes": nodes}).status_code == 201
    key = api.new_key(["runs:create", "runs:read"], subject=starter)
    started = api.call("POST", "/runs", {"workflowId": workflow, "inputs": {"what": HOSTILE}}, key=key)
    assert started.status_code == 201, started.text
    run_id = started.json()["runId"]
    idn = f"ann-{tag}@xn--exmple-cua.com"
    title = f"Ship {HOSTILE}?"
    said = (
        f"Hello Ann {HOSTILE},",
        f"Why: {HOSTILE}",
        f"Flow {HOSTILE[:100]}",
        f"Starter {HOSTILE}",
        title,
    )

    (asked,) = mail_to(stack, idn)
    reads_as_written(asked, idn, f"Your decision is needed: {one_line(title)}", *said)
    advance_clock(stack, 601)
    reminder = next(m for m in mail_to(stack, idn, count=2) if m["id"] != asked["id"])
    reads_as_written(reminder, idn, f"Reminder: your decision is needed: {one_line(title)}", *said)
    advance_clock(stack, 600)
    (escalated,) = mail_to(stack, boss)
    escalation = f"Escalated: '{one_line(title)}' timed out and was rejected"
    reads_as_written(escalated, boss, escalation, f"Hello Boss {HOSTILE},", title)
    assert api.wait_status(run_id, {"failed"}, timeout_s=WAIT_S)["status"] == "failed"


def test_an_address_that_is_not_one_sendable_address_is_refused_by_the_directory(stack) -> None:
    api = tenant_api(stack, "address")
    for email in ("a,b@example.com", "a<b>@example.com", "zoë@example.com", "a(comment)@example.com"):
        got = api.call("PUT", "/principals/someone", {"email": email})
        assert got.status_code == 400, (email, got.text)
        assert got.json()["error"] == "validation_error"
        assert got.json()["details"]["field"] == "email"
