"""Following runs live (wiring.LIVE_API, ADR 0143): one item per open WebSocket connection and one per run it follows.

A connection's item (`LIVE#{connectionId}`, CONN) names its tenant, the key it connected with and the runs it
follows; it is listed per tenant on the inbox index, so the tenant's open connections are counted by one Query. A
follower item (`T#{tenant}#FOLLOW#{run}`, {connectionId}) is what the outbox reads for each event batch of the run:
one Query of a partition that is empty unless someone follows the run. Both expire with the connection (API
Gateway closes every connection after two hours), so an item whose $disconnect never came leaves by TTL and is not
counted after it expires.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import (
    LIVE_CONNECTION_SK,
    followers_pk,
    live_connection_pk,
    live_index_pk,
)
from interlude.store.table import Table


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

    def follower_count(self, run_id: str, now: int) -> int:
        return self._count(
            KeyConditionExpression="pk = :p",
            ExpressionAttributeNames={"#t": wiring.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":p": a.s(followers_pk(run_id)), ":now": a.n(now)},
        )

    def _count(self, **query: Any) -> int:
        count = 0
        for page in self.client.get_paginator("query").paginate(
            TableName=self.table, Select="COUNT", FilterExpression="#t > :now", **query
        ):
            count += int(page.get("Count") or 0)
        return count

    def follow(self, connection: LiveConnection, run_id: str, runs_limit: int) -> bool:
        """The connection follows the run from now on; False when it follows `runs_limit` runs already (or is gone)."""
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
            return False
        item = {
            **a.key(followers_pk(run_id), connection.connection_id),
            "keyId": a.s(connection.key_id),
            wiring.TTL_ATTRIBUTE: a.n(connection.expires),
        }
        self.client.put_item(TableName=self.table, Item=item)
        return True

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
        """The connections that follow the run (eventually consistent: one that subscribed a moment ago may be missed
        here, and has the event from its replay instead: app/live.py). A follower without a key id ("": written before
        followers named it) is one no key holds: dropped by the next batch, its client subscribing again."""
        out: list[Follower] = []
        for page in self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": a.s(followers_pk(run_id))},
            ProjectionExpression="sk, keyId",
        ):
            out += [Follower(item["sk"]["S"], (item.get("keyId") or {}).get("S", "")) for item in page.get("Items") or ()]
        return out

    def drop_follower(self, run_id: str, connection_id: str) -> None:
        self.client.delete_item(TableName=self.table, Key=a.key(followers_pk(run_id), connection_id))


def _connection(connection_id: str, item: dict[str, Any]) -> LiveConnection:
    return LiveConnection(
        connection_id=connection_id,
        tenant=item["tenant"]["S"],
        key_id=item["keyId"]["S"],
        expires=int(item[wiring.TTL_ATTRIBUTE]["N"]),
        runs=frozenset((item.get("runs") or {}).get("SS") or ()),
    )
