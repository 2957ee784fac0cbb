"""Issue 14 item 1 against moto's DynamoDB: the principal directory, its limits, and group and role eligibility
resolved through it (a key's own groups and roles still count)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from interlude.app import directory
from interlude.app import inbox as approver_inbox
from interlude.app.service import Service
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
def service(world) -> Service:
    return Service(Store(world.table), clock=Clock())


def entry(**fields) -> PrincipalEntry:
    return parse(PrincipalEntry, fields, "directory entry")


def gate_run(service, admin, **config) -> str:
    nodes = [{"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship?", **config}}]
    service.put_workflow(admin, "ship", WorkflowDefinition.model_validate({"nodes": nodes, "edges": []}))
    return service.create_run(admin, CreateRunRequest.model_validate({"workflowId": "ship"})).runId


def test_an_entry_is_created_replaced_read_and_removed_with_its_memberships(service, tenant, other_tenant):
    created, stored = directory.put_principal(
        service, tenant, "alice", entry(displayName="Alice", email="alice@example.com", groups=["ops", "ops", "dev"]), "admin"
    )
    assert created
    assert stored["groups"] == ["dev", "ops"]
    assert stored["principalId"] == "alice"
    assert service.directory.members(tenant, "G", "ops", 10) == ["alice"]
    created, stored = directory.put_principal(service, tenant, "alice", entry(groups=["dev"], roles=["lead"]), "admin")
    assert not created
    assert "email" not in stored
    assert service.directory.members(tenant, "G", "ops", 10) == []
    assert service.directory.members(tenant, "R", "lead", 10) == ["alice"]
    assert directory.get_principal(service, tenant, "alice")["roles"] == ["lead"]
    # Another tenant's directory is another directory.
    with pytest.raises(DomainError) as refused:
        directory.get_principal(service, other_tenant, "alice")
    assert refused.value.code == "not_found"
    assert directory.delete_principal(service, tenant, "alice")["principalId"] == "alice"
    assert service.directory.members(tenant, "R", "lead", 10) == []
    assert service.directory.usage(tenant) == 0
    with pytest.raises(DomainError) as refused:
        directory.delete_principal(service, tenant, "alice")
    assert refused.value.code == "not_found"


def test_the_directory_size_is_refused_past_its_limit_before_anything_is_stored(service, monkeypatch, tenant):
    monkeypatch.setattr(directory, "MAX_DIRECTORY_PRINCIPALS", 2)
    directory.put_principal(service, tenant, "a", entry(), "admin")
    directory.put_principal(service, tenant, "b", entry(), "admin")
    directory.put_principal(service, tenant, "b", entry(displayName="B"), "admin")  # replacing takes no new place
    with pytest.raises(DomainError) as refused:
        directory.put_principal(service, tenant, "c", entry(groups=["ops"]), "admin")
    assert refused.value.code == "interlude.quota_exceeded"
    assert refused.value.details == {"quota": "principals", "limit": 2}
    assert service.directory.get(tenant, "c") is None
    assert service.directory.members(tenant, "G", "ops", 5) == []
    directory.delete_principal(service, tenant, "a")
    directory.put_principal(service, tenant, "c", entry(), "admin")


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


def test_group_and_role_eligibility_resolves_through_the_directory_and_the_keys_own_still_count(service, admin, tenant):
    run_id = gate_run(service, admin, approverGroupRefs=["ops"], approverRoleRefs=["lead"], requiredApprovals=3)
    directory.put_principal(service, tenant, "carol", entry(groups=["ops"]), "admin")
    directory.put_principal(service, tenant, "dave", entry(roles=["lead"]), "admin")
    outsider = signed_in(service, "eve")
    with pytest.raises(DomainError) as refused:
        service.resolve(*service.load_run(tenant, run_id), "gate", {"action": "accept"}, run_resolver(outsider))
    assert refused.value.code == "forbidden"
    for who in ("carol", "dave"):
        service.resolve(*service.load_run(tenant, run_id), "gate", {"action": "accept"}, run_resolver(signed_in(service, who)))
    # A key carrying the group itself is eligible without a directory entry.
    keyed = signed_in(service, "frank", groups=["ops"])
    # The inbox shows the gate to those the directory makes eligible, not to others.
    assert [i["nodeId"] for i in approver_inbox.inbox(service, keyed, 10, {}, None)["interrupts"]] == ["gate"]
    assert approver_inbox.inbox(service, outsider, 10, {}, None)["interrupts"] == []
    service.resolve(*service.load_run(tenant, run_id), "gate", {"action": "accept"}, run_resolver(keyed))
    state, _ = service.load_run(tenant, run_id)
    assert state.status == "completed"
    votes = service.store.read_events(run_id)
    resolved = [e for e in votes if e["type"] == "interrupt.resolved"]
    assert resolved, "the third vote completed the gate"


def test_recipients_are_the_audience_else_the_eligible_principals_in_the_gates_order(service, tenant):
    for who, groups in (("bob", ["ops"]), ("carol", ["ops", "dev"]), ("dan", ["dev"])):
        directory.put_principal(service, tenant, who, entry(groups=groups), "admin")
    store: DirectoryStore = service.directory
    data = {"approversList": ["alice", "urn:interlude:api-key|bob"], "approverGroupRefs": ["ops", "dev"]}
    assert directory.recipients(store, tenant, data) == (["alice", "bob", "carol", "dan"], False)
    audience = {**data, "audience": {"subjects": ["zoe"], "groups": ["dev"]}}
    assert directory.recipients(store, tenant, audience) == (["zoe", "carol", "dan"], False)


def test_recipients_past_the_limit_are_cut_and_said_so(service, monkeypatch, tenant):
    monkeypatch.setattr(directory, "MAX_RECIPIENTS", 2)
    for who in ("a", "b", "c"):
        directory.put_principal(service, tenant, who, entry(groups=["ops"]), "admin")
    assert directory.recipients(service.directory, tenant, {"approverGroupRefs": ["ops"]}) == (["a", "b"], True)
