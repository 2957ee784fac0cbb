"""Webhook subscription deliveries (issue 14) on the callback pipeline: the queued message, and what the callbacks
worker sends for it (the dispatch outbox's handler is subscription_outbox, which this worker never imports).

The queued message names the delivery (subscription, run, event sequence); the worker reads the subscription (gone:
nothing is sent) and the event as persisted when it sends, so a message stays small whatever the event holds and
an unregistered subscription receives nothing more. Signed with OpenWOP's `v1` scheme (HMAC-SHA256 of
`{timestamp}.{body}` with the subscription secret, the five `OpenWOP-*` headers) and, when the secret has Standard
Webhooks' `whsec_` form, also with Standard Webhooks headers (the `standardwebhooks` package), as callbacks are.
Through a rotation's overlap `OpenWOP-Signature` stays on the previous secret and `webhook-signature` carries an
entry for each of the two (webhooks.md §Rotation).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from standardwebhooks import Webhook

from interlude.adapters.subscription_secrets import SubscriptionSecrets
from interlude.domain.clock import iso
from interlude.domain.expiring import ExpiringCache
from interlude.domain.ids import tenant_bound, tenant_of
from interlude.rules.webhooks import delivery_body, delivery_opaque, signing_secrets
from interlude.store import layout
from interlude.store.layout import marked_message

MESSAGE_KIND = "webhook"
SIGNATURE_ALGORITHM = "v1"
CACHE_SECONDS = 60.0
# Entries a warm worker keeps (every tenant's subscriptions at most 25 each; a rotation adds one).
MAX_CACHED_SECRETS = 4096


def webhook_message(webhook_id: str, run_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """A subscription's delivery of an event, naming the table its record is written in (store/layout.py; a replay
    names the one it found the record in instead)."""
    message = {
        "v": 1,
        "kind": MESSAGE_KIND,
        "tenant": tenant_of(webhook_id),
        "webhookId": webhook_id,
        "runId": run_id,
        "sequence": event["sequence"],
        "eventId": event["eventId"],
        "eventType": event["type"],
        "deliveryId": delivery_opaque(webhook_id, run_id, event["sequence"]),
    }
    return marked_message(message, layout.DELIVERY_RECORDS.written)


def v1_signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def delivery_headers(
    message: dict[str, Any], v1_secret: str, secrets: list[str], timestamp: int, body: bytes
) -> dict[str, str]:
    """OpenWOP's five headers signed with `v1_secret`; Standard Webhooks' with each of `secrets` in `whsec_` form
    (rules.webhooks.signing_secrets chooses both)."""
    headers = {
        "OpenWOP-Webhook-Id": message["webhookId"],
        "OpenWOP-Event-Type": message["eventType"],
        "OpenWOP-Timestamp": str(timestamp),
        "OpenWOP-Signature": v1_signature(v1_secret, timestamp, body),
        "OpenWOP-Signature-Algorithm": SIGNATURE_ALGORITHM,
    }
    moment = datetime.fromtimestamp(timestamp, UTC)
    signatures = []
    for secret in secrets:
        try:
            signatures.append(Webhook(secret).sign(msg_id=message["deliveryId"], timestamp=moment, data=body.decode()))
        except Exception:  # a caller's own secret not in whsec_ form: OpenWOP's v1 signature alone
            continue
    if signatures:
        headers.update(
            {
                "webhook-id": message["deliveryId"],
                "webhook-timestamp": str(timestamp),
                "webhook-signature": " ".join(signatures),
            }
        )
    return headers


def delivery_bytes(run_id: str, event: dict[str, Any]) -> bytes:
    return json.dumps(delivery_body(run_id, event), separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def dead_letter_record(
    message: dict[str, Any], attempts: int, reason: str, last_status: int | None, now: float
) -> dict[str, Any]:
    """RFC 0188's record: names the delivery; no body, no headers, no secret."""
    # The webhook models (and pydantic) load with the first dead letter, not with the callbacks function.
    from interlude.domain.models.webhooks import DEAD_LETTER_RETENTION_DAYS

    dead_at = datetime.fromtimestamp(now, UTC)
    record: dict[str, Any] = {
        "deliveryId": tenant_bound(message["tenant"], message["deliveryId"]),
        "webhookId": message["webhookId"],
        "runId": message["runId"],
        "eventId": message["eventId"],
        "eventType": message["eventType"],
        "attempts": max(1, attempts),
        "deadLetteredAt": iso(dead_at),
        "expiresAt": iso(dead_at + timedelta(days=DEAD_LETTER_RETENTION_DAYS)),
        "reason": reason,
    }
    if last_status is not None:
        record["lastStatus"] = last_status
    return record


class SubscriptionSecretCache:
    """Per-process cache of subscriptions' stored secrets, by (subscription, version).

    The worker reads the subscription before every delivery, and the subscription names the secret's version in
    force: a rotation is in effect from the first delivery after it, whatever this cache holds. A version never
    changes, so an entry is stale only for a subscription whose item names none (kept at most `max_age_s`)."""

    def __init__(self, secrets: SubscriptionSecrets, max_age_s: float = CACHE_SECONDS) -> None:
        self.secrets = secrets
        self.max_age_s = max_age_s
        self._cache: ExpiringCache[tuple[str, str | None], dict[str, Any] | None] = ExpiringCache(
            MAX_CACHED_SECRETS, time.monotonic
        )

    def signing(self, subscription: dict[str, Any], now: float) -> tuple[str, list[str]]:
        """(OpenWOP-Signature's secret, Standard Webhooks' secrets) of the stored `subscription` at `now`
        (rules.webhooks.signing_secrets)."""
        key = (self.secrets.name_of(subscription), subscription.get("secretVersion"))
        value = self._cache.fresh_or_read(key, lambda: self.secrets.read(*key), self.max_age_s)
        if value is None:
            raise LookupError("the subscription has no secret")
        return signing_secrets(value, now)
