"""Issue 26 S6 in process (moto: DynamoDB, S3 with Object Lock): someone with write access to the table rolls a
chain back, by deleting its last entry and rewinding its head, by deleting its head, or by deleting its last
checkpoint, and verification catches each once the tenant's anchor has been published: the checkpoint sweep signs
every chain's head and last checkpoint into an object the table's writers cannot rewrite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from interlude import wiring
from interlude.adapters.audit_anchor import S3Anchors, anchor_key, ensure_locked_bucket
from interlude.adapters.audit_key import ensure_signing_key
from interlude.composition import Services
from interlude.domain import clock, formats
from interlude.domain.audit import AuditDraft
from interlude.domain.models.requests import CreateKeyRequest
from interlude.local import lambda_runtime
from interlude.local.http_gateway import to_event
from interlude.rules import audit as rules
from interlude.store import audit as items
from interlude.store.facade import Store
from interlude.store.provisioning import create_tables, entries_table_beside
from tests.integration.conftest import new_api_key, signed_in

TABLE = "interlude-anchor-test"
ENTRIES_TABLE = entries_table_beside(TABLE)
BUCKET = "interlude-anchor-test"
KEY = rules.signing_key(b"a test seed, never a deployment's")
SWEEP = dict(wiring.AUDIT_CHECKPOINT_SWEEP.input)


# A world of its own: the checkpoint sweep reads the pending chains of every tenant.
@pytest.fixture
def services(monkeypatch) -> Iterator[Services]:
    monkeypatch.setenv(wiring.TABLE_NAME_ENV, TABLE)
    monkeypatch.setenv(wiring.ENTRIES_TABLE_NAME_ENV, ENTRIES_TABLE)
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)  # every entry in chain 0
    with mock_aws():
        create_tables(boto3.client("dynamodb"), TABLE, ENTRIES_TABLE)
        ensure_locked_bucket(BUCKET, retention_days=1)
        # A fixed key and the test's bucket instead of the deployment's the composition reads by default.
        yield Services(Store(TABLE, ENTRIES_TABLE), audit_key=lambda: KEY, anchors=lambda: S3Anchors(BUCKET))


def entries(services: Services, count: int) -> None:
    """`count` more entries: the key signed_in issues (the CLI's path), then keys it creates."""
    admin = signed_in(services)
    for n in range(count - 1):
        services.keys.create_key(admin, CreateKeyRequest(subjectId=f"robot{n}", scopes=["runs:read"]))


def swept(services: Services, monkeypatch) -> None:
    """The sweep once every pending entry is due: checkpoints made, the anchor published."""
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
    services.audit.checkpoint_pending()
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 300)


def table() -> Any:
    return boto3.client("dynamodb")


def head_key(chain: int = 0) -> dict[str, Any]:
    return {"pk": {"S": items.head_pk("t1", chain)}, "sk": {"S": items.HEAD_SK}}


def entry(seq: int) -> dict[str, Any]:
    key = {"pk": {"S": items.log_pk("t1", 0)}, "sk": {"S": items.entry_sk(seq)}}
    return json.loads(table().get_item(TableName=TABLE, Key=key)["Item"]["entry"]["S"])


def delete_entry(seq: int) -> None:
    table().delete_item(TableName=TABLE, Key={"pk": {"S": items.log_pk("t1", 0)}, "sk": {"S": items.entry_sk(seq)}})


def rewind_head(seq: int, checkpoint_seq: int) -> None:
    """The head put back as it was at `seq`, naming that entry's hash and checkpoint `checkpoint_seq`."""
    item = {**head_key(), "seq": {"N": str(seq)}, "hash": {"S": rules.entry_hash(entry(seq))}, "checkpointSeq": {"N": str(checkpoint_seq)}}
    table().put_item(TableName=TABLE, Item=item)


def verified(services: Services) -> dict[str, Any]:
    return services.audit.verify("t1", 0, 1_000_000)


def kinds(answer: dict[str, Any]) -> set[tuple[int, str]]:
    return {(a["atSeq"], a["kind"]) for a in answer["anomalies"]}


def test_the_sweep_publishes_every_chains_head_signed_under_object_lock_and_then_settles_the_chain(services, monkeypatch):
    entries(services, 5)
    swept(services, monkeypatch)

    s3 = boto3.client("s3")
    published = s3.get_object(Bucket=BUCKET, Key=anchor_key("t1"))
    assert rules.anchored_heads(rules.public_key_b64(KEY), published["Body"].read(), "t1") == {0: rules.Anchored(5, rules.entry_hash(entry(5)), 5)}
    assert rules.anchored_heads(rules.public_key_b64(KEY), s3.get_object(Bucket=BUCKET, Key=anchor_key("t1"))["Body"].read(), "t2") is None
    # Checkpointed and published: the chain leaves the sweep's work list once quiet for MARKER_KEEP_SECONDS.
    assert list(services.store.audit_log.pending_chains()) == [("t1", 0)]
    monkeypatch.setattr(rules, "MARKER_KEEP_SECONDS", 0)
    services.audit.checkpoint_pending()
    assert list(services.store.audit_log.pending_chains()) == []
    with pytest.raises(ClientError) as refused:  # no one takes a published version back
        s3.delete_object(Bucket=BUCKET, Key=anchor_key("t1"), VersionId=published["VersionId"])
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    # Honest appends after it move the head past the anchor: still valid.
    entries(services, 3)
    assert verified(services)["chainValid"] is True


def test_deleting_the_last_entry_and_rewinding_the_head_is_caught_once_anchored(services, monkeypatch):
    entries(services, 6)
    delete_entry(6)
    rewind_head(5, 0)
    assert verified(services)["chainValid"] is True  # before any anchor: what the issue found

    entries(services, 4)  # the table again holds entries 6..9 (another 6 than the one deleted)
    swept(services, monkeypatch)
    delete_entry(9)
    rewind_head(8, 9)  # the head as it was at 8; the checkpoint at 9 left alone
    answer = verified(services)
    assert answer["chainValid"] is False
    assert kinds(answer) == {(9, "missing-entry"), (9, "hash-mismatch"), (9, "merkle-mismatch")}
    behind = next(a for a in answer["anomalies"] if a["kind"] == "hash-mismatch")
    assert behind["detail"] == "chain 0: the chain head (entry 8, checkpoint 9) is behind the published anchor (entry 9, checkpoint 9)"


def test_deleting_a_chains_head_is_caught_once_anchored(services, monkeypatch):
    entries(services, 4)
    head = table().get_item(TableName=TABLE, Key=head_key())["Item"]
    table().delete_item(TableName=TABLE, Key=head_key())
    assert verified(services)["chainValid"] is True  # before any anchor: the chain is no longer walked at all
    assert services.store.audit_log.heads("t1") == {}

    table().put_item(TableName=TABLE, Item=head)  # (the chain cannot take another entry without its head)
    swept(services, monkeypatch)
    table().delete_item(TableName=TABLE, Key=head_key())
    answer = verified(services)
    assert answer["chainValid"] is False
    # The chain is walked from the anchor (its entries and checkpoint are intact); what is wrong is its head.
    assert answer["anomalies"] == [
        {"atSeq": 4, "kind": "hash-mismatch", "detail": "chain 0: the chain head (entry 0, checkpoint 0) is behind the published anchor (entry 4, checkpoint 4)"}
    ]
    assert [c["atSequence"] for c in answer["checkpoints"]] == [4]


def test_deleting_the_last_checkpoint_is_caught_once_anchored(services, monkeypatch):
    entries(services, 3)
    swept(services, monkeypatch)
    entries(services, 2)
    swept(services, monkeypatch)
    checkpoints = services.store.audit_log.checkpoints("t1", 0, 1, 100)
    assert [c["atSequence"] for c in checkpoints] == [3, 5]
    table().delete_item(TableName=TABLE, Key={"pk": {"S": items.log_pk("t1", 0)}, "sk": {"S": items.checkpoint_sk(5)}})
    rewind_head(5, 3)
    answer = verified(services)
    assert answer["chainValid"] is False
    gone = {"atSeq": 5, "kind": "merkle-mismatch", "checkpoint": "ckpt-000-5", "detail": "chain 0: the checkpoint the published anchor names is missing"}
    assert gone in answer["anomalies"]
    assert answer["checkpointsValid"] is False


def test_an_anchor_this_hosts_key_did_not_sign_is_an_anomaly(services, monkeypatch):
    entries(services, 2)
    forger = rules.signing_key(b"someone else's seed")
    forged = rules.signed_anchor(forger, rules.anchor_document("t1", {0: rules.Head(1, "0" * 64, 0)}, "2026-12-05T00:00:00Z"))
    boto3.client("s3").put_object(Bucket=BUCKET, Key=anchor_key("t1"), Body=forged, ChecksumAlgorithm="SHA256")
    answer = verified(services)
    assert answer["anomalies"] == [
        {
            "atSeq": 0,
            "kind": "signature-invalid",
            "checkpoint": "audit-anchor",
            "detail": "the published audit anchor is not one this host's key signed for this tenant",
        }
    ]


def test_the_timeouts_sweep_publishes_and_the_api_verifies_through_the_bucket_wiring_names(services, monkeypatch):
    """The real handlers, composed as deployed: the anchors' bucket comes from AUDIT_ANCHOR_BUCKET."""
    monkeypatch.setenv(wiring.AUDIT_KEY_SECRET.env, "audit-key-test")
    monkeypatch.setenv(wiring.AUDIT_ANCHOR_BUCKET.env, BUCKET)
    ensure_signing_key("audit-key-test")
    # The handlers' services read the key and the bucket as deployed (the fixture's own services keep theirs).
    lambda_runtime.fresh_instances()
    key = new_api_key(services)
    entries(services, 3)
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", wiring.AUDIT_CHECKPOINT_SWEEP.every_s)
    assert lambda_runtime.invoke("timeouts", SWEEP) == {"checkpoints": 1}
    assert boto3.client("s3").get_object(Bucket=BUCKET, Key=anchor_key("t1"))["ContentLength"] > 0

    table().delete_item(TableName=TABLE, Key=head_key())
    event = to_event("GET", "/audit/verify?fromSeq=0&toSeq=1000000", {"authorization": f"Bearer {key}"}, b"", "127.0.0.1")
    got = lambda_runtime.invoke("api", event)
    assert got["statusCode"] == 200
    assert json.loads(got["body"])["chainValid"] is False


def marker_key(chain: int = 0) -> dict[str, Any]:
    return {"pk": {"S": items.head_pk("t1", chain)}, "sk": {"S": items.PENDING_SK}}


def marker_puts(services: Services) -> list[int]:
    """Per TransactWriteItems from here on, how many pending markers it puts."""
    puts: list[int] = []

    def counted(params: dict[str, Any], **_: Any) -> None:
        written = [op["Put"]["Item"] for op in params["TransactItems"] if "Put" in op]
        puts.append(sum(1 for item in written if item["sk"]["S"] == items.PENDING_SK))

    services.store.client.meta.events.register("provide-client-params.dynamodb.TransactWriteItems", counted)
    return puts


def anchored_seq(services: Services) -> int:
    published = anchors_bucket().get_object(Bucket=BUCKET, Key=anchor_key("t1"))["Body"].read()
    heads = rules.anchored_heads(rules.public_key_b64(KEY), published, "t1")
    assert heads is not None
    return heads[0].seq


def anchors_bucket() -> Any:
    return boto3.client("s3")


def test_an_anchored_chain_keeps_its_marker_a_while_so_its_next_entries_write_none(services, monkeypatch):
    entries(services, 3)
    swept(services, monkeypatch)
    assert list(services.store.audit_log.pending_chains()) == [("t1", 0)]
    # A sweep while nothing moved: the kept chain's head, the anchor read back; nothing written, nothing published.
    calls: list[str] = []
    services.store.client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    version = anchors_bucket().get_object(Bucket=BUCKET, Key=anchor_key("t1"))["VersionId"]
    assert services.audit.checkpoint_pending() == 0
    assert calls == ["Query"] * items.PENDING_SHARDS + ["BatchGetItem"]
    assert anchors_bucket().get_object(Bucket=BUCKET, Key=anchor_key("t1"))["VersionId"] == version

    puts = marker_puts(services)
    services.keys.create_key(signed_in(services), CreateKeyRequest(subjectId="late", scopes=["runs:read"]))
    assert puts == [0, 0]  # the chain is marked already: neither entry (the key signed in, the key made) puts a marker
    swept(services, monkeypatch)
    assert anchored_seq(services) == services.store.audit_log.head("t1", 0).seq
    assert verified(services)["chainValid"] is True

    monkeypatch.setattr(rules, "MARKER_KEEP_SECONDS", 0)
    services.audit.checkpoint_pending()
    assert list(services.store.audit_log.pending_chains()) == []
    puts.clear()
    services.keys.create_key(signed_in(services), CreateKeyRequest(subjectId="later", scopes=["runs:read"]))
    assert sum(puts) == 1  # settled: the next entry marks it again
    assert list(services.store.audit_log.pending_chains()) == [("t1", 0)]


def test_an_append_that_read_the_mark_before_the_chain_settled_writes_the_marker_again(services, monkeypatch):
    admin = signed_in(services)
    services.keys.create_key(admin, CreateKeyRequest(subjectId="robot", scopes=["runs:read"]))
    swept(services, monkeypatch)
    marked = services.store.audit_log.head("t1", 0)
    assert marked.marked
    monkeypatch.setattr(rules, "MARKER_KEEP_SECONDS", 0)
    services.audit.checkpoint_pending()  # settled after the head was read
    assert list(services.store.audit_log.pending_chains()) == []
    puts = marker_puts(services)
    # The append read the head before the chain settled (its next read is the head as it is)
    stale = [marked]
    real_head = items.AuditLog.head
    monkeypatch.setattr(items.AuditLog, "head", lambda log, tenant, chain: stale.pop() if stale else real_head(log, tenant, chain))
    services.keys.create_key(admin, CreateKeyRequest(subjectId="late", scopes=["runs:read"]))
    assert puts == [0, 1]  # refused on the mark it read, then placed with the marker
    assert list(services.store.audit_log.pending_chains()) == [("t1", 0)]


def test_a_head_from_before_the_mark_keeps_its_marker_while_entries_wait_and_settles_at_once(services, monkeypatch):
    entries(services, 2)
    forget_the_mark = {"TableName": TABLE, "Key": head_key(), "UpdateExpression": "REMOVE marked, checkpointedAt"}
    table().update_item(**forget_the_mark)
    admin = signed_in(services)
    puts = marker_puts(services)
    services.keys.create_key(admin, CreateKeyRequest(subjectId="late", scopes=["runs:read"]))
    assert puts == [0]  # an entry waits (pendingSince): its marker is there, as then
    swept(services, monkeypatch)
    table().update_item(**forget_the_mark)
    services.audit.checkpoint_pending()  # anchored when the mark was not kept: no time to wait out
    assert list(services.store.audit_log.pending_chains()) == []


def test_the_sweep_reads_the_heads_eventually_consistent_and_anchors_a_chain_it_checkpoints_without_reading_it_again(
    services, monkeypatch
):
    entries(services, 3)
    calls: list[str] = []
    consistent: list[bool] = []
    client = services.store.client
    client.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    client.meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem",
        lambda params, **_: consistent.extend(bool(body.get("ConsistentRead")) for body in params["RequestItems"].values()),
    )
    swept(services, monkeypatch)
    # The tenant's heads once, at half the units: the checkpoint reads its own chain's head strongly, and the anchor
    # takes the head that checkpoint left.
    assert consistent == [False]
    assert calls.count("BatchGetItem") == 1
    assert calls.count("GetItem") == 1
    head = services.store.audit_log.head("t1", 0)
    assert (head.seq, head.checkpoint_seq) == (3, 3)
    assert anchored_seq(services) == 3
    assert verified(services)["chainValid"] is True
    # The next sweep finds the anchor holding the head it reads: nothing published again.
    version = anchors_bucket().get_object(Bucket=BUCKET, Key=anchor_key("t1"))["VersionId"]
    services.audit.checkpoint_pending()
    assert anchors_bucket().get_object(Bucket=BUCKET, Key=anchor_key("t1"))["VersionId"] == version


def test_entries_past_a_lagging_head_are_checkpointed_and_anchored_by_the_sweep(services, monkeypatch):
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", True)
    entries(services, 2)  # the head marked, its entries waiting for a checkpoint
    log = services.store.audit_log
    at = clock.iso(clock.now())
    for n in range(3):
        decision = AuditDraft("t1", "interrupt.decided", {"subjectId": "someone"}, {"runId": f"run-{n}"}, at, {})
        log.append_drafts("t1", 0, [(decision, f"source-{n}")], 0.0)
    assert log.head("t1", 0).seq == 2  # three entries past it

    swept(services, monkeypatch)

    # The checkpoint moved the head over them and covers them; the anchor holds that head
    published = boto3.client("s3").get_object(Bucket=BUCKET, Key=anchor_key("t1"))["Body"].read()
    assert rules.anchored_heads(rules.public_key_b64(KEY), published, "t1") == {0: rules.Anchored(5, rules.entry_hash(entry(5)), 5)}
    assert verified(services)["chainValid"] is True
    # Cut back under the anchor afterwards (the last entry deleted, the head rewound): caught
    delete_entry(5)
    rewind_head(4, 0)
    assert (5, "missing-entry") in kinds(verified(services))
