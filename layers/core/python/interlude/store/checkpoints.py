"""The migrations' checkpoints: one item per migration, `state` done once it is whole (store/migrations.py writes them).

  checkpoint  MIGRATION   {id}   (store/migrations.py lists its attributes)

What a deployment's readers ask of them: whether a migration is done (store/inbox.py: the inbox entries' move).
"""

from __future__ import annotations

from typing import Any

from interlude.store import attributes as a

MIGRATION_PK = "MIGRATION"
RUNNING = "running"
DONE = "done"


def finished(client: Any, table: str, migration_id: str) -> bool:
    """Whether `migration_id` is done in the deployment whose first table is `table` (its checkpoint says so)."""
    got = client.get_item(
        TableName=table,
        Key=a.key(MIGRATION_PK, migration_id),
        ProjectionExpression="#state",
        ExpressionAttributeNames={"#state": "state"},
        ConsistentRead=True,
    ).get("Item")
    return bool(got) and got["state"].get("S") == DONE
