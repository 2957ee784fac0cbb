"""Runs created before run search existed (GET /runs by tags and title words) have no entry in its index: each run
head gets the entries a run created now gets for its tags and the words of its workflow's id (and name, where the
head holds one) and of its open gates' titles (rules/run_search.py). No metadata key could be declared searchable
before this release, so there is none to index."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.domain.models.run import state_from_json
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store.layout import RUN_SK
from interlude.store.migrations import MigrationStore, Scan
from interlude.store.run_items import search_entries

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "finds every run by its tags and title: a run created before run search existed gets its entries"
SCAN = Scan("sk = :run", {":run": RUN_SK}, {"#state": "state"}, "pk, sk, #state")


def apply(store: Store, heads: list[a.Item]) -> int:
    entries = []
    for head in heads:
        state = state_from_json(a.unpacked_json(head["state"]))
        gates = run_search.gate_families(state, (i.payload for i in state.interrupts.values()))
        entries += search_entries(state, run_search.creation_families(state) + gates)
    return MigrationStore(store.table, store.client).put_missing(entries)
