"""Effect records (OpenWOP idempotency Layer 2): the claim that makes an action happen once, and its run's ledger.

Items:
  effect   T#{tenant}#EF#{opaque}   EFFECT          status pending|claimed|completed|failed, attempts, leaseUntil,
                                                    outcome (the recorded result: the node's output or error)
  ledger   T#{tenant}#R#{run}       X#{opaque}      the run's record of the effect, as GET /runs/{runId}/effects
                                                    shows it: effectId, nodeId, attempt, keying, providerKey,
                                                    state claimed|completed|released, at

Both carry the table's TTL attribute, renewed by every write of them to `expires` (epoch seconds: the tenant's effect
retention past the write, at least 14 days as OpenWOP idempotency.md asks, or the open run's items' provisional expiry
when later: ADR 0142), after which DynamoDB deletes them. An effect record expires no sooner than any ledger entry of
it: both are written in one transaction, and a run that reuses another's record keeps it as long as its own entry.

The effect item is keyed by the effect's id alone (not the run), so a business identity named by several runs is
one record. It is a leased-work ledger item (store.leases): a worker claims an attempt before it calls (one
conditional write: attempts + 1 and a lease, allowed only from pending, or from claimed once the lease ran out) and
settles it under the condition that its claim still stands; the ledger item changes in the same transaction. So a
redelivered message finds the record claimed (busy) or settled (the recorded outcome, no call), and a crashed
worker's attempt is claimed again after its lease.
Neither item starts with "E#": the stream filter never passes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlude import wiring
from interlude.domain.clock import iso_epoch
from interlude.store import attributes as a
from interlude.store.layout import run_pk
from interlude.store.leases import PENDING, Claim, Ledger, Writes
from interlude.store.table import conditionally

EFFECT_SK = "EFFECT"
LEDGER_SK_PREFIX = "X#"
# What the ledger calls each status of the effect item (effect-ledger-projection.schema.json's vocabulary).
LEDGER_STATE = {"claimed": "claimed", "completed": "completed", "failed": "released", "pending": "released"}


def effect_pk(effect_id: str) -> str:
    tenant, opaque = effect_id.split("/", 1)
    return f"T#{tenant}#EF#{opaque}"


def ledger_sk(effect_id: str) -> str:
    return LEDGER_SK_PREFIX + effect_id.split("/", 1)[1]


def recorded_outcome(claim: Claim) -> dict[str, Any]:
    """What a settled effect recorded: the node's output or error."""
    held = claim.held.get("outcome")
    return json.loads(held) if held else {}


@dataclass(frozen=True)
class LedgerEntry:
    """Who the effect belongs to in a run: what the run's ledger item says besides attempt, state and time, and
    when what is written for it expires (epoch seconds)."""

    run_id: str
    node_id: str
    effect_id: str
    keying: str
    provider_key: str
    expires: int

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


class EffectStore(Ledger[LedgerEntry]):
    LEASED = "claimed"
    SETTLED = ("completed", "failed")
    DEAD = "failed"

    def key(self, ref: LedgerEntry) -> a.Item:
        return a.key(effect_pk(ref.effect_id), EFFECT_SK)

    def claiming(self, ref: LedgerEntry, attempt: int, now: float) -> Writes:
        sets = {"runId": a.s(ref.run_id), "nodeId": a.s(ref.node_id), "keying": a.s(ref.keying)}
        return self._stamped(ref, attempt, "claimed", now, sets)

    def settling(
        self, ref: LedgerEntry, attempt: int, status: str, kept: dict[str, Any], now: float, held: Mapping[str, Any]
    ) -> Writes:
        """`kept` is the outcome; it is recorded once the effect settles (completed or failed), not while pending."""
        return self._stamped(ref, attempt, status, now, {"outcome": a.as_json(kept)} if status in self.SETTLED else {})

    def _stamped(self, ref: LedgerEntry, attempt: int, status: str, now: float, sets: dict[str, Any]) -> Writes:
        """Every write of the effect: its time and expiry renewed, and the run's ledger item in the same transaction."""
        at = iso_epoch(now)
        stamped = {**sets, "at": a.s(at), wiring.TTL_ATTRIBUTE: a.n(ref.expires)}
        return Writes(sets=stamped, also=[{"Put": self._ledger_put(ref, attempt, LEDGER_STATE[status], at)}])

    def reopening(self, ref: LedgerEntry, attempts: int, now: float) -> Writes:
        """What a reopen of the failed effect writes with it (store.leases.Ledger.reopen): its expiry renewed, and
        the run's ledger showing it released until an attempt claims it."""
        return self._stamped(ref, attempts, PENDING, now, {})

    def note_reuse(self, entry: LedgerEntry, attempt: int, status: str, now_iso: str, held: Mapping[str, Any]) -> None:
        """A run whose action found its effect settled already (a business identity another run performed):
        its ledger shows the effect with the recorded state, once. `held`: the effect record as the claim read it.

        The record is kept at least as long as the entry first (one write, only when its expiry is earlier: another
        run's), so that no ledger entry outlives its effect record: the retention job writes neither when the entry's
        expiry is the run's or later (app/retention.py, ADR 0142)."""
        if int(held.get(wiring.TTL_ATTRIBUTE, 0)) < entry.expires:
            self._keep_effect(entry)
        put = self._ledger_put(entry, attempt, LEDGER_STATE[status], now_iso)
        put["ConditionExpression"] = "attribute_not_exists(sk)"
        conditionally(self.client.put_item, **put)

    def _keep_effect(self, entry: LedgerEntry) -> None:
        """The effect record expires no sooner than `entry` (a record gone meanwhile is left gone)."""
        conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=self.key(entry),
            UpdateExpression="SET #ttl = :ttl",
            ConditionExpression="attribute_exists(#sk) AND (attribute_not_exists(#ttl) OR #ttl < :ttl)",
            ExpressionAttributeNames={"#sk": wiring.SORT_KEY, "#ttl": wiring.TTL_ATTRIBUTE},
            ExpressionAttributeValues={":ttl": a.n(entry.expires)},
        )

    def ledger(self, run_id: str) -> list[dict[str, Any]]:
        """The run's effect records, in effect-id order."""
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :prefix)",
            ExpressionAttributeValues={":pk": a.s(run_pk(run_id)), ":prefix": a.s(LEDGER_SK_PREFIX)},
        )
        return [a.unpacked(item["record"]) for page in pages for item in page.get("Items") or []]

    def _ledger_put(self, entry: LedgerEntry, attempt: int, state: str, now_iso: str) -> Any:
        record = entry.record(attempt, state, now_iso)
        item = {
            **a.key(run_pk(entry.run_id), ledger_sk(entry.effect_id)),
            "record": a.as_json(record),
            wiring.TTL_ATTRIBUTE: a.n(entry.expires),
        }
        return {"TableName": self.table, "Item": item}
