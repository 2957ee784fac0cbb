"""The audit chain appended from the stream (issue 31 item 3, docs/adr/0128): a decision carries its entry's draft on
its event batch (format 5), and the appender in dispatch chains a batch's drafts, each chain's in one conditional
write, an entry once however often its record comes."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.composition import Services
from interlude.domain import clock, formats
from interlude.domain.audit import AuditDraft
from interlude.domain.formats import AUDIT_DRAFT_ON_BATCH
from interlude.domain.models.requests import CreateKeyRequest, CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local import lambda_runtime
from interlude.rules import audit as rules
from interlude.store import audit as items
from interlude.store.facade import Store
from interlude.store.stream import record_run_id
from tests.integration.conftest import signed_in
from tests.support.moto_world import ENTRIES_TABLE, TABLE
from tests.support.stream import outbox_event, stream_records

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?"}}
KEY = rules.signing_key(b"a test seed, never a deployment's")


@pytest.fixture
def services(world) -> Any:
    return Services(Store(TABLE, ENTRIES_TABLE), audit_key=lambda: KEY)


def decided(services: Services, admin: Any, count: int = 1) -> list[str]:
    """`count` runs of one approval gate, each decided."""
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    runs = [services.lifecycle.create_run(admin, CreateRunRequest.model_validate({"workflowId": "wf"})).runId for _ in range(count)]
    for run_id in runs:
        services.decisions.resolve_interrupt(admin, run_id, "gate", {"action": "accept"})
    return runs


def records_of(run_ids: list[str]) -> list[dict[str, Any]]:
    """The stream records of these runs' items, as the mapping hands them over."""
    return [r for r in stream_records(TABLE) if record_run_id(r) in run_ids]


def dispatched(records: list[dict[str, Any]]) -> list[str]:
    """Hand the records to the real dispatch handler as one outbox batch; the message ids it failed."""
    answer = lambda_runtime.invoke("dispatch", outbox_event(records))
    return [failure["itemIdentifier"] for failure in answer["batchItemFailures"]]


def chain_items(tenant: str, chain: int) -> list[dict[str, Any]]:
    """The chain's entry items as stored, plain: up to its head, and the few a head that lags leaves past it (ADR 0172)."""
    log = items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    head = log.head(tenant, chain)
    got = log.client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :a)",
        ExpressionAttributeValues={":pk": {"S": items.log_pk(tenant, chain)}, ":a": {"S": items.ENTRY_SK_PREFIX}},
        ConsistentRead=True,
    )
    found = [{k: next(iter(v.values())) for k, v in item.items()} for item in got["Items"]]
    lag = rules.HEAD_LAG_ENTRIES - 1 if formats.AUDIT_HEAD_LAGS_WRITTEN else 0
    assert head.seq <= len(found) <= head.seq + lag, "an entry beyond what its chain's head may leave past it"
    return found


def decisions_of(tenant: str, run_id: str) -> list[dict[str, Any]]:
    chain = items.chain_of_member(run_id)
    entries = [json.loads(item["entry"]) for item in chain_items(tenant, chain)]
    return [e for e in entries if e["action"] == "interrupt.decided" and e["target"]["runId"] == run_id]


def test_a_decision_carries_its_draft_on_its_event_batch_and_is_chained_once_its_record_is_dispatched(
    services, tenant
) -> None:
    admin = signed_in(services)
    (run_id,) = decided(services, admin)
    records = records_of([run_id])
    # The decision's event batch carries the draft, in format 5, and its transaction wrote no entry
    (carrying,) = [r for r in records if items.DRAFT_ATTRIBUTE in r["dynamodb"]["NewImage"]]
    assert carrying["dynamodb"]["NewImage"]["v"] == {"N": str(AUDIT_DRAFT_ON_BATCH)}
    assert decisions_of(tenant, run_id) == []
    # ... which this release reads as any other event batch
    assert "interrupt.resolved" in [e["type"] for e in services.store.read_events(run_id)]

    assert dispatched(records) == []

    (entry,) = decisions_of(tenant, run_id)
    assert entry["actor"]["subjectId"] == "admin"
    assert entry["details"]["outcome"] == "completed"
    keys = carrying["dynamodb"]["Keys"]
    chain = items.chain_of_member(run_id)
    stored = [i for i in chain_items(tenant, chain) if json.loads(i["entry"]) == entry]
    assert stored[0]["source"] == items.draft_source(keys["pk"]["S"], keys["sk"]["S"])
    assert services.audit.verify(tenant, 0, 100, chain)["chainValid"] is True
    listed = services.audit.entries_page(tenant, 50, None)["entries"]
    assert entry in listed


def test_a_redelivered_record_appends_nothing_twice_even_after_the_chain_moved_on(
    services, tenant, clock_file, monkeypatch
) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)
    admin = signed_in(services)
    (run_id,) = decided(services, admin)
    records = records_of([run_id])
    assert dispatched(records) == []
    # Delivered again at once (the fast check cannot rule it out: the head moved since the decision) ...
    assert dispatched(records) == []
    # ... and again after other appends moved the chain on, well past the decision
    clock.advance(clock_file, 600)
    services.keys.create_key(admin, CreateKeyRequest(subjectId="later", scopes=["runs:read"]))
    assert dispatched(records) == []
    assert len(decisions_of(tenant, run_id)) == 1
    entries = [json.loads(i["entry"]) for i in chain_items(tenant, 0)]
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def writes_on_chains(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, str]]:
    """Every write to an audit chain from now on, by operation and the item it writes ("entry", "head")."""
    writes: Counter[tuple[str, str]] = Counter()
    original = BaseClient._make_api_call

    def kind(sk: str) -> str | None:
        return "entry" if sk.startswith(items.ENTRY_SK_PREFIX) else "head" if sk == items.HEAD_SK else None

    def counting(client: Any, operation: str, params: dict[str, Any]) -> Any:
        bodies = [next(iter(op.values())) for op in params["TransactItems"]] if operation == "TransactWriteItems" else [params]
        if operation in ("TransactWriteItems", "PutItem", "UpdateItem"):
            for body in bodies:
                written = kind((body.get("Item") or body.get("Key") or {}).get("sk", {}).get("S", ""))
                if written is not None:
                    writes[(operation, written)] += 1
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counting)
    return writes


@pytest.mark.parametrize("head_lags", [False, True], ids=["as 0.8.0 appends", "the head left behind (ADR 0172)"])
def test_a_batchs_drafts_are_chained_per_chain_with_a_put_per_entry_and_one_move_of_the_head(
    services, tenant, monkeypatch, head_lags
) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 2)
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", head_lags)
    admin = signed_in(services)
    # Both chains' heads made (and marked: on the checkpoint sweep's list) by a first batch
    first = decided(services, admin, 2)
    while {items.chain_of_member(r) for r in first} != {0, 1}:
        first += decided(services, admin)
    assert dispatched(records_of(first)) == []
    runs = decided(services, admin, 5)
    by_chain = Counter(items.chain_of_member(r) for r in runs)
    log = services.store.audit_log
    heads = log.heads(tenant)
    tails = log.tails(tenant, heads)
    past = {chain: tails[chain].seq - head.seq for chain, head in heads.items()}
    writes = writes_on_chains(monkeypatch)

    assert dispatched(records_of(runs)) == []

    # Each entry one PutItem (1 WRU), each chain's head one UpdateItem (1 WRU), no transaction (2 WRU an item); where
    # heads may lag, a marked chain's head, waiting for its checkpoint, stays behind its new entries unless 8 would then
    # lie past it (the first batch may have left some there already: its chains' second and later decisions)
    moved = [c for c in by_chain if not head_lags or past[c] + by_chain[c] >= rules.HEAD_LAG_ENTRIES]
    moves = {("UpdateItem", "head"): len(moved)} if moved else {}
    assert writes == {("PutItem", "entry"): len(runs), **moves}
    for run_id in runs:
        assert len(decisions_of(tenant, run_id)) == 1
    for chain in by_chain:
        assert services.audit.verify(tenant, 0, 100, chain)["chainValid"] is True


def test_a_chain_whose_append_fails_fails_its_records_alone_and_they_land_once_when_they_come_again(
    services, tenant, monkeypatch
) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 2)
    admin = signed_in(services)
    runs = decided(services, admin, 6)
    while {items.chain_of_member(r) for r in runs} != {0, 1}:  # run ids are random: both chains, for sure
        runs += decided(services, admin)
    chains = {0, 1}
    records = records_of(runs)
    real_append = items.AuditLog.append_drafts
    appended: list[int] = []

    def second_chain_fails(log: items.AuditLog, tenant: str, chain: int, placed: Any, now: float) -> Any:
        appended.append(chain)
        if len(appended) == 2:  # between two chains of a batch
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "injected"}}, "TransactWriteItems")
        return real_append(log, tenant, chain, placed, now)

    monkeypatch.setattr(items.AuditLog, "append_drafts", second_chain_fails)
    failed = dispatched(records)

    # The failed chain's decisions' records alone failed (the records of their runs after them would be held back)
    failed_chain = appended[1]
    carrying = {r["dynamodb"]["SequenceNumber"] for r in records if items.DRAFT_ATTRIBUTE in r["dynamodb"]["NewImage"]}
    expected = {
        r["dynamodb"]["SequenceNumber"]
        for r in records
        if r["dynamodb"]["SequenceNumber"] in carrying and items.chain_of_member(record_run_id(r)) == failed_chain
    }
    assert expected
    assert set(failed) == expected
    for run_id in runs:
        assert len(decisions_of(tenant, run_id)) == (0 if items.chain_of_member(run_id) == failed_chain else 1)

    monkeypatch.setattr(items.AuditLog, "append_drafts", real_append)
    assert dispatched(records) == []
    for run_id in runs:
        assert len(decisions_of(tenant, run_id)) == 1
    for chain in chains:
        assert services.audit.verify(tenant, 0, 100, chain)["chainValid"] is True


def draft(tenant: str, run_id: str, at: str) -> AuditDraft:
    return AuditDraft(tenant, "interrupt.decided", {"subjectId": "someone"}, {"runId": run_id}, at, {})


def test_two_appenders_on_one_chain_both_land_in_order(services, tenant, monkeypatch) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)
    at = clock.iso(clock.now())
    first = [(draft(tenant, "run-a", at), "source-a"), (draft(tenant, "run-b", at), "source-b")]
    second = [(draft(tenant, "run-c", at), "source-c"), (draft(tenant, "run-a", at), "source-a")]
    log = services.store.audit_log
    other = items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    real_head = items.AuditLog.head
    reads: list[int] = []

    def head_then_race(log_: items.AuditLog, tenant: str, chain: int) -> rules.Head:
        head = real_head(log_, tenant, chain)
        reads.append(chain)
        if len(reads) == 1:
            # The other appender writes between this one's read and its transaction.
            other.append_drafts(tenant, chain, first, 0.0)
        return head

    monkeypatch.setattr(items.AuditLog, "head", head_then_race)
    written = log.append_drafts(tenant, 0, second, 0.0)

    entries = [json.loads(i["entry"]) for i in chain_items(tenant, 0)]
    # Both landed, the second after the first, and the draft both carried (a record in two batches) once
    assert [e["target"]["runId"] for e in entries] == ["run-a", "run-b", "run-c"]
    assert written is not None
    assert written.seq == 3
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def entries_read(log: items.AuditLog) -> list[int]:
    """The entries each Query of `log`'s chains returns from now on, a count per page."""
    pages: list[int] = []

    def after(model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name == "Query":
            pages.append(len(parsed.get("Items") or []))

    log.client.meta.events.register("after-call.dynamodb", after)
    return pages


def test_in_a_backlog_an_appender_reads_back_only_what_it_does_not_know_and_still_skips_a_record_delivered_again(
    services, tenant, monkeypatch
) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)
    # Heads that move at each append (as 0.8.0's appender moves them): what an append reads back below its head. Where a
    # head lags, an append reads the run past it as well, one Query (test_audit_lagging_head.py, docs/adr/0172)
    monkeypatch.setattr(formats, "AUDIT_HEAD_LAGS_WRITTEN", False)
    # Decisions taken ten minutes ago, reaching the appenders one batch each: every append's check goes back to then
    at = clock.iso(clock.now() - timedelta(seconds=600))
    backlog = [(draft(tenant, f"run-{i}", at), f"source-{i}") for i in range(6)]
    log, other = services.store.audit_log, items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    for one in backlog[:3]:
        log.append_drafts(tenant, 0, [one], 0.0)
    other.append_drafts(tenant, 0, [backlog[3]], 0.0)
    pages = entries_read(log)

    # run-1's record delivered again, and run-3's (appended by the other appender) with run-4's: neither twice
    assert log.append_drafts(tenant, 0, [backlog[1]], 0.0) is None
    log.append_drafts(tenant, 0, [backlog[3], backlog[4]], 0.0)
    log.append_drafts(tenant, 0, [backlog[5]], 0.0)

    # The first check read the entry the other appender put; none read an entry again
    assert sum(pages) == 1
    entries = [json.loads(i["entry"]) for i in chain_items(tenant, 0)]
    assert [e["target"]["runId"] for e in entries] == [f"run-{i}" for i in range(6)]
    assert services.audit.verify(tenant, 0, 100)["chainValid"] is True


def test_an_appender_does_not_take_a_chain_begun_again_for_the_one_it_knew(services, tenant, monkeypatch) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)
    at = clock.iso(clock.now())
    log, other = services.store.audit_log, items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    log.append_drafts(tenant, 0, [(draft(tenant, "run-a", at), "source-a")], 0.0)
    # The tenant's items removed (its deletion) and its chain begun again by another appender, past where it was
    for item in chain_items(tenant, 0):
        log.client.delete_item(TableName=TABLE, Key={"pk": {"S": item["pk"]}, "sk": {"S": item["sk"]}})
    log.client.delete_item(TableName=TABLE, Key={"pk": {"S": items.head_pk(tenant, 0)}, "sk": {"S": items.HEAD_SK}})
    other.append_drafts(tenant, 0, [(draft(tenant, "run-x", at), "source-x"), (draft(tenant, "run-y", at), "source-y")], 0.0)

    # The draft the first appender knew in the old chain is not in this one: appended
    written = log.append_drafts(tenant, 0, [(draft(tenant, "run-a", at), "source-a")], 0.0)

    assert written is not None
    assert [json.loads(i["entry"])["target"]["runId"] for i in chain_items(tenant, 0)] == ["run-x", "run-y", "run-a"]


def test_a_record_delivered_again_older_than_every_entry_its_appender_knows_is_found_below_them(
    services, tenant, monkeypatch
) -> None:
    monkeypatch.setattr(wiring, "AUDIT_CHAINS", 1)
    now = clock.now()
    earlier = (draft(tenant, "run-a", clock.iso(now - timedelta(seconds=600))), "source-a")
    log, other = services.store.audit_log, items.AuditLog(TABLE, Store(TABLE, ENTRIES_TABLE).client)
    other.append_drafts(tenant, 0, [earlier], 0.0)
    # An action a minute on: the chain's head moved before it, so this appender reads nothing back, and knows only its own
    log.append_drafts(tenant, 0, [(draft(tenant, "run-b", clock.iso(now + timedelta(seconds=60))), "source-b")], 0.0)

    # run-a's record comes again to this appender
    assert log.append_drafts(tenant, 0, [earlier], 0.0) is None

    assert [json.loads(i["entry"])["target"]["runId"] for i in chain_items(tenant, 0)] == ["run-a", "run-b"]
