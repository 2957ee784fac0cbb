"""The counters behind per-tenant limits (rules in interlude/rules/limits.py; reasons in docs/decisions.md,
"Tenant limits").

  request window  T#{tenant}#RATE   W#{windowStart}   n: requests counted in that window; swept by TTL
  usage           T#{tenant}        USAGE             openRuns, workflowVersions

A request is counted by one conditional UpdateItem that refuses to count past the limit, so any number of Lambda
instances share one count. The usage counters change only inside the transaction that creates or ends a run or
stores a workflow version (store/dynamo.py), so they cannot drift from what they count: a claim is conditional on
the quota, a release (a run ending) never is, so a run can always end.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.rules.limits import Window
from interlude.store import attributes as a

USAGE_SK = "USAGE"
OPEN_RUNS = "openRuns"
WORKFLOW_VERSIONS = "workflowVersions"


def rate_pk(tenant: str) -> str:
    return f"T#{tenant}#RATE"


def usage_key(tenant: str) -> a.Item:
    return a.key(f"T#{tenant}", USAGE_SK)


def claim(tenant: str, counter: str, limit: int) -> tuple[str, dict[str, Any]]:
    """A transaction item adding one to `counter`, on condition that it stays within `limit`."""
    update = {
        "Key": usage_key(tenant),
        "UpdateExpression": "ADD #c :one",
        "ConditionExpression": "attribute_not_exists(#c) OR #c < :limit",
        "ExpressionAttributeNames": {"#c": counter},
        "ExpressionAttributeValues": {":one": a.n(1), ":limit": a.n(limit)},
    }
    return USAGE_SK, {"Update": update}


def release(tenant: str, counter: str) -> tuple[str, dict[str, Any]]:
    """A transaction item taking one from `counter`, unconditionally: ending a run never waits on a quota."""
    update = {
        "Key": usage_key(tenant),
        "UpdateExpression": "ADD #c :minus",
        "ExpressionAttributeNames": {"#c": counter},
        "ExpressionAttributeValues": {":minus": a.n(-1)},
    }
    return USAGE_SK, {"Update": update}


class LimitStore:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def count_request(self, tenant: str, window: Window, limit: int) -> int | None:
        """Count one request in the tenant's window: the count including it, or None when the window is full
        (then nothing is counted, so refused requests do not push the count further)."""
        try:
            got = self.client.update_item(
                TableName=self.table,
                Key=a.key(rate_pk(tenant), f"W#{window.start}"),
                UpdateExpression="ADD n :one SET #ttl = :ttl",
                ConditionExpression="attribute_not_exists(n) OR n < :limit",
                ExpressionAttributeNames={"#ttl": wiring.TTL_ATTRIBUTE},
                ExpressionAttributeValues={":one": a.n(1), ":limit": a.n(limit), ":ttl": a.n(window.expires_at)},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return None
            raise
        return int(got["Attributes"]["n"]["N"])

    def usage(self, tenant: str) -> dict[str, int]:
        got = self.client.get_item(TableName=self.table, Key=usage_key(tenant), ConsistentRead=True)
        item = got.get("Item") or {}
        return {name: max(0, int(item[name]["N"])) if name in item else 0 for name in (OPEN_RUNS, WORKFLOW_VERSIONS)}
