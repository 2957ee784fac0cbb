"""Issue 14 item 1 against moto's DynamoDB: the principal directory, its limits, and group and role eligibility
resolved through it (a key's own groups and roles still count)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from interlude.app import directory, facts
from interlude.composition import Services
from interlude.domain.errors import DomainError
from interlude.domain.models.principals import MAX_GROUPS_PER_PRINCIPAL, PrincipalEntry
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.validation import parse
from interlude.rules.auth import run_resolver
from interlude.store.directory import DirectoryStore
from interlude.store.facade import Store
from tests.integration.conftest import signed_in


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


@pytest.fixture
def services(world) -> Services:
    return Services(Store(world.table, world.entries_table), clock=Clock())


def entry(**fields) -> PrincipalEntry:
    return parse(PrincipalEntry, fields, "directory entry")


def gate_run(services, admin, **config) -> str:
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", **config}}]
    services.workflows.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"})).runId


def test_an_entry_is_created_replaced_read_and_removed_with_its_memberships(services, tenant, other_tenant):
    created, stored = services.directory.put_principal(tenant, "alice", entry(displayName="Alice", email="alice@example.com", groups=["ops", "ops", "dev"]), "admin"
    )
    assert created
    assert stored["groups"] == ["dev", "ops"]
    assert stored["principalId"] == "alice"
    assert services.directory_records.members(tenant, "G", "ops", 10) == ["alice"]
    created, stored = services.directory.put_principal(tenant, "alice", entry(groups=["dev"], roles=["lead"]), "admin")
    assert not created
    assert "email" not in stored
    assert services.directory_records.members(tenant, "G", "ops", 10) == []
    assert services.directory_records.members(tenant, "R", "lead", 10) == ["alice"]
    assert services.directory.get_principal(tenant, "alice")["roles"] == ["lead"]
    # Another tenant's directory is another directory.
    with pytest.raises(DomainError) as refused:
        services.directory.get_principal(other_tenant, "alice")
    assert refused.value.code == "not_found"
    assert services.directory.delete_principal(tenant, "alice")["principalId"] == "alice"
    assert services.directory_records.members(tenant, "R", "lead", 10) == []
    assert services.directory_records.usage(tenant) == 0
    with pytest.raises(DomainError) as refused:
        services.directory.delete_principal(tenant, "alice")
    assert refused.value.code == "not_found"


def test_the_directory_size_is_refused_past_its_limit_before_anything_is_stored(services, monkeypatch, tenant):
    monkeypatch.setattr(directory, "MAX_DIRECTORY_PRINCIPALS", 2)
    services.directory.put_principal(tenant, "a", entry(), "admin")
    services.directory.put_principal(tenant, "b", entry(), "admin")
    services.directory.put_principal(tenant, "b", entry(displayName="B"), "admin")  # replacing takes no new place
    with pytest.raises(DomainError) as refused:
        services.directory.put_principal(tenant, "c", entry(groups=["ops"]), "admin")
    assert refused.value.code == "interlude.quota_exceeded"
    assert refused.value.details == {"quota": "principals", "limit": 2}
    assert services.directory_records.get(tenant, "c") is None
    assert services.directory_records.members(tenant, "G", "ops", 5) == []
    services.directory.delete_principal(tenant, "a")
    services.directory.put_principal(tenant, "c", entry(), "admin")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"groups": [f"g{i}" for i in range(MAX_GROUPS_PER_PRINCIPAL + 1)]}, "groups"),
        ({"timeZone": "Mars/Olympus"}, "timeZone"),
        ({"email": "not-an-address"}, "email"),
        ({"channels": ["pager"]}, "channels/0"),
        ({"outOfOffice": {"delegate": "bob", "from": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}}, "outOfOffice"),
        ({"nickname": "al"}, "nickname"),
    ],
)
def test_an_entry_outside_its_limits_is_refused_naming_the_field(fields, field):
    with pytest.raises(DomainError) as refused:
        entry(**fields)
    assert refused.value.code == "validation_error"
    assert refused.value.details["errors"][0]["path"].startswith(field), refused.value.details


def test_group_and_role_eligibility_resolves_through_the_directory_and_the_keys_own_still_count(services, admin, tenant):
    run_id = gate_run(services, admin, approverGroupRefs=["ops"], approverRoleRefs=["lead"], requiredApprovals=3)
    services.directory.put_principal(tenant, "carol", entry(groups=["ops"]), "admin")
    services.directory.put_principal(tenant, "dave", entry(roles=["lead"]), "admin")
    outsider = signed_in(services, "eve")
    with pytest.raises(DomainError) as refused:
        services.decisions.resolve(*services.runs.load_run(tenant, run_id), "gate", {"action": "accept"}, run_resolver(outsider))
    assert refused.value.code == "forbidden"
    for who in ("carol", "dave"):
        services.decisions.resolve(*services.runs.load_run(tenant, run_id), "gate", {"action": "accept"}, run_resolver(signed_in(services, who)))
    # A key carrying the group itself is eligible without a directory entry.
    keyed = signed_in(services, "frank", groups=["ops"])
    # The inbox shows the gate to those the directory makes eligible, not to others.
    assert [i["nodeId"] for i in services.inbox.inbox(keyed, 10, {}, None)["interrupts"]] == ["gate"]
    assert services.inbox.inbox(outsider, 10, {}, None)["interrupts"] == []
    services.decisions.resolve(*services.runs.load_run(tenant, run_id), "gate", {"action": "accept"}, run_resolver(keyed))
    state, _ = services.runs.load_run(tenant, run_id)
    assert state.status == "completed"
    votes = services.store.read_events(run_id)
    resolved = [e for e in votes if e["type"] == "interrupt.resolved"]
    assert resolved, "the third vote completed the gate"


def test_recipients_are_the_audience_else_the_eligible_principals_in_the_gates_order(services, tenant):
    for who, groups in (("bob", ["ops"]), ("carol", ["ops", "dev"]), ("dan", ["dev"])):
        services.directory.put_principal(tenant, who, entry(groups=groups), "admin")
    store: DirectoryStore = services.directory_records
    data = {"approversList": ["alice", "urn:interlude:api-key|bob"], "approverGroupRefs": ["ops", "dev"]}
    assert facts.recipients(store, tenant, data) == (["alice", "bob", "carol", "dan"], False)
    audience = {**data, "audience": {"subjects": ["zoe"], "groups": ["dev"]}}
    assert facts.recipients(store, tenant, audience) == (["zoe", "carol", "dan"], False)


def test_recipients_past_the_limit_are_cut_and_said_so(services, monkeypatch, tenant):
    monkeypatch.setattr(facts, "MAX_RECIPIENTS", 2)
    for who in ("a", "b", "c"):
        services.directory.put_principal(tenant, who, entry(groups=["ops"]), "admin")
    assert facts.recipients(services.directory_records, tenant, {"approverGroupRefs": ["ops"]}) == (["a", "b"], True)
