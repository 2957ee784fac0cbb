"""The counters behind per-tenant limits (rules in interlude/rules/limits.py; reasons in docs/adr/0017).

  request span    T#{tenant}#RATE[#{shard}]    S#{spanStart}     n{k}: requests counted in the span's k-th one-second
                                                                 window (rules/limits.SPAN_SECONDS of them); swept by TTL
  usage           T#{tenant}[#USAGE#{shard}]   USAGE             openRuns (per shard), workflowVersions (shard 0), and
                                                                 the month's billed measures of the runs that claimed or
                                                                 released there (`{measure}@{YYYY-MM}`: rules/usage.py)

Both are write-sharded once a tenant's limit is high enough to make one item hot (docs/scale.md): a window over
RATE_PER_SHARD requests/s is split over ceil(limit / RATE_PER_SHARD) items, each request counted on a random one
against its share of the limit; an open-runs quota is split over limit // OPEN_RUNS_PER_SHARD items (at most
MAX_SHARDS; the default quota of 1,000 over 8, so no one item is in every create and end: issue 31 item 3), a run
claiming on the one its id hashes to (recorded on the run, so it releases there) and, when that one's part is full,
on the shard with the most room left, read then (`roomiest_shard`): a create is refused only when the shards hold the
whole quota. A quota of one shard (under 2 × OPEN_RUNS_PER_SHARD) is exact whatever the shards hold from a higher
quota before: its claims read every shard's count first and go to shard 0, capped by what is left (`exact_cap`).
Reads sum every shard. Shard 0 keeps the unsharded key, so a tenant's count from before the split (all on that key,
its runs recording shard 0) is still counted and released there; until those runs end, the other shards may together
admit up to their parts beside it, and a quota lowered to one of more shards than one leaves the runs on shards above
it uncounted by claims until they end (docs/adr/0116).

Requests are counted by one conditional UpdateItem that refuses to count past the limit, so any number of Lambda
instances share one count; a warm instance counts them ahead, a lease of several at a time, in the window it is in and
the next ones its span holds, in one write (app/limits.py, docs/adr/0174).
The usage counters change only inside the transaction that creates or ends a run or stores a workflow version
(store/transitions.py, store/workflows.py), so they cannot drift from what they count: a claim is conditional on the quota, a release (a
run ending) never is, so a run can always end. The same updates bill the tenant's usage of the month (docs/adr/0123):
a create's claim adds its lifecycle and the history it wrote, an end's release what the run owed since (its decisions
and history, kept on its head until then), so metering costs no write of its own and counts each run once.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping
from typing import Any

from interlude import wiring
from interlude.rules.limits import AHEAD_SHARE, WINDOW_SECONDS, Window
from interlude.store import attributes as a
from interlude.store.table import batch_get, conditionally

USAGE_SK = "USAGE"
OPEN_RUNS = "openRuns"
WORKFLOW_VERSIONS = "workflowVersions"


# One item takes at most 1,000 write units a second; these leave it half of that.
RATE_PER_SHARD = 500
# An open run costs its shard 2 WRU when created and 2 when it ends: 250 lifecycles/s a shard. A shard per 125 of the
# quota spreads the default 1,000 over 8 (2,000 lifecycles/s a tenant), and a quota under 250 keeps one exact item.
OPEN_RUNS_PER_SHARD = 125
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


def open_runs_shards(limit: int) -> int:
    return max(1, min(MAX_SHARDS, limit // OPEN_RUNS_PER_SHARD))


def open_runs_shard(run_id: str, limit: int) -> tuple[int, int]:
    """(the usage shard a new run claims on, that shard's part of the open-runs limit)."""
    shards = open_runs_shards(limit)
    shard = zlib.crc32(run_id.encode()) % shards
    return shard, share(limit, shards, shard)


def exact_cap(counts: dict[int, int], limit: int) -> int | None:
    """What shard 0 may count up to so that every shard together stays within `limit`, given each shard's open runs
    as read (a quota of one shard: its claims all go to shard 0, and the other shards only release); None when the
    shards hold the whole limit."""
    room = limit - sum(counts.values())
    return counts.get(0, 0) + room if room > 0 else None


def roomiest_shard(counts: dict[int, int], limit: int) -> tuple[int, int] | None:
    """(the shard with the most room under its part of `limit`, that part), given each shard's open runs; None when
    they hold the whole limit or no shard has room."""
    shards = open_runs_shards(limit)
    if sum(counts.values()) >= limit:
        return None
    shard = max(range(shards), key=lambda s: (share(limit, shards, s) - counts.get(s, 0), -s))
    part = share(limit, shards, shard)
    return (shard, part) if part > counts.get(shard, 0) else None


def claim(
    tenant: str, counter: str, limit: int, shard: int = 0, billed: Mapping[str, int] | None = None
) -> tuple[str, dict[str, Any]]:
    """A transaction item adding one to `counter` on usage shard `shard`, on condition that it stays within
    `limit` (that shard's part); and `billed` (attribute name: amount, rules/usage.month_attributes) with it."""
    update = {
        "Key": usage_key(tenant, shard),
        "UpdateExpression": "ADD #c :one",
        "ConditionExpression": "attribute_not_exists(#c) OR #c < :limit",
        "ExpressionAttributeNames": {"#c": counter},
        "ExpressionAttributeValues": {":one": a.n(1), ":limit": a.n(limit)},
    }
    return USAGE_SK, {"Update": _adding(update, billed)}


def release(
    tenant: str, counter: str, shard: int = 0, billed: Mapping[str, int] | None = None
) -> tuple[str, dict[str, Any]]:
    """A transaction item taking one from `counter` on the shard it was claimed on, unconditionally: ending a run
    never waits on a quota; and `billed` with it."""
    update = {
        "Key": usage_key(tenant, shard),
        "UpdateExpression": "ADD #c :minus",
        "ExpressionAttributeNames": {"#c": counter},
        "ExpressionAttributeValues": {":minus": a.n(-1)},
    }
    return USAGE_SK, {"Update": _adding(update, billed)}


def bill(tenant: str, shard: int, billed: Mapping[str, int]) -> tuple[str, dict[str, Any]]:
    """A transaction item adding `billed` alone on usage shard `shard` (a run that starts and ends in one transition:
    it claims and releases nothing)."""
    update = {"Key": usage_key(tenant, shard), "ExpressionAttributeNames": {}, "ExpressionAttributeValues": {}}
    return USAGE_SK, {"Update": _adding(update, billed)}


def _adding(update: dict[str, Any], billed: Mapping[str, int] | None) -> dict[str, Any]:
    """`update` also adding each of `billed` (attribute name: amount; the names are month-keyed, so placeholders)."""
    adds = [f"#b{i} :b{i}" for i in range(len(billed or {}))]
    if not adds:
        return update
    expression = update.get("UpdateExpression")
    update["UpdateExpression"] = f"{expression}, {', '.join(adds)}" if expression else "ADD " + ", ".join(adds)
    for i, (name, amount) in enumerate((billed or {}).items()):
        update["ExpressionAttributeNames"][f"#b{i}"] = name
        update["ExpressionAttributeValues"][f":b{i}"] = a.n(amount)
    return update


class LimitStore:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def count_request(self, tenant: str, window: Window, limit: int, requests: int = 1, windows: int = 1) -> int | None:
        """Count `requests` requests (one, or a warm instance's lease of several: app/limits.py) in the tenant's
        `window` and in each of the `windows` - 1 after it that its span holds (each of those within AHEAD_SHARE of
        the limit): the count of `window` including them, or None when they do not all fit in every one (then nothing
        is counted, so refused requests do not push a count further). Above RATE_PER_SHARD the count is one random
        shard's, against that shard's part of `limit`."""
        shards = rate_shards(limit)
        shard = random.randrange(shards)
        limit = share(limit, shards, shard)
        if requests > limit:
            return None
        first = (window.start - window.span) // WINDOW_SECONDS
        later = [f"#n{k}" for k in range(first + 1, first + window.ahead(windows))]
        # Counted ahead, a later window keeps the part of its limit past AHEAD_SHARE for its own requests.
        ahead_room = int(limit * AHEAD_SHARE) - requests
        if later and ahead_room < 0:
            return None
        names = {name: name[1:] for name in (f"#n{first}", *later)}
        condition = [f"(attribute_not_exists(#n{first}) OR #n{first} <= :room)"]
        condition += [f"(attribute_not_exists({name}) OR {name} <= :ahead)" for name in later]
        values = {":k": a.n(requests), ":room": a.n(limit - requests), ":ttl": a.n(window.expires_at)}
        if later:
            values[":ahead"] = a.n(ahead_room)
        got = conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(rate_pk(tenant, shard), f"S#{window.span}"),
            UpdateExpression="ADD " + ", ".join(f"{name} :k" for name in names) + " SET #ttl = :ttl",
            ConditionExpression=" AND ".join(condition),
            ExpressionAttributeNames={**names, "#ttl": wiring.TTL_ATTRIBUTE},
            ExpressionAttributeValues=values,
            ReturnValues="UPDATED_NEW",
        )
        return None if got is None else int(got["Attributes"][f"n{first}"]["N"])

    def usage(self, tenant: str) -> dict[str, int]:
        """The sums over every usage shard (one BatchGetItem: a lowered limit leaves runs on higher shards)."""
        by_shard = self.usage_by_shard(tenant)
        return {name: max(0, sum(c.get(name, 0) for c in by_shard.values())) for name in (OPEN_RUNS, WORKFLOW_VERSIONS)}

    def usage_by_shard(self, tenant: str) -> dict[int, dict[str, int]]:
        """Each usage shard's counts (one strongly consistent BatchGetItem of every shard's item)."""
        keys = {usage_key(tenant, shard)["pk"]["S"]: shard for shard in range(MAX_SHARDS)}
        shards = [usage_key(tenant, shard) for shard in range(MAX_SHARDS)]
        return {
            keys[item["pk"]["S"]]: {name: int(item[name]["N"]) for name in (OPEN_RUNS, WORKFLOW_VERSIONS) if name in item}
            for item in batch_get(self.client, self.table, shards, ConsistentRead=True)
        }

    def open_runs_by_shard(self, tenant: str) -> dict[int, int]:
        return {shard: c.get(OPEN_RUNS, 0) for shard, c in self.usage_by_shard(tenant).items()}
