"""Per-tenant usage (issue 30 item 6), metered where the work is done: one EMF metric, TenantUsage{tenant, measure}
(interlude.adapters.metrics), and the tenant's usage document of the month (interlude.store.tenants), which billing
reads through the operator surface.

Measures: `lifecycles`, the runs started; `decisions`, the interrupts resolved by someone (a timeout is no decision);
`storageBytes`, the size, as compact JSON, of the run history written (the bulk of what a tenant stores); these three
counted by the dispatch outbox, once per event item; `notifications`, the notifications sent, counted by the notify
worker. Each is counted once: an event item delivered again (the stream and SQS deliver at least once) is known by its
run's record of the items counted (interlude.store.tenants.TenantRecords.meter_once), and the notify worker answers
`sent` once per notification (its ledger).
"""

from __future__ import annotations

import json
from typing import Any

from interlude.adapters import metrics
from interlude.domain.clock import Clock
from interlude.domain.ids import tenant_of
from interlude.store.table import Table
from interlude.store.tenants import TenantRecords

UNITS = {"storageBytes": "Bytes"}


def on_events(service: Any, run_id: str, events: list[dict[str, Any]]) -> None:
    """The dispatch outbox's handler: what one event item of a run adds to its tenant's usage."""
    resolved = [e for e in events if e.get("type") == "interrupt.resolved"]
    counts = {
        "lifecycles": sum(1 for e in events if e.get("type") == "run.started"),
        "decisions": sum(1 for e in resolved if (e.get("payload") or {}).get("reason") != "timeout"),
        "storageBytes": len(json.dumps(events, separators=(",", ":"), allow_nan=False).encode()),
    }
    sequence = max((e["sequence"] for e in events if isinstance(e.get("sequence"), int)), default=None)
    if sequence is None:
        return
    tenant, now = tenant_of(run_id), service.clock()
    if TenantRecords(service.store).meter_once(tenant, now.strftime("%Y-%m"), run_id, sequence, counts, int(now.timestamp())):
        emit(tenant, counts)


def count_notification(store: Table, clock: Clock, tenant: str, notification_id: str) -> None:
    meter(store, clock, tenant, notification_id, {"notifications": 1})


def meter(store: Table, clock: Clock, tenant: str, member: str, counts: dict[str, int]) -> None:
    TenantRecords(store).meter(tenant, clock().strftime("%Y-%m"), member, counts)
    emit(tenant, counts)


def emit(tenant: str, counts: dict[str, int]) -> None:
    for measure, value in counts.items():
        if value:
            metrics.put("TenantUsage", value, UNITS.get(measure, "Count"), tenant=tenant, measure=measure)
