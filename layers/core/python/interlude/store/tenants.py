"""The tenants' side of the table (issue 30 item 6): each tenant's record in the operator's registry, the work held
while a tenant is suspended, its usage meters, and the pages of its items a deletion removes.

  record     TENANTS                     {tenant}            status active|suspended|deleting|deleted, version (every
                                                             change is conditional on it), record: the rest as JSON
                                                             (createdAt, suspension, a deletion's checkpoint and, once
                                                             it is done, its report); ttl once deleted
             (on the inbox index: gsi1pk TENANTS#HANDBACK, gsi1sk {tenant}, while its resume has held work to
             hand back; handBackUntil: the lease of whoever hands it back, a resume call or the sweep)
  held work  T#{tenant}#HELD             {destination}#{id}  what a worker was handed while the tenant was suspended:
                                                             a queue's message, or a deadline's schedule input; heldAt,
                                                             and the mark of this holding (`holding`: the same work
                                                             held again is a new holding under the same key)
  usage      T#{tenant}#METER#{part:02}  {YYYY-MM}           notifications of the month so far (and, written before
                                                             0123, every measure), in USAGE_PARTS parts summed on read
                                                             (a busy tenant's counts spread over that many items)
  billed     T#{tenant}[#USAGE#{shard}]  USAGE               the open-runs counter items (store/limits.py): beside
                                                             openRuns, `{measure}@{YYYY-MM}`, the lifecycles,
                                                             decisions and storageBytes the runs' own transactions
                                                             billed there (docs/adr/0123), summed on read too
  metered    T#{tenant}#METERED#{part:02} {runId}            written before 0123 (the event items of a run the outbox
                                                             had counted); no longer read, gone by their TTL
  usage doc  T#{tenant}#METER            {YYYY-MM}           the month's usage, closed (closedAt) once it is over: the
                                                             one document per tenant and month billing reads

The registry is the operator's: its partition is no tenant's, so a tenant's deletion, which removes every item under
`T#{tenant}`, the tenant's API keys (`K#…`) and its live connections (`LIVE#…`, each found by its `tenant`), leaves the record as the tombstone that keeps
the deletion's report and turns away work still in flight for the tenant until it expires (wiring.TENANT_TOMBSTONE_S);
after, the tenant has neither a record nor a key, and its work is turned away all the same (store/tenant_standing.py).
"""

from collections.abc import Iterator, Mapping
from secrets import token_hex
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.rules import usage as billing
from interlude.store import attributes as a
from interlude.store import limits as counters
from interlude.store.due_index import DUE_PK_PREFIX
from interlude.store.interactions import settings_key, settings_read
from interlude.store.item_index import shard_of
from interlude.store.layout import (
    API_KEY_PK_PREFIX,
    API_KEY_SK,
    FIRST,
    LIVE_CONNECTION_PK_PREFIX,
    LIVE_CONNECTION_SK,
    tenant_keys_query,
    tenant_of_pk,
)
from interlude.store.table import BATCH_WRITE_MAX, Table, batch_get, batch_write_all, conditionally

REGISTRY_PK = "TENANTS"
# The registry's value on the inbox index (overloaded, as the keys' listing is) that lists the records of the tenants
# whose resume has held work still to hand back.
HANDING_BACK = f"{REGISTRY_PK}#HANDBACK"
HAND_BACK_UNTIL = "handBackUntil"
ACTIVE, SUSPENDED, DELETING, DELETED = "active", "suspended", "deleting", "deleted"
STATUSES = (ACTIVE, SUSPENDED, DELETING, DELETED)
USAGE_PARTS = 16
MEASURES = ("lifecycles", "decisions", "notifications", "storageBytes")


def record_key(tenant: str) -> a.Item:
    return a.key(REGISTRY_PK, tenant)


# What ends a held-work partition's key (a tenant's name holds no `#`).
HELD_SUFFIX = "#HELD"


def held_pk(tenant: str) -> str:
    return f"T#{tenant}{HELD_SUFFIX}"


def usage_key(tenant: str, part: int, month: str) -> a.Item:
    return a.key(f"T#{tenant}#METER#{part:02d}", month)


def closed_usage_key(tenant: str, month: str) -> a.Item:
    return a.key(f"T#{tenant}#METER", month)


def usage_part(member: str) -> int:
    """The usage part a member's counts go to (a run's, a notification's): stable in every process."""
    return shard_of(member, USAGE_PARTS)


class RecordChanged(Exception):
    """The record changed since it was read (another operator call): read it again."""


class Stored(NamedTuple):
    """A tenant's record as read: its status, the version its next change is conditional on, and the rest;
    `handing_back`: listed as having held work still to hand back."""

    tenant: str
    status: str
    version: int
    record: dict[str, Any]
    handing_back: bool = False


class Usage(NamedTuple):
    """A tenant's usage document of a month (YYYY-MM): its counts, and when it was closed (None: still open)."""

    month: str
    counts: dict[str, int]
    closed_at: str | None


# The field a held queue message gains as a resume hands it back (adapters/tenant_outside.py): when, epoch seconds. An
# outbox message's notices' decision links and a notification's personal link live from then, not from their gate's
# raise (adapters/delivery/outbox.link_minter, adapters/notify/worker). 0.11.0 reads the message as before, this field
# unread. The held item itself never holds it.
HANDED_BACK_AT = "handedBackAt"


def handed_back_at(message: Mapping[str, Any]) -> float | None:
    """When a resume handed `message` back (its HANDED_BACK_AT); None: it was never held (or the stamp is no number)."""
    at = message.get(HANDED_BACK_AT)
    return float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None


# A held item's mark of the holding it is (a token made by `hold`); 0.11.0 neither writes nor reads it.
HOLDING = "holding"


class Held(NamedTuple):
    """A piece of held work as read; `holding`: which holding of it this is (None: held by a release before 0.12.0)."""

    sk: str
    destination: str
    body: dict[str, Any]
    held_at: str
    holding: str | None = None


class TenantRecords:
    def __init__(self, table: Table) -> None:
        # The low-level client, typed loosely: items are built and read by hand (store/attributes.py).
        self.client: Any = table.client
        self.table = table.table
        self.table_named = table.table_named

    # -- the registry -----------------------------------------------------------------------------------

    def get(self, tenant: str, consistent: bool = False) -> Stored | None:
        got = self.client.get_item(TableName=self.table, Key=record_key(tenant), ConsistentRead=consistent)
        item = got.get("Item")
        return _stored(item) if item else None

    def status(self, tenant: str, consistent: bool = False) -> str | None:
        """The tenant's status alone (None: no record, a tenant from before the registry that no migration listed)."""
        got = self.client.get_item(
            TableName=self.table,
            Key=record_key(tenant),
            ConsistentRead=consistent,
            ProjectionExpression="#status",
            ExpressionAttributeNames={"#status": "status"},
        )
        item = got.get("Item")
        return str(item["status"]["S"]) if item and "status" in item else None

    def holds_keys(self, tenant: str) -> bool:
        """Whether any API key names the tenant (its listing on the inbox index: revoked ones too, until swept)."""
        return bool(self.client.query(**tenant_keys_query(self.table, tenant), Select="COUNT", Limit=1).get("Count"))

    def status_and_settings(self, tenant: str) -> tuple[str | None, dict[str, Any] | None]:
        """The tenant's status (as `status` reads it) and its settings (as InteractionStore.get_settings reads them)
        in one BatchGetItem: what a new instance's first request of a tenant asks of both (ADR 0137)."""
        record, settings = record_key(tenant), settings_key(tenant)
        read = {"ProjectionExpression": "pk, sk, #status, settings", "ExpressionAttributeNames": {"#status": "status"}}
        found = {(i["pk"]["S"], i["sk"]["S"]): i for i in batch_get(self.client, self.table, [record, settings], **read)}
        item = found.get((record["pk"]["S"], record["sk"]["S"]))
        status = str(item["status"]["S"]) if item and "status" in item else None
        return status, settings_read(found.get((settings["pk"]["S"], settings["sk"]["S"]))).settings

    def page(self, limit: int, after: str | None) -> tuple[list[Stored], str | None]:
        """Tenants in name order, `limit` at most, after tenant `after`; and the last one's name when more follow."""
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": a.s(REGISTRY_PK)},
            "Limit": limit,
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = record_key(after)
        got = self.client.query(**kwargs)
        records = [_stored(item) for item in got.get("Items") or []]
        return records, (records[-1].tenant if got.get("LastEvaluatedKey") and records else None)

    def put(self, stored: Stored, status: str, record: dict[str, Any], expires_at: int | None = None) -> Stored:
        """Replace the record on condition it is still the version read (`stored.version`; 0: none yet, or a deleted
        tenant's tombstone, which a new tenant of the same name replaces)."""
        try:
            self.client.put_item(TableName=self.table, **self._write(stored, status, record, expires_at))
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise RecordChanged(stored.tenant) from None
            raise
        return Stored(stored.tenant, status, stored.version + 1, record)

    def put_item(
        self, stored: Stored, status: str, record: dict[str, Any], handing_back: bool = False
    ) -> tuple[str, dict[str, Any]]:
        """The same replacement as a transaction's labelled Put (store.transactions.TransactionalTable.transact, which
        writes more with it); `handing_back`: listed among the records whose held work is to be handed back."""
        return REGISTRY_PK, {"Put": self._write(stored, status, record, None, handing_back)}

    @staticmethod
    def _write(
        stored: Stored, status: str, record: dict[str, Any], expires_at: int | None, handing_back: bool = False
    ) -> dict[str, Any]:
        item: a.Item = {
            **record_key(stored.tenant),
            "status": a.s(status),
            "version": a.n(stored.version + 1),
            "record": a.as_json(record),
        }
        if expires_at is not None:
            item[wiring.TTL_ATTRIBUTE] = a.n(expires_at)
        if handing_back:
            item.update(_handing_back(stored.tenant))
        if stored.version == 0:
            condition = "attribute_not_exists(pk) OR #status = :deleted"
            names, values = {"#status": "status"}, {":deleted": a.s(DELETED)}
        else:
            condition = "#version = :version"
            names, values = {"#version": "version"}, {":version": a.n(stored.version)}
        return {
            "Item": item,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def register(self, tenant: str, created_at: str) -> bool:
        """An active record for a tenant that has none (a backfill: interlude.migrations); whether it had none."""
        item = {
            **record_key(tenant),
            "status": a.s(ACTIVE),
            "version": a.n(1),
            "record": a.as_json({"createdAt": created_at}),
        }
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def lost_race(self, exc: Exception) -> bool:
        """Whether a transaction carrying `put_item` failed on the record's condition (not on another item's)."""
        # Imported here: the workers that only read statuses and meter usage load no transaction writer.
        from interlude.store.transactions import LostRace

        return isinstance(exc, LostRace) and any(label == REGISTRY_PK for label, _ in exc.reasons)

    def forget(self, tenant: str) -> None:
        self.client.delete_item(TableName=self.table, Key=record_key(tenant))

    # -- work held while suspended ------------------------------------------------------------------------

    def hold(self, tenant: str, destination: str, work_id: str, body: dict[str, Any], at: str) -> bool:
        """Keep `body` for `destination` while the tenant is suspended; False when it is not (the condition is checked
        in the same transaction, so nothing is held after a resume began handing the held work back)."""
        item = {
            "pk": a.s(held_pk(tenant)),
            "sk": a.s(f"{destination}#{work_id}"),
            "destination": a.s(destination),
            "body": a.as_json(body),
            "heldAt": a.s(at),
            # The same work held again (handed back, then taken while the tenant is suspended again) is put under the
            # same key: a resume deletes the holding it handed back by this mark, never a later one (`release`).
            HOLDING: a.s(token_hex(8)),
        }
        still_suspended = {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": record_key(tenant),
                "ConditionExpression": "#status = :suspended",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {":suspended": a.s(SUSPENDED)},
            }
        }
        return self._unless_first_fails([still_suspended, {"Put": {"TableName": self.table, "Item": item}}])

    def held(self, tenant: str, limit: int) -> list[Held]:
        got = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": a.s(held_pk(tenant))},
            ConsistentRead=True,
            Limit=limit,
        )
        return [_held(item) for item in got.get("Items") or []]

    def release(self, tenant: str, held: Held) -> bool:
        """Delete `held`, the holding handed back; False (nothing deleted) when that holding is gone: deleted by another
        hand back, or the work held again since (its new holding stays, for the next resume)."""
        values = {":at": a.s(held.held_at)}
        if held.holding is None:
            # Held by 0.11.0, which marks none: a holding made since carries a mark, or (0.11.0's) a later heldAt.
            condition = f"heldAt = :at AND attribute_not_exists({HOLDING})"
        else:
            condition = f"heldAt = :at AND {HOLDING} = :holding"
            values[":holding"] = a.s(held.holding)
        deleted = conditionally(
            self.client.delete_item,
            TableName=self.table,
            Key=a.key(held_pk(tenant), held.sk),
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
        return deleted is not None

    # -- resumes with held work still to hand back ------------------------------------------------------------

    def handing_back(self) -> list[Stored]:
        """The records listed as having held work to hand back (the index is read eventually consistent: a record
        changed since is found out by the conditional writes below)."""
        index = wiring.INBOX_INDEX
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            IndexName=index.name,
            KeyConditionExpression="#gpk = :gpk",
            ExpressionAttributeNames={"#gpk": index.partition_key},
            ExpressionAttributeValues={":gpk": a.s(HANDING_BACK)},
        )
        return [_stored(item) for page in pages for item in page.get("Items") or []]

    def lease_hand_back(self, stored: Stored, now: float, until: float, taking_over: bool = False) -> bool:
        """Hold the hand back of `stored`'s held work until `until` (a resume call at it, or the sweep); False when the
        record changed since it was read (suspended again, or its work all handed back) or, `taking_over`, while
        another holds it."""
        condition = "#version = :version AND attribute_exists(#gpk)"
        values = {":version": a.n(stored.version), ":until": a.n(until)}
        if taking_over:
            condition += f" AND (attribute_not_exists({HAND_BACK_UNTIL}) OR {HAND_BACK_UNTIL} < :now)"
            values[":now"] = a.n(now)
        return self._update_record(stored, f"SET {HAND_BACK_UNTIL} = :until", condition, values)

    def unchanged(self, stored: Stored) -> bool:
        """Whether the record is still the version read (a consistent read of it: one read unit)."""
        got = self.client.get_item(
            TableName=self.table,
            Key=record_key(stored.tenant),
            ConsistentRead=True,
            ProjectionExpression="#version",
            ExpressionAttributeNames={"#version": "version"},
        )
        item = got.get("Item")
        return item is not None and int(item["version"]["N"]) == stored.version

    def release_hand_back(self, stored: Stored) -> bool:
        """Let the hand back go (a sweep out of time): the next takes it over at once."""
        condition = "#version = :version AND attribute_exists(#gpk)"
        return self._update_record(stored, f"REMOVE {HAND_BACK_UNTIL}", condition, {":version": a.n(stored.version)})

    def handed_back(self, stored: Stored) -> bool:
        """No longer listed: its held work is all handed back (False: the record changed since it was read)."""
        index = wiring.INBOX_INDEX
        return self._update_record(
            stored,
            f"REMOVE #gpk, {index.sort_key}, {HAND_BACK_UNTIL}",
            "#version = :version",
            {":version": a.n(stored.version)},
        )

    def list_handing_back(self, stored: Stored) -> bool:
        """List an active tenant's record as having held work to hand back (work a resume left held, found by the
        daily sweep); False when it is no longer the record read, or is listed already."""
        condition = "#version = :version AND #status = :active AND attribute_not_exists(#gpk)"
        sets = ", ".join(f"{name} = :{name}" for name in _handing_back(stored.tenant))
        values = {":version": a.n(stored.version), ":active": a.s(ACTIVE)}
        values.update({f":{name}": value for name, value in _handing_back(stored.tenant).items()})
        return self._update_record(stored, f"SET {sets}", condition, values)

    def _update_record(self, stored: Stored, update: str, condition: str, values: dict[str, Any]) -> bool:
        names = {"#version": "version", "#status": "status", "#gpk": wiring.INBOX_INDEX.partition_key}
        # Only the names the expressions use: DynamoDB refuses one they do not.
        return (
            conditionally(
                self.client.update_item,
                TableName=self.table,
                Key=record_key(stored.tenant),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={name: value for name, value in names.items() if name in update + condition},
                ExpressionAttributeValues=values,
            )
            is not None
        )

    # -- usage ------------------------------------------------------------------------------------------

    def meter(self, tenant: str, month: str, member: str, counts: dict[str, int]) -> None:
        """Add `counts` (of MEASURES) to the tenant's month, on the part `member` belongs to."""
        counted = {name: value for name, value in counts.items() if value}
        if not counted:
            return
        self.client.update_item(
            TableName=self.table,
            Key=usage_key(tenant, usage_part(member), month),
            UpdateExpression="ADD " + ", ".join(f"#{name} :{name}" for name in counted),
            ExpressionAttributeNames={f"#{name}": name for name in counted},
            ExpressionAttributeValues={f":{name}": a.n(value) for name, value in counted.items()},
        )

    def _unless_first_fails(self, items: list[dict[str, Any]]) -> bool:
        """Write `items` in one transaction; False (nothing written) when the first one's condition does not hold."""
        try:
            self.client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if a.first_condition_failed(exc):
                return False
            raise
        return True

    def usage(self, tenants: list[str], month: str) -> dict[str, Usage]:
        """Each tenant's usage document of `month`: the closed one when the month was closed (`close_month`), else the
        sum so far of its usage parts and of what its open-runs counter items billed for the month (every measure, 0
        where nothing was counted)."""
        return {tenant: found.usage for tenant, found in self._month(tenants, month).items()}

    def _month(self, tenants: list[str], month: str) -> "dict[str, _Month]":
        found = {tenant: _Month(month) for tenant in tenants}
        keys = [
            key
            for tenant in tenants
            for key in (
                closed_usage_key(tenant, month),
                *(usage_key(tenant, p, month) for p in range(USAGE_PARTS)),
                *(counters.usage_key(tenant, shard) for shard in range(counters.MAX_SHARDS)),
            )
        ]
        for item in self._items(keys):
            found[tenant_of_pk(item["pk"]["S"])].add(item)
        return found

    def billed_months(self, tenant: str) -> set[str]:
        """The months the tenant's open-runs counter items still hold billed measures of (a closed month's are
        removed when it is closed)."""
        return {month for item in self._counter_items(tenant) for month in billing.billed_months(item)}

    def _counter_items(self, tenant: str) -> Iterator[a.Item]:
        return self._items([counters.usage_key(tenant, shard) for shard in range(counters.MAX_SHARDS)])

    def _items(self, keys: list[a.Item]) -> Iterator[a.Item]:
        return batch_get(self.client, self.table, keys)

    def close_month(self, tenant: str, usage: Usage, at: str) -> Usage:
        """Store the month's usage as its one document, closed (never changed after), and remove its parts and the
        month's attributes of the counter items; the document already closed when another reader closed it first."""
        item = {**closed_usage_key(tenant, usage.month), "closedAt": a.s(at)}
        item.update({name: a.n(value) for name, value in usage.counts.items()})
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            closed = self.usage([tenant], usage.month)[tenant]
        else:
            closed = Usage(usage.month, usage.counts, at)
        # Done again after another reader's close too: one stopped between its document and this clean-up leaves
        # parts and attributes the document already sums, which would otherwise stay on the counter items for good.
        self.delete([usage_key(tenant, part, usage.month) for part in range(USAGE_PARTS)])
        self._unbill(tenant, usage.month)
        return closed

    def _unbill(self, tenant: str, month: str) -> None:
        """Remove `month`'s attributes from the counter items that hold some (each its own UpdateItem, on condition the
        item is still there: a tenant's deletion may be removing it)."""
        names = [billing.month_attribute(name, month) for name in billing.RUN_MEASURES]
        for item in self._counter_items(tenant):
            if month not in billing.billed_months(item):
                continue
            try:
                self.client.update_item(
                    TableName=self.table,
                    Key=a.key(item["pk"]["S"], counters.USAGE_SK),
                    UpdateExpression="REMOVE " + ", ".join(f"#m{i}" for i in range(len(names))),
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeNames={f"#m{i}": name for i, name in enumerate(names)},
                )
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise

    # -- a deletion's pages ----------------------------------------------------------------------------

    def scan_page(
        self, tenant: str, position: a.Item | None, limit: int, where: str = FIRST
    ) -> tuple[list[a.Item], int, a.Item | None]:
        """The keys of the tenant's items in one page of a whole-table Scan (consistent), after `position`: every item
        under `T#{tenant}` (its runs' followers items among them), the tenant's API keys and live connections (each
        keyed by its own id, naming its tenant) and its runs' due items (store/due_index.py: in the deployment's
        partitions, named by their sort key); (keys, items the page read, where the next page starts). `where`: the
        table scanned (store/layout.py)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_named(where),
            "FilterExpression": "pk = :bare OR begins_with(pk, :own) OR (begins_with(pk, :keys) AND sk = :key "
            "AND #tenant = :tenant) OR (begins_with(pk, :live) AND sk = :conn AND #tenant = :tenant) "
            "OR (begins_with(pk, :due) AND begins_with(sk, :owndue))",
            "ExpressionAttributeNames": {"#tenant": "tenant"},
            "ExpressionAttributeValues": {
                ":bare": a.s(f"T#{tenant}"),
                ":own": a.s(f"T#{tenant}#"),
                ":due": a.s(DUE_PK_PREFIX),
                ":owndue": a.s(f"{tenant}#"),
                ":keys": a.s(API_KEY_PK_PREFIX),
                ":key": a.s(API_KEY_SK),
                ":live": a.s(LIVE_CONNECTION_PK_PREFIX),
                ":conn": a.s(LIVE_CONNECTION_SK),
                ":tenant": a.s(tenant),
            },
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
            "Limit": limit,
        }
        if position is not None:
            kwargs["ExclusiveStartKey"] = position
        got = self.client.scan(**kwargs)
        return list(got.get("Items") or []), int(got.get("ScannedCount", 0)), got.get("LastEvaluatedKey")

    def delete(self, keys: list[a.Item], where: str = FIRST) -> None:
        for start in range(0, len(keys), BATCH_WRITE_MAX):
            pending: dict[str, Any] = {
                self.table_named(where): [{"DeleteRequest": {"Key": k}} for k in keys[start : start + BATCH_WRITE_MAX]]
            }
            # Throttled past its retries: Unavailable, and the deletion's turn goes again from its queue.
            batch_write_all(self.client, pending)


class _Month:
    """What one tenant's items hold of a month, as they are read: the closed document, or the sums of the usage parts
    and of the counter items' billed attributes."""

    def __init__(self, month: str) -> None:
        self.month = month
        self.counts = dict.fromkeys(MEASURES, 0)
        self.closed: Usage | None = None

    def add(self, item: a.Item) -> None:
        numbers = {name: int(value["N"]) for name, value in item.items() if "N" in value}
        if item["sk"]["S"] == counters.USAGE_SK:
            counts = billing.of_month(numbers, self.month)
        else:
            counts = {name: numbers.get(name, 0) for name in MEASURES}
            if "closedAt" in item:
                self.closed = Usage(self.month, counts, item["closedAt"]["S"])
                return
        for name, value in counts.items():
            self.counts[name] += value

    @property
    def usage(self) -> Usage:
        return self.closed or Usage(self.month, self.counts, None)


def _stored(item: a.Item) -> Stored:
    return Stored(
        tenant=item["sk"]["S"],
        status=item["status"]["S"],
        version=int(item["version"]["N"]),
        record=a.unpacked(item["record"]) if "record" in item else {},
        handing_back=item.get(wiring.INBOX_INDEX.partition_key) == a.s(HANDING_BACK),
    )


def _held(item: a.Item) -> Held:
    holding = item.get(HOLDING)
    body = a.unpacked(item["body"])
    return Held(item["sk"]["S"], item["destination"]["S"], body, item["heldAt"]["S"], holding["S"] if holding else None)


def _handing_back(tenant: str) -> a.Item:
    """The attributes that list a record on the inbox index among those with held work to hand back."""
    index = wiring.INBOX_INDEX
    return {index.partition_key: a.s(HANDING_BACK), index.sort_key: a.s(tenant)}
