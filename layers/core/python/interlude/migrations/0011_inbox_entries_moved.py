"""Gates opened before 0.6.0 have their inbox entries in the first table, so every inbox page sends each partition's
Query to both tables (docs/adr/0161). Each open gate's entries still there are moved to the second: put there, as they
are (assignee, due, expiry), with the gate's marks (its run head's open interrupt and its item: `entriesTable`), in one
transaction over both tables on condition that the run has not moved since its head was read; then deleted from the
first. A claim, a close or a vote meanwhile makes the transaction fail: the head is read again and the gate moved from
what it holds then (or, closed, its entries only deleted). A closed gate's, a gone run's and a moved gate's leftovers are
deleted. Once this is done, a page reads the second table alone (store/layout.py INBOX_ENTRIES, docs/adr/0170)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from interlude import wiring
from interlude.domain.models.run import OpenInterrupt
from interlude.store import attributes as a
from interlude.store.inbox import Entry, InboxIndex
from interlude.store.layout import SECOND, mark_of, run_pk, where_of
from interlude.store.migrations import MigrationStore, Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "moves each open gate's inbox entries from the first table to the second, so that a page reads the second alone"
SCAN = Scan("contains(pk, :inbox)", {":inbox": f"#{wiring.INBOX.prefix}#"})
# Reads of a gate's head and moves tried before the page is left to be tried again (a run moved between each read and
# its move every time).
MOVE_ATTEMPTS = 5


class StillMoving(Exception):
    """A gate's run moved between every read of its head and the move: the page is done again by the next turn."""


def apply(store: Store, items: list[a.Item]) -> int:
    migrating = MigrationStore(store.table, store.client, store.entries_table)
    gates: dict[tuple[str, str], list[a.Item]] = {}
    for item in items:
        if _is_entry(item):
            gates.setdefault((item["runId"]["S"], item[wiring.SORT_KEY]["S"].rsplit("#", 1)[1]), []).append(item)
    heads = migrating.heads([run_pk(run_id) for run_id, _ in gates]) if gates else {}
    return sum(_moved(migrating, heads.get(run_pk(run_id)), run_id, gate, found) for (run_id, gate), found in gates.items())


def _is_entry(item: a.Item) -> bool:
    """An inbox entry (`T#{tenant}#INBOX#…`), not an item whose tenant or family only names the index."""
    parts = item[wiring.PARTITION_KEY]["S"].split("#")
    return len(parts) > 3 and parts[0] == "T" and parts[2] == wiring.INBOX.prefix and "runId" in item


def _moved(migrating: MigrationStore, head: a.Item | None, run_id: str, gate: str, found: list[a.Item]) -> int:
    """Gate `gate`'s entries moved to the second table (`found`: those of them the page read); how many were put."""
    inbox = InboxIndex(migrating.table, migrating.client, migrating.entries_table)
    for _ in range(MOVE_ATTEMPTS):
        state = json.loads(a.unpacked_json(head["state"])) if head else None
        opened = [doc for doc in (state or {}).get("interrupts", {}).values() if doc.get("interruptId") == gate]
        if state is None or not opened or where_of(opened[0].get("entriesTable")) == SECOND:
            # A gone run's, a closed gate's (pages skip and sweep those), or a moved gate's left behind by a move
            # stopped before its delete.
            inbox.delete_keys(_keys(found))
            return 0
        assert head is not None
        entry = Entry.of(state["tenant"], run_id, state["workflowId"], OpenInterrupt.model_validate(opened[0]))
        stored = {_pair(i): i for i in migrating.entries_at(entry.index_keys())}
        # As they are (assignee, due, expiry); one the gate should have and lacks, as a claim would put it.
        entries = [stored.get(_pair(i)) or i for i in entry.items()]
        opened[0]["entriesTable"] = mark_of(SECOND)
        if migrating.move_entries(head[wiring.PARTITION_KEY]["S"], int(head["version"]["N"]), a.compact(state), entry.key, entries):
            # Those the page read that name the gate under another key too (a losing transition's, put with its own time).
            inbox.delete_keys(_keys([*entries, *found]))
            return len(entries)
        head = migrating.heads([run_pk(run_id)]).get(run_pk(run_id))
    raise StillMoving(run_id)


def _keys(items: list[a.Item]) -> list[a.Item]:
    return [a.key(*pair) for pair in dict.fromkeys(map(_pair, items))]


def _pair(item: a.Item) -> tuple[str, str]:
    return item[wiring.PARTITION_KEY]["S"], item[wiring.SORT_KEY]["S"]
