"""A `kind=approval` inbox page reads the caller's own families, not `KIND#approval` (docs/adr/0160): every approval
the caller may decide is listed under their subject, groups and roles or ANY, so the page finds approvals that have no
KIND entry (none since 0.5.0), and walks, short page after short page, past newer gates of other
kinds on ANY. Real moto table of its own; gates seeded as tests/support/inbox_seed.py writes them."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.api.inbox import inbox_query
from interlude.store import attributes as a
from interlude.store.provisioning import entries_table_beside
from interlude.store.sharded import family_pks
from tests.integration.conftest import signed_in
from tests.support.inbox_seed import gate_template, seed_like, table_of_its_own

TABLE = "interlude-inbox-kinds"
APPROVALS = 3  # seeded, besides the fixture's own run
OTHERS = 40  # gates of another kind, open to anyone, raised after the seeded approvals
LIMIT = 2


@pytest.fixture(scope="module")
def world():
    with table_of_its_own(TABLE) as (services, client):
        state, gate = gate_template(services, signed_in(services, "admin"), "narrow", "narrow")
        seed_like(services.store, (state, gate), 0, APPROVALS, prefix="narrow")
        asked = gate.model_copy(update={"kind": "clarification", "payload": {**gate.payload, "kind": "clarification"}})
        seed_like(services.store, (state, asked), 100, 100 + OTHERS, prefix="asked")
        yield services, client, signed_in(services, "nina", groups=["narrow"])


def walk(services, principal, query: dict[str, str]) -> list[list[dict]]:
    """Every page of `query`, cursor after cursor."""
    pages: list[list[dict]] = []
    cursor = None
    while True:
        got = services.inbox.inbox(principal, *inbox_query({**query, **({"cursor": cursor} if cursor else {})}))
        pages.append(got["interrupts"])
        cursor = got["nextCursor"]
        if cursor is None:
            return pages


def kind_entries(client, tenant: str, kind: str) -> list[dict]:
    """The tenant's entries in `kind`'s family (a Query of each of its partitions, in both tables: docs/adr/0161)."""
    return [
        item
        for table in (TABLE, entries_table_beside(TABLE))
        for pk in family_pks(tenant, wiring.INBOX, f"KIND#{kind}")
        for item in client.query(
            TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": a.s(pk)}
        )["Items"]
    ]


def test_a_kind_page_of_approvals_lists_them_without_a_kind_entry_walking_short_pages_past_other_kinds(world):
    services, client, nina = world
    # No approval has an entry in KIND#approval; the other kind keeps its own.
    assert kind_entries(client, nina.tenant, "approval") == []
    assert len(kind_entries(client, nina.tenant, "clarification")) == OTHERS

    everything = [i for page in walk(services, nina, {"limit": "100"}) for i in page]
    approvals = [i["interruptId"] for i in everything if i["kind"] == "approval"]
    assert len(approvals) == 1 + APPROVALS
    assert len(everything) == 1 + APPROVALS + OTHERS

    pages = walk(services, nina, {"limit": str(LIMIT), "kind": "approval"})
    listed = [i for page in pages for i in page]
    # Every approval once, newest first across the pages, none of the other kind.
    assert [i["interruptId"] for i in listed] == approvals
    assert {i["kind"] for i in listed} == {"approval"}
    # The newer gates of the other kind were read and skipped: pages came back short, each with a cursor.
    assert any(len(page) < LIMIT for page in pages[:-1])
    assert len(pages) > (1 + APPROVALS) / LIMIT + 1


def test_a_kind_page_of_another_kind_reads_its_kind_family(world):
    services, _client, nina = world
    pages = walk(services, nina, {"limit": "25", "kind": "clarification"})
    assert [len(page) for page in pages] == [25, OTHERS - 25]
    assert {i["kind"] for page in pages for i in page} == {"clarification"}
