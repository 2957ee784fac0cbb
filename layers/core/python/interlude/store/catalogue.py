"""The workflow catalogue (GET /workflows): one small entry per listed workflow of either face, in one partition per
tenant, written in the transaction that stores the workflow's version (store/workflows.py) or its ModuleX record
(store/modulex_records.py): listed exactly when stored."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import catalogue_pk
from interlude.store.table import Table
from interlude.store.transactions import Labelled

CATALOGUE_LABEL = "WFS"


def catalogue_put(tenant: str, workflow_id: str, entry: dict[str, Any]) -> Labelled:
    item = {**a.key(catalogue_pk(tenant), workflow_id), "entry": a.as_json(entry), "face": a.s(entry["face"])}
    return CATALOGUE_LABEL, {"Put": {"Item": item}}


def catalogue_delete(tenant: str, workflow_id: str) -> Labelled:
    return CATALOGUE_LABEL, {"Delete": {"Key": a.key(catalogue_pk(tenant), workflow_id)}}


class CatalogueStore(Table):
    def catalogue_entry(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        """A listed workflow's entry ({face, latestVersion, ...}); None for one never listed or deleted."""
        got = self.client.get_item(TableName=self.table, Key=a.key(catalogue_pk(tenant), workflow_id))
        item = got.get("Item")
        return a.unpacked(item["entry"]) if item else None

    def catalogue_first(self, tenant: str, most: int) -> list[tuple[str, dict[str, Any]]]:
        """(workflowId, entry) of the first `most` listed workflows by id: one Query, however many the tenant has."""
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": a.s(catalogue_pk(tenant))},
            Limit=most,
        )
        return [(item[wiring.SORT_KEY]["S"], a.unpacked(item["entry"])) for item in got.get("Items") or []]

    def catalogue_page(
        self, tenant: str, offset: int, limit: int, keep: Callable[[dict[str, Any]], bool] | None = None
    ) -> tuple[list[tuple[str, dict[str, Any]]], int]:
        """(workflowId, entry) of the listed workflows `offset`..`offset + limit` by id among those `keep` keeps, and
        how many it keeps: the partition is read to its end (small entries; a tenant's workflows are bounded by its
        versions quota), filtered as it is read."""
        entries: list[tuple[str, dict[str, Any]]] = []
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": a.s(catalogue_pk(tenant))},
        )
        total = 0
        for page in pages:
            for item in page.get("Items") or []:
                # Decoded only when filtered or shown: an unfiltered listing decodes one page of entries.
                if keep is not None:
                    entry = a.unpacked(item["entry"])
                    if not keep(entry):
                        continue
                if offset <= total < offset + limit:
                    entries.append((item[wiring.SORT_KEY]["S"], entry if keep is not None else a.unpacked(item["entry"])))
                total += 1
        return entries, total
