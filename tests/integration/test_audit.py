"""Issue 16 item 5 and issue 13 item 1 in process (moto): every audited action appends to one of its tenant's hash
chains (its run's, or its key's), in its own transaction or, for a decision, a vote or a cancel, from its event batch's
stream record (docs/adr/0128: these tests read such entries after handing the run's records to dispatch), checkpoints are signed over the Merkle root of what they
anchor, and verification walks every chain and names what an altered, removed, reordered, moved or forged item
breaks. Tests of one chain's mechanics run with wiring.AUDIT_CHAINS = 1 (`one_chain`), so every entry is in chain 0."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from interlude import composition, wiring
from interlude.app import audit, audit_entries
from interlude.composition import Services
from interlude.domain.errors import DomainError
from interlude.domain.models.requests import CancelRunRequest, CreateKeyRequest, CreateRunRequest
from interlude.domain.models.tenant_requests import CredentialGrantRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules import audit as rules
from interlude.rules.tokens.scheme import KeyRing
from interlude.store import audit as items
from interlude.store.facade import Store
from tests.integration.conftest import signed_in, tenant_of_test
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.stream import dispatch_runs

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}
QUORUM = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Two of us", "requiredApprovals": 2}}
KEY = rules.signing_key(b"a test seed, never a deployment's")


@pytest.fixture
def services(world) -> Any:
    # A fixed key instead of the deployment's secret the composition reads by default.
    return Services(Store(TABLE, ENTRIES_TABLE), audit_key=lambda: KEY)


@pytest.fixture
def one_chain(monkeypatch) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)


def run_waiting(services: Services, admin, definition=GATE) -> str:
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [definition], "edges": []}))
    return services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "wf"})).runId


def decide(services: Services, principal, run_id: str, value: dict[str, Any]) -> None:
    """Resolve the gate, then dispatch the run's record, whose appender chains the entry."""
    services.decisions.resolve_interrupt(principal, run_id, "gate", value)
    dispatch_runs(TABLE, run_id)


def log(services: Services, tenant: str | None = None, chain: int = 0) -> list[dict[str, Any]]:
    """The chain's entries as its readers take them: to its head and the run past it that chains from it (ADR 0172)."""
    tenant = tenant or tenant_of_test()
    chains = services.store.audit_log
    tail = chains.tails(tenant, {chain: chains.head(tenant, chain)})[chain]
    return [entry for _, entry in chains.entries(tenant, chain, 1, tail.seq)]


def everything(services: Services, tenant: str | None = None) -> dict[int, list[dict[str, Any]]]:
    tenant = tenant or tenant_of_test()
    return {chain: log(services, tenant, chain) for chain in services.store.audit_log.heads(tenant)}


def entry_key(tenant: str, seq: int, chain: int = 0) -> dict[str, Any]:
    return {"pk": {"S": items.log_pk(tenant, chain)}, "sk": {"S": items.entry_sk(seq)}}


def alter(tenant: str, seq: int, change: dict[str, Any], chain: int = 0) -> None:
    """What someone with write access to the table could do behind the service's back."""
    client = boto3.client("dynamodb")
    key = entry_key(tenant, seq, chain)
    entry = json.loads(client.get_item(TableName=TABLE, Key=key)["Item"]["entry"]["S"])
    client.put_item(TableName=TABLE, Item={**key, "entry": {"S": json.dumps({**entry, **change})}})


def test_every_audited_action_appends_one_entry_chained_to_the_one_before(
    services, one_chain, tenant, other_tenant
) -> None:
    admin = signed_in(services)
    run_id = run_waiting(services, admin, QUORUM)
    decide(services, admin, run_id, {"action": "accept", "comment": "fine by me"})
    other = signed_in(services, "bob")
    decide(services, other, run_id, {"action": "accept"})
    cancelled = run_waiting(services, admin)
    services.lifecycle.cancel_run(admin, cancelled, CancelRunRequest(reason="not needed"))
    dispatch_runs(TABLE, cancelled)
    surface = services.token_surface(lambda _force: KeyRing.generate())
    minted_for = run_waiting(services, admin)
    surface.mint(admin, minted_for, "gate", "inspect")
    issued = services.keys.create_key(admin, CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
    services.keys.revoke_key(tenant, issued["keyId"], audit_entries.actor(admin))
    services.tenants.put_settings(tenant, TenantSettings.model_validate({"eventRetentionHours": 2}), "admin", audit_entries.actor(admin))
    services.tenants.put_grant(tenant, "github", CredentialGrantRequest(scopes=["repo"]), "admin", audit_entries.actor(admin))

    entries = log(services)
    # signed_in issued two keys through the operator path (the CLI's): they are recorded too.
    assert [e["action"] for e in entries] == [
        "key.created",
        "interrupt.voted",
        "key.created",
        "interrupt.decided",
        "run.cancelled",
        "token.minted",
        "key.created",
        "key.revoked",
        "settings.changed",
        "credentialGrant.recorded",
    ]
    assert [e["seq"] for e in entries] == list(range(1, 11))
    assert {e["chain"] for e in entries} == {0}
    assert entries[0]["prevHash"] is None
    assert all(e["prevHash"] == rules.entry_hash(before) for before, e in zip(entries, entries[1:], strict=False))
    vote, decision = entries[1], entries[3]
    assert vote["actor"] == {"subjectId": "admin", "surface": "run"}
    assert vote["target"]["runId"] == run_id
    assert vote["details"] == {"kind": "approval", "action": "accept", "comment": "fine by me"}
    assert decision["actor"]["subjectId"] == "bob"
    assert decision["details"]["outcome"] == "completed"
    assert entries[4]["details"] == {"reason": "not needed"}
    assert entries[4]["actor"]["keyId"] == admin.key_id
    assert entries[5]["details"]["intent"] == "inspect"
    assert entries[7]["target"] == {"keyId": issued["keyId"]}
    assert entries[0]["actor"] == audit_entries.OPERATOR
    assert services.audit.verify(tenant, 0, 100) == {
        "fromSeq": 0,
        "toSeq": 100,
        "chainValid": True,
        "checkpoints": [],
        "anomalies": [],
    }
    assert log(services, other_tenant) == []  # every tenant has chains of its own


def test_an_altered_entry_breaks_the_chain_at_the_next_one_and_the_last_one_against_the_head(
    services, one_chain, tenant
) -> None:
    admin = signed_in(services)
    for _ in range(3):
        services.keys.create_key(admin, CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
    alter(tenant, 2, {"details": {"subjectId": "someone-else"}})
    broken = services.audit.verify(tenant, 1, 4)
    assert broken["chainValid"] is False
    assert broken["anomalies"] == [
        {
            "atSeq": 3,
            "kind": "chain-break",
            "expectedPrevHash": rules.entry_hash(log(services)[1]),
            "actualPrevHash": log(services)[2]["prevHash"],
            "detail": "chain 0",
        }
    ]
    # The last entry has no successor: the chain head holds its hash.
    alter(tenant, 4, {"at": "2020-01-01T00:00:00Z"})
    assert {"atSeq": 4, "kind": "hash-mismatch", "detail": "chain 0: the entry differs from the hash the chain head holds"} in services.audit.verify(tenant, 1, 4
    )["anomalies"]
    # A removed entry is missing; the link over the gap cannot be checked, so it is not also a chain break.
    boto3.client("dynamodb").delete_item(TableName=TABLE, Key=entry_key(tenant, 1))
    assert services.audit.verify(tenant, 1, 2)["anomalies"] == [{"atSeq": 1, "kind": "missing-entry", "detail": "chain 0"}]


def test_an_action_and_its_entry_land_together_or_not_at_all(services, one_chain, tenant) -> None:
    admin = signed_in(services)
    run_id = run_waiting(services, admin)
    before = services.store.audit_log.head(tenant, 0).seq
    decide(services, admin, run_id, {"action": "accept"})
    with pytest.raises(DomainError) as refused:
        services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "reject"})
    assert refused.value.code == "interrupt_already_resolved"
    with pytest.raises(DomainError):
        services.lifecycle.cancel_run(admin, run_id, CancelRunRequest())
    dispatch_runs(TABLE, run_id)
    # One decision recorded; the refused decision and cancel left nothing.
    assert [e["action"] for e in log(services)[before:]] == ["interrupt.decided"]

    # A transaction that fails on the action's own condition writes no entry either: the head stays put.
    def lose_the_race(**kwargs: Any) -> None:
        raise items_conflict()

    head = services.store.audit_log.head(tenant, 0)
    services.store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", lambda **_: lose_the_race())
    with pytest.raises(Exception):  # noqa: B017, PT011 - any failure: the point is what it left behind
        services.keys.create_key(admin, CreateKeyRequest(subjectId="x", scopes=["runs:read"]))
    assert services.store.audit_log.head(tenant, 0) == head


def items_conflict() -> Exception:
    from botocore.exceptions import ClientError

    reasons = [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}, {"Code": "None"}]
    error = {"Error": {"Code": "TransactionCanceledException", "Message": "x"}, "CancellationReasons": reasons}
    return ClientError(error, "TransactWriteItems")  # type: ignore[arg-type]


def test_an_append_that_loses_the_head_to_another_is_placed_after_it_without_reading_it_again(
    services, one_chain, tenant
) -> None:
    admin = signed_in(services)
    other_instance = Services(Store(TABLE, ENTRIES_TABLE))
    real_head = items.AuditLog.head
    reads: list[int] = []

    def head_then_race(log_: items.AuditLog, tenant: str, chain: int) -> rules.Head:
        head = real_head(log_, tenant, chain)
        reads.append(chain)
        if len(reads) == 1:
            # Another instance appends between this read and this transaction.
            other_instance.keys.create_key(admin, CreateKeyRequest(subjectId="first", scopes=["runs:read"]))
        return head

    items.AuditLog.head = head_then_race  # type: ignore[method-assign]
    try:
        services.keys.create_key(admin, CreateKeyRequest(subjectId="second", scopes=["runs:read"]))
    finally:
        items.AuditLog.head = real_head  # type: ignore[method-assign]
    entries = log(services)
    assert [e["details"]["subjectId"] for e in entries[-2:]] == ["first", "second"]
    assert services.audit.verify(tenant, 1, len(entries))["chainValid"] is True
    # This instance read the head once (and the other instance once): the lost transaction named the head it lost to.
    assert reads == [0, 0]


# A world of its own: the checkpoint sweep reads the pending chains of every tenant.
@pytest.mark.private_world
def test_a_checkpoint_signs_the_merkle_root_of_what_it_anchors_and_verification_checks_both(
    services, one_chain, monkeypatch, tenant
) -> None:
    admin = signed_in(services)
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_ENTRIES", 3)
    for n in range(6):
        services.keys.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))
    # Seven entries: checkpoints were due after the third and the sixth, and made right after those appends.
    checkpoints = services.store.audit_log.checkpoints(tenant, 0, 1, 100)
    assert [c["atSequence"] for c in checkpoints] == [3, 6]
    entries = log(services)
    assert checkpoints[1]["merkleRoot"] == rules.merkle_root([rules.entry_hash(e) for e in entries[3:6]])
    public = rules.public_key_b64(KEY)
    assert rules.signature_valid(public, checkpoints[1]["merkleRoot"], checkpoints[1]["signature"])
    verified = services.audit.verify(tenant, 4, 7)
    assert verified["chainValid"] is True
    assert verified["checkpointsValid"] is True
    assert [c["checkpoint"] for c in verified["checkpoints"]] == ["ckpt-000-6"]

    # The seventh waits for the next one; the sweep makes it once it is due by age.
    assert services.audit.checkpoint_pending() == 0
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
    assert services.audit.checkpoint_pending() == 1
    assert services.store.audit_log.head(tenant, 0).checkpoint_seq == 7
    # Anchored, the chain stays on the index until MARKER_KEEP_SECONDS pass with no entry, then leaves it.
    assert list(services.store.audit_log.pending_chains()) == [(tenant, 0)]
    monkeypatch.setattr(rules, "MARKER_KEEP_SECONDS", 0)
    assert services.audit.checkpoint_pending() == 0
    assert list(services.store.audit_log.pending_chains()) == []

    # An entry altered after its checkpoint: the root no longer matches, the signature still does.
    alter(tenant, 5, {"details": {}})
    anomalies = services.audit.verify(tenant, 4, 7)["anomalies"]
    assert {"atSeq": 6, "kind": "merkle-mismatch", "checkpoint": "ckpt-000-6", "detail": "chain 0"} in anomalies
    # A forged checkpoint: a root the key never signed.
    client = boto3.client("dynamodb")
    key = {"pk": {"S": items.log_pk(tenant, 0)}, "sk": {"S": items.checkpoint_sk(3)}}
    client.update_item(TableName=TABLE, Key=key, UpdateExpression="SET merkleRoot = :r", ExpressionAttributeValues={":r": {"S": "0" * 64}})
    forged = services.audit.verify(tenant, 1, 3)
    assert forged["chainValid"] is False
    assert forged["checkpointsValid"] is False
    assert {a["kind"] for a in forged["anomalies"]} == {"merkle-mismatch", "signature-invalid"}


def test_verification_refuses_a_bad_range(services, tenant) -> None:
    for from_seq, to_seq in [(5, 4), (-1, 3)]:
        with pytest.raises(DomainError) as refused:
            services.audit.verify(tenant, from_seq, to_seq)
        assert refused.value.code == "validation_error"


def test_a_range_is_clamped_to_the_chains_ends_and_a_walk_past_the_limit_is_refused_naming_where_to_continue(
    services, one_chain, monkeypatch, tenant
) -> None:
    admin = signed_in(services)  # issue 26 row 2: openwop-client's audit_verify(0, 1_000_000) on a short log
    for n in range(6):
        services.keys.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))
    whole = services.audit.verify(tenant, 0, 1_000_000)
    assert (whole["fromSeq"], whole["toSeq"], whole["chainValid"]) == (0, 1_000_000, True)

    monkeypatch.setattr(audit, "MAX_VERIFY_ENTRIES", 3)
    # Eight entries (signed_in's two keys, the six robots) in walks of at most three: each refusal names where the
    # walk may reach; verified to there, the next one starts after it, and the last one is clamped to the end.
    reached = []
    first = 0
    for _ in range(2):
        with pytest.raises(DomainError) as refused:
            services.audit.verify(tenant, first, 1_000_000)
        assert refused.value.code == "validation_error"
        assert refused.value.details["limit"] == 3
        reached.append(refused.value.details["maxToSeq"])
        assert services.audit.verify(tenant, first, reached[-1])["chainValid"] is True
        first = reached[-1] + 1
    assert reached == [3, 6]
    assert services.audit.verify(tenant, first, 1_000_000)["chainValid"] is True


def test_entries_are_listed_newest_first_in_pages(services, one_chain, tenant) -> None:
    admin = signed_in(services)
    for n in range(4):
        services.keys.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))
    first = services.audit.entries_page(tenant, 3, None)
    assert [e["seq"] for e in first["entries"]] == [5, 4, 3]
    assert first["headSeq"] == 5
    second = services.audit.entries_page(tenant, 3, first["cursor"])
    assert [e["seq"] for e in second["entries"]] == [2, 1]
    assert "cursor" not in second
    with pytest.raises(DomainError):
        services.audit.entries_page(tenant, 3, "not-a-cursor")


# A world of its own: the checkpoint sweep reads the pending chains of every tenant.
@pytest.mark.private_world
def test_the_timeouts_function_sweeps_the_checkpoints_of_quiet_tenants_with_the_key_from_its_secret(
    services, one_chain, monkeypatch, tenant
) -> None:
    from interlude.adapters.audit_key import ensure_signing_key
    from interlude.local import lambda_runtime

    monkeypatch.setenv(wiring.AUDIT_KEY_SECRET.env, "audit-key-test")
    ensure_signing_key("audit-key-test")
    admin = signed_in(services)
    services.keys.create_key(admin, CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
    sweep = dict(wiring.AUDIT_CHECKPOINT_SWEEP.input)
    # Not due yet: the entries are younger than the interval less one sweep period.
    assert lambda_runtime.invoke("timeouts", sweep) == {"checkpoints": 0}
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", wiring.AUDIT_CHECKPOINT_SWEEP.every_s)
    assert lambda_runtime.invoke("timeouts", sweep) == {"checkpoints": 1}
    assert services.store.audit_log.head(tenant, 0).checkpoint_seq == 2
    # With the key the function read: the composition's default source, the deployment's secret.
    verified = Services(Store(TABLE, ENTRIES_TABLE)).audit.verify(tenant, 1, 2)
    assert verified["checkpointsValid"] is True
    assert verified["checkpoints"][0]["atSequence"] == 2


# -- many chains (issue 13 item 1: the tenant's appends spread over wiring.AUDIT_CHAINS heads) -------------------

THREE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Three of us", "requiredApprovals": 3}}


def decided_by_three(services: Services, admin) -> str:
    """A run whose chain gets three entries: two votes and the decision."""
    run_id = run_waiting(services, admin, THREE)
    for who in ("alice", "bob", "carol"):
        decide(services, signed_in(services, who), run_id, {"action": "accept"})
    return run_id


def decided_in_distinct_chains(services: Services, admin, count: int) -> list[str]:
    """`count` runs decided by three, each hashed to a chain none of the others uses (run ids are random, and four
    of 128 chains collide about one time in twenty: a run that lands on a taken chain is left waiting, unaudited).
    The voters' keys are issued first: each issue is audited in a chain of its own, and one landing between a run's
    votes would sit between its entries there."""
    voters = [signed_in(services, who) for who in ("alice", "bob", "carol")]
    chosen: dict[int, str] = {}
    for _ in range(count * 8):
        run_id = run_waiting(services, admin, THREE)
        chosen.setdefault(items.chain_of_member(run_id), run_id)
        if len(chosen) == count:
            break
    assert len(chosen) == count
    for run_id in chosen.values():
        for voter in voters:
            decide(services, voter, run_id, {"action": "accept"})
    return list(chosen.values())


def test_a_runs_entries_stay_in_its_chain_and_each_chain_is_a_log_of_its_own(services, tenant) -> None:
    admin = signed_in(services)
    runs = [decided_by_three(services, admin) for _ in range(4)]
    chains = everything(services)
    assert len(chains) > 2  # keys and runs spread over several chains
    for run_id in runs:
        chain = items.chain_of_member(run_id)
        own = [e for e in chains[chain] if e["target"].get("runId") == run_id]
        assert [e["action"] for e in own] == ["interrupt.voted", "interrupt.voted", "interrupt.decided"]
        assert {e["chain"] for e in own} == {chain}
    tails = services.store.audit_log.tails(tenant, services.store.audit_log.heads(tenant))
    for chain, entries in chains.items():
        assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
        assert entries[0]["prevHash"] is None
        assert all(e["prevHash"] == rules.entry_hash(before) for before, e in zip(entries, entries[1:], strict=False))
        assert tails[chain].hash == rules.entry_hash(entries[-1])
    actions = [e["action"] for entries in chains.values() for e in entries]
    assert (actions.count("interrupt.voted"), actions.count("interrupt.decided")) == (8, 4)
    assert len(actions) == 12 + actions.count("key.created")  # and the keys signed_in issued
    verified = services.audit.verify(tenant, 0, 100)
    assert (verified["chainValid"], verified["anomalies"]) == (True, [])


def test_verification_walks_every_chain_and_names_the_chain_of_each_anomaly(services, tenant) -> None:
    admin = signed_in(services)
    altered, reordered, removed, inserted = decided_in_distinct_chains(services, admin, 4)
    chain = {run: items.chain_of_member(run) for run in (altered, reordered, removed, inserted)}
    # Each head moved over the entries left past it (as a checkpoint does first: docs/adr/0172), so what follows
    # tampers with entries a head covers
    log = services.store.audit_log
    for k, head in log.heads(tenant).items():
        assert log.caught_up(tenant, k, head) is not None
    seq = {run: [n for n, e in services.store.audit_log.entries(tenant, chain[run], 1, 100) if e["target"].get("runId") == run] for run in chain}
    client = boto3.client("dynamodb")

    # Altered: who decided is rewritten; the next entry's prevHash no longer matches.
    alter(tenant, seq[altered][1], {"actor": {"subjectId": "mallory", "surface": "run"}}, chain[altered])
    # Reordered: two entries swap places.
    first, second = (client.get_item(TableName=TABLE, Key=entry_key(tenant, n, chain[reordered]))["Item"] for n in seq[reordered][:2])
    client.put_item(TableName=TABLE, Item={**first, "sk": second["sk"]})
    client.put_item(TableName=TABLE, Item={**second, "sk": first["sk"]})
    # Removed.
    client.delete_item(TableName=TABLE, Key=entry_key(tenant, seq[removed][1], chain[removed]))
    # Inserted: a forged entry, chained properly to the one before, pushes the rest one place on.
    entries = dict(services.store.audit_log.entries(tenant, chain[inserted], 1, 100))
    at = seq[inserted][1]
    forged = {**entries[at], "actor": {"subjectId": "mallory", "surface": "run"}, "prevHash": rules.entry_hash(entries[at - 1]) if at > 1 else None}
    shifted = {n + 1: {**entries[n], "seq": n + 1} for n in range(at, max(entries) + 1)}
    for n, entry in {at: forged, **shifted}.items():
        client.put_item(TableName=TABLE, Item={**entry_key(tenant, n, chain[inserted]), "entry": {"S": json.dumps(entry)}})

    result = services.audit.verify(tenant, 1, 100)
    assert result["chainValid"] is False
    found = {(a["detail"].split(":")[0], a["atSeq"], a["kind"]) for a in result["anomalies"]}
    assert (f"chain {chain[altered]}", seq[altered][2], "chain-break") in found
    assert (f"chain {chain[reordered]}", seq[reordered][0], "hash-mismatch") in found
    assert (f"chain {chain[reordered]}", seq[reordered][1], "hash-mismatch") in found
    assert (f"chain {chain[removed]}", seq[removed][1], "missing-entry") in found
    assert (f"chain {chain[inserted]}", at + 1, "chain-break") in found
    # Only those four chains are named; one chain verified alone names only its own.
    assert {a["detail"].split(":")[0] for a in result["anomalies"]} == {f"chain {c}" for c in chain.values()}
    alone = services.audit.verify(tenant, 1, 100, chain[removed])
    assert alone["anomalies"] == [{"atSeq": seq[removed][1], "kind": "missing-entry", "detail": f"chain {chain[removed]}"}]


def test_an_entry_copied_into_another_chain_does_not_verify_there(services, tenant) -> None:
    admin = signed_in(services)
    one, other = decided_in_distinct_chains(services, admin, 2)
    source, target = items.chain_of_member(one), items.chain_of_member(other)
    client = boto3.client("dynamodb")
    # The first entry of each chain carries prevHash null: without its chain inside the hash it would fit anywhere.
    copied = client.get_item(TableName=TABLE, Key=entry_key(tenant, 1, source))["Item"]
    client.put_item(TableName=TABLE, Item={**copied, "pk": {"S": items.log_pk(tenant, target)}})
    anomalies = services.audit.verify(tenant, 1, 1, target)["anomalies"]
    assert {"atSeq": 1, "kind": "hash-mismatch", "detail": f"chain {target}: the entry names another chain than the one holding it"} in anomalies


def test_the_listing_merges_the_chains_newest_first_and_its_cursor_reaches_each_entry_once(services, tenant) -> None:
    admin = signed_in(services)
    for _ in range(3):
        decided_by_three(services, admin)
    chains = everything(services)
    seen: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        page = services.audit.entries_page(tenant, 4, cursor)
        pages += 1
        assert len(page["entries"]) <= 4
        seen += page["entries"]
        cursor = page.get("cursor")
        if cursor is None:
            break
    total = sum(len(entries) for entries in chains.values())
    assert sorted((e["chain"], e["seq"]) for e in seen) == sorted((c, e["seq"]) for c, entries in chains.items() for e in entries)
    assert pages <= total // 4 + 2
    assert [e["at"] for e in seen] == sorted((e["at"] for e in seen), reverse=True)
    for chain in chains:
        mine = [e["seq"] for e in seen if e["chain"] == chain]
        assert mine == sorted(mine, reverse=True)
    assert page["headSeq"] == max(len(entries) for entries in chains.values())
    assert page["chains"] == {str(c): len(entries) for c, entries in chains.items()}


# A world of its own: the checkpoint sweep reads the pending chains of every tenant.
@pytest.mark.private_world
def test_a_chain_waiting_for_a_checkpoint_is_marked_once_and_the_sweep_signs_each_chain(
    services, monkeypatch, tenant
) -> None:
    admin = signed_in(services)
    writes: list[tuple[str, int]] = []

    def marked(params: dict[str, Any], **_: Any) -> None:
        written = [body.get("Key") or body["Item"] for op in params["TransactItems"] for body in op.values()]
        heads = [key["pk"]["S"] for key in written if key["sk"]["S"] == items.HEAD_SK]
        puts = [op["Put"]["Item"] for op in params["TransactItems"] if "Put" in op]
        writes.append((heads[0] if heads else "", sum(1 for item in puts if item["sk"]["S"] == items.PENDING_SK)))

    def moved(params: dict[str, Any], **_: Any) -> None:
        # A marked head is moved on its own (docs/adr/0135): no marker with it.
        if params["Key"]["sk"]["S"] == items.HEAD_SK:
            writes.append((params["Key"]["pk"]["S"], 0))

    approvers = [signed_in(services, who) for who in ("alice", "bob", "carol")]
    # The run's chain must hold no earlier entry (a key's, drawn by its random id), or its first vote finds it
    # already marked: draw runs until one lands on a chain of its own.
    run_id = run_waiting(services, admin, THREE)
    while items.chain_of_member(run_id) in services.store.audit_log.heads(tenant):
        run_id = run_waiting(services, admin, THREE)
    chain = items.chain_of_member(run_id)
    # The appends are dispatch's (the process's services, which the in-process dispatch function uses).
    events = composition.services().store.client.meta.events
    events.register("provide-client-params.dynamodb.TransactWriteItems", marked)
    events.register("provide-client-params.dynamodb.UpdateItem", moved)
    for approver in approvers:
        decide(services, approver, run_id, {"action": "accept"})
    # Three appends to the run's chain: the first marked it as waiting; the other two wrote no marker (no GSI write),
    # and, the chain marked and waiting for its checkpoint, left its head behind them (docs/adr/0172)
    assert [marks for head, marks in writes if head == items.head_pk(tenant, chain)] == [1]
    pending = set(services.store.audit_log.pending_chains())
    assert (tenant, chain) in pending
    assert len(pending) == len(services.store.audit_log.heads(tenant))
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
    assert services.audit.checkpoint_pending() == len(pending)
    assert set(services.store.audit_log.pending_chains()) == pending  # kept for MARKER_KEEP_SECONDS
    monkeypatch.setattr(rules, "MARKER_KEEP_SECONDS", 0)
    assert services.audit.checkpoint_pending() == 0
    assert list(services.store.audit_log.pending_chains()) == []
    verified = services.audit.verify(tenant, 1, 100)
    assert verified["checkpointsValid"] is True
    assert sorted(c["checkpoint"] for c in verified["checkpoints"]) == sorted(
        rules.checkpoint_id(k, head.seq) for k, head in services.store.audit_log.heads(tenant).items()
    )
    # The next append to an anchored chain marks it again.
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 300)
    decide(services, admin, run_waiting(services, admin), {"action": "accept"})
    assert len(list(services.store.audit_log.pending_chains())) == 1


def test_a_decision_reads_its_run_alone_and_carries_its_entry_on_its_event_batch(services, tenant) -> None:
    admin = signed_in(services)
    run_id = run_waiting(services, admin)
    calls: list[str] = []
    services.store.client.meta.events.register(
        "before-call.dynamodb", lambda model, params, **_: calls.append(model.name + ("(audit)" if b"AUDIT" in params["body"] else ""))
    )
    services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    # The run read alone, one transaction, and nothing of the audit chain: its head neither read nor written
    assert calls == ["GetItem", "TransactWriteItems"]
    chain = items.chain_of_member(run_id)
    assert "interrupt.decided" not in [e["action"] for e in log(services, tenant, chain)]
    dispatch_runs(TABLE, run_id)
    assert [e["action"] for e in log(services, tenant, chain)][-1] == "interrupt.decided"


# A world of its own: the checkpoint sweep reads the pending chains of every tenant.
@pytest.mark.private_world
def test_an_append_writes_the_head_whole_exactly_as_moving_it_field_by_field_did(
    services, one_chain, monkeypatch, tenant
) -> None:
    """The head is put whole on condition of the seq and checkpoint read (store/audit.py): it must hold what setting
    its fields one by one did — pendingSince kept while the chain waits, set again after a checkpoint anchored
    everything, checkpointSeq carried over, when an append last moved it (appendedAt: a record delivered again looks
    back no further, docs/adr/0128), nothing else."""
    admin = signed_in(services)
    client = boto3.client("dynamodb")

    def head_item() -> dict[str, Any]:
        key = {"pk": {"S": items.head_pk(tenant, 0)}, "sk": {"S": items.HEAD_SK}}
        return client.get_item(TableName=TABLE, Key=key, ConsistentRead=True)["Item"]

    def robot(n: int) -> None:
        services.keys.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))

    robot(0)
    waiting = head_item()
    assert set(waiting) == {"pk", "sk", "seq", "hash", "checkpointSeq", "pendingSince", "marked", "appendedAt"}
    robot(1)
    after = head_item()
    assert set(after) == {"pk", "sk", "seq", "hash", "checkpointSeq", "pendingSince", "marked", "appendedAt"}
    assert float(after["appendedAt"]["N"]) >= float(waiting["appendedAt"]["N"])
    assert int(after["seq"]["N"]) == int(waiting["seq"]["N"]) + 1
    assert after["hash"]["S"] == rules.entry_hash(log(services)[-1])
    assert float(after["pendingSince"]["N"]) == float(waiting["pendingSince"]["N"])
    assert after["checkpointSeq"] == waiting["checkpointSeq"]

    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
    assert services.audit.checkpoint_pending() == 1
    anchored = head_item()
    assert "pendingSince" not in anchored
    assert anchored["checkpointSeq"] == after["seq"]
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 300)
    robot(2)
    again = head_item()
    assert set(again) == set(after)
    assert again["checkpointSeq"] == anchored["checkpointSeq"]
    assert float(again["pendingSince"]["N"]) > float(after["pendingSince"]["N"]) - 1
    assert list(services.store.audit_log.pending_chains()) == [(tenant, 0)]
    assert services.audit.verify(tenant, 1, int(again["seq"]["N"]))["chainValid"] is True


# A world of its own: the checkpoint sweep reads the pending chains of every tenant.
@pytest.mark.private_world
def test_the_sweep_reads_a_tenants_heads_once_however_many_of_its_chains_wait(services, tenant) -> None:
    admin = signed_in(services)
    for n in range(6):
        services.keys.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))
    waiting = len(list(services.store.audit_log.pending_chains()))
    assert waiting > 1
    calls: list[str] = []
    services.store.client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    assert services.audit.checkpoint_pending() == 0  # none due yet
    # The waiting chains' heads in one BatchGetItem, then (for the anchor) every chain's in batches of 100 keys: not
    # one GetItem per waiting chain.
    assert calls.count("BatchGetItem") == 1 + -(-wiring.AUDIT_CHAINS // 100)
    assert "GetItem" not in calls
