"""Issue 14 item 4 against moto's DynamoDB: an eligible approver delegates their vote, for one interrupt (the
delegation route) or while out of office (the directory), where the tenant allows it; the delegated vote records
both principals, counts once, and the run's log shows the delegation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from interlude import wiring
from interlude.api.inbox import inbox_query
from interlude.app import facts
from interlude.app.snapshots import snapshot
from interlude.composition import Services
from interlude.domain import schemas
from interlude.domain.errors import Conflict, Forbidden, Invalid, NotFound
from interlude.domain.models.principal_requests import DelegateVoteRequest
from interlude.domain.models.principals import MAX_DELEGATORS_PER_DELEGATE, PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.validation import parse
from interlude.engine.events import check
from interlude.store.facade import Store
from interlude.store.sharded import family_pks
from tests.integration.conftest import signed_in, tenant_of_test

ISSUER = "urn:interlude:api-key"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def services(world) -> Services:
    return Services(Store(world.table, world.entries_table), clock=Clock())


@pytest.fixture
def people(services):
    return {name: signed_in(services, name) for name in ("alice", "bob", "carol", "dave")}


def allow(services, allowed: bool = True) -> None:
    services.tenants.put_settings(tenant_of_test(), TenantSettings(allowDelegation=allowed), "admin")


def gate_run(services, admin, workflow_id: str = "ship", **config) -> str:
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", **config}}]
    services.workflows.put_workflow(admin, workflow_id, WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": workflow_id})).runId


def delegate(services, who, run_id: str, to: str) -> dict:
    return services.delegation.delegate_vote(who, run_id, "gate", DelegateVoteRequest(delegate=to))


def votes(services, admin, run_id: str) -> list[dict]:
    state, _ = services.runs.load_run(admin.tenant, run_id)
    # What the snapshot shows of the gate's votes (the public fields).
    return snapshot(state)["extensions"]["interlude.run"]["openInterrupts"]["gate"]["votes"]


def test_a_vote_delegated_for_one_interrupt_records_both_principals_and_counts_once(services, admin, people):
    allow(services)
    run_id = gate_run(services, admin, approversList=["alice", "bob", "carol"], requiredApprovals=2)

    # When alice hands her vote on this gate to dave (no approver himself)
    made = delegate(services, people["alice"], run_id, "dave")
    assert (made["principal"], made["delegate"]) == (f"{ISSUER}|alice", "dave")
    # Then the run's log records the delegation
    (logged,) = [e for e in services.store.read_events(run_id) if e["type"] == "interlude.vote-delegated"]
    assert logged["payload"] == {
        "nodeId": "gate",
        "interruptId": made["interruptId"],
        "principal": f"{ISSUER}|alice",
        "delegate": "dave",
        "at": made["at"],
    }
    check(logged)  # a valid RunEvent (a vendor type)

    # When dave votes, it is alice's vote, cast by dave
    assert services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})["status"] == (
        "waiting-approval"
    )
    (handed, cast) = votes(services, admin, run_id)
    assert (handed["action"], handed["delegate"]) == ("delegate", "dave")
    assert (cast["principal"], cast["castBy"], cast["delegation"], cast["action"]) == (
        f"{ISSUER}|alice",
        f"{ISSUER}|dave",
        "interrupt",
        "accept",
    )
    (received,) = [e for e in services.store.read_events(run_id) if e["type"] == "approval.received"]
    assert received["payload"]["resolvedBy"]["subjectId"] == "dave"
    assert received["payload"]["resumeValue"]["decidedBy"] == "dave"
    assert received["payload"]["resumeValue"]["onBehalfOf"] == "alice"
    assert schemas.errors_of(schemas.payload_validator("approval.received"), received["payload"]) == []

    # And neither dave (again, for alice) nor alice herself can cast alice's vote a second time
    for who in ("dave", "alice"):
        with pytest.raises(Conflict) as twice:
            services.decisions.resolve_interrupt(people[who], run_id, "gate", {"action": "accept"})
        assert twice.value.code == "interlude.vote_already_cast"

    # And the quorum counts people: bob's accept is the second, and grants
    assert services.decisions.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == "completed"
    (resolved,) = [e for e in services.store.read_events(run_id) if e["type"] == "interrupt.resolved"]
    assert resolved["payload"]["decision"] == "granted"


def test_an_eligible_delegate_votes_for_themselves_and_once_for_the_delegator(services, admin, people, tenant):
    allow(services)
    run_id = gate_run(services, admin, approversList=["alice", "bob"], requiredApprovals=2)
    delegate(services, people["alice"], run_id, "bob")

    assert services.decisions.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == (
        "waiting-approval"
    )
    assert services.decisions.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == "completed"
    state, _ = services.runs.load_run(tenant, run_id)
    (closed,) = [e for e in services.store.read_events(run_id) if e["type"] == "interrupt.resolved"]
    assert closed["payload"]["resumeValue"]["onBehalfOf"] == "alice"
    assert state.status == "completed"


def test_a_delegate_cannot_vote_twice_for_the_same_person(services, admin, people):
    allow(services)
    run_id = gate_run(services, admin, approversList=["alice", "bob", "carol"], requiredApprovals=3)
    delegate(services, people["alice"], run_id, "dave")
    services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    with pytest.raises(Conflict) as again:
        services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "reject"})
    assert again.value.code == "interlude.vote_already_cast"
    assert [v["action"] for v in votes(services, admin, run_id)] == ["delegate", "accept"]


def test_delegation_needs_the_tenants_permission(services, admin, people):
    run_id = gate_run(services, admin, approversList=["alice", "bob"])
    with pytest.raises(Forbidden) as refused:
        delegate(services, people["alice"], run_id, "dave")
    assert refused.value.code == "interlude.delegation_not_allowed"
    # Allowed, delegated, then withdrawn by the tenant: the delegate may no longer vote
    allow(services)
    delegate(services, people["alice"], run_id, "dave")
    allow(services, False)
    with pytest.raises(Forbidden) as ineligible:
        services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    assert ineligible.value.code == "forbidden"


def test_what_a_delegation_may_not_be(services, admin, people):
    allow(services)
    run_id = gate_run(services, admin, approversList=["alice", "bob"])
    # Only an eligible approver delegates
    with pytest.raises(Forbidden) as outsider:
        delegate(services, people["carol"], run_id, "dave")
    assert outsider.value.code == "forbidden"
    # Not to themselves
    with pytest.raises(Invalid) as itself:
        delegate(services, people["alice"], run_id, "alice")
    assert itself.value.details == {"field": "delegate"}
    # Once per gate
    delegate(services, people["alice"], run_id, "dave")
    with pytest.raises(Conflict) as twice:
        delegate(services, people["alice"], run_id, "carol")
    assert twice.value.code == "interlude.vote_already_cast"
    # Only an approval gate's vote
    nodes = [{"id": "gate", "typeId": "core.clarificationGate", "config": {"questions": [{"id": "q", "question": "?"}]}}]
    services.workflows.put_workflow(admin, "ask", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    asking = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ask"})).runId
    with pytest.raises(Invalid) as kind:
        delegate(services, people["alice"], asking, "dave")
    assert kind.value.details["field"] == "nodeId"


def test_an_out_of_office_delegate_votes_for_the_absent_approver(services, admin, people, tenant):
    allow(services)
    now = services.clock()
    away = {"delegate": "dave", "from": (now - timedelta(hours=1)).isoformat(), "until": (now + timedelta(days=2)).isoformat()}
    services.directory.put_principal(tenant, "alice", parse(PrincipalEntry, {"groups": ["finance"], "outOfOffice": away}, "entry"), "admin")
    services.directory.put_principal(tenant, "bob", parse(PrincipalEntry, {"groups": ["finance"]}, "entry"), "admin")
    run_id = gate_run(services, admin, approverGroupRefs=["finance"], requiredApprovals=2)

    # When dave (in no group) votes, it is alice's vote, by her out-of-office delegation
    services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    (cast,) = votes(services, admin, run_id)
    assert (cast["principal"], cast["castBy"], cast["delegation"], cast["groups"]) == (
        f"{ISSUER}|alice",
        f"{ISSUER}|dave",
        "out-of-office",
        ["finance"],
    )
    # And once only
    with pytest.raises(Conflict):
        services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    assert services.decisions.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})["status"] == "completed"


def test_an_out_of_office_period_that_is_over_gives_the_delegate_nothing(services, admin, people, tenant):
    allow(services)
    now = services.clock()
    past = {"delegate": "dave", "from": (now - timedelta(days=3)).isoformat(), "until": (now - timedelta(days=1)).isoformat()}
    services.directory.put_principal(tenant, "alice", parse(PrincipalEntry, {"outOfOffice": past}, "entry"), "admin")
    run_id = gate_run(services, admin, approversList=["alice"])
    with pytest.raises(Forbidden) as refused:
        services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})
    assert refused.value.code == "forbidden"


# -- the delegate's inbox and the delegation items (issue 14 item 4, the delegate's view) -----------------------


def inbox_of(services, who, **query) -> dict[str, dict]:
    """The caller's inbox page, by run id."""
    page = services.inbox.inbox(who, *inbox_query({"limit": "100", **query}))
    return {i["runId"]: i for i in page["interrupts"]}


def away(services, delegate: str, **entry) -> dict:
    now = services.clock()
    return {
        **entry,
        "outOfOffice": {"delegate": delegate, "from": (now - timedelta(hours=1)).isoformat(), "until": (now + timedelta(days=1)).isoformat()},
    }


def put_entry(services, pid: str, entry: dict) -> None:
    services.directory.put_principal(tenant_of_test(), pid, parse(PrincipalEntry, entry, "entry"), "admin")


def test_a_gate_handed_to_a_delegate_is_in_their_inbox_on_behalf_of_the_delegator_until_decided(services, admin, people):
    allow(services)
    run_id = gate_run(services, admin, approversList=["alice", "bob"])
    assert run_id not in inbox_of(services, people["dave"])
    delegate(services, people["alice"], run_id, "dave")

    # The delegate (no approver himself) sees it, marked as alice's vote; so do the filtered pages
    listed = inbox_of(services, people["dave"])[run_id]
    assert listed["onBehalfOf"] == ["alice"]
    assert inbox_of(services, people["dave"], workflowId="ship")[run_id]["onBehalfOf"] == ["alice"]
    assert inbox_of(services, people["dave"], kind="approval")[run_id]["onBehalfOf"] == ["alice"]
    # alice may still cast her vote herself until dave has (first cast wins); bob has it as his own
    assert "onBehalfOf" not in inbox_of(services, people["alice"])[run_id]
    assert "onBehalfOf" not in inbox_of(services, people["bob"])[run_id]

    # When dave decides it, it leaves every inbox
    assert services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})["status"] == "completed"
    for who in ("alice", "bob", "dave"):
        assert run_id not in inbox_of(services, people[who]), who


def test_a_tenant_that_withdraws_delegation_takes_the_gate_out_of_the_delegates_inbox(services, admin, people):
    allow(services)
    run_id = gate_run(services, admin, approversList=["alice"])
    delegate(services, people["alice"], run_id, "dave")
    assert run_id in inbox_of(services, people["dave"])
    allow(services, False)
    assert run_id not in inbox_of(services, people["dave"])


def test_an_out_of_office_delegates_inbox_lists_the_absent_approvers_gates_by_name_group_and_role(
    services, admin, people
):
    allow(services)
    put_entry(services, "alice", away(services, "dave", groups=["finance"], roles=["cfo"]))
    by_group = gate_run(services, admin, "by-group", approverGroupRefs=["finance"])
    by_role = gate_run(services, admin, "by-role", approverRoleRefs=["cfo"])
    by_name = gate_run(services, admin, "by-name", approversList=["alice"])
    others = gate_run(services, admin, "others", approversList=["bob"])
    anyone = gate_run(services, admin, "anyone")

    page = inbox_of(services, people["dave"])
    for run_id in (by_group, by_role, by_name):
        assert page[run_id]["onBehalfOf"] == ["alice"]
    assert others not in page
    # A gate open to anyone is dave's own (a standing delegation covers gates that name the absent approver)
    assert "onBehalfOf" not in page[anyone]
    assert inbox_of(services, people["dave"], workflowId="by-group")[by_group]["onBehalfOf"] == ["alice"]

    # dave decides one for alice: it leaves his inbox and alice's
    services.decisions.resolve_interrupt(people["dave"], by_group, "gate", {"action": "accept"})
    assert by_group not in inbox_of(services, people["dave"])
    alice = signed_in(services, "alice")
    assert by_group not in inbox_of(services, alice)
    assert by_name in inbox_of(services, alice)

    # When alice is back (her entry without outOfOffice), dave's inbox has none of hers
    put_entry(services, "alice", {"groups": ["finance"], "roles": ["cfo"]})
    assert set(inbox_of(services, people["dave"])) == {anyone}


def test_a_delegate_stands_in_for_at_most_five_principals(services, admin, people, tenant):
    for n in range(MAX_DELEGATORS_PER_DELEGATE):
        put_entry(services, f"p{n}", away(services, "dave"))
    with pytest.raises(Forbidden) as refused:
        put_entry(services, "p-extra", away(services, "dave"))
    assert refused.value.code == "interlude.quota_exceeded"
    assert refused.value.details == {
        "quota": "delegatorsPerDelegate",
        "limit": MAX_DELEGATORS_PER_DELEGATE,
        "field": "outOfOffice.delegate",
    }
    # Nothing of the refused entry was stored
    with pytest.raises(NotFound):
        services.directory.get_principal(tenant, "p-extra")
    # Rewriting one of the five keeps its place; moving it to another delegate, or removing it, frees one
    put_entry(services, "p0", away(services, "dave", displayName="P zero"))
    put_entry(services, "p0", away(services, "carol"))
    put_entry(services, "p-extra", away(services, "dave"))
    services.directory.delete_principal(tenant, "p1")
    put_entry(services, "p-late", away(services, "dave"))
    delegators = {d["principalId"] for d in services.directory_records.delegations(tenant, "dave", 10)}
    assert delegators == {"p2", "p3", "p4", "p-extra", "p-late"}
    assert [d["principalId"] for d in services.directory_records.delegations(tenant, "carol", 10)] == ["p0"]


def test_an_out_of_office_period_that_has_ended_gives_up_its_place_to_a_new_one(services, admin, people, tenant):
    now = services.clock()
    ended = {"delegate": "dave", "from": (now - timedelta(days=2)).isoformat(), "until": (now + timedelta(hours=1)).isoformat()}
    put_entry(services, "p0", {"groups": ["finance"], "outOfOffice": ended})
    for n in range(1, MAX_DELEGATORS_PER_DELEGATE):
        put_entry(services, f"p{n}", {"outOfOffice": {"delegate": "dave"}})  # no end
    services.clock.now += timedelta(hours=2)  # p0's period has ended; the four others hold
    allow(services)
    assert [d.principal for d in facts.delegators_of(services.directory_records, tenant, "dave", services.clock())] == [
        f"{ISSUER}|p{n}" for n in range(1, MAX_DELEGATORS_PER_DELEGATE)
    ]

    put_entry(services, "p-new", away(services, "dave"))  # at the limit, counting the ended period: accepted

    delegators = {d["principalId"] for d in services.directory_records.delegations(tenant, "dave", 10)}
    assert delegators == {f"p{n}" for n in range(1, MAX_DELEGATORS_PER_DELEGATE)} | {"p-new"}
    p0 = services.directory.get_principal(tenant, "p0")
    assert "outOfOffice" not in p0  # the ended period is removed from its entry; the rest of it stays
    assert p0["groups"] == ["finance"]
    assert services.directory_records.get(tenant, "p0")["updatedBy"] == "interlude:out-of-office-ended"
    # Five periods that have not ended: the next is refused as before, and none of theirs is touched
    with pytest.raises(Forbidden) as refused:
        put_entry(services, "p-extra", away(services, "dave"))
    assert refused.value.details["quota"] == "delegatorsPerDelegate"
    assert services.directory.get_principal(tenant, "p1")["outOfOffice"] == {"delegate": "dave"}
    # The count still tracks the items: one leaving makes room for exactly one
    put_entry(services, "p1", {})
    put_entry(services, "p-extra", away(services, "dave"))
    with pytest.raises(Forbidden):
        put_entry(services, "p-more", away(services, "dave"))


def test_the_delegates_inbox_entry_is_written_when_the_delegation_is_recorded_not_at_each_later_vote(
    services, admin, people, tenant
):
    allow(services)
    run_id = gate_run(services, admin, approversList=["alice", "bob", "carol", "erin"], requiredApprovals=4)
    written: list[str] = []  # the index partitions of the inbox entries each request puts

    def count(params, **_):
        for requests in params.get("RequestItems", {}).values():
            written.extend(r["PutRequest"]["Item"]["pk"]["S"] for r in requests if "PutRequest" in r)

    services.store.client.meta.events.register("provide-client-params.dynamodb.BatchWriteItem", count)

    daves = set(family_pks(tenant, wiring.INBOX, "P#dave"))

    def dave_entries() -> int:
        taken = sum(pk in daves for pk in written)
        written.clear()
        return taken

    delegate(services, people["alice"], run_id, "dave")
    assert dave_entries() == 1
    services.decisions.resolve_interrupt(people["bob"], run_id, "gate", {"action": "accept"})
    assert dave_entries() == 0  # was 1: every later vote put the delegate's entry again
    delegate(services, signed_in(services, "erin"), run_id, "dave")
    assert dave_entries() == 0  # a second delegation to the same delegate: the entry is there already
    services.decisions.resolve_interrupt(people["dave"], run_id, "gate", {"action": "accept"})  # for alice
    assert dave_entries() == 0
    assert inbox_of(services, people["dave"])[run_id]["onBehalfOf"] == ["erin"]
    services.decisions.resolve_interrupt(people["carol"], run_id, "gate", {"action": "accept"})
    assert dave_entries() == 0
    assert run_id in inbox_of(services, people["dave"])
