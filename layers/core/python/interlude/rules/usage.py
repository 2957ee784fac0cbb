"""What a run's events add to its tenant's usage (issue 30 item 6), decided without I/O: the measures a transaction
bills on the tenant's open-runs counter items (store/transitions.py, docs/adr/0123) and the dispatch outbox emits as
the TenantUsage metric (adapters/tenant_usage.py).

  lifecycles    the runs started (`run.started`)
  decisions     the interrupts resolved by someone (`interrupt.resolved` whose reason is not `timeout`)
  storageBytes  the size, as compact JSON, of the run history written (an event item's events)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

LIFECYCLES, DECISIONS, STORAGE_BYTES = "lifecycles", "decisions", "storageBytes"
RUN_MEASURES = (LIFECYCLES, DECISIONS, STORAGE_BYTES)


def measures(events: list[dict[str, Any]], storage_bytes: int | None = None) -> dict[str, int]:
    """What one event item's events (or one transition's, the same list) add to each measure; `storage_bytes`: the size
    of their compact JSON, when the caller has serialised them already (the store, which writes it)."""
    if storage_bytes is None:
        storage_bytes = len(json.dumps(events, separators=(",", ":"), allow_nan=False).encode()) if events else 0
    return {
        LIFECYCLES: sum(1 for e in events if e.get("type") == "run.started"),
        DECISIONS: sum(
            1
            for e in events
            if e.get("type") == "interrupt.resolved" and (e.get("payload") or {}).get("reason") != "timeout"
        ),
        STORAGE_BYTES: storage_bytes,
    }


def summed(*counts: Mapping[str, int]) -> dict[str, int]:
    """The measures of `counts` added up, those that are 0 left out."""
    total: dict[str, int] = {}
    for each in counts:
        for name, value in each.items():
            total[name] = total.get(name, 0) + value
    return {name: value for name, value in total.items() if value}


def month_attribute(measure: str, month: str) -> str:
    """The attribute of a counter item holding `measure` of `month` (YYYY-MM): `decisions@2026-12`."""
    return f"{measure}@{month}"


def month_attributes(counts: Mapping[str, int], month: str) -> dict[str, int]:
    return {month_attribute(name, month): value for name, value in counts.items() if value}


def of_month(item_numbers: Mapping[str, int], month: str) -> dict[str, int]:
    """The measures of `month` among a counter item's numbers (by attribute name), 0 where none was billed."""
    return {name: item_numbers.get(month_attribute(name, month), 0) for name in RUN_MEASURES}


def billed_months(attribute_names: Iterable[str]) -> set[str]:
    """The months (YYYY-MM) a counter item holds measures of, by its attributes' names."""
    months = set()
    for name in attribute_names:
        measure, at, month = name.partition("@")
        if at and measure in RUN_MEASURES:
            months.add(month)
    return months
