"""An inbox page reads the same whatever the tenant's pending count (issue 13, item 1; docs/scale.md).

Real moto table; the pending interrupts are seeded in bulk through the store's own open-interrupt write path
(tests/support/inbox_seed.py: the interrupt item and its run head as a transition writes them, and its index entries). DynamoDB calls
and the items they return are counted with botocore's event hooks around each page.
"""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.api.inbox import inbox_query
from interlude.domain.errors import DomainError
from interlude.domain.models.principals import PrincipalEntry
from interlude.domain.models.tenants import TenantSettings
from tests.integration.conftest import signed_in
from tests.support.inbox_seed import gate_template, seed_like, table_of_its_own

TABLE = "interlude-inbox-scale"
SIZES = (10, 5_000, 20_000)
LIMIT = 10
NARROW = 3  # interrupts the narrow approver's group may decide, at every size


class CallCounter:
    """DynamoDB calls made and items they returned (Query Items, BatchGetItem Responses)."""

    def __init__(self, client) -> None:
        self.calls: list[str] = []
        self.items = 0
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, model, parsed, **_) -> None:
        self.calls.append(model.name)
        if model.name == "Query":
            self.items += len(parsed.get("Items") or [])
        elif model.name == "BatchGetItem":
            self.items += sum(len(v) for v in (parsed.get("Responses") or {}).values())

    def reset(self) -> None:
        self.calls, self.items = [], 0


# A world of its own: thousands of seeded interrupts would grow the shared table for every later test.
@pytest.fixture(scope="module")
def world():
    with table_of_its_own(TABLE) as (services, client):
        admin = signed_in(services, "admin")
        templates = {wid: gate_template(services, admin, wid, group) for wid, group in (("bulk", "others"), ("narrow", "narrow"))}
        broad = signed_in(services, "broad", groups=["others"])
        narrow = signed_in(services, "nina", groups=["narrow"])
        # olga (directory: group `narrow`) is out of office with dele as her delegate (issue 14 item 4)
        services.tenants.put_settings("t1", TenantSettings(allowDelegation=True), "admin")
        olga = {"groups": ["narrow"], "outOfOffice": {"delegate": "dele"}}
        services.directory.put_principal("t1", "olga", PrincipalEntry.model_validate(olga), "admin")
        yield services, client, templates, broad, narrow


def page(services, principal, query):
    return services.inbox.inbox(principal, *inbox_query(query))


def test_calls_and_items_read_per_page_do_not_grow_with_the_pending_count(world):
    services, client, templates, broad, narrow = world
    counter = CallCounter(client)
    # The narrow approver's few interrupts, raised long ago (the bulk ones are all newer); the fixture made one.
    seed_like(services.store, templates["narrow"], 0, NARROW - 1, prefix="narrow")
    pages = {
        "unfiltered": (broad, {"limit": str(LIMIT)}),
        "workflowId": (broad, {"limit": str(LIMIT), "workflowId": "bulk"}),
        "kind": (broad, {"limit": str(LIMIT), "kind": "approval"}),
        "narrow approver": (narrow, {"limit": str(LIMIT)}),
        "narrow approver by kind": (narrow, {"limit": str(LIMIT), "kind": "approval"}),
        "delegate of a narrow approver": (signed_in(services, "dele"), {"limit": str(LIMIT)}),
        # Issue 29 item 3: orders and claim filters of the whole inbox, each a bounded page too.
        "oldest first": (broad, {"limit": str(LIMIT), "sort": "oldest"}),
        "due first": (broad, {"limit": str(LIMIT), "sort": "due"}),
        "unclaimed": (broad, {"limit": str(LIMIT), "claim": "unclaimed"}),
        "mine": (broad, {"limit": str(LIMIT), "claim": "mine"}),
    }
    # The one read of migration 0011's checkpoint (where the entries are: docs/adr/0170) a process makes, not a page's
    services.inbox_index.read_tables()
    measured: dict[int, dict[str, tuple[list[str], int, int]]] = {}
    seeded = 0
    for size in SIZES:
        seed_like(services.store, templates["bulk"], seeded, size - 1)  # the fixture's real bulk run is one of them
        seeded = size - 1
        measured[size] = {}
        for name, (principal, query) in pages.items():
            counter.reset()
            listed = page(services, principal, query)["interrupts"]
            measured[size][name] = (sorted(counter.calls), counter.items, len(listed))
            if name.startswith("delegate"):
                assert {tuple(i.get("onBehalfOf") or ()) for i in listed} == {("olga",)}
    for name in pages:
        calls = {size: measured[size][name][0] for size in SIZES}
        assert calls[10] == calls[5_000] == calls[20_000], (name, calls)
        items = {size: measured[size][name][1] for size in SIZES}
        assert items[5_000] == items[20_000], (name, items)
        assert items[10] <= items[5_000], (name, items)
    # A page is full when the key answers the question, and a narrow approver reads only their own few.
    shards = wiring.INBOX.shards
    # Each partition is read in every table an entry may be in (store/layout.py: both, until migration 0011 is done).
    tables = len(services.inbox_index.read_tables())
    for name in ("unfiltered", "workflowId", "oldest first", "due first", "unclaimed"):
        assert measured[20_000][name][2] == LIMIT, (name, measured)
    assert measured[20_000]["mine"][2] == 0  # nobody claimed any: read as far as one round goes, and short
    # Due first reads the DUE family (no seeded gate has a deadline: one empty round), then the caller's own.
    assert measured[20_000]["due first"][0].count("Query") == measured[20_000]["unfiltered"][0].count("Query") + shards * tables
    # By kind (approval), the caller's own families, as unfiltered (docs/adr/0160): the newest approval, the narrow
    # group's, is not read, and the page is full.
    assert measured[20_000]["kind"][2] == LIMIT
    assert measured[20_000]["kind"][0] == measured[20_000]["unfiltered"][0]
    # Each gate read is its entry, its interrupt item and its run's head (a format-3 gate is open while its head holds
    # it); by kind, the same few gates.
    for name in ("narrow approver", "narrow approver by kind"):
        assert [measured[size][name][1:] for size in SIZES] == [(NARROW * 3, NARROW)] * 3, name
    # A delegate reads the absent approver's families too (here `narrow`, olga's two subject spellings, and the
    # delegation item itself), and lists her gates, at every size.
    assert [measured[size]["delegate of a narrow approver"][1:] for size in SIZES] == [(1 + NARROW * 3, NARROW)] * 3
    # The bound itself: the caller's directory entry (its gates name groups), the Query of the out-of-office
    # delegations naming the caller (issue 14 item 4: none here), one Query per stream and one BatchGetItem, whatever
    # the count.
    assert measured[20_000]["workflowId"][0] == sorted(["GetItem"] + ["Query"] * (shards * tables + 1) + ["BatchGetItem"])
    # ANY, two subject spellings, `others`, and the caller's delegations
    assert measured[20_000]["unfiltered"][0].count("Query") == (shards + 3) * tables + 1


def test_walking_a_filtered_inbox_lists_every_pending_interrupt_once_newest_first(world):
    services, _client, templates, _broad, narrow = world
    # The narrow approver's interrupts as the first test seeds them (the same items again), whichever test ran first.
    seed_like(services.store, templates["narrow"], 0, NARROW - 1, prefix="narrow")
    seen: list[str] = []
    raised: list[str] = []
    query = {"limit": "100", "workflowId": "narrow"}
    pages = 0
    while True:
        got = page(services, narrow, query)
        pages += 1
        seen += [i["interruptId"] for i in got["interrupts"]]
        raised += [i["raisedAt"] for i in got["interrupts"]]
        if got["nextCursor"] is None:
            break
        query = {**query, "cursor": got["nextCursor"]}
    assert len(seen) == len(set(seen)) == NARROW
    assert raised == sorted(raised, reverse=True)
    assert pages == 1


def test_a_cursor_is_bound_to_its_tenant_and_its_query(world):
    services, _client, templates, broad, _narrow = world
    # Bulk interrupts enough for a page of two to have a next one, whichever test ran first (the first three the first
    # test seeds: the same items again).
    seed_like(services.store, templates["bulk"], 0, 3)
    cursor = page(services, broad, {"limit": "2", "workflowId": "bulk"})["nextCursor"]
    assert cursor is not None
    page(services, broad, {"limit": "2", "workflowId": "bulk", "cursor": cursor})
    for principal, query in [
        (broad, {"limit": "2", "kind": "approval", "cursor": cursor}),  # another query's cursor
        (signed_in(services, "eve", tenant="t2"), {"limit": "2", "workflowId": "bulk", "cursor": cursor}),
        (broad, {"limit": "2", "workflowId": "bulk", "cursor": cursor[:-4]}),
    ]:
        with pytest.raises(DomainError) as refused:
            page(services, principal, query)
        assert (refused.value.code, refused.value.details["field"]) == ("validation_error", "cursor")
