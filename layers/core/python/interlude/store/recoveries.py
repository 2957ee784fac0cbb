"""Recoveries (app.replay): a bulk replay of what was dead-lettered, one job item per scope, taken in turns.

  webhook deliveries   T#{tenant}#WH#{opaque}   RECOVERY                 a subscription's dead letters
  callback deliveries  T#{tenant}#R#{run}       RECOVERY#deliveries      a run's dead callback notices
  notifications        T#{tenant}#R#{run}       RECOVERY#notifications   a run's dead notifications

The item: `record` (JSON: kind, scope, window, counts, status running|completed, times) and, beside it, `turn` (turns
taken), `cursor` (where the next turn starts), `updatedAt` (epoch seconds) and `ttl`. One job per scope at a time: a
new one replaces a completed job, or a running one whose turns stopped (none for STALE_S: the request taking them
was cut off). A turn records its progress conditionally on the turn it took, so a turn handed out
twice records once, and the job goes on from its last record after a crash (each replay in a turn is conditional on
its unit still being dead, so a turn taken again re-sends nothing). Also the pages of dead items of a run's ledgers
(its callback notices, its notifications) in sort-key order, and their count.
"""

from __future__ import annotations

import json
from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import FIRST, SECOND
from interlude.store.table import conditionally

RECOVERY_SK = "RECOVERY"
# A running job none of whose turns recorded anything for this long may be replaced by a new one: past the API's
# 29 seconds, so its request is over.
STALE_S = 60
# A job is kept this long after it starts (its answer stays readable), then expires.
KEPT_S = 14 * 24 * 3600


def count_up_to(client: Any, query: dict[str, Any], cap: int) -> int:
    """The items `query` matches, counted page by page until past `cap` (enough to refuse over it)."""
    query = {**query, "Select": "COUNT"}
    counted = 0
    while counted <= cap:
        got = client.query(**query)
        counted += int(got.get("Count", 0))
        if "LastEvaluatedKey" not in got:
            break
        query["ExclusiveStartKey"] = got["LastEvaluatedKey"]
    return counted


def recovery_key(pk: str, family: str | None) -> a.Item:
    return a.key(pk, RECOVERY_SK if family is None else f"{RECOVERY_SK}#{family}")


class RecoveryStore:
    def __init__(self, table: str, client: Any, entries_table: str) -> None:
        self.table = table
        self.client = client
        self.tables = {FIRST: table, SECOND: entries_table}

    def get(self, key: a.Item) -> tuple[dict[str, Any], int, str | None] | None:
        """(record, turns taken, cursor) of the scope's job, or None."""
        item = self.client.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")
        if item is None:
            return None
        return json.loads(item["record"]["S"]), int(item["turn"]["N"]), item["cursor"]["S"] if "cursor" in item else None

    def start(self, key: a.Item, record: dict[str, Any], now: float) -> bool:
        """Put a new job, unless one of the scope runs (and recorded a turn within STALE_S): False then."""
        item = {
            **key,
            "record": a.as_json(record),
            "turn": a.n(0),
            "running": {"BOOL": record["status"] == "running"},
            "updatedAt": a.n(int(now)),
            wiring.TTL_ATTRIBUTE: a.n(int(now) + KEPT_S),
        }
        return conditionally(
            self.client.put_item,
            TableName=self.table,
            Item=item,
            ConditionExpression="attribute_not_exists(sk) OR #running = :no OR updatedAt < :stale",
            ExpressionAttributeNames={"#running": "running"},
            ExpressionAttributeValues={":no": {"BOOL": False}, ":stale": a.n(int(now) - STALE_S)},
        ) is not None

    def record_turn(self, key: a.Item, turn: int, record: dict[str, Any], cursor: str | None, now: float) -> bool:
        """Turn `turn` (the turns taken before it) recorded with the job's record and the next turn's start; False
        when another copy of the turn recorded it first."""
        sets = "SET #record = :record, turn = :next, updatedAt = :now, #running = :running"
        values: dict[str, Any] = {
            ":record": a.as_json(record),
            ":next": a.n(turn + 1),
            ":now": a.n(int(now)),
            ":running": {"BOOL": record["status"] == "running"},
            ":turn": a.n(turn),
        }
        if cursor is None:
            expression = sets + " REMOVE #cursor"
        else:
            expression = sets + ", #cursor = :cursor"
            values[":cursor"] = a.s(cursor)
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=key,
            UpdateExpression=expression,
            ConditionExpression="turn = :turn",
            ExpressionAttributeNames={"#record": "record", "#running": "running", "#cursor": "cursor"},
            ExpressionAttributeValues=values,
        ) is not None

    # -- a run's dead ledger items --------------------------------------------------------------------------------

    def dead_page(
        self, pk: str, prefix: str, dead: str, after_sk: str | None, limit: int, tables: tuple[str, ...] = (FIRST,)
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Ledger items under `prefix` in `pk` whose status is `dead`, in sort-key order, from after `after_sk`,
        reading at most `limit` items: the dead ones (plain) and where the next page starts (None: none left).
        `tables`: where the ledger's items may be (store/layout.py), read one after the other; `after_sk` names a
        key of a later one after its mark and "@"."""
        at = next((i for i, where in enumerate(tables) if after_sk is not None and after_sk.startswith(f"{where}@")), 0)
        after = after_sk.split("@", 1)[1] or None if at and after_sk is not None else after_sk
        query = {**self._dead(pk, prefix, dead, tables[at]), "Limit": limit, "ConsistentRead": True}
        if after is not None:
            query["ExclusiveStartKey"] = a.key(pk, after)
        got = self.client.query(**query)
        last = got.get("LastEvaluatedKey")
        mark = f"{tables[at]}@" if at else ""
        if last:
            return [a.plain(i) for i in got.get("Items") or []], mark + last[wiring.SORT_KEY]["S"]
        following = f"{tables[at + 1]}@" if at + 1 < len(tables) else None
        return [a.plain(i) for i in got.get("Items") or []], following

    def count_dead(self, pk: str, prefix: str, dead: str, cap: int, tables: tuple[str, ...] = (FIRST,)) -> int:
        """How many ledger items under `prefix` are dead (in `tables`), counted up to `cap` + 1."""
        counted = 0
        for where in tables:
            counted += count_up_to(self.client, self._dead(pk, prefix, dead, where), cap - counted)
            if counted > cap:
                break
        return counted

    def _dead(self, pk: str, prefix: str, dead: str, where: str = FIRST) -> dict[str, Any]:
        return {
            "TableName": self.tables[where],
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "FilterExpression": "#status = :dead",
            "ExpressionAttributeNames": {"#status": "status"},
            "ExpressionAttributeValues": {":pk": a.s(pk), ":prefix": a.s(prefix), ":dead": a.s(dead)},
        }
