"""Gates opened before the inbox's own index existed (store/inbox.py) are in no approver's inbox: each open interrupt
gets the entries a gate opened now gets, under every family it belongs to (its approvers, its workflow, its kind and
each delegate it was handed to)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.store import attributes as a
from interlude.store.inbox import Entry
from interlude.store.layout import INTERRUPT_SK_PREFIX
from interlude.store.migrations import MigrationStore, Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "lists every open gate in the approvers' inboxes: one opened before the inbox index existed gets its entries"
SCAN = Scan("begins_with(sk, :i) AND #status = :open", {":i": INTERRUPT_SK_PREFIX, ":open": "open"}, {"#status": "status"})


def apply(store: Store, interrupts: list[a.Item]) -> int:
    entries = [item for interrupt in interrupts for item in Entry.of_item(interrupt).items()]
    return MigrationStore(store.table, store.client).put_missing(entries)
