"""A finished run's expiry, as an item written into its partition after its end takes it (issue 30 item 4).

The retention job (interlude.app.retention) gives every item a finished run has its expiry; an item written later (a
callback delivery of `run.completed`, the attempt of a replayed dead letter, a late notification) is created with the
head's `ttl` by its ledger (store/leases.py `expiring`), so nothing of the run outlives it. Apart from
store/retention.py: the workers that write those items load neither the run model nor the job.

Why no item is left without its expiry (ADR 0118). The head's `ttl` read before the item is written may be stale by
the time it is written (the run ended between the two, and the job's page passed the item's key before it existed).
So after creating the item its ledger reads the head again, strongly consistent (`confirm`), and while the head's
`ttl` differs from what the item carries, gives the item the head's (set or taken off) and reads again. When the
confirmation returns, the item's `ttl` equals the head's as it was at a read made after the item's last write; a later
change of the head's `ttl` (the run ending, running again, or re-stamped) queues a retention turn, which pages the
partition with strongly consistent reads after that change, so it finds the item and stamps it. A crash between the
write and the confirmation leaves the unit's message to be taken again, and the claim that takes it confirms again.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import RUN_SK, run_pk

# Rounds of a confirmation: each needs the head's ttl to change between its write and its read (a run ending, or
# running again, within milliseconds); past them the claim fails and its message is taken again.
CONFIRM_ROUNDS = 5


class ExpiryUnsettled(Exception):
    """The run's head changed its expiry in every round: the unit's message is taken again (and confirmed then)."""


def run_expiry(client: Any, table: str, run_id: str) -> a.Item:
    """`{ttl: …}`: the run's head's expiry, once the run has finished and been given one; else `{}`."""
    return _head_expiry(client, table, run_id, consistent=False) or {}


def _head_expiry(client: Any, table: str, run_id: str, consistent: bool) -> a.Item | None:
    """The head's `{ttl: …}` (`{}` while it has none); None when the head is gone (expired, or its tenant deleted)."""
    got = client.get_item(
        TableName=table,
        Key=a.key(run_pk(run_id), RUN_SK),
        ProjectionExpression="#pk, #ttl",
        ExpressionAttributeNames={"#pk": wiring.PARTITION_KEY, "#ttl": wiring.TTL_ATTRIBUTE},
        ConsistentRead=consistent,
    )
    if "Item" not in got:
        return None
    value = got["Item"].get(wiring.TTL_ATTRIBUTE)
    return {wiring.TTL_ATTRIBUTE: value} if value else {}


def confirm(client: Any, table: str, run_id: str, key: a.Item, written: a.Item) -> None:
    """The item at `key`, written with `written` (`{ttl: …}` or `{}`), carries its run's expiry as the head holds it
    now, and no later change of the head's can miss it (the module's docstring says why)."""
    for _ in range(CONFIRM_ROUNDS):
        head = _head_expiry(client, table, run_id, consistent=True)
        if head is None or head == written:
            return  # settled; or the run is gone (the item keeps what it was written with)
        names = {"#pk": wiring.PARTITION_KEY, "#ttl": wiring.TTL_ATTRIBUTE}
        update: dict[str, Any] = {
            "TableName": table,
            "Key": key,
            "ConditionExpression": "attribute_exists(#pk)",
            "ExpressionAttributeNames": names,
        }
        if head:
            update |= {"UpdateExpression": "SET #ttl = :ttl", "ExpressionAttributeValues": {":ttl": head[wiring.TTL_ATTRIBUTE]}}
        else:
            update["UpdateExpression"] = "REMOVE #ttl"
        try:
            client.update_item(**update)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return  # the item is gone meanwhile
        written = head
    raise ExpiryUnsettled(run_id)
