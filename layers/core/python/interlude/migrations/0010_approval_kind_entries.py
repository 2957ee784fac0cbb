"""Approvals opened before 0.5.0 have an inbox entry in the `KIND#approval` family, which no release reads since 0.4.0
(a `kind=approval` page reads the caller's own families: docs/adr/0160) and which a close by this release no longer
names for `dispatch` to delete. Each is deleted here, so none is left behind when its gate closes (one a claim put again
or the daily sweep kept would carry no expiry)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.inbox import OWN_FAMILIES_KIND, InboxIndex
from interlude.store.migrations import Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "deletes approvals' inbox entries in their kind's family, which no release reads since 0.4.0"
SCAN = Scan(
    "contains(pk, :family)", {":family": f"#{wiring.INBOX.prefix}#KIND#{OWN_FAMILIES_KIND}#"}, projection="pk, sk"
)


def apply(store: Store, entries: list[a.Item]) -> int:
    # In the first table only: no release that writes the second writes this family.
    InboxIndex(store.table, store.client, store.entries_table).delete_keys(a.key(i["pk"]["S"], i["sk"]["S"]) for i in entries)
    return len(entries)
