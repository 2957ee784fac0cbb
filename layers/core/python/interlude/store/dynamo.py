"""Single-table DynamoDB repository (design §4). Every state change is one conditional TransactWriteItems.

Item layout (keys are strings; every item carries its tenant in pk):
  run head     T#{tenant}#R#{run}        RUN              state JSON, status, version
  event batch  T#{tenant}#R#{run}        E#{lastSeq:012}  the RunEventDocs one transition wrote; closedEntries: the
                                                          inbox entries of the interrupts it closed (dispatch
                                                          deletes them: store/inbox.py)
  interrupt    T#{tenant}#R#{run}        I#{key}          payload, status, resolution (listed while open by the
                                                          inbox entries of store/inbox.py)
  workflow     T#{tenant}#W#{workflow}   V#{version:08}   immutable definition
  latest       T#{tenant}#W#{workflow}   LATEST           the latest version's number (createRun reads only this)
  modulex wf   T#{tenant}#W#{workflow}   MODULEX          a ModuleX-face workflow's record (name, workflow_schema, ...)
  catalogue    T#{tenant}#WFS            {workflow}       a listed workflow: its face, latest version, summary
  api key      K#{keyId}                 KEY              secret hash, tenant, subject, scopes; revokedAt
                                                          listed per tenant on the inbox index (gsi1pk
                                                          T#{tenant}#KEYS, gsi1sk {createdAt}#{keyId})
  console      T#{tenant}#CONSOLE#{sid}  SESSION          keyId: an open console session (issue 26, S2), deleted at
  session                                                 sign-out; its ttl is when it ends anyway
  run entry    T#{tenant}#RUNS#{shard:02}  {createdAt}#{run}  the run listing's entry (runId, workflowId), written
                                                          once, just before the run (store/item_index.py)
  bookmark     T#{tenant}#RUNMARK#{listing}  {offset:012}  where a ModuleX run listing goes on at that offset (a
                                                          cursor), with a ttl (faces/modulex/workflows.py)
  idempotency  T#{ns}#IDEM#{op}#{key}    IDEM             store/idempotency.py; committed with the effect when
                                                          the write carries an AnsweredRecord
Counters of the per-tenant limits: store/limits.py.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn, cast

import boto3
from botocore.exceptions import ClientError

from interlude import wiring
from interlude.domain import formats
from interlude.domain.budgets import ITEM_BUDGET, TRANSACT_MAX_ITEMS, TRANSACTION_BUDGET
from interlude.domain.errors import DomainError, TooLarge, Unavailable
from interlude.domain.ids import tenant_of
from interlude.rules.limits import quota_exceeded
from interlude.store import attributes as a
from interlude.store import item_formats, item_index
from interlude.store import limits as counters
from interlude.store.interactions import decode_cursor, encode_cursor
from interlude.store.keys import INTERRUPT_SK_PREFIX, interrupt_sk, run_pk

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    from interlude.domain.audit import AuditDraft
    from interlude.domain.models.run import OpenInterrupt, RunState
    from interlude.engine.run import Transition
    from interlude.rules.audit import Head
    from interlude.store import audit as audit_log
    from interlude.store.idempotency import AnsweredRecord
    from interlude.store.inbox import Entry


def run_id_of(pk: str) -> str | None:
    """run_pk's inverse; None for a partition key that is not a run's."""
    parts = pk.split("#")
    if len(parts) != 4 or parts[0] != "T" or parts[2] != "R":
        return None
    return f"{parts[1]}/{parts[3]}"


def run_entry(tenant: str, run_id: str, workflow_id: str, created_at: str) -> tuple[str, dict[str, Any]]:
    """(label, Put) of the run listing's entry for a run, written just before the transaction that creates the run
    (removed again if it is refused; a listing skips an entry whose run head is missing)."""
    sort = f"{created_at}#{run_id.split('/', 1)[1]}"
    put = item_index.entry_put(tenant, wiring.RUN_INDEX, run_id, sort, {"runId": run_id, "workflowId": workflow_id})
    return RUN_ENTRY_LABEL, put


def run_entry_key(entry: tuple[str, dict[str, Any]]) -> a.Item:
    item = entry[1]["Put"]["Item"]
    return {wiring.PARTITION_KEY: item[wiring.PARTITION_KEY], wiring.SORT_KEY: item[wiring.SORT_KEY]}


# The label of the run entry (its PutItem's, as run_entry returns it).
RUN_ENTRY_LABEL = "RUNS"


def workflow_pk(tenant: str, workflow_id: str) -> str:
    return f"T#{tenant}#W#{workflow_id}"


def api_key_pk(key_id: str) -> str:
    return f"K#{key_id}"


def event_sk(last_seq: int) -> str:
    return f"{wiring.EVENT_ITEM_PREFIX}{last_seq:012d}"


WORKFLOW_VERSION_SK_PREFIX = "V#"


def workflow_version_sk(version: int) -> str:
    return f"{WORKFLOW_VERSION_SK_PREFIX}{version:08d}"


RUN_SK = "RUN"
MODULEX_WORKFLOW_SK = "MODULEX"


def catalogue_pk(tenant: str) -> str:
    return f"T#{tenant}#WFS"


def listing_bookmark_pk(tenant: str, listing: str) -> str:
    return f"T#{tenant}#RUNMARK#{listing}"

# The pointer to a workflow's latest version: a few bytes, written in the same transaction as the version.
WORKFLOW_LATEST_SK = "LATEST"
API_KEY_SK = "KEY"
# BatchGetItem reads at most 100 keys per call.
BATCH_GET_MAX = 100
# A revoked or expired key's item is swept this long after (it still answers 401 until then, and lists as such).
KEY_RETENTION_S = 30 * 24 * 3600
# TransactionConflict: another transaction held one of the items (the tenant's usage counter is shared by its
# run creations and endings); nothing was written, so the transaction is sent again.
TRANSACTION_CONFLICT_RETRIES = 5


def keys_index_pk(tenant: str) -> str:
    return f"T#{tenant}#KEYS"


def console_session_pk(tenant: str, session_id: str) -> str:
    return f"T#{tenant}#CONSOLE#{session_id}"


CONSOLE_SESSION_SK = "SESSION"


def _epoch(iso_text: str) -> int:
    return int(datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp())
# DynamoDB's item limit is 400 KB; keep a margin for attribute names and numbers.
MAX_ITEM_BYTES = 380_000


def approximate_size(item: a.Item) -> int:
    size = 0
    for name, typed in item.items():
        value = next(iter(typed.values()))
        size += len(name) + (len(value) if isinstance(value, bytes) else len(str(value).encode("utf-8", "surrogatepass")))
    return size


@dataclass
class Conflict(Exception):
    """A transaction lost a condition. `reasons` holds, per failed item, its sort key and old image."""

    reasons: list[tuple[str, dict[str, Any] | None]]

    def interrupt_old_image(self) -> dict[str, Any] | None:
        return next((old for sk, old in self.reasons if sk.startswith(INTERRUPT_SK_PREFIX)), None)


def create_table(client: Any, name: str) -> None:
    """Create the table exactly as wiring declares it (the local stack and tests use this)."""
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in wiring.key_attributes()],
        KeySchema=[
            {"AttributeName": wiring.PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": wiring.SORT_KEY, "KeyType": "RANGE"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": gsi.name,
                "KeySchema": [
                    {"AttributeName": gsi.partition_key, "KeyType": "HASH"},
                    {"AttributeName": gsi.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
            for gsi in wiring.GLOBAL_INDEXES
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": wiring.STREAM_VIEW},
    )
    client.get_waiter("table_exists").wait(TableName=name)
    client.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": wiring.TTL_ATTRIBUTE}
    )


QUOTA_NOUNS = {counters.OPEN_RUNS: "open runs", counters.WORKFLOW_VERSIONS: "stored workflow versions"}


def _only_transaction_conflicts(exc: ClientError) -> bool:
    reasons = exc.response.get("CancellationReasons") or []
    codes = {r.get("Code") for r in reasons} - {"None", None}
    return exc.response["Error"]["Code"] == "TransactionCanceledException" and codes == {"TransactionConflict"}


def _latest_pointer(tenant: str, workflow_id: str, version: int) -> dict[str, Any]:
    """The Put of a workflow's latest-version pointer at `version`: it only moves forward."""
    return {
        "Item": {**a.key(workflow_pk(tenant, workflow_id), WORKFLOW_LATEST_SK), "version": a.n(version)},
        "ConditionExpression": "attribute_not_exists(sk) OR version < :v",
        "ExpressionAttributeValues": {":v": a.n(version)},
    }


def _key_listing(key_id: str, record: Mapping[str, Any]) -> a.Item:
    """The attributes that list a key among its tenant's (GET /keys): the inbox GSI, under a partition value of the
    tenant's own (the index is overloaded)."""
    index = wiring.INBOX_INDEX
    return {
        index.partition_key: a.s(keys_index_pk(record["tenant"])),
        index.sort_key: a.s(f"{record['createdAt']}#{key_id}"),
    }


def _key_record(item: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = a.unpacked(item["record"])
    if "revokedAt" in item:
        record["revokedAt"] = item["revokedAt"]["S"]
    return record


def _condition_failures(
    items: list[tuple[str, dict[str, Any]]], exc: ClientError
) -> list[tuple[str, dict[str, Any] | None]]:
    """The items whose condition failed when a transaction lost a race, with their old images; [] if it did not."""
    if exc.response["Error"]["Code"] != "TransactionCanceledException":
        return []
    # botocore-stubs type a reason's Item as {key, value}; DynamoDB sends the old item's attribute map.
    reasons = cast("list[dict[str, Any]]", exc.response.get("CancellationReasons") or [])
    failed = [
        (items[i][0], a.plain(r["Item"]) if r.get("Item") else None)
        for i, r in enumerate(reasons)
        if r.get("Code") == "ConditionalCheckFailed"
    ]
    # A cancellation that names no reasons is taken as a lost race on the run head.
    return failed or ([(RUN_SK, None)] if not reasons else [])


class Store:
    def __init__(self, table_name: str, client: Any = None) -> None:
        self.table = table_name
        self.client = client or boto3.client("dynamodb")
        # Every answer of this client (the other stores share it) is refused if it holds an item too new to read.
        item_formats.watch(self.client)
        # Called with (tenant, chain, head written) after every committed audit append (interlude.app.audit
        # checkpoints).
        self.after_audit: Callable[[str, int, Head], None] | None = None
        # An audit chain's head read with the run a decision acts on (get_run(deciding=True)), for that decision's
        # append: taken once; a stale one only costs the append a retry.
        self._audit_head: tuple[tuple[str, int], Head] | None = None

    @cached_property
    def audit_log(self) -> audit_log.AuditLog:
        from interlude.store.audit import AuditLog

        return AuditLog(self.table, self.client)

    # -- api keys ----------------------------------------------------------------------------------

    def put_api_key(
        self,
        key_id: str,
        record: dict[str, Any],
        answered: AnsweredRecord | None = None,
        audit: AuditDraft | None = None,
    ) -> None:
        key_item: a.Item = {
            **a.key(api_key_pk(key_id), API_KEY_SK),
            "record": a.as_json(record),
            "tenant": a.s(record["tenant"]),
            **_key_listing(key_id, record),
        }
        if record.get("expiresAt"):
            key_item[wiring.TTL_ATTRIBUTE] = a.n(_epoch(record["expiresAt"]) + KEY_RETENTION_S)
        condition = "attribute_not_exists(pk)"
        if answered is None and audit is None:
            self.client.put_item(TableName=self.table, Item=key_item, ConditionExpression=condition)
            return
        self._transact([(API_KEY_SK, {"Put": {"Item": key_item, "ConditionExpression": condition}})], answered, audit=audit)

    def list_api_key(self, key_id: str, record: dict[str, Any]) -> bool:
        """Give a key made before keys were listed its place in the listing (a backfill: interlude.migrations);
        whether it had none."""
        listing = _key_listing(key_id, record)
        names = {f"#i{i}": name for i, name in enumerate(listing)}
        try:
            self.client.update_item(
                TableName=self.table,
                Key=a.key(api_key_pk(key_id), API_KEY_SK),
                UpdateExpression="SET " + ", ".join(f"#i{i} = :i{i}" for i in range(len(listing))),
                ConditionExpression="attribute_exists(pk) AND attribute_not_exists(#i0)",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={f":i{i}": value for i, value in enumerate(listing.values())},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def get_api_key(self, key_id: str) -> dict[str, Any] | None:
        # Strongly consistent: a key revoked before this read is seen revoked.
        got = self.client.get_item(
            TableName=self.table, Key=a.key(api_key_pk(key_id), API_KEY_SK), ConsistentRead=True
        )
        item = got.get("Item")
        return _key_record(item) if item else None

    def list_api_keys(self, tenant: str, limit: int, cursor: str | None) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """One page of the tenant's keys, oldest first, as (keyId, record), and the cursor after it. A cursor
        this tenant's listing did not issue raises ValueError."""
        index = wiring.INBOX_INDEX
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": index.name,
            "KeyConditionExpression": "#gpk = :gpk",
            "ExpressionAttributeNames": {"#gpk": index.partition_key},
            "ExpressionAttributeValues": {":gpk": a.s(keys_index_pk(tenant))},
            "Limit": limit,
        }
        if cursor is not None:
            start = decode_cursor(cursor)
            if start is None or start[index.partition_key]["S"] != keys_index_pk(tenant):
                raise ValueError("cursor is not one this listing issued")
            kwargs["ExclusiveStartKey"] = start
        got = self.client.query(**kwargs)
        last = got.get("LastEvaluatedKey")
        keys = [(item[wiring.PARTITION_KEY]["S"].removeprefix("K#"), _key_record(item)) for item in got.get("Items") or []]
        return keys, encode_cursor(last) if last else None

    def revoke_api_key(
        self, tenant: str, key_id: str, at: str, audit: AuditDraft | None = None
    ) -> dict[str, Any] | None:
        """Mark the tenant's key revoked (once: a second revocation keeps the first instant, and records nothing);
        None when the tenant has no such key, whether it does not exist or is another tenant's. `audit`: the entry
        recording the revocation, in the same transaction."""
        record = self.get_api_key(key_id)
        if record is None or record.get("tenant") != tenant:
            return None
        if record.get("revokedAt"):
            return record
        update: dict[str, Any] = {
            "Key": a.key(api_key_pk(key_id), API_KEY_SK),
            "UpdateExpression": "SET revokedAt = :at, #ttl = :ttl",
            "ConditionExpression": "attribute_exists(pk) AND attribute_not_exists(revokedAt)",
            "ExpressionAttributeNames": {"#ttl": wiring.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {":at": a.s(at), ":ttl": a.n(_epoch(at) + KEY_RETENTION_S)},
        }
        try:
            if audit is None:
                self.client.update_item(TableName=self.table, **update)
            else:
                self._transact([(API_KEY_SK, {"Update": update})], audit=audit)
        except Conflict:
            return self.get_api_key(key_id)  # revoked meanwhile: report the instant that won
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return self.get_api_key(key_id)
        return {**record, "revokedAt": at}

    # -- console sessions (issue 26, S2) -------------------------------------------------------------

    def open_console_session(self, tenant: str, session_id: str, key_id: str, ends_at: int) -> None:
        item = {
            **a.key(console_session_pk(tenant, session_id), CONSOLE_SESSION_SK),
            "keyId": a.s(key_id),
            wiring.TTL_ATTRIBUTE: a.n(ends_at),
        }
        self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")

    def console_session_open(self, tenant: str, session_id: str, key_id: str) -> bool:
        # Strongly consistent: a session ended before this read is seen ended, on every instance.
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(console_session_pk(tenant, session_id), CONSOLE_SESSION_SK),
            ConsistentRead=True,
            ProjectionExpression="keyId",
        )
        return (got.get("Item") or {}).get("keyId", {}).get("S") == key_id

    def end_console_session(self, tenant: str, session_id: str) -> None:
        self.client.delete_item(TableName=self.table, Key=a.key(console_session_pk(tenant, session_id), CONSOLE_SESSION_SK))

    # -- workflows ---------------------------------------------------------------------------------

    def latest_workflow(self, tenant: str, workflow_id: str) -> tuple[int, dict[str, Any]] | None:
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :v)",
            ExpressionAttributeValues={
                ":pk": a.s(workflow_pk(tenant, workflow_id)),
                ":v": a.s(WORKFLOW_VERSION_SK_PREFIX),
            },
            ScanIndexForward=False,
            Limit=1,
        )
        items = got.get("Items") or []
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
        latest = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :v)",
            ExpressionAttributeValues={
                ":pk": a.s(workflow_pk(tenant, workflow_id)),
                ":v": a.s(WORKFLOW_VERSION_SK_PREFIX),
            },
            ProjectionExpression="version",
            ScanIndexForward=False,
            Limit=1,
        ).get("Items")
        return int(latest[0]["version"]["N"]) if latest else None

    def get_workflow(self, tenant: str, workflow_id: str, version: int) -> dict[str, Any] | None:
        got = self.client.get_item(
            TableName=self.table, Key=a.key(workflow_pk(tenant, workflow_id), workflow_version_sk(version))
        )
        item = got.get("Item")
        return a.unpacked(item["definition"]) if item else None

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
        items = [
            (sk, {"Put": put}),
            (WORKFLOW_LATEST_SK, {"Put": _latest_pointer(tenant, workflow_id, version)}),
            counters.claim(tenant, counters.WORKFLOW_VERSIONS, versions_limit),
        ]
        # A listed workflow (GET /workflows) carries its catalogue entry, and a ModuleX one its record, in the same
        # transaction: listed exactly when stored.
        if catalogue is not None:
            items.append(self._catalogue_put(tenant, workflow_id, {**catalogue, "latestVersion": version}))
        if modulex_record is not None:
            items.append(self._modulex_put(tenant, workflow_id, modulex_record))
        try:
            self._transact(items, quota=(counters.WORKFLOW_VERSIONS, versions_limit))
        except Conflict:
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
            try:
                self.client.put_item(TableName=self.table, **_latest_pointer(tenant, workflow_id, version))
                written += 1
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise  # else moved past `version` meanwhile
        if entry is not None:
            self.client.put_item(TableName=self.table, **self._catalogue_put(tenant, workflow_id, entry)[1]["Put"])
            written += 1
        return written

    def _catalogue_put(self, tenant: str, workflow_id: str, entry: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        item = {**a.key(catalogue_pk(tenant), workflow_id), "entry": a.as_json(entry), "face": a.s(entry["face"])}
        return "WFS", {"Put": {"Item": item}}

    def _modulex_put(self, tenant: str, workflow_id: str, record: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        item = {**a.key(workflow_pk(tenant, workflow_id), MODULEX_WORKFLOW_SK), "record": a.packed(record)}
        return MODULEX_WORKFLOW_SK, {"Put": {"Item": item}}

    def catalogue_entry(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        """A listed workflow's entry ({face, latestVersion, ...}); None for one never listed or deleted."""
        got = self.client.get_item(TableName=self.table, Key=a.key(catalogue_pk(tenant), workflow_id))
        item = got.get("Item")
        return a.unpacked(item["entry"]) if item else None

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

    def get_modulex_workflow(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        got = self.client.get_item(
            TableName=self.table, Key=a.key(workflow_pk(tenant, workflow_id), MODULEX_WORKFLOW_SK), ConsistentRead=True
        )
        item = got.get("Item")
        return a.unpacked(item["record"]) if item else None

    def put_modulex_metadata(self, tenant: str, workflow_id: str, record: dict[str, Any], catalogue: dict[str, Any]) -> bool:
        """Replace a ModuleX workflow's record and entry without a new version (last writer wins); False when the
        workflow was deleted meanwhile."""
        record_put = self._modulex_put(tenant, workflow_id, record)
        record_put[1]["Put"]["ConditionExpression"] = "attribute_exists(sk)"
        try:
            self._transact([record_put, self._catalogue_put(tenant, workflow_id, catalogue)])
        except Conflict:
            return False
        return True

    def delete_modulex_workflow(self, tenant: str, workflow_id: str, at: str) -> None:
        """Leave a tombstone for the record (ModuleX runs by id are refused from then on) and remove the catalogue
        entry; the versions stay, since runs started from them still read them."""
        self._transact(
            [
                self._modulex_put(tenant, workflow_id, {"deletedAt": at}),
                ("WFS", {"Delete": {"Key": a.key(catalogue_pk(tenant), workflow_id)}}),
            ]
        )

    # -- runs --------------------------------------------------------------------------------------

    def get_run(self, run_id: str, deciding: bool = False) -> tuple[RunState, int] | None:
        """`deciding`: a decision follows, whose audit entry goes to the run's chain: that chain's head is read in the
        same call (one strongly consistent BatchGetItem instead of a GetItem of the run and, later, one of the head)."""
        if deciding:
            item = self._get_run_and_audit_head(run_id)
        else:
            item = self.client.get_item(TableName=self.table, Key=a.key(run_pk(run_id), RUN_SK)).get("Item")
        if not item:
            return None
        # The run model and the engine load on first use: the callbacks function reads no run (cold starts).
        from interlude.domain.models.run import state_from_json

        return state_from_json(a.unpacked_json(item["state"])), int(item["version"]["N"])

    def _get_run_and_audit_head(self, run_id: str) -> dict[str, Any] | None:
        from interlude.store import audit as audit_log
        tenant, chain = tenant_of(run_id), audit_log.chain_of_member(run_id)
        keys = {"run": a.key(run_pk(run_id), RUN_SK), "head": a.key(audit_log.head_pk(tenant, chain), audit_log.HEAD_SK)}
        found: dict[str, dict[str, Any]] = {}
        request: dict[str, Any] = {self.table: {"Keys": list(keys.values()), "ConsistentRead": True}}
        while request:
            got = self.client.batch_get_item(RequestItems=request)
            for item in got.get("Responses", {}).get(self.table, []):
                found["head" if item[wiring.SORT_KEY]["S"] == audit_log.HEAD_SK else "run"] = item
            request = got.get("UnprocessedKeys") or {}
        self._audit_head = ((tenant, chain), audit_log.head_of(found.get("head")))
        return found.get("run")

    def _prefetched_head(self, tenant: str, chain: int) -> Head | None:
        held, self._audit_head = self._audit_head, None
        return held[1] if held is not None and held[0] == (tenant, chain) else None

    def get_runs(self, run_ids: list[str]) -> dict[str, tuple[RunState, int]]:
        """The heads of `run_ids` (BatchGetItem, 100 keys a call); a run that is gone is left out."""
        from interlude.domain.models.run import state_from_json

        found: dict[str, tuple[RunState, int]] = {}
        pending = [a.key(run_pk(r), RUN_SK) for r in dict.fromkeys(run_ids)]
        while pending:
            batch, pending = pending[:BATCH_GET_MAX], pending[BATCH_GET_MAX:]
            request: dict[str, Any] = {self.table: {"Keys": batch}}
            while request:
                got = self.client.batch_get_item(RequestItems=request)
                for item in got.get("Responses", {}).get(self.table) or []:
                    run_id = run_id_of(item[wiring.PARTITION_KEY]["S"])
                    if run_id is not None:
                        state = state_from_json(a.unpacked_json(item["state"]))
                        found[run_id] = (state, int(item["version"]["N"]))
                request = got.get("UnprocessedKeys") or {}
        return found

    def run_index(self, tenant: str) -> item_index.ItemIndexReader:
        return item_index.ItemIndexReader(self.client, self.table, tenant, wiring.RUN_INDEX)

    def put_listing_bookmark(self, tenant: str, listing: str, offset: int, cursor: str, expires_at: int) -> None:
        """Where the run listing `listing` goes on at `offset` (a plain put: the last writer's is as good)."""
        item = {
            **a.key(listing_bookmark_pk(tenant, listing), f"{offset:012d}"),
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
            ExpressionAttributeValues={":pk": a.s(listing_bookmark_pk(tenant, listing)), ":o": a.s(f"{offset:012d}")},
            ScanIndexForward=False,
            Limit=1,
        )
        items = got.get("Items") or []
        if not items or int(items[0][wiring.TTL_ATTRIBUTE]["N"]) <= now:
            return None
        return int(items[0][wiring.SORT_KEY]["S"]), items[0]["cursor"]["S"]

    def commit(
        self,
        transition: Transition,
        expected_version: int | None,
        now_iso: str,
        answered: AnsweredRecord | None = None,
        open_runs_limit: int | None = None,
        audit: AuditDraft | None = None,
    ) -> list[dict[str, Any]]:
        """Write a transition atomically; returns the RunEventDocs written. Raises Conflict on a lost race,
        KeyAlreadyUsed when `answered`'s Idempotency-Key was committed by another request first.

        The tenant's open-runs counter moves in the same transaction: a run created open claims one (refused
        past `open_runs_limit`, when given), a run that ends releases one (never refused). `audit`: the entry that
        records the transition (a decision, a vote, a cancel), appended in the same transaction.
        """
        from interlude.engine.events import to_docs

        # The inbox index and Idempotency-Key records: a run's writers' (the API, dispatch, actions, timeouts), not
        # loaded by the functions that never move a run (callbacks, notify).
        from interlude.store.idempotency import KeyAlreadyUsed
        from interlude.store.inbox import Entry, InboxIndex, added_delegate_families

        state = transition.state
        first_seq = state.nextSeq
        docs = to_docs(state.runId, transition.events, first_seq, now_iso)
        state.nextSeq = first_seq + len(docs)
        claim = None
        # A new run, or a failed one running again (engine.run.retry_action), holds an open-run slot.
        if (expected_version is None or transition.reopened) and not state.terminal:
            limit = open_runs_limit if open_runs_limit is not None else 2**53
            # The usage shard is recorded on the run (written with the head below), so its end releases there.
            state.usageShard, shard_limit = counters.open_runs_shard(state.runId, limit)
            claim = counters.claim(state.tenant, counters.OPEN_RUNS, shard_limit, state.usageShard)
        closed = [Entry.of(state.tenant, state.runId, state.workflowId, c.interrupt) for c in transition.closed]
        items = self._transition_items(transition, expected_version, first_seq, docs, now_iso, closed)
        quota = None
        if claim is not None:
            items.append(claim)
            quota = (counters.OPEN_RUNS, limit)
        elif expected_version is not None and state.terminal:
            items.append(counters.release(state.tenant, counters.OPEN_RUNS, state.usageShard))
        # The inbox entries (store/inbox.py) and a new run's listing entry are plain writes before the
        # transaction, never inside it (where each would bill twice): a reader skips an entry whose item is not
        # there (docs/decisions.md, "The write bill, item by item"). Closed interrupts' entries are deleted by
        # dispatch from the event batch's image (docs/decisions.md, "Closed interrupts leave the inbox by the
        # stream").
        index = InboxIndex(self.table, self.client)
        opened = [Entry.of(state.tenant, state.runId, state.workflowId, i) for i in transition.opened]
        # A gate with a delegation (issue 14 item 4) is listed under each delegate's own family too: put by the
        # transition that records the delegation, once per delegate (a quorum's later votes change no entry).
        for i in transition.updated:
            if added := added_delegate_families(i):
                whole = Entry.of(state.tenant, state.runId, state.workflowId, i)
                opened.append(replace(whole, families=tuple(added)))
        listed = run_entry(state.tenant, state.runId, state.workflowId, state.createdAt) if expected_version is None else None
        entries = [{"PutRequest": {"Item": item}} for e in opened for item in e.items()]
        if listed is not None:
            entries.append({"PutRequest": {"Item": listed[1]["Put"]["Item"]}})
        if entries:
            index.batch_write(entries)
        try:
            self._transact(items, answered, quota, audit)
        except (Conflict, DomainError, KeyAlreadyUsed):
            # Refused, so nothing was written; a run never created shares its entries with no other writer.
            if listed is not None:
                index.batch_write(
                    [{"DeleteRequest": {"Key": key}} for e in opened for key in e.index_keys()]
                    + [{"DeleteRequest": {"Key": run_entry_key(listed)}}]
                )
            raise
        if closed and not docs:
            # No event batch to carry them to dispatch. No engine path closes an interrupt without an event
            # (a resolve emits interrupt.resolved, a cancel node.cancelled); this keeps the entries from staying
            # behind should one ever do so.
            index.delete(closed)
        return docs

    def _transition_items(
        self,
        transition: Transition,
        expected_version: int | None,
        first_seq: int,
        docs: list[dict[str, Any]],
        now_iso: str,
        closed: list[Entry],
    ) -> list[tuple[str, dict[str, Any]]]:
        """(sort key, TransactWriteItem) for everything one transition writes: head, events (naming the inbox
        entries of the interrupts it closes, for dispatch to delete), interrupts."""
        from interlude.store.inbox import closed_entries

        state = transition.state
        pk = run_pk(state.runId)
        items: list[tuple[str, dict[str, Any]]] = [(RUN_SK, self._head_write(state, expected_version))]
        if docs:
            sk = event_sk(state.nextSeq - 1)
            batch: a.Item = {
                **a.key(pk, sk),
                "first": a.n(first_seq),
                "last": a.n(state.nextSeq - 1),
                "events": a.packed(docs),
                **closed_entries(closed),
            }
            items.append((sk, {"Put": {"Item": batch, "ConditionExpression": "attribute_not_exists(sk)"}}))
        items += [(interrupt_sk(i.key), {"Put": self._interrupt_put(state, i)}) for i in transition.opened]
        items += [(interrupt_sk(u.key), {"Update": self._interrupt_votes(pk, u)}) for u in transition.updated]
        items += [
            (
                interrupt_sk(closed.interrupt.key),
                {"Update": self._interrupt_close(pk, closed.interrupt, closed.status, closed.resolution)},
            )
            for closed in transition.closed
        ]
        if transition.abandoned:
            # The tasks of visits the run stopped waiting for end with it (store/tasks.py).
            from interlude.engine.tasks import TASK
            from interlude.store.tasks import abandoned_update

            items += [abandoned_update(state.runId, n, p) for n, p in transition.abandoned if p.kind == TASK]
        # External-event waiters and conversation claims (store/interactions.py) travel in the same transaction.
        from interlude.store.interactions import transition_items

        return items + transition_items(transition, now_iso)

    def _head_write(self, state: RunState, expected_version: int | None) -> dict[str, Any]:
        """The TransactWriteItem of the run head at its next version, on condition that no one wrote the version
        expected. A new head is put; an existing one is updated attribute by attribute, so an attribute a later
        release added to it stays (a rollback's writes strand nothing: docs/operations.md, "Upgrades and rollbacks")."""
        if expected_version is None:
            return {"Put": self._head_put(state, None)}
        owned = list(self._head_attributes(state, expected_version + 1).items())
        return {
            "Update": {
                "Key": a.key(run_pk(state.runId), RUN_SK),
                "UpdateExpression": "SET " + ", ".join(f"#h{i} = :h{i}" for i in range(len(owned))),
                "ConditionExpression": "#version = :expected",
                "ExpressionAttributeNames": {"#version": "version", **{f"#h{i}": name for i, (name, _) in enumerate(owned)}},
                "ExpressionAttributeValues": {
                    ":expected": a.n(expected_version),
                    **{f":h{i}": value for i, (_, value) in enumerate(owned)},
                },
            }
        }

    def _head_put(self, state: RunState, expected_version: None) -> dict[str, Any]:
        """A new run head's Put, on condition that none exists."""
        head = {**a.key(run_pk(state.runId), RUN_SK), **self._head_attributes(state, 1)}
        return {"Item": head, "ConditionExpression": "attribute_not_exists(pk)"}

    @staticmethod
    def _head_attributes(state: RunState, version: int) -> a.Item:
        from interlude.domain.models.run import state_json

        return {
            "version": a.n(version),
            "status": a.s(state.status),
            "workflowId": a.s(state.workflowId),
            "state": a.packed_json(state_json(state)),
        }

    def transact(self, items: list[tuple[str, dict[str, Any]]], audit: AuditDraft) -> None:
        """Write labelled TransactWriteItems (sort key, item) and append `audit` to its tenant's log in the same
        transaction: the action and its audit entry land together or not at all. Raises Conflict when one of
        `items`' conditions fails."""
        self._transact(items, audit=audit)

    def _transact(
        self,
        items: list[tuple[str, dict[str, Any]]],
        answered: AnsweredRecord | None = None,
        quota: tuple[str, int] | None = None,
        audit: AuditDraft | None = None,
    ) -> None:
        """`quota`: (counter, limit) of the usage claim among `items`, named in the refusal if its condition fails.
        `audit`: an entry appended to its tenant's log in the same transaction (store/audit.py)."""
        if audit is None:
            self._transact_once(items, answered, quota)
            return
        from interlude.store import audit as audit_log
        chain = audit_log.chain_of(audit)
        head = self._prefetched_head(audit.tenant, chain)
        for _ in range(audit_log.APPEND_RETRIES):
            if head is None:
                head = self.audit_log.head(audit.tenant, chain)
            appended, written = audit_log.append_items(audit, chain, head, time.time())
            try:
                self._transact_once([*items, *appended], answered, quota)
            except Conflict as lost:
                if {label for label, _ in lost.reasons} <= audit_log.APPEND_LABELS:
                    # Another append moved the head first: the failure carries the head it moved to (ALL_OLD), so
                    # the entry is placed after it without reading again.
                    moved = [old for label, old in lost.reasons if label == audit_log.HEAD_SK]
                    head = audit_log.head_of_plain(moved[0]) if moved else None
                    continue
                raise
            if self.after_audit is not None:
                self.after_audit(audit.tenant, chain, written)
            return
        raise Unavailable("the audit log kept moving while appending; retry", retry_after_s=1)

    def _transact_once(
        self,
        items: list[tuple[str, dict[str, Any]]],
        answered: AnsweredRecord | None,
        quota: tuple[str, int] | None,
    ) -> None:
        if answered is not None:
            from interlude.store import idempotency

            items = [*items, (idempotency.SORT_KEY, {"Put": idempotency.record_put(answered)})]
        if len(items) > TRANSACT_MAX_ITEMS:
            # The budgets keep every counted path under it (domain/budgets.py); one they miss is refused here, before
            # anything is sent, as what it is, rather than as DynamoDB's ValidationException (a 500 at the edge).
            raise TooLarge(
                f"this change would write {len(items)} items at once; one transaction holds at most {TRANSACT_MAX_ITEMS}",
                dict(TRANSACTION_BUDGET),
            )
        for _, op in items:
            body = next(iter(op.values()))
            body["TableName"] = self.table
            body["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            # What an update sets counts toward its item as much as what a put writes (the run head is updated).
            written = body.get("Item") or body.get("ExpressionAttributeValues")
            if written and approximate_size(written) > MAX_ITEM_BYTES:
                raise TooLarge("the run's state would exceed what one stored item can hold (400 KB)", dict(ITEM_BUDGET))
        # The items are built by hand in the low-level shape (store/attributes.py), as plain dicts.
        transact_items = cast("list[TransactWriteItemTypeDef]", [op for _, op in items])
        for attempt in range(TRANSACTION_CONFLICT_RETRIES + 1):
            try:
                self.client.transact_write_items(TransactItems=transact_items)
                return
            except ClientError as exc:
                if attempt < TRANSACTION_CONFLICT_RETRIES and _only_transaction_conflicts(exc):
                    time.sleep(random.uniform(0, 0.02 * 2**attempt))
                    continue
                self._refusal(items, exc, answered, quota)

    def _refusal(
        self,
        items: list[tuple[str, dict[str, Any]]],
        exc: ClientError,
        answered: AnsweredRecord | None,
        quota: tuple[str, int] | None,
    ) -> NoReturn:
        """Raise what a failed transaction means: too large, a key used first, a quota, a lost race (Conflict), or
        the error itself."""
        error = exc.response["Error"]
        if error["Code"] == "ValidationException" and "size" in error.get("Message", "").lower():
            raise TooLarge("the run's state exceeds what DynamoDB can store in one item", dict(ITEM_BUDGET)) from None
        failed = _condition_failures(items, exc)
        if not failed:
            raise exc
        if answered is not None:
            from interlude.store import idempotency
            from interlude.store.idempotency import KeyAlreadyUsed

            for label, old in failed:
                if label == idempotency.SORT_KEY:
                    raise KeyAlreadyUsed(idempotency.existing_of(old, answered.key.digest)) from exc
        if quota is not None and any(sk == counters.USAGE_SK for sk, _ in failed):
            counter, limit = quota
            message = f"this tenant has reached its limit of {limit} {QUOTA_NOUNS[counter]}"
            raise quota_exceeded(counter, limit, message) from None
        raise Conflict(failed) from exc

    def _interrupt_put(self, state: RunState, interrupt: OpenInterrupt) -> dict[str, Any]:
        item: a.Item = {
            **a.key(run_pk(state.runId), interrupt_sk(interrupt.key)),
            "status": a.s("open"),
            "interruptId": a.s(interrupt.interruptId),
            "nodeId": a.s(interrupt.nodeId),
            "kind": a.s(interrupt.kind),
            "runId": a.s(state.runId),
            "workflowId": a.s(state.workflowId),
            "payload": a.packed(interrupt.payload),
            "raisedAt": a.s(interrupt.raisedAt),
        }
        if interrupt.deadline is not None:
            item["deadline"] = a.n(interrupt.deadline)
        # Re-entry guard: one interrupt per key for the lifetime of the run.
        return {"Item": item, "ConditionExpression": "attribute_not_exists(sk)"}

    def delete_inbox_entries(self, keys: list[a.Item]) -> None:
        """Delete inbox index entries by key (those a closing transition named: store/inbox.py); idempotent."""
        from interlude.store.inbox import InboxIndex

        InboxIndex(self.table, self.client).delete_keys(keys)

    def put_open_interrupts(self, opened: list[tuple[RunState, OpenInterrupt]]) -> None:
        """Bulk load for benches and scale tests: each interrupt item exactly as a transition opens it, and its
        inbox entries, by BatchWriteItem (no run head, no events: a page reads neither)."""
        from interlude.store.inbox import Entry, InboxIndex

        index = InboxIndex(self.table, self.client)
        requests = [{"PutRequest": {"Item": self._interrupt_put(state, i)["Item"]}} for state, i in opened]
        index.batch_write(requests)
        index.put(Entry.of(state.tenant, state.runId, state.workflowId, i) for state, i in opened)

    def _interrupt_votes(self, pk: str, interrupt: OpenInterrupt) -> dict[str, Any]:
        return {
            "Key": a.key(pk, interrupt_sk(interrupt.key)),
            "UpdateExpression": "SET votes = :votes",
            "ConditionExpression": "#st = :open",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": {
                ":votes": a.as_json([v.model_dump() for v in interrupt.votes]),
                ":open": a.s("open"),
            },
        }

    def _interrupt_close(
        self, pk: str, interrupt: OpenInterrupt, status: str, resolution: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {
            "Key": a.key(pk, interrupt_sk(interrupt.key)),
            "UpdateExpression": "SET #st = :status, resolution = :resolution",
            "ConditionExpression": "#st = :open",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": {
                ":status": a.s(status),
                ":resolution": a.packed(resolution),
                ":open": a.s("open"),
            },
        }

    def raised_at(self, run_id: str, key: str) -> str | None:
        """When the interrupt raised under `key` was raised (it may be open or closed); None if none was."""
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(run_pk(run_id), interrupt_sk(key)),
            ProjectionExpression="raisedAt",
        )
        item = got.get("Item") or {}
        return item["raisedAt"]["S"] if "raisedAt" in item else None

    def closed_interrupt(self, run_id: str, key: str) -> dict[str, Any] | None:
        """The interrupt raised under `key`: {status, resolution?, raisedAt, interruptId, payload}; None if none was."""
        got = self.client.get_item(
            TableName=self.table,
            Key=a.key(run_pk(run_id), interrupt_sk(key)),
            ProjectionExpression="#st, resolution, raisedAt, interruptId, payload",
            ExpressionAttributeNames={"#st": "status"},
        )
        item = got.get("Item")
        return a.plain(item) if item else None

    def raised_any(self, run_id: str, keys: list[str]) -> bool:
        """Whether the run ever raised an interrupt under one of `keys` (open, resolved or cancelled alike)."""
        pk = run_pk(run_id)
        pending = [a.key(pk, interrupt_sk(k)) for k in keys]
        while pending:
            batch, pending = pending[:BATCH_GET_MAX], pending[BATCH_GET_MAX:]
            request: dict[str, Any] = {self.table: {"Keys": batch, "ProjectionExpression": "sk"}}
            while request:
                got = self.client.batch_get_item(RequestItems=request)
                if got.get("Responses", {}).get(self.table):
                    return True
                request = got.get("UnprocessedKeys") or {}
        return False

    def read_events(self, run_id: str, after_sequence: int = -1, limit: int | None = None) -> list[dict[str, Any]]:
        """Events with sequence > after_sequence, in order. Batches are keyed by their last sequence."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": a.s(run_pk(run_id)),
                ":lo": a.s(event_sk(max(after_sequence + 1, 0))),
                ":hi": a.s(event_sk(10**12 - 1)),
            },
        }
        out: list[dict[str, Any]] = []
        for page in self.client.get_paginator("query").paginate(**kwargs):
            for item in page.get("Items") or []:
                out.extend(e for e in a.unpacked(item["events"]) if e["sequence"] > after_sequence)
            if limit is not None and len(out) >= limit:
                return out[:limit]  # no further page is fetched
        return out
