"""Runs that ended before retention existed (issue 30 item 4) carry no expiry, and no job was queued for them: each
finished run head without one is given its expiry (its end plus its tenant's retentionDays) and every item of the run
with it, as the retention job does for a run that ends now (interlude.app.retention, in this turn: a run's items are
paged through whole, each one UpdateItem). What it counts as written is runs, not items."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude import wiring
from interlude.app.retention import RunRetention
from interlude.app.tenant_facts import tenant_settings
from interlude.domain import clock
from interlude.domain.models.tenants import DEFAULT_RETENTION_DAYS
from interlude.store import attributes as a
from interlude.store.interactions import InteractionStore
from interlude.store.layout import RUN_SK, run_id_of
from interlude.store.migrations import Scan
from interlude.store.retention import RetentionStore

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "finished runs expire: a run that ended before retention existed gets its expiry, every item of it"
SCAN = Scan(
    "sk = :run AND attribute_not_exists(#ttl) AND #status IN (:completed, :failed, :cancelled)",
    {":run": RUN_SK, ":completed": "completed", ":failed": "failed", ":cancelled": "cancelled"},
    {"#ttl": wiring.TTL_ATTRIBUTE, "#status": "status"},
    "pk, sk",
)


def apply(store: Store, heads: list[a.Item]) -> int:
    # The tenant's settings read directly, not through the limiter: `interlude migrate` runs where no function's
    # configuration is.
    settings = InteractionStore(store.table, store.client)
    days: dict[str, int] = {}

    def retention_days(tenant: str) -> int:
        if tenant not in days:
            days[tenant] = tenant_settings(settings, tenant).retentionDays or DEFAULT_RETENTION_DAYS
        return days[tenant]

    retention = RunRetention(RetentionStore(store.table, store.client), retention_days, clock.now)
    retained = 0
    for head in heads:
        run_id = run_id_of(head[wiring.PARTITION_KEY]["S"])
        if run_id is not None and retention.turn(run_id, None, lambda: True) is None:
            retained += 1
    return retained
