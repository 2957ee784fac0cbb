"""Inbox entries written before the inbox was ordered by due time and filtered by who works a gate (issue 29 item 3,
ADR 0114) hold neither the gate's deadline nor its assignee, and a gate with a deadline has no entry in the DUE family:
a due-first page lists it with the gates that have none, and `claim=mine` misses a gate claimed then. Each open gate
of each run head gets the entries a claim would put today (store/transitions.py), on condition that the run has not
moved since its head was read: a claim, release or decision meanwhile wrote its own entries, and they win."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.domain.models.run import state_from_json
from interlude.store import attributes as a
from interlude.store.inbox import Entry
from interlude.store.layout import FIRST
from interlude.store.migrations import RUN_HEADS, MigrationStore

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "puts each open gate's deadline and assignee on its inbox entries: one opened before the inbox sorted by due time gets them"
SCAN = RUN_HEADS
# What an entry says of its gate that the previous release did not write.
FIELDS = ("due", "assignee")


def apply(store: Store, heads: list[a.Item]) -> int:
    migrating = MigrationStore(store.table, store.client, store.entries_table)
    gates: list[tuple[a.Item, list[a.Item]]] = []
    for head in heads:
        state = state_from_json(a.unpacked_json(head["state"]))
        for interrupt in state.interrupts.values():
            entry = Entry.of(state.tenant, state.runId, state.workflowId, interrupt)
            # A gate whose entries are in the second table (marked: format 11) was opened, or moved there (0011), by a
            # release that writes both fields; this one's reads and writes are the first table's.
            if entry.where == FIRST:
                gates.append((head, entry.items()))
    stale = {(i["pk"]["S"], i["sk"]["S"]) for i in migrating.differing([i for _, e in gates for i in e], FIELDS)}
    written = 0
    for head, entries in gates:
        changed = [i for i in entries if (i["pk"]["S"], i["sk"]["S"]) in stale]
        if changed and migrating.put_while_unmoved(head["pk"]["S"], int(head["version"]["N"]), changed):
            written += len(changed)
    return written
