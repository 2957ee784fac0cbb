"""Runs created before the run listing existed (GET /runs, GET /workflow-runs) have no entry in it: each run head
without one gets it, exactly as a run created now is listed (Store.commit writes it just before the run)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.domain.models.run import state_from_json
from interlude.store import attributes as a
from interlude.store.layout import RUN_SK
from interlude.store.migrations import MigrationStore, Scan
from interlude.store.run_items import run_entry

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "lists every run: a run created before the run listing existed gets its entry"
SCAN = Scan("sk = :run", {":run": RUN_SK}, {"#state": "state"}, "pk, sk, #state")


def apply(store: Store, heads: list[a.Item]) -> int:
    entries = []
    for head in heads:
        state = state_from_json(a.unpacked_json(head["state"]))
        _, put = run_entry(state.tenant, state.runId, state.workflowId, state.createdAt)
        entries.append(put["Put"]["Item"])
    return MigrationStore(store.table, store.client, store.entries_table).put_missing(entries)
