"""Callback notices end to end in-process: moto (DynamoDB, streams, SQS, Secrets Manager), the real dispatch and
callbacks handlers, and a receiver on 127.0.0.1 that verifies signatures with the `standardwebhooks` package."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import urlsplit

import boto3
import pytest
from botocore.exceptions import ClientError

from interlude import config, wiring
from interlude.adapters.delivery.notices import notice_id
from interlude.adapters.delivery.signing import SecretCache, ensure_secret, read_secret, rotate_secret, secret_name
from interlude.adapters.delivery.worker import Worker
from interlude.composition import Services
from interlude.config.delivery import WAITS_WITHIN_S, DeliverySettings, worst_case_wait_s
from interlude.domain.errors import Invalid
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import to_event_record
from interlude.store.deliveries import RECEIVES_EXHAUSTED, DeliveryStore
from interlude.store.facade import Store
from tests.integration.conftest import new_api_key, tenant_of_test
from tests.integration.test_tenant_lifecycle import call
from tests.support.egress import FAKE_DNS, REFUSED, fake_resolve, needs_lookup
from tests.support.local_stack import FIXTURES, wire
from tests.support.logs import function_log
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.queues import drain, mapped, mapped_until_gone, queued
from tests.support.receiver import Receiver, delivering_to_loopback, verify
from tests.support.stream import Stream, dispatch

BASE = "https://interlude.example.com"
MAX_ATTEMPTS = 3


@pytest.fixture
def aws(world, monkeypatch):
    env = {
        "PUBLIC_BASE_URL": BASE,
        **delivering_to_loopback(MAX_ATTEMPTS),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return world.queues


@pytest.fixture
def services(aws) -> Services:
    return Services(Store(TABLE, ENTRIES_TABLE))



def start_gate_run(services, admin, callback_url: str) -> str:
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"], "callbackUrl": callback_url})).runId


def tenant_secret() -> str:
    return read_secret(boto3.client("secretsmanager"), secret_name("interlude/webhooks/", tenant_of_test()))["current"]


# --- delivery -------------------------------------------------------------------------------------


def test_notices_for_raise_decide_and_end_arrive_signed_with_token_and_links(services, admin, aws, receiver):
    # Given a run with a callbackUrl that pauses at its gate
    run_id = start_gate_run(services, admin, receiver.url())
    stream = Stream(TABLE)

    # When the outbox and the delivery worker run
    stream.pump()
    drain(aws)

    # Then the receiver got one notice for the raised interrupt, verifiable with the tenant's secret
    (hit,) = receiver.hits
    notice = verify(tenant_secret(), hit)
    assert notice["type"] == "interrupt.requested"
    assert notice["runId"] == run_id
    assert notice["nodeId"] == "gate"
    assert notice["kind"] == "approval"
    assert notice["key"] == f"{run_id}:gate:1"
    assert notice["payload"]["kind"] == "approval"
    assert notice["token"].startswith("ow2.hs256.")
    assert notice["expiresAt"].endswith("Z")
    resolve_url = f"{BASE}/interrupts/{notice['token']}"
    assert notice["links"] == {
        "run": f"{BASE}/runs/{wire(run_id)}",
        "inspect": resolve_url,
        "resolve": resolve_url,
        "page": resolve_url,
    }
    assert hit.headers["webhook-id"] == notice["id"] == notice_id(run_id, notice["sequence"])
    assert hit.headers["webhook-signature"].startswith("v1,")

    # When the gate is decided and the run ends
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    stream.pump()
    drain(aws)

    # Then a notice for the decision and one for the end of the run follow, each signed
    later = [verify(tenant_secret(), h) for h in receiver.hits[1:]]
    assert [(n["type"], n.get("nodeId")) for n in later] == [("interrupt.resolved", "gate"), ("run.completed", None)]
    assert later[0]["key"] == f"{run_id}:gate:1"
    assert later[0]["payload"]["action"] == "accept"
    assert later[1]["runStatus"] == "completed"
    assert "token" not in later[0]
    assert "token" not in later[1]
    # And every attempt is recorded as a success
    attempts = DeliveryStore(services.store).attempts(run_id)
    assert sorted(a["type"] for a in attempts) == ["interrupt.requested", "interrupt.resolved", "run.completed"]
    assert {(a["status"], a["attempt"], a["httpStatus"]) for a in attempts} == {("succeeded", 1, 200)}


def test_retries_after_500_and_timeout_then_dead_letters_without_secrets(services, admin, aws, receiver):
    # Given a receiver that fails every attempt: 500, a timeout, 500
    receiver.script[:] = [500, ("sleep", 8), 503]
    run_id = start_gate_run(services, admin, receiver.url("/hook?tenant-secret=s3cr3t"))

    # When the notice is queued and the queue is played until it is empty
    Stream(TABLE).pump()
    drain(aws)

    # Then it was attempted exactly MAX_ATTEMPTS times, under one webhook-id, each signed
    assert len(receiver.hits) == MAX_ATTEMPTS
    assert len({h.headers["webhook-id"] for h in receiver.hits}) == 1
    for hit in receiver.hits:
        verify(tenant_secret(), hit)
    attempts = sorted(DeliveryStore(services.store).attempts(run_id), key=lambda a: a["attempt"])
    assert [(a["attempt"], a["status"], a.get("httpStatus"), a["errorClass"]) for a in attempts] == [
        (1, "failed", 500, "http_status"),
        (2, "failed", None, "timeout"),
        (3, "failed", 503, "http_status"),
    ]
    assert attempts[-1]["final"] is True
    # And the notice is on the dead-letter queue with its history, and without body, token, URL path or secret
    (dead,) = queued(aws["callbacks-dlq"])
    raw = dead["Body"]
    record = json.loads(raw)
    assert record["noticeId"] == receiver.hits[0].headers["webhook-id"]
    assert record["runId"] == run_id
    assert record["type"] == "interrupt.requested"
    assert record["callbackOrigin"] == f"http://127.0.0.1:{receiver.port}"
    assert [a["errorClass"] for a in record["deliveryHistory"]] == ["http_status", "timeout", "http_status"]
    sent = json.loads(receiver.hits[0].body)
    for secret in (sent["token"], tenant_secret(), "s3cr3t", "whsec_", '"payload"', "/hook"):
        assert secret not in raw
    # And nothing is left on the callback queue
    assert queued(aws["callbacks"]) == []


def test_a_redelivered_message_yields_one_successful_delivery(services, admin, aws, receiver):
    # Given a notice queued once, and the same stream record delivered again (a second copy of the message)
    run_id = start_gate_run(services, admin, receiver.url())
    stream = Stream(TABLE)
    stream.pump()
    stream.pump(again=True)
    # And SQS itself duplicating the message
    sqs = boto3.client("sqs")
    (first, second) = queued(aws["callbacks"])
    for message in (first, second):
        sqs.change_message_visibility(
            QueueUrl=aws["callbacks"], ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    sqs.send_message(QueueUrl=aws["callbacks"], MessageBody=first["Body"])
    assert first["Body"] == second["Body"]

    # When every copy is processed
    drain(aws)

    # Then the receiver saw one POST and one success is recorded
    assert len(receiver.hits) == 1
    attempts = DeliveryStore(services.store).attempts(run_id)
    assert [(a["attempt"], a["status"]) for a in attempts] == [(1, "succeeded")]


def test_during_rotation_both_secrets_sign_and_each_verifies(services, admin, aws, receiver, tenant):
    # Given the tenant's secret, rotated with a grace period
    client = boto3.client("secretsmanager")
    name = secret_name("interlude/webhooks/", tenant)
    old = ensure_secret(client, name)["current"]
    new = rotate_secret(client, name, grace_s=3600)["current"]
    assert old != new
    assert new.startswith("whsec_")

    # When a notice is delivered
    start_gate_run(services, admin, receiver.url())
    Stream(TABLE).pump()
    drain(aws)

    # Then it carries two v1 signatures, and each verifies with its own secret alone
    (hit,) = receiver.hits
    assert len(hit.headers["webhook-signature"].split(" ")) == 2
    verify(old, hit)
    verify(new, hit)


# --- egress at delivery ---------------------------------------------------------------------------


def worker_for(resolve, allow_loopback: bool) -> Worker:
    settings = DeliverySettings.from_env()
    settings = DeliverySettings(**{**settings.__dict__, "allow_loopback": allow_loopback})
    return Worker(
        deliveries=DeliveryStore(Store(TABLE, ENTRIES_TABLE)),
        sqs=boto3.client("sqs"),
        secrets=SecretCache(boto3.client("secretsmanager"), settings.secret_prefix),
        settings=settings,
        resolve=resolve,
    )


def test_dns_rebinding_between_create_and_delivery_reaches_no_loopback_listener(
    services, admin, aws, receiver, monkeypatch
):
    # Given a name that answers a public address at createRun, then loopback (a rebinding attacker's DNS)
    monkeypatch.delenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS")
    answers = iter([["93.184.215.14"], ["127.0.0.1"], ["127.0.0.1"]])
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return next(answers)

    services.callback_resolver = rebinding
    run_id = start_gate_run(services, admin, f"https://rebind.example.com:{receiver.port}/hook")
    assert calls == ["rebind.example.com"]
    Stream(TABLE).pump()
    (message,) = queued(aws["callbacks"])

    # When the worker delivers it, resolving the name again
    worker = worker_for(rebinding, allow_loopback=False)
    with pytest.raises(Exception, match="egress_denied"):
        worker.handle(to_event_record(message, "arn:aws:sqs:us-east-1:123456789012:callbacks"))

    # Then it resolved once more, refused the loopback answer, and no connection reached the listener
    assert calls == ["rebind.example.com", "rebind.example.com"]
    assert receiver.hits == []
    (attempt,) = DeliveryStore(services.store).attempts(run_id)
    assert (attempt["status"], attempt["errorClass"]) == ("failed", "egress_denied")
    assert "httpStatus" not in attempt


def test_a_redirect_is_a_failure_and_its_target_is_never_called(services, admin, aws, receiver):
    # Given a receiver that redirects to another listener
    elsewhere = Receiver().start()
    try:
        receiver.script[:] = [("redirect", elsewhere.url("/stolen"))]
        run_id = start_gate_run(services, admin, receiver.url())
        Stream(TABLE).pump()
        (message,) = queued(aws["callbacks"])

        # When the worker delivers
        with pytest.raises(Exception, match="redirect"):
            worker_for(None, allow_loopback=True).handle(to_event_record(message, "arn:aws:sqs:::callbacks"))

        # Then the 302 is a failed attempt and the Location was never followed
        assert len(receiver.hits) == 1
        assert elsewhere.hits == []
        (attempt,) = DeliveryStore(services.store).attempts(run_id)
        assert (attempt["httpStatus"], attempt["errorClass"]) == (302, "redirect")
    finally:
        elsewhere.close()


# --- createRun guard with host names (a fixed resolver; no real DNS) -------------------------------


RESOLVED_NAMES = [(url, reason) for url, reason in REFUSED if needs_lookup(url)]


def test_the_host_name_cases_are_the_ones_e2e_cannot_cover():
    assert {u for u, _ in RESOLVED_NAMES} == {
        u
        for u, r in REFUSED
        if r in ("address_not_global", "unresolvable")
        and urlsplit(u).hostname in set(FAKE_DNS) | {"nxdomain.example.com"}
    }


# A world of its own: it counts every item of the table. One world for every URL (each a world of its own cost a
# table, queues, secrets and a key to make): each refusal must leave the table as the one before it found it.
@pytest.mark.private_world
def test_create_run_refuses_every_url_the_guard_refuses(services, admin, monkeypatch):
    # Given the production setting (no loopback) and a resolver answering from a fixed table
    monkeypatch.delenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS")
    services.callback_resolver = fake_resolve
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))

    for url, _reason in RESOLVED_NAMES:
        # When a run is created with that callbackUrl / Then it is a 400 validation_error on field callbackUrl
        with pytest.raises(Invalid) as refused:
            services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"], "callbackUrl": url}))
        assert refused.value.code == "validation_error", url
        assert refused.value.details["field"] == "callbackUrl", url
        # The key, the workflow, its latest-version pointer, its catalogue entry and the tenant's usage counter (and
        # the key's audit entry with its chain's head and pending marker): no run item (neither a run head nor a run
        # listing entry).
        items = services.store.client.scan(TableName=TABLE)["Items"]
        assert len([i for i in items if not re.search(r"#AUDIT(HEAD)?#[0-9]{3}$", i["pk"]["S"])]) == 5, url


def test_create_run_accepts_names_resolving_only_to_public_addresses(services, admin, monkeypatch):
    monkeypatch.delenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS")
    services.callback_resolver = fake_resolve
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    for url in ("https://hooks.example.com/approve", "https://dual.example.com/", "https://nat64.example.com/"):
        state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": definition["id"], "callbackUrl": url}))
        assert state.callbackUrl == url


def test_a_tenant_secret_is_created_under_the_deployments_key_with_its_tags(
    services, admin, aws, receiver, monkeypatch, tenant
):
    # Given a deployment with a customer-managed key and tags (what the construct puts in the environment)
    key_arn = boto3.client("kms").create_key(Description="the customer's key")["KeyMetadata"]["Arn"]
    tags = {"interlude:deployment": "approvals-prod", "cost-center": "platform-42"}
    monkeypatch.setenv(wiring.CREATED_SECRETS_KMS_KEY_ENV, key_arn)
    monkeypatch.setenv(wiring.CREATED_SECRETS_TAGS_ENV, json.dumps(tags))

    # When the first notice for the tenant is delivered by the real callbacks handler (which creates its secret)
    start_gate_run(services, admin, receiver.url())
    Stream(TABLE).pump()
    drain(aws)

    # Then the secret is encrypted under that key and carries those tags (a teardown finds it by them)
    (hit,) = receiver.hits
    verify(tenant_secret(), hit)
    described = boto3.client("secretsmanager").describe_secret(SecretId=secret_name("interlude/webhooks/", tenant))
    assert described["KmsKeyId"] == key_arn
    assert {t["Key"]: t["Value"] for t in described["Tags"]} == tags
    found = boto3.client("secretsmanager").list_secrets(
        Filters=[{"Key": "tag-key", "Values": ["interlude:deployment"]}, {"Key": "tag-value", "Values": ["approvals-prod"]}]
    )["SecretList"]
    assert [f["Name"] for f in found] == [described["Name"]]


# --- logs -----------------------------------------------------------------------------------------


def test_callbacks_log_lines_carry_the_notice_id_as_correlation_id_and_the_run_id(services, admin, aws, receiver):
    # Given a queued notice that SQS delivers twice
    run_id = start_gate_run(services, admin, receiver.url())
    Stream(TABLE).pump()
    (message,) = queued(aws["callbacks"])
    sqs = boto3.client("sqs")
    sqs.change_message_visibility(QueueUrl=aws["callbacks"], ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    sqs.send_message(QueueUrl=aws["callbacks"], MessageBody=message["Body"])
    notice = json.loads(message["Body"])["notice"]

    # When both copies are processed (the second is dropped as a duplicate, which the worker logs)
    with function_log("callbacks") as lines:
        drain(aws)

    # Then the worker's line names the notice and its run, as the correlation id and as keys
    (duplicate,) = [line for line in lines if line["message"].startswith("notice already settled")]
    assert duplicate["correlation_id"] == notice["id"] == duplicate["noticeId"]
    assert duplicate["runId"] == run_id


def test_a_failed_dispatch_record_is_logged_with_its_run_id_as_correlation_id(services, admin, aws, receiver, monkeypatch):
    # Given a run whose callback notices cannot be queued (the queue's URL is missing from the environment)
    run_id = start_gate_run(services, admin, receiver.url())
    monkeypatch.delenv(wiring.queue("callbacks").url_env)
    config.forget()  # a function reads its environment when it starts: a new instance

    # When dispatch handles its record
    with function_log("dispatch") as lines:
        result = dispatch(Stream(TABLE).take())

    # Then the record is reported for retry and its failure is logged at ERROR (it pages) under the run's id
    assert len(result["batchItemFailures"]) == 1
    (failure,) = [line for line in lines if line["level"] == "ERROR"]
    assert failure["correlation_id"] == run_id == failure["runId"]
    assert "CALLBACK_QUEUE_URL is not set" in failure["exception"]


# --- a delivery dead-lettered on its message's last receive ----------------------------------------------------------


def listed_deliveries(services, run_id: str) -> list[dict]:
    """GET /runs/{runId}/deliveries through the real api handler, as the run's tenant reads it."""
    got = call("GET", f"/runs/{wire(run_id)}/deliveries", new_api_key(services, "reader", scopes=["runs:read"]))
    assert got.status == 200, got.text
    deliveries: list[dict] = got.json()["deliveries"]
    return deliveries


def test_a_notice_dead_lettered_on_its_last_receive_is_listed_dead_with_its_attempts_and_is_replayed(
    services, admin, aws, receiver, monkeypatch
):
    # Given a run whose gate's notice failed twice at its receiver
    receiver.script[:] = [500, 503]
    run_id = start_gate_run(services, admin, receiver.url())
    Stream(TABLE).pump()
    mapped(aws["callbacks"], "callbacks", 2)
    assert len(receiver.hits) == 2
    # And invocations that never again have time left for its dial (each receive answers "not now", no attempt made)
    with monkeypatch.context() as hurried:
        hurried.setattr(lambda_runtime.LambdaContext, "get_remaining_time_in_millis", lambda self: 1_000)

        # When SQS hands its message out as many times as the queue allows
        mapped_until_gone(aws["callbacks"], "callbacks")

    # Then the run's deliveries list its two attempts and, after them, that it was dead-lettered without another
    listed = listed_deliveries(services, run_id)
    seen = [(d.get("attempt"), d["status"], d.get("httpStatus"), d["errorClass"], d.get("final", False)) for d in listed]
    assert seen == [
        (1, "failed", 500, "http_status", False),
        (2, "failed", 503, "http_status", False),
        (None, "failed", None, "receives_exhausted", True),
    ]
    # And the dead letters name it with its two attempts, and no decision link
    (dead,) = queued(aws["callbacks-dlq"])
    record = json.loads(dead["Body"])
    assert (record["noticeId"], record["attempts"]) == (listed[0]["noticeId"], 2)
    assert "/interrupts/" not in dead["Body"]

    # When its tenant sends it again (the receiver is back), through the replay route
    replayed = call("POST", f"/runs/{wire(run_id)}/deliveries/{listed[0]['noticeId']}/retry", new_api_key(services))
    assert replayed.status == 200, replayed.text
    assert (replayed.json()["status"], replayed.json()["attempt"]) == ("queued", 3)
    drain(aws)

    # Then it is delivered, with a decision link that works, and listed as delivered by its third attempt
    notice = verify(tenant_secret(), receiver.hits[-1])
    assert receiver.hits[-1].headers["webhook-id"] == listed[0]["noticeId"]
    decided = call("POST", f"/interrupts/{notice['token']}", body={"resumeValue": {"action": "accept"}})
    assert decided.status == 200, decided.text
    last = listed_deliveries(services, run_id)[-1]
    assert (last["attempt"], last["status"], last.get("final", False)) == (3, "succeeded", False)


def test_a_transitions_notices_dead_lettered_on_their_last_receive_are_each_listed_dead_and_replayed_together(
    services, admin, aws, receiver, monkeypatch
):
    # Given a run whose raise was delivered, then decided as it ends: the decision's and the end's notices delivered
    # together, the first failing once at its receiver
    run_id = start_gate_run(services, admin, receiver.url())
    stream = Stream(TABLE)
    stream.pump()
    drain(aws)
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    receiver.script[:] = [500]
    stream.pump()
    mapped(aws["callbacks"], "callbacks", 1)
    # And invocations that never again have time left for a dial
    with monkeypatch.context() as hurried:
        hurried.setattr(lambda_runtime.LambdaContext, "get_remaining_time_in_millis", lambda self: 1_000)

        # When SQS hands its message out as many times as the queue allows
        mapped_until_gone(aws["callbacks"], "callbacks")

    # Then each notice is listed dead after its attempts: the decision's after its one, the end's after none
    listed = listed_deliveries(services, run_id)
    ended = {d["type"]: d for d in listed if d.get("final")}
    assert set(ended) == {"interrupt.resolved", "run.completed"}
    assert all("attempt" not in d and d["errorClass"] == "receives_exhausted" for d in ended.values())
    tried = [(d["type"], d.get("attempt"), d["status"]) for d in listed if not d.get("final")]
    assert tried == [("interrupt.requested", 1, "succeeded"), ("interrupt.resolved", 1, "failed")]
    # And each has its own dead letter, with the attempts it made
    dead = {json.loads(m["Body"])["type"]: json.loads(m["Body"])["attempts"] for m in queued(aws["callbacks-dlq"])}
    assert dead == {"interrupt.resolved": 1, "run.completed": 0}

    # When the end's notice is sent again by its id
    end = ended["run.completed"]["noticeId"]
    replayed = call("POST", f"/runs/{wire(run_id)}/deliveries/{end}/retry", new_api_key(services))
    assert replayed.status == 200, replayed.text
    drain(aws)

    # Then both are delivered, in order, and listed so
    assert [verify(tenant_secret(), h)["type"] for h in receiver.hits[-2:]] == ["interrupt.resolved", "run.completed"]
    last = {d["type"]: d for d in listed_deliveries(services, run_id)}
    assert [(last[t]["status"], last[t]["attempt"]) for t in ("interrupt.resolved", "run.completed")] == [
        ("succeeded", 2),
        ("succeeded", 1),
    ]


def test_a_notice_whose_record_cannot_be_written_on_its_last_receive_is_kept_as_queued_without_its_link(
    services, admin, aws, receiver, monkeypatch
):
    # Given a gate's notice whose invocations never have time for its dial, and a table refusing its record's write
    start_gate_run(services, admin, receiver.url())
    Stream(TABLE).pump()

    def refused(*args, **kwargs):
        raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}}, "UpdateItem")

    monkeypatch.setattr(DeliveryStore, "dead_unattempted", refused)
    with monkeypatch.context() as hurried:
        hurried.setattr(lambda_runtime.LambdaContext, "get_remaining_time_in_millis", lambda self: 1_000)

        # When SQS hands its message out as many times as the queue allows
        handed = mapped_until_gone(aws["callbacks"], "callbacks")

    # Then the dead letters keep the message as queued, to be sent back once the table takes writes again, without
    # its decision link (beside the notice's content-free dead letter, sent before its record was to be written)
    kept = [json.loads(m["Body"]) for m in queued(aws["callbacks-dlq"])]
    (as_queued,) = [m for m in kept if "notice" in m]
    assert as_queued["notice"]["id"] == json.loads(handed[0])["notice"]["id"]
    assert not {"token", "intent", "expiresAt"} & set(as_queued["notice"])
    assert all("/interrupts/" not in json.dumps(m) for m in kept)
    assert receiver.hits == []


# --- a transition's notices, each with the attempts a notice alone has ----------------------------------------------

THREE_GATES = {
    "id": "three-gates",
    "name": "three gates",
    "nodes": [
        {"id": gate, "typeId": "core.approvalGate", "config": {"title": f"Gate {gate}", "actions": ["accept", "reject"]}}
        for gate in ("a", "b", "c")
    ],
    "edges": [],
}


def test_each_of_a_transitions_notices_has_the_attempts_a_notice_alone_has(services, admin, aws, receiver, monkeypatch):
    # Given the deployment's attempts per notice, and a receiver that fails every POST
    monkeypatch.setenv("INTERLUDE_CALLBACK_MAX_ATTEMPTS", str(wiring.CALLBACK_MAX_ATTEMPTS))
    config.forget()
    lambda_runtime.fresh_instances()
    receiver.script[:] = [500] * 100
    # And a run that raises three gates in one transition: their notices are one delivery, one message
    services.workflows.put_workflow(admin, THREE_GATES["id"], WorkflowDefinition.model_validate(THREE_GATES))
    request = CreateRunRequest.model_validate({"workflowId": THREE_GATES["id"], "callbackUrl": receiver.url()})
    run_id = services.lifecycle.create_run(admin, request).runId
    Stream(TABLE).pump()

    # When the queue's mapping hands its messages out until none is left (SQS redriving what it receives too often)
    handed = mapped_until_gone(aws["callbacks"], "callbacks")

    # Then each notice was POSTed as often as a notice alone is, under its own webhook-id, one after another
    ids = [h.headers["webhook-id"] for h in receiver.hits]
    assert [ids.count(i) for i in dict.fromkeys(ids)] == [wiring.CALLBACK_MAX_ATTEMPTS] * 3
    assert ids == sorted(ids, key=ids.index)
    # And the run's deliveries list each dead after its last attempt, none given up before its attempts ran out
    listed = listed_deliveries(services, run_id)
    assert RECEIVES_EXHAUSTED not in {d["errorClass"] for d in listed}
    finals = [(d["noticeId"], d["attempt"], d["errorClass"]) for d in listed if d.get("final")]
    assert finals == [(i, wiring.CALLBACK_MAX_ATTEMPTS, "http_status") for i in dict.fromkeys(ids)]
    # And each has its dead letter, with its attempts; nothing went to the dead letters as queued
    dead = [json.loads(m["Body"]) for m in queued(aws["callbacks-dlq"])]
    assert sorted((d.get("noticeId"), d.get("attempts")) for d in dead) == sorted((i, wiring.CALLBACK_MAX_ATTEMPTS) for i in set(ids))
    # (the first two notices' rounds in the message's 20 receives, the third's in a copy of it)
    assert len(handed) == 2 * wiring.CALLBACK_MAX_ATTEMPTS - 1 + wiring.CALLBACK_MAX_ATTEMPTS


def test_a_transitions_next_notice_whose_round_would_outlast_its_messages_retention_goes_on_in_a_copy(
    services, admin, aws, receiver
):
    # Given a run that raises three gates in one transition (one message), a receiver that takes every POST, and
    # that message handed out late in its life: the next notice's round, each wait at the backoff's cap, would end
    # after SQS drops the message (its retention, less a visibility timeout)
    services.workflows.put_workflow(admin, THREE_GATES["id"], WorkflowDefinition.model_validate(THREE_GATES))
    request = CreateRunRequest.model_validate({"workflowId": THREE_GATES["id"], "callbackUrl": receiver.url()})
    services.lifecycle.create_run(admin, request)
    Stream(TABLE).pump()
    read = DeliverySettings.from_env()
    waits = worst_case_wait_s(read.max_attempts, read.backoff_cap_s)
    sqs = boto3.client("sqs")
    (message,) = sqs.receive_message(QueueUrl=aws["callbacks"], MessageSystemAttributeNames=["All"])["Messages"]
    late = time.time() - (WAITS_WITHIN_S - waits) - 600
    message["Attributes"]["SentTimestamp"] = str(int(late * 1000))
    arn = sqs.get_queue_attributes(QueueUrl=aws["callbacks"], AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    # When the worker takes it
    answer = lambda_runtime.invoke("callbacks", {"Records": [to_event_record(message, arn)]})

    # Then it posts the first notice alone and hands the others to a copy of the message, which posts them
    assert answer["batchItemFailures"] == []
    assert len(receiver.hits) == 1
    sqs.delete_message(QueueUrl=aws["callbacks"], ReceiptHandle=message["ReceiptHandle"])
    drain(aws)
    ids = [h.headers["webhook-id"] for h in receiver.hits]
    assert len(ids) == len(set(ids)) == 3
