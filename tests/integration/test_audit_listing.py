"""The audit listing's reads follow the page (docs/adr/0173): a marked chain's page and the run past its head in one
Query from the top of its key range, each chain first read in a small page and read again only when the merge takes
that page to its end, a settled chain read only once the merge reaches the moment its head last moved. And what it
keeps of ADRs 0135 and 0172: entries newest first, each reached once by the cursor while appends land between pages,
an entry past the head shown only in the run that chains from the head."""

from __future__ import annotations

import base64
import importlib.util
import json
import random
import sys
import tarfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any

import pytest

from interlude.app import audit
from interlude.composition import Services
from interlude.domain import clock
from interlude.domain.audit import AuditDraft
from interlude.domain.errors import Invalid
from interlude.rules import audit as rules
from interlude.store import attributes as a
from interlude.store import audit as items
from interlude.store.facade import Store
from tests.integration.test_upgrade import ARCHIVE
from tests.support.moto_world import ENTRIES_TABLE, TABLE

KEY = rules.signing_key(b"a test seed, never a deployment's")


@pytest.fixture
def services(world) -> Any:
    return Services(Store(TABLE, ENTRIES_TABLE), audit_key=lambda: KEY)


class Appended:
    """Entries appended through the stream's appender (`AuditLog.append_drafts`), one draft a batch, each `at` a
    second after the one before: a chain's entries and all chains' alike are in the order of their `at`."""

    def __init__(self, services: Services, tenant: str, start: datetime) -> None:
        self.log, self.tenant, self.moment = services.store.audit_log, tenant, start

    def draft(self) -> AuditDraft:
        self.moment += timedelta(seconds=1)
        runs = f"run-{self.moment.timestamp():.0f}"
        return AuditDraft(
            self.tenant, "interrupt.decided", {"subjectId": "someone"}, {"runId": runs}, clock.iso(self.moment), {}
        )

    def one_by_one(self, chain: int, count: int) -> None:
        """`count` appends: the first on an unmarked head moves it with its marker, the next ones leave it behind."""
        for _ in range(count):
            made = self.draft()
            self.log.append_drafts(self.tenant, chain, [(made, f"source/{made.at}")], clock.now().timestamp())

    def at_once(self, chain: int, count: int, monkeypatch: pytest.MonkeyPatch) -> None:
        """`count` entries in one append that moves the head over them, its appendedAt a second after the last."""
        placed = [(made, f"source/{made.at}") for made in (self.draft() for _ in range(count))]
        moved = self.moment + timedelta(seconds=1)
        with monkeypatch.context() as moment:
            moment.setattr(clock, "now", lambda: moved)
            self.log.append_drafts(self.tenant, chain, placed, moved.timestamp())


def settled(services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every chain checkpointed and taken off the pending index: its head unmarked (rules/audit.settle_due)."""
    with monkeypatch.context() as now:
        now.setattr(rules, "MARKER_KEEP_SECONDS", 0)
        now.setattr(rules, "CHECKPOINT_INTERVAL_SECONDS", 0)
        for _ in range(3):
            services.audit.checkpoint_pending()


def stored(services: Services, tenant: str, chain: int) -> list[dict[str, Any]]:
    """Every entry item of the chain, past its head too, in order."""
    got = services.store.client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :a)",
        ExpressionAttributeValues={":pk": {"S": items.log_pk(tenant, chain)}, ":a": {"S": items.ENTRY_SK_PREFIX}},
        ConsistentRead=True,
    )
    return got["Items"]


def entries(services: Services, tenant: str, chains: range) -> set[tuple[int, int]]:
    return {
        (chain, int(item["sk"]["S"].removeprefix(items.ENTRY_SK_PREFIX)))
        for chain in chains
        for item in stored(services, tenant, chain)
    }


@contextmanager
def queries(services: Services, tenant: str) -> Iterator[Counter[int]]:
    """The Queries made of each of the tenant's chains meanwhile, by chain."""
    made: Counter[int] = Counter()
    prefix = items.log_pk(tenant, 0)[: -len("000")]

    def note(params: dict[str, Any], **_: Any) -> None:
        pk = (params.get("ExpressionAttributeValues") or {}).get(":pk", {}).get("S", "")
        if pk.startswith(prefix):
            made[int(pk.removeprefix(prefix))] += 1

    events = services.store.audit_log.client.meta.events
    events.register("provide-client-params.dynamodb.Query", note)
    try:
        yield made
    finally:
        events.unregister("provide-client-params.dynamodb.Query", note)


def test_pages_list_the_chains_newest_first_and_reach_each_entry_once_while_appends_land_between_them(
    services, tenant, monkeypatch
) -> None:
    appended = Appended(services, tenant, clock.now() - timedelta(hours=2))
    rng = random.Random(173)
    # Six chains settled, their entries older; then six marked, their heads behind their newest entries; drafts of
    # the twelve interleaved in time
    for _ in range(4):
        for chain in range(6):
            appended.at_once(chain, rng.randint(1, 4), monkeypatch)
    settled(services, monkeypatch)
    assert not any(head.marked for head in services.store.audit_log.heads(tenant).values())
    for _ in range(30):
        appended.one_by_one(rng.randrange(6, 12), 1)
        if rng.random() < 0.3:
            appended.at_once(rng.randrange(6), 1, monkeypatch)
    heads = services.store.audit_log.heads(tenant)
    assert any(head.marked for head in heads.values())
    assert not all(head.marked for head in heads.values())
    present = entries(services, tenant, range(12))
    assert len(present) > max(head.seq for head in heads.values())  # some lie past their heads

    seen: list[dict[str, Any]] = []
    cursor = None
    late = Appended(services, tenant, clock.now())
    while True:
        page = services.audit.entries_page(tenant, 7, cursor)
        assert len(page["entries"]) <= 7
        seen += page["entries"]
        cursor = page.get("cursor")
        if cursor is None:
            break
        # An append lands between pages, on a chain listed, one being listed, one not reached yet, and a new one
        late.one_by_one(rng.choice([0, 6, 11, 12]), 1)

    listed = [(e["chain"], e["seq"]) for e in seen]
    assert len(listed) == len(set(listed))
    assert set(listed) == present
    assert [e["at"] for e in seen] == sorted((e["at"] for e in seen), reverse=True)


def test_a_marked_chains_run_past_its_head_is_listed_from_one_query(services, tenant) -> None:
    appended = Appended(services, tenant, clock.now() - timedelta(hours=1))
    appended.one_by_one(3, 6)
    head = services.store.audit_log.head(tenant, 3)
    assert head.marked
    assert head.seq == 1  # five entries past it

    with queries(services, tenant) as made:
        page = services.audit.entries_page(tenant, 50, None)

    assert made == {3: 1}
    assert [(e["chain"], e["seq"]) for e in page["entries"]] == [(3, seq) for seq in range(6, 0, -1)]
    assert page["chains"] == {"3": 6}
    assert "cursor" not in page


def test_an_entry_past_the_head_that_does_not_chain_is_never_listed_not_even_below_a_cursor_past_it(
    services, tenant, monkeypatch
) -> None:
    appended = Appended(services, tenant, clock.now() - timedelta(hours=1))
    log = services.store.audit_log
    # Chain 2 settled, and past its head an entry that chains from it (an append that stopped before moving the head:
    # unlisted until adopted, docs/adr/0172)
    appended.at_once(2, 2, monkeypatch)
    settled(services, monkeypatch)
    # Chain 1 marked: its head, two entries past it that chain from it, then one that does not
    appended.one_by_one(1, 3)
    marked, quiet = log.head(tenant, 1), log.head(tenant, 2)
    assert marked.marked
    assert marked.seq == 1
    assert not quiet.marked
    stray = appended.draft()
    for chain, seq, prev in ((1, 4, "0" * 64), (2, quiet.seq + 1, quiet.hash)):
        text = rules.canonical(stray.entry(seq, prev, chain)).decode()
        log.client.put_item(
            TableName=TABLE, Item={**a.key(items.log_pk(tenant, chain), items.entry_sk(seq)), "entry": a.s(text)}
        )
    assert {(1, 4), (2, 3)} <= entries(services, tenant, range(1, 3))

    first = services.audit.entries_page(tenant, 50, None)
    # A cursor past what lies there: none issued reaches beyond a tail, but one may be made
    forged = items.encode_before({1: 9, 2: 9}, tenant)
    later = services.audit.entries_page(tenant, 50, forged)

    for page in (first, later):
        assert sorted((e["chain"], e["seq"]) for e in page["entries"]) == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)]
    assert first["chains"] == {"1": 3, "2": 2}


def test_a_page_reads_each_marked_chain_once_and_a_settled_one_only_when_the_merge_reaches_it(
    services, tenant, monkeypatch
) -> None:
    appended = Appended(services, tenant, clock.now() - timedelta(hours=3))
    # Eight settled chains whose entries are all older than any of the eight marked chains'
    for chain in range(8):
        appended.at_once(chain, 3, monkeypatch)
    settled(services, monkeypatch)
    for _ in range(6):
        for chain in range(8, 16):
            appended.one_by_one(chain, 1)
    limit = 10

    with queries(services, tenant) as first_reads:
        first = services.audit.entries_page(tenant, limit, None)
    with queries(services, tenant) as later_reads:
        later = services.audit.entries_page(tenant, limit, first["cursor"])

    # Each marked chain read once (its page, and its tail in the same Query), and again at most where the merge took
    # a whole page of it: at most (limit - 1) // size chains a page; no settled chain, none of its entries listed yet
    for reads, page in ((first_reads, first), (later_reads, later)):
        assert set(reads) == set(range(8, 16))
        assert sum(reads.values()) <= 8 + (limit - 1) // audit.chain_page(limit, 16)
        assert {e["chain"] for e in page["entries"]} <= set(range(8, 16))
    # and the rest, the settled chains' once the merge reaches them
    cursor, pages = later["cursor"], []
    while cursor is not None:
        pages.append(services.audit.entries_page(tenant, limit, cursor))
        cursor = pages[-1].get("cursor")
    assert sum(len(page["entries"]) for page in (first, later, *pages)) == 8 * 3 + 8 * 6


def test_this_releases_cursor_is_one_the_previous_release_reads_and_the_previous_releases_is_read_here(
    services, tenant, tmp_path, monkeypatch
) -> None:
    previous = previous_store_audit(tmp_path, monkeypatch)
    appended = Appended(services, tenant, clock.now() - timedelta(hours=1))
    for chain in range(3):
        appended.at_once(chain, 4, monkeypatch)
    settled(services, monkeypatch)
    appended.one_by_one(3, 4)

    first = services.audit.entries_page(tenant, 5, None)
    # The previous release continues below each chain's sequence, as this release does
    assert previous.decode_before(first["cursor"], tenant) == items.decode_before(first["cursor"], tenant)
    # and a cursor it issued (the sequence to continue below, for each chain with entries left, and its tenant since
    # 0.11.0) lists the rest
    issued = previous.encode_before(items.decode_before(first["cursor"], tenant) or {}, tenant)
    rest = services.audit.entries_page(tenant, 50, issued)
    listed = [(e["chain"], e["seq"]) for e in first["entries"] + rest["entries"]]
    assert sorted(listed) == sorted(entries(services, tenant, range(4)))
    assert len(listed) == len(set(listed))


def test_a_cursor_is_read_by_the_listing_of_the_tenant_it_was_issued_to_alone(services, tenant, monkeypatch) -> None:
    """A cursor names the tenant whose listing issued it: another tenant's listing refuses it, as every listing refuses
    one naming no tenant (0.10.0's, two releases back) or with a field the listing does not know."""
    appended = Appended(services, tenant, clock.now() - timedelta(hours=1))
    for chain in range(3):
        appended.at_once(chain, 4, monkeypatch)
    first = services.audit.entries_page(tenant, 5, None)
    before = items.decode_before(first["cursor"], tenant)
    assert before

    with pytest.raises(Invalid) as refused:
        services.audit.entries_page("other", 50, first["cursor"])
    assert refused.value.details == {"field": "cursor"}
    positions = {str(chain): seq for chain, seq in before.items()}
    for plain in ({"before": positions}, {"before": positions, "t": tenant, "x": 1}):
        cursor = base64.urlsafe_b64encode(json.dumps(plain).encode()).decode().rstrip("=")
        with pytest.raises(Invalid) as refused:
            services.audit.entries_page(tenant, 50, cursor)
        assert refused.value.details == {"field": "cursor"}


def previous_store_audit(work: Any, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The previous release's store/audit.py (its listing's cursor), from its package, over this release's modules."""
    with tarfile.open(ARCHIVE) as archive:
        archive.extract("layers/core/python/interlude/store/audit.py", work, filter="data")
    spec = importlib.util.spec_from_file_location(
        "previous_store_audit", work / "layers/core/python/interlude/store/audit.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
