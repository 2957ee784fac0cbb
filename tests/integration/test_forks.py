"""Forks (issue 29 item 2), driven by openwop-client (and plain HTTP where it has no call) against the real api handler
behind an HTTP server on loopback: a replay settles every gate its source decided without asking again, a branch
asks again what was decided at or after its fork point, and every refusal carries its OpenWOP code."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from openwop_client import OpenwopClient
from openwop_client.errors import WopError
from openwop_client.types import CreateRunRequest, ForkRunRequest, ResolveInterruptRequest

from interlude.composition import Services
from interlude.domain.ids import mint_opaque, tenant_bound
from interlude.domain.models.workflow import WorkflowDefinition
from tests.integration.conftest import new_api_key, signed_in
from tests.support.local_stack import wire
from tests.support.moto_world import TABLE
from tests.support.stream import dispatch_runs

# Two approvals in a row, the second reached only when the first is accepted.
TWO_GATES = {
    "nodes": [
        {"id": "draft", "typeId": "core.approvalGate", "config": {"title": "Draft fine?"}},
        {"id": "publish", "typeId": "core.approvalGate", "config": {"title": "Publish?"}},
    ],
    "edges": [{"sourceNodeId": "draft", "targetNodeId": "publish"}],
}


@pytest.fixture
def client(services: Services, gateway: str) -> OpenwopClient:
    services.workflows.put_workflow(signed_in(services), "two-gates", WorkflowDefinition.model_validate(TWO_GATES))
    return OpenwopClient(gateway, new_api_key(services))


def events_of(client: OpenwopClient, run_id: str) -> list[Any]:
    return client.runs_poll_events(run_id, after_sequence=None).events


def decided_first_gate(client: OpenwopClient) -> str:
    """A run whose first gate was accepted: it waits at the second."""
    run_id = client.runs_create(CreateRunRequest(workflowId="two-gates")).runId
    client.interrupts_resolve_by_run(run_id, "draft", ResolveInterruptRequest(resumeValue={"action": "accept"}))
    assert client.runs_get(run_id).currentNodeId == "publish"
    return run_id


def sequence_of(events: list[Any], type_: str, node_id: str) -> int:
    return next(e.sequence for e in events if e.type == type_ and (e.payload or {}).get("nodeId") == node_id)


def test_a_replay_settles_the_decided_gate_as_decided_and_waits_where_its_source_waits(client):
    source = decided_first_gate(client)

    forked = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))

    assert (forked.sourceRunId, forked.mode, forked.fromSeq) == (source, "replay", 0)
    assert forked.status == "waiting-approval"
    assert forked.eventsUrl.endswith(f"/runs/{wire(forked.runId)}/events")
    fork = client.runs_get(forked.runId)
    assert fork.currentNodeId == "publish"
    events = events_of(client, forked.runId)
    # The first gate was not asked again: no interrupt raised for it; its recorded decision landed as it was made.
    asked = [e.payload["nodeId"] for e in events if e.type == "node.suspended"]
    assert asked == ["publish"]
    (resolved,) = [e for e in events if e.type == "interrupt.resolved"]
    (original,) = [e for e in events_of(client, source) if e.type == "interrupt.resolved"]
    assert resolved.payload["resumeValue"] == original.payload["resumeValue"]
    assert resolved.payload["action"] == "accept"
    assert resolved.payload["decision"] == "granted"


def test_a_branch_asks_again_what_was_decided_at_or_after_its_fork_point(client):
    source = decided_first_gate(client)
    decided_at = sequence_of(events_of(client, source), "interrupt.resolved", "draft")

    before = client.runs_fork(source, ForkRunRequest(fromSeq=decided_at, mode="branch"))
    after = client.runs_fork(source, ForkRunRequest(fromSeq=decided_at + 1, mode="branch"))

    assert client.runs_get(before.runId).currentNodeId == "draft"
    assert client.runs_get(after.runId).currentNodeId == "publish"
    assert (before.fromSeq, after.fromSeq) == (decided_at, decided_at + 1)


def test_fork_and_source_are_linked_both_ways(client, gateway, services):
    source = decided_first_gate(client)
    forked = client.runs_fork(source, ForkRunRequest(fromSeq=1, mode="branch"))

    headers = {"Authorization": f"Bearer {new_api_key(services)}"}
    fork = requests.get(f"{gateway}/runs/{wire(forked.runId)}", headers=headers, timeout=10).json()
    source_snapshot = requests.get(f"{gateway}/runs/{wire(source)}", headers=headers, timeout=10).json()
    assert fork["extensions"]["interlude.run"]["ancestry"] == {
        "sourceRunId": source, "fromSeq": 1, "mode": "branch", "redrive": False,
    }
    assert source_snapshot["extensions"]["interlude.run"]["forkRunIds"] == [forked.runId]
    assert fork["owner"] == source_snapshot["owner"]


def test_a_fork_point_past_the_log_is_422_fork_point_invalid(client):
    source = decided_first_gate(client)
    last = client.runs_poll_events(source).lastSequence

    with pytest.raises(WopError) as refused:
        client.runs_fork(source, ForkRunRequest(fromSeq=last + 1, mode="branch"))

    assert (refused.value.status, refused.value.envelope.error) == (422, "fork_point_invalid")
    assert refused.value.envelope.details["lastSequence"] == last


def test_malformed_forks_are_400_and_unknown_runs_404(client, gateway, services):
    source = decided_first_gate(client)
    headers = {"Authorization": f"Bearer {new_api_key(services)}", "Content-Type": "application/json"}

    def fork(run_id: str, body: dict[str, Any]) -> tuple[int, str]:
        got = requests.post(f"{gateway}/runs/{wire(run_id)}:fork", json=body, headers=headers, timeout=10)
        return got.status_code, got.json()["error"]

    assert fork(source, {"mode": "branch"}) == (400, "validation_error")
    assert fork(source, {"mode": "replay", "runOptionsOverlay": {"tags": ["x"]}}) == (400, "validation_error")
    assert fork(source, {"mode": "rewind", "fromSeq": 0}) == (400, "validation_error")
    assert fork(source, {"mode": "branch", "fromSeq": -1}) == (400, "validation_error")
    assert fork(source, {"mode": "branch", "fromSeq": 1, "extra": 1}) == (400, "validation_error")
    overlay = {"configurable": {"recursionLimit": 0}}
    assert fork(source, {"mode": "branch", "fromSeq": 1, "runOptionsOverlay": overlay}) == (400, "validation_error")
    assert fork(source, {"mode": "branch", "fromSeq": 1, "runOptionsOverlay": {"owner": "x"}}) == (400, "validation_error")
    tenant = source.split("/", 1)[0]
    assert fork(tenant_bound(tenant, mint_opaque()), {"mode": "replay"}) == (404, "not_found")
    assert fork(tenant_bound(f"other-{tenant}", mint_opaque()), {"mode": "replay"}) == (403, "id_tenant_mismatch")


def test_a_branch_overlay_changes_its_run_options(client, gateway, services):
    source = decided_first_gate(client)
    overlay = {"tags": ["retry"], "metadata": {"ticket": "T-1"}}

    forked = client.runs_fork(source, ForkRunRequest(fromSeq=1, mode="branch", runOptionsOverlay=overlay))

    fork = client.runs_get(forked.runId)
    assert fork.tags == ["retry"]
    assert fork.metadata == {"ticket": "T-1"}


def test_discovery_advertises_replay_with_both_modes_and_the_seam_manifest(client):
    caps = client.discovery_capabilities()
    assert "replay" in caps.families
    assert client.host_effect_seams().seams[0].seam == "interlude.core-http"


def post(gateway: str, services: Services, path: str, body: Any = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {new_api_key(services)}", "Content-Type": "application/json"}
    return requests.post(f"{gateway}{path}", json=body, headers=headers, timeout=10)


def test_a_rejected_run_redriven_asks_again_only_its_failed_gate(client, gateway, services):
    # Given a run whose first gate was accepted and whose second was rejected: it failed at the second
    source = decided_first_gate(client)
    client.interrupts_resolve_by_run(source, "publish", ResolveInterruptRequest(resumeValue={"action": "reject"}))
    failed = client.runs_get(source)
    assert failed.status == "failed"
    failed_at = sequence_of(events_of(client, source), "interrupt.resolved", "publish")

    # When it is redriven
    got = post(gateway, services, f"/runs/{wire(source)}:redrive")

    # Then a new run branches at the failure: the accepted gate stands as decided, the rejected one is asked again
    assert got.status_code == 201, got.text
    redriven = got.json()
    assert (redriven["sourceRunId"], redriven["mode"], redriven["fromSeq"]) == (source, "branch", failed_at)
    assert redriven["status"] == "waiting-approval"
    assert client.runs_get(redriven["runId"]).currentNodeId == "publish"
    asked = [e.payload["nodeId"] for e in events_of(client, redriven["runId"]) if e.type == "node.suspended"]
    assert asked == ["publish"]
    # And it is linked both ways; the source stays failed
    assert client.runs_get(source).status == "failed"


def test_only_a_failed_run_is_redriven(client, gateway, services):
    waiting = decided_first_gate(client)

    got = post(gateway, services, f"/runs/{wire(waiting)}:redrive")

    assert got.status_code == 409, got.text
    assert got.json()["error"] == "run_state_conflict"
    assert got.json()["details"] == {"runStatus": "waiting-approval"}


def test_a_run_forked_the_most_times_refuses_another_fork(client, gateway, services, monkeypatch):
    from interlude.app import forks

    monkeypatch.setattr(forks, "MAX_FORKS_PER_RUN", 1)
    source = decided_first_gate(client)
    client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))

    got = post(gateway, services, f"/runs/{wire(source)}:fork", {"mode": "replay"})

    assert got.status_code == 409, got.text
    assert (got.json()["error"], got.json()["details"]) == ("interlude.fork_limit_reached", {"maxForks": 1})


def test_pause_and_resume_are_not_served(client):
    # docs/adr/0108: an Interlude run waits at a gate or on outside work it cannot hold; neither operation is served.
    waiting = decided_first_gate(client)
    for operation in (client.runs_pause, client.runs_resume):
        with pytest.raises(WopError) as refused:
            operation(waiting)
        assert (refused.value.status, refused.value.envelope.error) == (404, "not_found")
    assert client.runs_get(waiting).status == "waiting-approval"


def test_a_fork_retried_under_its_idempotency_key_makes_one_run(client, gateway, services):
    source = decided_first_gate(client)
    key = "fork-retry-" + "k" * 24

    first = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"), idempotency_key=key)
    again = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"), idempotency_key=key)

    assert again.runId == first.runId
    headers = {"Authorization": f"Bearer {new_api_key(services)}"}
    snapshot = requests.get(f"{gateway}/runs/{wire(source)}", headers=headers, timeout=10).json()
    assert snapshot["extensions"]["interlude.run"]["forkRunIds"] == [first.runId]


def test_a_source_whose_log_is_no_longer_whole_is_not_forked(client, services):
    # Given a run whose first event batch is gone (past its retention): its history can no longer be carried
    from interlude import wiring
    from interlude.store.layout import run_pk

    source = decided_first_gate(client)
    table = services.store.client
    batches = table.query(
        TableName=services.store.table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :events)",
        ExpressionAttributeValues={":pk": {"S": run_pk(source)}, ":events": {"S": wiring.EVENT_ITEM_PREFIX}},
    )["Items"]
    table.delete_item(TableName=services.store.table, Key={"pk": batches[0]["pk"], "sk": batches[0]["sk"]})

    with pytest.raises(WopError) as refused:
        client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))

    assert (refused.value.status, refused.value.envelope.error) == (422, "fork_point_invalid")


def test_forking_needs_runs_read_besides_runs_create(client, gateway, services):
    # forkRun's scopes are runs:create and runs:read: the fork reads its source's whole history.
    source = decided_first_gate(client)
    create_only = OpenwopClient(gateway, new_api_key(services, scopes=["runs:create"]))

    with pytest.raises(WopError) as refused:
        create_only.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))

    assert (refused.value.status, refused.value.envelope.error) == (403, "forbidden")
    assert refused.value.envelope.details == {"scopeRequired": "runs:read"}


QUORUM = {"nodes": [{"id": "sign", "typeId": "core.approvalGate", "config": {"title": "Two of us", "requiredApprovals": 2}}], "edges": []}


def one_of_two_approved(services: Services, gateway: str) -> tuple[str, OpenwopClient]:
    """A run of a two-approval gate that Ana approved: it waits for one more. Returns it and Bob's client."""
    services.workflows.put_workflow(signed_in(services), "quorum", WorkflowDefinition.model_validate(QUORUM))
    ana = OpenwopClient(gateway, new_api_key(services, "ana"))
    run_id = ana.runs_create(CreateRunRequest(workflowId="quorum")).runId
    ana.interrupts_resolve_by_run(run_id, "sign", ResolveInterruptRequest(resumeValue={"action": "accept", "comment": "fine"}))
    return run_id, OpenwopClient(gateway, new_api_key(services, "bob"))


def test_votes_cast_on_an_undecided_gate_are_carried_into_a_replay(services, gateway):
    # Given a quorum gate Ana approved (1 of 2)
    source, bob = one_of_two_approved(services, gateway)

    # When the run is replayed
    forked = bob.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))

    # Then the fork's gate holds Ana's vote (its event again, after the gate's request), so Bob's approval decides it
    assert forked.status == "waiting-approval"
    types = [e.type for e in events_of(bob, forked.runId)]
    assert types.index("approval.received") > types.index("interrupt.requested")
    (carried,) = [e for e in events_of(bob, forked.runId) if e.type == "approval.received"]
    assert carried.payload["resumeValue"]["comment"] == "fine"
    bob.interrupts_resolve_by_run(forked.runId, "sign", ResolveInterruptRequest(resumeValue={"action": "accept"}))
    assert bob.runs_get(forked.runId).status == "completed"
    # And Ana may not vote twice in the fork
    ana = OpenwopClient(gateway, new_api_key(services, "ana"))
    again = ana.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))
    with pytest.raises(WopError) as refused:
        ana.interrupts_resolve_by_run(again.runId, "sign", ResolveInterruptRequest(resumeValue={"action": "accept"}))
    assert (refused.value.status, refused.value.envelope.error) == (409, "interlude.vote_already_cast")
    # And the fork's audit entry (chained once its record reaches dispatch: docs/adr/0128) says the vote was carried,
    # and who cast it
    dispatch_runs(TABLE, forked.runId)
    headers = {"Authorization": f"Bearer {new_api_key(services)}"}
    entries = requests.get(f"{gateway}/audit", headers=headers, timeout=10).json()["entries"]
    (made,) = [e for e in entries if e["action"] == "run.forked" and e["target"]["runId"] == forked.runId]
    assert made["details"]["carriedVotes"]["count"] == 1
    (vote,) = made["details"]["carriedVotes"]["votes"]
    assert (vote["nodeId"], vote["action"]) == ("sign", "accept")
    assert "ana" in vote["principal"]


def test_a_branch_carries_only_the_votes_cast_before_its_fork_point(services, gateway):
    source, bob = one_of_two_approved(services, gateway)
    voted_at = sequence_of(events_of(bob, source), "approval.received", "sign")

    # (the vote is the source's last event: a branch after it is a replay, which the test above drives)
    before = bob.runs_fork(source, ForkRunRequest(fromSeq=voted_at, mode="branch"))

    assert "approval.received" not in [e.type for e in events_of(bob, before.runId)]
    bob.interrupts_resolve_by_run(before.runId, "sign", ResolveInterruptRequest(resumeValue={"action": "accept"}))
    assert bob.runs_get(before.runId).status == "waiting-approval"


def test_a_run_diffed_against_its_replay_diverges_where_the_fork_settled_the_decided_gate(client):
    source = decided_first_gate(client)
    forked = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))

    diff = client.runs_diff(source, forked.runId)
    same = client.runs_diff(source, source)

    # The source asked its first gate (interrupt.requested); the fork settled it as recorded (interrupt.resolved)
    assert (diff.a, diff.b) == (source, forked.runId)
    asked_at = next(e.sequence for e in events_of(client, source) if e.type == "interrupt.requested")
    assert diff.divergedAtSeq == asked_at
    first = diff.eventDiffs[0]
    assert (first.seq, first.op, first.aEvent["type"], first.bEvent["type"]) == (
        asked_at, "changed", "interrupt.requested", "interrupt.resolved",
    )
    assert [d.seq for d in diff.eventDiffs] == sorted(d.seq for d in diff.eventDiffs)
    # Both wait at the second gate, having settled the first alike: the states their logs reach are the same
    assert diff.stateDiff == {}
    assert (same.divergedAtSeq, same.eventDiffs, same.stateDiff) == (None, [], {})


def test_a_redrive_diffed_against_its_failed_source_shows_the_end_that_differs(client, gateway, services):
    source = decided_first_gate(client)
    client.interrupts_resolve_by_run(source, "publish", ResolveInterruptRequest(resumeValue={"action": "reject"}))
    redriven = post(gateway, services, f"/runs/{wire(source)}:redrive").json()["runId"]
    client.interrupts_resolve_by_run(redriven, "publish", ResolveInterruptRequest(resumeValue={"action": "accept"}))

    diff = client.runs_diff(source, redriven)

    assert diff.stateDiff["end"]["a"]["status"] == "failed"
    assert diff.stateDiff["end"]["b"] == {"status": "completed"}
    assert diff.stateDiff["nodes"]["publish"]["a"]["status"] == "failed"
    assert diff.stateDiff["nodes"]["publish"]["b"]["status"] == "completed"
    assert "draft" not in diff.stateDiff["nodes"]


def test_diff_refusals_each_carry_their_code(client, gateway, services, monkeypatch):
    source = decided_first_gate(client)
    tenant = source.split("/", 1)[0]

    def diff(path: str, key: str | None = None) -> tuple[int, str]:
        headers = {"Authorization": f"Bearer {key or new_api_key(services)}"}
        got = requests.get(f"{gateway}/runs/{path}", headers=headers, timeout=10)
        return got.status_code, got.json()["error"]

    run = wire(source)
    assert diff(f"{run}:diff") == (400, "validation_error")
    assert diff(f"{run}:diff?against=") == (400, "validation_error")
    assert diff(f"{run}:diff?against=not-an-id") == (400, "validation_error")
    assert diff(f"{run}:diff?against={wire(tenant_bound(tenant, mint_opaque()))}") == (404, "not_found")
    assert diff(f"{wire(tenant_bound(tenant, mint_opaque()))}:diff?against={run}") == (404, "not_found")
    assert diff(f"{run}:diff?against={wire(tenant_bound(f'other-{tenant}', mint_opaque()))}") == (403, "id_tenant_mismatch")
    assert diff(f"{run}:diff?against={run}", new_api_key(services, scopes=["runs:create"])) == (403, "forbidden")
    # A run whose log is longer than a diff compares is refused, whole, before its log is read
    from interlude.rules import run_diff

    monkeypatch.setattr(run_diff, "MAX_DIFF_EVENTS", 3)
    assert diff(f"{run}:diff?against={run}") == (413, "payload_too_large")


CONVERSATION = {
    "nodes": [
        {"id": "open", "typeId": "core.conversationGate", "config": {"turn": "start", "title": "Pick"}},
        {
            "id": "turn",
            "typeId": "core.conversationGate",
            "config": {"turn": "exchange", "conversationId": "{{open.conversationId}}", "prompt": "Which?"},
        },
        {"id": "close", "typeId": "core.conversationGate", "config": {"turn": "close", "conversationId": "{{open.conversationId}}"}},
    ],
    "edges": [{"sourceNodeId": "open", "targetNodeId": "turn"}, {"sourceNodeId": "turn", "targetNodeId": "close"}],
}


def test_a_conversation_run_forks_into_a_conversation_of_its_own_carrying_the_turns_answered(client, services):
    # Given a conversation opened and one exchange answered: the run waits for its close
    services.workflows.put_workflow(signed_in(services), "chat", WorkflowDefinition.model_validate(CONVERSATION))
    source = client.runs_create(CreateRunRequest(workflowId="chat")).runId
    for node, value in (("open", {"hello": True}), ("turn", {"choice": "a"})):
        client.interrupts_resolve_by_run(source, node, ResolveInterruptRequest(resumeValue=value))

    # When it is replayed
    forked = client.runs_fork(source, ForkRunRequest(fromSeq=0, mode="replay"))

    # Then the fork asks only the close, on a conversation of its own that holds the answered exchange
    def conversation_of(run_id: str) -> str:
        return next(e.payload["conversationId"] for e in events_of(client, run_id) if e.type == "conversation.opened")

    assert (forked.status, client.runs_get(forked.runId).currentNodeId) == ("waiting-input", "close")
    assert conversation_of(forked.runId) != conversation_of(source)
    (exchanged,) = [e.payload for e in events_of(client, forked.runId) if e.type == "conversation.exchanged"]
    assert (exchanged["conversationId"], exchanged["response"]) == (conversation_of(forked.runId), {"choice": "a"})
    client.interrupts_resolve_by_run(forked.runId, "close", ResolveInterruptRequest(resumeValue={}))
    assert client.runs_get(forked.runId).status == "completed"
    assert client.runs_get(source).status == "waiting-input"
