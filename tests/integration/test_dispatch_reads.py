"""The reads the outbox consumer makes for a record (issue 31): the real dispatch handler, on moto, makes none for what the
record or its batch already holds, and hands on the same metric, notices and run as when it read them."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from typing import Any

import boto3
import pytest

from interlude.composition import Services
from interlude.domain.clock import epoch_of
from interlude.domain.models.principal_requests import DelegateVoteRequest
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.store import attributes as a
from interlude.store.layout import interrupt_sk, run_pk
from interlude.store.stream import is_event_insert, record_run_id, stream_events
from tests.integration.conftest import signed_in
from tests.integration.test_deadlines import LONG_MS
from tests.integration.test_notify_worker import queued
from tests.support.dynamodb_reads import Request, keys_read, recorded
from tests.support.emf import as_function
from tests.support.local_stack import FIXTURES
from tests.support.moto_world import TABLE
from tests.support.stream import Stream, dispatch


@pytest.fixture
def requests(monkeypatch: pytest.MonkeyPatch) -> list[Request]:
    return recorded(monkeypatch)


def run_of(services: Services, admin: Any, fixture: str) -> str:
    definition = json.loads((FIXTURES / f"{fixture}.json").read_text())
    for node in definition["nodes"]:
        if "timeoutMs" in node["config"]:
            # A deadline that no time the test takes reaches, however loaded the machine: the fixture's 1.5 s could
            # pass before the gate is decided, and a gate timed out is decided by nobody.
            node["config"]["timeoutMs"] = LONG_MS
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    created = CreateRunRequest.model_validate({"workflowId": definition["id"]})
    return services.lifecycle.create_run(admin, created).runId


def records_of(stream: Stream, run_id: str) -> list[dict[str, Any]]:
    """The run's new event-log items' records (the shared world's stream holds other tests' too)."""
    return [r for r in stream.take() if is_event_insert(r) and record_run_id(r) == run_id]


def dispatched_points(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Dispatch `records` (the real handler, failing none); (name, document) of every metric point it wrote."""
    lambda_runtime.handler_module("dispatch")  # its Logger keeps the stream it was made with, not this capture
    out = io.StringIO()
    with redirect_stdout(out):
        assert dispatch(records) == {"batchItemFailures": []}
    points = []
    for line in out.getvalue().splitlines():
        document = json.loads(line)
        if "_aws" in document:
            (directive,) = document["_aws"]["CloudWatchMetrics"]
            points += [(metric["Name"], document) for metric in directive["Metrics"]]
    return points


@pytest.mark.parametrize("fixture", ["conformance-approval", "conformance-approval-timeout"])
def test_time_to_decision_is_taken_from_the_inbox_keys_the_closing_record_names(
    services, admin, monkeypatch, requests, fixture
):
    # Given a gate (the second one with a deadline: its DUE entry sorts by it, not by the raise) decided, and its
    # creation's record dispatched
    as_function(monkeypatch, "reads-test", "dispatch")
    stream = Stream(TABLE)
    run_id = run_of(services, admin, fixture)
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    (closing,) = records_of(stream, run_id)
    found = stream_events(closing)
    assert found is not None
    resolved = next(e for e in found[1] if e["type"] == "interrupt.resolved")
    raised_at = services.store.raised_at(run_id, f"{run_id}:gate:1")
    assert raised_at is not None
    requests.clear()

    # When dispatch takes the record that closed it
    points = dispatched_points([closing])

    # Then it reports the same time to decision as the interrupt's item says, without reading that item
    (point,) = [document["TimeToDecision"] for name, document in points if name == "TimeToDecision"]
    assert (point[0] if isinstance(point, list) else point) == (epoch_of(resolved["timestamp"]) - epoch_of(raised_at)) * 1000
    assert not [k for k in keys_read(requests) if k[1] == run_pk(run_id) and k[2] == interrupt_sk(f"{run_id}:gate:1")]


BRIEF = " ".join(f"word{i}" for i in range(200))  # ≈ 1.5 KB: a format-4 head leaves the inputs in their event batch


def brief_workflow(services: Services, admin: Any, steps: int) -> str:
    """An approval, then `steps` transforms, the last sending the run's inputs on as its output."""
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Send the brief?", "actions": ["accept", "reject"]}}]
    nodes += [{"id": f"step{i}", "typeId": "core.transform", "config": {"outputs": {"sent": "{{inputs.brief}}"}}} for i in range(steps)]
    edges = [{"id": f"e{i}", "sourceNodeId": a["id"], "targetNodeId": b["id"]} for i, (a, b) in enumerate(zip(nodes, nodes[1:], strict=False))]
    definition = {"id": "brief", "nodes": nodes, "edges": edges, "variables": [{"name": "brief", "type": "string"}]}
    services.workflows.put_workflow(admin, "brief", WorkflowDefinition.model_validate(definition))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "brief", "inputs": {"brief": BRIEF}})).runId


def event_batches_read(requests: list[Request], run_id: str) -> list[str]:
    return [sk for _, pk, sk in keys_read(requests) if pk == run_pk(run_id) and sk.startswith("E#")]


def test_a_record_whose_handlers_read_no_inputs_leaves_them_in_their_event_batch(services, admin, requests):
    # Given a run whose large inputs its head leaves in its first event batch, its creation dispatched, then decided
    stream = Stream(TABLE)
    run_id = brief_workflow(services, admin, 1)
    assert services.store.get_run(run_id)[0].inputs == {"brief": BRIEF}
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    (closing,) = records_of(stream, run_id)
    requests.clear()

    # When dispatch takes the record that ended it
    assert dispatch([closing]) == {"batchItemFailures": []}

    # Then it read the record's own batch with the head, and not the batch that holds the inputs
    assert event_batches_read(requests, run_id) == [closing["dynamodb"]["Keys"]["sk"]["S"]]


def test_a_run_dispatch_continues_is_continued_with_its_inputs_read_back(services, admin, requests, monkeypatch):
    # Given a run whose large inputs its head leaves in its first event batch, decided by a resolve whose step budget
    # left it runnable: dispatch continues it
    stream = Stream(TABLE)
    budgeted = Services(services.store, step_budget=2)
    run_id = brief_workflow(budgeted, admin, 4)
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}
    budgeted.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    state, _ = budgeted.store.get_run(run_id)
    assert state.queue
    assert not state.terminal
    first = f"E#{state.inputsBatch:012d}"
    requests.clear()

    # When dispatch takes the record that left it runnable
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}

    # Then it read the inputs back (once) before it continued the run, which sent them on whole
    assert event_batches_read(requests, run_id).count(first) == 1
    state, _ = services.store.get_run(run_id)
    assert state.status == "completed"
    assert state.outputs["step3"] == {"sent": BRIEF}


def notification_queries(requests: list[Request], run_id: str) -> int:
    """Queries of the run's notification records (NT#)."""
    return sum(
        1
        for operation, params in requests
        if operation == "Query" and params["ExpressionAttributeValues"].get(":pk") == {"S": run_pk(run_id)}
        and params["ExpressionAttributeValues"].get(":prefix") == {"S": "NT#"}
    )


def approval_run(services: Services, admin: Any, **config: Any) -> str:
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", **config}}]
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"})).runId


@pytest.mark.parametrize(
    ("config", "queried"),
    [
        ({}, 0),
        ({"approversList": ["ana"]}, 1),
        ({"audience": {"subjects": ["ana"]}}, 1),
        ({"onTimeout": "escalate", "timeoutMs": 3_600_000}, 1),
    ],
)
def test_a_closed_approval_that_asked_nobody_has_no_notification_records_to_look_for(
    services, admin, requests, config, queried
):
    # Given an approval decided: asking nobody (no approver, no audience, no escalation, no vote handed over), or not
    stream = Stream(TABLE)
    run_id = approval_run(services, admin, **config)
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}
    services.decisions.resolve_interrupt(signed_in(services, "ana"), run_id, "gate", {"action": "accept"})
    requests.clear()

    # When dispatch takes the record that closed it
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}

    # Then it looks for the Slack messages to update only where the gate may have told someone
    assert notification_queries(requests, run_id) == queried


def test_a_delegate_told_of_an_approval_that_names_nobody_has_their_slack_message_closed(services, admin, world, requests):
    # Given an approval naming nobody, whose vote admin handed to dan, who was reminded in Slack (his notification
    # record holds the message's address)
    services.tenants.put_settings(world.tenant, TenantSettings(allowDelegation=True), "admin")
    stream = Stream(TABLE)
    run_id = approval_run(services, admin)
    interrupt_id = services.store.get_run(run_id)[0].interrupts["gate"].interruptId
    services.delegation.delegate_vote(admin, run_id, "gate", DelegateVoteRequest(delegate="dan"))
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}
    told = {"interruptId": interrupt_id, "principalId": "dan", "channels": {"slack": {"channel": "D0DAN", "ts": "1796126400.000100"}}}
    boto3.client("dynamodb").put_item(
        TableName=TABLE,
        Item={**a.key(run_pk(run_id), "NT#reminder-dan"), "status": a.s("sent"), "attempts": a.n(1), "record": a.as_json(told)},
    )
    queued(world.queues)
    services.decisions.resolve_interrupt(signed_in(services, "dan"), run_id, "gate", {"action": "accept"})

    # When dispatch takes the record that closed it
    assert dispatch(records_of(stream, run_id)) == {"batchItemFailures": []}

    # Then dan's message is closed with the outcome
    closed = queued(world.queues)["dan"]
    assert (closed["purpose"], closed["slackMessages"]) == ("closed", [["D0DAN", "1796126400.000100"]])


def subscription_queries(requests: list[Request], tenant: str) -> list[dict[str, Any]]:
    """The parameters of each Query of the tenant's webhook subscriptions (WH#)."""
    return [
        params
        for operation, params in requests
        if operation == "Query" and params["ExpressionAttributeValues"].get(":pk") == {"S": f"T#{tenant}"}
        and params["ExpressionAttributeValues"].get(":prefix") == {"S": "WH#"}
    ]


def test_a_batch_looks_for_its_tenants_webhook_subscriptions_once(services, admin, world, requests):
    # Given three runs of the tenant decided: six event items in one outbox batch
    stream = Stream(TABLE)
    runs = [approval_run(services, admin) for _ in range(3)]
    for run_id in runs:
        services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    records = [r for r in stream.take() if is_event_insert(r) and record_run_id(r) in runs]
    assert len(records) == 6
    requests.clear()

    # When dispatch takes the batch
    assert dispatch(records) == {"batchItemFailures": []}

    # Then the tenant's subscriptions were looked for once, not once per record (tests/integration/test_webhooks.py:
    # what each record's subscriptions receive), strongly consistent: one created a moment before a record was
    # committed is found (moto answers every read consistently, so the request is what can be checked here)
    (query,) = subscription_queries(requests, world.tenant)
    assert query["ConsistentRead"] is True
