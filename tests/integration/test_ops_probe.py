"""A hostile pass over what a platform operator relies on (the operator CLI, a tenant's lifecycle, retention,
migrations): each test says what such an operator counts on, through the real handlers over moto, the real CLI in a
process of its own where it talks to something, and loopback servers standing in for AWS only where moto has none."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.data_classes import SQSRecord

from interlude import migrations, wiring
from interlude.adapters.delivery.signing import ensure_secret
from interlude.adapters.migration_turns import queue_run_retention
from interlude.adapters.notify.slack_settings import store_slack
from interlude.adapters.scheduler.names import handed_back_name
from interlude.adapters.scheduler.scheduler import from_env
from interlude.adapters.tenant_outside import TenantOutside
from interlude.app import tenant_lifecycle
from interlude.app.tenant_lifecycle import TenantLifecycle
from interlude.cli.main import main as cli_main
from interlude.config.actions import action_settings
from interlude.config.delivery import delivery_settings
from interlude.domain import clock
from interlude.domain.ids import secret_name, to_wire
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CreateKeyRequest
from interlude.domain.models.webhooks import RegisterWebhookRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.lambda_runtime import FUNCTION_NAME_PREFIX
from interlude.local.schedules import SchedulePump
from interlude.local.ttl import TtlPump
from interlude.rules.retention import DAY_S, run_expiry
from interlude.store.checkpoints import MIGRATION_PK
from interlude.store.facade import Store
from interlude.store.layout import run_pk
from interlude.store.migrations import LEASE_S, MigrationStore
from interlude.store.tenants import TenantRecords
from tests.integration import test_actions as actions_tests
from tests.integration import test_migrations as migrations_tests
from tests.integration import test_retention as retention_tests
from tests.integration import test_tenant_lifecycle as lifecycle_tests
from tests.integration import test_upgrade as upgrade_tests
from tests.integration.conftest import clear_of_a_month_end, state_of
from tests.integration.test_notify_worker import sent_mail
from tests.integration.test_tenant_lifecycle import Tenant, call, naming, operator, secrets_naming, wiring_tables
from tests.support.local_stack import until
from tests.support.moto_world import TABLE
from tests.support.queues import drain, queued
from tests.support.receiver import Receiver, delivering_to_loopback
from tests.support.stream import Stream, dispatch

env = lifecycle_tests.env  # the tenant lifecycle's world: a tenant's status read afresh, no deletion grace
live = lifecycle_tests.live  # the WebSocket API's gateway, its management endpoint known to the admin function


def deleted(tenant: str) -> dict[str, Any]:
    """The operator's deletion of a suspended tenant, called until it is done (each call as the CLI makes it)."""
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    for _ in range(200):
        answer: dict[str, Any] = admin.perform({"operation": "delete", "tenant": tenant}, lambda: True)
        if answer["done"]:
            return answer
    raise AssertionError(f"the deletion of {tenant} never ended")


# -- a tenant's deletion leaves nothing of it ----------------------------------------------------------------------


# A world of its own: the deletion reads the whole table.
@pytest.mark.private_world
def test_a_deleted_tenant_leaves_none_of_the_secrets_it_came_to_hold(env, monkeypatch):
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    gone = Tenant(f"{env.tenant}-secrets")
    secrets = boto3.client("secretsmanager")
    # Given every kind of secret a tenant comes to hold: its Slack credential (as its route stores it) and its Slack
    # app's signing secret (set through the API), its webhook signing secret and a subscription's (made by the
    # deployment), an action's (made by its operator under the deployment's prefix)
    store_slack(gone.name, {"botToken": "xoxb-1"})
    signing = call(
        "PUT", "/tenant/notifications/slack/signing-secret", gone.key, {"signingSecret": "0123456789abcdef" * 2}
    )
    assert signing.status == 200, signing.text
    ensure_secret(secrets, secret_name(delivery_settings().secret_prefix, gone.name))
    hook = RegisterWebhookRequest.model_validate({"url": "http://127.0.0.1:9/hook", "events": ["run.completed"]})
    gone.services.webhooks.register(gone.principal, hook)
    secrets.create_secret(Name=secret_name(action_settings().secret_prefix, gone.name, "stripe"), SecretString="{}")
    held = secrets_naming(gone.name)
    assert len(held) == 5, held
    # When the operator suspends and deletes it
    operator("suspend", tenant=gone.name)
    report = deleted(gone.name)["report"]
    # Then no secret of it is left, and the report counts each
    assert secrets_naming(gone.name) == []
    assert report["secrets"] == len(held)


class Crashing:
    """Each named step of a deletion's outside work and of its table's deletes does its work, then, the first time (and
    `every` other call after it, if told), fails as an invocation cut short there would (a throttled call, a timeout)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, steps: list[tuple[Any, str]], every: int = 0) -> None:
        self.crashed: list[str] = []
        self.every = every
        for owner, name in steps:
            self._wrap(monkeypatch, owner, name)

    def _wrap(self, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
        real = getattr(owner, name)
        calls = [0]

        def crashing(this: Any, *args: Any, **kwargs: Any) -> Any:
            done = real(this, *args, **kwargs)
            calls[0] += 1
            if calls[0] == 1 or (self.every and (calls[0] - 1) % self.every == 0):
                self.crashed.append(name)
                raise TimeoutError(f"the invocation stopped after {name}")
            return done

        monkeypatch.setattr(owner, name, crashing)


def deleted_through_crashes(tenant: str) -> dict[str, Any]:
    """The deletion called again after each call that was cut short, as the operator runs the command again."""
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    for _ in range(200):
        try:
            answer: dict[str, Any] = admin.perform({"operation": "delete", "tenant": tenant}, lambda: True)
        except TimeoutError:
            continue
        if answer["done"]:
            return answer
    raise AssertionError(f"the deletion of {tenant} never ended")


# A world of its own: the deletion reads the whole table.
@pytest.mark.private_world
def test_a_deletion_cut_short_after_any_step_leaves_nothing_and_closes_every_live_connection(env, monkeypatch, live):
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    gone = Tenant(f"{env.tenant}-crash")
    stream = Stream(wiring_tables()[0])
    waiting = gone.start("timed")
    stream.settle()
    store_slack(gone.name, {"botToken": "xoxb-1"})
    # Given a live connection following its waiting run
    following, _ = live.connect(gone.key)
    live.say(following, action="subscribe", runId=to_wire(waiting))
    operator("suspend", tenant=gone.name)
    # When every step of its deletion is cut short once, just after it did its work (the CLI calls again each time)
    crashes = Crashing(
        monkeypatch,
        [
            (TenantOutside, "delete_schedules"),
            (TenantOutside, "delete_secrets"),
            (TenantOutside, "close_connections"),
            (TenantRecords, "delete"),
        ],
    )
    deleted_through_crashes(gone.name)
    assert sorted(crashes.crashed) == ["close_connections", "delete", "delete_schedules", "delete_secrets"]
    # Then nothing of the tenant is left but its tombstone, no secret of it
    (tombstone,) = naming(gone.name)
    assert tombstone["pk"]["S"] == "TENANTS"
    assert naming(gone.name, wiring_tables()[1]) == []
    assert secrets_naming(gone.name) == []
    # and the live connection that followed its run was closed (a connection left open would outlive its tenant)
    assert live.connection(following).closed


def holding_everything(name: str, live: Any) -> Tenant:
    """A suspended tenant holding some of each thing its deletion counts: runs (one finished, one waiting with a live
    connection following it, one at a timed gate), a second key, a webhook subscription's secret and its Slack one,
    and two schedules of its own (deadlines handed back at an earlier resume)."""
    tenant = Tenant(name)
    stream = Stream(wiring_tables()[0])
    _timed, waiting, finished = tenant.start("timed"), tenant.start(), tenant.start()
    stream.settle()
    decided = call(
        "POST", f"/runs/{to_wire(finished)}/interrupts/review", tenant.key, {"resumeValue": {"action": "accept"}}
    )
    assert decided.status == 200, decided.text
    stream.settle()
    tenant.services.keys.issue_key(tenant.name, CreateKeyRequest(subjectId="bob", scopes=["runs:read"]))
    hook = RegisterWebhookRequest.model_validate({"url": "http://127.0.0.1:9/hook", "events": ["run.completed"]})
    tenant.services.webhooks.register(tenant.principal, hook)
    store_slack(tenant.name, {"botToken": "xoxb-1"})
    scheduler = from_env()
    assert scheduler is not None
    for held in ("one", "two"):
        due = clock.now().timestamp() + 3600
        assert scheduler.hand_back(handed_back_name(tenant.name, held), {"runId": waiting}, due)
    following, _ = live.connect(tenant.key)
    live.say(following, action="subscribe", runId=to_wire(waiting))
    operator("suspend", tenant=tenant.name)
    return tenant


# A world of its own: the deletion reads the whole table.
@pytest.mark.private_world
@pytest.mark.parametrize(
    "cut",
    [
        (TenantOutside, "delete_schedules"),
        (TenantOutside, "delete_secrets"),
        (TenantOutside, "close_connections"),
        (TenantRecords, "delete"),  # after every other page of items it deletes
    ],
    ids=lambda cut: cut[1],
)
def test_a_deletion_cut_short_and_taken_again_reports_all_it_deleted(env, monkeypatch, live, cut):
    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    monkeypatch.setattr(tenant_lifecycle, "SCAN_PAGE_ITEMS", 20)
    # Given two suspended tenants holding the same things, one of each kind a deletion counts
    tenants = [holding_everything(f"{env.tenant}-{kind}", live) for kind in ("whole", "cut")]
    entries_table = wiring_tables()[1]
    # (every item naming the tenant in either table, but the registry's record, which stays as the tombstone)
    there = {t.name: len(naming(t.name)) + len(naming(t.name, entries_table)) - 1 for t in tenants}
    secrets = {t.name: len(secrets_naming(t.name)) for t in tenants}
    # When one is deleted in one go, and the other's deletion is cut short after that step each time it is taken (the
    # operator running the command again each time)
    whole = deleted(tenants[0].name)["report"]
    with monkeypatch.context() as patched:
        crashes = Crashing(patched, [cut], every=2)
        cut_short = deleted_through_crashes(tenants[1].name)["report"]
    assert crashes.crashed
    # Then each report counts everything its deletion deleted, however often the deletion was cut short
    for tenant, report in zip(tenants, (whole, cut_short), strict=True):
        counted = {k: report[k] for k in ("items", "apiKeys", "schedules", "secrets", "liveConnections")}
        assert counted == {
            "items": there[tenant.name],
            "apiKeys": 2,
            "schedules": 2,
            "secrets": secrets[tenant.name],
            "liveConnections": 1,
        }, (tenant.name, crashes.crashed)
        assert (report["usage"]["lifecycles"], report["usage"]["decisions"]) == (3, 1)
        (tombstone,) = naming(tenant.name)
        assert tombstone["pk"]["S"] == "TENANTS"
    assert secrets[tenants[1].name] == 2


# -- a resume cut short never strands the work it held -----------------------------------------------------------


ASKS_ANN = {
    "nodes": [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approversList": ["ann"]}}],
    "edges": [],
}


class Held:
    """A tenant's runs whose work is held while it is suspended, one of each kind a worker holds: a timed gate's
    deadline (it passes while suspended), a callback notice and a person's notification (queued before, taken while
    suspended) and an outbox item (a run started just before the suspension)."""

    def __init__(self, tenant: Tenant, receiver: Receiver, clock_file: Any, queues: dict[str, str]) -> None:
        self.tenant, self.receiver, self.clock_file, self.queues = tenant, receiver, clock_file, queues
        self.stream = Stream(wiring_tables()[0])
        tenant.services.directory.put_principal(tenant.name, "ann", PrincipalEntry(email="ann@example.com"), "admin")
        tenant.services.workflows.put_workflow(tenant.principal, "asks", WorkflowDefinition.model_validate(ASKS_ANN))
        self.timed = tenant.start("timed")
        self.asked = tenant.start("asks", callbackUrl=receiver.url())
        self.stream.settle()
        self.late = tenant.start("gate", callbackUrl=receiver.url())
        operator("suspend", tenant=tenant.name)
        dispatch(self.stream.pump())
        for queue in ("callbacks", "notifications"):
            drain(queues, queue)
        clock.advance(clock_file, lifecycle_tests.GATE_S + 5)
        assert SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once() >= 1
        kinds = ["deadline", "queue:callbacks", "queue:notifications", "queue:outbox"]
        assert sorted(h.destination for h in self.held()) == kinds

    def held(self) -> list[Any]:
        return TenantRecords(Store(*wiring_tables())).held(self.tenant.name, 100)

    def went_on(self) -> None:
        """Every piece of held work went where it was going, and did what it would have done."""
        assert self.held() == []
        for queue in (wiring.OUTBOX_QUEUE, "callbacks", "notifications"):
            drain(self.queues, queue)
        self.stream.settle()
        assert self.tenant.status(self.timed) == "failed"  # its deadline fired: the gate timed out
        notices = [json.loads(hit.body) for hit in self.receiver.hits]
        noticed = {notice["runId"] for notice in notices}
        assert self.asked in noticed  # its notice was sent
        # with a decision link minted as it went back (ADR 0190), whoever handed it back: the resume or the sweep
        asked = [n for n in notices if n["runId"] == self.asked and n.get("type") == "interrupt.requested"]
        assert asked
        assert all("resolve" in n["links"] and n["token"] in n["links"]["resolve"] for n in asked), asked
        assert self.late in noticed  # its outbox item was taken: the notice of its gate was queued, and sent
        assert any("ann@example.com" in mail.destinations for mail in sent_mail())  # and ann was asked


def listed_in_words(tenant: str) -> str:
    """The line `interlude tenants list` prints about the tenant, and its notes, as the operator reads them."""
    from interlude.cli import tenants as tenants_cli

    shown = tenants_cli._tenants_table(operator("list", after=tenant[:-1], limit=200))
    return "\n".join(line for line in shown.splitlines() if line.startswith(tenant))


@pytest.fixture
def loopback_delivery(monkeypatch) -> None:
    """The callbacks worker made afresh to deliver to a Receiver on loopback, two attempts a notice."""
    for name, value in delivering_to_loopback(2).items():
        monkeypatch.setenv(name, value)
    lambda_runtime.fresh_instances()


# A world of its own: the sweep hands back the held work of every tenant listed, whichever test listed it.
@pytest.mark.private_world
@pytest.mark.parametrize(
    "cut",
    [
        (TenantLifecycle, "_change"),  # the tenant active again, its work still held
        (TenantRecords, "lease_hand_back"),
        (TenantOutside, "hand_back"),  # one piece back on its way, still held too
        (TenantRecords, "release"),
        (TenantRecords, "handed_back"),
        "the CLI stopped calling",
    ],
    ids=lambda cut: cut if isinstance(cut, str) else cut[1],
)
@pytest.mark.usefixtures("loopback_delivery")
def test_a_resume_cut_after_any_step_and_never_run_again_hands_its_held_work_back_by_itself(
    env, monkeypatch, clock_file, receiver, cut
):
    tenant = Tenant(f"{env.tenant}-resumed")
    # Given a suspended tenant holding a deadline, a notice, a notification and an outbox item of its runs
    held = Held(tenant, receiver, clock_file, env.queues)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    resume = {"operation": "resume", "tenant": tenant.name}
    # When the operator's resume stops after that step (its call cut short there), or, one piece handed back a
    # call, after its first call (the CLI stopped), and is never run again
    if isinstance(cut, str):
        monkeypatch.setattr(tenant_lifecycle, "HAND_BACK_BATCH", 1)
        answer = admin.perform(resume, lifecycle_tests.steps(1))
        assert (answer["handedBack"], answer["remaining"]) == (1, True)
    else:
        with monkeypatch.context() as patched:
            crashes = Crashing(patched, [cut])
            with pytest.raises(TimeoutError):
                admin.perform(resume, lambda: True)
            assert crashes.crashed == [cut[1]]
    # Then the tenant is active, and while work is left held the operator's listing says so in words
    assert operator("list", after=tenant.name[:-1], limit=1)["tenants"][0]["status"] == "active"
    shown = listed_in_words(tenant.name)
    if held.held():
        assert "active, held work going back" in shown
        assert "still going back to its runs; it goes on by itself within minutes" in shown
        assert f"`interlude tenants resume {tenant.name}` sends it now" in shown
    assert "handingBack" not in shown
    # and once no call has handed any back for the hand back's lease, the per-minute sweep hands the rest back:
    # every run goes on as it would have
    clock.advance(clock_file, tenant_lifecycle.HAND_BACK_LEASE_S + 1)
    lambda_runtime.invoke("timeouts", dict(wiring.AUDIT_CHECKPOINT_SWEEP.input))
    held.went_on()
    # and the listing no longer says anything is left
    (line,) = listed_in_words(tenant.name).splitlines()
    assert line.split()[1] == "active"
    assert "going back" not in line


# A world of its own: the daily sweep reads the whole table.
@pytest.mark.private_world
@pytest.mark.usefixtures("loopback_delivery")
def test_work_a_resume_of_an_earlier_release_left_held_goes_back_after_the_daily_sweep(env, clock_file, receiver):
    tenant = Tenant(f"{env.tenant}-earlier")
    held = Held(tenant, receiver, clock_file, env.queues)
    # Given a resume as 0.11.0 made it, stopped before it handed anything back: the tenant active, its record
    # listed nowhere
    records = TenantRecords(Store(*wiring_tables()))
    stored = records.get(tenant.name, consistent=True)
    assert stored is not None
    records.put(stored, "active", {"createdAt": stored.record["createdAt"], "resumedAt": clock.iso(clock.now())})
    lambda_runtime.invoke("timeouts", dict(wiring.AUDIT_CHECKPOINT_SWEEP.input))
    assert len(held.held()) == 4
    # When the daily sweep passes, then the per-minute sweep
    retention_tests.daily_sweep(env)
    assert "held work going back" in listed_in_words(tenant.name)
    lambda_runtime.invoke("timeouts", dict(wiring.AUDIT_CHECKPOINT_SWEEP.input))
    # Then the work went back, and every run went on
    held.went_on()


# -- the operator's latest action wins: a suspension is never undone by a resume still handing work back ----------------


def at_turn(turn: int, *actions: str, tenant: str) -> Callable[[], bool]:
    """A call's time, as `more_time()` sees it: plenty, but at its `turn`-th turn boundary (one batch of held work
    handed back a turn) the operator's `actions` are done to the tenant first, each a call of its own."""
    turns = [0]

    def more_time() -> bool:
        turns[0] += 1
        if turns[0] == turn:
            for action in actions:
                done = operator(action, tenant=tenant)
                assert done["status"] == ("suspended" if action == "suspend" else "active"), done
        return True

    return more_time


def status_of(tenant: str) -> str:
    (row,) = operator("list", after=tenant[:-1], limit=1)["tenants"]
    assert row["tenant"] == tenant
    return str(row["status"])


# A world of its own: the sweep hands back the held work of every tenant listed, whichever test listed it.
@pytest.mark.private_world
@pytest.mark.usefixtures("loopback_delivery")
def test_a_suspension_between_the_calls_of_a_resume_is_not_undone_by_its_next_call(
    env, monkeypatch, clock_file, receiver
):
    from interlude.cli import tenants as tenants_cli

    tenant = Tenant(f"{env.tenant}-between")
    held = Held(tenant, receiver, clock_file, env.queues)
    monkeypatch.setattr(tenant_lifecycle, "HAND_BACK_BATCH", 1)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    asked: list[dict[str, Any]] = []

    def invoke(request: dict[str, Any]) -> dict[str, Any]:
        """The CLI's call of the admin function, each handing back one piece; the operator suspends the tenant again
        (from another terminal) once the first call answered."""
        asked.append(request)
        answer: dict[str, Any] = admin.perform(request, lifecycle_tests.steps(1))
        if len(asked) == 1:
            assert operator("suspend", tenant=tenant.name)["status"] == "suspended"
        return answer

    # Given a suspended tenant holding four pieces of work, whose resume the CLI calls until none is left
    # When the operator suspends it again after the resume's first call
    answer = tenants_cli._resumed(invoke, tenant.name)
    # Then the suspension stands: the resume's next call made the tenant active no more, nor handed any work back
    assert status_of(tenant.name) == "suspended"
    assert len(held.held()) == 3
    # and the CLI says so, and stopped calling
    assert (answer["status"], answer["handedBack"], answer.get("remaining")) == ("suspended", 1, False)
    assert len(asked) == 2
    # and when the operator resumes it at last, every run goes on as it would have
    tenants_cli._resumed(lambda request: admin.perform(request, lambda: True), tenant.name)
    assert status_of(tenant.name) == "active"
    held.went_on()


# A world of its own: the sweep hands back the held work of every tenant listed, whichever test listed it.
@pytest.mark.private_world
@pytest.mark.parametrize("resumed", ["by this call", "by a release before 0.12.0"])
@pytest.mark.usefixtures("loopback_delivery")
def test_a_suspension_at_a_turn_of_a_resume_call_stops_it_there(env, monkeypatch, clock_file, receiver, resumed):
    tenant = Tenant(f"{env.tenant}-turn")
    held = Held(tenant, receiver, clock_file, env.queues)
    records = TenantRecords(Store(*wiring_tables()))
    if resumed != "by this call":
        # Given a tenant active again, its resume as 0.11.0 made it stopped before it handed anything back (listed
        # nowhere); its resume is called again, as `tenants list` says to
        stored = records.get(tenant.name, consistent=True)
        assert stored is not None
        records.put(stored, "active", {"createdAt": stored.record["createdAt"], "resumedAt": clock.iso(clock.now())})
    monkeypatch.setattr(tenant_lifecycle, "HAND_BACK_BATCH", 1)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    # When the operator suspends the tenant while the call hands its work back, after its first piece
    answer = admin.perform({"operation": "resume", "tenant": tenant.name}, at_turn(2, "suspend", tenant=tenant.name))
    # Then the call stopped there: the rest stays held, and its answer says where the tenant stands
    assert status_of(tenant.name) == "suspended"
    assert len(held.held()) == 3
    assert (answer["status"], answer["handedBack"], answer["remaining"]) == ("suspended", 1, False)


# A world of its own: the sweep hands back the held work of every tenant listed, whichever test listed it.
@pytest.mark.private_world
@pytest.mark.parametrize("actions", [("suspend",), ("suspend", "resume")], ids="-then-".join)
@pytest.mark.usefixtures("loopback_delivery")
def test_an_operators_action_at_a_turn_of_the_sweeps_hand_back_is_the_one_that_stands(
    env, monkeypatch, clock_file, receiver, actions
):
    from interlude.store.tenants import TenantRecords as Records

    tenant = Tenant(f"{env.tenant}-swept")
    held = Held(tenant, receiver, clock_file, env.queues)
    monkeypatch.setattr(tenant_lifecycle, "HAND_BACK_BATCH", 1)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    # Given a resume whose CLI stopped after its first call (one piece handed back), which the per-minute sweep takes
    # over once its lease lapsed
    assert admin.perform({"operation": "resume", "tenant": tenant.name}, lifecycle_tests.steps(1))["remaining"]
    clock.advance(clock_file, tenant_lifecycle.HAND_BACK_LEASE_S + 1)
    sweep = lambda_runtime.handler_module("timeouts").tenants()
    listed = Records(Store(*wiring_tables())).handing_back()
    assert [stored.tenant for stored in listed] == [tenant.name]
    # When the operator suspends the tenant (and then resumes it) while the sweep hands its work back, after a piece
    sweep.hand_back_left(listed, at_turn(3, *actions, tenant=tenant.name))
    # Then the operator's last action stands
    if actions[-1] == "suspend":
        # suspended: nothing more went back, and the tenant is listed no more among those handing back
        assert status_of(tenant.name) == "suspended"
        assert len(held.held()) == 2
        assert Records(Store(*wiring_tables())).handing_back() == []
    else:
        # active: its own resume handed everything back, and every run went on as it would have
        assert status_of(tenant.name) == "active"
        held.went_on()
        assert Records(Store(*wiring_tables())).handing_back() == []


def suspending_at(outside: Any, monkeypatch: pytest.MonkeyPatch, tenant: str, piece: int, before: bool) -> list[str]:
    """`outside.hand_back` made to suspend `tenant` (the operator, from another terminal) at the hand back of its
    `piece`-th piece (1 is the first), just `before` the piece goes back or just after: what went back, by destination."""
    hand_back, went = outside.hand_back, []

    def handing_back(name: str, held: Any) -> None:
        at = len(went) + 1 == piece
        if at and before:
            assert operator("suspend", tenant=name)["status"] == "suspended"
        hand_back(name, held)
        went.append(held.destination)
        if at and not before:
            assert operator("suspend", tenant=name)["status"] == "suspended"

    monkeypatch.setattr(outside, "hand_back", handing_back)
    return went


# A world of its own: the sweep hands back the held work of every tenant listed, whichever test listed it.
@pytest.mark.private_world
@pytest.mark.usefixtures("loopback_delivery")
def test_a_suspension_while_a_batch_of_held_work_goes_back_stops_it_at_the_next_piece(
    env, monkeypatch, clock_file, receiver
):
    tenant = Tenant(f"{env.tenant}-midbatch")
    held = Held(tenant, receiver, clock_file, env.queues)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    # Given a suspended tenant holding four pieces of work, all in one batch of its resume's hand back
    with monkeypatch.context() as patched:
        went = suspending_at(admin.lifecycle().outside, patched, tenant.name, piece=1, before=False)
        # When the operator suspends it again once the first piece went back
        answer = admin.perform({"operation": "resume", "tenant": tenant.name}, lambda: True)
    # Then the batch stopped there: the rest of it stays held for the next resume, and the answer says so
    assert went == ["deadline"]
    assert (answer["status"], answer["handedBack"], answer["remaining"]) == ("suspended", 1, False)
    assert sorted(h.destination for h in held.held()) == ["queue:callbacks", "queue:notifications", "queue:outbox"]
    # and when the operator resumes it at last, every run goes on as it would have
    assert operator("resume", tenant=tenant.name)["status"] == "active"
    clock.advance(clock_file, 60)
    assert SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once() >= 1  # its deadline, handed back to the scheduler
    held.went_on()


# A world of its own: the sweep hands back the held work of every tenant listed, whichever test listed it.
@pytest.mark.private_world
@pytest.mark.usefixtures("loopback_delivery")
def test_work_held_again_as_it_goes_back_keeps_its_new_holding(env, monkeypatch, clock_file, receiver):
    tenant = Tenant(f"{env.tenant}-reheld")
    held = Held(tenant, receiver, clock_file, env.queues)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    # Given a resume whose call stopped before it handed anything back, which the per-minute sweep takes over (the
    # timeouts function: a held deadline is fired there, at once)
    assert admin.perform({"operation": "resume", "tenant": tenant.name}, lifecycle_tests.steps(0))["remaining"]
    clock.advance(clock_file, tenant_lifecycle.HAND_BACK_LEASE_S + 1)
    sweep = lambda_runtime.handler_module("timeouts").tenants()
    listed = TenantRecords(Store(*wiring_tables())).handing_back()
    before = {h.destination: h for h in held.held()}
    # When the operator suspends the tenant just as its deadline goes back (after the sweep saw it still active): the
    # deadline, fired for a suspended tenant, is held again, under the same key
    with monkeypatch.context() as patched:
        went = suspending_at(sweep.outside, patched, tenant.name, piece=1, before=True)
        handed = sweep.hand_back_left(listed, lambda: True)
    # Then the deadline's new holding is kept, not deleted as the holding that went back
    again = {h.destination: h for h in held.held()}
    assert "deadline" in again
    assert again["deadline"].sk == before["deadline"].sk
    assert again["deadline"].holding != before["deadline"].holding
    # and counted as handed back by no one; nothing else went back (the tenant is suspended)
    assert (went, handed) == (["deadline"], 0)
    assert sorted(again) == ["deadline", "queue:callbacks", "queue:notifications", "queue:outbox"]
    # and when the operator resumes it, every run goes on as it would have: its deadline fired
    resumed = operator("resume", tenant=tenant.name)
    assert (resumed["status"], resumed["handedBack"]) == ("active", 4)
    clock.advance(clock_file, 60)
    assert SchedulePump(wiring.LOCAL_SCHEDULE_GROUP).pump_once() >= 1
    held.went_on()


@pytest.mark.private_world  # the deletion reads the whole table
def test_a_deletion_that_has_not_finished_is_listed_in_words_with_the_command_that_goes_on(env):
    gone = Tenant(f"{env.tenant}-halfway")
    operator("suspend", tenant=gone.name)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    # Given a deletion whose CLI stopped after the call that deleted the tenant's schedules
    answer = admin.perform({"operation": "delete", "tenant": gone.name}, lifecycle_tests.steps(2))
    assert (answer["done"], answer["phase"]) == (False, "secrets")
    # When the operator lists the tenants
    shown = listed_in_words(gone.name)
    # Then the tenant is shown being deleted, with where its deletion stopped and how it goes on, in words
    assert shown.splitlines()[0].split()[1:3] == ["being", "deleted"]
    assert (
        f"{gone.name}: its deletion has not finished, deleting its secrets (pass 1, 0 items deleted so far); "
        f"`interlude tenants delete {gone.name}` goes on from there"
    ) in shown
    assert "phase" not in shown
    # and once it is done, it is shown deleted, and nothing is left to say
    deleted(gone.name)
    (line,) = listed_in_words(gone.name).splitlines()
    assert line.split()[1] == "deleted"


# -- a deleted tenant's work never comes back -----------------------------------------------------------------------

OLD_TOMBSTONE_S = 14 * DAY_S  # the tombstone's life until 0.12.0: the dead-letter queues' retention, no more


# A world of its own: the deletion reads the whole table, and so do the TTL sweep and `naming`.
@pytest.mark.private_world
@pytest.mark.usefixtures("loopback_delivery")
def test_a_deleted_tenants_notice_redriven_from_its_dead_letters_weeks_on_is_dropped(env, clock_file, receiver):
    gone = Tenant(f"{env.tenant}-redriven")
    # Given a run whose callback notices wait in the dead letters (its receiver was down: kept as they were queued)
    run_id = gone.start("gate", callbackUrl=receiver.url())
    Stream(wiring_tables()[0]).settle()
    callbacks = env.queues["callbacks"]
    waiting = queued(callbacks)
    for message in waiting:
        boto3.client("sqs").delete_message(QueueUrl=callbacks, ReceiptHandle=message["ReceiptHandle"])
    assert {json.loads(message["Body"])["notice"]["runId"] for message in waiting} == {run_id}
    # and the tenant deleted
    operator("suspend", tenant=gone.name)
    deleted(gone.name)
    deleted_at = clock.now().timestamp()
    # When an operator redrives its dead letters just after the tombstone's old life, and again once the tombstone
    # is gone too (DynamoDB's TTL deleted it)
    for life in (OLD_TOMBSTONE_S, wiring.TENANT_TOMBSTONE_S):
        clock.advance(clock_file, deleted_at + life + 3600 - clock.now().timestamp())
        TtlPump(*wiring_tables()).sweep()
        for message in waiting:
            boto3.client("sqs").send_message(QueueUrl=callbacks, MessageBody=message["Body"])
        drain(env.queues)
        # Then the notice is dropped: nothing is sent, and nothing of the tenant is written again (no delivery
        # record, no signing secret) but the tombstone, while it lasts
        assert receiver.hits == []
        left = [item["pk"]["S"] for item in naming(gone.name)]
        assert left == (["TENANTS"] if life < wiring.TENANT_TOMBSTONE_S else []), life
        assert naming(gone.name, wiring_tables()[1]) == []
        assert secrets_naming(gone.name) == []
        assert queued(callbacks) == []


# -- the migrations queue's jobs of a tenant's data ask where the tenant stands -------------------------------------------


def with_upkeep_queued(name: str, world: Any, clock_file: Any) -> tuple[Tenant, str, int]:
    """A tenant with one job of each kind the migrations queue carries for a tenant's data, queued: a finished run's
    retention turn (its items left without an expiry, as a turn cut short leaves them), a search-keys job (a key
    declared searchable after the run was made), a re-stamp job (its retentionDays changed); (tenant, the run, when
    it ended)."""
    tenant = Tenant(name)
    stream = Stream(wiring_tables()[0])
    run_id = tenant.start("gate", metadata={"customer": "acme"})
    stream.settle()
    decided = call(
        "POST", f"/runs/{to_wire(run_id)}/interrupts/review", tenant.key, {"resumeValue": {"action": "accept"}}
    )
    assert decided.status == 200, decided.text
    stream.settle()
    drain(world.queues, "migrations")
    ended = retention_tests.end_of(run_id, tenant.key)
    retention_tests.unfinished_retention(world, run_id)
    queue_run_retention(run_id)
    for change in ({"searchableMetadata": ["customer"]}, {"retentionDays": 30}):
        changed = call("PATCH", "/tenant/settings", tenant.key, change)
        assert changed.status == 200, changed.text
    clock.advance(clock_file, 20)  # the declaration applied by every instance (their settings cache)
    waiting = boto3.client("sqs").receive_message(
        QueueUrl=world.queues["migrations"], MaxNumberOfMessages=10, VisibilityTimeout=0
    )["Messages"]
    kinds = sorted(json.loads(m["Body"])["kind"] for m in waiting)
    assert kinds == ["retention-restamp", "run-retention", "search-keys"]
    return tenant, run_id, ended


def both_tables_naming(tenant: str) -> list[dict[str, Any]]:
    return naming(tenant) + naming(tenant, wiring_tables()[1])


# A world of its own: the deletion and the daily sweep read the whole table.
@pytest.mark.private_world
@pytest.mark.parametrize("standing", ["being deleted", "suspended"])
def test_the_migrations_queues_jobs_of_a_tenants_data_drop_a_tenant_being_deleted_and_keep_a_suspended_ones_right(
    env, monkeypatch, clock_file, standing
):
    from interlude.store.retention import RetentionStore
    from interlude.store.search_keys import SearchKeysStore

    clear_of_a_month_end(clock_file)
    # Given a tenant whose runs' retention, search-keys and re-stamp jobs wait on the migrations queue
    tenant, run_id, ended = with_upkeep_queued(f"{env.tenant}-upkeep", env, clock_file)
    # When the operator suspends it (and deletes it: the deletion waits out its grace period), and then the migrate
    # function takes the queue's turns, and the next month the daily sweep passes
    operator("suspend", tenant=tenant.name)
    if standing == "being deleted":
        monkeypatch.setenv("INTERLUDE_TENANT_DELETION_GRACE_SECONDS", "3600")
        lambda_runtime.fresh_instances()
        assert operator("delete", tenant=tenant.name)["phase"] == "waiting"
    before = both_tables_naming(tenant.name)
    drain(env.queues, "migrations")
    month = clock.now().strftime("%Y-%m")
    clock.advance(clock_file, 40 * DAY_S)
    retention_tests.daily_sweep(env)
    # Then every message was taken, none left to fail into the dead letters
    assert queued(env.queues["migrations"]) == []
    if standing == "being deleted":
        # and nothing of the tenant being deleted was written: its deletion finds what it left, and nothing after it
        assert both_tables_naming(tenant.name) == before
    else:
        # and the suspended tenant's data is as right as an active one's: the run expires 30 days after its end, its
        # older run is found under the key declared, and its ended month is closed
        assert retention_tests.expiries(env, run_id) == {ended + 30 * DAY_S}
        restamp = RetentionStore(*wiring_tables()).restamp_job(tenant.name)
        assert restamp is not None
        assert restamp["state"] == "done"
        job = SearchKeysStore(*wiring_tables()).job(tenant.name)
        assert job is not None
        assert (job.runs_read, job.done_at is not None) == (1, True)
        assert TenantRecords(Store(*wiring_tables())).usage([tenant.name], month)[tenant.name].closed_at


# -- the operator CLI: one clear line, never a flood, never a call made twice -------------------------------------------


@pytest.mark.parametrize("argv", [["tenants", "list", "--limit", "0"], ["keys", "list", "--limit", "500"]])
def test_an_out_of_range_limit_is_refused_in_one_short_line_naming_the_range(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        cli_main(argv)
    assert exited.value.code != 0
    said = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--limit" in said
    # the range as a person writes it, not every number in it
    assert len(said) < 160, said
    assert "1 to" in said


class FakeLambda:
    """A loopback Lambda Invoke endpoint that takes each invocation and drops the connection without an answer, as a
    network does when a long call's answer is lost: how many invocations reached it."""

    def __init__(self) -> None:
        self.invocations = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                self.rfile.read(int(self.headers.get("content-length") or 0))
                owner.invocations += 1
                self.close_connection = True
                self.connection.shutdown(2)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()


@pytest.fixture
def fake_lambda() -> Iterator[FakeLambda]:
    endpoint = FakeLambda()
    yield endpoint
    endpoint.stop()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "INTERLUDE_"))}
    return subprocess.run(
        [sys.executable, "-m", "interlude.cli", *args], env=environment, capture_output=True, text=True, timeout=120
    )


def test_an_operator_call_whose_answer_is_lost_is_made_once_and_said_in_one_line(fake_lambda, tmp_path):
    # A local stack's state file naming the Lambda endpoint `interlude tenants --local` invokes
    state = tmp_path / "local.json"
    state.write_text(json.dumps({"lambdaEndpoint": fake_lambda.url, "motoEndpoint": fake_lambda.url}))
    done = run_cli("tenants", "suspend", "acme", "--local", "--state-file", str(state))
    # The call reached the function once: an operator's call is never sent again behind their back (a create sent
    # twice loses the key shown once; a deletion's call twice runs beside itself)
    assert fake_lambda.invocations == 1
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    # and the operator is told the call may have been done, and how to see where the tenant stands
    (line,) = done.stderr.splitlines()
    assert line.startswith("interlude: the answer to `suspend` was lost")
    assert "interlude tenants list" in line


def test_an_operator_call_is_waited_for_as_long_as_the_function_may_run():
    from interlude.cli import tenants

    (admin,) = [f for f in wiring.FUNCTIONS if f.name == wiring.OPERATOR_FUNCTION]
    client = tenants.operator_client("http://127.0.0.1:9")
    # A deletion's call takes up to the function's timeout less a minute: the CLI does not give up on it before
    assert client.meta.config.read_timeout >= admin.timeout_s


# -- a CLI of this release and an operator surface of the previous one (a rollback) -----------------------------------


@pytest.fixture(scope="module")
def previous_admin(tmp_path_factory) -> Iterator[dict[str, Any]]:
    """The previous release's `admin` function behind its local stack's loopback Lambda endpoint, each call out of time
    after one batch of held work; two suspended tenants each holding more than a batch (tests/upgrade/previous_release.py
    `admin`): the state file `--local` reads, and the tenants."""
    work = tmp_path_factory.mktemp("previous-admin")
    with tarfile.open(upgrade_tests.ARCHIVE) as archive:
        archive.extractall(work / "previous", filter="data")
    root = work / "previous"
    outside = ("AWS_", "INTERLUDE_", "TABLE_NAME", "ENTRIES_TABLE_NAME", "MOTO_")
    environment = {k: v for k, v in os.environ.items() if not k.startswith(outside)}
    environment["PYTHONPATH"] = str(root / "layers" / "core" / "python")
    state, said = work / "local.json", work / "said"
    with said.open("w") as out, (work / "log").open("w") as log:
        serving = subprocess.Popen(
            [sys.executable, str(upgrade_tests.READER), "admin", str(state)],
            cwd=root,
            env=environment,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=log,
            text=True,
        )

    def started() -> str | None:
        # Its one line (the previous release's own log lines may come before it); a helper that stopped says why
        line = next((line for line in said.read_text().splitlines() if line.startswith('{"release"')), None)
        assert line is not None or serving.poll() is None, (work / "log").read_text()[-4000:]
        return line

    try:
        line = until(started, 120)
        assert line is not None, "the previous release's stack did not start"
        yield {"state": str(state), **json.loads(line)}
    finally:
        assert serving.stdin is not None
        serving.stdin.close()
        serving.wait(60)


def test_a_resume_against_the_previous_releases_operator_surface_goes_on_as_that_release_does(previous_admin):
    tenant = previous_admin["tenants"][0]
    # Given a tenant of a deployment rolled back to the previous release, suspended with more held work than one call
    # of its resume hands back
    # When the operator resumes it with this release's CLI
    done = run_cli("tenants", "resume", tenant, "--local", "--state-file", previous_admin["state"])
    # Then the later calls, which that release refuses as this one makes them, are made as it makes them: all of the
    # held work went back, and the tenant is active
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"tenant {tenant} is active; {previous_admin['held']} held piece(s) of work went on"
    listed = run_cli("tenants", "list", "--local", "--state-file", previous_admin["state"], "--json")
    assert {t["tenant"]: t["status"] for t in json.loads(listed.stdout)["tenants"]}[tenant] == "active"
    # and the operator is told, in words, what an earlier release's resume does
    (note,) = done.stderr.splitlines()
    assert note.startswith("the deployment runs an earlier release of Interlude")
    assert "a suspension made while it goes back would be undone" in note
    # and meets none of the protocol's names
    assert not {"handBackOnly", "validation_error", "resume", "operation"} & set(re.findall(r"\w+", done.stdout + note))


def test_a_suspension_between_the_previous_releases_resume_calls_is_undone_and_the_operator_is_told(
    previous_admin, capsys
):
    from interlude.cli import tenants as tenants_cli

    tenant = previous_admin["tenants"][1]
    endpoint = json.loads(Path(previous_admin["state"]).read_text())["lambdaEndpoint"]
    name = f"{FUNCTION_NAME_PREFIX}{wiring.OPERATOR_FUNCTION}"
    invoke = tenants_cli.invoker(tenants_cli.operator_client(endpoint), name)
    asked: list[dict[str, Any]] = []

    def suspended_after_the_first_call(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        answer: dict[str, Any] = invoke(request)
        if len(asked) == 1:
            assert invoke({"operation": "suspend", "tenant": tenant})["status"] == "suspended"
        return answer

    # Given a tenant of a deployment rolled back to the previous release, whose resume this release's CLI calls
    # When the operator suspends it again after the first call (from another terminal)
    answer = tenants_cli._resumed(suspended_after_the_first_call, tenant)
    # Then that release's resume, the one call it goes on with, made the tenant active again
    assert (answer["status"], answer["handedBack"], answer["remaining"]) == ("active", previous_admin["held"], False)
    assert [request.get("handBackOnly") for request in asked] == [None, True, None]
    # and the operator is told so, with what to do if it should stay suspended
    said = capsys.readouterr().err
    assert f"tenant {tenant} was suspended while its held work went back, and is active again" in said
    assert "suspend it again if it should stay suspended" in said


# -- retention: every item of a finished run expires with it, however it came to end ---------------------------------

aws = actions_tests.aws  # moto's queues, the actions worker's backoff at 0
actions_services = actions_tests.services
receiver = actions_tests.receiver


def partition(run_id: str) -> list[dict[str, Any]]:
    pages = (
        boto3.client("dynamodb")
        .get_paginator("query")
        .paginate(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}},
            ConsistentRead=True,
        )
    )
    return [item for page in pages for item in page["Items"]]


def expiries(run_id: str) -> dict[str, int | None]:
    return {
        item["sk"]["S"]: int(item[wiring.TTL_ATTRIBUTE]["N"]) if wiring.TTL_ATTRIBUTE in item else None
        for item in partition(run_id)
    }


def test_a_failed_run_retried_weeks_later_that_fails_again_has_every_item_expire_with_its_new_end(
    actions_services, admin, aws, receiver, monkeypatch, clock_file
):
    services = actions_services
    monkeypatch.delenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS")
    # Given a run whose action fails (its URL refused when called), ended soon after its creation: its items keep the
    # expiry they were written with
    failing = actions_tests.workflow("{{inputs.orderId}}")
    failing["nodes"], failing["edges"] = failing["nodes"][:2], failing["edges"][:1]
    run_id = actions_tests.approved_run(services, admin, failing, order=receiver.url())
    actions_tests.settle(aws)
    assert state_of(services, run_id).status == "failed"
    # When its operator retries the action three weeks later, and it fails again
    clock.advance(clock_file, 21 * DAY_S)
    services.replay.retry_action(admin, run_id, "refund")
    actions_tests.settle(aws)
    state = state_of(services, run_id)
    assert state.status == "failed"
    # Then the run expires its tenant's retentionDays after its new end, and every item of it with it (none before:
    # a run whose head is read while its history is gone; none never)
    ends = run_expiry(state.completedAt, services.limiter.retention_days(admin.tenant), clock.now())
    found = expiries(run_id)
    assert found["RUN"] == ends
    early = {sk: ttl for sk, ttl in found.items() if ttl is None or ttl < ends}
    assert early == {}


# -- migrations: a deploy's turns cut anywhere end where one uninterrupted run ends ------------------------------------

made_history = migrations_tests.made_history  # runs, gates, workflows and keys as written before their listings
history = migrations_tests.history
moments = migrations_tests.moments


def both_tables(world: Any) -> dict[str, list[dict[str, Any]]]:
    """Every item of the deployment's two tables but the migrations' own checkpoints (their counts and times say how
    the runs went, not what they left), in key order."""
    scan = boto3.client("dynamodb").get_paginator("scan").paginate
    return {
        name: sorted(
            (item for page in scan(TableName=name, ConsistentRead=True) for item in page["Items"]),
            key=lambda item: (item["pk"]["S"], item["sk"]["S"]),
        )
        for name in (world.table, world.entries_table)
    }


def taken_back(world: Any, items: list[dict[str, Any]]) -> None:
    """Both tables as the history left them: emptied, then its items put back."""
    client = boto3.client("dynamodb")
    for name, found in both_tables(world).items():
        for item in found:
            client.delete_item(TableName=name, Key={"pk": item["pk"], "sk": item["sk"]})
    migrations_tests.batch_write(world, [{"PutRequest": {"Item": item}} for item in items])


def without_checkpoints(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [i for i in found if i["pk"]["S"] != MIGRATION_PK] for name, found in tables.items()}


def one_page() -> Callable[[], bool]:
    """A turn's time, as `more_time()` sees it: enough to begin, then none after its first page."""
    asked = iter([True])
    return lambda: next(asked, False)


@pytest.mark.private_world
def test_migrations_cut_at_every_page_boundary_leave_the_table_one_uninterrupted_run_leaves(
    history, world, moments, monkeypatch
):
    store = Store(world.table, world.entries_table)

    def now() -> Any:
        return moments[-1]

    # Given the table one uninterrupted run of every migration leaves (pages of four items)
    assert migrations.run_pending(store, "deploy", page_items=4, clock=now).complete
    whole = without_checkpoints(both_tables(world))
    # When, from the same history, every turn is a new runner that takes one page and is cut: in turn after its page's
    # writes and before its checkpoint (an invocation that died), and after its checkpoint (its time ran out); each
    # next turn once the cut one's lease lapsed, as the migrate function's queued turns come
    taken_back(world, history["items"])
    recorded = MigrationStore.record_page
    died: list[int] = []

    def dying(self: MigrationStore, *args: Any, **kwargs: Any) -> Any:
        if len(died) % 2 == 0:
            died.append(1)
            raise TimeoutError("the invocation died after its page's writes")
        died.append(0)
        return recorded(self, *args, **kwargs)

    monkeypatch.setattr(MigrationStore, "record_page", dying)
    for turn in range(2000):
        moments.append(moments[-1] + timedelta(seconds=LEASE_S + 1))
        try:
            outcome = migrations.run_pending(store, f"turn-{turn}", more_time=one_page(), page_items=4, clock=now)
        except TimeoutError:
            continue
        if outcome.complete:
            break
    else:
        raise AssertionError("the migrations never ended")
    # Then the table is the one the uninterrupted run left, item for item
    assert sum(died) > 20
    assert without_checkpoints(both_tables(world)) == whole
    checkpoints = MigrationStore(world.table, boto3.client("dynamodb"), world.entries_table).checkpoints()
    assert {checkpoint["state"] for checkpoint in checkpoints.values()} == {"done"}


class OnePage:
    """A migrate invocation's context with time for one page: its time is up once it has recorded a page."""

    def __init__(self, recorded: list[str], number: int) -> None:
        self.aws_request_id = f"turn-{number}"
        self.recorded = recorded
        self.pages_before = len(recorded)

    def get_remaining_time_in_millis(self) -> int:
        return 900_000 if len(self.recorded) == self.pages_before else 0


@pytest.mark.private_world  # the sweep and the migrations read the whole table
def test_a_long_sweep_and_migration_go_on_turn_after_turn_without_a_pause(world, monkeypatch):
    recorded: list[str] = []
    record_page = MigrationStore.record_page

    def recording(self: MigrationStore, migration_id: str, *args: Any) -> None:
        record_page(self, migration_id, *args)
        recorded.append(migration_id)

    monkeypatch.setattr(MigrationStore, "record_page", recording)
    # A table of three pages of the sweep's
    filler = [{"PutRequest": {"Item": {"pk": {"S": f"FILLER#{n}"}, "sk": {"S": "X"}}}} for n in range(2 * 1000 + 1)]
    migrations_tests.batch_write(world, filler)
    migrate = lambda_runtime.handler_module("migrate")
    queue = world.queues["migrations"]
    message: dict[str, Any] | None = {"v": 1, "kind": "retention-sweep", "start": True}
    pages: dict[str, list[int]] = {"retention-sweep": [], "migrations-turn": []}
    # When each turn of the daily sweep's pass, then of the migrations, has time for one page, and the queue hands
    # each turn's message to the function as it queued it
    while message is not None:
        before = len(recorded)
        running = lambda_runtime.CURRENT_FUNCTION.set("migrate")
        try:
            migrate.take(SQSRecord({"body": json.dumps(message)}), OnePage(recorded, len(recorded)))
        finally:
            lambda_runtime.CURRENT_FUNCTION.reset(running)
        pages[message["kind"]].append(len(recorded) - before)
        # Then each next turn is there at once (a turn queued with a delay is not visible yet)
        waiting = queued(queue)
        for got in waiting:
            boto3.client("sqs").delete_message(QueueUrl=queue, ReceiptHandle=got["ReceiptHandle"])
        message = json.loads(waiting[0]["Body"]) if waiting else None
        if message is None and not pages["migrations-turn"]:
            message = {"v": 1, "kind": "migrations-turn"}
        assert len(waiting) <= 1, waiting
        assert len(recorded) < 100
    # and goes on where the last stopped: every turn takes a page (none finds the pass held by the turn before), and
    # the pass is whole
    assert len(pages["retention-sweep"]) > 2
    assert len(pages["migrations-turn"]) >= len(migrations.module_names())
    assert all(pages["retention-sweep"]), pages
    assert all(pages["migrations-turn"]), pages
    checkpoints = MigrationStore(world.table, boto3.client("dynamodb"), world.entries_table).checkpoints()
    assert {mid: c["state"] for mid, c in checkpoints.items()} == dict.fromkeys(checkpoints, "done")
    assert set(checkpoints) >= {name.split("_")[0] for name in migrations.module_names()} | {"retention-sweep"}
