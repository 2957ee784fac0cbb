"""Issue 11, finding 4, against moto's DynamoDB through the real services and store: every kind of gate can be
resolved or cancelled whatever follows it — a node past its budget, a continuation DynamoDB refuses as too large,
a bug after the gate — and the decision lands while the run fails with a clear code."""

from __future__ import annotations

import json
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from interlude.composition import Services
from interlude.domain import formats
from interlude.domain.errors import TooLarge
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.tenant_requests import CredentialGrantRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import run as engine
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.integration.test_new_run_gates import put_items
from tests.support.moto_world import TABLE

SEED = "x" * 100
CREDENTIAL = {"provider": "github", "scopes": ["repo"], "connectUrl": "https://app.example/connect/github"}
# Every kind of gate, the config that raises it, and an answer that completes it.
GATES: dict[str, tuple[str, dict[str, Any], Any]] = {
    "approval": ("core.approvalGate", {"title": "Approve?"}, {"action": "accept"}),
    "clarification": ("core.clarificationGate", {"questions": [{"id": "why", "question": "Why?"}]}, {"why": "because"}),
    "external-event": (
        "core.interrupt",
        {"kind": "external-event", "data": {"eventType": "order.paid", "correlation": {"orderId": "o-1"}}},
        {"paid": True},
    ),
    "conversation": ("core.conversationGate", {"turn": "start"}, {"message": "hello"}),
    "confidence": ("core.confidenceGate", {"agentId": "triage-bot", "observed": 0.1}, {"action": "accept"}),
    "credential": ("core.credentialGate", CREDENTIAL, {"outcome": "authorized"}),
    "modulex-interrupt": ("modulex.interrupt", {"message": "Go on?"}, {"approved": True}),
}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def services(world) -> Services:
    return Services(Store(world.table, world.entries_table), clock=Clock())


@pytest.fixture
def admin(services, tenant):
    services.tenants.put_grant(tenant, "github", CredentialGrantRequest.model_validate({"scopes": ["repo"]}), "admin")
    return signed_in(services, "admin")


def gated(services, admin, kind: str, after: dict[str, Any]) -> str:
    """Register `gate -> after` for a gate of `kind`; returns a run waiting at the gate."""
    type_id, config, _ = GATES[kind]
    workflow_id = f"wf-{kind}"
    services.workflows.put_workflow(
        admin,
        workflow_id,
        WorkflowDefinition.model_validate({
            "nodes": [{"id": "gate", "typeId": type_id, "config": config}, after],
            "edges": [{"sourceNodeId": "gate", "targetNodeId": after["id"]}],
            "variables": [{"name": "seed", "type": "string"}],
        }),
    )
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow_id, "inputs": {"seed": SEED}}))
    assert "gate" in state.interrupts, state.error
    return state.runId


def blow(node_id: str = "blow") -> dict[str, Any]:
    """A transform whose output would be 100 KB: past its budget."""
    return {"id": node_id, "typeId": "core.transform", "config": {"outputs": {"v": "{{inputs.seed}}" * 1000}}}


def small(node_id: str = "after") -> dict[str, Any]:
    return {"id": node_id, "typeId": "core.transform", "config": {"outputs": {"v": "{{inputs.seed}}"}}}


def interrupt_status(services: Services, run_id: str) -> str:
    """The status of the run's one interrupt, as every reader takes it (its item's, or its close's event's)."""
    [interrupt] = services.store.interrupts(run_id)
    return str(interrupt["status"])


def assert_decision_landed_and_run_failed(services: Services, run_id: str, code: str, node: str) -> None:
    state, _ = services.store.get_run(run_id)
    assert state.status == "failed"
    assert (state.error["code"], state.failedNodeId) == (code, node)
    assert state.nodes["gate"].status == "completed"
    assert interrupt_status(services, run_id) == "resolved"
    events = services.store.read_events(run_id)
    assert [e["sequence"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "run.failed"
    assert "interrupt.resolved" in [e["type"] for e in events]


@pytest.mark.parametrize("kind", list(GATES))
def test_every_gate_resolves_when_the_node_after_it_passes_its_budget(services, admin, kind):
    run_id = gated(services, admin, kind, blow())
    answered = services.decisions.resolve_interrupt(admin, run_id, "gate", GATES[kind][2])
    assert answered["status"] == "failed"
    assert_decision_landed_and_run_failed(services, run_id, "interlude.budget_exceeded", "blow")


@pytest.mark.parametrize("kind", list(GATES))
def test_every_gate_can_be_cancelled_whatever_follows(services, admin, kind):
    run_id = gated(services, admin, kind, blow())
    assert services.lifecycle.cancel_run(admin, run_id, CancelRunRequest.model_validate({"reason": "no"})).status == "cancelled"
    assert interrupt_status(services, run_id) == "cancelled"


def refuse_items_holding(node_id: str, monkeypatch, client) -> None:
    """DynamoDB refuses, as too large, any transaction or batch write whose event batch completes `node_id` (a new
    run's batch is put before its transaction: docs/adr/0165)."""
    real_transact, real_batch = client.transact_write_items, client.batch_write_item

    def refused(puts: list[dict], operation: str) -> None:
        for item in puts:
            events = item.get("events")
            if events and any(
                e["type"] == "node.completed" and e.get("nodeId") == node_id
                for e in json.loads(zlib.decompress(events["B"]))
            ):
                error = {"Code": "ValidationException", "Message": "Item size has exceeded the maximum allowed size"}
                raise ClientError({"Error": error}, operation)

    def transact(**kwargs):
        refused([op.get("Put", {}).get("Item", {}) for op in kwargs["TransactItems"]], "TransactWriteItems")
        return real_transact(**kwargs)

    def batch(**kwargs):
        refused(put_items([kwargs]), "BatchWriteItem")
        return real_batch(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", transact)
    monkeypatch.setattr(client, "batch_write_item", batch)


@pytest.mark.parametrize("kind", list(GATES))
def test_every_gate_resolves_when_dynamodb_refuses_what_follows_as_too_large(services, admin, kind, monkeypatch):
    run_id = gated(services, admin, kind, small())
    refuse_items_holding("after", monkeypatch, services.store.client)
    # Before: every resolve answered 413 payload_too_large and the run waited forever.
    answered = services.decisions.resolve_interrupt(admin, run_id, "gate", GATES[kind][2])
    assert answered["status"] == "failed"
    assert_decision_landed_and_run_failed(services, run_id, "interlude.budget_exceeded", "gate")


@pytest.mark.parametrize("kind", list(GATES))
def test_every_gate_resolves_when_what_follows_it_hits_a_bug(services, admin, kind, monkeypatch):
    run_id = gated(services, admin, kind, small())

    def broken(self):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(engine._Step, "run_queue", broken)
    answered = services.decisions.resolve_interrupt(admin, run_id, "gate", GATES[kind][2])
    assert answered["status"] == "failed"
    assert_decision_landed_and_run_failed(services, run_id, "interlude.node_error", "gate")


def test_dispatch_fails_a_run_whose_next_step_cannot_be_stored(services, admin, monkeypatch):
    services.step_budget = 1
    services.workflows.put_workflow(
        admin,
        "chain",
        WorkflowDefinition.model_validate({
            "nodes": [small("a"), small("b")],
            "edges": [{"sourceNodeId": "a", "targetNodeId": "b"}],
            "variables": [{"name": "seed", "type": "string"}],
        }),
    )
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "chain", "inputs": {"seed": SEED}}))
    assert state.queue == ["b"]
    refuse_items_holding("b", monkeypatch, services.store.client)
    assert services.lifecycle.advance_run(state.runId) > 0
    after, _ = services.store.get_run(state.runId)
    assert (after.status, after.error["code"], after.failedNodeId) == ("failed", "interlude.budget_exceeded", "b")
    assert services.lifecycle.advance_run(state.runId) == 0  # nothing left for dispatch to retry


@pytest.mark.parametrize("batch_before", [False, True])
def test_a_run_whose_first_steps_cannot_be_stored_is_created_failed(services, admin, monkeypatch, batch_before):
    # Its event batch in the creating transaction, or put before it (docs/adr/0165, from 0.7.0)
    monkeypatch.setattr(formats, "CREATE_BATCH_PUT_BEFORE_WRITTEN", batch_before)
    services.workflows.put_workflow(admin, "one", WorkflowDefinition.model_validate({"nodes": [small("a")], "variables": [{"name": "seed", "type": "string"}]}))
    refuse_items_holding("a", monkeypatch, services.store.client)
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one", "inputs": {"seed": SEED}}))
    assert (state.status, state.error["code"]) == ("failed", "interlude.budget_exceeded")


def send_large_inputs(services: Services, admin, run_id: str) -> Any:
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "wf-external-event", "inputs": {"v": "y" * 140_000}}))


def send_a_large_resume_value(services: Services, admin, run_id: str) -> Any:
    return services.decisions.resolve_interrupt(admin, run_id, "gate", {"blob": "y" * 70_000})


@pytest.mark.parametrize("call", [send_large_inputs, send_a_large_resume_value])
def test_what_a_caller_sends_past_its_budget_is_413_and_the_gate_stays_open(services, admin, call):
    run_id = gated(services, admin, "external-event", small())  # no resumeSchema: any value
    with pytest.raises(TooLarge) as refused:
        call(services, admin, run_id)
    assert refused.value.code == "payload_too_large"
    assert services.store.get_run(run_id)[0].status == "waiting-external"


def transaction_sizes(client) -> list[int]:
    """The item counts of the TransactWriteItems `client` sends from now on."""
    sizes: list[int] = []
    client.meta.events.register(
        "provide-client-params.dynamodb.TransactWriteItems", lambda params, **_: sizes.append(len(params["TransactItems"]))
    )
    return sizes


def test_a_transaction_past_its_item_limit_is_refused_before_it_is_sent(services, tenant):
    from interlude.domain.audit import AuditDraft

    items = [(f"X#{i:03}", {"Put": {"Item": {"pk": {"S": f"T#{tenant}#X"}, "sk": {"S": f"X#{i:03}"}}}}) for i in range(99)]
    audit = AuditDraft(tenant, "test.write", {"subjectId": "admin"}, {"tenant": tenant}, "2026-12-02T00:00:00Z")
    sent = transaction_sizes(services.store.client)
    with pytest.raises(TooLarge) as refused:  # 99 items, the audit entry and its chain's head (and marker): > 100
        services.store.transact(items, audit)
    assert refused.value.code == "payload_too_large"
    assert refused.value.details == {"budget": "one transaction", "limit": 100, "unit": "items"}
    assert "one transaction holds at most 100" in refused.value.message
    assert sent == []  # refused here, not by DynamoDB (whose ValidationException the edge would answer with a 500)
    written = boto3.client("dynamodb").query(
        TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": f"T#{tenant}#X"}}
    )
    assert written["Items"] == []
    services.store.transact(items[:90], audit)  # under the limit it is written whole
    written = boto3.client("dynamodb").query(
        TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": f"T#{tenant}#X"}}
    )
    assert len(written["Items"]) == 90


def test_a_gate_resolves_when_what_follows_would_pass_one_transaction(services, admin, monkeypatch):
    """A path the budgets do not count that would write more items than one transaction holds: the decision lands
    and the run fails with interlude.budget_exceeded, instead of every resolve answering a 500."""
    gates = [{"id": f"g{i}", "typeId": "core.approvalGate", "config": {"title": "Next?"}} for i in range(5)]
    definition = {
        "nodes": [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Approve?"}}, *gates],
        "edges": [{"sourceNodeId": "gate", "targetNodeId": g["id"]} for g in gates],
        "variables": [{"name": "seed", "type": "string"}],
    }
    services.workflows.put_workflow(admin, "fan-out", WorkflowDefinition.model_validate(definition))
    fan_out = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "fan-out", "inputs": {"seed": SEED}}))
    ending = gated(services, admin, "approval", small())
    # Failing the fan-out run at its gate writes what ending a run there writes, give or take its audit chain's
    # pending marker (one item, written by a chain's first entry): one more than that still fits, and going on to
    # open five gates (five items more, less the open-runs counter an ending run writes) does not.
    sizes = transaction_sizes(services.store.client)
    assert services.decisions.resolve_interrupt(admin, ending, "gate", {"action": "accept"})["status"] == "completed"
    monkeypatch.setattr("interlude.store.transactions.TRANSACT_MAX_ITEMS", sizes[-1] + 1)
    answered = services.decisions.resolve_interrupt(admin, fan_out.runId, "gate", {"action": "accept"})
    assert answered["status"] == "failed"
    assert_decision_landed_and_run_failed(services, fan_out.runId, "interlude.budget_exceeded", "gate")
    state, _ = services.store.get_run(fan_out.runId)
    assert "one transaction" in state.error["message"]
    assert state.error["details"]["budget"] == "one transaction"
