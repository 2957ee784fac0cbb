"""A run's expiry, as an item written into its partition by a ledger takes it (issue 30 item 4, ADR 0133).

The retention job (interlude.app.retention) gives every item a finished run has its expiry; an item written later (a
callback delivery of `run.completed`, the attempt of a replayed dead letter, a late notification) is created with the
head's `ttl` by its ledger (store/leases.py `expiring`), and one of an open run with the provisional expiry its head
state names (rules/run_search.items_expiry) while that is not near, so a run that ends within it has nothing of its items to stamp. Apart
from store/retention.py: the workers that write those items load neither the run model nor the job.

Why no item is left without its expiry (ADR 0118). The head's `ttl` read before the item is written may be stale by
the time it is written (the run ended between the two, and the job's page passed the item's key before it existed).
So after creating the item its ledger reads the head again, strongly consistent (`confirm`), and while what the head
says the item is to carry differs from what it carries, gives the item that (set or taken off) and reads again: the
head's `ttl`; or, while it has none, the provisional expiry or none; an item of a run that ended soon enough for its
provisional expiry may keep that one, later than the run's (the retention job's own rule). When the
confirmation returns, the item's `ttl` equals the head's as it was at a read made after the item's last write; a later
change of the head's `ttl` (the run ending, running again, or re-stamped) queues a retention turn, which pages the
partition with strongly consistent reads after that change, so it finds the item and stamps it. A crash between the
write and the confirmation leaves the unit's message to be taken again, and the claim that takes it confirms again.
"""

from __future__ import annotations

import json
from typing import Any

from interlude import wiring
from interlude.domain import clock
from interlude.rules import run_search
from interlude.store import attributes as a
from interlude.store import layout
from interlude.store.layout import RUN_SK, run_pk
from interlude.store.table import conditionally

# The head's record that a retention turn is whole when the run's items alone cannot say so: the expiry the last whole
# turn gave every item, 0 while a turn that writes every item is under way (a re-stamp, or a run that ended too late
# for its items' provisional expiry: its ending transaction writes the 0). store/retention.py, ADRs 0118, 0133.
RETAINED = layout.RETAINED
RESTAMPING = 0
# Rounds of a confirmation: each needs the head's ttl to change between its write and its read (a run ending, or
# running again, within milliseconds); past them the claim fails and its message is taken again.
CONFIRM_ROUNDS = 5


class ExpiryUnsettled(Exception):
    """The run's head changed its expiry in every round: the unit's message is taken again (and confirmed then)."""


def past_expiry(item: dict[str, Any]) -> bool:
    """Whether an item's expiry (the table's TTL attribute) has passed: DynamoDB deletes such items within days, in no
    order, and reads return them until then."""
    ttl = item.get(wiring.TTL_ATTRIBUTE)
    return ttl is not None and int(ttl["N"]) <= clock.now().timestamp()


def run_expiry(client: Any, table: str, run_id: str) -> a.Item:
    """`{ttl: …}`: the run's head's expiry, once the run has finished and been given one; else `{}`."""
    head = _head_expiry(client, table, run_id, consistent=False) or {}
    return {wiring.TTL_ATTRIBUTE: head[wiring.TTL_ATTRIBUTE]} if wiring.TTL_ATTRIBUTE in head else {}


def created_expiry(client: Any, table: str, run_id: str) -> a.Item:
    """What a new item of the run is created with (`{ttl: …}` or `{}`): the head's expiry once the run has finished,
    else its items' provisional one while that is not near (ADR 0133)."""
    return _wanted(_head_expiry(client, table, run_id, consistent=False) or {}, clock.now().timestamp())[0]


def created_expiry_of(ttl: int | None, retained: int | None, provisional: int | None) -> a.Item:
    """`created_expiry` from the head's parts as a reader already holds them (its `ttl`, its RETAINED, its items'
    provisional expiry), without reading it: dispatch's, for the deliveries it queues (ADR 0178)."""
    return _wanted_of(ttl, retained is not None, provisional, clock.now().timestamp())[0]


def _wanted(head: a.Item, now_s: float) -> tuple[a.Item, bool]:
    return _wanted_of(a.integer(head, wiring.TTL_ATTRIBUTE), RETAINED in head, run_search.items_expiry(_search_expiry(head)), now_s)


def _wanted_of(ttl: int | None, retained: bool, provisional: int | None, now_s: float) -> tuple[a.Item, bool]:
    """The expiry an item of the run whose head holds `ttl` (and RETAINED, when `retained`) is to carry, and whether
    a later one does as well (a run that ended soon enough for its items' provisional expiry and whose turn writes only
    what has none or an earlier one: app/retention.py)."""
    if ttl is None:
        kept = run_search.open_expiry(provisional, now_s)
        return ({} if kept is None else {wiring.TTL_ATTRIBUTE: a.n(kept)}), False
    soon = provisional is not None and not run_search.items_stamped_at_end(provisional, ttl)
    return {wiring.TTL_ATTRIBUTE: a.n(ttl)}, soon and not retained


def _search_expiry(head: a.Item) -> int | None:
    """The run's searchExpiry, read from the head's state JSON as it is (the run model is not loaded here)."""
    if "state" not in head:
        return None
    value = json.loads(a.unpacked_json(head["state"])).get("searchExpiry")
    return int(value) if value is not None else None


def _settled(written: a.Item, wanted: a.Item, later_kept: bool) -> bool:
    if written == wanted:
        return True
    if not later_kept or wiring.TTL_ATTRIBUTE not in written:
        return False
    return int(written[wiring.TTL_ATTRIBUTE]["N"]) >= int(wanted[wiring.TTL_ATTRIBUTE]["N"])


def _head_expiry(client: Any, table: str, run_id: str, consistent: bool) -> a.Item | None:
    """What the head holds of the run's expiry (its `ttl`, its retention mark, its state, which names its items'
    provisional expiry: those it has; a GetItem is billed by the item's size whatever it projects); None when the
    head is gone (expired, or its tenant deleted)."""
    names = {"#pk": wiring.PARTITION_KEY, "#ttl": wiring.TTL_ATTRIBUTE, "#retained": RETAINED, "#state": "state"}
    got = client.get_item(
        TableName=table,
        Key=a.key(run_pk(run_id), RUN_SK),
        ProjectionExpression="#pk, #ttl, #retained, #state",
        ExpressionAttributeNames=names,
        ConsistentRead=consistent,
    )
    if "Item" not in got:
        return None
    return {name: value for name, value in got["Item"].items() if name != wiring.PARTITION_KEY}


def confirm(client: Any, table: str, run_id: str, key: a.Item, written: a.Item, item_table: str) -> None:
    """The item at `key` in `item_table` (the head's is `table`), written with `written` (`{ttl: …}` or `{}`), carries
    its run's expiry as the head holds it now (or, for a run that ended soon enough, a later one: its items'
    provisional expiry), and no later change of the head's can miss it (the module's docstring says why)."""
    for _ in range(CONFIRM_ROUNDS):
        head = _head_expiry(client, table, run_id, consistent=True)
        if head is None:
            return  # the run is gone (the item keeps what it was written with)
        wanted, later_kept = _wanted(head, clock.now().timestamp())
        if _settled(written, wanted, later_kept):
            return
        names = {"#pk": wiring.PARTITION_KEY, "#ttl": wiring.TTL_ATTRIBUTE}
        update: dict[str, Any] = {
            "TableName": item_table,
            "Key": key,
            "ConditionExpression": "attribute_exists(#pk)",
            "ExpressionAttributeNames": names,
        }
        if wanted:
            update |= {"UpdateExpression": "SET #ttl = :ttl", "ExpressionAttributeValues": {":ttl": wanted[wiring.TTL_ATTRIBUTE]}}
        else:
            update["UpdateExpression"] = "REMOVE #ttl"
        if conditionally(client.update_item, **update) is None:
            return  # the item is gone meanwhile
        written = wanted
    raise ExpiryUnsettled(run_id)
