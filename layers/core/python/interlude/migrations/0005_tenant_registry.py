"""Tenants made before the tenant registry existed (issue 30 item 6: a tenant was its keys) have no record in it: each
tenant that holds an API key gets one, active, so the operator surface lists it and can suspend or delete it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.store import attributes as a
from interlude.store.layout import API_KEY_SK
from interlude.store.migrations import Scan
from interlude.store.tenants import TenantRecords

if TYPE_CHECKING:
    from interlude.store.facade import Store

DESCRIPTION = "lists every tenant: a tenant that holds an API key but no record in the tenant registry gets one"
SCAN = Scan("sk = :key", {":key": API_KEY_SK}, {"#record": "record"}, "pk, #record")


def apply(store: Store, keys: list[a.Item]) -> int:
    first: dict[str, str] = {}
    for item in keys:
        record = a.unpacked(item["record"])
        created = str(record.get("createdAt") or "")
        if record["tenant"] not in first or created < first[record["tenant"]]:
            first[record["tenant"]] = created
    records = TenantRecords(store)
    return sum(1 for tenant, created_at in sorted(first.items()) if records.register(tenant, created_at))
