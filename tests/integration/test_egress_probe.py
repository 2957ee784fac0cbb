"""A hostile pass over every request Interlude sends on a tenant's behalf, as an attacker holding a tenant's API key,
its workflow definitions, callback URLs, webhook subscriptions, core.http nodes, notification settings (Slack, mail)
and the receiving servers.

Probed (moto, the real services and workers, receivers on 127.0.0.1; host names answered by an injected resolver,
never by the network):
* the addresses the guard must refuse, in the spellings an attacker would try, at every edge that takes a
  destination (createRun's callbackUrl, webhook registration, the Slack webhook URL, a workflow's core.http URL as
  written) and again at send time (a core.http node's rendered URL, a Slack webhook or a click's response_url, a
  name whose answers changed since the edge: rebinding, one private answer among public ones);
* header injection through every tenant-written value a request carries (a core.http node's header templates and
  secret values, the e-mail's subject from a gate's title), values no HTTP request can carry, and one header name
  spelled in two cases;
* what a receiver answers: slowly (a bundle of callback notices against the function's timeout, a TLS handshake a
  byte at a time, a flood of 100 Continue answers), a Retry-After no int() reads, JSON nested past any budget or
  holding NaN, infinities, huge numbers or lone surrogates.
"""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from email import message_from_bytes
from email.policy import default

import boto3
import pytest

from interlude.adapters.delivery.pinned_http import DeliveryFailed, post_pinned
from interlude.adapters.delivery.signing import SecretCache
from interlude.adapters.delivery.worker import Worker as CallbackWorker
from interlude.adapters.leased_work import RetryLater
from interlude.adapters.notify.messages import RAISED, queue_message
from interlude.adapters.notify.slack_interactivity import SlackApp
from interlude.config.delivery import delivery_settings
from interlude.config.notify import NotifySettings
from interlude.domain.errors import Invalid
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local.sqs_pump import to_event_record
from interlude.rules.egress import CheckedTarget
from interlude.store.deliveries import DeliveryStore
from interlude.store.facade import Store
from tests.integration.conftest import new_api_key, state_of
from tests.integration.test_actions import approved_run, failure_of, settle, workflow
from tests.integration.test_callbacks import start_gate_run
from tests.integration.test_notice_bundles import RESOLVE_NOTICES, resolved_run, seen
from tests.integration.test_notify_worker import delivered, open_gate, sent_mail, worker_for
from tests.integration.test_webhooks import register
from tests.support.egress import needs_lookup
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.queues import queued
from tests.support.receiver import Receiver, delivering_to_loopback

LOOPBACK = "127.0.0.1"

# The brief's list of what no tenant may reach, as a URL would name it.
UNREACHABLE = [
    "https://127.0.0.2/",
    "https://0x7f000001/",
    "https://2130706433/",
    "https://017700000001/",
    "https://[::1]/",
    "https://[::ffff:127.0.0.1]/",
    "https://[::ffff:7f00:1]/",
    "https://0.0.0.0/",
    "https://[::]/",
    "https://10.1.2.3/",
    "https://169.254.169.254/latest/meta-data/",
    "https://[fd00:ec2::254]/",
    "https://100.64.0.1/",
    "https://100.127.255.254/",
    "https://192.0.0.8/",
    "https://224.0.0.251/",
    "https://240.0.0.1/",
    "https://[fe80::1%25eth0]/",
    "https://[ff02::1]/",
    "https://good@127.0.0.1/",
    "https://hooks.example.com\\@127.0.0.1/",
    "https://%31%32%37.0.0.1/",
    "https://127.0.0.1./",
    "https://localhost./",
    "https://xn--localhost-.example/",
    "https://hooks.example.com:99999/",
    "http://hooks.example.com/",
    "https://rebind.example.com/",
    "https://several.example.com/",
]

DNS = {
    "hooks.example.com": ["93.184.215.14"],
    # What a rebinding name answers at a second look, and a name with one private answer among public ones.
    "rebind.example.com": ["93.184.215.14", "127.0.0.1"],
    "several.example.com": ["93.184.215.14", "2606:4700::1111", "10.0.0.5"],
}


def resolve(host: str, port: int) -> list[str]:
    if host not in DNS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return list(DNS[host])


@pytest.fixture
def deployed(monkeypatch) -> None:
    """The deployed stack's setting: no loopback allowance."""
    monkeypatch.delenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS", raising=False)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    started = Receiver(answer=b'{"ok":true}', answer_type="application/json").start()
    yield started
    started.close()


class Scripted:
    """A TCP listener on 127.0.0.1 that answers every connection with `opening`, then `drip` one byte every `every_s`
    seconds, whatever it was sent."""

    def __init__(self, opening: bytes, drip: bytes = b"", every_s: float = 0.1) -> None:
        self.listener = socket.create_server((LOOPBACK, 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(opening, drip, every_s), daemon=True)
        self._thread.start()

    def _serve(self, opening: bytes, drip: bytes, every_s: float) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                self._answer(conn, opening, drip, every_s)

    def _answer(self, conn: socket.socket, opening: bytes, drip: bytes, every_s: float) -> None:
        try:
            conn.sendall(opening)
            for byte in drip:
                if self._stop.wait(every_s):
                    return
                conn.sendall(bytes([byte]))
            # Read what the client sent before closing, so that the close is no reset that loses the answer.
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(2)
            while conn.recv(65536):
                pass
        except OSError:
            return

    def url(self, path: str) -> str:
        return f"http://{LOOPBACK}:{self.port}{path}"

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.listener.close()


# --- the edges ------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", UNREACHABLE)
def test_create_run_refuses_every_unreachable_callback(services, admin, deployed, url):
    services.callback_resolver = resolve

    with pytest.raises(Invalid) as refused:
        start_gate_run(services, admin, url)

    assert (refused.value.code, refused.value.details["field"]) == ("validation_error", "callbackUrl")
    assert "93.184" not in refused.value.message
    assert "10.0.0.5" not in refused.value.message


@pytest.mark.parametrize("url", UNREACHABLE)
def test_webhook_registration_refuses_every_unreachable_url(services, admin, deployed, url):
    services.callback_resolver = resolve

    with pytest.raises(Invalid) as refused:
        register(services, admin, url, ["interrupt.requested"])

    assert (refused.value.code, refused.value.details["field"]) == ("webhook_url_rejected", "url")


@pytest.mark.parametrize("url", [u for u in UNREACHABLE if not needs_lookup(u)])
def test_a_workflow_save_refuses_a_core_http_url_unreachable_as_written(services, admin, deployed, url):
    with pytest.raises(Invalid) as refused:
        services.workflows.put_workflow(admin, "refund", WorkflowDefinition.model_validate(workflow(url)))

    assert refused.value.code == "validation_error"
    assert [e["path"] for e in refused.value.details["errors"]] == ["nodes/1/config/url"]
    assert "93.184" not in json.dumps(refused.value.details)


@pytest.mark.parametrize("url", ["https://rebind.example.com/refunds", "{{inputs.orderId}}", "https://{{inputs.orderId}}/"])
def test_a_workflow_save_leaves_names_and_templates_to_the_call(services, admin, deployed, url):
    # No lookup at registration: the name may resolve otherwise when the call is made, and is judged then.
    services.workflows.put_workflow(admin, "refund", WorkflowDefinition.model_validate(workflow(url)))


def put_json(url: str, key: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}, method="PUT"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.parametrize("url", UNREACHABLE)
def test_the_slack_webhook_url_refuses_every_unreachable_destination(gateway, services, deployed, monkeypatch, url):
    monkeypatch.setattr("interlude.rules.egress.resolve_host", resolve)

    status, answer = put_json(f"{gateway}/tenant/notifications/slack", new_api_key(services), {"webhookUrl": url})

    assert (status, answer["error"], answer["details"]["field"]) == (400, "validation_error", "webhookUrl")


# --- send time: core.http -------------------------------------------------------------------------


@pytest.fixture
def actions(world, monkeypatch):
    for name, value in {
        "PUBLIC_BASE_URL": "https://interlude.example.com",
        "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1",
        "INTERLUDE_ACTION_BACKOFF_BASE_S": "0",
        "INTERLUDE_ACTION_CONNECT_TIMEOUT_S": "2",
    }.items():
        monkeypatch.setenv(name, value)
    return world.queues


@pytest.mark.parametrize(
    "value",
    ["o-1\r\nX-Injected: 1", "o-1\nX-Injected: 1", "o-1\rX-Injected: 1", "o-1\x00"],
    ids=["crlf", "lf", "cr", "nul"],
)
def test_a_header_template_cannot_inject_a_header(services, admin, actions, receiver, value):
    definition = workflow(receiver.url("/refunds"), headers={"X-Order": "{{inputs.orderId}}"}, maxAttempts=1)

    run_id = approved_run(services, admin, definition, order=value)
    settle(actions)

    assert receiver.hits == []
    assert failure_of(services, run_id)["code"] == "validation_error"


@pytest.mark.parametrize("value", ["caf\u00e9 \u2713", "o-1\x0bX", "o-1\x7f"], ids=["beyond-latin-1", "vt", "del"])
def test_a_header_no_request_can_carry_fails_the_node_as_invalid_without_a_call(services, admin, actions, receiver, value):
    definition = workflow(receiver.url("/refunds"), headers={"X-Order": "{{inputs.orderId}}"}, maxAttempts=3)

    run_id = approved_run(services, admin, definition, order=value)
    settle(actions)

    assert receiver.hits == []
    error = failure_of(services, run_id)
    assert error["code"] == "validation_error", error
    assert "X-Order" in error["message"]


@pytest.mark.parametrize("value", ["Bearer sk-\r\nX-Injected: 1", "Bearer sk-\u2713"], ids=["crlf", "beyond-latin-1"])
def test_a_secret_no_header_can_carry_is_unavailable_and_never_sent(services, admin, actions, receiver, tenant, value):
    boto3.client("secretsmanager").create_secret(Name=f"interlude/actions/{tenant}/payments", SecretString=value)
    definition = workflow(receiver.url(), secretHeaders={"Authorization": "payments"}, maxAttempts=3)

    run_id = approved_run(services, admin, definition)
    settle(actions)

    assert receiver.hits == []
    error = failure_of(services, run_id)
    assert error["code"] == "interlude.secret_unavailable", error
    assert value not in json.dumps(error)


def test_each_header_is_sent_once_whatever_the_case_a_definition_spells_it_in(
    services, admin, actions, receiver, tenant
):
    boto3.client("secretsmanager").create_secret(Name=f"interlude/actions/{tenant}/payments", SecretString="Bearer sk-1")
    headers = {"content-type": "text/plain", "user-agent": "mine/1", "authorization": "Bearer plain", "X-Order": "o-1"}
    definition = workflow(receiver.url(), headers=headers, secretHeaders={"Authorization": "payments"})

    approved_run(services, admin, definition)
    settle(actions)

    (hit,) = receiver.hits
    sent = [(name.lower(), value) for name, value in hit.header_lines]
    assert len(sent) == len(dict(sent)), sent
    # What Interlude sets wins, as a secret header wins over a plain one of its name.
    assert dict(sent)["content-type"] == "application/json"
    assert dict(sent)["user-agent"] == "interlude-actions/1"
    assert dict(sent)["authorization"] == "Bearer sk-1"
    assert dict(sent)["x-order"] == "o-1"


@pytest.mark.parametrize("url", ["https://rebind.example.com/refunds", "https://several.example.com/refunds"])
def test_an_action_to_a_name_with_a_private_answer_is_refused_at_send_time(
    services, admin, actions, deployed, monkeypatch, url
):
    # The URL is a template rendered from the run's inputs: the worker's guard is the only one it meets.
    looked_up: list[str] = []

    def recording(host: str, port: int) -> list[str]:
        looked_up.append(host)
        return resolve(host, port)

    monkeypatch.setattr("interlude.rules.egress.resolve_host", recording)
    run_id = approved_run(services, admin, workflow("{{inputs.orderId}}", maxAttempts=1), order=url)
    settle(actions)

    assert looked_up == [url.split("/")[2]]
    error = json.dumps(failure_of(services, run_id))
    assert '"interlude.egress_denied"' in error
    assert "10.0.0.5" not in error
    assert "127.0.0.1" not in error


# --- send time: callbacks ------------------------------------------------------------------------


@pytest.fixture
def callbacks(world, monkeypatch):
    for name, value in {"PUBLIC_BASE_URL": "https://interlude.example.com", **delivering_to_loopback(3)}.items():
        monkeypatch.setenv(name, value)
    return world


def callbacks_worker(time_left: list[float]) -> CallbackWorker:
    """The callbacks worker as one invocation runs it, its time left read from `time_left`, one value each look."""
    settings = delivery_settings()
    worker = CallbackWorker(
        deliveries=DeliveryStore(Store(TABLE, ENTRIES_TABLE)),
        sqs=boto3.client("sqs"),
        secrets=SecretCache(boto3.client("secretsmanager"), settings.secret_prefix),
        settings=settings,
    )
    looks = iter(time_left)
    worker.time_left_s = lambda: next(looks)
    return worker


def received_once(queue_url: str) -> dict:
    (message,) = queued(queue_url)
    return to_event_record(message, "arn:aws:sqs:us-east-1:123456789012:callbacks")


def test_a_bundles_next_notice_waits_for_an_invocation_with_time_to_dial_it(services, admin, callbacks, receiver):
    # A receiver answering each notice slowly (up to the total timeout) would otherwise hold the invocation for the
    # sum of a bundle's notices, past the function's timeout: nothing recorded, every notice sent again.
    run_id, _, _ = resolved_run(services, admin, callbacks, receiver, [])
    url = callbacks.queues["callbacks"]

    # An invocation with time for no dial (a second left; a dial is bound by 4 here) hands the message back untouched
    with pytest.raises(RetryLater):
        callbacks_worker([1.0]).handle(received_once(url))
    assert len(receiver.hits) == 1
    assert seen(services, admin, run_id) == []

    # One with time for one dial posts the first notice, records it, and leaves the second for the next receive
    with pytest.raises(RetryLater):
        callbacks_worker([60.0, 1.0]).handle(received_once(url))
    assert [json.loads(h.body)["type"] for h in receiver.hits[1:]] == ["interrupt.resolved"]
    assert seen(services, admin, run_id) == [("interrupt.resolved", 1, "succeeded")]

    assert callbacks_worker([60.0, 60.0]).handle(received_once(url)) == "delivered"
    assert [json.loads(h.body)["type"] for h in receiver.hits[1:]] == RESOLVE_NOTICES
    assert sorted(seen(services, admin, run_id)) == [("interrupt.resolved", 1, "succeeded"), ("run.completed", 1, "succeeded")]


# --- send time: Slack ----------------------------------------------------------------------------


def test_a_slack_webhook_whose_name_now_answers_a_private_address_is_never_posted_to(world, services, admin, tenant):
    # A URL admitted at the edge (its name public then), stored; at the post the name answers a private address too.
    run_id, node, interrupt = open_gate(services)
    services.directory.put_principal(tenant, "ann", PrincipalEntry(slackUserId="U0ANN1234"), "admin")
    boto3.client("secretsmanager").create_secret(
        Name=f"interlude/slack/{tenant}", SecretString=json.dumps({"webhookUrl": "https://several.example.com/hook"})
    )
    worker = worker_for(services, world.queues, allow_loopback=False)
    worker.resolve = resolve
    message = queue_message(tenant, run_id, node, interrupt, "ann", RAISED)

    with pytest.raises(RetryLater):
        worker.handle(delivered(world.queues, message))

    (record,) = services.notifications.run_notifications(admin, run_id)["notifications"]
    assert (record["channel"], record["outcome"], record["errorClass"]) == ("slack", "failed", "egress_denied")


@pytest.mark.parametrize("url", ["https://rebind.example.com/reply", "https://169.254.169.254/", "http://127.0.0.1:9/reply"])
def test_a_clicks_response_url_is_guarded(caplog, url):
    # A tenant holding its Slack app's signing secret can sign any click, its response_url included.
    app = SlackApp(secrets=None, settings=NotifySettings(allow_loopback=False), resolve=resolve)

    app.reply(url, {"text": "done"})

    assert [r.getMessage() for r in caplog.records] == ["slack reply refused by the egress guard"]


# --- what a receiver answers ----------------------------------------------------------------------


def test_a_retry_after_written_in_superscript_digits_is_read_as_none(services, admin, actions):
    # Latin-1's superscripts are digits to str.isdigit, and no number to int().
    answer = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: \xb2\r\nContent-Length: 0\r\n\r\n"
    server = Scripted(answer)
    try:
        run_id = approved_run(services, admin, workflow(server.url("/refunds"), maxAttempts=2))
        settle(actions)
    finally:
        server.close()

    error = failure_of(services, run_id)
    assert error["code"] == "interlude.http_failed"
    assert (error["details"]["status"], error["details"]["attempts"]) == (503, 2)


def answered(services, admin, actions, body: bytes) -> dict:
    """The output of a core.http node whose receiver answers 200 with `body` as application/json."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    server = Scripted(head + body)
    try:
        run_id = approved_run(services, admin, workflow(server.url("/refunds"), maxAttempts=1, responseBudgetBytes=32768))
        settle(actions)
    finally:
        server.close()
    state = state_of(services, run_id)
    assert state.nodes["refund"].status == "completed", state.nodes["refund"]
    return state.outputs["refund"]


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100 + b"]" * 100,
        b"[" * 10_000 + b"]" * 10_000,
        b'{"fee": NaN}',
        b'{"fee": -Infinity}',
        b'{"fee": 1e400}',
        b'{"fee": ' + b"9" * 5000 + b"}",
        b'{"name": "\\ud800"}',
        b'{"\\udc00": 1}',
    ],
    ids=["nested-100", "nested-10000", "nan", "infinity", "past-a-double", "5000-digits", "lone-surrogate", "in-a-key"],
)
def test_a_json_answer_no_output_can_hold_completes_the_node_as_text(services, admin, actions, body):
    output = answered(services, admin, actions, body)

    assert (output["status"], output["body"], output["truncated"]) == (200, body.decode(), False)


def test_a_json_answer_nested_within_the_outputs_budget_is_parsed(services, admin, actions):
    output = answered(services, admin, actions, b"[" * 40 + b"]" * 40)

    assert json.dumps(output["body"], separators=(",", ":")) == "[" * 40 + "]" * 40


def stalled(scheme: str, opening: bytes, drip: bytes) -> DeliveryFailed:
    """How a POST to a receiver that sends `opening`, then `drip` a byte every 0.1 s, fails within its 1 s bound."""
    server = Scripted(opening, drip)
    target = CheckedTarget(scheme, "hooks.example.com", server.port, "/hook", (LOOPBACK,))
    try:
        with pytest.raises(DeliveryFailed) as failed:
            post_pinned(target, b"{}", {}, connect_timeout=1, total_timeout=1, max_response_bytes=1024)
    finally:
        server.close()
    return failed.value


def test_a_tls_handshake_sent_a_byte_at_a_time_ends_at_the_total_timeout():
    # A TLS record header announcing a 16 KiB handshake record, then its bytes one at a time for 20 s (a client without
    # a deadline over the handshake would fail only then, on the closed connection: `tls`).
    failed = stalled("https", b"\x16\x03\x03\x40\x00", b"\x02" * 200)

    assert failed.error_class == "timeout"


def test_an_endless_run_of_100_continue_answers_ends_without_a_response():
    interim = b"HTTP/1.1 100 Continue\r\n\r\n"
    failed = stalled("http", interim * 5000, interim * 200)

    # Refused at the header cap (64 KiB) or, on Python 3.14, by http.client after a hundred interim answers.
    assert failed.error_class == "too_large" or "interim responses" in failed.message, failed


# --- send time: mail ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "title", ["Refund order 42\nfor ACME", "Refund\r\nBcc: thief@example.net", "Refund\u2028now", "Refund\x85now"]
)
def test_a_gate_title_with_a_line_break_is_mailed_on_one_subject_line(world, services, admin, tenant, title):
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "{{inputs.what}}", "approversList": ["ann"]}}]
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    state = services.lifecycle.create_run(
        admin, CreateRunRequest.model_validate({"workflowId": "ship", "inputs": {"what": title}})
    )
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    message = queue_message(tenant, state.runId, "review", state.interrupts["review"].interruptId, "ann", RAISED)

    assert worker_for(services, world.queues).handle(delivered(world.queues, message)) == "sent"

    (mail,) = sent_mail()
    assert set(mail.destinations) == {"ann@example.com"}
    parsed = message_from_bytes(mail.raw_data.encode(), policy=default)
    assert parsed["Bcc"] is None
    assert parsed["Subject"].endswith(" ".join(title.split()))
