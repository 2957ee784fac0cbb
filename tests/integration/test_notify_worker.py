"""The notify worker (issue 14) in-process against moto (DynamoDB, SQS, SES, Secrets Manager) and a Slack receiver
on 127.0.0.1: once per recipient, retried with backoff, dead-lettered without content, skipped when there is
nothing left to ask, and never a link or an address in the log."""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_string
from email.policy import default
from types import SimpleNamespace

import boto3
import pytest

from interlude import wiring
from interlude.adapters.leased_work import RetryLater
from interlude.adapters.notify.messages import CLOSED, RAISED, queue_message
from interlude.adapters.notify.worker import Worker
from interlude.adapters.scheduler import scheduler as scheduler_
from interlude.app import limits as app_limits
from interlude.composition import Services
from interlude.config.notify import NotifySettings
from interlude.domain import clock
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.rules.auth import run_resolver
from interlude.rules.tokens.scheme import KeyRing, verify
from interlude.store.directory import DirectoryStore
from interlude.store.facade import Store
from interlude.store.interactions import settings_key
from tests.integration.conftest import signed_in
from tests.support.moto_world import ENTRIES_TABLE, SENDER, TABLE, current_account
from tests.support.receiver import Receiver


@pytest.fixture
def aws(world):
    return world.queues


@pytest.fixture
def slack():
    receiver = Receiver(script=[500] * 10).start()
    yield receiver
    receiver.close()


def settings(urls, **overrides) -> NotifySettings:
    base = {
        "queue_url": urls["notifications"],
        "dlq_url": urls["notifications-dlq"],
        "public_base_url": "https://approvals.example.com",
        "from_address": SENDER,
        "configuration_set": "",
        "slack_secret_prefix": "interlude/slack/",
        "slack_api_url": "https://slack.invalid/api",
        "allow_loopback": True,
        "max_attempts": 2,
        "backoff_base_s": 0,
        "backoff_cap_s": 0,
        "connect_timeout_s": 2,
        "total_timeout_s": 4,
        "link_lifetime_s": 3600,
    }
    return NotifySettings(**{**base, **overrides})


def open_gate(services: Services) -> tuple[str, str, str]:
    admin = signed_in(services, "admin")
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approversList": ["ann", "ben"], "requiredApprovals": 2}}]
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"}))
    return state.runId, "review", state.interrupts["review"].interruptId


def worker_for(services: Services, urls, ring: KeyRing | None = None, **overrides) -> Worker:
    """The worker over `urls`' queues, signing links with `ring` (a new one unless given)."""
    ring = ring or KeyRing.generate()
    return Worker(
        store=services.store,
        sqs=boto3.client("sqs"),
        ses=boto3.client("sesv2"),
        secrets=boto3.client("secretsmanager"),
        ring=lambda: ring,
        settings=settings(urls, **overrides),
    )


def delivered(urls, message: dict) -> dict:
    """The message as SQS hands it to the worker (a real receipt handle: the worker hides it on failure)."""
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=urls["notifications"], MessageBody=json.dumps(message))
    got = sqs.receive_message(QueueUrl=urls["notifications"], MaxNumberOfMessages=1)["Messages"][0]
    return {"body": got["Body"], "receiptHandle": got["ReceiptHandle"]}


def sent_mail() -> list:
    from moto.ses.models import ses_backends

    return list(ses_backends[current_account()]["us-east-1"].sent_messages)


def test_one_mail_per_recipient_however_often_the_message_comes(aws, tenant):
    services = Services(Store(TABLE, ENTRIES_TABLE))
    run_id, node, interrupt = open_gate(services)
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    worker = worker_for(services, aws)
    message = queue_message(tenant, run_id, node, interrupt, "ann", RAISED)
    assert worker.handle(delivered(aws, message)) == "sent"
    assert worker.handle(delivered(aws, message)) == "duplicate"
    (mail,) = sent_mail()
    # moto adds the To header's address to the destinations given; SES sends to the destinations alone.
    assert set(mail.destinations) == {"ann@example.com"}
    assert "multipart/alternative" in mail.raw_data
    assert "text/html" in mail.raw_data
    # ben is named by the gate but has no entry: told nobody, and the log says why.
    other = queue_message(tenant, run_id, node, interrupt, "ben", RAISED)
    assert worker.handle(delivered(aws, other)) == "skipped"
    admin = signed_in(services, "admin2")
    log = services.notifications.run_notifications(admin, run_id)["notifications"]
    assert [(n["principalId"], n["channel"], n["outcome"]) for n in log] == [
        ("ann", "email", "sent"),
        ("ben", None, "skipped"),
    ] or [(n["principalId"], n["channel"], n["outcome"]) for n in log] == [
        ("ben", None, "skipped"),
        ("ann", "email", "sent"),
    ]
    assert next(n for n in log if n["principalId"] == "ben")["reason"] == "not_in_directory"
    assert "ann@example.com" not in json.dumps(log)
    assert "ow2." not in json.dumps(log)


def test_the_mail_names_the_workflow_as_the_approval_page_does(aws, tenant):
    """Its name where the definition has one, else its id: read from the stored definition (the worker does not
    validate it for a name)."""
    services = Services(Store(TABLE, ENTRIES_TABLE))
    run_id, node, interrupt = open_gate(services)
    admin = signed_in(services, "admin")
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approversList": ["ann"]}}]
    definition = WorkflowDefinition.model_validate({"name": "Release train", "nodes": nodes, "edges": []})
    services.workflows.put_workflow(admin, "train", definition)
    named = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "train"}))
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    worker = worker_for(services, aws)
    for run, gate in ((run_id, interrupt), (named.runId, named.interrupts["review"].interruptId)):
        assert worker.handle(delivered(aws, queue_message(tenant, run, node, gate, "ann", RAISED))) == "sent"
    unnamed, with_name = (m.raw_data for m in sent_mail())
    assert "(workflow ship)" in unnamed
    assert "(workflow Release train)" in with_name
    assert "(workflow train)" not in with_name


def mailed_link_expiry(mail, ring: KeyRing) -> int:
    """When the personal decision link a mail carries stops working (its token's expiry, as the ring verifies it)."""
    text = message_from_string(mail.raw_data, policy=default).get_body(("plain",)).get_content()
    (token,) = set(re.findall(r"/interrupts/([A-Za-z0-9._~-]+)", text))
    return verify(token, ring, now=time.time()).expires_at


def test_a_notification_handed_back_after_a_suspension_carries_a_link_living_from_the_hand_back(aws, tenant):
    """A raised gate's notification held while its tenant was suspended (interlude.adapters.tenant_outside stamps its
    hand-back): its link lives from then, not from the gate's raise, which may be longer ago than a link's life, and
    never past the gate's deadline."""
    services = Services(Store(TABLE, ENTRIES_TABLE))
    admin = signed_in(services, "admin")
    config = {"title": "Ship?", "approversList": ["ann"], "timeoutMs": 5 * 3600_000}
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": config}]
    services.workflows.put_workflow(admin, "timed", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    timed = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "timed"}))
    run_id, node, interrupt = open_gate(services)
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    ring = KeyRing.generate()
    worker = worker_for(services, aws, ring)
    raised = services.store.get_run(run_id)[0].interrupts[node]
    deadline = timed.interrupts["review"].deadline
    assert deadline is not None
    # Handed back two hours after the raise, where a link lives one hour (the settings' link_lifetime_s).
    handed_back = clock.epoch_of(raised.raisedAt) + 2 * 3600
    message = queue_message(tenant, run_id, node, interrupt, "ann", RAISED, handedBackAt=handed_back)
    assert worker.handle(delivered(aws, message)) == "sent"
    # The timed gate's, handed back an hour before its deadline.
    timed_gate = timed.interrupts["review"].interruptId
    late = queue_message(tenant, timed.runId, "review", timed_gate, "ann", RAISED, handedBackAt=deadline - 3000)
    assert worker.handle(delivered(aws, late)) == "sent"
    untimed_mail, timed_mail = sent_mail()
    assert mailed_link_expiry(untimed_mail, ring) == int(handed_back + 3600)
    assert mailed_link_expiry(timed_mail, ring) == int(deadline)


def test_a_failing_slack_post_is_retried_then_dead_lettered_without_content(aws, slack, tenant):
    services = Services(Store(TABLE, ENTRIES_TABLE))
    run_id, node, interrupt = open_gate(services)
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com", slackUserId="U0ANN1234"), "admin"
    )
    boto3.client("secretsmanager").create_secret(
        Name=f"interlude/slack/{tenant}", SecretString=json.dumps({"webhookUrl": slack.url("/hook")})
    )
    worker = worker_for(services, aws)
    message = queue_message(tenant, run_id, node, interrupt, "ann", RAISED)
    with pytest.raises(RetryLater):
        worker.handle(delivered(aws, message))
    # The second attempt sends only what failed: the mail went out once.
    assert worker.handle(delivered(aws, message)) == "dead"
    assert len(sent_mail()) == 1
    assert len(slack.hits) == 2
    dead = boto3.client("sqs").receive_message(QueueUrl=aws["notifications-dlq"])["Messages"][0]["Body"]
    letter = json.loads(dead)
    assert letter["channels"]["slack"] == {"attempt": 2, "at": letter["channels"]["slack"]["at"], "outcome": "failed", "errorClass": "http_status"}
    assert letter["channels"]["email"]["outcome"] == "sent"
    assert "hook" not in dead
    assert "ann@example.com" not in dead
    assert "ow2." not in dead


def test_nothing_is_sent_for_a_settled_gate_and_a_reminder_skips_who_voted(aws, tenant):
    services = Services(Store(TABLE, ENTRIES_TABLE))
    run_id, node, interrupt = open_gate(services)
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    services.directory.put_principal(tenant, "ben", PrincipalEntry(email="ben@example.com"), "admin")
    state, version = services.runs.load_run(tenant, run_id)
    services.decisions.resolve(state, version, node, {"action": "accept"}, run_resolver(signed_in(services, "ann")))
    worker = worker_for(services, aws)
    assert worker.handle(delivered(aws, queue_message(tenant, run_id, node, interrupt, "ann", "reminder-1"))) == "skipped"
    assert worker.handle(delivered(aws, queue_message(tenant, run_id, node, interrupt, "ben", "reminder-1"))) == "sent"
    state, version = services.runs.load_run(tenant, run_id)
    services.decisions.resolve(state, version, node, {"action": "accept"}, run_resolver(signed_in(services, "ben")))
    assert worker.handle(delivered(aws, queue_message(tenant, run_id, node, interrupt, "ben", "reminder-2"))) == "skipped"
    assert [set(m.destinations) for m in sent_mail()] == [{"ben@example.com"}]


def test_without_a_from_address_mail_is_not_configured_and_nothing_retries(aws, tenant):
    services = Services(Store(TABLE, ENTRIES_TABLE))
    run_id, node, interrupt = open_gate(services)
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    worker = worker_for(services, aws, from_address="")
    assert worker.handle(delivered(aws, queue_message(tenant, run_id, node, interrupt, "ann", RAISED))) == "skipped"
    record = worker.notifications.of_run(run_id)[0]["record"]
    assert record["channels"]["email"]["outcome"] == "not_configured"
    assert record["reason"] == "not_configured"
    assert wiring.NOTIFY_MAX_ATTEMPTS >= 2


# -- reminders and delegation (issue 14 item 4): nobody is reminded for a vote cast on their behalf ---------------


def queued(urls) -> dict[str, dict]:
    """The reminders the outbox queued, by recipient (drained from the queue)."""
    sqs = boto3.client("sqs")
    out = {}
    while True:
        got = sqs.receive_message(QueueUrl=urls["notifications"], MaxNumberOfMessages=10).get("Messages") or []
        if not got:
            return out
        for m in got:
            body = json.loads(m["Body"])
            out[body["principalId"]] = body
            sqs.delete_message(QueueUrl=urls["notifications"], ReceiptHandle=m["ReceiptHandle"])


def test_reminders_skip_votes_cast_on_someones_behalf_and_remind_delegates_of_open_ones(aws, monkeypatch, tenant):
    from datetime import timedelta

    from interlude.domain.models.principal_requests import DelegateVoteRequest
    from interlude.domain.models.tenants import TenantSettings

    monkeypatch.setenv(wiring.queue("notifications").url_env, aws["notifications"])
    services = Services(Store(TABLE, ENTRIES_TABLE))
    services.tenants.put_settings(tenant, TenantSettings(allowDelegation=True), "admin")
    admin = signed_in(services, "admin")
    config = {"title": "Ship?", "approversList": ["ann", "ben", "cat", "fay"], "requiredApprovals": 4}
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": config}]
    services.workflows.put_workflow(admin, "ship3", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship3"})).runId
    state, _ = services.runs.load_run(tenant, run_id)
    interrupt = state.interrupts["review"].interruptId
    now = services.clock()
    period = {"from": (now - timedelta(hours=1)).isoformat(), "until": (now + timedelta(days=1)).isoformat()}
    for pid in ("ann", "cat", "dora", "eve", "fay"):
        services.directory.put_principal(tenant, pid, PrincipalEntry(email=f"{pid}@example.com"), "admin")
    ben = {"email": "ben@example.com", "outOfOffice": {"delegate": "eve", **period}}
    services.directory.put_principal(tenant, "ben", PrincipalEntry.model_validate(ben), "admin")
    people = {pid: signed_in(services, pid) for pid in ("ann", "cat", "dora", "eve")}
    # ann hands her vote on this gate to dora; ben is away with eve as his delegate; cat votes herself
    services.delegation.delegate_vote(people["ann"], run_id, "review", DelegateVoteRequest(delegate="dora"))
    services.decisions.resolve_interrupt(people["cat"], run_id, "review", {"action": "accept"})
    fired = {
        "purpose": "reminder",
        "runId": run_id,
        "nodeId": "review",
        "interruptId": interrupt,
        "visit": 0,
        "due": now.timestamp(),
    }

    # Fired as its schedule fires it: through the timeouts function, which reads the delegations in a batch (issue
    # 25: its role lacked BatchGetItem, which the suite's IAM check now reports).
    assert lambda_runtime.invoke("timeouts", fired)["queued"] == 4
    asked = queued(aws)
    # ben is still asked for his own vote (away, but it is his); dora for ann's, eve for ben's; not ann (handed
    # over), not cat (voted)
    assert {pid: (m.get("forSelf", True), m.get("onBehalfOf")) for pid, m in asked.items()} == {
        "ben": (True, None),
        "dora": (False, ["ann"]),
        "eve": (False, ["ben"]),
        "fay": (True, None),
    }
    worker = worker_for(services, aws)
    assert worker.handle(delivered(aws, asked["dora"])) == "sent"
    (mail,) = [m for m in sent_mail() if set(m.destinations) == {"dora@example.com"}]
    assert "on behalf of ann, as their delegate" in mail.raw_data.replace("=\n", "")

    # When the delegates vote, nobody is reminded of those votes any more: not ben, not his delegate, not dora
    services.decisions.resolve_interrupt(people["dora"], run_id, "review", {"action": "accept"})
    services.decisions.resolve_interrupt(people["eve"], run_id, "review", {"action": "accept"})
    assert lambda_runtime.invoke("timeouts", {**fired, "visit": 1})["queued"] == 1
    assert list(queued(aws)) == ["fay"]
    # and a reminder queued before those votes finds them in when it is handled
    for pid in ("ben", "eve", "dora"):
        queued_earlier = {**asked[pid], "purpose": "reminder-3", "id": f"{asked[pid]['id']}-late"}
        assert worker.handle(delivered(aws, queued_earlier)) == "skipped"


def test_the_worker_reminds_a_delegate_only_while_a_vote_they_hold_is_open(aws, tenant):
    from interlude.domain.models.principal_requests import DelegateVoteRequest
    from interlude.domain.models.tenants import TenantSettings

    services = Services(Store(TABLE, ENTRIES_TABLE))
    services.tenants.put_settings(tenant, TenantSettings(allowDelegation=True), "admin")
    run_id, node, interrupt = open_gate(services)  # ann and ben, both needed
    for pid in ("ann", "ben"):
        services.directory.put_principal(tenant, pid, PrincipalEntry(email=f"{pid}@example.com"), "admin")
    ann, ben = signed_in(services, "ann"), signed_in(services, "ben")
    # ann hands her vote to ben, who is an approver himself and casts his own vote first
    services.delegation.delegate_vote(ann, run_id, node, DelegateVoteRequest(delegate="ben"))
    services.decisions.resolve_interrupt(ben, run_id, node, {"action": "accept"})
    worker = worker_for(services, aws)
    for_ann = queue_message(tenant, run_id, node, interrupt, "ben", "reminder-1", onBehalfOf=["ann"])
    assert worker.handle(delivered(aws, for_ann)) == "sent"  # his own vote is in, ann's is not
    own_only = queue_message(tenant, run_id, node, interrupt, "ben", "reminder-2")
    assert worker.handle(delivered(aws, own_only)) == "skipped"
    handed = queue_message(tenant, run_id, node, interrupt, "ann", "reminder-2")
    assert worker.handle(delivered(aws, handed)) == "skipped"  # ann handed her vote over


def test_without_the_tenants_permission_a_vote_handed_over_is_asked_of_its_principal_again(aws, monkeypatch, tenant):
    from interlude.domain.models.principal_requests import DelegateVoteRequest
    from interlude.domain.models.tenants import TenantSettings

    monkeypatch.setenv(wiring.queue("notifications").url_env, aws["notifications"])
    services = Services(Store(TABLE, ENTRIES_TABLE))
    services.tenants.put_settings(tenant, TenantSettings(allowDelegation=True), "admin")
    run_id, node, interrupt = open_gate(services)
    for pid in ("ann", "ben"):
        services.directory.put_principal(tenant, pid, PrincipalEntry(email=f"{pid}@example.com"), "admin")
    services.delegation.delegate_vote(signed_in(services, "ann"), run_id, node, DelegateVoteRequest(delegate="dora"))
    fired = {"runId": run_id, "nodeId": node, "interruptId": interrupt, "visit": 0}
    services.notification_outbox.enqueue_reminders(fired)
    assert {pid: m.get("onBehalfOf") for pid, m in queued(aws).items()} == {"ben": None, "dora": ["ann"]}
    # The tenant withdraws delegation: dora could not vote, so ann is asked for her own vote again
    services.tenants.put_settings(tenant, TenantSettings(allowDelegation=False), "admin")
    services.notification_outbox.enqueue_reminders({**fired, "visit": 1})
    asked = queued(aws)
    assert {pid: m.get("onBehalfOf") for pid, m in asked.items()} == {"ann": None, "ben": None}
    assert worker_for(services, aws).handle(delivered(aws, asked["ann"])) == "sent"


def test_an_out_of_office_delegate_is_told_when_the_gate_asks(aws, monkeypatch, tenant):
    from datetime import timedelta

    from interlude.domain.models.tenants import TenantSettings

    monkeypatch.setenv(wiring.queue("notifications").url_env, aws["notifications"])
    services = Services(Store(TABLE, ENTRIES_TABLE))
    services.tenants.put_settings(tenant, TenantSettings(allowDelegation=True), "admin")
    now = services.clock()
    period = {"from": (now - timedelta(hours=1)).isoformat(), "until": (now + timedelta(days=1)).isoformat()}
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    ben = {"email": "ben@example.com", "outOfOffice": {"delegate": "eve", **period}}
    services.directory.put_principal(tenant, "ben", PrincipalEntry.model_validate(ben), "admin")
    services.directory.put_principal(tenant, "eve", PrincipalEntry(email="eve@example.com"), "admin")
    run_id, node, interrupt = open_gate(services)  # ann and ben
    services.notification_outbox.on_events(run_id, services.store.read_events(run_id))
    asked = queued(aws)
    assert {pid: (m["purpose"], m.get("forSelf", True), m.get("onBehalfOf")) for pid, m in asked.items()} == {
        "ann": ("raised", True, None),
        "ben": ("raised", True, None),
        "eve": ("raised", False, ["ben"]),
    }
    assert worker_for(services, aws).handle(delivered(aws, asked["eve"])) == "sent"
    (mail,) = [m for m in sent_mail() if set(m.destinations) == {"eve@example.com"}]
    assert "on behalf of ben, as their delegate" in mail.raw_data.replace("=\n", "")


def reminders_scheduled(run_id: str) -> list[int]:
    """The visits of the run's reminder schedules in the deployment's group (moto's Scheduler), in order."""
    group = scheduler_.from_env().settings.group
    client = boto3.client("scheduler")
    inputs = [
        json.loads(client.get_schedule(Name=s["Name"], GroupName=group)["Target"]["Input"])
        for s in client.list_schedules(GroupName=group)["Schedules"]
    ]
    return sorted(i["visit"] for i in inputs if i.get("purpose") == "reminder" and i.get("runId") == run_id)


@contextmanager
def settings_reads(client, tenant: str) -> Iterator[list[dict]]:
    """The GetItems `client` sends for the tenant's settings item inside the block."""
    reads: list[dict] = []

    def read(params: dict, **_) -> None:
        if params.get("Key") == settings_key(tenant):
            reads.append(params)

    client.meta.events.register("provide-client-params.dynamodb.GetItem", read)
    try:
        yield reads
    finally:
        client.meta.events.unregister("provide-client-params.dynamodb.GetItem", read)


def test_a_raised_gate_reads_the_tenants_settings_once_for_whom_it_asks_and_its_reminders(aws, monkeypatch, tenant):
    from interlude.domain.models.tenants import TenantSettings

    monkeypatch.setenv(wiring.queue("notifications").url_env, aws["notifications"])
    services = Services(Store(TABLE, ENTRIES_TABLE))
    services.tenants.put_settings(tenant, TenantSettings(allowDelegation=False, remindersMs=[60_000, 120_000]), "admin")
    for pid in ("ann", "ben"):
        services.directory.put_principal(tenant, pid, PrincipalEntry(email=f"{pid}@example.com"), "admin")
    run_id, _, _ = open_gate(services)
    outbox = services.notification_outbox
    services.limiter.forget(tenant)  # as a dispatch instance that has not read them yet

    with settings_reads(services.store.client, tenant) as read:
        outbox.on_events(run_id, services.store.read_events(run_id))
        # One read of the settings item answers both: whether delegation is allowed (the messages say not) and the
        # reminders' offsets (one schedule for each)
        assert len(read) == 1
        assert reminders_scheduled(run_id) == [0, 1]
        assert {pid: m.get("delegation") for pid, m in queued(aws).items()} == {"ann": False, "ben": False}
        # Read as the tenant's limits in force are (ADR 0177): the next record within their cache period reads none
        outbox.on_events(run_id, services.store.read_events(run_id))
        assert len(read) == 1
        # and once that is over, reads them again, as the tenant has them then
        later = time.monotonic() + app_limits.LIMITS_CACHE_SECONDS + 1
        monkeypatch.setattr(app_limits, "time", SimpleNamespace(monotonic=lambda: later))
        outbox.on_events(run_id, services.store.read_events(run_id))
        assert len(read) == 2


# -- what a mail says of what others wrote (tests/e2e/test_notifications.py sends it hostile text through the stack) ---


def parts_of(mail) -> tuple[str, str]:
    """The plain text, and the HTML part's text as a mail program shows it."""
    message = message_from_string(mail.raw_data, policy=default)
    text = next(p.get_content() for p in message.walk() if p.get_content_type() == "text/plain")
    page = next(p.get_content() for p in message.walk() if p.get_content_type() == "text/html")
    return text, html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_a_requests_details_read_as_lines_never_as_a_value_spelled_in_python_or_json(aws, tenant):
    services = Services(Store(TABLE, ENTRIES_TABLE))
    admin = signed_in(services, "admin")
    payload = {"title": "Check the refund", "description": {"order": 7, "note": "<i>x</i> &amp;", "gift": True}}
    config = {"kind": "custom", "data": {"customKind": "refund.check", "payload": payload}, "audience": {"subjects": ["ann"]}}
    nodes = [{"id": "check", "typeId": "core.interrupt", "config": {**config, "resumeSchema": {"type": "object"}}}]
    services.workflows.put_workflow(admin, "refund", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "refund"}))
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    message = queue_message(tenant, state.runId, "check", state.interrupts["check"].interruptId, "ann", RAISED)

    assert worker_for(services, aws).handle(delivered(aws, message)) == "sent"

    (mail,) = sent_mail()
    text, page = parts_of(mail)
    assert "order: 7\nnote: <i>x</i> &amp;\ngift: yes" in text
    assert "note: <i>x</i> &amp;" in page
    for shown in (text, page):
        assert "{'" not in shown
        assert '{"' not in shown


def test_a_reminder_names_whose_votes_it_asks_for_as_the_directory_names_them(aws, monkeypatch, tenant):
    from interlude.domain.models.principal_requests import DelegateVoteRequest
    from interlude.domain.models.tenants import TenantSettings

    services = Services(Store(TABLE, ENTRIES_TABLE))
    services.tenants.put_settings(tenant, TenantSettings(allowDelegation=True), "admin")
    run_id, node, interrupt = open_gate(services)
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com", displayName="Ann Lee"), "admin")
    services.directory.put_principal(tenant, "ben", PrincipalEntry(email="ben@example.com"), "admin")
    services.delegation.delegate_vote(signed_in(services, "ann"), run_id, node, DelegateVoteRequest(delegate="ben"))
    message = queue_message(tenant, run_id, node, interrupt, "ben", "reminder-1", onBehalfOf=["ann"])

    assert worker_for(services, aws).handle(delivered(aws, message)) == "sent"

    (mail,) = sent_mail()
    text, _ = parts_of(mail)
    assert "You may decide it on behalf of Ann Lee, as their delegate." in text


def test_an_address_stored_before_the_directory_refused_it_is_never_mailed_nor_retried(aws, tenant):
    """The directory refuses an address a mail reader would read as several (docs/api.md, "People are asked"); one an
    earlier release stored is failed for good, nothing sent, the log saying why."""
    services = Services(Store(TABLE, ENTRIES_TABLE))
    run_id, node, interrupt = open_gate(services)
    DirectoryStore(services.store).put(tenant, "ann", {"email": "ann,eve@example.com"}, "2026-12-01T00:00:00Z", "admin", 10)

    worker = worker_for(services, aws)
    message = queue_message(tenant, run_id, node, interrupt, "ann", RAISED)
    assert worker.handle(delivered(aws, message)) == "undeliverable"

    assert sent_mail() == []
    (item,) = worker.notifications.of_run(run_id)
    email = item["record"]["channels"]["email"]
    assert (email["outcome"], email["errorClass"], email["final"]) == ("failed", "address_invalid", True)
    # And the log says it failed for good, never that no channel is set up; the item settled as every release reads it
    assert (item["status"], item["record"]["reason"]) == ("skipped", "undeliverable")
    (entry,) = services.notifications.run_notifications(signed_in(services), run_id)["notifications"]
    assert (entry["outcome"], entry["reason"], entry["errorClass"]) == ("failed", "undeliverable", "address_invalid")
    # And a copy of the message tries nothing again
    assert worker.handle(delivered(aws, message)) == "duplicate"


WEBHOOK_ONLY = {"webhookUrl": "https://hooks.slack.invalid/T/B/x"}


@pytest.mark.parametrize("setting", [None, WEBHOOK_ONLY], ids=["removed", "webhook"])
def test_a_closed_gates_slack_messages_whose_bot_token_is_gone_are_undeliverable_not_unconfigured(aws, tenant, setting):
    """A recipient was posted the gate with the tenant's bot token; the token was removed, or replaced by an incoming
    webhook (which cannot update a message), before the gate closed: the messages cannot be replaced for good."""
    services = Services(Store(TABLE, ENTRIES_TABLE))
    run_id, node, interrupt = open_gate(services)
    worker = worker_for(services, aws)
    if setting is not None:
        name = worker.settings.slack_secret_prefix + tenant
        boto3.client("secretsmanager").create_secret(Name=name, SecretString=json.dumps(setting))
    posted = [["D1", "1.5"]]
    closed = queue_message(
        tenant, run_id, node, interrupt, "ann", CLOSED, title="Ship?", outcome={"action": "accept"}, slackMessages=posted
    )

    assert worker.handle(delivered(aws, closed)) == "undeliverable"

    (item,) = [i for i in worker.notifications.of_run(run_id) if i["record"]["purpose"] == CLOSED]
    slack = item["record"]["channels"]["slack"]
    said = (slack["outcome"], slack["errorClass"], slack["final"], slack["updated"])
    assert said == ("failed", "credential_gone", True, 0)
    assert (item["status"], item["record"]["reason"]) == ("skipped", "undeliverable")
