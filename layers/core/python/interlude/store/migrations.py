"""The migrations' side of the table (interlude.migrations): their checkpoints, the pages they scan, what is missing.

  checkpoint  MIGRATION   {id}   state running|done, position (where its scan goes on: the last page's
                                 LastEvaluatedKey, packed), scanned and written so far, owner and leaseUntil (the
                                 runner that holds it now), startedAt, finishedAt, release (the last to run it)

One runner at a time holds a migration: it claims the checkpoint (a conditional update: the lease is free, lapsed
or already its own), renews the lease with each page it records, gives it up when it stops out of time (the next turn
goes on at once), and loses it, writing nothing more, when another runner took a lapsed lease over; a runner that
died keeps it until it lapses. A page is recorded after its writes, so a runner stopped between the two repeats
that page (its writes are idempotent), never skips one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.domain.budgets import TRANSACT_MAX_ITEMS
from interlude.store import attributes as a
from interlude.store.checkpoints import DONE, MIGRATION_PK, RUNNING
from interlude.store.inbox import ENTRIES_TABLE, InboxIndex
from interlude.store.layout import FIRST, RUN_SK, SECOND, interrupt_sk
from interlude.store.table import batch_get, conditionally

# How long a claim holds without a page recorded (a page's scan and writes take seconds).
LEASE_S = 120


class Scan(NamedTuple):
    """The items a migration reads: a Scan's filter (and projection) over the whole table."""

    filter: str
    # A string's value, or a number's (compared as a number).
    values: Mapping[str, str | int]
    names: dict[str, str] = {}
    projection: str | None = None
    # The table scanned (store/layout.py): the first, or the second's moved families.
    table: str = FIRST


# Every run head with its state and version: the scan of the migrations that rewrite what a run's state implies, on
# condition the run has not moved since (0006, 0009).
RUN_HEADS = Scan("sk = :run", {":run": RUN_SK}, {"#state": "state", "#version": "version"}, "pk, sk, #state, #version")


class LeaseLost(Exception):
    """Another runner took the migration over (this one's lease lapsed): stop, writing nothing more."""


class MigrationStore:
    def __init__(self, table: str, client: Any, entries_table: str) -> None:
        self.table = table
        self.client = client
        self.entries_table = entries_table

    def checkpoints(self) -> dict[str, dict[str, Any]]:
        """Every migration's checkpoint, by id (a migration never started has none)."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": a.s(MIGRATION_PK)},
            ConsistentRead=True,
        )
        return {item[wiring.SORT_KEY]["S"]: a.plain(item) for page in pages for item in page.get("Items") or []}

    def claim(self, migration_id: str, owner: str, now: float, release: str) -> dict[str, Any] | None:
        """Hold `migration_id` for `owner` (started now if never before); its checkpoint, or None when it is done or
        another runner holds it."""
        got = conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(MIGRATION_PK, migration_id),
            UpdateExpression="SET #owner = :me, leaseUntil = :until, #release = :release, "
            "#state = if_not_exists(#state, :running), startedAt = if_not_exists(startedAt, :now), "
            "scanned = if_not_exists(scanned, :zero), written = if_not_exists(written, :zero)",
            ConditionExpression="attribute_not_exists(pk) OR (#state <> :done AND "
            "(attribute_not_exists(leaseUntil) OR leaseUntil < :now OR #owner = :me))",
            ExpressionAttributeNames={"#owner": "owner", "#state": "state", "#release": "release"},
            ExpressionAttributeValues={
                ":me": a.s(owner),
                ":until": a.n(now + LEASE_S),
                ":release": a.s(release),
                ":running": a.s(RUNNING),
                ":done": a.s(DONE),
                ":now": a.n(now),
                ":zero": a.n(0),
            },
            ReturnValues="ALL_NEW",
        )
        return None if got is None else a.plain(got["Attributes"])

    def start_over(self, migration_id: str, at: str) -> bool:
        """A migration done starts a new pass from the table's start (a recurring one: the retention sweep), its
        counts from zero; False when it is not done (a pass is under way, or none began: the claim starts it)."""
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(MIGRATION_PK, migration_id),
            UpdateExpression="SET #state = :running, startedAt = :at, scanned = :zero, written = :zero "
            "REMOVE finishedAt, #position",
            ConditionExpression="#state = :done",
            ExpressionAttributeNames={"#state": "state", "#position": "position"},
            ExpressionAttributeValues={":running": a.s(RUNNING), ":done": a.s(DONE), ":at": a.s(at), ":zero": a.n(0)},
        ) is not None

    def record_page(
        self, migration_id: str, owner: str, position: a.Item | None, scanned: int, written: int, now: float
    ) -> None:
        """A page done: where the scan goes on (None: at its end), what it counted, and the lease renewed."""
        names = {"#owner": "owner"}
        values: dict[str, Any] = {
            ":me": a.s(owner),
            ":until": a.n(now + LEASE_S),
            ":scanned": a.n(scanned),
            ":written": a.n(written),
        }
        update = "SET leaseUntil = :until"
        if position is not None:
            update += ", #position = :position"
            values[":position"] = a.packed(position)
            names["#position"] = "position"
        self._update(
            migration_id, owner, f"{update} ADD scanned :scanned, written :written", names, values
        )

    def release(self, migration_id: str, owner: str) -> None:
        """Give the lease up (a turn out of time, stopped after recording its last page): the next runner claims the
        migration at once, from its checkpoint."""
        self._update(migration_id, owner, "REMOVE leaseUntil, #owner", {"#owner": "owner"}, {":me": a.s(owner)})

    def finish(self, migration_id: str, owner: str, at: str) -> None:
        self._update(
            migration_id,
            owner,
            "SET #state = :done, finishedAt = :at REMOVE #position, leaseUntil, #owner",
            {"#owner": "owner", "#state": "state", "#position": "position"},
            {":me": a.s(owner), ":done": a.s(DONE), ":at": a.s(at)},
        )

    def _update(
        self, migration_id: str, owner: str, expression: str, names: dict[str, str], values: dict[str, Any]
    ) -> None:
        written = conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(MIGRATION_PK, migration_id),
            UpdateExpression=expression,
            ConditionExpression="#owner = :me",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )
        if written is None:
            raise LeaseLost(migration_id)

    def scan_page(self, scan: Scan, position: a.Item | None, limit: int) -> tuple[list[a.Item], int, a.Item | None]:
        """One page of the items `scan` selects, after `position`: (items, how many the page read, where the next
        page starts: None at the table's end). `limit` bounds the items read, whatever the filter keeps."""
        kwargs: dict[str, Any] = {
            "TableName": self.entries_table if scan.table == SECOND else self.table,
            "FilterExpression": scan.filter,
            "ExpressionAttributeValues": {
                name: a.n(value) if isinstance(value, int) else a.s(value) for name, value in scan.values.items()
            },
            "Limit": limit,
        }
        if scan.names:
            kwargs["ExpressionAttributeNames"] = scan.names
        if scan.projection:
            kwargs["ProjectionExpression"] = scan.projection
        if position is not None:
            kwargs["ExclusiveStartKey"] = position
        got = self.client.scan(**kwargs)
        return list(got.get("Items") or []), int(got.get("ScannedCount", 0)), got.get("LastEvaluatedKey")

    def name_run(self, pk: str, version: int, state: bytes) -> bool:
        """A run head's state, now holding its workflow's name (migration 0006), on condition that the run has not
        moved since it was read (False: a transition wrote it first, from the state it read, without the name)."""
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(pk, RUN_SK),
            UpdateExpression="SET #state = :state",
            ConditionExpression="#version = :version",
            ExpressionAttributeNames={"#state": "state", "#version": "version"},
            ExpressionAttributeValues={":state": a.packed_json(state), ":version": a.n(version)},
        ) is not None

    def put_missing(self, items: list[a.Item]) -> int:
        """Put those of `items` whose key names no item yet (an index entry is written once: a backfill that runs
        again, or meets an entry its own writer made, writes nothing); how many it put."""
        found = self._stored(items, "pk, sk")
        put = [item for item in items if _key_of(item) not in found]
        InboxIndex(self.table, self.client, self.entries_table).batch_write([{"PutRequest": {"Item": item}} for item in put])
        return len(put)

    def differing(self, items: list[a.Item], fields: tuple[str, ...]) -> list[a.Item]:
        """Those of `items` whose key names no item yet, or one that differs from it on one of `fields` (absent in
        one and not the other included)."""
        names = {f"#f{i}": name for i, name in enumerate(fields)}
        found = self._stored(items, ", ".join(["pk", "sk", *names]), names)
        return [i for i in items if (got := found.get(_key_of(i))) is None or any(got.get(f) != i.get(f) for f in fields)]

    def put_while_unmoved(self, pk: str, version: int, items: list[a.Item]) -> bool:
        """Put `items` on condition that the run head at `pk` is still at `version` (False, nothing put: a transition
        wrote it since, and what it wrote wins). One transaction per TRANSACT_MAX_ITEMS - 1 items, each checking."""
        check = {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": a.key(pk, RUN_SK),
                "ConditionExpression": "#version = :version",
                "ExpressionAttributeNames": {"#version": "version"},
                "ExpressionAttributeValues": {":version": a.n(version)},
            }
        }
        step = TRANSACT_MAX_ITEMS - 1
        for start in range(0, len(items), step):
            puts = [{"Put": {"TableName": self.table, "Item": item}} for item in items[start : start + step]]
            try:
                self.client.transact_write_items(TransactItems=[check, *puts])
            except ClientError as exc:
                if a.first_condition_failed(exc):
                    return False
                raise
        return True

    def heads(self, pks: list[str]) -> dict[str, a.Item]:
        """The run heads at `pks` as stored (their state not unpacked, their version), read strongly consistently
        (BatchGetItem), by partition key; a run that is gone is left out."""
        keys = [a.key(pk, RUN_SK) for pk in dict.fromkeys(pks)]
        return {i[wiring.PARTITION_KEY]["S"]: i for i in batch_get(self.client, self.table, keys, ConsistentRead=True)}

    def entries_at(self, keys: list[a.Item]) -> list[a.Item]:
        """The first table's items at `keys` that exist, whole and strongly consistent (a gate's inbox entries)."""
        return list(batch_get(self.client, self.table, keys, ConsistentRead=True))

    def move_entries(self, pk: str, version: int, state: bytes, interrupt_key: str, entries: list[a.Item]) -> bool:
        """Put a gate's inbox `entries` in the second table and mark it there, its run head's (`state`: the head's
        state holding the mark on the gate's open interrupt, at the next version) and its item's (`entriesTable`), in
        one transaction over both tables, on condition that the head is still at `version` (False, nothing written: a
        transition moved the run since, a claim's or a close's, from what it read). Entries past what the transaction
        holds besides the two updates are put before it, and taken back if it is refused."""
        head = {
            "Update": {
                "TableName": self.table,
                "Key": a.key(pk, RUN_SK),
                "UpdateExpression": "SET #state = :state, #version = :next",
                "ConditionExpression": "#version = :version",
                "ExpressionAttributeNames": {"#state": "state", "#version": "version"},
                "ExpressionAttributeValues": {":state": a.packed_json(state), ":version": a.n(version), ":next": a.n(version + 1)},
            }
        }
        item = {
            "Update": {
                "TableName": self.table,
                "Key": a.key(pk, interrupt_sk(interrupt_key)),
                "UpdateExpression": f"SET {ENTRIES_TABLE} = :second",
                "ConditionExpression": "attribute_exists(sk)",
                "ExpressionAttributeValues": {":second": a.s(SECOND)},
            }
        }
        room = TRANSACT_MAX_ITEMS - 2
        before, within = entries[room:], entries[:room]
        inbox = InboxIndex(self.table, self.client, self.entries_table)
        inbox.batch_write([{"PutRequest": {"Item": e}} for e in before], SECOND)
        puts = [{"Put": {"TableName": self.entries_table, "Item": e}} for e in within]
        try:
            self.client.transact_write_items(TransactItems=[head, item, *puts])
        except ClientError as exc:
            if not a.first_condition_failed(exc) and not a.only_transaction_conflicts(exc):
                raise
            inbox.delete_keys([a.key(*_key_of(e)) for e in before], SECOND)
            return False
        return True

    def _stored(
        self, items: list[a.Item], projection: str, names: dict[str, str] | None = None
    ) -> dict[tuple[str, str], a.Item]:
        """The stored items at `items`' keys (those that exist), by key, projected."""
        keys = [a.key(pk, sk) for pk, sk in dict.fromkeys(_key_of(i) for i in items)]
        read: dict[str, Any] = {"ProjectionExpression": projection}
        if names:
            read["ExpressionAttributeNames"] = names
        return {_key_of(item): item for item in batch_get(self.client, self.table, keys, **read)}


def _key_of(item: a.Item) -> tuple[str, str]:
    return item[wiring.PARTITION_KEY]["S"], item[wiring.SORT_KEY]["S"]
