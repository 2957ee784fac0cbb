"""Write-sharded index partitions of several families in the base table, and the bounded page that reads them.

An index of families (wiring.ItemIndex with families; the inbox, store/inbox.py) keeps small entry items whose
partition key is

    T#{tenant}#{prefix}#{family}#{shard:02d}      sort key: {time}#{id}

`family` is what a query asks (ANY, a workflow id, a kind, an approver ref ...), `shard` = store.item_index's
shard_of(id) over the index's shard count, so writes of one family spread over `shards` partitions and no
partition's sort key is the only place a busy tenant writes. A page is ONE round over several families: a Query
per (family, shard) with `Limit = page size`, merged newest first, so a page reads at most streams × page size
entries whatever the index holds; the cursor carries each stream's position (the run listing's single-family
index, store/item_index.py, needs only one). Reasons: docs/scale.md, docs/adr/0024.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.item_index import shard_of


def family_shards(index: wiring.ItemIndex, family: str) -> int:
    return 1 if family.split("#", 1)[0] in index.unsharded_families else index.shards


def index_pk(tenant: str, index: wiring.ItemIndex, family: str, shard: int) -> str:
    return f"T#{tenant}#{index.prefix}#{family}#{shard:02d}"


def family_of(pk: str, tenant: str, index: wiring.ItemIndex) -> str:
    """The family of an entry of `tenant` in `index` under partition key `pk` (`index_pk`'s)."""
    return pk.removeprefix(f"T#{tenant}#{index.prefix}#").rsplit("#", 1)[0]


def entry_pk(tenant: str, index: wiring.ItemIndex, family: str, entity_id: str) -> str:
    return index_pk(tenant, index, family, shard_of(entity_id, family_shards(index, family)))


def entry_sk(at: str, entity_id: str) -> str:
    return f"{at}#{entity_id}"


def family_pks(tenant: str, index: wiring.ItemIndex, family: str) -> list[str]:
    """Every partition one family's entries are spread over."""
    return [index_pk(tenant, index, family, shard) for shard in range(family_shards(index, family))]


# -- cursors ------------------------------------------------------------------------------------------


@dataclass
class Positions:
    """Where each stream (a partition key) of a page stands: the last sort key consumed, or None before any;
    `done` holds the streams read to their end."""

    after: dict[str, str | None]
    done: set[str] = field(default_factory=set)

    @property
    def finished(self) -> bool:
        return set(self.after) <= self.done

    def of(self, streams: Iterable[str]) -> Positions:
        """The positions of `streams` alone (a page that reads some of a cursor's streams)."""
        kept = list(streams)
        return Positions(after={pk: self.after[pk] for pk in kept}, done=self.done & set(kept))

    def moved(self, read: Positions) -> None:
        """Take on where a page over some of these streams left them."""
        self.after.update(read.after)
        self.done |= read.done


def fingerprint(parts: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def encode_cursor(tenant: str, query: str, positions: Positions) -> str:
    """Opaque to the client; bound to the tenant and to the query (its streams and filters) that minted it."""
    plain = {
        "t": tenant,
        "q": query,
        "p": {pk: (None if pk in positions.done else sk) for pk, sk in positions.after.items()},
        "d": sorted(positions.done),
    }
    raw = json.dumps(plain, separators=(",", ":"), sort_keys=True, allow_nan=False).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_cursor(cursor: str, tenant: str, query: str, streams: list[str]) -> Positions:
    """The positions a cursor carries for `streams`; ValueError unless this tenant's same query minted it. A stream
    the cursor does not name (the caller joined a group since) starts at its newest entry; one it names that the
    query no longer reads is dropped."""
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        plain = json.loads(raw)
    except (ValueError, TypeError, zlib.error):
        raise ValueError("cursor is not one this listing issued") from None
    own = f"T#{tenant}#"
    if (
        not isinstance(plain, dict)
        or plain.get("t") != tenant
        or plain.get("q") != query
        or not isinstance(plain.get("p"), dict)
        or not all(isinstance(k, str) and k.startswith(own) for k in plain["p"])
        or not all(v is None or isinstance(v, str) for v in plain["p"].values())
        or not isinstance(plain.get("d"), list)
        or not set(plain["d"]) <= set(plain["p"])
    ):
        raise ValueError("cursor is not one this listing issued")
    return Positions(
        after={pk: plain["p"].get(pk) for pk in streams}, done={pk for pk in plain["d"] if pk in streams}
    )


# -- the bounded page ---------------------------------------------------------------------------------


@dataclass
class Page:
    items: list[a.Item]
    positions: Positions
    # Queries sent and entries they returned (what the bench prints and the scale test holds constant).
    queries: int = 0
    entries_read: int = 0
    # The stream each of `items` was read from.
    sources: list[str] = field(default_factory=list)


def _own_table(stream: str) -> tuple[str | None, str]:
    return None, stream


def read_page(
    client: Any,
    table: str,
    positions: Positions,
    limit: int,
    accept: Callable[[a.Item], bool] = lambda _item: True,
    ascending: bool = False,
    locate: Callable[[str], tuple[str | None, str]] = _own_table,
) -> Page:
    """Up to `limit` accepted entries, newest first across every stream (`ascending`: oldest first), in one round of
    Queries.

    Each unfinished stream is read once (in that order, after its position, `Limit = limit`). Entries are then
    consumed in global order until `limit` are accepted, or until a stream that has more than it returned runs
    dry (an entry beyond what it returned could be newer than the next one of the others): the next page goes on
    from there. A rejected entry is consumed too, so every page makes progress. `locate`: the table (None: `table`)
    and partition key a stream is read from, for streams of several tables (store/inbox.py).
    """
    page = Page(items=[], positions=Positions(after=dict(positions.after), done=set(positions.done)))
    buffers: dict[str, list[a.Item]] = {}
    more: set[str] = set()
    for pk in sorted(set(positions.after) - positions.done):
        in_table, partition = locate(pk)
        kwargs: dict[str, Any] = {
            "TableName": in_table or table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": a.s(partition)},
            "ScanIndexForward": ascending,
            "Limit": limit,
        }
        after = positions.after[pk]
        if after is not None:
            kwargs["ExclusiveStartKey"] = a.key(partition, after)
        got = client.query(**kwargs)
        page.queries += 1
        buffers[pk] = list(got.get("Items") or [])
        page.entries_read += len(buffers[pk])
        if got.get("LastEvaluatedKey"):
            more.add(pk)
    merged = heapq.merge(
        *([(item[wiring.SORT_KEY]["S"], pk, item) for item in items] for pk, items in buffers.items()),
        key=lambda entry: entry[0],
        reverse=not ascending,
    )
    remaining = {pk: len(items) for pk, items in buffers.items()}
    last: str | None = None
    for sk, pk, item in merged:
        # Past a full page only the same entity under another matching family (two of the caller's groups) is
        # consumed, so the next page does not list it again.
        if len(page.items) == limit and sk != last:
            break
        page.positions.after[pk] = sk
        remaining[pk] -= 1
        if sk != last and accept(item):
            page.items.append(item)
            page.sources.append(pk)
        last = sk
        if remaining[pk] == 0 and pk in more:
            break
    page.positions.done |= {pk for pk, left in remaining.items() if left == 0 and pk not in more}
    return page
