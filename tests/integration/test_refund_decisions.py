"""The refund workflow of examples/ through the service on the shared moto world, with its real outbox and actions
worker and a payment receiver on 127.0.0.1 (issue 28, item 4): a refine sends the refund back to its draft with the
feedback and nothing is paid; a rejection reaches the reject branch with its comment and decider; an approval pays
once, which is what makes "no call" mean something."""

from __future__ import annotations

import json

import boto3
import pytest

from interlude.app.snapshots import snapshot as run_snapshot
from interlude.domain import formats
from interlude.domain.errors import Invalid
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.store import attributes as a
from interlude.store.layout import workflow_pk, workflow_version_sk
from tests.integration import test_actions as actions
from tests.integration.conftest import signed_in, state_of
from tests.support.engine import refund_definition
from tests.support.moto_world import TABLE

# test_actions' world: the loopback switch on, no backoff, a payment receiver; its outbox and worker pumps.
aws, services, receiver, settle = actions.aws, actions.services, actions.receiver, actions.settle

REFINE = {"action": "refine", "refineFeedback": {"scope": "whole", "text": "make it 30, not 40"}}


def registered(services, admin, pay_url: str) -> str:
    definition = refund_definition()
    pay = next(n for n in definition["nodes"] if n["id"] == "pay")
    pay["config"]["url"] = pay_url
    services.workflows.put_workflow(admin, definition["id"], WorkflowDefinition.model_validate(definition))
    return definition["id"]


def refund_run(services, admin, workflow_id: str, order: str = "o-1") -> str:
    request = {"workflowId": workflow_id, "inputs": {"orderId": order, "amount": 40, "reason": "damaged"}}
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate(request)).runId


def test_refine_loops_back_with_the_feedback_and_pays_nothing_until_approved(services, admin, aws, receiver):
    workflow_id = registered(services, admin, receiver.url("/refunds"))
    run_id = refund_run(services, admin, workflow_id)
    ana = signed_in(services, "ana")

    # When the approver asks for changes, and the outbox and the actions worker run
    answer = services.decisions.resolve_interrupt(ana, run_id, "review", REFINE)
    settle(aws)

    # Then the run drafted again with the feedback and asks again, and the payment receiver heard nothing
    assert answer["status"] == "waiting-approval"
    state = state_of(services, run_id)
    assert state.nodes["draft"].visits == 2
    assert state.outputs["draft"]["changesAsked"] == "make it 30, not 40"
    assert state.interrupts["review"].payload["data"]["artifactData"]["changesAsked"] == "make it 30, not 40"
    assert state.outputs["review"]["action"] == "refine"
    assert state.outputs["review"]["decidedBy"] == "ana"
    assert receiver.hits == []
    assert state.nodes["pay"].visits == 0

    # When the new draft is approved, it is paid, once
    services.decisions.resolve_interrupt(ana, run_id, "review", {"action": "accept"})
    settle(aws)
    (hit,) = receiver.hits
    assert json.loads(hit.body) == {"orderId": "o-1", "amount": 40}
    assert state_of(services, run_id).status == "completed"


def test_a_rejection_reaches_its_branch_with_comment_and_decider_and_pays_nothing(services, admin, aws, receiver):
    workflow_id = registered(services, admin, receiver.url("/refunds"))
    run_id = refund_run(services, admin, workflow_id)

    services.decisions.resolve_interrupt(signed_in(services, "ana"), run_id, "review", {"action": "reject", "comment": "outside the policy"})
    settle(aws)

    state = state_of(services, run_id)
    assert state.outputs["tell-requester"] == {
        "orderId": "o-1",
        "outcome": "reject",
        "refusedBy": "ana",
        "why": "outside the policy",
    }
    assert state.status == "completed"
    assert state.nodes["pay"].status == "skipped"
    assert receiver.hits == []
    # The protocol's record is unchanged: the gate failed with approval_rejected, and the snapshot shows its outcome
    snapshot = run_snapshot(state)
    assert snapshot["nodeStates"]["review"]["status"] == "failed"
    assert snapshot["variables"]["review"]["comment"] == "outside the policy"


def test_a_definition_with_conditions_is_stored_in_a_format_the_release_before_refuses(services, admin, aws, receiver):
    workflow_id = registered(services, admin, receiver.url())
    item = boto3.client("dynamodb").get_item(
        TableName=TABLE, Key=a.key(workflow_pk(admin.tenant, workflow_id), workflow_version_sk(1))
    )["Item"]
    assert item[formats.FORMAT_FIELD] == a.n(formats.CONDITIONED_WORKFLOW)
    assert formats.CONDITIONED_WORKFLOW > 1  # the release before read format 1 only
    # A definition without conditions is written as before, without a format
    plain = {"id": "plain", "nodes": [{"id": "a", "typeId": "core.noop"}]}
    services.workflows.put_workflow(admin, "plain", WorkflowDefinition.model_validate(plain))
    item = boto3.client("dynamodb").get_item(TableName=TABLE, Key=a.key(workflow_pk(admin.tenant, "plain"), workflow_version_sk(1)))[
        "Item"
    ]
    assert formats.FORMAT_FIELD not in item


def test_registration_refuses_a_refine_no_edge_routes_naming_the_gate(services, admin):
    definition = refund_definition()
    definition["edges"] = [e for e in definition["edges"] if e["id"] != "review-changes"]
    with pytest.raises(Invalid) as refused:
        services.workflows.put_workflow(admin, "no-route", WorkflowDefinition.model_validate(definition))
    (problem,) = refused.value.details["errors"]
    assert problem["path"] == "nodes/2/config/actions"
    assert "'review' offers refine" in problem["message"]
