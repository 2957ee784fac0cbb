"""Issue 14 item 4 against moto's DynamoDB: an eligible approver delegates their vote, for one interrupt (the
delegation route) or while out of office (the directory), where the tenant allows it; the delegated vote records
both principals, counts once, and the run's log shows the delegation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from interlude.app import directory, tenants
from interlude.app.delegation import delegate_vote
from interlude.app.service import Service
from interlude.domain import schemas
from interlude.domain.errors import Conflict, Forbidden, Invalid
from interlude.domain.models.principals import DelegateVoteRequest, PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.validation import parse
from interlude.engine.events import check
from interlude.store import Store, create_table
from tests.integration.conftest import signed_in

TABLE = "interlude-delegation-test"
ISSUER = "urn:interlude:api-key"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def service(monkeypatch) -> Service:
    monkeypatch.setenv("TABLE_NAME", TABLE)
    with mock_aws():
        create_table(boto3.client("dynamodb"), TABLE)
        yield Service(Store(TABLE), clock=Clock())


@pytest.fixture
def admin(service):
    return signed_in(service, "admin")


@pytest.fixture
def people(service):
    return {name: signed_in(service, name) for name in ("alice", "bob", "carol", "dave")}


def allow(service, allowed: bool = True) -> None:
    tenants.put_settings(service, "t1", TenantSettings(allowDelegation=allowed), "admin")


def gate_run(service, admin, workflow_id: str = "ship", **config) -> str:
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", **config}}]
    service.put_workflow(admin, workflow_id, WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    return service.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow_id})).runId


def delegate(service, who, run_id: str, to: str) -> dict:
    return delegate_vote(service, who, run_id, "gate", DelegateVoteRequest(delegate=to))


def votes(service, admin, run_id: str) -> list[dict]:
    state, _ = service.load_run("t1", run_id)
    # What the snapshot shows of the gate's votes (the public fields).
    return service.snapshot(state)["extensions"]["interlude.run"]["openInterrupts"]["gate"]["votes"]


def test_a_vote_delegated_for_one_interrupt_records_both_principals_and_counts_once(service, admin, people):
    allow(service)
    run_id = gate_run(service, admin, approversList=["alice", "bob", "carol"], requiredApprovals=2)

    # When alice hands her vote on this gate to dave (no approver himself)
    made = delegate(service, people["alice"], run_id, "dave")
    assert (made["principal"], made["delegate"]) == (f"{ISSUER}|alice", "dave")
    # Then the run's log records the delegation
    (logged,) = [e for e in service.store.read_events(run_id) if e["type"] == "interlude.vote-delegated"]
    assert logged["payload"] == {
        "nodeId": "gate",
        "interruptId": made["interruptId"],
        "principal": f"{ISSUER}|alice",
        "delegate": "dave",
        "at": made["at"],
    }
    check(logged)  # a valid RunEvent (a vendor type)

    # When dave votes, it is alice's vote, cast by dave
    assert service.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})["status"] == (
        "waiting-approval"
    )
    (handed, cast) = votes(service, admin, run_id)
    assert (handed["action"], handed["delegate"]) == ("delegate", "dave")
    assert (cast["principal"], cast["castBy"], cast["delegation"], cast["action"]) == (
        f"{ISSUER}|alice",
        f"{ISSUER}|dave",
        "interrupt",
        "accept",
    )
    (received,) = [e for e in service.store.read_events(run_id) if e["type"] == "approval.received"]
    assert received["payload"]["resolvedBy"]["subjectId"] == "dave"
    assert received["payload"]["resumeValue"]["decidedBy"] == "dave"
    assert received["payload"]["resumeValue"]["onBehalfOf"] == "alice"
    assert schemas.errors_of(schemas.payload_validator("approval.received"), received["payload"]) == []

    # And neither dave (again, for alice) nor alice herself can cast alice's vote a second time
    for who in ("dave", "alice"):
        with pytest.raises(Conflict) as twice:
            service.resolve_interrupt(people[who], run_id, "gate", {"action": "accept"})
        assert twice.value.code == "interlude.vote_already_cast"

    # And the quorum counts people: bob's accept is the second, and grants
    assert service.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == "completed"
    (resolved,) = [e for e in service.store.read_events(run_id) if e["type"] == "interrupt.resolved"]
    assert resolved["payload"]["decision"] == "granted"


def test_an_eligible_delegate_votes_for_themselves_and_once_for_the_delegator(service, admin, people):
    allow(service)
    run_id = gate_run(service, admin, approversList=["alice", "bob"], requiredApprovals=2)
    delegate(service, people["alice"], run_id, "bob")

    assert service.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == (
        "waiting-approval"
    )
    assert service.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == "completed"
    state, _ = service.load_run("t1", run_id)
    (closed,) = [e for e in service.store.read_events(run_id) if e["type"] == "interrupt.resolved"]
    assert closed["payload"]["resumeValue"]["onBehalfOf"] == "alice"
    assert state.status == "completed"


def test_a_delegate_cannot_vote_twice_for_the_same_person(service, admin, people):
    allow(service)
    run_id = gate_run(service, admin, approversList=["alice", "bob", "carol"], requiredApprovals=3)
    delegate(service, people["alice"], run_id, "dave")
    service.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    with pytest.raises(Conflict) as again:
        service.resolve_interrupt(people["dave"], run_id, "gate", {"action": "reject"})
    assert again.value.code == "interlude.vote_already_cast"
    assert [v["action"] for v in votes(service, admin, run_id)] == ["delegate", "accept"]


def test_delegation_needs_the_tenants_permission(service, admin, people):
    run_id = gate_run(service, admin, approversList=["alice", "bob"])
    with pytest.raises(Forbidden) as refused:
        delegate(service, people["alice"], run_id, "dave")
    assert refused.value.code == "interlude.delegation_not_allowed"
    # Allowed, delegated, then withdrawn by the tenant: the delegate may no longer vote
    allow(service)
    delegate(service, people["alice"], run_id, "dave")
    allow(service, False)
    with pytest.raises(Forbidden) as ineligible:
        service.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    assert ineligible.value.code == "forbidden"


def test_what_a_delegation_may_not_be(service, admin, people):
    allow(service)
    run_id = gate_run(service, admin, approversList=["alice", "bob"])
    # Only an eligible approver delegates
    with pytest.raises(Forbidden) as outsider:
        delegate(service, people["carol"], run_id, "dave")
    assert outsider.value.code == "forbidden"
    # Not to themselves
    with pytest.raises(Invalid) as itself:
        delegate(service, people["alice"], run_id, "alice")
    assert itself.value.details == {"field": "delegate"}
    # Once per gate
    delegate(service, people["alice"], run_id, "dave")
    with pytest.raises(Conflict) as twice:
        delegate(service, people["alice"], run_id, "carol")
    assert twice.value.code == "interlude.vote_already_cast"
    # Only an approval gate's vote
    nodes = [{"id": "gate", "typeId": "core.clarificationGate", "config": {"questions": [{"id": "q", "question": "?"}]}}]
    service.put_workflow(admin, "ask", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    asking = service.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ask"})).runId
    with pytest.raises(Invalid) as kind:
        delegate(service, people["alice"], asking, "dave")
    assert kind.value.details["field"] == "nodeId"


def test_an_out_of_office_delegate_votes_for_the_absent_approver(service, admin, people):
    allow(service)
    now = service.clock()
    away = {"delegate": "dave", "from": (now - timedelta(hours=1)).isoformat(), "until": (now + timedelta(days=2)).isoformat()}
    directory.put_principal(service, "t1", "alice", parse(PrincipalEntry, {"groups": ["finance"], "outOfOffice": away}, "entry"), "admin")
    directory.put_principal(service, "t1", "bob", parse(PrincipalEntry, {"groups": ["finance"]}, "entry"), "admin")
    run_id = gate_run(service, admin, approverGroupRefs=["finance"], requiredApprovals=2)

    # When dave (in no group) votes, it is alice's vote, by her out-of-office delegation
    service.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    (cast,) = votes(service, admin, run_id)
    assert (cast["principal"], cast["castBy"], cast["delegation"], cast["groups"]) == (
        f"{ISSUER}|alice",
        f"{ISSUER}|dave",
        "out-of-office",
        ["finance"],
    )
    # And once only
    with pytest.raises(Conflict):
        service.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    assert service.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == "completed"


def test_an_out_of_office_period_that_is_over_gives_the_delegate_nothing(service, admin, people):
    allow(service)
    now = service.clock()
    past = {"delegate": "dave", "from": (now - timedelta(days=3)).isoformat(), "until": (now - timedelta(days=1)).isoformat()}
    directory.put_principal(service, "t1", "alice", parse(PrincipalEntry, {"outOfOffice": past}, "entry"), "admin")
    run_id = gate_run(service, admin, approversList=["alice"])
    with pytest.raises(Forbidden) as refused:
        service.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    assert refused.value.code == "forbidden"
