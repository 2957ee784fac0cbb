"""Following runs live (wiring.LIVE_API, ADR 0143): one item per open WebSocket connection and one per run it follows.

A connection's item (`LIVE#{connectionId}`, CONN) names its tenant, the key it connected with and the runs it
follows; it is listed per tenant on the inbox index, so the tenant's open connections are counted by one Query. A
run's followers item (`T#{tenant}#FOLLOW#{run}`, FOLLOWERS) maps each connection that follows the run to its key:
the outbox reads it in the BatchGetItem that reads each batch's run heads (store/stream.py), so a batch of a run
nobody follows costs no call of its own, and a subscription is added by one conditional write that holds the run's
limit of followers. Both expire with the connections (API Gateway closes every connection after two hours), so an
item whose $disconnect never came leaves by TTL and is not counted after it expires.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import (
    FOLLOWERS_SK,
    LIVE_CONNECTION_PK_PREFIX,
    LIVE_CONNECTION_SK,
    followers_pk,
    live_connection_pk,
    live_index_pk,
)
from interlude.store.table import Table, batch_get


class LiveConnection(NamedTuple):
    connection_id: str
    tenant: str
    key_id: str
    # Epoch seconds when its items expire.
    expires: int
    runs: frozenset[str]


class Follower(NamedTuple):
    connection_id: str
    # The key its connection opened with: each batch is sent only while that key is valid (app/live.py).
    key_id: str


class LiveStore(Table):
    def open_connection(self, tenant: str, connection_id: str, key_id: str, connected_at: str, expires: int) -> None:
        item = {
            **a.key(live_connection_pk(connection_id), LIVE_CONNECTION_SK),
            wiring.INBOX_INDEX.partition_key: a.s(live_index_pk(tenant)),
            wiring.INBOX_INDEX.sort_key: a.s(f"{connected_at}#{connection_id}"),
            "tenant": a.s(tenant),
            "keyId": a.s(key_id),
            wiring.TTL_ATTRIBUTE: a.n(expires),
        }
        self.client.put_item(TableName=self.table, Item=item)

    def live_connection(self, connection_id: str) -> LiveConnection | None:
        got = self.client.get_item(
            TableName=self.table, Key=a.key(live_connection_pk(connection_id), LIVE_CONNECTION_SK), ConsistentRead=True
        )
        item = got.get("Item")
        return _connection(connection_id, item) if item else None

    def close_connection(self, connection_id: str) -> None:
        """The connection's item and its followers' items deleted (each run's it names)."""
        got = self.client.delete_item(
            TableName=self.table,
            Key=a.key(live_connection_pk(connection_id), LIVE_CONNECTION_SK),
            ReturnValues="ALL_OLD",
        )
        old = got.get("Attributes")
        if old:
            for run_id in _connection(connection_id, old).runs:
                self.drop_follower(run_id, connection_id)

    def open_connections(self, tenant: str, now: int) -> int:
        """The tenant's connections not yet expired (an item past its ttl may wait for TTL's deletion)."""
        return self._count(
            IndexName=wiring.INBOX_INDEX.name,
            KeyConditionExpression="#p = :p",
            ExpressionAttributeNames={"#p": wiring.INBOX_INDEX.partition_key, "#t": wiring.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":p": a.s(live_index_pk(tenant)), ":now": a.n(now)},
        )

    def recorded_connections(self, connection_ids: list[str], now: int) -> set[str]:
        """Those of the connections whose items are there and not expired (one BatchGetItem for a run's followers)."""
        keys = [a.key(live_connection_pk(connection_id), LIVE_CONNECTION_SK) for connection_id in connection_ids]
        read = {"ProjectionExpression": "pk, #t", "ExpressionAttributeNames": {"#t": wiring.TTL_ATTRIBUTE}}
        return {
            item["pk"]["S"].removeprefix(LIVE_CONNECTION_PK_PREFIX)
            for item in batch_get(self.client, self.table, keys, ConsistentRead=True, **read)
            if int(item[wiring.TTL_ATTRIBUTE]["N"]) > now
        }

    def _count(self, **query: Any) -> int:
        count = 0
        for page in self.client.get_paginator("query").paginate(
            TableName=self.table, Select="COUNT", FilterExpression="#t > :now", **query
        ):
            count += int(page.get("Count") or 0)
        return count

    def follow(
        self, connection: LiveConnection, run_id: str, runs_limit: int, followers_limit: int, expires: int
    ) -> str | None:
        """The connection follows the run from now on: None; else the limit that refused it, `runFollowers` (the run
        has `followers_limit` followers) or `runsPerConnection` (the connection follows `runs_limit` runs, or is gone).
        `expires`: the latest any follower's connection may live (the followers item's ttl)."""
        if not self._add_follower(connection, run_id, followers_limit, expires):
            return "runFollowers"
        try:
            self.client.update_item(
                TableName=self.table,
                Key=a.key(live_connection_pk(connection.connection_id), LIVE_CONNECTION_SK),
                UpdateExpression="ADD runs :r",
                ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(runs) OR size(runs) < :n "
                "OR contains(runs, :run))",
                ExpressionAttributeValues={":r": {"SS": [run_id]}, ":run": a.s(run_id), ":n": a.n(runs_limit)},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            self.drop_follower(run_id, connection.connection_id)
            return "runsPerConnection"
        return None

    def _add_follower(self, connection: LiveConnection, run_id: str, limit: int, expires: int) -> bool:
        """One conditional write while the run has followers (its item), the limit in its condition; the run's first
        follower puts the item. False: the run has `limit` followers."""
        key = a.key(followers_pk(run_id), FOLLOWERS_SK)
        for _ in range(2):  # a first follower put meanwhile by another subscription: join it
            try:
                self.client.update_item(
                    TableName=self.table,
                    Key=key,
                    UpdateExpression="SET #f.#c = :k, #t = :e",
                    ConditionExpression="attribute_exists(#f) AND (size(#f) < :n OR attribute_exists(#f.#c))",
                    ExpressionAttributeNames={"#f": FOLLOWERS, "#c": connection.connection_id, "#t": wiring.TTL_ATTRIBUTE},
                    ExpressionAttributeValues={":k": a.s(connection.key_id), ":e": a.n(expires), ":n": a.n(limit)},
                )
                return True
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
            item = {**key, FOLLOWERS: {"M": {connection.connection_id: a.s(connection.key_id)}}, wiring.TTL_ATTRIBUTE: a.n(expires)}
            try:
                self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
                return True
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
            # the item is there: the update found the run's followers full, or another subscription put it meanwhile
        return False

    def unfollow(self, connection_id: str, run_id: str) -> None:
        self.drop_follower(run_id, connection_id)
        try:
            self.client.update_item(
                TableName=self.table,
                Key=a.key(live_connection_pk(connection_id), LIVE_CONNECTION_SK),
                UpdateExpression="DELETE runs :r",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":r": {"SS": [run_id]}},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            # the connection closed meanwhile: nothing lists the run

    def followers(self, run_id: str) -> list[Follower]:
        """The connections that follow the run (strongly consistent: what a batch read with its run head finds too)."""
        got = self.client.get_item(
            TableName=self.table, Key=a.key(followers_pk(run_id), FOLLOWERS_SK), ConsistentRead=True
        )
        return followers_of(got.get("Item"))

    def drop_follower(self, run_id: str, connection_id: str) -> None:
        try:
            self.client.update_item(
                TableName=self.table,
                Key=a.key(followers_pk(run_id), FOLLOWERS_SK),
                UpdateExpression="REMOVE #f.#c",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#f": FOLLOWERS, "#c": connection_id},
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            # the run has no followers item (expired, or never followed)


FOLLOWERS = "followers"


def followers_key(run_id: str) -> a.Item:
    return a.key(followers_pk(run_id), FOLLOWERS_SK)


def followers_of(item: a.Item | None) -> list[Follower]:
    """The followers a run's followers item names (None: the run has none)."""
    held = ((item or {}).get(FOLLOWERS) or {}).get("M") or {}
    return [Follower(connection_id, key["S"]) for connection_id, key in sorted(held.items())]


def _connection(connection_id: str, item: dict[str, Any]) -> LiveConnection:
    return LiveConnection(
        connection_id=connection_id,
        tenant=item["tenant"]["S"],
        key_id=item["keyId"]["S"],
        expires=int(item[wiring.TTL_ATTRIBUTE]["N"]),
        runs=frozenset((item.get("runs") or {}).get("SS") or ()),
    )
