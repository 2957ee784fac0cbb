"""Entries beyond a chain's head (docs/adr/0135): an append of plain writes that stops after putting its entries and
before moving the head leaves them there, orphans. Every reader takes the run of them that chains from the head for
the chain's (docs/adr/0172: listed, verified); the next append adopts it (an action's append in its own transaction, or
the appender on the stream), a draft delivered again finds itself among them and is not appended twice, and an entry
there that does not chain from the head is neither shown nor verified, and written over, never adopted."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.composition import Services
from interlude.domain import clock, formats
from interlude.domain.audit import AuditDraft
from interlude.domain.models.requests import CreateKeyRequest
from interlude.rules import audit as rules
from interlude.store import audit as items
from interlude.store.facade import Store
from tests.integration.conftest import signed_in
from tests.support.moto_world import ENTRIES_TABLE, TABLE

KEY = rules.signing_key(b"a test seed, never a deployment's")


@pytest.fixture
def services(world, monkeypatch) -> Any:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)
    return Services(Store(TABLE, ENTRIES_TABLE), audit_key=lambda: KEY)


def draft(tenant: str, run_id: str) -> AuditDraft:
    return AuditDraft(tenant, "interrupt.decided", {"subjectId": "someone"}, {"runId": run_id}, clock.iso(clock.now()), {})


def orphaned(services: Services, tenant: str, placed: list[tuple[AuditDraft, str]]) -> None:
    """Put the entries an append of `placed` after the head writes, and stop there: the head is not moved."""
    log = services.store.audit_log
    written, _ = items.chain_items(tenant, 0, log.head(tenant, 0), placed, clock.now().timestamp())
    for label, op in written:
        if label == items.ENTRY_LABEL:
            log.client.put_item(TableName=TABLE, **op["Put"])


def stored(services: Services, tenant: str) -> list[dict[str, Any]]:
    """Every entry item of the chain, beyond its head too, plain."""
    got = services.store.client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :a)",
        ExpressionAttributeValues={":pk": {"S": items.log_pk(tenant, 0)}, ":a": {"S": items.ENTRY_SK_PREFIX}},
        ConsistentRead=True,
    )
    return [{k: next(iter(v.values())) for k, v in item.items()} for item in got["Items"]]


def chained(services: Services, tenant: str) -> list[dict[str, Any]]:
    """The chain's entries up to its head, each checked to be there and in sequence."""
    head = services.store.audit_log.head(tenant, 0)
    entries = [json.loads(item["entry"]) for item in stored(services, tenant)][: head.seq]
    assert [e["seq"] for e in entries] == list(range(1, head.seq + 1))
    return entries


def test_orphans_that_chain_from_the_head_are_listed_and_verified_as_the_chains_and_an_append_adopts_them(services, tenant) -> None:
    admin = signed_in(services)
    services.keys.create_key(admin, CreateKeyRequest(subjectId="first", scopes=["runs:read"]))
    before = chained(services, tenant)
    orphaned(services, tenant, [(draft(tenant, "run-a"), "source-a"), (draft(tenant, "run-b"), "source-b")])

    assert len(stored(services, tenant)) == len(before) + 2
    assert services.store.audit_log.head(tenant, 0).seq == len(before)
    listed = services.audit.entries_page(tenant, 50, None)
    assert [e["target"].get("runId") for e in listed["entries"]] == ["run-b", "run-a"] + [None] * len(before)
    assert listed["chains"] == {"0": len(before) + 2}
    verified = services.audit.verify(tenant, 0, 100)
    assert verified["chainValid"] is True

    # An action appending in its own transaction finds the place taken, and adopts both
    services.keys.create_key(admin, CreateKeyRequest(subjectId="second", scopes=["runs:read"]))

    entries = chained(services, tenant)
    assert [e["target"].get("runId") for e in entries[len(before) :]] == ["run-a", "run-b", None]
    assert entries[-1]["action"] == "key.created"
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True
    assert len(services.audit.entries_page(tenant, 50, None)["entries"]) == len(before) + 3


def test_the_appender_adopts_orphans_and_skips_its_own_draft_among_them(services, tenant) -> None:
    log = services.store.audit_log
    first = [(draft(tenant, "run-a"), "source-a"), (draft(tenant, "run-b"), "source-b")]
    orphaned(services, tenant, first)

    # The record of run-b comes again (its delivery stopped after the puts) with run-c's after it
    written = log.append_drafts(tenant, 0, [first[1], (draft(tenant, "run-c"), "source-c")], 0.0)

    entries = chained(services, tenant)
    assert [e["target"]["runId"] for e in entries] == ["run-a", "run-b", "run-c"]
    assert written is not None
    assert written.seq == 3
    assert len(stored(services, tenant)) == 3
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def test_a_record_whose_draft_is_an_orphan_only_moves_the_head(services, tenant) -> None:
    log = services.store.audit_log
    placed = [(draft(tenant, "run-a"), "source-a")]
    orphaned(services, tenant, placed)

    written = log.append_drafts(tenant, 0, placed, 0.0)

    assert written is not None
    assert written.seq == 1
    assert [e["target"]["runId"] for e in chained(services, tenant)] == ["run-a"]
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True
    # ... and once more: nothing left to do
    assert log.append_drafts(tenant, 0, placed, 0.0) is None
    assert len(stored(services, tenant)) == 1


def test_an_entry_beyond_the_head_that_does_not_chain_from_it_is_written_over(services, tenant, caplog) -> None:
    log = services.store.audit_log
    log.append_drafts(tenant, 0, [(draft(tenant, "run-a"), "source-a")], 0.0)
    # An entry at the next place whose prevHash is not the head's: no append wrote it
    forged = draft(tenant, "forged").entry(2, "0" * 64, 0)
    services.store.client.put_item(
        TableName=TABLE,
        Item={
            **{k: {"S": v} for k, v in {"pk": items.log_pk(tenant, 0), "sk": items.entry_sk(2)}.items()},
            "entry": {"S": rules.canonical(forged).decode()},
            "source": {"S": "source-forged"},
        },
    )
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True

    written = log.append_drafts(tenant, 0, [(draft(tenant, "run-b"), "source-b")], 0.0)

    assert written is not None
    assert written.seq == 2
    assert [e["target"]["runId"] for e in chained(services, tenant)] == ["run-a", "run-b"]
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True
    (line,) = [r for r in caplog.records if getattr(r, "caughtError", None) == "audit-stale-entry"]
    assert line.levelname == "ERROR"
    assert "did not chain from the head" in line.getMessage()
    assert "forged" in line.getMessage()


def marked_chain(services: Services, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain with one entry, its head marked (on the checkpoint sweep's list): the next append is plain writes, which
    move the head (as 0.8.0's appender, and any append that would leave 8 past it: a head that may lag stays behind
    them, docs/adr/0172, test_audit_lagging_head.py)."""
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", False)
    services.store.audit_log.append_drafts(tenant, 0, [(draft(tenant, "run-0"), "source-0")], 0.0)
    assert services.store.audit_log.head(tenant, 0).marked


def test_an_appender_that_stops_before_the_head_leaves_orphans_its_record_adopts_when_it_comes_again(
    services, tenant, monkeypatch
) -> None:
    marked_chain(services, tenant, monkeypatch)
    log = services.store.audit_log
    placed = [(draft(tenant, "run-a"), "source-a"), (draft(tenant, "run-b"), "source-b")]
    real_update = log.client.update_item

    def stopped(**params: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, "UpdateItem")

    monkeypatch.setattr(log.client, "update_item", stopped)
    with pytest.raises(ClientError):
        log.append_drafts(tenant, 0, placed, 0.0)

    # Both entries were put, past the head, which the chain's readers take for its own
    assert len(stored(services, tenant)) == 3
    assert log.head(tenant, 0).seq == 1
    assert [e["target"]["runId"] for e in services.audit.entries_page(tenant, 50, None)["entries"]] == ["run-b", "run-a", "run-0"]
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True

    monkeypatch.setattr(log.client, "update_item", real_update)
    written = log.append_drafts(tenant, 0, placed, 0.0)

    assert written is not None
    assert written.seq == 3
    assert [e["target"]["runId"] for e in chained(services, tenant)] == ["run-0", "run-a", "run-b"]
    assert len(stored(services, tenant)) == 3
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def raced_after_first_put(monkeypatch: pytest.MonkeyPatch, log: items.AuditLog, race: Callable[[], object]) -> None:
    """`race` runs right after the first entry `log` puts from now on (another appender's whole append, say)."""
    real_put = log.client.put_item
    puts: list[str] = []

    def put_then_race(**params: Any) -> Any:
        got = real_put(**params)
        puts.append(params["Item"]["sk"]["S"])
        if len(puts) == 1:
            race()
        return got

    monkeypatch.setattr(log.client, "put_item", put_then_race)


def test_two_plain_appenders_interleaved_on_one_chain_both_land_once_in_order(services, tenant, monkeypatch) -> None:
    marked_chain(services, tenant, monkeypatch)
    log = services.store.audit_log
    other = items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    mine = [(draft(tenant, "run-a"), "source-a"), (draft(tenant, "run-b"), "source-b")]
    theirs = [(draft(tenant, "run-c"), "source-c")]
    # The other appender runs whole between this one's first entry and its second: it adopts the first.
    raced_after_first_put(monkeypatch, log, lambda: other.append_drafts(tenant, 0, theirs, 0.0))
    log.append_drafts(tenant, 0, mine, 0.0)

    entries = chained(services, tenant)
    assert [e["target"]["runId"] for e in entries] == ["run-0", "run-a", "run-c", "run-b"]
    assert len(stored(services, tenant)) == 4
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True
