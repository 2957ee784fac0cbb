"""Workflow versions (immutable definitions) and the pointer to each workflow's latest one, of either face."""

from __future__ import annotations

from typing import Any

from interlude.domain import formats
from interlude.store import attributes as a
from interlude.store import limits as counters
from interlude.store.catalogue import catalogue_put
from interlude.store.layout import WORKFLOW_LATEST_SK, WORKFLOW_VERSION_SK_PREFIX, workflow_pk, workflow_version_sk
from interlude.store.modulex_records import record_put
from interlude.store.table import conditionally
from interlude.store.transactions import Labelled, LostRace, TransactionalTable
from interlude.store.workflow_reads import read_workflow


def latest_pointer(tenant: str, workflow_id: str, version: int) -> dict[str, Any]:
    """The Put of a workflow's latest-version pointer at `version`: it only moves forward."""
    return {
        "Item": {**a.key(workflow_pk(tenant, workflow_id), WORKFLOW_LATEST_SK), "version": a.n(version)},
        "ConditionExpression": "attribute_not_exists(sk) OR version < :v",
        "ExpressionAttributeValues": {":v": a.n(version)},
    }


class WorkflowStore(TransactionalTable):
    def latest_workflow(self, tenant: str, workflow_id: str) -> tuple[int, dict[str, Any]] | None:
        items = self._newest_version(tenant, workflow_id)
        if not items:
            return None
        return int(items[0]["version"]["N"]), a.unpacked(items[0]["definition"])

    def latest_workflow_version(self, tenant: str, workflow_id: str) -> int | None:
        """The latest version's number from its pointer item (one small read), else from the newest version item
        (workflows registered before the pointer existed)."""
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(workflow_pk(tenant, workflow_id), WORKFLOW_LATEST_SK),
            ProjectionExpression="version",
        )
        if "Item" in got:
            return int(got["Item"]["version"]["N"])
        latest = self._newest_version(tenant, workflow_id, ProjectionExpression="version")
        return int(latest[0]["version"]["N"]) if latest else None

    def _newest_version(self, tenant: str, workflow_id: str, **options: Any) -> list[dict[str, Any]]:
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :v)",
            ExpressionAttributeValues={
                ":pk": a.s(workflow_pk(tenant, workflow_id)),
                ":v": a.s(WORKFLOW_VERSION_SK_PREFIX),
            },
            ScanIndexForward=False,
            Limit=1,
            **options,
        )
        return list(got.get("Items") or [])

    def get_workflow(self, tenant: str, workflow_id: str, version: int) -> dict[str, Any] | None:
        return read_workflow(self, tenant, workflow_id, version)

    def put_workflow_version(
        self,
        tenant: str,
        workflow_id: str,
        version: int,
        definition: dict[str, Any],
        created_at: str,
        created_by: str,
        versions_limit: int,
        catalogue: dict[str, Any] | None = None,
        modulex_record: dict[str, Any] | None = None,
    ) -> bool:
        """False when that version number was taken meanwhile (the caller retries with the next one); a quota
        refusal when the tenant already stores `versions_limit` versions. The version and the pointer to it are one
        transaction, and the pointer only moves forward: a slower writer below it is refused (and retries higher)."""
        sk = workflow_version_sk(version)
        item = {
            **a.key(workflow_pk(tenant, workflow_id), sk),
            "version": a.n(version),
            "definition": a.as_json(definition),
            "createdAt": a.s(created_at),
            "createdBy": a.s(created_by),
        }
        written_in = formats.workflow_version_format(definition)
        if written_in is not None:
            item[formats.FORMAT_FIELD] = a.n(written_in)
        put = {"Item": item, "ConditionExpression": "attribute_not_exists(sk)"}
        items: list[Labelled] = [
            (sk, {"Put": put}),
            (WORKFLOW_LATEST_SK, {"Put": latest_pointer(tenant, workflow_id, version)}),
            counters.claim(tenant, counters.WORKFLOW_VERSIONS, versions_limit),
        ]
        # A listed workflow (GET /workflows) carries its catalogue entry, and a ModuleX one its record, in the same
        # transaction: listed exactly when stored.
        if catalogue is not None:
            items.append(catalogue_put(tenant, workflow_id, {**catalogue, "latestVersion": version}))
        if modulex_record is not None:
            items.append(record_put(tenant, workflow_id, modulex_record))
        try:
            self._transact(items, quota=(counters.WORKFLOW_VERSIONS, versions_limit))
        except LostRace:
            return False
        return True

    def relist_workflow(self, tenant: str, workflow_id: str, version: int, entry: dict[str, Any] | None) -> int:
        """A backfill (interlude.migrations) for a workflow registered before its latest-version pointer or its
        catalogue entry existed, or whose entry lacks what the listing now filters on: the pointer put if it is
        missing or behind `version`, and `entry` (when given) put in the catalogue. How many items it wrote."""
        written = 0
        pointer = self.client.get_item(
            TableName=self.table,
            Key=a.key(workflow_pk(tenant, workflow_id), WORKFLOW_LATEST_SK),
            ProjectionExpression="version",
            ConsistentRead=True,
        ).get("Item")
        if pointer is None or int(pointer["version"]["N"]) < version:
            latest = latest_pointer(tenant, workflow_id, version)
            # Not written when it moved past `version` meanwhile.
            written += conditionally(self.client.put_item, TableName=self.table, **latest) is not None
        if entry is not None:
            self.client.put_item(TableName=self.table, **catalogue_put(tenant, workflow_id, entry)[1]["Put"])
            written += 1
        return written
