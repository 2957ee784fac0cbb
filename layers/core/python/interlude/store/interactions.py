"""Items of the human-in-the-loop features (issue 3), beside the run items of store/run_items.py.

  tenant settings   T#{tenant}                 SETTINGS                 overridePrincipals, eventRetentionHours
  credential grant  T#{tenant}                 CRED#{provider}          scopes (never material), grantedAt/By
  conversation      T#{tenant}#CONV#{convId}   CONV                     the tenant-unique claim of a conversationId
  event waiter      T#{tenant}#EV#{hash}       W#{interruptId}          an external-event interrupt (closedAt once closed)
  received event    T#{tenant}#EV#{hash}       R#{receivedAt}#{eventId} an external event, kept until its ttl

`hash` is rules.interrupts.correlation.correlation_hash(eventType, correlation): waiters and events of one
(eventType, correlation) share a partition, so each side finds the other with one Query (no scan, no index).
Waiters and conversation claims are written inside the run's transition transaction (transition_items).
"""

from typing import TYPE_CHECKING, Any, NamedTuple

from interlude import wiring
from interlude.domain.clock import epoch_of
from interlude.rules.interrupts.correlation import correlation_hash
from interlude.store import attributes as a
from interlude.store.table import conditionally

if TYPE_CHECKING:  # annotations only: the callbacks function imports the store without the run model or engine
    from interlude.domain.models.run import OpenInterrupt
    from interlude.engine.run import Transition

SETTINGS_SK = "SETTINGS"
CLOSED_WAITER_TTL_S = 24 * 3600



def tenant_pk(tenant: str) -> str:
    return f"T#{tenant}"


def settings_key(tenant: str) -> a.Item:
    return a.key(tenant_pk(tenant), SETTINGS_SK)


def settings_read(item: a.Item | None) -> "SettingsRead":
    """The settings a settings item holds (None: no item)."""
    return SettingsRead(a.unpacked(item["settings"]), item["settings"]) if item else SettingsRead(None, None)


def credential_grant_sk(provider: str) -> str:
    return f"CRED#{provider}"


def conversation_pk(tenant: str, conversation_id: str) -> str:
    return f"T#{tenant}#CONV#{conversation_id}"


def events_pk(tenant: str, hash_: str) -> str:
    return f"T#{tenant}#EV#{hash_}"


def waiter_key(tenant: str, interrupt: "OpenInterrupt") -> dict[str, Any] | None:
    if interrupt.kind != "external-event":
        return None
    data = interrupt.payload["data"]
    hash_ = correlation_hash(data["eventType"], data["correlation"])
    return a.key(events_pk(tenant, hash_), f"W#{interrupt.interruptId}")


def transition_items(transition: "Transition", now_iso: str) -> list[tuple[str, dict[str, Any]]]:
    """The HITL items one transition writes with the run: waiters opened/closed, conversation claims."""
    state = transition.state
    items: list[tuple[str, dict[str, Any]]] = []
    for interrupt in transition.opened:
        key = waiter_key(state.tenant, interrupt)
        if key is not None:
            item = {
                **key,
                "runId": a.s(state.runId),
                "nodeId": a.s(interrupt.nodeId),
                "interruptKey": a.s(interrupt.key),
                "raisedAt": a.s(interrupt.raisedAt),
            }
            items.append((key[wiring.SORT_KEY]["S"], {"Put": {"Item": item}}))
    for closed in transition.closed:
        key = waiter_key(state.tenant, closed.interrupt)
        if key is not None:
            # Marked closed (and swept by TTL a day later) rather than deleted: every role that commits a
            # transition already holds UpdateItem, so closing needs no further permission.
            update = {
                "Key": key,
                "UpdateExpression": "SET closedAt = :at, #ttl = :ttl",
                "ExpressionAttributeNames": {"#ttl": wiring.TTL_ATTRIBUTE},
                "ExpressionAttributeValues": {":at": a.s(now_iso), ":ttl": a.n(int(epoch_of(now_iso)) + CLOSED_WAITER_TTL_S)},
            }
            items.append((key[wiring.SORT_KEY]["S"], {"Update": update}))
    for conversation_id in transition.claims:
        item = {
            **a.key(conversation_pk(state.tenant, conversation_id), "CONV"),
            "runId": a.s(state.runId),
            "createdAt": a.s(now_iso),
        }
        # Tenant-unique: a second conversation with this id in the tenant cannot be written.
        put = {"Item": item, "ConditionExpression": "attribute_not_exists(pk)"}
        items.append(("CONV", {"Put": put}))
    return items


class SettingsRead(NamedTuple):
    """The tenant's settings as read (None: none stored), and their stored attribute (what a conditional write of
    settings merged onto them compares)."""

    settings: dict[str, Any] | None
    attribute: dict[str, Any] | None


def settings_put(
    tenant: str, settings: dict[str, Any], at: str, by: str, *, over: SettingsRead | None = None
) -> dict[str, Any]:
    """The tenant's settings as a TransactWriteItem (written with the audit entry that records the change). `over`:
    written only if the stored settings are still the ones read (a merge patch is merged onto what it read)."""
    item = {
        **a.key(tenant_pk(tenant), SETTINGS_SK),
        "settings": a.as_json(settings),
        "updatedAt": a.s(at),
        "updatedBy": a.s(by),
    }
    if over is None:
        return {"Put": {"Item": item}}
    if over.attribute is None:
        return {"Put": {"Item": item, "ConditionExpression": f"attribute_not_exists({wiring.PARTITION_KEY})"}}
    condition = {
        "ConditionExpression": "#settings = :read",
        "ExpressionAttributeNames": {"#settings": "settings"},
        "ExpressionAttributeValues": {":read": over.attribute},
    }
    return {"Put": {"Item": item, **condition}}


def grant_put(tenant: str, provider: str, scopes: list[str], at: str, by: str) -> dict[str, Any]:
    item = {
        **a.key(tenant_pk(tenant), credential_grant_sk(provider)),
        "scopes": a.as_json(sorted(set(scopes))),
        "grantedAt": a.s(at),
        "grantedBy": a.s(by),
    }
    return {"Put": {"Item": item}}


class InteractionStore:
    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    # -- tenant settings and credential grants -------------------------------------------------------

    def get_settings(self, tenant: str) -> dict[str, Any] | None:
        return self.read_settings(tenant).settings

    def read_settings(self, tenant: str, *, consistent: bool = False) -> SettingsRead:
        item = self.client.get_item(TableName=self.table, Key=settings_key(tenant), ConsistentRead=consistent).get("Item")
        return settings_read(item)

    def get_grant(self, tenant: str, provider: str) -> frozenset[str] | None:
        got = self.client.get_item(TableName=self.table, Key=a.key(tenant_pk(tenant), credential_grant_sk(provider)))
        item = got.get("Item")
        return frozenset(a.unpacked(item["scopes"])) if item else None

    def put_event(self, tenant: str, hash_: str, record: dict[str, Any], expires_at: int) -> str:
        sk = f"R#{record['receivedAt']}#{record['eventId']}"
        self.client.put_item(
            TableName=self.table,
            Item={
                **a.key(events_pk(tenant, hash_), sk),
                "record": a.as_json(record),
                "expiresAt": a.n(expires_at),
                wiring.TTL_ATTRIBUTE: a.n(expires_at),
            },
            ConditionExpression="attribute_not_exists(sk)",
        )
        return sk

    def _query(self, pk: str, prefix: str) -> list[dict[str, Any]]:
        pages = self.client.get_paginator("query").paginate(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :p)",
            ExpressionAttributeValues={":pk": a.s(pk), ":p": a.s(prefix)},
            # Strongly consistent: an event written before this read, or a waiter committed before it, is seen.
            ConsistentRead=True,
        )
        return [item for page in pages for item in page.get("Items") or []]

    def waiters(self, tenant: str, hash_: str) -> list[dict[str, str]]:
        return [
            {"runId": i["runId"]["S"], "nodeId": i["nodeId"]["S"], "interruptKey": i["interruptKey"]["S"]}
            for i in self._query(events_pk(tenant, hash_), "W#")
            if "closedAt" not in i
        ]

    def unconsumed_events(
        self, tenant: str, hash_: str, now_epoch: float, taken_by: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        """(sk, record) of kept events not past their retention and not yet used, oldest first; with `taken_by`, those
        that interrupt took and may not have used yet too (its handler went again after taking one)."""
        out = []
        for item in self._query(events_pk(tenant, hash_), "R#"):
            if float(item["expiresAt"]["N"]) <= now_epoch:
                continue  # TTL deletion is lazy: an expired item may still be there
            if "consumedBy" in item and (taken_by is None or item["consumedBy"].get("S") != taken_by):
                continue
            out.append((item["sk"]["S"], a.unpacked(item["record"])))
        return out

    def claim_event(self, tenant: str, hash_: str, sk: str, interrupt_id: str) -> bool:
        """Mark a kept event as used by one interrupt; False when another claim came first (the same interrupt's again
        is True)."""
        return conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(events_pk(tenant, hash_), sk),
            UpdateExpression="SET consumedBy = :by",
            ConditionExpression="attribute_exists(sk) AND (attribute_not_exists(consumedBy) OR consumedBy = :by)",
            ExpressionAttributeValues={":by": a.s(interrupt_id)},
        ) is not None

    def release_event(self, tenant: str, hash_: str, sk: str, interrupt_id: str) -> None:
        """Give back a kept event `interrupt_id` took and did not use (it refused it, or was closed otherwise): the next
        gate raised may take it. Nothing when another holds it."""
        conditionally(
            self.client.update_item,
            TableName=self.table,
            Key=a.key(events_pk(tenant, hash_), sk),
            UpdateExpression="REMOVE consumedBy",
            ConditionExpression="consumedBy = :by",
            ExpressionAttributeValues={":by": a.s(interrupt_id)},
        )
