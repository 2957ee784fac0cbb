"""A chain's head that lags behind its newest entries (docs/adr/0172): the appender on the stream may leave the head
where it is while it is marked, an entry waits for a checkpoint and fewer than rules/audit.HEAD_LAG_ENTRIES lie past it
(formats.AUDIT_HEAD_LAGS_WRITTEN, on from 0.9.0). Every reader takes the run past the head that chains from it for the
chain's: the listing, verification, a checkpoint (which moves the head over it first), the sweep's settle, and the
check for a draft delivered again; an entry past the head that does not chain from it is not the chain's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interlude import wiring
from interlude.composition import Services
from interlude.domain import clock, formats
from interlude.domain.audit import AuditDraft
from interlude.domain.models.requests import CreateKeyRequest
from interlude.rules import audit as rules
from interlude.store import audit as items
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.integration.test_audit_orphans import raced_after_first_put
from tests.integration.test_audit_stream import decided, dispatched, records_of, writes_on_chains
from tests.support.moto_world import ENTRIES_TABLE, TABLE

KEY = rules.signing_key(b"a test seed, never a deployment's")


@pytest.fixture
def services(world, monkeypatch) -> Any:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)  # every entry in chain 0
    return Services(Store(TABLE, ENTRIES_TABLE), audit_key=lambda: KEY)


@pytest.fixture
def lagging(monkeypatch) -> None:
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", True)


def stored(tenant: str) -> list[dict[str, Any]]:
    """Every entry item of the chain, past its head too, plain, in order."""
    got = Store(TABLE, ENTRIES_TABLE).client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :a)",
        ExpressionAttributeValues={":pk": {"S": items.log_pk(tenant, 0)}, ":a": {"S": items.ENTRY_SK_PREFIX}},
        ConsistentRead=True,
    )
    return [{k: next(iter(v.values())) for k, v in item.items()} for item in got["Items"]]


def decisions(tenant: str) -> list[str]:
    """The run of each decision entry stored, in the chain's order (each checked to be at its place)."""
    entries = [json.loads(item["entry"]) for item in stored(tenant)]
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    return [e["target"]["runId"] for e in entries if e["action"] == "interrupt.decided"]


def placed_of(records: list[dict[str, Any]]) -> list[tuple[AuditDraft, str]]:
    """The drafts the records' event batches carry, with their sources, as dispatch hands them to the appender."""
    placed = []
    for record in records:
        image = record["dynamodb"]["NewImage"]
        draft = items.carried_draft(image)
        if draft is not None:
            placed.append((draft, items.draft_source(image["pk"]["S"], image["sk"]["S"])))
    return placed


def lagged(services: Services, tenant: str, count: int) -> tuple[Any, list[str]]:
    """A chain marked and waiting for its checkpoint (the admin's key.created), then `count` decisions dispatched one
    record batch each, past its head: the admin and the runs."""
    admin = signed_in(services)
    head = services.store.audit_log.head(tenant, 0)
    assert head.marked
    assert head.pending_since is not None
    runs = decided(services, admin, count)
    for run_id in runs:
        assert dispatched(records_of([run_id])) == []
    assert services.store.audit_log.head(tenant, 0) == head
    return admin, runs


def test_with_the_head_lagging_each_decision_is_one_put_and_every_reader_takes_the_entries_past_the_head(
    services, tenant, monkeypatch, lagging
) -> None:
    admin = signed_in(services)
    log = services.store.audit_log
    before = log.head(tenant, 0)
    runs = decided(services, admin, 3)
    writes = writes_on_chains(monkeypatch)

    for run_id in runs:
        assert dispatched(records_of([run_id])) == []

    # One PutItem a decision; the head stays (3 entries past it, fewer than HEAD_LAG_ENTRIES)
    assert writes == {("PutItem", "entry"): 3}
    assert log.head(tenant, 0) == before
    assert decisions(tenant)[-3:] == runs
    tail = len(stored(tenant))
    assert tail == before.seq + 3
    # The listing shows them and counts them in the chain; verification walks them
    listed = services.audit.entries_page(tenant, 50, None)
    assert [e["target"].get("runId") for e in listed["entries"][:3]] == runs[::-1]
    assert listed["chains"] == {"0": tail}
    assert listed["headSeq"] == tail
    assert len(listed["entries"]) == tail
    verified = services.audit.verify(tenant, 0, 100)
    assert (verified["chainValid"], verified["anomalies"]) == (True, [])
    # Their records delivered again (the same appender, which knows them) add nothing
    assert dispatched(records_of(runs)) == []
    assert len(stored(tenant)) == tail
    # A checkpoint moves the head over them first, and covers them
    made = services.audit.checkpoint(tenant, 0)
    assert made is not None
    assert made["atSequence"] == tail
    assert log.head(tenant, 0).seq == tail
    assert log.head(tenant, 0).checkpoint_seq == tail
    verified = services.audit.verify(tenant, 0, 100)
    assert verified["chainValid"] is True
    assert verified["checkpointsValid"] is True


def rewrite(item: dict[str, Any], details: dict[str, Any]) -> None:
    """Put the entry item again with other details (what a writer with the table's rights can do)."""
    entry = {**json.loads(item["entry"]), "details": details}
    Store(TABLE, ENTRIES_TABLE).client.put_item(
        TableName=TABLE,
        Item={"pk": {"S": item["pk"]}, "sk": {"S": item["sk"]}, "entry": {"S": rules.canonical(entry).decode()}},
    )


def test_an_entry_past_a_lagging_head_rewritten_ends_the_chain_there_and_once_checkpointed_is_caught(
    services, tenant, lagging
) -> None:
    lagged(services, tenant, 3)
    head = services.store.audit_log.head(tenant, 0)
    tail = len(stored(tenant))

    # Rewritten while past the head, its successor no longer chains: the chain the readers take ends at it (as it
    # would with a head that moved and a rewritten head: nothing signed covers it yet)
    rewrite(stored(tenant)[head.seq], {"outcome": "rejected"})
    assert services.audit.entries_page(tenant, 50, None)["chains"] == {"0": head.seq + 1}
    rewrite(stored(tenant)[head.seq], json.loads(stored(tenant)[head.seq + 1]["entry"])["details"])
    assert services.audit.entries_page(tenant, 50, None)["chains"] == {"0": tail}

    # Once a checkpoint covers it, a rewrite breaks the chain and its Merkle root
    assert services.audit.checkpoint(tenant, 0) is not None
    rewrite(stored(tenant)[head.seq], {"outcome": "rejected"})
    verified = services.audit.verify(tenant, 0, 100)
    assert verified["chainValid"] is False
    assert {(a["atSeq"], a["kind"]) for a in verified["anomalies"]} == {(head.seq + 2, "chain-break"), (tail, "merkle-mismatch")}


def test_a_record_delivered_again_to_an_appender_that_does_not_know_the_entries_past_the_head_appends_nothing(
    services, tenant, monkeypatch, lagging
) -> None:
    admin, runs = lagged(services, tenant, 3)
    total = len(stored(tenant))
    fresh = items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    (later,) = decided(services, admin)
    writes = writes_on_chains(monkeypatch)

    # Its draft is among the entries past the head (one Query past the head finds them, before any put)
    assert fresh.append_drafts(tenant, 0, placed_of(records_of(runs[1:2])), 0.0) is None
    assert writes == {}
    assert len(stored(tenant)) == total
    # ... and with a new decision after it: the new one follows them, once, with no put on a taken place first
    written = fresh.append_drafts(tenant, 0, placed_of(records_of(runs + [later])), 0.0)
    assert writes == {("PutItem", "entry"): 1}
    assert written is not None
    assert written.seq == total + 1
    assert decisions(tenant)[-4:] == [*runs, later]
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def test_rolled_back_to_a_writer_that_moves_the_head_the_entries_past_it_are_adopted_once(
    services, tenant, monkeypatch, lagging
) -> None:
    admin, runs = lagged(services, tenant, 3)
    total = len(stored(tenant))
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", False)
    fresh = items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    (later,) = decided(services, admin)

    written = fresh.append_drafts(tenant, 0, placed_of(records_of([runs[-1], later])), 0.0)

    # Its put on the first place past the head fails; it reads them, adopts them, and moves the head over all
    assert written is not None
    assert written.seq == total + 1
    assert services.store.audit_log.head(tenant, 0).seq == total + 1
    assert decisions(tenant)[-4:] == [*runs, later]


def test_an_action_appending_in_its_own_transaction_follows_the_entries_past_the_head_at_its_first_try(
    services, tenant, monkeypatch, lagging
) -> None:
    admin, runs = lagged(services, tenant, 2)
    tail = len(stored(tenant))
    writes = writes_on_chains(monkeypatch)

    services.keys.create_key(admin, CreateKeyRequest(subjectId="later", scopes=["runs:read"]))

    # One transaction, its entry after them and the head moved over all: no attempt failed on a taken place
    assert writes == {("TransactWriteItems", "entry"): 1, ("TransactWriteItems", "head"): 1}
    assert services.store.audit_log.head(tenant, 0).seq == tail + 1
    assert decisions(tenant)[-2:] == runs
    assert json.loads(stored(tenant)[-1]["entry"])["action"] == "key.created"


def test_two_lagging_appenders_interleaved_both_land_once_in_order(services, tenant, monkeypatch, lagging) -> None:
    lagged(services, tenant, 1)
    log = services.store.audit_log
    base = len(stored(tenant))
    other = items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    at = clock.iso(clock.now())

    def draft(run_id: str) -> tuple[AuditDraft, str]:
        return AuditDraft(tenant, "interrupt.decided", {"subjectId": "someone"}, {"runId": run_id}, at, {}), f"source-{run_id}"

    mine, theirs = [draft("run-a"), draft("run-b")], [draft("run-c")]
    # The other appender runs whole between this one's first entry and its second: it follows the first.
    raced_after_first_put(monkeypatch, log, lambda: other.append_drafts(tenant, 0, theirs, 0.0))
    log.append_drafts(tenant, 0, mine, 0.0)
    # Each again, after the other (each knows only its own entries past the head), with one more
    other.append_drafts(tenant, 0, [*mine, draft("run-d")], 0.0)
    log.append_drafts(tenant, 0, [*theirs, draft("run-e")], 0.0)

    assert decisions(tenant)[-5:] == ["run-a", "run-c", "run-b", "run-d", "run-e"]
    assert len(stored(tenant)) == base + 5
    assert log.head(tenant, 0).seq < base + 5
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True
    assert services.audit.entries_page(tenant, 50, None)["chains"] == {"0": base + 5}


def test_an_entry_past_the_run_that_does_not_chain_is_neither_listed_nor_verified_and_is_written_over(
    services, tenant, lagging
) -> None:
    admin, _ = lagged(services, tenant, 2)
    tail = len(stored(tenant))
    forged = AuditDraft(tenant, "interrupt.decided", {"subjectId": "x"}, {"runId": "forged"}, clock.iso(clock.now()), {})
    Store(TABLE, ENTRIES_TABLE).client.put_item(
        TableName=TABLE,
        Item={
            "pk": {"S": items.log_pk(tenant, 0)},
            "sk": {"S": items.entry_sk(tail + 1)},
            "entry": {"S": rules.canonical(forged.entry(tail + 1, "0" * 64, 0)).decode()},
        },
    )

    listed = services.audit.entries_page(tenant, 50, None)
    assert "forged" not in [e["target"].get("runId") for e in listed["entries"]]
    assert listed["chains"] == {"0": tail}
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True
    made = services.audit.checkpoint(tenant, 0)
    assert made is not None
    assert made["atSequence"] == tail

    (later,) = decided(services, admin)
    assert dispatched(records_of([later])) == []
    assert "forged" not in decisions(tenant)
    assert decisions(tenant)[-1] == later
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def test_the_sweep_keeps_a_chain_on_the_pending_index_while_an_entry_lies_past_its_checkpointed_head(
    services, tenant, monkeypatch, lagging
) -> None:
    admin, _ = lagged(services, tenant, 1)
    log = services.store.audit_log
    late = placed_of(records_of(decided(services, admin)))
    assert services.audit.checkpoint(tenant, 0) is not None
    head = log.head(tenant, 0)
    assert head.seq == head.checkpoint_seq
    # An append that read the head before that checkpoint (an entry waiting then) puts its entry after it, lagging
    written, _ = items.chain_items(tenant, 0, head, late, 0.0)
    for label, op in written:
        if label == items.ENTRY_LABEL:
            log.client.put_item(TableName=TABLE, **op["Put"])
    monkeypatch.setattr(rules, "MARKER_KEEP_SECONDS", 0)

    services.audit.checkpoint_pending()

    # Not taken off the index: the head moved over the entry, which waits for its checkpoint
    assert (tenant, 0) in set(log.pending_chains())
    moved = log.head(tenant, 0)
    assert moved.seq == head.seq + 1
    assert moved.pending_since is not None
    monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
    services.audit.checkpoint_pending()
    assert log.head(tenant, 0).checkpoint_seq == head.seq + 1
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def test_with_the_switch_off_every_append_moves_the_head(services, tenant, monkeypatch) -> None:
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", False)  # as 0.8.0 appends
    admin = signed_in(services)
    runs = decided(services, admin, 2)
    writes = writes_on_chains(monkeypatch)

    for run_id in runs:
        assert dispatched(records_of([run_id])) == []

    assert writes == {("PutItem", "entry"): 2, ("UpdateItem", "head"): 2}
    assert services.store.audit_log.head(tenant, 0).seq == len(stored(tenant))


def test_a_settled_chains_listing_reads_nothing_past_its_head_and_a_marked_ones_reads_from_its_top_once(
    services, tenant, monkeypatch
) -> None:
    """A head is left behind only while it is marked, and the sweep's settle moves it over anything past it before it
    unmarks it: the listing reads a marked chain from the top of its key range (the run past the head with the page,
    one Query: docs/adr/0173), a settled one from its head."""
    admin = signed_in(services)
    decided(services, admin, 2)
    log = services.store.audit_log
    tops: list[str] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        values = params.get("ExpressionAttributeValues") or {}
        if values.get(":pk", {}).get("S") == items.log_pk(tenant, 0):
            tops.append(values[":hi"]["S"])

    log.client.meta.events.register("provide-client-params.dynamodb.Query", note)
    try:
        assert log.head(tenant, 0).marked
        listed = services.audit.entries_page(tenant, 50, None)
        assert tops == [items.entry_sk(items.LAST_SEQ)]
        monkeypatch.setattr(rules, "MARKER_KEEP_SECONDS", 0)
        monkeypatch.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
        for _ in range(3):
            services.audit.checkpoint_pending()
        head = log.head(tenant, 0)
        assert not head.marked
        tops.clear()
        assert services.audit.entries_page(tenant, 50, None)["entries"] == listed["entries"]
        assert tops == [items.entry_sk(head.seq)]
    finally:
        log.client.meta.events.unregister("provide-client-params.dynamodb.Query", note)
