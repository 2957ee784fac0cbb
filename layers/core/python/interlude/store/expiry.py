"""A finished run's expiry, as an item written into its partition after its end takes it (issue 30 item 4).

The retention job (interlude.app.retention) gives every item a finished run has its expiry; an item written later (a
callback delivery of `run.completed`, the attempt of a replayed dead letter, a late notification) is created with the
head's `ttl` by its ledger (store/leases.py `expiring`), so nothing of the run outlives it. Apart from
store/retention.py: the workers that write those items load neither the run model nor the job.
"""

from __future__ import annotations

from typing import Any

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.layout import RUN_SK, run_pk


def run_expiry(client: Any, table: str, run_id: str) -> a.Item:
    """`{ttl: …}`: the run's head's expiry, once the run has finished and been given one; else `{}`."""
    got = client.get_item(
        TableName=table,
        Key=a.key(run_pk(run_id), RUN_SK),
        ProjectionExpression="#ttl",
        ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE},
    )
    value = (got.get("Item") or {}).get(wiring.TTL_ATTRIBUTE)
    return {wiring.TTL_ATTRIBUTE: value} if value else {}
