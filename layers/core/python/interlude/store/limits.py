"""The counters behind per-tenant limits (rules in interlude/rules/limits.py; reasons in docs/adr/0017).

  request window  T#{tenant}#RATE[#{shard}]    W#{windowStart}   n: requests counted in that window; swept by TTL
  usage           T#{tenant}[#USAGE#{shard}]   USAGE             openRuns (per shard), workflowVersions (shard 0)

Both are write-sharded once a tenant's limit is high enough to make one item hot (docs/scale.md): a window over
RATE_PER_SHARD requests/s is split over ceil(limit / RATE_PER_SHARD) items, each request counted on a random one
against its share of the limit; an open-runs quota over OPEN_RUNS_PER_SHARD is split over limit //
OPEN_RUNS_PER_SHARD items, a run claiming on the one its id hashes to (recorded on the run, so it releases there).
At the default limits there is one item each, counted exactly. Shard 0 keeps the unsharded key.

Requests are counted by one conditional UpdateItem that refuses to count past the limit, so any number of Lambda
instances share one count; a warm instance counts them ahead, a lease of several at a time (app/limits.py).
The usage counters change only inside the transaction that creates or ends a run or stores a workflow version
(store/transitions.py, store/workflows.py), so they cannot drift from what they count: a claim is conditional on the quota, a release (a
run ending) never is, so a run can always end.
"""

from __future__ import annotations

import random
import zlib
from typing import Any

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.rules.limits import Window
from interlude.store import attributes as a

USAGE_SK = "USAGE"
OPEN_RUNS = "openRuns"
WORKFLOW_VERSIONS = "workflowVersions"


# One item takes at most 1,000 write units a second; these leave it half of that.
RATE_PER_SHARD = 500
OPEN_RUNS_PER_SHARD = 1000
MAX_SHARDS = 32


def rate_pk(tenant: str, shard: int = 0) -> str:
    return f"T#{tenant}#RATE" if shard == 0 else f"T#{tenant}#RATE#{shard}"


def usage_key(tenant: str, shard: int = 0) -> a.Item:
    return a.key(f"T#{tenant}" if shard == 0 else f"T#{tenant}#USAGE#{shard}", USAGE_SK)


def share(limit: int, shards: int, shard: int) -> int:
    """Shard `shard`'s part of `limit`: the parts add up to it exactly."""
    return limit // shards + (1 if shard < limit % shards else 0)


def rate_shards(limit: int) -> int:
    return max(1, min(MAX_SHARDS, -(-limit // RATE_PER_SHARD)))


def open_runs_shard(run_id: str, limit: int) -> tuple[int, int]:
    """(the usage shard a new run claims on, that shard's part of the open-runs limit)."""
    shards = max(1, min(MAX_SHARDS, limit // OPEN_RUNS_PER_SHARD))
    shard = zlib.crc32(run_id.encode()) % shards
    return shard, share(limit, shards, shard)


def claim(tenant: str, counter: str, limit: int, shard: int = 0) -> tuple[str, dict[str, Any]]:
    """A transaction item adding one to `counter` on usage shard `shard`, on condition that it stays within
    `limit` (that shard's part)."""
    update = {
        "Key": usage_key(tenant, shard),
        "UpdateExpression": "ADD #c :one",
        "ConditionExpression": "attribute_not_exists(#c) OR #c < :limit",
        "ExpressionAttributeNames": {"#c": counter},
        "ExpressionAttributeValues": {":one": a.n(1), ":limit": a.n(limit)},
    }
    return USAGE_SK, {"Update": update}


def release(tenant: str, counter: str, shard: int = 0) -> tuple[str, dict[str, Any]]:
    """A transaction item taking one from `counter` on the shard it was claimed on, unconditionally: ending a run
    never waits on a quota."""
    update = {
        "Key": usage_key(tenant, shard),
        "UpdateExpression": "ADD #c :minus",
        "ExpressionAttributeNames": {"#c": counter},
        "ExpressionAttributeValues": {":minus": a.n(-1)},
    }
    return USAGE_SK, {"Update": update}


class LimitStore:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def count_request(self, tenant: str, window: Window, limit: int, requests: int = 1) -> int | None:
        """Count `requests` requests (one, or a warm instance's lease of several: app/limits.py) in the tenant's
        window: the count including them, or None when they do not all fit (then nothing is counted, so refused
        requests do not push the count further). Above RATE_PER_SHARD the count is one random shard's, against
        that shard's part of `limit`."""
        shards = rate_shards(limit)
        shard = random.randrange(shards)
        limit = share(limit, shards, shard)
        if requests > limit:
            return None
        try:
            got = self.client.update_item(
                TableName=self.table,
                Key=a.key(rate_pk(tenant, shard), f"W#{window.start}"),
                UpdateExpression="ADD n :k SET #ttl = :ttl",
                ConditionExpression="attribute_not_exists(n) OR n <= :room",
                ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE},
                ExpressionAttributeValues={
                    ":k": a.n(requests),
                    ":room": a.n(limit - requests),
                    ":ttl": a.n(window.expires_at),
                },
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return None
            raise
        return int(got["Attributes"]["n"]["N"])

    def usage(self, tenant: str) -> dict[str, int]:
        """The sums over every usage shard (one BatchGetItem: a lowered limit leaves runs on higher shards)."""
        keys = [usage_key(tenant, shard) for shard in range(MAX_SHARDS)]
        request: dict[str, Any] = {self.table: {"Keys": keys, "ConsistentRead": True}}
        totals = dict.fromkeys((OPEN_RUNS, WORKFLOW_VERSIONS), 0)
        while request:
            got = self.client.batch_get_item(RequestItems=request)
            for item in got.get("Responses", {}).get(self.table, []):
                for name in totals:
                    totals[name] += int(item[name]["N"]) if name in item else 0
            request = got.get("UnprocessedKeys") or {}
        return {name: max(0, total) for name, total in totals.items()}
