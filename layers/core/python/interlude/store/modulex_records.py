"""The ModuleX face's records: a ModuleX workflow's record (name, workflow_schema, ...: its format is the face's,
faces/modulex/workflows.py) beside the workflow's versions, and the bookmarks of its run listings.

In the store, not the face, though only the face gives them meaning: the version and its record are written in one
transaction (store/workflows.py, for app/workflows.py below the faces), and the API edge asks whether an id is a
ModuleX workflow's with one read on the OpenWOP workflow routes, which load no part of the face (docs/adr/0099).
"""

from __future__ import annotations

from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.catalogue import catalogue_delete, catalogue_put
from interlude.store.layout import MODULEX_WORKFLOW_SK, listing_bookmark_pk, listing_bookmark_sk, workflow_pk
from interlude.store.transactions import Labelled, LostRace, TransactionalTable


def record_put(tenant: str, workflow_id: str, record: dict[str, Any]) -> Labelled:
    item = {**a.key(workflow_pk(tenant, workflow_id), MODULEX_WORKFLOW_SK), "record": a.packed(record)}
    return MODULEX_WORKFLOW_SK, {"Put": {"Item": item}}


class ModulexRecordStore(TransactionalTable):
    def get_modulex_workflow(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        got = self.client.get_item(
            TableName=self.table, Key=a.key(workflow_pk(tenant, workflow_id), MODULEX_WORKFLOW_SK), ConsistentRead=True
        )
        item = got.get("Item")
        return a.unpacked(item["record"]) if item else None

    def put_modulex_metadata(self, tenant: str, workflow_id: str, record: dict[str, Any], catalogue: dict[str, Any]) -> bool:
        """Replace a ModuleX workflow's record and entry without a new version (last writer wins); False when the
        workflow was deleted meanwhile."""
        put = record_put(tenant, workflow_id, record)
        put[1]["Put"]["ConditionExpression"] = "attribute_exists(sk)"
        try:
            self._transact([put, catalogue_put(tenant, workflow_id, catalogue)])
        except LostRace:
            return False
        return True

    def delete_modulex_workflow(self, tenant: str, workflow_id: str, at: str) -> None:
        """Leave a tombstone for the record (ModuleX runs by id are refused from then on) and remove the catalogue
        entry; the versions stay, since runs started from them still read them."""
        self._transact([record_put(tenant, workflow_id, {"deletedAt": at}), catalogue_delete(tenant, workflow_id)])

    def put_listing_bookmark(self, tenant: str, listing: str, offset: int, cursor: str, expires_at: int) -> None:
        """Where the run listing `listing` goes on at `offset` (a plain put: the last writer's is as good)."""
        item = {
            **a.key(listing_bookmark_pk(tenant, listing), listing_bookmark_sk(offset)),
            "cursor": a.s(cursor),
            wiring.TTL_ATTRIBUTE: a.n(expires_at),
        }
        self.client.put_item(TableName=self.table, Item=item)

    def listing_bookmark(self, tenant: str, listing: str, offset: int, now: int) -> tuple[int, str] | None:
        """(offset, cursor) of the listing's bookmark nearest at or below `offset`, unexpired (one Query of one
        item; DynamoDB's TTL deletes expired items late, so expiry is checked here)."""
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk <= :o",
            ExpressionAttributeValues={
                ":pk": a.s(listing_bookmark_pk(tenant, listing)),
                ":o": a.s(listing_bookmark_sk(offset)),
            },
            ScanIndexForward=False,
            Limit=1,
        )
        items = got.get("Items") or []
        if not items or int(items[0][wiring.TTL_ATTRIBUTE]["N"]) <= now:
            return None
        return int(items[0][wiring.SORT_KEY]["S"]), items[0]["cursor"]["S"]
