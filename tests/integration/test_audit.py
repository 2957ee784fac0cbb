"""Issue 16 item 5 in process (moto): every audited action appends to its tenant's hash chain in its own
transaction, checkpoints are signed over the Merkle root of what they anchor, and verification names what an
altered, removed or forged item breaks."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from interlude import wiring
from interlude.app import audit, tenants
from interlude.app.service import Service
from interlude.app.tokens import TokenSurface
from interlude.domain.errors import DomainError
from interlude.domain.models.requests import CancelRunRequest, CreateKeyRequest, CreateRunRequest
from interlude.domain.models.tenants import CredentialGrantRequest, TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.rules import audit as rules
from interlude.rules.tokens.scheme import KeyRing
from interlude.store import Store, create_table
from interlude.store import audit as items
from tests.integration.conftest import signed_in

TABLE = "interlude-audit-test"
GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}
QUORUM = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Two of us", "requiredApprovals": 2}}
KEY = rules.signing_key(b"a test seed, never a deployment's")


@pytest.fixture
def service(monkeypatch) -> Any:
    monkeypatch.setenv("TABLE_NAME", TABLE)
    # A fixed key instead of the secret composition plugs in (restored after: other tests read it as composed).
    monkeypatch.setattr(audit, "_signing_key_source", lambda: KEY)
    with mock_aws():
        create_table(boto3.client("dynamodb"), TABLE)
        yield Service(Store(TABLE))


def run_waiting(service: Service, admin, definition=GATE) -> str:
    service.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [definition], "edges": []}))
    return service.create_run(admin, CreateRunRequest.model_validate({"workflowId": "wf"})).runId


def log(service: Service, tenant: str = "t1") -> list[dict[str, Any]]:
    head = service.store.audit_log.head(tenant)
    return [entry for _, entry in service.store.audit_log.entries(tenant, 1, head.seq)]


def alter(tenant: str, seq: int, change: dict[str, Any]) -> None:
    """What someone with write access to the table could do behind the service's back."""
    client = boto3.client("dynamodb")
    key = {"pk": {"S": items.log_pk(tenant)}, "sk": {"S": items.entry_sk(seq)}}
    entry = json.loads(client.get_item(TableName=TABLE, Key=key)["Item"]["entry"]["S"])
    client.put_item(TableName=TABLE, Item={**key, "entry": {"S": json.dumps({**entry, **change})}})


def test_every_audited_action_appends_one_entry_chained_to_the_one_before(service) -> None:
    admin = signed_in(service)
    run_id = run_waiting(service, admin, QUORUM)
    service.resolve_interrupt(admin, run_id, "gate", {"action": "accept", "comment": "fine by me"})
    other = signed_in(service, "bob")
    service.resolve_interrupt(other, run_id, "gate", {"action": "accept"})
    cancelled = run_waiting(service, admin)
    service.cancel_run(admin, cancelled, CancelRunRequest(reason="not needed"))
    surface = TokenSurface(service, lambda _force: KeyRing.generate())
    minted_for = run_waiting(service, admin)
    surface.mint(admin, minted_for, "gate", "inspect")
    issued = service.create_key(admin, CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
    service.revoke_key("t1", issued["keyId"], audit.actor(admin))
    tenants.put_settings(service, "t1", TenantSettings.model_validate({"eventRetentionHours": 2}), "admin", audit.actor(admin))
    tenants.put_grant(service, "t1", "github", CredentialGrantRequest(scopes=["repo"]), "admin", audit.actor(admin))

    entries = log(service)
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
    assert entries[0]["actor"] == audit.OPERATOR
    assert audit.verify(service.store, "t1", 0, 100) == {
        "fromSeq": 0,
        "toSeq": 100,
        "chainValid": True,
        "checkpoints": [],
        "anomalies": [],
    }
    assert log(service, "t2") == []  # every tenant has a chain of its own


def test_an_altered_entry_breaks_the_chain_at_the_next_one_and_the_last_one_against_the_head(service) -> None:
    admin = signed_in(service)
    for _ in range(3):
        service.create_key(admin, CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
    alter("t1", 2, {"details": {"subjectId": "someone-else"}})
    broken = audit.verify(service.store, "t1", 1, 4)
    assert broken["chainValid"] is False
    assert broken["anomalies"] == [
        {
            "atSeq": 3,
            "kind": "chain-break",
            "expectedPrevHash": rules.entry_hash(log(service)[1]),
            "actualPrevHash": log(service)[2]["prevHash"],
        }
    ]
    # The last entry has no successor: the chain head holds its hash.
    alter("t1", 4, {"at": "2020-01-01T00:00:00Z"})
    assert {"atSeq": 4, "kind": "hash-mismatch", "detail": "the entry differs from the hash the chain head holds"} in audit.verify(
        service.store, "t1", 1, 4
    )["anomalies"]
    # A removed entry is missing; the link over the gap cannot be checked, so it is not also a chain break.
    boto3.client("dynamodb").delete_item(TableName=TABLE, Key={"pk": {"S": items.log_pk("t1")}, "sk": {"S": items.entry_sk(1)}})
    assert audit.verify(service.store, "t1", 1, 2)["anomalies"] == [{"atSeq": 1, "kind": "missing-entry"}]


def test_an_action_and_its_entry_land_together_or_not_at_all(service) -> None:
    admin = signed_in(service)
    run_id = run_waiting(service, admin)
    before = service.store.audit_log.head("t1").seq
    service.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    with pytest.raises(DomainError) as refused:
        service.resolve_interrupt(admin, run_id, "gate", {"action": "reject"})
    assert refused.value.code == "interrupt_already_resolved"
    with pytest.raises(DomainError):
        service.cancel_run(admin, run_id, CancelRunRequest())
    # One decision recorded; the refused decision and cancel left nothing.
    assert [e["action"] for e in log(service)[before:]] == ["interrupt.decided"]

    # A transaction that fails on the action's own condition writes no entry either: the head stays put.
    def lose_the_race(**kwargs: Any) -> None:
        raise items_conflict()

    head = service.store.audit_log.head("t1")
    service.store.client.meta.events.register("before-call.dynamodb.TransactWriteItems", lambda **_: lose_the_race())
    with pytest.raises(Exception):  # noqa: B017, PT011 - any failure: the point is what it left behind
        service.create_key(admin, CreateKeyRequest(subjectId="x", scopes=["runs:read"]))
    assert service.store.audit_log.head("t1") == head


def items_conflict() -> Exception:
    from botocore.exceptions import ClientError

    reasons = [{"Code": "ConditionalCheckFailed"}, {"Code": "None"}, {"Code": "None"}]
    error = {"Error": {"Code": "TransactionCanceledException", "Message": "x"}, "CancellationReasons": reasons}
    return ClientError(error, "TransactWriteItems")  # type: ignore[arg-type]


def test_an_append_that_loses_the_head_to_another_is_placed_after_it(service) -> None:
    admin = signed_in(service)
    other_instance = Service(Store(TABLE))
    real_head = items.AuditLog.head
    raced: list[int] = []

    def head_then_race(log_: items.AuditLog, tenant: str) -> rules.Head:
        head = real_head(log_, tenant)
        if not raced:
            raced.append(1)
            # Another instance appends between this read and this transaction.
            other_instance.create_key(admin, CreateKeyRequest(subjectId="first", scopes=["runs:read"]))
        return head

    items.AuditLog.head = head_then_race  # type: ignore[method-assign]
    try:
        service.create_key(admin, CreateKeyRequest(subjectId="second", scopes=["runs:read"]))
    finally:
        items.AuditLog.head = real_head  # type: ignore[method-assign]
    entries = log(service)
    assert [e["details"]["subjectId"] for e in entries[-2:]] == ["first", "second"]
    assert audit.verify(service.store, "t1", 1, len(entries))["chainValid"] is True


def test_a_checkpoint_signs_the_merkle_root_of_what_it_anchors_and_verification_checks_both(service, monkeypatch) -> None:
    admin = signed_in(service)
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_ENTRIES", 3)
    for n in range(6):
        service.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))
    # Seven entries: checkpoints were due after the third and the sixth, and made right after those appends.
    checkpoints = service.store.audit_log.checkpoints("t1", 1, 100)
    assert [c["atSequence"] for c in checkpoints] == [3, 6]
    entries = log(service)
    assert checkpoints[1]["merkleRoot"] == rules.merkle_root([rules.entry_hash(e) for e in entries[3:6]])
    public = rules.public_key_b64(KEY)
    assert rules.signature_valid(public, checkpoints[1]["merkleRoot"], checkpoints[1]["signature"])
    verified = audit.verify(service.store, "t1", 4, 7)
    assert verified["chainValid"] is True
    assert verified["checkpointsValid"] is True
    assert [c["checkpoint"] for c in verified["checkpoints"]] == ["ckpt-6"]

    # The seventh waits for the next one; the sweep makes it once it is due by age.
    assert audit.checkpoint_pending(service.store) == 0
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
    assert audit.checkpoint_pending(service.store) == 1
    assert service.store.audit_log.head("t1").checkpoint_seq == 7
    assert list(service.store.audit_log.pending_tenants()) == []

    # An entry altered after its checkpoint: the root no longer matches, the signature still does.
    alter("t1", 5, {"details": {}})
    anomalies = audit.verify(service.store, "t1", 4, 7)["anomalies"]
    assert {"atSeq": 6, "kind": "merkle-mismatch", "checkpoint": "ckpt-6"} in anomalies
    # A forged checkpoint: a root the key never signed.
    client = boto3.client("dynamodb")
    key = {"pk": {"S": items.log_pk("t1")}, "sk": {"S": items.checkpoint_sk(3)}}
    client.update_item(TableName=TABLE, Key=key, UpdateExpression="SET merkleRoot = :r", ExpressionAttributeValues={":r": {"S": "0" * 64}})
    forged = audit.verify(service.store, "t1", 1, 3)
    assert forged["chainValid"] is False
    assert forged["checkpointsValid"] is False
    assert {a["kind"] for a in forged["anomalies"]} == {"merkle-mismatch", "signature-invalid"}


def test_verification_refuses_a_bad_or_too_wide_range(service) -> None:
    for from_seq, to_seq in [(5, 4), (-1, 3), (1, audit.MAX_VERIFY_RANGE + 1)]:
        with pytest.raises(DomainError) as refused:
            audit.verify(service.store, "t1", from_seq, to_seq)
        assert refused.value.code == "validation_error"


def test_entries_are_listed_newest_first_in_pages(service) -> None:
    admin = signed_in(service)
    for n in range(4):
        service.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))
    first = audit.entries_page(service.store, "t1", 3, None)
    assert [e["seq"] for e in first["entries"]] == [5, 4, 3]
    assert first["headSeq"] == 5
    second = audit.entries_page(service.store, "t1", 3, first["cursor"])
    assert [e["seq"] for e in second["entries"]] == [2, 1]
    assert "cursor" not in second
    with pytest.raises(DomainError):
        audit.entries_page(service.store, "t1", 3, "not-a-cursor")


def test_the_timeouts_function_sweeps_the_checkpoints_of_quiet_tenants_with_the_key_from_its_secret(service, monkeypatch) -> None:
    from interlude.adapters.audit_key import ensure_signing_key
    from interlude.local import lambda_runtime

    monkeypatch.setenv(wiring.AUDIT_KEY_SECRET.env, "audit-key-test")
    ensure_signing_key("audit-key-test")
    admin = signed_in(service)
    service.create_key(admin, CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
    sweep = dict(wiring.AUDIT_CHECKPOINT_SWEEP.input)
    # Not due yet: the entries are younger than the interval less one sweep period.
    assert lambda_runtime.invoke("timeouts", sweep) == {"checkpoints": 0}
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", wiring.AUDIT_CHECKPOINT_SWEEP.every_s)
    assert lambda_runtime.invoke("timeouts", sweep) == {"checkpoints": 1}
    assert service.store.audit_log.head("t1").checkpoint_seq == 2
    verified = audit.verify(service.store, "t1", 1, 2)  # with the key the function read (composition's source)
    assert verified["checkpointsValid"] is True
    assert verified["checkpoints"][0]["atSequence"] == 2
