"""Indexes kept as base-table items (wiring.ItemIndex): the key helpers, the entry write and the newest-first read.

  entry   T#{tenant}#{prefix}#{shard:02d}   {sort}   the member's id and the attributes a listing filters on

`sort` begins with the member's creation instant, so one shard's partition is newest-first when read backwards,
and every shard is ordered by the same key. A round reads each shard once (Limit = a few entries), merges them,
and keeps only what lies above the highest point where a shard stopped early: below it, a shard that stopped may
still hold newer entries than the ones already read. So a round's answer is exactly the newest entries down to a
sort key, and one sort key is the whole position: the next round reads every shard below it. A cursor carries
that key and the tenant it was minted for (interlude.store.item_index.encode_position).
"""

import base64
import hashlib
import json
import re
from typing import Any, NamedTuple

from interlude import wiring
from interlude.store import attributes as a

# A sort key of an entry: an ISO instant with milliseconds, '#', then the member's opaque id.
SORT_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z#[A-Za-z0-9._~-]{1,128}$")


def shard_of(member: str, shards: int) -> int:
    """The shard a member's entry lives in: a stable hash of its id (the same in every process)."""
    return int.from_bytes(hashlib.sha256(member.encode()).digest()[:4], "big") % shards


def index_pk(tenant: str, index: wiring.ItemIndex, shard: int, family: str | None = None) -> str:
    """An entry's partition: `T#{tenant}#{prefix}#{shard:02d}`, or with a family (the run search's tag, metadata
    value or word) `T#{tenant}#{prefix}#{family}#{shard:02d}`."""
    within = f"{family}#" if family is not None else ""
    return f"T#{tenant}#{index.prefix}#{within}{shard:02d}"


def entry_put(
    tenant: str,
    index: wiring.ItemIndex,
    member: str,
    sort: str,
    attributes: dict[str, str],
    family: str | None = None,
) -> dict[str, Any]:
    """The `Put` of one entry (the run listing's is a plain write just before the run's first transaction)."""
    item: a.Item = {
        **a.key(index_pk(tenant, index, shard_of(member, index.shards), family), sort),
        **{name: a.s(value) for name, value in attributes.items()},
    }
    return {"Put": {"Item": item}}


def encode_position(tenant: str, index: wiring.ItemIndex, sort: str) -> str:
    raw = json.dumps({"t": tenant, "i": index.name, "p": sort}, separators=(",", ":"), sort_keys=True, allow_nan=False)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_position(cursor: str, tenant: str, index: wiring.ItemIndex) -> str:
    """The sort key a cursor resumes below; ValueError for a cursor this tenant's listing did not mint."""
    try:
        plain = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError):
        raise ValueError("not a cursor") from None
    if (
        not isinstance(plain, dict)
        or set(plain) != {"t", "i", "p"}
        or plain["t"] != tenant
        or plain["i"] != index.name
        or not isinstance(plain["p"], str)
        or not SORT_RE.fullmatch(plain["p"])
    ):
        raise ValueError("not a cursor of this listing")
    return plain["p"]


class Round(NamedTuple):
    # The entries read, newest first, as plain dicts (sk included), each at or above `floor`.
    entries: list[dict[str, Any]]
    # Where the next round starts (exclusive): None when every shard was read to its end.
    floor: str | None


class ItemIndexReader:
    def __init__(
        self, client: Any, table: str, tenant: str, index: wiring.ItemIndex, family: str | None = None
    ) -> None:
        self.client = client
        self.table = table
        self.tenant = tenant
        self.index = index
        self.family = family
        # What this reader cost: Queries sent and entries they read (tests and bench/ print them).
        self.queries = 0
        self.entries_read = 0

    def round(
        self,
        below: str | None,
        per_shard: int,
        equals: dict[str, str],
        at_or_above: str | None = None,
        begins: dict[str, str] | None = None,
    ) -> Round:
        """One Query per shard (Limit `per_shard`): entries below `below` and at or above `at_or_above` (sort keys),
        those whose attributes equal `equals` and begin with `begins`. A filtered-out entry counts against the
        Limit as a read one does (DynamoDB filters after reading), so a round reads at most shards × per_shard."""
        if at_or_above is not None and below is not None and below <= at_or_above:
            return Round([], None)
        items: list[dict[str, Any]] = []
        stopped: list[str] = []
        values: a.Item = {}
        conditions: list[str] = []
        if at_or_above is not None:
            # BETWEEN is inclusive at both ends: an entry at `below` itself (a cursor's) is dropped below.
            values[":above"] = a.s(at_or_above)
            values[":below"] = a.s(below if below is not None else "~")
            key_condition = "pk = :pk AND sk BETWEEN :above AND :below"
        elif below is not None:
            values[":below"] = a.s(below)
            key_condition = "pk = :pk AND sk < :below"
        else:
            key_condition = "pk = :pk"
        names: dict[str, str] = {}
        for op, wanted in (("=", equals), ("begins", begins or {})):
            for name, value in sorted(wanted.items()):
                n = len(names)
                names[f"#f{n}"] = name
                values[f":f{n}"] = a.s(value)
                conditions.append(f"#f{n} = :f{n}" if op == "=" else f"begins_with(#f{n}, :f{n})")
        for shard in range(self.index.shards):
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "KeyConditionExpression": key_condition,
                "ExpressionAttributeValues": {":pk": a.s(index_pk(self.tenant, self.index, shard, self.family)), **values},
                "ScanIndexForward": False,
                "Limit": per_shard,
            }
            if conditions:
                kwargs["ExpressionAttributeNames"] = names
                kwargs["FilterExpression"] = " AND ".join(conditions)
            got = self.client.query(**kwargs)
            self.queries += 1
            self.entries_read += int(got.get("ScannedCount", len(got.get("Items") or [])))
            items += [a.plain(item) for item in got.get("Items") or [] if item[wiring.SORT_KEY]["S"] != below]
            last = got.get("LastEvaluatedKey")
            if last:
                stopped.append(last[wiring.SORT_KEY]["S"])
        floor = max(stopped) if stopped else None
        kept = sorted((i for i in items if floor is None or i[wiring.SORT_KEY] >= floor), key=_sort, reverse=True)
        return Round(kept, floor)


def _sort(entry: dict[str, Any]) -> str:
    return str(entry[wiring.SORT_KEY])
