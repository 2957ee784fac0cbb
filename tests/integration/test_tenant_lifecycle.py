"""The tenant lifecycle of a managed deployment (issue 30 item 6), in-process: the real `admin` function (the operator
surface, invoked as the operator's IAM principal would), the real api, dispatch, timeouts and queue handlers over
moto. Time moves by the process clock's offset file, never by sleeping."""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.adapters.notify.messages import RAISED
from interlude.adapters.notify.messages import queue_message as notification_message
from interlude.adapters.notify.slack_settings import store_signing_secret
from interlude.adapters.queues import send_messages
from interlude.adapters.scheduler.names import BUCKET_PREFIX, tenant_prefix
from interlude.composition import Services
from interlude.domain import clock
from interlude.domain.ids import to_wire
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.local.live_gateway import LiveGateway
from interlude.local.schedules import SchedulePump
from interlude.local.sqs_pump import QueuePump
from interlude.rules.slack_requests import signature
from interlude.store.due_index import DUE_PK_PREFIX
from interlude.store.facade import Store
from interlude.store.layout import followers_pk, live_connection_pk, run_pk
from interlude.store.live import LiveStore
from interlude.store.tenants import Held, TenantRecords
from tests.integration.conftest import InProcessApi, clear_of_a_month_end
from tests.integration.test_live import Live
from tests.support.queues import drain, mapped_until_gone, queued
from tests.support.receiver import delivering_to_loopback
from tests.support.stream import Stream, dispatch

BASE_URL = "https://interlude.example.com"
GATE_S = 600


@pytest.fixture
def env(world, monkeypatch, clock_file):
    # Every instance here reads a tenant's status afresh (a deployed one trusts it for 5 s), and a deletion waits for
    # no work in flight (there is none: every handler here has returned).
    for name, value in {
        "PUBLIC_BASE_URL": BASE_URL,
        "INTERLUDE_TENANT_STATUS_CACHE_SECONDS": "0",
        "INTERLUDE_TENANT_DELETION_GRACE_SECONDS": "0",
        "INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off",
    }.items():
        monkeypatch.setenv(name, value)
    lambda_runtime.fresh_instances()
    return world


@pytest.fixture
def live(env, monkeypatch) -> Iterator[Live]:
    """The WebSocket API's gateway, its management endpoint in every function's environment (the admin function's too)."""
    gateway = LiveGateway(InProcessApi().invoke).start()
    monkeypatch.setenv(wiring.LIVE_API.endpoint_env, gateway.endpoint)
    lambda_runtime.fresh_instances()
    yield Live(gateway)
    gateway.stop()


def operator(operation: str, **request: Any) -> dict[str, Any]:
    """What the operator surface answers, invoked as the operator's IAM principal invokes it."""
    answer: dict[str, Any] = lambda_runtime.invoke(wiring.OPERATOR_FUNCTION, {"operation": operation, **request})
    return answer


class Reply:
    def __init__(self, raw: dict[str, Any]) -> None:
        self.status = raw["statusCode"]
        self.headers = {k.lower(): v for k, v in (raw.get("headers") or {}).items()}
        self.cookies = raw.get("cookies") or []
        self.text = raw.get("body") or ""

    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def code(self) -> str | None:
        """The refusal's code: the OpenWOP envelope's, or ModuleX's header."""
        if "x-interlude-error" in self.headers:
            return self.headers["x-interlude-error"]
        try:
            return self.json().get("error")
        except (ValueError, AttributeError):
            return None


def call(method: str, path: str, key: str | None = None, body: Any = None, **headers: str) -> Reply:
    sent = {"host": "interlude.example.com", "content-type": "application/json", **headers}
    if key:
        sent["authorization"] = f"Bearer {key}"
    raw = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    return Reply(lambda_runtime.invoke("api", to_event(method, path, sent, raw, "127.0.0.1")))


GATE = {
    "nodes": [
        {"id": "review", "typeId": "core.approvalGate", "config": {"title": "Ship it?", "actions": ["accept", "reject"]}},
        {"id": "done", "typeId": "core.noop"},
    ],
    "edges": [{"sourceNodeId": "review", "targetNodeId": "done"}],
}
TIMED_GATE = {
    **GATE,
    "nodes": [{**GATE["nodes"][0], "config": {**GATE["nodes"][0]["config"], "timeoutMs": GATE_S * 1000}}, GATE["nodes"][1]],
}


class Tenant:
    """A tenant made through the operator surface, with its first admin key and a workflow of one approval gate."""

    def __init__(self, name: str) -> None:
        created = operator("create", tenant=name, subjectId="ops-admin")
        assert created["status"] == "active", created
        self.name, self.key, self.key_id = name, created["apiKey"], created["keyId"]
        self.services = Services(Store(*wiring_tables()))
        self.principal = self.services.keys.authenticate(f"Bearer {self.key}")
        self.services.workflows.put_workflow(self.principal, "gate", WorkflowDefinition.model_validate(GATE))
        self.services.workflows.put_workflow(self.principal, "timed", WorkflowDefinition.model_validate(TIMED_GATE))

    def start(self, workflow: str = "gate", **body: Any) -> str:
        started = call("POST", "/runs", self.key, {"workflowId": workflow, **body})
        assert started.status == 201, started.text
        run_id: str = started.json()["runId"]
        return run_id

    def status(self, run_id: str) -> str:
        got = call("GET", f"/runs/{to_wire(run_id)}", self.key)
        assert got.status == 200, got.text
        status: str = got.json()["status"]
        return status


def wiring_tables() -> tuple[str, str]:
    from interlude.config import settings

    return settings().table_name, settings().entries_table_name


def wiring_table() -> str:
    return wiring_tables()[0]


# -- the console, as a browser signs in ---------------------------------------------------------------------------

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def cookie_header(cookies: list[str]) -> str:
    jar: SimpleCookie = SimpleCookie()
    for raw in cookies:
        jar.load(raw)
    return "; ".join(f"{name}={morsel.value}" for name, morsel in jar.items() if morsel.value)


def console_sign_in_form(key: str) -> tuple[bytes, str]:
    """(the sign-in form's body, the Cookie header it goes with), as the sign-in page hands them to a browser."""
    page = call("GET", "/console/sign-in", accept="text/html")
    proof = CSRF.search(page.text)
    assert page.status == 200, page.text[:300]
    assert proof
    form = f"csrf={proof.group(1)}&api_key={key}".encode()
    return form, cookie_header(page.cookies)


def console_session(key: str) -> str:
    form, cookies = console_sign_in_form(key)
    signed = call("POST", "/console/sign-in", body=form, **console_headers(cookies))
    assert signed.status == 200, signed.text[:300]
    return cookie_header(signed.cookies)


def console_headers(cookies: str) -> dict[str, str]:
    return {
        "cookie": cookies,
        "content-type": "application/x-www-form-urlencoded",
        "origin": BASE_URL,
        "sec-fetch-site": "same-origin",
        "accept": "text/html",
    }


def signed_slack_click(tenant: str) -> tuple[bytes, dict[str, str]]:
    """A click Slack reports to the tenant's interactivity URL, signed with the signing secret the tenant set."""
    secret = "0123456789abcdef0123456789abcdef"
    store_signing_secret(tenant, secret)
    payload = {"type": "block_actions", "team": {"id": "T1"}, "user": {"id": "U1"}, "actions": [{"action_id": "open-approval-page"}]}
    body = urlencode({"payload": json.dumps(payload)}).encode()
    stamp = str(int(clock.now().timestamp()))
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signature(secret, stamp, body),
    }
    return body, headers


# -- every route, refused ---------------------------------------------------------------------------------------------


def path_of(route: wiring.Route, values: dict[str, str]) -> str:
    """The route's path with each parameter's value (a route naming a parameter this test has no value for fails
    here: give it one)."""
    return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], route.path)


def test_a_suspended_tenant_is_refused_on_every_route_and_another_tenant_is_not(env):
    # Given a tenant with a run waiting at its gate, a decision link for it and a console session, and another tenant
    doomed, other = Tenant(f"{env.tenant}-s"), Tenant(f"{env.tenant}-o")
    run_id = doomed.start()
    minted = call("GET", f"/runs/{to_wire(run_id)}/interrupts/review", doomed.key)
    assert minted.status == 200, minted.text
    session = console_session(doomed.key)
    sign_in_form, sign_in_cookies = console_sign_in_form(doomed.key)
    values = {
        "runId": to_wire(run_id),
        "threadId": to_wire(run_id),
        "runPk": to_wire(run_id),
        "nodeId": "review",
        "token": minted.json()["token"],
        "keyId": doomed.key_id,
        "workflowId": "gate",
        "webhookId": to_wire(f"{doomed.name}/{'w' * 22}"),
        "principalId": "alice",
        "provider": "github",
        "taskToken": "t" * 40,
        "deliveryId": "d" * 22,
        "notificationId": "n" * 22,
        "tenant": doomed.name,
    }
    slack_click = signed_slack_click(doomed.name)
    # When the operator suspends it
    suspended = operator("suspend", tenant=doomed.name, reason="unpaid invoice")
    assert (suspended["status"], suspended["reason"]) == ("suspended", "unpaid invoice")
    # Then every route that acts for a tenant refuses it, whatever the surface: its key, its session, its link
    for route in wiring.ROUTES:
        path = path_of(route, values)
        if not wiring.acts_for_a_tenant(route):
            # a public document, or the console's door (or the way to it): nothing of any tenant is read or done
            assert call(route.method, path, doomed.key, accept="text/html").status in (200, 303), route.operation
            continue
        if route.module == wiring.CONSOLE_MODULE:
            if route.operation == "consoleSignIn":
                got = call(route.method, path, body=sign_in_form, **console_headers(sign_in_cookies))
            else:
                got = call(route.method, path, body=b"csrf=x", **console_headers(session))
            assert got.status == 403, (route.operation, got.status, got.text[:300])
            assert "suspended" in got.text, route.operation
            continue
        if route.operation == "slackInteraction":
            got = call(route.method, path, body=slack_click[0], **slack_click[1])
        else:
            got = call(route.method, path, None if route.scope is None else doomed.key, body={})
        assert (got.status, got.code) == (403, "interlude.tenant_suspended"), (route.operation, got.status, got.text[:300])
        if route.face == "modulex":
            assert "suspended" in got.json()["detail"]
        else:
            assert got.json()["details"] == {"tenant": doomed.name}
    # and the other tenant is served as ever
    assert call("GET", "/runs", other.key).status == 200
    assert other.status(other.start()) == "waiting-approval"
    # and the suspended tenant's run is where it was
    operator("resume", tenant=doomed.name)
    assert doomed.status(run_id) == "waiting-approval"


def test_a_suspended_tenants_work_is_held_then_goes_on_after_resume_and_its_deferred_deadline_fires(env, clock_file):
    tenant = Tenant(f"{env.tenant}-h")
    stream = Stream(wiring_table())
    # Given a run waiting at a timed gate (its deadline scheduled) and one waiting at an untimed gate
    timed, waiting = tenant.start("timed"), tenant.start("gate")
    stream.settle()
    scheduler = boto3.client("scheduler")
    group = wiring.LOCAL_SCHEDULE_GROUP
    assert scheduler.list_schedules(GroupName=group, NamePrefix=BUCKET_PREFIX)["Schedules"]
    # and a run started just before the suspension, whose first event item the outbox has not taken yet
    late = tenant.start("gate")
    # When the tenant is suspended
    operator("suspend", tenant=tenant.name)
    # the outbox holds the late run's item rather than handling it, once however often it is delivered
    late_records = stream.pump()
    assert dispatch(late_records) == {"batchItemFailures": []}
    # and the gate's deadline passes and fires: it is deferred, not applied
    clock.advance(clock_file, GATE_S + 5)
    assert SchedulePump(group).pump_once() == 1
    # Then nothing moved: a decision is refused, the runs wait as they were
    refused = call("POST", f"/runs/{to_wire(waiting)}/interrupts/review", tenant.key, {"resumeValue": {"action": "accept"}})
    assert refused.code == "interlude.tenant_suspended"
    services = tenant.services
    assert services.store.get_run(timed)[0].status == "waiting-approval"
    held = boto3.client("dynamodb").query(
        TableName=wiring_table(),
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"T#{tenant.name}#HELD"}},
        ConsistentRead=True,
    )["Items"]
    assert sorted(item["destination"]["S"] for item in held) == ["deadline", "queue:outbox"]
    # When the operator resumes it
    resumed = operator("resume", tenant=tenant.name)
    assert (resumed["status"], resumed["handedBack"], resumed["remaining"]) == ("active", 2, False)
    # Then the held outbox message is on its queue again and, taken, moves the late run as it would have
    (consumer,) = [f.name for f in wiring.FUNCTIONS if f.consumes == wiring.OUTBOX_QUEUE]
    drained = QueuePump(consumer, env.queues[wiring.OUTBOX_QUEUE])
    taken = 0
    while handed := drained.pump_once():
        taken += handed
    assert taken >= 1
    assert services.store.get_run(late)[0].status == "waiting-approval"
    # and the deferred deadline is handed back to the scheduler and fires: the gate times out
    clock.advance(clock_file, 60)
    assert SchedulePump(group).pump_once() == 1
    assert tenant.status(timed) == "failed"
    # and the waiting run is decidable again
    decided = call("POST", f"/runs/{to_wire(waiting)}/interrupts/review", tenant.key, {"resumeValue": {"action": "accept"}})
    assert decided.status == 200, decided.text
    stream.settle()
    assert tenant.status(waiting) == "completed"


def held_work(tenant: str) -> list[Held]:
    return TenantRecords(Store(*wiring_tables())).held(tenant, 100)


def held_as_the_previous_release_holds(tenant: str, work_id: str, at: str) -> None:
    """A held item as 0.11.0 writes it: no mark of its holding."""
    key = {"pk": f"T#{tenant}#HELD", "sk": f"deadline#{work_id}"}
    item = {**key, "destination": "deadline", "body": "{}", "heldAt": at}
    boto3.client("dynamodb").put_item(TableName=wiring_table(), Item={k: {"S": v} for k, v in item.items()})


def test_a_resume_deletes_only_the_holding_it_read_whichever_release_held_it(env):
    tenant = Tenant(f"{env.tenant}-marks")
    operator("suspend", tenant=tenant.name)
    records = TenantRecords(Store(*wiring_tables()))
    # Given work held by the previous release (its holding unmarked), then held again: by it, a moment later
    held_as_the_previous_release_holds(tenant.name, "w", "2026-12-08T01:00:00.000Z")
    (first,) = held_work(tenant.name)
    assert first.holding is None
    held_as_the_previous_release_holds(tenant.name, "w", "2026-12-08T01:00:00.001Z")
    # Then the delete of the holding read first deletes nothing
    assert records.release(tenant.name, first) is False
    # and of the holding read last, deletes it
    (again,) = held_work(tenant.name)
    assert records.release(tenant.name, again) is True
    assert held_work(tenant.name) == []
    # Given work held by the previous release, then by this one in the same millisecond
    held_as_the_previous_release_holds(tenant.name, "w", "2026-12-08T01:00:00.000Z")
    (first,) = held_work(tenant.name)
    assert records.hold(tenant.name, "deadline", "w", {}, "2026-12-08T01:00:00.000Z")
    (marked,) = held_work(tenant.name)
    # Then neither the delete of the first holding nor of a marked one read before deletes the last
    assert records.release(tenant.name, first) is False
    assert records.hold(tenant.name, "deadline", "w", {}, "2026-12-08T01:00:00.000Z")
    assert records.release(tenant.name, marked) is False
    (last,) = held_work(tenant.name)
    assert records.release(tenant.name, last) is True
    assert held_work(tenant.name) == []


@pytest.fixture
def delivering(env, monkeypatch):
    """Callbacks delivered to a Receiver on loopback (the callbacks worker made afresh under that environment)."""
    for name, value in delivering_to_loopback(3).items():
        monkeypatch.setenv(name, value)
    lambda_runtime.fresh_instances()
    return env


def test_a_suspended_tenants_held_notice_keeps_no_decision_link_and_goes_out_at_its_resume_with_one_that_works(
    delivering, clock_file, receiver
):
    # Given a tenant's run waiting at its gate, its notice queued with a decision link for the callbacks worker
    tenant = Tenant(f"{delivering.tenant}-c")
    run_id = tenant.start(callbackUrl=receiver.url())
    Stream(wiring_table()).settle()
    # When the tenant is suspended before the worker takes the notice
    operator("suspend", tenant=tenant.name)
    drain(delivering.queues)

    # Then the notice is held for the resume, nothing sent, and what is held keeps no decision link
    assert receiver.hits == []
    (held,) = held_work(tenant.name)
    assert held.destination == "queue:callbacks"
    notice = held.body["notice"]
    assert (notice["type"], notice["runId"]) == ("interrupt.requested", run_id)
    assert not {"token", "intent", "expiresAt"} & set(notice)
    assert set(notice["links"]) == {"run"}
    assert "/interrupts/" not in json.dumps(held.body)

    # When the tenant is resumed two hours later (a link minted when its gate was raised would have expired)
    clock.advance(clock_file, 2 * 3600)
    assert operator("resume", tenant=tenant.name)["handedBack"] == 1
    drain(delivering.queues)

    # Then the notice goes out, with a link that decides the gate
    (hit,) = receiver.hits
    sent = json.loads(hit.body)
    assert (sent["id"], sent["intent"]) == (notice["id"], "resolve")
    assert sent["links"]["resolve"] == f"{BASE_URL}/interrupts/{sent['token']}"
    decided = call("POST", f"/interrupts/{sent['token']}", body={"resumeValue": {"action": "accept"}})
    assert decided.status == 200, decided.text
    assert tenant.status(run_id) == "completed"


def test_a_gates_notice_the_outbox_held_through_a_suspension_goes_out_with_a_link_living_from_the_resume(
    delivering, clock_file, receiver
):
    # Given a tenant's runs raising their gates just before a suspension takes hold, their event items not taken by the
    # outbox yet: one gate without a deadline, one due 2 h 10 min after its raise
    tenant = Tenant(f"{delivering.tenant}-o")
    review, done = GATE["nodes"]
    due_later = {**GATE, "nodes": [{**review, "config": {**review["config"], "timeoutMs": 7800_000}}, done]}
    tenant.services.workflows.put_workflow(tenant.principal, "due-later", WorkflowDefinition.model_validate(due_later))
    untimed, due = tenant.start(callbackUrl=receiver.url()), tenant.start("due-later", callbackUrl=receiver.url())
    deadline = tenant.services.store.get_run(due)[0].interrupts["review"].deadline
    operator("suspend", tenant=tenant.name)
    # When the outbox is handed them while the tenant is suspended, it holds them
    assert dispatch(Stream(wiring_table()).pump()) == {"batchItemFailures": []}
    assert [h.destination for h in held_work(tenant.name)] == ["queue:outbox", "queue:outbox"]

    # When the tenant is resumed two hours later and the outbox takes them
    clock.advance(clock_file, 2 * 3600)
    resumed_at = clock.now().timestamp()
    assert operator("resume", tenant=tenant.name)["handedBack"] == 2
    drain(delivering.queues, wiring.OUTBOX_QUEUE)
    drain(delivering.queues)

    # Then each gate's notice goes out with a link living from its going out, not from its gate's raise: the untimed
    # gate's for a link's life (30 minutes), the timed one's until its gate's deadline, which comes first
    sent = {json.loads(h.body)["runId"]: json.loads(h.body) for h in receiver.hits}
    assert set(sent) == {untimed, due}
    expires = {run: clock.epoch_of(notice["expiresAt"]) for run, notice in sent.items()}
    assert int(resumed_at) + 30 * 60 <= expires[untimed] <= resumed_at + 30 * 60 + 60
    assert expires[due] == int(deadline)
    # And each link decides its gate
    for run_id, notice in sent.items():
        decided = call("POST", f"/interrupts/{notice['token']}", body={"resumeValue": {"action": "accept"}})
        assert decided.status == 200, decided.text
        assert tenant.status(run_id) == "completed"


def test_a_suspended_tenants_notification_is_held_and_goes_back_to_its_queue_at_the_resume(env):
    # Given a notification queued for a tenant's gate (the notify function's hold is a transaction that checks the
    # tenant's standing: its role must allow it, as the callbacks function's must)
    tenant = Tenant(f"{env.tenant}-n")
    run_id = tenant.start()
    interrupt_id = tenant.services.store.get_run(run_id)[0].interrupts["review"].interruptId
    message = notification_message(tenant.name, run_id, "review", interrupt_id, "alice", RAISED)
    send_messages(env.queues["notifications"], [message], "notification", tenant.name)
    # When the tenant is suspended before the notify worker takes it
    operator("suspend", tenant=tenant.name)
    QueuePump("notify", env.queues["notifications"]).pump_once()
    # Then it is held, not lost, and goes back to its queue at the resume, stamped with its hand-back: its personal
    # link lives from then (adapters/notify/worker), however long the suspension
    assert [h.destination for h in held_work(tenant.name)] == ["queue:notifications"]
    resumed_at = clock.now().timestamp()
    assert operator("resume", tenant=tenant.name)["handedBack"] == 1
    (back,) = [json.loads(m["Body"]) for m in queued(env.queues["notifications"])]
    assert back["interruptId"] == interrupt_id
    assert resumed_at <= back["handedBackAt"] <= clock.now().timestamp()


def test_a_notice_its_suspended_tenant_cannot_hold_leaves_no_decision_link_in_the_dead_letters(
    delivering, receiver, monkeypatch
):
    # Given a suspended tenant's notice queued with a decision link, and a table that refuses every hold of it
    tenant = Tenant(f"{delivering.tenant}-l")
    run_id = tenant.start(callbackUrl=receiver.url())
    Stream(wiring_table()).settle()
    operator("suspend", tenant=tenant.name)

    def refused(*args: Any, **kwargs: Any) -> bool:
        throttled = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
        raise ClientError(throttled, "TransactWriteItems")

    monkeypatch.setattr(TenantRecords, "hold", refused)

    # When SQS hands the message out as many times as the queue allows
    handed = mapped_until_gone(delivering.queues["callbacks"], "callbacks")

    # Then it was never sent, and the dead letters name the notice (each copy of its message handed out as often as
    # the queue allows) but keep no decision link
    assert len(handed) >= wiring.queue("callbacks").max_receive_count
    assert receiver.hits == []
    kept = [m["Body"] for m in queued(delivering.queues["callbacks-dlq"]) if run_id in m["Body"]]
    assert kept
    token = json.loads(handed[0])["notice"]["token"]
    assert not [body for body in kept if token in body or "/interrupts/" in body]


# A world of its own: the deletion it completes reads the whole table (store/tenants.py), in the shared world every item
# each earlier test of the process wrote.
@pytest.mark.private_world
def test_operator_refusals_name_their_codes(env):
    tenant = Tenant(f"{env.tenant}-r")
    # A tenant made twice
    again = operator("create", tenant=tenant.name)
    assert again["error"] == "interlude.tenant_exists"
    # An active tenant is never deleted: it is suspended first
    assert operator("delete", tenant=tenant.name)["error"] == "interlude.tenant_not_suspended"
    # A tenant no one made
    assert operator("suspend", tenant=f"{env.tenant}-none")["error"] == "not_found"
    # A request the surface does not know, or one it cannot read
    assert operator("rename", tenant=tenant.name)["error"] == "validation_error"
    assert operator("suspend", tenant="no spaces")["error"] == "validation_error"
    # A tenant being deleted takes nothing else
    operator("suspend", tenant=tenant.name)
    deleting = lambda_runtime.invoke(wiring.OPERATOR_FUNCTION, {"operation": "delete", "tenant": tenant.name})
    assert deleting["done"] is True
    # (deleted now: its tombstone answers the report again, and nothing else)
    assert operator("delete", tenant=tenant.name)["report"] == deleting["report"]
    assert operator("resume", tenant=tenant.name)["error"] == "not_found"


def test_a_tenant_being_deleted_can_be_neither_resumed_nor_suspended(env, monkeypatch):
    tenant = Tenant(f"{env.tenant}-d")
    operator("suspend", tenant=tenant.name)
    monkeypatch.setenv("INTERLUDE_TENANT_DELETION_GRACE_SECONDS", "3600")
    lambda_runtime.fresh_instances()
    waiting = operator("delete", tenant=tenant.name)
    assert (waiting["done"], waiting["phase"]) == (False, "waiting")
    for operation in ("resume", "suspend"):
        refused = operator(operation, tenant=tenant.name)
        assert refused["error"] == "interlude.tenant_deleting", refused
    # and its requests are refused as a suspended tenant's
    assert call("GET", "/runs", tenant.key).code == "interlude.tenant_suspended"


def test_tenants_are_listed_with_their_usage_and_a_month_is_closed_once_over(env, clock_file):
    clear_of_a_month_end(clock_file)
    tenant = Tenant(f"{env.tenant}-u")
    stream = Stream(wiring_table())
    run_id = tenant.start()
    stream.settle()
    assert call("POST", f"/runs/{to_wire(run_id)}/interrupts/review", tenant.key, {"resumeValue": {"action": "accept"}}).status == 200
    stream.settle()
    listed = operator("list", after=f"{env.tenant}-t", limit=5)
    (row,) = [t for t in listed["tenants"] if t["tenant"] == tenant.name]
    month = clock.now().strftime("%Y-%m")
    usage = row["usage"]
    assert (row["status"], usage["month"], usage["lifecycles"], usage["decisions"]) == ("active", month, 1, 1)
    assert usage["storageBytes"] > 0
    assert usage["notifications"] == 0
    # The month's document, read while the month lasts, is open; read after it is over, it is closed, and stays so
    assert "closedAt" not in operator("usage", tenant=tenant.name)
    clock.advance(clock_file, 40 * 24 * 3600)
    closed = operator("usage", tenant=tenant.name, month=month)
    assert (closed["lifecycles"], closed["decisions"]) == (1, 1)
    assert closed["closedAt"]
    assert operator("usage", tenant=tenant.name, month=month) == closed
    assert operator("usage", tenant=tenant.name, month="2026-13")["error"] == "validation_error"


# -- deletion ---------------------------------------------------------------------------------------------------------


def naming(tenant: str, table: str | None = None) -> list[dict[str, Any]]:
    """Every item of the whole table (`table`, else the first) that names `tenant` anywhere (its keys, its attributes,
    its packed documents)."""
    from interlude.store import attributes

    found = []
    pages = boto3.client("dynamodb").get_paginator("scan").paginate(TableName=table or wiring_table(), ConsistentRead=True)
    for page in pages:
        for item in page["Items"]:
            try:
                shown = json.dumps(attributes.plain(item), default=str)
            except (ValueError, TypeError, zlib.error):
                shown = repr(item)
            if tenant in shown:
                found.append(item)
    return found


def secrets_naming(tenant: str) -> list[str]:
    pages = boto3.client("secretsmanager").get_paginator("list_secrets").paginate(IncludePlannedDeletion=True)
    return [entry["Name"] for page in pages for entry in page["SecretList"] if tenant in entry["Name"]]


def schedules_of(tenant: str) -> list[str]:
    got = boto3.client("scheduler").list_schedules(GroupName=wiring.LOCAL_SCHEDULE_GROUP, NamePrefix=tenant_prefix(tenant))
    return [s["Name"] for s in got["Schedules"]]


def steps(allowed: int):
    """A call's time, as `more_time()` sees it: `allowed` steps, then the call stops at its checkpoint."""
    left = [allowed]

    def more_time() -> bool:
        left[0] -= 1
        return left[0] >= 0

    return more_time


# A world of its own: the deletion sweeps the whole table, which the shared world fills with every other test's tenants
# (pages of 20 items across all of them made it hundreds of calls, near the loop's bound of 500).
@pytest.mark.private_world
def test_a_deleted_tenant_leaves_no_item_secret_or_schedule_and_its_deletion_goes_on_from_its_checkpoint(
    env, monkeypatch, live
):
    from interlude.app import tenant_lifecycle
    from interlude.domain.models.requests import CreateKeyRequest
    from interlude.domain.models.webhooks import RegisterWebhookRequest

    monkeypatch.setenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", "1")
    gone, kept = Tenant(f"{env.tenant}-gone"), Tenant(f"{env.tenant}-kept")
    stream = Stream(wiring_table())
    # Given a tenant with runs waiting (one at a timed gate: a schedule), one finished, a decision link, a webhook
    # subscription (a secret), a second key and a console session; and another tenant with a waiting run
    _timed, waiting, finished = gone.start("timed"), gone.start(), gone.start()
    theirs = kept.start("timed")
    stream.settle()
    assert call("GET", f"/runs/{to_wire(waiting)}/interrupts/review", gone.key).status == 200
    decided = call("POST", f"/runs/{to_wire(finished)}/interrupts/review", gone.key, {"resumeValue": {"action": "accept"}})
    assert decided.status == 200, decided.text
    stream.settle()
    hook = RegisterWebhookRequest.model_validate({"url": "http://127.0.0.1:9/hook", "events": ["run.completed"]})
    gone.services.webhooks.register(gone.principal, hook)
    gone.services.keys.issue_key(gone.name, CreateKeyRequest(subjectId="bob", scopes=["runs:read"]))
    console_session(gone.key)
    # and a live connection following a waiting run (its item keyed by the connection alone), and one of the other's
    following, _ = live.connect(gone.key)
    live.say(following, action="subscribe", runId=to_wire(waiting))
    their_connection, _ = live.connect(kept.key)
    # and, in the second table, a gate's inbox entry and a delivery record as the next release writes them (ADR 0161)
    entries_table = wiring_tables()[1]
    seeded = {(f"T#{gone.name}#INBOX#ANY#00", f"2026-01-01T00:00:00Z#{waiting}"), (run_pk(waiting), "N#ntc_1")}
    for pk, sk in seeded:
        boto3.client("dynamodb").put_item(TableName=entries_table, Item={"pk": {"S": pk}, "sk": {"S": sk}})
    assert seeded <= {(i["pk"]["S"], i["sk"]["S"]) for i in naming(gone.name, entries_table)}
    before = naming(gone.name)
    assert len(before) > 20
    assert {live_connection_pk(following), followers_pk(waiting)} <= {item["pk"]["S"] for item in before}
    assert secrets_naming(gone.name)
    # (the timed gate's deadline: listed in the due index, under a bucket schedule every tenant shares)
    assert any(item["pk"]["S"].startswith(DUE_PK_PREFIX) for item in before)
    # When the operator suspends and deletes it, each call of the deletion allowed only a few steps
    operator("suspend", tenant=gone.name)
    monkeypatch.setattr(tenant_lifecycle, "SCAN_PAGE_ITEMS", 20)
    admin = lambda_runtime.handler_module(wiring.OPERATOR_FUNCTION)
    answers = [admin.perform({"operation": "delete", "tenant": gone.name}, steps(1))]
    while not answers[-1]["done"]:
        assert len(answers) < 500, answers[-1]
        answers.append(admin.perform({"operation": "delete", "tenant": gone.name}, steps(1)))
    # Then it went on from its checkpoint, call after call, through each phase
    assert len(answers) > 6
    assert {a.get("phase") for a in answers[:-1]} >= {"schedules", "secrets", "items"}
    # and the report counts what was there
    report = answers[-1]["report"]
    assert (report["apiKeys"], report["secrets"], report["schedules"], report["liveConnections"]) == (2, 1, 0, 1)
    # and its live connection was closed through the management API (the other tenant's stays open and recorded)
    assert live.connection(following).closed
    assert not live.connection(their_connection).closed
    assert LiveStore(*wiring_tables()).live_connection(their_connection) is not None
    assert (report["usage"]["lifecycles"], report["usage"]["decisions"]) == (3, 1)
    assert report["items"] >= len(before) - 1  # everything but the registry's record, which stays as the tombstone
    # and nothing of the tenant is left: no item anywhere in the table but the tombstone, no secret, no schedule
    (tombstone,) = naming(gone.name)
    assert naming(gone.name, entries_table) == []
    assert (tombstone["pk"]["S"], tombstone["status"]["S"]) == ("TENANTS", "deleted")
    assert secrets_naming(gone.name) == []
    assert schedules_of(gone.name) == []
    # and its key is refused (unknown, or, while an instance still holds it in its key cache, its tenant's tombstone)
    assert call("GET", "/runs", gone.key).code in ("unauthenticated", "interlude.tenant_suspended")
    # and the other tenant has lost nothing
    assert kept.status(theirs) == "waiting-approval"
    assert any(item["pk"]["S"].startswith(DUE_PK_PREFIX) for item in naming(kept.name))
    # and the listing shows the deleted tenant as deleted, until its tombstone expires
    listed = operator("list", after=f"{env.tenant}-g", limit=2)
    assert [t["status"] for t in listed["tenants"] if t["tenant"] == gone.name] == ["deleted"]
