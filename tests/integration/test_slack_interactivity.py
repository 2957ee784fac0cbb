"""Issue 28 item 6 in process (moto, the real api handler, the real notify worker, a loopback receiver standing in for
slack.com): the Slack message carries Approve and Reject buttons; a click Slack reports, signed with the tenant's
signing secret, decides the gate as the directory principal the Slack user is, and the message is replaced in place
with the outcome. A click with a bad signature, an old timestamp or from an unknown Slack user is refused and changes
nothing; one sent twice decides once. When the gate closes (decided anywhere, or its run cancelled), the notify
worker replaces every other recipient's message with the outcome through chat.update. The e-mail is HTML and text from its templates, with the request's facts in
the recipient's zone (the zone the page its link opens shows), and a GET of that link decides nothing."""

from __future__ import annotations

import json
import secrets
import time
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.policy import default
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from moto.ses.models import ses_backends

from interlude.adapters import secret_values
from interlude.adapters.keyring_store import load_key_ring
from interlude.adapters.notify.messages import RAISED, queue_message
from interlude.adapters.notify.slack_settings import store_slack
from interlude.adapters.notify.worker import Worker
from interlude.composition import Services
from interlude.config import settings
from interlude.config.notify import SLACK_API_URL_ENV
from interlude.domain.errors import DomainError
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.moments import spoken
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.rules.slack_requests import signature
from interlude.store.facade import Store
from tests.integration.conftest import new_api_key, signed_in
from tests.integration.test_notify_worker import queued, worker_for
from tests.support.moto_world import ENTRIES_TABLE, TABLE, current_account
from tests.support.receiver import Receiver

PUBLIC_BASE = "http://127.0.0.1:9"
GATE = {
    "id": "review",
    "typeId": "core.approvalGate",
    "config": {"title": "Ship release 7?", "approversList": ["ana", "bob"], "timeoutMs": 3_600_000},
}


@pytest.fixture
def slack(world, monkeypatch):
    """A receiver standing in for slack.com (the Web API and the clicks' response URLs), reachable as a loopback
    destination, as development mode admits."""
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    receiver = Receiver(answer=b'{"ok":true}', answer_type="application/json").start()
    # The api function's Web API calls (views.open) go there too.
    monkeypatch.setenv(SLACK_API_URL_ENV, receiver.url("/api"))
    lambda_runtime.fresh_instances()
    yield receiver
    receiver.close()


@pytest.fixture
def services(world) -> Services:
    return Services(Store(TABLE, ENTRIES_TABLE))


def http(method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, Any]:
    got = lambda_runtime.invoke("api", to_event(method, path, headers, body, "127.0.0.1"))
    text = got.get("body") or ""
    try:
        return got["statusCode"], json.loads(text)
    except ValueError:
        return got["statusCode"], text


def with_signing_secret(tenant: str) -> str:
    """The tenant's Slack app signing secret, set through the API as a tenant admin sets it."""
    secret = secrets.token_hex(16)
    key = new_api_key(_services(), "admin", tenant)
    status, answer = http(
        "PUT",
        "/tenant/notifications/slack/signing-secret",
        json.dumps({"signingSecret": secret}).encode(),
        authorization=f"Bearer {key}",
        **{"content-type": "application/json"},
    )
    assert status == 200, answer
    assert answer == {"tenant": tenant, "configured": "signing-secret"}
    return secret


def _services() -> Services:
    return Services(Store(TABLE, ENTRIES_TABLE))


def gate_run(services: Services, tenant: str, **config: Any) -> tuple[str, str]:
    admin = signed_in(services, "ops-bot", tenant)
    definition = {"name": "Release train", "nodes": [{**GATE, "config": {**GATE["config"], **config}}], "edges": []}
    services.workflows.put_workflow(admin, "release", WorkflowDefinition.model_validate(definition))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "release"}))
    return state.runId, state.interrupts["review"].interruptId


def person(services: Services, tenant: str, principal_id: str, **entry: Any) -> None:
    services.directory.put_principal(tenant, principal_id, PrincipalEntry.model_validate(entry), "admin")


def worker(services: Services, urls: dict[str, str], slack: Receiver | None = None) -> Worker:
    """The notify worker, signing links with the deployment's key ring (so the api opens them): a notify instance
    started now, which keeps no Slack secret an earlier one read (adapters/secret_values.py)."""
    secret_values.forget()
    return worker_for(
        services,
        urls,
        ring=load_key_ring(settings().key_ring_secret),
        public_base_url=PUBLIC_BASE,
        slack_api_url=slack.url("/api") if slack else "https://slack.invalid/api",
        max_attempts=1,
    )


def notified(services: Services, urls: dict[str, str], run_id: str, interrupt_id: str, who: str, slack=None) -> None:
    sqs = boto3.client("sqs")
    tenant = run_id.split("/")[0]
    message = queue_message(tenant, run_id, "review", interrupt_id, who, RAISED)
    sqs.send_message(QueueUrl=urls["notifications"], MessageBody=json.dumps(message))
    got = sqs.receive_message(QueueUrl=urls["notifications"], MaxNumberOfMessages=1)["Messages"][0]
    assert worker(services, urls, slack).handle({"body": got["Body"], "receiptHandle": got["ReceiptHandle"]}) == "sent"


def posted_message(services, world, slack: Receiver, run_id: str, interrupt_id: str, who: str) -> dict[str, Any]:
    """The Slack message the notify worker posts to `who` through the tenant's bot token (chat.postMessage)."""
    store_slack(world.tenant, {"botToken": "xoxb-test-0000-token"})
    notified(services, world.queues, run_id, interrupt_id, who, slack)
    hit = slack.hits[-1]
    assert hit.path == "/api/chat.postMessage"
    return json.loads(hit.body)


def asked(services, world, slack: Receiver, ana: dict[str, Any] | None = None, **config: Any) -> tuple[str, str, dict[str, Any]]:
    """Ana (Slack user U0ANA) in the directory, the tenant's signing secret set, a run whose gate asks, and the Slack
    message it sent Ana: (signing secret, run id, message)."""
    person(services, world.tenant, "ana", **{"displayName": "Ana", "slackUserId": "U0ANA", **(ana or {})})
    secret = with_signing_secret(world.tenant)
    run_id, interrupt_id = gate_run(services, world.tenant, **config)
    return secret, run_id, posted_message(services, world, slack, run_id, interrupt_id, "ana")


def click(
    message: dict[str, Any],
    user: str,
    action_id: str,
    response_url: str,
    secret: str,
    tenant: str,
    at: float | None = None,
    comment: str | None = None,
) -> tuple[int, Any]:
    """Slack's block_actions request for a click on `action_id` in `message` (with `comment` typed in its comment
    field), signed with `secret` at `at`."""
    # A webhook's message holds the comment field; a bot token's asks for a comment in a modal instead.
    fields = [b for b in message["blocks"] if b["type"] == "input"]
    assert fields or comment is None
    typed = {f["block_id"]: {f["element"]["action_id"]: {"type": "plain_text_input", "value": comment}} for f in fields}
    button = next(e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action_id)
    payload = {
        "type": "block_actions",
        "team": {"id": "T0TEAM", "domain": "acme"},
        "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "container": {"type": "message", "message_ts": "1796126400.000100", "channel_id": "D0DM", "is_ephemeral": False},
        "trigger_id": "1.2.3",
        "channel": {"id": "D0DM", "name": "directmessage"},
        "message": {"type": "message", "ts": "1796126400.000100", "text": message["text"], "blocks": message["blocks"]},
        "response_url": response_url,
        "state": {"values": typed},
        "actions": [{**button, "block_id": "b1", "action_ts": "1796126401.000200"}],
    }
    return signed_post(urlencode({"payload": json.dumps(payload)}).encode(), secret, tenant, at)


def signed_post(body: bytes, secret: str, tenant: str, at: float | None = None) -> tuple[int, Any]:
    stamp = str(int(at if at is not None else time.time()))
    return http(
        "POST",
        f"/slack/{tenant}/interactions",
        body,
        **{
            "content-type": "application/x-www-form-urlencoded",
            "x-slack-request-timestamp": stamp,
            "x-slack-signature": signature(secret, stamp, body),
        },
    )


def votes(services: Services, run_id: str) -> list[tuple[str, str, str]]:
    state, _ = services.store.get_run(run_id)
    interrupt = state.interrupts.get("review")
    return [(v.principal.split("|")[-1], v.action, v.surface) for v in (interrupt.votes if interrupt else [])]


# -- a click decides, in place ------------------------------------------------------------------------------------


def test_a_signed_click_decides_as_the_mapped_principal_and_the_message_is_replaced_with_the_outcome(services, world, slack):
    tenant = world.tenant
    secret, run_id, message = asked(services, world, slack, {"timeZone": "Europe/Paris"})
    buttons = [e["text"]["text"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["Approve", "Reject", "Decide with a comment…", "Open the approval page"]
    assert not [b for b in message["blocks"] if b["type"] == "input"]
    assert "Asked by: ops-bot" in message["blocks"][1]["text"]["text"]
    assert "(Europe/Paris)" in message["blocks"][1]["text"]["text"]

    status, answer = click(message, "U0ANA", "interlude-approve", slack.url("/actions/T0TEAM/1/abc"), secret, tenant)
    assert status == 200, answer
    state, _ = services.store.get_run(run_id)
    assert state.status == "completed"
    resolved = next(e for e in services.store.read_events(run_id, 0) if e["type"] == "interrupt.resolved")
    assert resolved["payload"]["resumeValue"]["decidedBy"] == "ana"
    # The message, replaced in place at its response URL: the buttons gone, the outcome in words.
    reply = slack.hits[-1]
    assert reply.path == "/actions/T0TEAM/1/abc"
    replaced = json.loads(reply.body)
    assert replaced["replace_original"] is True
    assert replaced["text"] == "Approved by Ana"
    assert not [b for b in replaced["blocks"] if b["type"] == "actions"]
    assert replaced["blocks"][0] == message["blocks"][0]
    assert answer == replaced


def test_a_click_sent_twice_decides_once_and_a_reject_is_said_as_one(services, world, slack):
    tenant = world.tenant
    person(services, tenant, "bob", displayName="Bob", slackUserId="U0BOB")
    secret, run_id, message = asked(services, world, slack, requiredApprovals=2)
    reply_to = slack.url("/actions/1")

    status, first = click(message, "U0ANA", "interlude-approve", reply_to, secret, tenant)
    assert status == 200
    assert first["text"] == "Ana approved; the request waits for more approvals"
    status, again = click(message, "U0ANA", "interlude-approve", reply_to, secret, tenant)
    assert status == 200
    assert again == {
        "response_type": "ephemeral",
        "replace_original": False,
        "text": "You have already answered this request; your first answer stands.",
    }
    assert votes(services, run_id) == [("ana", "accept", "slack")]

    # Bob's message came through the tenant's incoming webhook: no modal (views.open needs a bot token), a comment
    # field above the buttons instead. What he typed there is his vote's comment, said with the outcome.
    store_slack(tenant, {"webhookUrl": slack.url("/hook")})
    notified(services, world.queues, run_id, services.store.get_run(run_id)[0].interrupts["review"].interruptId, "bob", slack)
    bobs = json.loads(slack.hits[-1].body)
    assert slack.hits[-1].path == "/hook"
    buttons = [e["text"]["text"] for b in bobs["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["Approve", "Reject", "Open the approval page"]
    status, rejected = click(bobs, "U0BOB", "interlude-reject", reply_to, secret, tenant, comment=" Not <before> Friday ")
    assert (status, rejected["text"]) == (200, "Rejected by Bob: Not &lt;before&gt; Friday")
    assert services.store.get_run(run_id)[0].status == "failed"
    resolved = next(e for e in services.store.read_events(run_id, 0) if e["type"] == "interrupt.resolved")
    assert resolved["payload"]["resumeValue"]["comment"] == "Not <before> Friday"
    assert not [b for b in rejected["blocks"] if b["type"] in ("input", "actions")]
    status, late = click(bobs, "U0BOB", "interlude-reject", reply_to, secret, tenant)
    assert late["text"] == "This request was already decided or has timed out, so your answer was not recorded."


def test_a_click_that_votes_is_counted_as_a_decision_and_clicks_count_against_the_tenants_request_rate(
    services, world, slack, monkeypatch, capsys
):
    from interlude.adapters import metrics
    from interlude.domain.models.tenants import TenantSettings
    from interlude.rules import limits

    tenant = world.tenant
    secret, run_id, message = asked(services, world, slack)
    try:
        with monkeypatch.context() as in_lambda:
            # Points are written only inside Lambda (adapters.metrics), from settings read once per instance.
            in_lambda.setenv("AWS_LAMBDA_FUNCTION_NAME", "interlude-api")
            in_lambda.setenv(metrics.DEPLOYMENT_ENV, "test")
            in_lambda.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
            lambda_runtime.fresh_instances()
            capsys.readouterr()
            assert click(message, "U0ANA", "open-approval-page", slack.url("/actions/1"), secret, tenant) == (200, {})
            status, answer = click(message, "U0ANA", "interlude-approve", slack.url("/actions/1"), secret, tenant)
            assert (status, answer["text"]) == (200, "Approved by Ana")
    finally:
        lambda_runtime.fresh_instances()
    decisions = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"Decisions"' in line]
    assert [d["surface"] for d in decisions] == ["slack"]

    # The tenant's rate is the one its API keys count against: full for the next few windows, a click is told so.
    services.tenants.put_settings(tenant, TenantSettings.model_validate({"limits": {"requestsPerSecond": 1}}), "admin")
    lambda_runtime.fresh_instances()
    run_id, interrupt_id = gate_run(services, tenant)
    message = posted_message(services, world, slack, run_id, interrupt_id, "ana")
    now = time.time()
    for ahead in range(3):
        services.request_counters.count_request(tenant, limits.window_of(now + ahead), 1)
    hits = len(slack.hits)
    status, answer = click(message, "U0ANA", "interlude-approve", slack.url("/actions/1"), secret, tenant)
    assert (status, answer["response_type"]) == (200, "ephemeral")
    assert answer["text"].startswith("Interlude is taking many answers for your organisation just now")
    assert json.loads(slack.hits[-1].body) == answer
    assert len(slack.hits) == hits + 1
    assert votes(services, run_id) == []


# -- the decision modal (a bot token's messages) -------------------------------------------------------------------


def submitted(view: dict[str, Any], user: str, secret: str, tenant: str, decision: str | None, comment: str | None) -> tuple[int, Any]:
    """Slack's view_submission request for the modal `view` (as views.open was sent it), answered so."""
    values: dict[str, Any] = {"interlude-comment": {"comment": {"type": "plain_text_input", "value": comment}}}
    chosen = next((o for o in view["blocks"][1]["element"]["options"] if o["value"] == decision), None)
    values["interlude-decision"] = {"decision": {"type": "static_select", "selected_option": chosen}}
    payload = {
        "type": "view_submission",
        "team": {"id": "T0TEAM", "domain": "acme"},
        "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "trigger_id": "1.2.4",
        "view": {
            "id": "V0VIEW",
            "type": "modal",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "blocks": view["blocks"],
            "state": {"values": values},
            "hash": "1796126402.abc",
        },
    }
    return signed_post(urlencode({"payload": json.dumps(payload)}).encode(), secret, tenant)


def test_decide_with_a_comment_opens_a_modal_whose_submission_decides_as_a_click_does(services, world, slack):
    tenant = world.tenant
    secret, run_id, message = asked(services, world, slack)
    hits = len(slack.hits)
    status, answer = click(message, "U0ANA", "interlude-decide-with-comment", slack.url("/actions/1"), secret, tenant)
    assert (status, answer) == (200, {})
    # views.open with the click's trigger_id and the tenant's bot token: the click's one call to Slack.
    (opened,) = slack.hits[hits:]
    assert opened.path == "/api/views.open"
    assert {k.lower(): v for k, v in opened.headers.items()}["authorization"] == "Bearer xoxb-test-0000-token"
    sent = json.loads(opened.body)
    assert sent["trigger_id"] == "1.2.3"
    view = sent["view"]
    assert view["blocks"][0]["text"]["text"] == "*Ship release 7?*"
    assert [o["text"]["text"] for o in view["blocks"][1]["element"]["options"]] == ["Approve", "Reject"]
    assert view["blocks"][2]["element"]["type"] == "plain_text_input"

    # No choice made (Slack requires one; a forged submission is told beside the field), then a reject with a comment.
    hits = len(slack.hits)
    assert submitted(view, "U0ANA", secret, tenant, None, None) == (
        200,
        {"response_action": "errors", "errors": {"interlude-decision": "Choose Approve or Reject."}},
    )
    assert submitted(view, "U0ANA", secret, tenant, "reject", " not before Friday ") == (200, {"response_action": "clear"})
    assert len(slack.hits) == hits  # the submission calls Slack for nothing
    assert services.store.get_run(run_id)[0].status == "failed"
    resolved = next(e for e in services.store.read_events(run_id, 0) if e["type"] == "interrupt.resolved")
    assert resolved["payload"]["resumeValue"]["comment"] == "not before Friday"
    assert resolved["payload"]["resumeValue"]["decidedBy"] == "ana"
    assert resolved["payload"]["resolvedBy"]["subjectId"] == "ana"

    # Sent again (or after the gate closed elsewhere): refused beside the decision, the modal left open.
    status, again = submitted(view, "U0ANA", secret, tenant, "accept", None)
    assert (status, again["response_action"]) == (200, "errors")
    assert again["errors"] == {"interlude-decision": "This request was already decided or has timed out, so your answer was not recorded."}
    # And the button, once the gate is closed, opens nothing: the clicker is told why.
    hits = len(slack.hits)
    status, answer = click(message, "U0ANA", "interlude-decide-with-comment", slack.url("/actions/2"), secret, tenant)
    assert answer["text"] == "This request was already decided or has timed out, so your answer was not recorded."
    assert [h.path for h in slack.hits[hits:]] == ["/actions/2"]


def test_a_modal_vote_that_does_not_decide_says_so_on_the_clickers_message(services, world, slack):
    tenant = world.tenant
    secret, run_id, message = asked(services, world, slack, requiredApprovals=2)
    click(message, "U0ANA", "interlude-decide-with-comment", slack.url("/actions/ana"), secret, tenant)
    view = json.loads(slack.hits[-1].body)["view"]
    assert submitted(view, "U0ANA", secret, tenant, "accept", None) == (200, {"response_action": "clear"})
    # The vote counted without deciding: Ana's message (through her click's response URL) says so, buttons gone.
    reply = slack.hits[-1]
    assert reply.path == "/actions/ana"
    replaced = json.loads(reply.body)
    assert replaced["text"] == "Ana approved; the request waits for more approvals"
    assert replaced["blocks"][0]["text"]["text"] == "Ship release 7?"
    assert not [b for b in replaced["blocks"] if b["type"] == "actions"]
    assert services.store.get_run(run_id)[0].status == "waiting-approval"
    assert votes(services, run_id) == [("ana", "accept", "slack")]


def test_a_modal_sent_by_someone_who_may_not_decide_is_refused_beside_its_field(services, world, slack):
    tenant = world.tenant
    person(services, tenant, "eve", displayName="Eve", slackUserId="U0EVE")
    secret, run_id, message = asked(services, world, slack)
    click(message, "U0ANA", "interlude-decide-with-comment", slack.url("/actions/1"), secret, tenant)
    view = json.loads(slack.hits[-1].body)["view"]
    status, answer = submitted(view, "U0EVE", secret, tenant, "accept", None)
    assert (status, answer["errors"]) == (200, {"interlude-decision": "You are not one of the approvers of this request, so your answer was not recorded."})
    status, answer = submitted(view, "U0NOBODY", secret, tenant, "accept", None)
    assert answer["errors"]["interlude-decision"].startswith("Your Slack account is not linked")
    # An unlinked Slack user's click opens no modal.
    hits = len(slack.hits)
    click(message, "U0NOBODY", "interlude-decide-with-comment", slack.url("/actions/3"), secret, tenant)
    assert [h.path for h in slack.hits[hits:]] == ["/actions/3"]
    assert services.store.get_run(run_id)[0].status == "waiting-approval"
    assert votes(services, run_id) == []


# -- the other recipients' messages follow the gate ---------------------------------------------------------------


def slack_answers(slack: Receiver, channel: str, ts: str) -> None:
    """What Slack's Web API answers from now on: chat.postMessage's {ok, channel, ts} (the message's address)."""
    slack.answer = json.dumps({"ok": True, "channel": channel, "ts": ts}).encode()


def closed_notices(services, world, slack: Receiver, run_id: str) -> dict[str, dict[str, Any]]:
    """The dispatch outbox over the run's events (as the stream hands them over), then the notify worker over each
    `closed` notice it queued: the chat.update calls made, by the message's ts."""
    hits = len(slack.hits)
    services.notification_outbox.on_events(run_id, services.store.read_events(run_id))
    notices = queued(world.queues)
    for notice in notices.values():
        assert notice["purpose"] == "closed"
        notified_again = boto3.client("sqs")
        notified_again.send_message(QueueUrl=world.queues["notifications"], MessageBody=json.dumps(notice))
        got = notified_again.receive_message(QueueUrl=world.queues["notifications"], MaxNumberOfMessages=1)["Messages"][0]
        assert worker(services, world.queues, slack).handle({"body": got["Body"], "receiptHandle": got["ReceiptHandle"]}) == "sent"
    updates = [h for h in slack.hits[hits:] if h.path == "/api/chat.update"]
    assert len(updates) == len(slack.hits[hits:])
    return {json.loads(h.body)["ts"]: json.loads(h.body) for h in updates}


def test_when_the_gate_is_decided_every_recipients_slack_message_is_replaced_with_the_outcome(services, world, slack):
    tenant = world.tenant
    person(services, tenant, "bob", displayName="Bob", slackUserId="U0BOB")
    slack_answers(slack, "D0ANA", "1796126400.000100")
    secret, run_id, message = asked(services, world, slack)
    slack_answers(slack, "D0BOB", "1796126400.000200")
    interrupt_id = services.store.get_run(run_id)[0].interrupts["review"].interruptId
    notified(services, world.queues, run_id, interrupt_id, "bob", slack)

    status, answer = click(message, "U0ANA", "interlude-approve", slack.url("/actions/1"), secret, tenant)
    assert (status, answer["text"]) == (200, "Approved by Ana")
    updated = closed_notices(services, world, slack, run_id)
    assert set(updated) == {"1796126400.000100", "1796126400.000200"}
    bob = updated["1796126400.000200"]
    assert bob["channel"] == "D0BOB"
    assert bob["text"] == "Approved by Ana"
    assert bob["blocks"][0]["text"]["text"] == "Ship release 7?"
    assert not [b for b in bob["blocks"] if b["type"] in ("actions", "input")]
    assert {k.lower(): v for k, v in slack.hits[-1].headers.items()}["authorization"] == "Bearer xoxb-test-0000-token"
    # The notification log says each recipient's messages were updated, and names no Slack address.
    log = services.notifications.run_notifications(signed_in(services, "ops-bot", tenant), run_id)["notifications"]
    closed = [(e["principalId"], e["channel"], e["outcome"]) for e in log if e["purpose"] == "closed"]
    assert sorted(closed) == [("ana", "slack", "sent"), ("bob", "slack", "sent")]
    assert "1796126400" not in json.dumps(log)


def test_a_gate_withdrawn_with_its_run_says_so_in_slack_and_webhook_messages_are_left_as_they_were(services, world, slack):
    tenant = world.tenant
    slack_answers(slack, "D0ANA", "1796126400.000300")
    _, run_id, _ = asked(services, world, slack)
    services.lifecycle.cancel_run(signed_in(services, "ops-bot", tenant), run_id, CancelRunRequest())
    (update,) = closed_notices(services, world, slack, run_id).values()
    assert update["text"] == "Withdrawn: the run was cancelled"

    # A gate nobody decided in time: its message says when it timed out, in the recipient's zone.
    _, run_id, _ = asked(services, world, slack, {"timeZone": "Europe/Paris"}, timeoutMs=60_000)
    later = Services(Store(TABLE, ENTRIES_TABLE), clock=lambda: datetime.now(UTC) + timedelta(minutes=2))
    later.runs.apply_deadlines(*services.store.get_run(run_id))
    (update,) = closed_notices(services, world, slack, run_id).values()
    assert update["text"].startswith("Rejected automatically: timed out at ")
    assert "(Europe/Paris)" in update["text"]

    # An incoming webhook answers no ts: nothing to update when that gate closes.
    store_slack(tenant, {"webhookUrl": slack.url("/hook")})
    run_id, interrupt_id = gate_run(services, tenant)
    notified(services, world.queues, run_id, interrupt_id, "ana", slack)
    services.lifecycle.cancel_run(signed_in(services, "ops-bot", tenant), run_id, CancelRunRequest())
    assert closed_notices(services, world, slack, run_id) == {}


def test_a_closed_gates_message_keeps_the_title_it_asked_with_never_its_template(services, world, slack):
    """The gate's title rendered from the run's inputs when it asked, as written (Slack's plain text header), where
    the definition holds only its template."""
    tenant = world.tenant
    what = 'Zoë <b>7</b> & "q" <!channel>\r\nline two'
    person(services, tenant, "ana", displayName="Ana", slackUserId="U0ANA")
    admin = signed_in(services, "ops-bot", tenant)
    gate = {**GATE, "config": {**GATE["config"], "title": "Ship {{inputs.what}}?"}}
    services.workflows.put_workflow(admin, "templated", WorkflowDefinition.model_validate({"nodes": [gate], "edges": []}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "templated", "inputs": {"what": what}}))
    slack_answers(slack, "D0ANA", "1796126400.000400")
    asked_with = posted_message(services, world, slack, state.runId, state.interrupts["review"].interruptId, "ana")
    services.lifecycle.cancel_run(admin, state.runId, CancelRunRequest())

    (update,) = closed_notices(services, world, slack, state.runId).values()

    assert asked_with["blocks"][0]["text"]["text"] == f"Your decision is needed: Ship {what}?"
    assert update["blocks"][0]["text"] == {"type": "plain_text", "text": f"Ship {what}?"}
    assert "{{" not in json.dumps(update)


# -- refusals change nothing -------------------------------------------------------------------------------------


def _unchanged(services, run_id: str, slack: Receiver, hits_before: int) -> None:
    state, _ = services.store.get_run(run_id)
    assert state.status == "waiting-approval"
    assert votes(services, run_id) == []
    assert len(slack.hits) == hits_before


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        ("signature", "signature"),
        ("old", "timestamp"),
        ("future", "timestamp"),
        ("unsigned", "missing"),
        # A tenant without Slack is refused as a wrong signature is: nothing says which tenants use Slack.
        ("no-secret", "signature"),
    ],
)
def test_a_click_not_signed_by_slack_now_is_refused_401_and_changes_nothing(services, world, slack, tamper, reason):
    tenant = world.tenant
    secret, run_id, message = asked(services, world, slack)
    hits = len(slack.hits)
    reply_to = slack.url("/actions/1")
    if tamper == "signature":
        got = click(message, "U0ANA", "interlude-approve", reply_to, secrets.token_hex(16), tenant)
    elif tamper == "old":
        got = click(message, "U0ANA", "interlude-approve", reply_to, secret, tenant, at=time.time() - 301)
    elif tamper == "future":
        got = click(message, "U0ANA", "interlude-approve", reply_to, secret, tenant, at=time.time() + 310)
    elif tamper == "unsigned":
        got = http("POST", f"/slack/{tenant}/interactions", b"payload=%7B%7D", **{"content-type": "application/x-www-form-urlencoded"})
    else:
        # Another tenant's interactivity URL: it has set no signing secret, so nothing it is sent is Slack's.
        got = click(message, "U0ANA", "interlude-approve", reply_to, secret, world.other_tenant)
    status, answer = got
    assert status == 401
    assert answer["error"] == "interlude.slack_signature_invalid"
    assert answer["details"] == {"reason": reason}
    _unchanged(services, run_id, slack, hits)


def test_a_body_changed_after_signing_is_refused(services, world, slack):
    tenant = world.tenant
    secret = with_signing_secret(tenant)
    body = urlencode({"payload": json.dumps({"type": "block_actions"})}).encode()
    stamp = str(int(time.time()))
    status, answer = http(
        "POST",
        f"/slack/{tenant}/interactions",
        body + b"x",
        **{"x-slack-request-timestamp": stamp, "x-slack-signature": signature(secret, stamp, body)},
    )
    assert (status, answer["error"], answer["details"]) == (401, "interlude.slack_signature_invalid", {"reason": "signature"})


@pytest.mark.parametrize(
    ("user", "words"),
    [
        ("U0NOBODY", "Your Slack account is not linked to anyone in Interlude's directory"),
        ("U0EVE", "You are not one of the approvers of this request"),
    ],
)
def test_a_click_by_someone_who_may_not_decide_is_told_so_only_to_them_and_changes_nothing(services, world, slack, user, words):
    tenant = world.tenant
    person(services, tenant, "eve", displayName="Eve", slackUserId="U0EVE")
    secret, run_id, message = asked(services, world, slack)
    hits = len(slack.hits)
    status, answer = click(message, user, "interlude-approve", slack.url("/actions/1"), secret, tenant)
    assert status == 200
    assert answer["response_type"] == "ephemeral"
    assert answer["replace_original"] is False
    assert answer["text"].startswith(words)
    # Said to the clicker alone, through the response URL; the message itself is left as it was.
    assert json.loads(slack.hits[-1].body) == answer
    _unchanged(services, run_id, slack, hits + 1)


def test_a_click_on_the_page_button_is_acknowledged_and_a_payload_that_is_no_click_is_refused(services, world, slack):
    tenant = world.tenant
    secret, run_id, message = asked(services, world, slack)
    hits = len(slack.hits)
    assert click(message, "U0ANA", "open-approval-page", slack.url("/actions/1"), secret, tenant) == (200, {})
    for body in (b"payload=not-json", urlencode({"payload": json.dumps({"type": "view_submission"})}).encode()):
        status, answer = signed_post(body, secret, tenant)
        assert (status, answer["error"]) == (400, "validation_error")
    status, answer = signed_post(b"payload=" + b"x" * 1_000_001, secret, tenant)
    assert (status, answer["error"]) == (413, "payload_too_large")
    _unchanged(services, run_id, slack, hits)


def test_the_signing_secret_is_checked_and_never_returned(world):
    key = new_api_key(_services(), "admin", world.tenant)
    status, answer = http(
        "PUT",
        "/tenant/notifications/slack/signing-secret",
        b'{"signingSecret":"short"}',
        authorization=f"Bearer {key}",
        **{"content-type": "application/json"},
    )
    assert (status, answer["error"]) == (400, "validation_error")
    assert answer["details"]["errors"][0]["path"] == "signingSecret"
    # Not even a refused secret is said back.
    assert "short" not in json.dumps(answer)


def test_one_slack_user_is_one_principal_of_the_directory(services, tenant):
    person(services, tenant, "ana", slackUserId="U0ANA")
    with pytest.raises(DomainError) as refused:
        person(services, tenant, "bob", slackUserId="U0ANA")
    assert (refused.value.code, refused.value.details["field"]) == ("validation_error", "slackUserId")
    records = services.directory_records
    assert records.by_slack_user(tenant, "U0ANA") == "ana"
    person(services, tenant, "ana", slackUserId="U0ANA2")
    assert records.by_slack_user(tenant, "U0ANA") is None
    assert records.by_slack_user(tenant, "U0ANA2") == "ana"
    person(services, tenant, "bob", slackUserId="U0ANA")
    services.directory.delete_principal(tenant, "ana")
    assert records.by_slack_user(tenant, "U0ANA2") is None
    assert records.by_slack_user(tenant, "U0ANA") == "bob"


# -- the e-mail, and the page its link opens ----------------------------------------------------------------------


def test_the_mail_is_html_and_text_with_the_facts_in_the_recipients_zone_and_its_link_decides_nothing_on_get(
    services, world, monkeypatch
):
    tenant = world.tenant
    person(services, tenant, "ops-bot", displayName="Release Bot")
    person(services, tenant, "ana", displayName="Ana", email="ana@example.com", timeZone="America/New_York")
    run_id, interrupt_id = gate_run(services, tenant)
    notified(services, world.queues, run_id, interrupt_id, "ana")
    raw = next(m for m in ses_backends[current_account()]["us-east-1"].sent_messages if "ana@example.com" in m.destinations)
    mail = message_from_bytes(raw.raw_data.encode(), policy=default)
    text = mail.get_body(("plain",)).get_content()
    page = mail.get_body(("html",)).get_content()
    deadline = services.store.get_run(run_id)[0].interrupts["review"].deadline
    when = spoken(datetime.fromtimestamp(deadline, UTC), "America/New_York")
    assert "(America/New_York)" in when
    for part in (text, page):
        assert "Ship release 7?" in part
        assert "Release train" in part
        assert "Release Bot" in part
        assert when in part
    assert "Decide by: " + when in text
    assert 'Open your decision page</a>' in page
    (link,) = [w for w in text.split() if w.startswith(PUBLIC_BASE + "/interrupts/")]
    assert f'href="{link}"' in page
    for part in (text, page.replace(link, "")):
        for internal in (run_id, run_id.split("/")[1], interrupt_id, tenant + "/", "resumeValue", "interruptId", "{", "ops-bot"):
            assert internal not in part, internal

    # The page the link opens shows its times in the same zone; a GET (even one asking to approve) decides nothing.
    path = link.removeprefix(PUBLIC_BASE)
    status, shown = http("GET", path + "?action=accept", accept="text/html")
    assert status == 200
    assert "(America/New_York)" in shown
    assert 'method="post"' in shown.lower()
    state, _ = services.store.get_run(run_id)
    assert state.status == "waiting-approval"
    assert votes(services, run_id) == []


# -- a gate answered with a short form (clarification, custom, ModuleX, low-confidence) ----------------------------

FORM_GATE = {
    "id": "review",
    "typeId": "core.clarificationGate",
    "config": {
        "questions": [
            {"id": "seats", "question": "How many seats?", "schema": {"type": "integer", "minimum": 1}},
            {"id": "tier", "question": "Which plan?", "schema": {"type": "string", "enum": ["basic", "pro"]}},
        ],
        "audience": {"subjects": ["ana"]},
        "fieldLabels": {"tier": "Plan tier"},
    },
}
# An answer whose schema nests an object inside an object: deeper than a Slack modal asks.
DEEP_GATE = {
    "id": "review",
    "typeId": "core.interrupt",
    "config": {
        "kind": "custom",
        "data": {"customKind": "acme.venue", "payload": {"title": "Describe the venue"}},
        "resumeSchema": {
            "type": "object",
            "properties": {"venue": {"type": "object", "properties": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}}},
        },
        "audience": {"subjects": ["ana"]},
    },
}


def form_run(services: Services, tenant: str, node: dict[str, Any]) -> tuple[str, str]:
    admin = signed_in(services, "ops-bot", tenant)
    services.workflows.put_workflow(admin, "intake", WorkflowDefinition.model_validate({"name": "Intake", "nodes": [node], "edges": []}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "intake"}))
    return state.runId, state.interrupts["review"].interruptId


def form_message(services, world, slack: Receiver, node: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A run whose gate asks Ana (Slack user U0ANA) for a form: the notice the dispatch outbox queues for her, sent
    by the notify worker through the tenant's bot token: (run id, the Slack message)."""
    person(services, world.tenant, "ana", displayName="Ana", slackUserId="U0ANA")
    run_id, _ = form_run(services, world.tenant, node)
    services.notification_outbox.on_events(run_id, services.store.read_events(run_id))
    (notice,) = queued(world.queues).values()
    assert (notice["principalId"], notice["purpose"]) == ("ana", "raised")
    store_slack(world.tenant, {"botToken": "xoxb-test-0000-token"})
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=world.queues["notifications"], MessageBody=json.dumps(notice))
    got = sqs.receive_message(QueueUrl=world.queues["notifications"], MaxNumberOfMessages=1)["Messages"][0]
    assert worker(services, world.queues, slack).handle({"body": got["Body"], "receiptHandle": got["ReceiptHandle"]}) == "sent"
    assert slack.hits[-1].path == "/api/chat.postMessage"
    return run_id, json.loads(slack.hits[-1].body)


def buttons_of(message: dict[str, Any]) -> list[str]:
    return [e["text"]["text"] for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def answered(view: dict[str, Any], user: str, secret: str, tenant: str, values: dict[str, Any]) -> tuple[int, Any]:
    """Slack's view_submission of the answer modal `view`, its inputs in `values` (block_id -> the input's state)."""
    payload = {
        "type": "view_submission",
        "team": {"id": "T0TEAM", "domain": "acme"},
        "user": {"id": user, "username": user.lower(), "team_id": "T0TEAM"},
        "view": {
            "id": "V0FORM",
            "type": "modal",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "blocks": view["blocks"],
            "state": {"values": {block: {"value": state} for block, state in values.items()}},
        },
    }
    return signed_post(urlencode({"payload": json.dumps(payload)}).encode(), secret, tenant)


def test_a_clarification_is_asked_in_slack_and_answered_in_a_modal_drawn_from_its_schema(services, world, slack):
    tenant = world.tenant
    secret = with_signing_secret(tenant)
    slack_answers(slack, "D0ANA", "1796126400.000300")
    run_id, message = form_message(services, world, slack, FORM_GATE)
    # The message says what is asked, with an "Answer…" button (a bot token's: views.open) beside the page's link.
    text = message["blocks"][1]["text"]["text"]
    assert "waits for your answer" in text
    # Each field in the gate's words: the question, or its fieldLabels where it names one.
    assert "• How many seats?\n• Plan tier" in text
    assert buttons_of(message) == ["Answer…", "Open the answer page"]

    hits = len(slack.hits)
    status, answer = click(message, "U0ANA", "interlude-answer", slack.url("/actions/1"), secret, tenant)
    assert (status, answer) == (200, {})
    (opened,) = slack.hits[hits:]
    assert opened.path == "/api/views.open"
    view = json.loads(opened.body)["view"]
    seats, tier = view["blocks"][1:]
    assert (seats["block_id"], seats["label"]["text"], seats["optional"]) == ("f0", "How many seats?", False)
    assert seats["element"]["type"] == "plain_text_input"
    assert seats["hint"]["text"] == "A whole number. At least 1."
    # The gate's fieldLabels name the field, as on the page; an enum is a select of its values.
    assert (tier["label"]["text"], tier["element"]["type"]) == ("Plan tier", "static_select")
    assert [o["value"] for o in tier["element"]["options"]] == ["basic", "pro"]

    pro = {"type": "static_select", "selected_option": {"text": {"type": "plain_text", "text": "pro"}, "value": "pro"}}
    # A wrong answer is refused beside its field, in words, and decides nothing.
    for seats_typed, words in (("0", "Must be at least 1."), ("two", "Must be a whole number.")):
        status, refused = answered(view, "U0ANA", secret, tenant, {"f0": {"type": "plain_text_input", "value": seats_typed}, "f1": pro})
        assert (status, refused) == (200, {"response_action": "errors", "errors": {"f0": words}})
    status, refused = answered(view, "U0ANA", secret, tenant, {"f0": {"type": "plain_text_input", "value": "3"}, "f1": {"type": "static_select"}})
    assert refused == {"response_action": "errors", "errors": {"f1": "Please answer this."}}
    assert services.store.get_run(run_id)[0].status == "waiting-input"

    # Someone the gate does not ask is told so (the modal replaced with the words); Ana's right answer decides.
    person(services, tenant, "eve", displayName="Eve", slackUserId="U0EVE")
    right = {"f0": {"type": "plain_text_input", "value": "3"}, "f1": pro}
    status, refused = answered(view, "U0EVE", secret, tenant, right)
    assert refused["response_action"] == "update"
    assert "not one of the people this request asks" in refused["view"]["blocks"][0]["text"]["text"]
    assert answered(view, "U0ANA", secret, tenant, right) == (200, {"response_action": "clear"})
    assert services.store.get_run(run_id)[0].status == "completed"
    resolved = next(e for e in services.store.read_events(run_id, 0) if e["type"] == "interrupt.resolved")
    assert resolved["payload"]["resumeValue"] == {"seats": 3, "tier": "pro"}
    assert resolved["payload"]["resolvedBy"]["subjectId"] == "ana"
    # Closed: Ana's message is replaced (chat.update) with the outcome, as an approval's is.
    assert closed_notices(services, world, slack, run_id)["1796126400.000300"]["text"] == "Answered"


def test_a_form_slack_cannot_draw_and_a_webhooks_message_link_to_the_answer_page(services, world, slack):
    _, message = form_message(services, world, slack, DEEP_GATE)
    assert "Describe the venue" in message["blocks"][0]["text"]["text"]
    assert buttons_of(message) == ["Open the answer page"]
    (link,) = [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert link["url"].startswith(f"{PUBLIC_BASE}/interrupts/")

    # A webhook's message (no token, so no modal): the link alone, for a form Slack could draw too.
    tenant = world.tenant
    run_id, interrupt_id = form_run(services, tenant, FORM_GATE)
    store_slack(tenant, {"webhookUrl": slack.url("/hook")})
    notified(services, world.queues, run_id, interrupt_id, "ana", slack)
    assert slack.hits[-1].path == "/hook"
    assert buttons_of(json.loads(slack.hits[-1].body)) == ["Open the answer page"]
