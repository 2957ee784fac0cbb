"""Runs created before run search existed (GET /runs by tags and title words) have no entry in its index: each run
head gets the entries a run created now gets for its tags and the words of its workflow's id and name and of its open
gates' titles (rules/run_search.py). A head from then does not hold its workflow's name: the name its workflow version
was registered under is read (once per version) and written into the head, on condition that the run has not moved
since it was read (one that did keeps its entries and goes without the name on its page). No metadata key could be
declared searchable before this release, so there is none to index."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.domain.models.run import state_from_json, state_json
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store.migrations import RUN_HEADS, MigrationStore
from interlude.store.run_items import search_entries
from interlude.store.workflow_reads import WorkflowNames

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "finds every run by its tags and title: a run created before run search existed gets its entries"
SCAN = RUN_HEADS


def apply(store: Store, heads: list[a.Item]) -> int:
    entries = []
    names = WorkflowNames(store)
    migrating = MigrationStore(store.table, store.client, store.entries_table)
    renamed = 0
    for head in heads:
        held = state_from_json(a.unpacked_json(head["state"]))
        state = names.named(held)
        if state is not held and migrating.name_run(head["pk"]["S"], int(head["version"]["N"]), state_json(state)):
            renamed += 1
        gates = run_search.gate_families(state, (i.payload for i in state.interrupts.values()))
        entries += search_entries(state, run_search.creation_families(state) + gates)
    return renamed + migrating.put_missing(entries)
