"""Effect records (OpenWOP idempotency Layer 2): the claim that makes an action happen once, and its run's ledger.

Items:
  effect   T#{tenant}#EF#{opaque}   EFFECT          status pending|claimed|completed|failed, attempts, leaseUntil,
                                                    outcome (the recorded result: the node's output or error)
  ledger   T#{tenant}#R#{run}       X#{opaque}      the run's record of the effect, as GET /runs/{runId}/effects
                                                    shows it: effectId, nodeId, attempt, keying, providerKey,
                                                    state claimed|completed|released, at

Both carry the table's TTL attribute, renewed by every write of them to `expires` (epoch seconds: the tenant's effect
retention past the write, at least 14 days as OpenWOP idempotency.md asks), after which DynamoDB deletes them.

The effect item is keyed by the effect's id alone (not the run), so a business identity named by several runs is
one record. A worker claims an attempt before it calls (one conditional write: attempts + 1 and a lease, allowed
only from pending, or from claimed once the lease ran out) and finishes it under the condition that its claim
still stands; the ledger item changes in the same transaction. So a redelivered message finds the record claimed
(busy) or settled (the recorded outcome, no call), and a crashed worker's attempt is claimed again after its lease.
Neither item starts with "E#": the stream filter never passes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from interlude import wiring
from interlude.store import attributes as a
from interlude.store.dynamo import Store, run_pk

EFFECT_SK = "EFFECT"
LEDGER_SK_PREFIX = "X#"
SETTLED = ("completed", "failed")
# What the ledger calls each status of the effect item (effect-ledger-projection.schema.json's vocabulary).
LEDGER_STATE = {"claimed": "claimed", "completed": "completed", "failed": "released", "pending": "released"}


def effect_pk(effect_id: str) -> str:
    tenant, opaque = effect_id.split("/", 1)
    return f"T#{tenant}#EF#{opaque}"


def ledger_sk(effect_id: str) -> str:
    return LEDGER_SK_PREFIX + effect_id.split("/", 1)[1]


@dataclass(frozen=True)
class EffectClaim:
    outcome: str  # "claimed" | "settled" (completed or failed: `recorded` holds the result) | "busy"
    attempt: int = 0
    retry_in_s: int = 0
    recorded: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LedgerEntry:
    """Who the effect belongs to in a run: what the run's ledger item says besides attempt, state and time."""

    run_id: str
    node_id: str
    effect_id: str
    keying: str
    provider_key: str

    def record(self, attempt: int, state: str, at: str) -> dict[str, Any]:
        return {
            "effectId": self.effect_id,
            "nodeId": self.node_id,
            "attempt": attempt,
            "keying": self.keying,
            "providerKey": self.provider_key,
            "state": state,
            "at": at,
        }


class EffectStore:
    def __init__(self, store: Store) -> None:
        self.client = store.client
        self.table = store.table

    def effect(self, effect_id: str) -> dict[str, Any] | None:
        got = self.client.get_item(
            TableName=self.table, Key=a.key(effect_pk(effect_id), EFFECT_SK), ConsistentRead=True
        )
        item = got.get("Item")
        return a.plain(item) if item else None

    def claim(self, entry: LedgerEntry, now: float, now_iso: str, lease_s: float, expires: int) -> EffectClaim:
        current = self.effect(entry.effect_id)
        if current is not None:
            if current.get("status") in SETTLED:
                recorded = json.loads(current["outcome"]) if "outcome" in current else {}
                return EffectClaim("settled", int(current.get("attempts", 0)), recorded=recorded)
            lease = float(current.get("leaseUntil", 0))
            if current.get("status") == "claimed" and lease > now:
                return EffectClaim("busy", retry_in_s=int(lease - now) + 1)
        previous = int(current.get("attempts", 0)) if current else 0
        attempt = previous + 1
        # Any: the TypedDicts of the client's stubs accept no dict built in steps.
        update: Any = {
            "TableName": self.table,
            "Key": a.key(effect_pk(entry.effect_id), EFFECT_SK),
            "UpdateExpression": "SET #st = :claimed, attempts = :attempt, leaseUntil = :lease, runId = :run, "
            "nodeId = :node, keying = :keying, #at = :at, #ttl = :ttl",
            "ExpressionAttributeNames": {"#st": "status", "#at": "at", "#ttl": wiring.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": {
                ":ttl": a.n(expires),
                ":claimed": a.s("claimed"),
                ":attempt": a.n(attempt),
                ":lease": a.n(round(now + lease_s, 3)),
                ":run": a.s(entry.run_id),
                ":node": a.s(entry.node_id),
                ":keying": a.s(entry.keying),
                ":at": a.s(now_iso),
            },
        }
        if current is None:
            update["ConditionExpression"] = "attribute_not_exists(sk)"
        else:
            update["ConditionExpression"] = "attempts = :previous AND #st IN (:pending, :claimed)"
            update["ExpressionAttributeValues"].update({":previous": a.n(previous), ":pending": a.s("pending")})
        try:
            self.client.transact_write_items(
                TransactItems=[
                    {"Update": update},
                    {"Put": self._ledger_put(entry, attempt, "claimed", now_iso, expires)},
                ]
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            # Another copy of the message claimed it between our read and our write.
            return EffectClaim("busy", retry_in_s=1)
        return EffectClaim("claimed", attempt)

    def finish(
        self,
        entry: LedgerEntry,
        attempt: int,
        status: str,
        now_iso: str,
        expires: int,
        outcome: dict[str, Any] | None = None,
    ) -> bool:
        """Settle attempt `attempt` as `status` (completed, failed, or pending for another attempt), with the
        recorded outcome when settled. False (nothing written) when this worker's claim no longer stands."""
        values: dict[str, Any] = {
            ":status": a.s(status),
            ":attempt": a.n(attempt),
            ":claimed": a.s("claimed"),
            ":at": a.s(now_iso),
            ":ttl": a.n(expires),
        }
        expression = "SET #st = :status, #at = :at, #ttl = :ttl"
        if outcome is not None:
            expression += ", outcome = :outcome"
            values[":outcome"] = a.as_json(outcome)
        update: Any = {
            "TableName": self.table,
            "Key": a.key(effect_pk(entry.effect_id), EFFECT_SK),
            "UpdateExpression": expression + " REMOVE leaseUntil",
            "ConditionExpression": "attempts = :attempt AND #st = :claimed",
            "ExpressionAttributeNames": {"#st": "status", "#at": "at", "#ttl": wiring.TTL_ATTRIBUTE},
            "ExpressionAttributeValues": values,
        }
        ledger = self._ledger_put(entry, attempt, LEDGER_STATE[status], now_iso, expires)
        try:
            self.client.transact_write_items(TransactItems=[{"Update": update}, {"Put": ledger}])
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "TransactionCanceledException":
                raise
            return False
        return True

    def note_reuse(self, entry: LedgerEntry, attempt: int, status: str, now_iso: str, expires: int) -> None:
        """A run whose action found its effect settled already (a business identity another run performed):
        its ledger shows the effect with the recorded state, once."""
        put = self._ledger_put(entry, attempt, LEDGER_STATE[status], now_iso, expires)
        put["ConditionExpression"] = "attribute_not_exists(sk)"
        try:
            self.client.put_item(**put)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise

    def ledger(self, run_id: str) -> list[dict[str, Any]]:
        """The run's effect records, in effect-id order."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":prefix": a.s(LEDGER_SK_PREFIX)},
        )
        return [a.unpacked(item["record"]) for page in pages for item in page.get("Items") or []]

    def _ledger_put(self, entry: LedgerEntry, attempt: int, state: str, now_iso: str, expires: int) -> Any:
        record = entry.record(attempt, state, now_iso)
        item = {
            **a.key(run_pk(entry.run_id), ledger_sk(entry.effect_id)),
            "record": a.as_json(record),
            wiring.TTL_ATTRIBUTE: a.n(expires),
        }
        return {"TableName": self.table, "Item": item}
