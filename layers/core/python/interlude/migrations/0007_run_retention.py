"""Runs that ended before retention existed (issue 30 item 4) carry no expiry, and no job was queued for them: each
finished run head without one is given its expiry (its end plus its tenant's retentionDays) and every item of the run
with it, as the retention job does for a run that ends now (interlude.app.retention, in this turn: a run's items are
paged through whole, each one UpdateItem). What it counts as written is runs, not items."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude import wiring
from interlude.migrations.sweeps import FINISHED, FINISHED_FILTER, retain_heads
from interlude.store import attributes as a
from interlude.store.migrations import Scan

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "finished runs expire: a run that ended before retention existed gets its expiry, every item of it"
SCAN = Scan(
    f"{FINISHED_FILTER} AND attribute_not_exists(#ttl)",
    FINISHED,
    {"#ttl": wiring.TTL_ATTRIBUTE, "#status": "status"},
    "pk, sk",
)


def apply(store: Store, heads: list[a.Item]) -> int:
    return retain_heads(store, heads)
