"""Per-tenant usage (issue 30 item 6): one EMF metric, TenantUsage{tenant, measure} (interlude.adapters.metrics), and
the tenant's usage of the month (interlude.store.tenants), which billing reads through the operator surface.

Measures (rules/usage.py): `lifecycles`, `decisions` and `storageBytes` are billed by the run's own transactions, on
the open-runs counter item its create or its end writes anyway (store/transitions.py, docs/adr/0123), exactly once;
this module only emits their metric, from the dispatch outbox, once per delivery of an event item (a metric, not a
bill: an item delivered twice emits twice). `notifications`, the notifications sent, are counted by the notify
worker, which answers `sent` once per notification (its ledger), on the month's usage parts.
"""

from __future__ import annotations

from typing import Any

from interlude.adapters import metrics
from interlude.domain.clock import Clock
from interlude.domain.ids import tenant_of
from interlude.rules import usage
from interlude.store.table import Table
from interlude.store.tenants import TenantRecords

UNITS = {usage.STORAGE_BYTES: "Bytes"}


def on_events(run_id: str, events: list[dict[str, Any]]) -> None:
    """The dispatch outbox's handler: the metric of what one event item of a run adds to its tenant's usage."""
    emit(tenant_of(run_id), usage.measures(events))


def count_notification(store: Table, clock: Clock, tenant: str, notification_id: str) -> None:
    meter(store, clock, tenant, notification_id, {"notifications": 1})


def meter(store: Table, clock: Clock, tenant: str, member: str, counts: dict[str, int]) -> None:
    TenantRecords(store).meter(tenant, clock().strftime("%Y-%m"), member, counts)
    emit(tenant, counts)


def emit(tenant: str, counts: dict[str, int]) -> None:
    for measure, value in counts.items():
        if value:
            metrics.put("TenantUsage", value, UNITS.get(measure, "Count"), tenant=tenant, measure=measure)
