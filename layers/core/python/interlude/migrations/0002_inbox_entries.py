"""Gates opened before the inbox's own index existed (store/inbox.py) are in no approver's inbox: each open interrupt
gets the entries a gate opened now gets, under every family it belongs to (its approvers, its workflow, its kind and
each delegate it was handed to)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.store import attributes as a
from interlude.store import gate_closes, gate_payloads
from interlude.store.inbox import Entry
from interlude.store.layout import FIRST, INTERRUPT_SK_PREFIX
from interlude.store.migrations import MigrationStore, Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "lists every open gate in the approvers' inboxes: one opened before the inbox index existed gets its entries"
# Open format-1 items, and every format-3 item (no status: open while its run head holds it, ADR 0126).
SCAN = Scan(
    "begins_with(sk, :i) AND (#status = :open OR attribute_exists(#seq))",
    {":i": INTERRUPT_SK_PREFIX, ":open": "open"},
    {"#status": "status", "#seq": gate_closes.RAISED_SEQ},
)


def apply(store: Store, interrupts: list[a.Item]) -> int:
    once = [i for i in interrupts if gate_closes.RAISED_SEQ in i]
    heads = store.get_runs([i["runId"]["S"] for i in once]) if once else {}
    held = {oi.interruptId for state, _ in heads.values() for oi in state.interrupts.values()}
    open_ = [i for i in interrupts if gate_closes.RAISED_SEQ not in i or i["interruptId"]["S"] in held]
    # A gate's entries are named from its payload: a format-12 item's put back (ADR 0169).
    gate_payloads.fill(store.client, store.table, open_)
    # A gate whose entries are in the second table (marked: format 11) was opened by a release that wrote them.
    entries = [item for e in map(Entry.of_item, open_) if e.where == FIRST for item in e.items()]
    return MigrationStore(store.table, store.client, store.entries_table).put_missing(entries)
