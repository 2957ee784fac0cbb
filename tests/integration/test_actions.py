"""Gated core.http actions in-process: moto (DynamoDB, stream, SQS, Secrets Manager), the real dispatch and actions
handlers, and a receiver on 127.0.0.1 (the development loopback switch on)."""

from __future__ import annotations

import json
import socket
import time
import uuid

import boto3
import pytest
from pydantic import ValidationError

from interlude import wiring
from interlude.composition import Services
from interlude.domain import clock
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine.actions import provider_key
from interlude.local import lambda_runtime
from interlude.local.sqs_pump import QueuePump
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store.effects import EFFECT_SK, effect_pk, ledger_sk
from interlude.store.facade import Store
from interlude.store.layout import run_pk
from interlude.store.retention import RetentionStore
from tests.integration.conftest import state_of
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.receiver import Receiver
from tests.support.stream import Stream, dispatch


@pytest.fixture
def aws(world, monkeypatch):
    env = {
        "PUBLIC_BASE_URL": "https://interlude.example.com",
        "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1",
        "INTERLUDE_ACTION_BACKOFF_BASE_S": "0",
        "INTERLUDE_ACTION_CONNECT_TIMEOUT_S": "2",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return world.queues


@pytest.fixture
def services(aws) -> Services:
    return Services(Store(TABLE, ENTRIES_TABLE))


@pytest.fixture
def receiver():
    started = Receiver(answer=b'{"refundId":"r-1"}', answer_type="application/json").start()
    yield started
    started.close()


def workflow(url: str, **http: object) -> dict:
    """Approve, then call; a success goes on to `done`, a failure to `on-failure` (routed like any failure)."""
    return {
        "id": "refund",
        "name": "Refund after approval",
        "nodes": [
            {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Refund {{inputs.orderId}}?"}},
            {
                "id": "refund",
                "typeId": "core.http",
                "config": {"url": url, "body": {"order": "{{inputs.orderId}}"}, "timeoutMs": 4000, **http},
            },
            {"id": "done", "typeId": "core.transform", "config": {"outputs": {"refund": "{{refund.body.refundId}}"}}},
            {"id": "on-failure", "typeId": "core.noop"},
        ],
        "edges": [
            {"id": "g-r", "sourceNodeId": "gate", "targetNodeId": "refund"},
            {"id": "r-d", "sourceNodeId": "refund", "targetNodeId": "done", "triggerRule": "all_success"},
            {"id": "r-f", "sourceNodeId": "refund", "targetNodeId": "on-failure", "triggerRule": "any_failed"},
        ],
        "variables": [{"name": "orderId", "type": "string"}],
    }


def approved_run(services, admin, definition: dict, order: str = "o-1") -> str:
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    run_id = services.lifecycle.create_run(
        admin, CreateRunRequest.model_validate({"workflowId": definition["id"], "inputs": {"orderId": order}})
    ).runId
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    return run_id


def settle(urls: dict[str, str], rounds: int = 30) -> None:
    """Play the stream → dispatch and SQS → actions mappings until nothing moves (backoff is 0 s here)."""
    stream = Stream(TABLE)
    pump = QueuePump("actions", urls["actions"])
    for _ in range(rounds):
        moved = pump_stream(stream) + pump.pump_once()
        if not moved:
            return
    raise AssertionError("the run did not settle")


def pump_stream(stream: Stream, again: bool = False) -> int:
    fresh = stream.take(again)
    if fresh:
        assert dispatch(fresh) == {"batchItemFailures": []}
    return len(fresh)


# --- the call and its record ----------------------------------------------------------------------


def test_an_answers_numbers_are_kept_as_it_wrote_them_for_the_pages(services, admin, aws):
    answering = Receiver(answer=b'{"refundId":"r-1","fee":2.50,"rate":1e3}', answer_type="application/json").start()
    try:
        run_id = approved_run(services, admin, workflow(answering.url("/refunds")))
        settle(aws)
    finally:
        answering.close()
    state = state_of(services, run_id)
    assert state.outputs["refund"]["body"]["fee"] == 2.5
    assert state.writtenNumbers == {"2.5": "2.50", "1000.0": "1e3"}


def test_an_approved_action_is_called_once_and_its_response_is_the_nodes_output(services, admin, aws, receiver):
    # Given a run whose gate was approved
    run_id = approved_run(services, admin, workflow(receiver.url("/refunds")))

    # When the outbox and the actions worker run
    settle(aws)

    # Then the receiver got one POST with the rendered body and the effect's Idempotency-Key
    (hit,) = receiver.hits
    assert (hit.method, hit.path) == ("POST", "/refunds")
    assert json.loads(hit.body) == {"order": "o-1"}
    assert hit.headers["content-type"] == "application/json"
    state = state_of(services, run_id)
    effect_id = state.outputs["refund"]["effectId"]
    assert hit.headers["idempotency-key"] == provider_key(effect_id)
    # And the bounded response is the node's output, and the run went on
    assert state.outputs["refund"]["status"] == 200
    assert state.outputs["refund"]["body"] == {"refundId": "r-1"}
    assert state.outputs["refund"]["truncated"] is False
    assert state.outputs["done"] == {"refund": "r-1"}
    assert state.status == "completed"
    assert state.nodes["on-failure"].status == "skipped"
    # And the effect record says so, content-free
    (record,) = services.run_effects.run_effects(admin, run_id)["effects"]
    assert record["effectId"] == effect_id
    assert record["keying"] == "activity-recipe"
    assert (record["nodeId"], record["attempt"], record["state"]) == ("refund", 1, "completed")
    assert record["providerKey"] == provider_key(effect_id)
    assert "o-1" not in json.dumps(record)
    assert "r-1" not in json.dumps(record)


def expiry_days(services, effect_id: str, run_id: str) -> tuple[float, float]:
    """Days from now until the effect record and the run's ledger entry of it expire (the table's TTL)."""
    client = boto3.client("dynamodb")
    effect = client.get_item(TableName=TABLE, Key=a.key(effect_pk(effect_id), EFFECT_SK))["Item"]
    ledger = client.get_item(TableName=TABLE, Key=a.key(run_pk(run_id), ledger_sk(effect_id)))["Item"]
    return tuple((int(item[wiring.TTL_ATTRIBUTE]["N"]) - time.time()) / 86400 for item in (effect, ledger))


def test_effect_records_and_the_ledger_expire_after_the_tenants_retention(services, admin, aws, receiver, tenant):
    # Given a tenant that keeps finished runs 1 day and effects the default 14, an action performed (its run finishes:
    # the retention turn gives the run's items the run's expiry, and effect records only ever a later one)
    services.tenants.put_settings(tenant, TenantSettings(retentionDays=1), "ops")
    lambda_runtime.fresh_instances()
    run_id = approved_run(services, admin, workflow(receiver.url()))
    settle(aws)
    effect_id = state_of(services, run_id).outputs["refund"]["effectId"]
    # Then its effect record and ledger entry expire 14 days (OpenWOP's minimum) after they were written
    for days in expiry_days(services, effect_id, run_id):
        assert 13.99 < days <= 14

    # When the tenant keeps effects for 90 days (a worker applies it within its cache time: a fresh one here)
    services.tenants.put_settings(tenant, TenantSettings(retentionDays=1, effectRetentionDays=90), "ops")
    lambda_runtime.fresh_instances()
    later = approved_run(services, admin, workflow(receiver.url(), effectKey="refund-{{inputs.orderId}}"), "o-2")
    settle(aws)
    effect_id = state_of(services, later).outputs["refund"]["effectId"]
    for days in expiry_days(services, effect_id, later):
        assert 89.99 < days <= 90


def test_an_effect_of_a_run_that_ends_within_its_items_margin_is_kept_with_them_and_never_written_again(
    services, admin, aws, receiver, clock_file, monkeypatch
):
    # (ADR 0142) The retention turn writes no effect record or ledger entry whose expiry is the run's or later
    raised: list[str] = []
    for name in ("raise_ttl", "raise_effect_ttl"):
        monkeypatch.setattr(RetentionStore, name, lambda store, *args, name=name: raised.append(name))
    definition = workflow(receiver.url(), effectKey="refund-{{inputs.orderId}}")
    # Given a tenant that keeps runs the default 90 days and effects the default 14, an action performed
    run_id = approved_run(services, admin, definition)
    settle(aws)
    state = state_of(services, run_id)
    assert state.status == "completed"
    effect_id = state.outputs["refund"]["effectId"]
    # Then its effect record and ledger entry expire with the run's items (its creation + 90 + 7 days), later than
    # the run itself, and its retention turn wrote neither
    provisional = run_search.items_expiry(state.searchExpiry)
    assert expiries(effect_id, run_id) == (provisional, provisional)
    assert provisional > clock.epoch_of(state.completedAt) + 90 * 86400
    assert raised == []

    # When a run created a day later reuses the effect (the same business identity: no call)
    clock.advance(clock_file, 86400)
    later = approved_run(services, admin, definition)
    settle(aws)
    assert len(receiver.hits) == 1
    later_state = state_of(services, later)
    assert later_state.outputs["refund"]["effectId"] == effect_id
    # Then its ledger entry expires with its own items, the shared record no sooner, and its turn wrote neither
    later_provisional = run_search.items_expiry(later_state.searchExpiry)
    assert later_provisional >= provisional + 86400
    assert expiries(effect_id, later) == (later_provisional, later_provisional)
    assert expiries(effect_id, run_id)[1] == provisional
    assert raised == []


def expiries(effect_id: str, run_id: str) -> tuple[int, int]:
    """When the effect record and the run's ledger entry of it expire (epoch seconds)."""
    client = boto3.client("dynamodb")
    effect = client.get_item(TableName=TABLE, Key=a.key(effect_pk(effect_id), EFFECT_SK))["Item"]
    ledger = client.get_item(TableName=TABLE, Key=a.key(run_pk(run_id), ledger_sk(effect_id)))["Item"]
    return int(effect[wiring.TTL_ATTRIBUTE]["N"]), int(ledger[wiring.TTL_ATTRIBUTE]["N"])


@pytest.mark.parametrize("days", [13, 367, 0, "14 days"])
def test_the_effect_retention_is_bounded(days):
    with pytest.raises(ValidationError):
        TenantSettings.model_validate({"effectRetentionDays": days})


def test_a_gate_after_the_action_opens_in_its_transition_and_is_listed_for_its_approvers(services, admin, aws, receiver):
    # The actions function lands the outcome and runs on to the next gate in the same transaction, so it writes the
    # gate's inbox entries (a BatchWriteItem its role lacked until the suite's IAM check found it: issue 25).
    definition = workflow(receiver.url("/refunds"))
    definition["nodes"].append({"id": "confirm", "typeId": "core.approvalGate", "config": {"title": "Tell them?"}})
    definition["edges"].append({"id": "d-c", "sourceNodeId": "done", "targetNodeId": "confirm"})
    run_id = approved_run(services, admin, definition)
    settle(aws)
    state = state_of(services, run_id)
    assert (state.status, set(state.interrupts)) == ("waiting-approval", {"confirm"})
    listed = services.inbox.inbox(admin, 10, {"runId": run_id}, None)["interrupts"]
    assert [i["nodeId"] for i in listed] == ["confirm"]


def test_redelivered_stream_records_and_messages_call_once(services, admin, aws, receiver):
    run_id = approved_run(services, admin, workflow(receiver.url()))
    stream = Stream(TABLE)
    stream.pump()
    # When every stream record is delivered again, and every queued message is handled twice
    stream.pump(again=True)
    pump = QueuePump("actions", aws["actions"])
    sqs = boto3.client("sqs")
    messages = sqs.receive_message(QueueUrl=aws["actions"], MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 2
    for message in messages:
        sqs.change_message_visibility(
            QueueUrl=aws["actions"], ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    while pump.pump_once():
        pump_stream(stream)

    # Then one call, one effect, one completed node
    assert len(receiver.hits) == 1
    assert len(services.run_effects.run_effects(admin, run_id)["effects"]) == 1
    assert state_of(services, run_id).status == "completed"


def test_a_5xx_is_retried_with_the_same_idempotency_key(services, admin, aws, receiver):
    receiver.script = [503, 500]
    run_id = approved_run(services, admin, workflow(receiver.url()))

    settle(aws)

    assert len(receiver.hits) == 3
    assert len({h.headers["idempotency-key"] for h in receiver.hits}) == 1
    state = state_of(services, run_id)
    assert state.outputs["refund"]["attempt"] == 3
    (record,) = services.run_effects.run_effects(admin, run_id)["effects"]
    assert (record["attempt"], record["state"]) == (3, "completed")


def test_attempts_running_out_fail_the_node_and_route_like_any_failure(services, admin, aws, receiver):
    receiver.script = [503, 503]
    run_id = approved_run(services, admin, workflow(receiver.url(), maxAttempts=2))

    settle(aws)

    assert len(receiver.hits) == 2
    state = state_of(services, run_id)
    assert state.nodes["refund"].status == "failed"
    assert state.nodes["on-failure"].status == "completed"
    assert state.status == "completed"
    failed = next(e for e in services.store.read_events(run_id, -1) if e["type"] == "node.failed")
    assert failed["payload"]["error"]["code"] == "interlude.http_failed"
    assert failed["payload"]["error"]["details"]["status"] == 503
    assert failed["payload"]["error"]["details"]["attempts"] == 2


def test_an_unexpected_status_fails_at_once_with_http_failed(services, admin, aws, receiver):
    receiver.script = [404]
    run_id = approved_run(services, admin, workflow(receiver.url()))

    settle(aws)

    assert len(receiver.hits) == 1
    state = state_of(services, run_id)
    assert state.nodes["refund"].status == "failed"
    failed = next(e for e in services.store.read_events(run_id, -1) if e["type"] == "node.failed")
    assert failed["payload"]["error"]["code"] == "interlude.http_failed"
    (record,) = services.run_effects.run_effects(admin, run_id)["effects"]
    assert record["state"] == "released"


def test_expected_statuses_are_the_ones_that_succeed(services, admin, aws, receiver):
    receiver.script = [409]
    run_id = approved_run(services, admin, workflow(receiver.url(), method="PUT", expectStatuses=[200, 409]))

    settle(aws)

    assert receiver.hits[0].method == "PUT"
    assert state_of(services, run_id).outputs["refund"]["status"] == 409


def test_the_egress_guard_refuses_loopback_without_the_development_switch(
    services, admin, aws, receiver, monkeypatch
):
    monkeypatch.delenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS")
    # Rendered from the run's inputs: a URL written as it is would be refused when the definition is registered.
    run_id = approved_run(services, admin, workflow("{{inputs.orderId}}"), order=receiver.url())

    settle(aws)

    assert receiver.hits == []
    failed = next(e for e in services.store.read_events(run_id, -1) if e["type"] == "node.failed")
    assert failed["payload"]["error"]["code"] == "interlude.egress_denied"
    assert "127.0.0.1" not in failed["payload"]["error"]["message"]


@pytest.fixture
def dns(monkeypatch):
    """Name resolution as the worker meets it: `refunds.example.com` fails `failures[0]` times (a resolver timing out),
    then resolves to the receiver on 127.0.0.1; every other name as the system resolves it."""
    failures = [0]
    system = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "refunds.example.com":
            if failures[0]:
                failures[0] -= 1
                raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
            host = "127.0.0.1"
        return system(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return failures


def test_a_host_name_that_does_not_resolve_is_tried_again_as_a_connection_error_is(services, admin, aws, receiver, dns):
    dns[0] = 1
    url = receiver.url().replace("127.0.0.1", "refunds.example.com")
    run_id = approved_run(services, admin, workflow(url, maxAttempts=3))

    settle(aws)

    assert len(receiver.hits) == 1
    assert state_of(services, run_id).outputs["refund"]["status"] == 200


def test_a_host_name_that_never_resolves_fails_the_node_when_its_attempts_run_out(services, admin, aws, receiver, dns):
    dns[0] = 99
    url = receiver.url().replace("127.0.0.1", "refunds.example.com")
    run_id = approved_run(services, admin, workflow(url, maxAttempts=2))

    settle(aws)

    assert receiver.hits == []
    error = failure_of(services, run_id)
    assert (error["code"], error["details"]["errorClass"], error["details"]["attempts"]) == ("interlude.http_failed", "dns", 2)
    assert dns[0] == 97


def failure_of(services, run_id: str) -> dict:
    failed = next(e for e in services.store.read_events(run_id, -1) if e["type"] == "node.failed")
    return failed["payload"]["error"]


def test_auth_headers_come_from_secrets_manager_and_never_enter_the_run(services, admin, aws, receiver, tenant):
    secret_value = "Bearer sk-" + uuid.uuid4().hex
    boto3.client("secretsmanager").create_secret(Name=f"interlude/actions/{tenant}/payments", SecretString=secret_value)
    run_id = approved_run(services, admin, workflow(receiver.url(), secretHeaders={"Authorization": "payments"}))

    settle(aws)

    (hit,) = receiver.hits
    assert hit.headers["authorization"] == secret_value
    # Nowhere in the run's head, its events or its effect records
    everything = json.dumps(
        [state_of(services, run_id).model_dump(), services.store.read_events(run_id, -1), services.run_effects.run_effects(admin, run_id)]
    )
    assert secret_value not in everything


def test_a_missing_secret_fails_the_node_with_secret_unavailable(services, admin, aws, receiver):
    run_id = approved_run(services, admin, workflow(receiver.url(), secretHeaders={"Authorization": "nope"}))

    settle(aws)

    assert receiver.hits == []
    failed = next(e for e in services.store.read_events(run_id, -1) if e["type"] == "node.failed")
    assert failed["payload"]["error"]["code"] == "interlude.secret_unavailable"
    assert failed["payload"]["error"]["details"]["secret"] == "nope"


def test_a_business_identity_is_performed_once_across_runs(services, admin, aws, receiver):
    definition = workflow(receiver.url(), effectKey="refund-{{inputs.orderId}}")
    first = approved_run(services, admin, definition, order="o-7")
    settle(aws)
    # When a second run names the same business operation (a replay, a second entry point)
    second = approved_run(services, admin, definition, order="o-7")
    settle(aws)

    # Then the call happened once, and both runs hold its recorded outcome
    assert len(receiver.hits) == 1
    assert state_of(services, second).outputs["refund"] == state_of(services, first).outputs["refund"]
    (one,) = services.run_effects.run_effects(admin, first)["effects"]
    (two,) = services.run_effects.run_effects(admin, second)["effects"]
    assert one["effectId"] == two["effectId"]
    assert one["keying"] == two["keying"] == "business-identity"
    # And another order is another effect
    approved_run(services, admin, definition, order="o-8")
    settle(aws)
    assert len(receiver.hits) == 2


def test_a_cancelled_run_drops_its_queued_action(services, admin, aws, receiver):
    from interlude.domain.models.requests import CancelRunRequest

    run_id = approved_run(services, admin, workflow(receiver.url()))
    Stream(TABLE).pump()
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())

    settle(aws)

    assert receiver.hits == []
    state = state_of(services, run_id)
    assert state.status == "cancelled"
    assert state.nodes["refund"].status == "skipped"


@pytest.mark.parametrize(
    ("budget", "body", "truncated"),
    [(18, {"refundId": "r-1"}, False), (17, '{"refundId":"r-1"', True), (0, "", True)],
    ids=["fits-exactly", "one-byte-short", "no-body-kept"],
)
def test_the_response_is_kept_within_its_budget(services, admin, aws, receiver, budget, body, truncated):
    # The receiver answers the 18 bytes {"refundId":"r-1"}
    run_id = approved_run(services, admin, workflow(receiver.url(), responseBudgetBytes=budget))

    settle(aws)

    output = state_of(services, run_id).outputs["refund"]
    assert (output["body"], output["truncated"]) == (body, truncated)


def test_a_failed_run_retried_while_a_change_of_retention_is_given_to_it_keeps_none_of_that_expiry(
    services, admin, aws, receiver, monkeypatch
):
    """A re-stamp (a change of retentionDays given to the runs finished before it, app/retention.Restamp) writes the
    run's items page by page: a run that runs again meanwhile, whose own retention turn gave its items their open
    expiry first, must not keep the re-stamp's, which would delete its event batches while it runs."""
    monkeypatch.delenv("INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS")
    # Refused when called (a URL written as it is would be refused when the definition is registered).
    failing = workflow("{{inputs.orderId}}")
    failing["nodes"], failing["edges"] = failing["nodes"][:2], failing["edges"][:1]
    run_id = approved_run(services, admin, failing, order=receiver.url())
    settle(aws)
    assert state_of(services, run_id).status == "failed"
    # Given the tenant's retention made 30 days, and the failed action retried (its transition, then its own retention
    # turn) while the re-stamp writes the run's first item
    services.tenants.put_settings(admin.tenant, TenantSettings(retentionDays=30), "admin")
    services.limiter.forget(admin.tenant)
    store = services.retention.store
    write_ttl = store.set_item_ttl

    def retried_first(run: str, sk: str, ttl: int | None, *where: str) -> None:
        monkeypatch.setattr(store, "set_item_ttl", write_ttl)
        services.replay.retry_action(admin, run_id, "refund")
        assert services.retention.turn(run_id, None, lambda: True) is None
        write_ttl(run, sk, ttl, *where)

    monkeypatch.setattr(store, "set_item_ttl", retried_first)
    services.restamp.turn(admin.tenant, None, lambda: True)
    # Then the running run's event batches carry their provisional expiry (its creation + 90 + 7 days), not its end's
    state = state_of(services, run_id)
    assert state.status == "running"
    got = boto3.client("dynamodb").query(
        TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": a.s(run_pk(run_id))}
    )["Items"]
    batches = [i for i in got if i["sk"]["S"].startswith(wiring.EVENT_ITEM_PREFIX)]
    assert len(batches) > 1
    assert {int(i[wiring.TTL_ATTRIBUTE]["N"]) for i in batches} == {run_search.items_expiry(state.searchExpiry)}
