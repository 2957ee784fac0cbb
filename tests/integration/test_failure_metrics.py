"""Failures that page (issue 25, finding 8): each worker counts the records it fails and the errors it catches and
carries on from, as EMF metrics the alarms read (interlude_cdk.observability).

The real handlers in a Lambda's environment (AWS_LAMBDA_FUNCTION_NAME set, so the EMF lines are written), over
moto; what they write to stdout is read back as CloudWatch would parse it.
"""

from __future__ import annotations

import json

import boto3
import pytest

from interlude import wiring
from interlude.adapters import metrics
from interlude.adapters.delivery.signing import secret_name
from interlude.adapters.notify.messages import RAISED, queue_message
from interlude.composition import Services
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import to_event_record
from interlude.store.directory import DirectoryStore
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.support.emf import Point, as_function, of, written
from tests.support.local_stack import FIXTURES
from tests.support.logs import function_log
from tests.support.moto_world import ENTRIES_TABLE, KEY_RING_SECRET, TABLE
from tests.support.stream import Stream, outbox_event

DEPLOYMENT = "failures-test"
# Loopback callbacks are allowed here (INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS); nothing listens: no test gets as far.
RECEIVER = "http://127.0.0.1:9/hook"
SENDER = "approvals@example.com"


@pytest.fixture
def aws(world, monkeypatch):
    env = {
        "PUBLIC_BASE_URL": "https://interlude.example.com",
        "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1",
        "INTERLUDE_CALLBACK_BACKOFF_BASE_S": "0",
        metrics.DEPLOYMENT_ENV: DEPLOYMENT,
    }
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return world.queues


@pytest.fixture
def services(aws) -> Services:
    lambda_runtime.fresh_instances()
    return Services(Store(TABLE, ENTRIES_TABLE))


def invoke(name: str, event: dict) -> tuple[dict, list[Point]]:
    """Invoke function `name`'s real handler; its answer, and (metric, dimensions) of every EMF point it wrote."""
    with written(name) as points:
        answer = lambda_runtime.invoke(name, event)
    return answer, points


def start_gate_run(services: Services, callback_url: str) -> str:
    admin = signed_in(services)
    definition = json.loads((FIXTURES / "conformance-approval.json").read_text())
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    request = CreateRunRequest.model_validate({"workflowId": definition["id"], "callbackUrl": callback_url})
    return services.lifecycle.create_run(admin, request).runId


def queued_records(url: str) -> list[dict]:
    sqs = boto3.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [to_event_record(m, arn) for m in messages]


# A world of its own: it deletes the callbacks queue.
@pytest.mark.private_world
def test_an_item_the_outbox_fails_is_counted_and_logged(services, aws, monkeypatch):
    # Given a run whose raised gate makes the outbox queue a callback notice, on a queue that is gone
    start_gate_run(services, RECEIVER)
    boto3.client("sqs").delete_queue(QueueUrl=aws["callbacks"])
    function = as_function(monkeypatch, DEPLOYMENT, "dispatch")
    records = Stream(TABLE).take()

    # When the dispatch function is handed the batch
    with function_log("dispatch", level="ERROR") as lines:
        answer, points = invoke("dispatch", outbox_event(records))

    # Then the invocation succeeds (no Lambda error: its Errors alarm stays quiet) with the record reported failed
    failed = answer["batchItemFailures"]
    assert failed
    # And each failed record is one RecordFailures data point of this function, and one ERROR line with its traceback
    assert of(points, metrics.RECORD_FAILURES) == [{"deployment": DEPLOYMENT, "FunctionName": function}] * len(failed)
    errors = [line for line in lines if line["level"] == "ERROR"]
    assert len(errors) == len(failed)
    assert "QueueDoesNotExist" in errors[0]["exception"] or "NonExistentQueue" in errors[0]["exception"]


def test_a_notice_whose_signing_secret_cannot_be_read_is_a_caught_error_not_a_record_failure(
    services, aws, monkeypatch, tenant
):
    # Given a notice on the callbacks queue, and the tenant's signing secret deleted by hand (it cannot be read)
    start_gate_run(services, RECEIVER)
    Stream(TABLE).pump()
    secrets = boto3.client("secretsmanager")
    name = secret_name(wiring.SECRET_PREFIXES["WEBHOOK_SECRET_PREFIX"], tenant)
    secrets.create_secret(Name=name, SecretString="{}")
    secrets.delete_secret(SecretId=name, RecoveryWindowInDays=7)
    function = as_function(monkeypatch, DEPLOYMENT, "callbacks")
    (record,) = queued_records(aws["callbacks"])

    # When the callbacks function takes it
    with function_log("callbacks", level="ERROR") as lines:
        answer, points = invoke("callbacks", {"Records": [record]})

    # Then the worker caught the error, recorded the attempt failed and hid the message for its backoff
    assert answer == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert of(points, metrics.CAUGHT_ERRORS) == [{"deployment": DEPLOYMENT, "FunctionName": function}]
    # A designed retry (RetryLater) is no record failure: the receiver-down case must not page
    assert of(points, metrics.RECORD_FAILURES) == []
    assert of(points, "CallbackNotices") == [{"deployment": DEPLOYMENT, "outcome": "failed"}]
    (error,) = [line for line in lines if line["level"] == "ERROR"]
    assert error["caughtError"] == "delivery-attempt"


# A world of its own: it deletes the token key ring.
@pytest.mark.private_world
def test_a_notification_that_fails_inside_the_worker_is_logged_and_counted(services, aws, monkeypatch, tenant):
    """The notify worker's internal failures were recorded on the notification alone: no line, no metric."""
    # Given an open gate whose approver has an address, and the token key ring gone (no decision link can be signed)
    monkeypatch.setenv("SES_FROM_ADDRESS", SENDER)
    boto3.client("ses").verify_email_identity(EmailAddress=SENDER)
    admin = signed_in(services, tenant=tenant)
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approversList": ["ann"]}}]
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"}))
    services.directory.put_principal(tenant, "ann", PrincipalEntry(email="ann@example.com"), "admin")
    message = queue_message(tenant, state.runId, "review", state.interrupts["review"].interruptId, "ann", RAISED)
    boto3.client("sqs").send_message(QueueUrl=aws["notifications"], MessageBody=json.dumps(message))
    boto3.client("secretsmanager").delete_secret(SecretId=KEY_RING_SECRET, ForceDeleteWithoutRecovery=True)
    function = as_function(monkeypatch, DEPLOYMENT, "notify")
    (record,) = queued_records(aws["notifications"])

    # When the notify function takes the message
    with function_log("notify", level="ERROR") as lines:
        answer, points = invoke("notify", {"Records": [record]})

    # Then the attempt is retried later, and the failure inside it is one ERROR line and one CaughtErrors point
    assert answer == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    (error,) = [line for line in lines if line["level"] == "ERROR"]
    assert error["caughtError"] == "notification-attempt"
    assert of(points, metrics.CAUGHT_ERRORS) == [{"deployment": DEPLOYMENT, "FunctionName": function}]
    assert of(points, metrics.RECORD_FAILURES) == []
    # And nothing of the message's content is in the line
    assert "ann@example.com" not in json.dumps(error)


def test_a_notification_whose_channel_fails_for_good_is_counted_undeliverable_never_a_failure(
    services, aws, monkeypatch, tenant
):
    """A channel set up that no retry can send over (here an address an earlier release stored, which mail cannot go
    to) was counted `skipped`, as a gate decided before it was sent is: an operator could not tell it from a skip."""
    # Given an open gate whose approver's address cannot be mailed, and the notification on its queue
    monkeypatch.setenv("SES_FROM_ADDRESS", SENDER)
    admin = signed_in(services, tenant=tenant)
    nodes = [{"id": "review", "typeId": "core.approvalGate", "config": {"title": "Ship?", "approversList": ["ann"]}}]
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"}))
    unmailable = {"email": "ann,eve@example.com"}  # stored by an earlier release
    DirectoryStore(services.store).put(tenant, "ann", unmailable, "2026-12-01T00:00:00Z", "admin", 10)
    message = queue_message(tenant, state.runId, "review", state.interrupts["review"].interruptId, "ann", RAISED)
    boto3.client("sqs").send_message(QueueUrl=aws["notifications"], MessageBody=json.dumps(message))
    as_function(monkeypatch, DEPLOYMENT, "notify")
    (record,) = queued_records(aws["notifications"])

    # When the notify function takes it
    answer, points = invoke("notify", {"Records": [record]})

    # Then it is done with (nothing retries it) and counted under an outcome of its own, no record failure
    assert answer == {"batchItemFailures": []}
    assert of(points, "Notifications") == [{"deployment": DEPLOYMENT, "outcome": "undeliverable"}]
    assert of(points, metrics.RECORD_FAILURES) == []
