"""Callback delivery over HTTP against the real local stack (a subprocess), with receivers on 127.0.0.1.

Two stacks of their own:
* `guarded` runs with the production egress setting (no loopback) and with outbound delivery switched off, so
  public controls can be accepted at createRun without any notice ever being dialled;
* `loopback` sets the development-only switch that admits loopback receivers, with 3 attempts and no backoff.
"""

from __future__ import annotations

import json

import pytest
import requests

from interlude.adapters.delivery.notices import queue_messages
from tests.support.egress import REFUSED, needs_lookup
from tests.support.local_stack import Api, cli, running_stack, stack_client, until, wire
from tests.support.receiver import Receiver, delivering_to_loopback, verify

WORKFLOW = {
    "nodes": [
        {"id": "draft", "typeId": "core.transform", "config": {"outputs": {"title": "{{inputs.title}}"}}},
        {
            "id": "review",
            "typeId": "core.approvalGate",
            "config": {"title": "Publish?", "actions": ["accept", "reject"]},
        },
    ],
    "edges": [{"sourceNodeId": "draft", "targetNodeId": "review"}],
}
# Everything the guard refuses without a DNS lookup (the host-name cases run in-process with a fixed resolver).
REFUSED_OVER_HTTP = [url for url, _ in REFUSED if not needs_lookup(url)]
PUBLIC_CONTROLS = [
    "https://8.8.8.8/hook",
    "https://93.184.215.14:8443/callbacks?run=1",
    "https://[2606:4700:4700::1111]/hook",
    "https://[64:ff9b::5db8:d822]/",
    "https://[2002:5db8:d822::1]/",
]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    env = {"INTERLUDE_LOCAL_CALLBACK_DELIVERY": "off", "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": ""}
    with running_stack(tmp_path_factory.mktemp("guarded"), env) as info:
        api = Api.of(info)
        assert api.put_workflow("cb", WORKFLOW).status_code == 201
        yield api


@pytest.fixture(scope="module")
def loopback(tmp_path_factory):
    env = delivering_to_loopback(3)
    with running_stack(tmp_path_factory.mktemp("loopback"), env) as info:
        api = Api.of(info)
        assert api.put_workflow("cb", WORKFLOW).status_code == 201
        yield api, info


# --- the guard at createRun -----------------------------------------------------------------------


def test_the_refusal_table_over_http_is_broad():
    assert len(REFUSED_OVER_HTTP) >= 60


@pytest.mark.parametrize("url", REFUSED_OVER_HTTP, ids=[u[:60] for u in REFUSED_OVER_HTTP])
def test_create_run_refuses_the_url(guarded, url):
    # When a run is created with a callbackUrl the egress guard refuses
    got = guarded.call("POST", "/runs", {"workflowId": "cb", "callbackUrl": url})
    # Then it is 400 validation_error naming the field, and no run exists
    assert got.status_code == 400, got.text
    body = got.json()
    assert body["error"] == "validation_error"
    assert body["details"]["field"] == "callbackUrl"


@pytest.mark.parametrize("url", PUBLIC_CONTROLS)
def test_create_run_accepts_public_destinations(guarded, url):
    got = guarded.call("POST", "/runs", {"workflowId": "cb", "callbackUrl": url})
    assert got.status_code == 201, got.text


def test_discovery_advertises_callback_delivery(guarded):
    got = requests.get(guarded.base_url + "/.well-known/openwop", timeout=10)
    assert got.json()["interrupt"]["callbackDelivery"] is True


# --- delivery -------------------------------------------------------------------------------------


def tenant_secret(info: dict[str, str], tenant: str, command: str = "show") -> str:
    out = cli(info, "webhooks", "secret", command, "--tenant", tenant, "--local")
    return json.loads(out.stdout)["secret"]


def deliveries(api: Api, run_id: str, count: int, timeout_s: float = 60.0) -> list[dict]:
    """The run's delivery attempts once there are `count` of them (or whatever is listed at the timeout)."""
    found: list[dict] = []

    def enough() -> bool:
        got = api.call("GET", f"/runs/{wire(run_id)}/deliveries")
        assert got.status_code == 200, got.text
        found[:] = got.json()["deliveries"]
        return len(found) >= count

    until(enough, timeout_s)
    return found


def test_a_receiver_verifies_every_notice_and_resolves_through_the_token_link(loopback, receiver):
    api, info = loopback
    # Given a run with a loopback callbackUrl (the development-only setting is on in this stack)
    run_id = api.start("cb", callbackUrl=receiver.url(), inputs={"title": "Hi"})["runId"]

    # When the gate is raised / Then the receiver gets a notice it verifies with the tenant's secret
    (hit,) = receiver.wait_for(1)
    secret = tenant_secret(info, api.tenant)
    notice = verify(secret, hit)
    assert (notice["type"], notice["runId"], notice["nodeId"], notice["kind"]) == (
        "interrupt.requested",
        run_id,
        "review",
        "approval",
    )
    assert notice["links"]["resolve"] == f"{api.base_url}/interrupts/{notice['token']}"

    # When the receiver resolves through the token link it was sent
    got = requests.post(notice["links"]["resolve"], json={"resumeValue": {"action": "accept"}}, timeout=10)
    assert got.status_code == 200, got.text

    # Then the decision and the end of the run arrive too, each verified
    hits = receiver.wait_for(3)
    assert sorted(verify(secret, h)["type"] for h in hits) == [
        "interrupt.requested",
        "interrupt.resolved",
        "run.completed",
    ]
    # And GET /runs/{runId}/deliveries lists one successful attempt per notice
    listed = deliveries(api, run_id, 3)
    assert sorted((d["type"], d["attempt"], d["status"], d["httpStatus"]) for d in listed) == [
        ("interrupt.requested", 1, "succeeded", 200),
        ("interrupt.resolved", 1, "succeeded", 200),
        ("run.completed", 1, "succeeded", 200),
    ]
    assert all(d["webhookId"] == d["noticeId"] for d in listed)

    # When SQS hands the first notice's message out again (a duplicate)
    sqs = stack_client(info, "sqs")
    queue_url = sqs.get_queue_url(QueueName="interlude-local-callbacks")["QueueUrl"]
    (message,) = queue_messages(api.tenant, receiver.url(), [notice])  # as this release queues it (its record's table)
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(message))
    wait_until_empty(sqs, queue_url)

    # Then no second successful delivery happens
    assert len(receiver.hits) == 3
    assert len(deliveries(api, run_id, 3)) == 3


def wait_until_empty(sqs, queue_url: str, timeout_s: float = 60.0) -> None:
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]

    def drained() -> bool:
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)["Attributes"]
        return all(attrs[n] == "0" for n in names)

    if not until(drained, timeout_s):
        raise AssertionError("the callback queue did not drain")


def test_failures_are_retried_then_dead_lettered_and_listed(loopback, receiver):
    api, info = loopback
    # Given a receiver that answers 500, then times out, then answers 500 again
    receiver.script[:] = [500, ("sleep", 8), 500]
    run_id = api.start("cb", callbackUrl=receiver.url())["runId"]

    # When the three attempts the stack allows have run
    listed = deliveries(api, run_id, 3)

    # Then each was a signed POST under the same webhook-id, and each is listed with its failure
    assert len(receiver.hits) == 3
    assert len({h.headers["webhook-id"] for h in receiver.hits}) == 1
    secret = tenant_secret(info, api.tenant)
    for hit in receiver.hits:
        verify(secret, hit)
    listed.sort(key=lambda d: d["attempt"])
    assert [(d["attempt"], d["status"], d.get("httpStatus"), d["errorClass"]) for d in listed] == [
        (1, "failed", 500, "http_status"),
        (2, "failed", None, "timeout"),
        (3, "failed", 500, "http_status"),
    ]
    assert listed[-1]["final"] is True
    # And the dead-letter queue holds the notice's history, without its token or the signing secret
    sqs = stack_client(info, "sqs")
    dlq = sqs.get_queue_url(QueueName="interlude-local-callbacks-dlq")["QueueUrl"]
    bodies = until(
        lambda: [m["Body"] for m in sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])], 10
    )
    (raw,) = [b for b in bodies if json.loads(b)["runId"] == run_id]
    dead = json.loads(raw)
    assert len(dead["deliveryHistory"]) == 3
    token = json.loads(receiver.hits[0].body)["token"]
    assert token not in raw
    assert secret not in raw


def test_deliveries_are_read_with_runs_read_within_the_tenant(guarded):
    run_id = guarded.start("cb")["runId"]
    assert guarded.call("GET", f"/runs/{wire(run_id)}/deliveries").json() == {
        "runId": run_id,
        "callbackUrl": None,
        "deliveries": [],
    }
    foreign = guarded.call("GET", "/runs/other~2F" + "x" * 24 + "/deliveries")
    assert (foreign.status_code, foreign.json()["error"]) == (403, "id_tenant_mismatch")
    no_scope = guarded.new_key(["runs:create"])
    refused = guarded.call("GET", f"/runs/{wire(run_id)}/deliveries", key=no_scope)
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")


# --- whose link a notice carries (issue 26, S3) ---------------------------------------------------------


def notice_link(api: Api, receiver: Receiver, key: str, workflow_id: str = "cb") -> tuple[str, dict]:
    """A run started by `key` with the receiver as its callbackUrl, and its gate's notice."""
    run_id = api.start(workflow_id, key=key, callbackUrl=receiver.url(), inputs={"title": "Hi"})["runId"]

    def arrived() -> dict | None:
        notices = [json.loads(h.body) for h in receiver.hits]
        return next((n for n in notices if n["runId"] == run_id and n["type"] == "interrupt.requested"), None)

    notice = until(arrived, 20)
    assert notice is not None, "no notice arrived"
    return run_id, notice


@pytest.mark.parametrize(
    ("scopes", "approvers", "decides"),
    [
        (["runs:create", "runs:read"], None, False),
        (["runs:create", "runs:read", "approvals:respond"], ["somebody-else"], False),
        (["runs:create", "runs:read", "approvals:respond"], None, True),
    ],
    ids=["lacks-approvals-respond", "not-an-approver", "may-decide"],
)
def test_a_notice_link_decides_exactly_what_the_creating_key_could_through_the_api(
    loopback, receiver, scopes, approvers, decides
):
    api, _ = loopback
    workflow_id = "cb"
    if approvers:
        workflow_id = "cb-approvers"
        gated = json.loads(json.dumps(WORKFLOW))
        gated["nodes"][1]["config"]["approversList"] = approvers
        assert api.put_workflow(workflow_id, gated).status_code in (200, 201)
    subject = f"creator-{len(scopes)}-{bool(approvers)}"
    key = api.new_key(scopes, subject=subject)

    # The same key, through the API, on a run of its own.
    by_api = api.start(workflow_id, key=key, inputs={"title": "Hi"})["runId"]
    assert api.wait_status(by_api, {"waiting-approval"})["status"] == "waiting-approval"
    api_status = api.resolve(by_api, "review", {"action": "accept"}, key=key).status_code

    run_id, notice = notice_link(api, receiver, key, workflow_id)
    url = notice["links"]["page"]
    # The link always shows the gate.
    assert requests.get(url, timeout=10).json()["kind"] == "approval"

    got = requests.post(url, json={"resumeValue": {"action": "accept"}}, timeout=10)

    assert (got.status_code, api_status) == ((200, 200) if decides else (403, 403)), got.text
    # The notice says which: a resolve link only for a key that may decide through the API at all.
    assert notice["intent"] == ("resolve" if "approvals:respond" in scopes else "inspect")
    assert ("resolve" in notice["links"]) is ("approvals:respond" in scopes)
    if not decides:
        assert got.json()["error"] == "forbidden"
        assert api.run(run_id)["status"] == "waiting-approval"
        return
    (resolved,) = [e for e in api.events(run_id) if e["type"] == "interrupt.resolved"]
    assert resolved["payload"]["resolvedBy"]["subjectId"] == subject

    def decisions() -> list[dict]:
        audit = api.call("GET", "/audit?limit=50").json()["entries"]
        return [e for e in audit if e["action"] == "interrupt.decided" and e["target"]["runId"] == run_id]

    # The decision's entry is chained once its record reaches dispatch (docs/adr/0128).
    (decided,) = until(decisions, timeout_s=20)
    assert decided["actor"] == {"subjectId": subject, "surface": "token"}


def test_a_notice_link_stops_deciding_once_the_creating_key_is_revoked(loopback, receiver):
    api, _ = loopback
    key = api.new_key(["runs:create", "runs:read", "approvals:respond"])
    run_id, notice = notice_link(api, receiver, key)
    assert api.call("DELETE", f"/keys/{key.split('_')[1]}").status_code == 200

    got = requests.post(notice["links"]["resolve"], json={"resumeValue": {"action": "accept"}}, timeout=10)

    assert (got.status_code, got.json()["error"]) == (401, "interrupt_token_invalid")
    assert api.run(run_id)["status"] == "waiting-approval"


def test_an_inspect_only_link_shows_the_page_without_a_form(loopback, receiver):
    api, _ = loopback
    _, notice = notice_link(api, receiver, api.new_key(["runs:create", "runs:read"]))
    page = requests.get(notice["links"]["page"], headers={"Accept": "text/html"}, timeout=10)
    assert page.status_code == 200
    assert "Publish?" in page.text
    assert 'name="csrf"' not in page.text
    assert "<form" not in page.text
