"""Issue 3 against moto's DynamoDB: external events by correlation, the inbox query, tenant settings, credential
grants and the tenant-unique conversation claim, through the real services and store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
import pytest

from interlude import wiring
from interlude.api.inbox import inbox_query
from interlude.composition import Services
from interlude.domain.errors import DomainError, Invalid
from interlude.domain.ids import check_author_id
from interlude.domain.models.requests import CancelRunRequest, CreateRunRequest
from interlude.domain.models.tenant_requests import CredentialGrantRequest, PostEventRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.domain.validation import parse
from interlude.store.facade import Store
from interlude.store.transactions import LostRace
from tests.integration.conftest import signed_in
from tests.support.local_stack import wire


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)  # strictly increasing, like real time
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def services(world, clock) -> Services:
    return Services(Store(world.table, world.entries_table), clock=clock)


def external(node_id="wait", correlation=None, event_type="order.paid") -> dict:
    data = {"eventType": event_type, "correlation": correlation or {"orderId": "o-1"}}
    return {"id": node_id, "typeId": "core.interrupt", "config": {"kind": "external-event", "data": data}}


def approval(node_id="gate", **config) -> dict:
    return {"id": node_id, "typeId": "core.approvalGate", "config": {"title": "t", **config}}


def register(services, admin, wid, nodes, edges=()):
    services.workflows.put_workflow(admin, wid, WorkflowDefinition.model_validate({"nodes": nodes, "edges": list(edges)}))
    return wid


def raised_events(services, run_id):
    return [e for e in services.store.read_events(run_id) if e["type"] == "interrupt.requested"]


# -- external events -------------------------------------------------------------------------------


def test_an_event_resolves_every_waiting_interrupt_whose_type_and_correlation_match(services, admin):
    register(services, admin, "pay", [external()])
    runs = [services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId for _ in range(3)]
    other = register(services, admin, "other", [external(correlation={"orderId": "o-2"})])
    other_run = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": other})).runId
    result = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}, "payload": {"amount": 5}})
    )
    assert (result["matched"], result["resolved"], result["kept"]) == (3, 3, False)
    for run_id in runs:
        state, _ = services.store.get_run(run_id)
        assert state.status == "completed"
        value = state.outputs["wait"]
        assert value["payload"] == {"amount": 5}
        assert value["eventId"] == result["eventId"]
        resolved = [e for e in services.store.read_events(run_id) if e["type"] == "interrupt.resolved"][0]
        assert resolved["payload"]["kind"] == "external-event"
        assert resolved["payload"]["resolvedBy"]["subjectId"] == "admin"
    assert services.store.get_run(other_run)[0].status == "waiting-external"


@pytest.mark.parametrize(
    ("correlation", "matches"),
    [
        ({"orderId": "o-1", "status": "ok"}, True),
        ({"status": "ok", "orderId": "o-1"}, True),  # key order is irrelevant
        ({"orderId": "o-1"}, False),  # a subset is not a match
        ({"orderId": "o-1", "status": "ok", "x": 1}, False),  # nor a superset
        ({"orderId": "O-1", "status": "ok"}, False),
    ],
)
def test_correlation_matches_exactly(services, admin, correlation, matches):
    register(services, admin, "pay", [external(correlation={"orderId": "o-1", "status": "ok"})])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    result = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": correlation}))
    assert result["resolved"] == (1 if matches else 0)
    assert services.store.get_run(run_id)[0].status == ("completed" if matches else "waiting-external")


def test_types_matter_in_correlations_and_event_types_must_match(services, admin):
    register(services, admin, "pay", [external(correlation={"n": 1})])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    assert services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"n": "1"}}))["resolved"] == 0
    assert services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.shipped", "correlation": {"n": 1}}))["resolved"] == 0
    assert services.store.get_run(run_id)[0].status == "waiting-external"


def test_an_event_before_its_interrupt_is_kept_and_resolves_it_when_it_is_raised(services, admin):
    register(
        services, admin, "later", [approval("first"), external()], [{"sourceNodeId": "first", "targetNodeId": "wait"}]
    )
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "later"})).runId
    early = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}, "payload": 1})
    )
    assert (early["matched"], early["kept"]) == (0, True)
    services.decisions.resolve_interrupt(admin, run_id, "first", {"action": "accept"})
    assert services.store.get_run(run_id)[0].status == "waiting-external"
    # The outbox handler sees the interrupt.requested of that transition (as dispatch would) and resolves it.
    events = services.store.read_events(run_id)
    services.external_events.resolve_kept_events(run_id, events)
    state, _ = services.store.get_run(run_id)
    assert state.status == "completed"
    assert state.outputs["wait"]["eventId"] == early["eventId"]
    # Delivered again (at least once), it changes nothing.
    before = services.store.read_events(run_id)
    services.external_events.resolve_kept_events(run_id, events)
    assert services.store.read_events(run_id) == before


def test_an_events_numbers_reach_the_runs_it_resolves_as_its_sender_wrote_them(services, admin):
    register(services, admin, "paid", [external()])
    waiting = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "paid"})).runId
    register(services, admin, "paid-later", [approval("first"), external()], [{"sourceNodeId": "first", "targetNodeId": "wait"}])
    later = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "paid-later"})).runId
    request = PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}, "payload": {"fee": 2.5}})
    # Two events: one for the run waiting now, one kept for the run that waits later.
    for _ in range(2):
        services.external_events.post_event(admin, request, {"2.5": "2.50"})
    services.decisions.resolve_interrupt(admin, later, "first", {"action": "accept"})
    services.external_events.resolve_kept_events(later, services.store.read_events(later))
    for run_id in (waiting, later):
        state, _ = services.store.get_run(run_id)
        assert (state.status, state.outputs["wait"]["payload"]) == ("completed", {"fee": 2.5})
        assert state.writtenNumbers == {"2.5": "2.50"}


def test_an_event_the_outbox_resumes_first_is_answered_as_resolving_it(services, admin, monkeypatch, tenant):
    """POST /events keeps the event before it reads the waiters, so dispatch (seeing the interrupt raised) can resume
    the gate with it in between: the answer still says this event resolved it, and the event is used, not kept."""
    register(services, admin, "pay", [external()])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    store = services.interactions
    read_waiters = store.waiters

    def outbox_first(tenant, hash_):
        found = read_waiters(tenant, hash_)
        services.external_events.resolve_kept_events(run_id, raised_events(services, run_id))
        return found

    monkeypatch.setattr(store, "waiters", outbox_first)
    result = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}, "payload": 7}))
    assert (result["matched"], result["resolved"], result["kept"]) == (1, 1, False)
    assert result["results"] == [{"runId": run_id, "nodeId": "wait", "outcome": "resolved", "status": "completed"}]
    state, _ = services.store.get_run(run_id)
    assert state.outputs["wait"]["eventId"] == result["eventId"]
    # Another event that finds the same gate already decided is told so.
    monkeypatch.setattr(store, "waiters", lambda tenant, hash_: read_waiters(tenant, hash_) or [{"runId": run_id, "nodeId": "wait", "interruptKey": raised_events(services, run_id)[0]["payload"]["key"]}])
    late = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}}))
    assert [r["outcome"] for r in late["results"]] == ["already-resolved"]
    assert late["kept"] is True


def test_a_kept_event_is_used_once(services, admin):
    register(services, admin, "pay", [external()])
    services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}}))
    first = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    services.external_events.resolve_kept_events(first, raised_events(services, first))
    second = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    services.external_events.resolve_kept_events(second, raised_events(services, second))
    assert services.store.get_run(first)[0].status == "completed"
    assert services.store.get_run(second)[0].status == "waiting-external"


def test_a_kept_event_past_the_tenants_retention_is_not_used(services, admin, clock, tenant):
    services.tenants.put_settings(tenant, TenantSettings.model_validate({"eventRetentionHours": 1}), "admin")
    register(services, admin, "pay", [external()])
    result = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}}))
    sent = datetime.fromisoformat(result["receivedAt"].replace("Z", "+00:00"))
    assert datetime.fromisoformat(result["expiresAt"].replace("Z", "+00:00")) - sent <= timedelta(hours=1)
    clock.now += timedelta(hours=1, minutes=1)
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    services.external_events.resolve_kept_events(run_id, raised_events(services, run_id))
    assert services.store.get_run(run_id)[0].status == "waiting-external"


def test_the_default_retention_is_24_hours_and_kept_events_carry_a_ttl(services, admin, world, tenant):
    result = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "e", "correlation": {}}))
    sent = datetime.fromisoformat(result["receivedAt"].replace("Z", "+00:00"))
    expires = datetime.fromisoformat(result["expiresAt"].replace("Z", "+00:00"))
    assert timedelta(hours=23, minutes=59) < expires - sent <= timedelta(hours=24)
    items = boto3.client("dynamodb").query(
        TableName=world.table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={
            ":pk": {
                "S": f"T#{tenant}#EV#{__import__('interlude.rules.interrupts.correlation', fromlist=['x']).correlation_hash('e', {})}"
            }
        },
    )["Items"]
    assert items
    assert items[0][wiring.TTL_ATTRIBUTE]["N"] == str(int(expires.timestamp()))


def test_a_closed_interrupt_no_longer_waits(services, admin):
    register(services, admin, "pay", [external()])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
    assert (
        services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}}))["matched"] == 0
    )


def test_events_stay_inside_their_tenant(services, admin, other_tenant):
    register(services, admin, "pay", [external()])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "pay"})).runId
    stranger = signed_in(services, "eve", tenant=other_tenant)
    assert (
        services.external_events.post_event(stranger, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}}))["matched"]
        == 0
    )
    assert services.store.get_run(run_id)[0].status == "waiting-external"


def test_an_event_failing_the_interrupts_resume_schema_is_refused_for_that_interrupt_only(services, admin):
    strict = external()
    strict["config"]["resumeSchema"] = {
        "type": "object",
        "required": ["payload"],
        "properties": {"payload": {"type": "integer"}},
    }
    register(services, admin, "strict", [strict])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "strict"})).runId
    result = services.external_events.post_event(admin, PostEventRequest.model_validate({"eventType": "order.paid", "correlation": {"orderId": "o-1"}, "payload": "x"})
    )
    assert result["results"][0]["outcome"] == "refused"
    assert result["kept"] is True
    assert services.store.get_run(run_id)[0].status == "waiting-external"


@pytest.mark.parametrize(
    "body",
    [
        {"eventType": "e", "correlation": {}, "payload": {"access_token": "abc"}},
        {"eventType": "e", "correlation": {"auth": "Bearer abcdefghijklmnopqrs"}},
    ],
)
def test_an_event_carrying_credential_material_is_refused(services, admin, body):
    with pytest.raises(Invalid) as refused:
        services.external_events.post_event(admin, PostEventRequest.model_validate(body))
    assert refused.value.code == "validation_error"
    assert refused.value.details["field"] in ("payload", "correlation")


def inbox(services, principal, query):
    # The query goes through the route's own parsing, as a request's would.
    return services.inbox.inbox(principal, *inbox_query(query))


# -- inbox -----------------------------------------------------------------------------------------


def test_the_inbox_lists_pending_interrupts_newest_first_with_an_opaque_cursor(services, admin):
    register(services, admin, "one", [approval(requiredApprovals=2)])
    run_ids = [services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"})).runId for _ in range(5)]
    page = inbox(services, admin, {"limit": "2"})
    assert [i["runId"] for i in page["interrupts"]] == run_ids[::-1][:2]
    seen = [i["runId"] for i in page["interrupts"]]
    while page["nextCursor"]:
        page = inbox(services, admin, {"limit": "2", "cursor": page["nextCursor"]})
        seen += [i["runId"] for i in page["interrupts"]]
    assert seen == run_ids[::-1]


def test_the_inbox_filters_by_kind_workflow_and_run(services, admin):
    register(services, admin, "a", [approval()])
    register(
        services,
        admin,
        "c",
        [{"id": "q", "typeId": "core.clarificationGate", "config": {"questions": [{"id": "x", "question": "?"}]}}],
    )
    a = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "a"})).runId
    c = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "c"})).runId
    assert [i["runId"] for i in inbox(services, admin, {"kind": "clarification"})["interrupts"]] == [c]
    assert [i["runId"] for i in inbox(services, admin, {"workflowId": "a"})["interrupts"]] == [a]
    assert [i["runId"] for i in inbox(services, admin, {"runId": wire(a)})["interrupts"]] == [a]


def test_the_inbox_shows_only_what_the_caller_may_decide_and_the_votes_so_far(services, admin):
    register(services, admin, "list", [approval(approversList=["bob"])])
    register(services, admin, "group", [approval(approverGroupRefs=["finance"])])
    register(services, admin, "role", [approval(approverRoleRefs=["cfo"])])
    register(services, admin, "quorum", [approval(requiredApprovals=2)])
    runs = {w: services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": w})).runId for w in ("list", "group", "role", "quorum")}
    bob = signed_in(services, "bob")
    fin = signed_in(services, "fay", groups=["finance"])
    cfo = signed_in(services, "cat", roles=["cfo"])

    def visible(principal):
        return {i["workflowId"] for i in inbox(services, principal, {})["interrupts"]}

    assert visible(bob) == {"list", "quorum"}
    assert visible(fin) == {"group", "quorum"}
    assert visible(cfo) == {"role", "quorum"}
    services.decisions.resolve_interrupt(bob, runs["quorum"], "gate", {"action": "accept"})
    assert visible(bob) == {"list"}  # bob has cast his vote on the quorum gate
    quorum = next(i for i in inbox(services, fin, {})["interrupts"] if i["workflowId"] == "quorum")
    assert [(v["principal"], v["action"], v["surface"]) for v in quorum["votes"]] == [
        ("urn:interlude:api-key|bob", "accept", "run")
    ]
    assert quorum["votes"][0]["at"]
    services.decisions.resolve_interrupt(fin, runs["quorum"], "gate", {"action": "accept"})
    assert "quorum" not in visible(cfo)  # resolved: out of every inbox


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"status": "resolved"}, "status"),
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"limit": "²"}, "limit"),
        ({"kind": "nope"}, "kind"),
        ({"workflowId": "bad id"}, "workflowId"),
        ({"runId": "nope"}, "runId"),
        ({"cursor": "!!"}, "cursor"),
        ({"cursor": "eyJhIjoxfQ"}, "cursor"),
    ],
)
def test_the_inbox_refuses_bad_queries(services, admin, query, field):
    with pytest.raises(DomainError) as refused:
        inbox(services, admin, query)
    assert (refused.value.code, refused.value.details["field"]) == ("validation_error", field)


def test_a_cursor_from_another_tenant_is_refused(services, admin, other_tenant, tenant):
    register(services, admin, "one", [approval()])
    for _ in range(3):
        services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"}))
    cursor = inbox(services, admin, {"limit": "1"})["nextCursor"]
    stranger = signed_in(services, "eve", tenant=other_tenant)
    with pytest.raises(DomainError) as refused:
        inbox(services, stranger, {"cursor": cursor})
    assert refused.value.details["field"] == "cursor"
    with pytest.raises(DomainError) as foreign:
        inbox(services, stranger, {"runId": f"{tenant}/AAAAAAAAAAAAAAAAAAAA"})
    assert foreign.value.code == "id_tenant_mismatch"


def test_the_inbox_reads_through_the_index_never_a_scan(services, admin, tenant):
    register(services, admin, "one", [approval()])
    services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "one"}))
    # Where the entries are (migration 0011's checkpoint: docs/adr/0170), asked once a process, before this page
    tables = services.inbox_index.read_tables()
    calls = []
    services.store.client.meta.events.register(
        "before-parameter-build.dynamodb",
        lambda **kw: calls.append(
            (kw["model"].name, kw["params"].get("ExpressionAttributeValues", {}).get(":pk", {}).get("S", "")[: len(f"T#{tenant}#INBOX#")])
        ),
    )
    assert len(inbox(services, admin, {})["interrupts"]) == 1
    # The caller's directory entry (its groups and roles), the out-of-office delegations naming the caller (issue
    # 14 item 4), one Query per partition of the families it may be eligible through, in each table an entry may be in
    # (docs/adr/0161), then the interrupts they name.
    streams = (wiring.INBOX.shards + 2) * len(tables)  # ANY (sharded), the caller's two spellings
    delegations = ("Query", f"T#{tenant}#DIR#D#")
    assert calls == [("GetItem", ""), delegations] + [("Query", f"T#{tenant}#INBOX#")] * streams + [("BatchGetItem", "")]


# -- tenant settings, override principals, credential grants ---------------------------------------


def test_a_tenant_override_principal_releases_a_gate_that_lets_overrides_bypass_quorum(services, admin, tenant):
    register(services, admin, "q", [approval(requiredApprovals=3, overrideBypassesQuorum=True)])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "q"})).runId
    ops = signed_in(services, "ops")
    assert services.decisions.resolve_interrupt(ops, run_id, "gate", {"action": "accept"})["status"] == "waiting-approval"
    run2 = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "q"})).runId
    services.tenants.put_settings(tenant, TenantSettings.model_validate({"overridePrincipals": ["ops"]}), "admin")
    assert services.decisions.resolve_interrupt(ops, run2, "gate", {"action": "accept"})["status"] == "completed"
    resolved = [e for e in services.store.read_events(run2) if e["type"] == "interrupt.resolved"][0]
    assert resolved["payload"]["decision"] == "overridden"
    assert services.tenants.get_settings(admin)["settings"] == {"overridePrincipals": ["ops"], "eventRetentionHours": 24, "limits": {}}


@pytest.mark.parametrize(
    "body", [{"overridePrincipals": "ops"}, {"eventRetentionHours": 0}, {"eventRetentionHours": 10000}, {"x": 1}, []]
)
def test_tenant_settings_are_validated(body):
    # Where PUT /tenant/settings and the CLI parse a body, before anything is stored.
    with pytest.raises(DomainError) as refused:
        parse(TenantSettings, body, "tenant settings")
    assert refused.value.code == "validation_error"


def test_authorized_needs_a_grant_in_the_tenants_credential_store(services, admin, tenant, other_tenant):
    cred = {
        "id": "cred",
        "typeId": "core.credentialGate",
        "config": {"provider": "github", "scopes": ["repo"], "connectUrl": "https://app.example/connect/github"},
    }
    register(services, admin, "cred", [cred])
    run_id = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "cred"})).runId
    with pytest.raises(DomainError) as refused:
        services.decisions.resolve_interrupt(admin, run_id, "cred", {"outcome": "authorized"})
    assert (refused.value.code, refused.value.details["field"]) == ("validation_error", "resumeValue")
    services.tenants.put_grant(other_tenant, "github", CredentialGrantRequest.model_validate({"scopes": ["repo"]}), "x")  # another tenant's grant does not count
    with pytest.raises(DomainError):
        services.decisions.resolve_interrupt(admin, run_id, "cred", {"outcome": "authorized"})
    services.tenants.put_grant(tenant, "github", CredentialGrantRequest.model_validate({"scopes": ["repo", "gist"]}), "admin")
    assert services.decisions.resolve_interrupt(admin, run_id, "cred", {"outcome": "authorized"})["status"] == "completed"


@pytest.mark.parametrize(
    ("provider", "body"),
    [("bad id", {"scopes": ["a"]}), ("gh", {"scopes": []}), ("gh", {"scopes": ["a"], "token": "t"})],
)
def test_credential_grants_are_validated_and_never_carry_material(provider, body):
    # What PUT /tenant/credential-grants/{provider} and the CLI check before anything is stored.
    def checked() -> CredentialGrantRequest:
        check_author_id(provider, "provider")
        return parse(CredentialGrantRequest, body, "credential grant")

    with pytest.raises(DomainError) as refused:
        checked()
    assert refused.value.code == "validation_error"


# -- conversations ---------------------------------------------------------------------------------


def test_a_conversation_id_is_claimed_tenant_wide_and_cannot_be_claimed_twice(services, admin, world, tenant):
    register(services, admin, "conv", [{"id": "open", "typeId": "core.conversationGate", "config": {"turn": "start"}}])
    state = services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "conv"}))
    cid = state.interrupts["open"].payload["data"]["conversationId"]
    item = boto3.client("dynamodb").get_item(
        TableName=world.table, Key={"pk": {"S": f"T#{tenant}#CONV#{cid}"}, "sk": {"S": "CONV"}}
    )
    assert item["Item"]["runId"]["S"] == state.runId
    # A transition that claimed the same id again (a bug, or a forged id) cannot commit.
    from interlude.engine.run import Transition, iso

    again, version = services.store.get_run(state.runId)
    with pytest.raises(LostRace):
        services.store.commit(Transition(state=again, claims=[cid]), version, iso(services.clock()))
    assert services.store.get_run(state.runId)[1] == version
