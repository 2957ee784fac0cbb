"""Webhook subscriptions (OpenWOP webhooks.md; issue 14): register, unregister, rotate the secret, read dead letters.

A subscription is tenant-wide: every run of its tenant feeds it (filtered by event type and, optionally, run
tags). Deliveries go through the callback pipeline (interlude.adapters.delivery): the dispatch outbox queues
them on the callbacks queue, the callbacks worker signs and sends them.
"""

from __future__ import annotations

import base64
import math
import secrets
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from interlude.domain.clock import iso
from interlude.domain.errors import Conflict, Forbidden, Invalid, NotFound
from interlude.domain.ids import mint_opaque, tenant_bound, tenant_of
from interlude.domain.models.webhooks import (
    MAX_WEBHOOKS_PER_TENANT,
    ROTATION_OVERLAP_SECONDS,
    SIGNATURE_ALGORITHMS,
    RegisterWebhookRequest,
    RotateWebhookSecretRequest,
)
from interlude.rules.auth import Principal
from interlude.rules.webhooks import (
    check_event_types,
    check_signature_algorithms,
    check_webhook_url,
    live_previous,
)

if TYPE_CHECKING:
    from interlude.app.ports import HostResolver, SubscriptionSecrets, WebhookRecords
    from interlude.domain.clock import Clock

SECRET_BYTES = 32
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def new_secret() -> str:
    # Standard Webhooks' form, so deliveries can carry its headers beside OpenWOP's v1 signature.
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def owned(principal: Principal, webhook_id: str) -> str:
    """The id, once it is known to be of the caller's tenant (checked before any lookup)."""
    if tenant_of(webhook_id) != principal.tenant:
        raise Forbidden("the webhook id belongs to another tenant", code="id_tenant_mismatch")
    return webhook_id


class Webhooks:
    def __init__(
        self, records: WebhookRecords, secrets: SubscriptionSecrets, clock: Clock, resolver: HostResolver | None = None
    ) -> None:
        self.records = records
        self.secrets = secrets
        self.clock = clock
        # The URL guard's host-name resolver (None: getaddrinfo).
        self.resolver = resolver

    def register(self, principal: Principal, request: RegisterWebhookRequest) -> dict[str, Any]:
        url = check_webhook_url(request.url, self.resolver)
        events = check_event_types(request.events)
        algorithms = check_signature_algorithms(request.signatureAlgorithms, SIGNATURE_ALGORITHMS)
        webhook_id = tenant_bound(principal.tenant, mint_opaque())
        secret = request.secret or new_secret()
        created_at = iso(self.clock())
        record: dict[str, Any] = {"webhookId": webhook_id, "url": url, "events": events, "createdAt": created_at}
        if request.tags:
            record["tags"] = list(dict.fromkeys(request.tags))
        record["createdBy"] = principal.subject.get("subjectId")
        record["signatureAlgorithms"] = algorithms
        record["secretName"] = name = self.secrets.name(webhook_id)
        # The secret first: a subscription the worker finds always has one. A refused put leaves none behind.
        version = self.secrets.create(name, {"current": secret, "previous": []})
        try:
            self.records.put(record, version, MAX_WEBHOOKS_PER_TENANT)
        except BaseException:
            self.secrets.delete(name)
            raise
        answer = {
            "webhookId": webhook_id,
            "subscriptionId": webhook_id,
            "url": url,
            "secret": secret,
            "eventTypes": events,
            "signatureAlgorithms": algorithms,
            "createdAt": created_at,
        }
        if "tags" in record:
            answer["tags"] = record["tags"]
        return answer

    def subscription(self, principal: Principal, webhook_id: str) -> dict[str, Any]:
        found = self.records.get(owned(principal, webhook_id))
        if found is None:
            raise NotFound("no such webhook subscription")
        return found

    def unregister(self, principal: Principal, webhook_id: str) -> None:
        found = self.subscription(principal, webhook_id)
        if self.records.delete(webhook_id) is None:
            raise NotFound("no such webhook subscription")
        # The worker reads the subscription before every delivery: none is sent from here on, whatever is queued.
        self.secrets.delete(self.secrets.name_of(found))

    def rotate(
        self, principal: Principal, webhook_id: str, request: RotateWebhookSecretRequest
    ) -> dict[str, Any]:
        """A new secret; the one it replaces keeps signing for ROTATION_OVERLAP_SECONDS (webhooks.md §Rotation).

        Refused while the previous rotation's overlap lasts: its subscribers were promised the older secret until
        then, and a third live secret is never kept (at most two sign a delivery)."""
        found = self.subscription(principal, webhook_id)
        version = found.get("secretVersion")
        name = self.secrets.name_of(found)
        value = self.secrets.read(name, version)
        if value is None:
            raise NotFound("no such webhook subscription")
        now = self.clock()
        previous = live_previous(value, now.timestamp())
        if previous is not None:
            raise _rotation_in_overlap(now, float(previous["until"]))
        if request.secret is not None and request.secret == value["current"]:
            raise Invalid("the new secret must differ from the secret in use", {"field": "secret"})
        # The instant the answer names, to the millisecond: the old secret signs until then, never less.
        expires = now.replace(microsecond=now.microsecond // 1000 * 1000) + timedelta(seconds=ROTATION_OVERLAP_SECONDS)
        until = expires.timestamp()
        secret = request.secret or new_secret()
        rotated = self.secrets.replace(
            name, {"current": secret, "previous": [{"secret": value["current"], "until": until}]}
        )
        # In force from here on: the worker signs with the version the subscription names.
        if not self.records.move_secret_version(webhook_id, rotated, version):
            if self.records.get(webhook_id) is None:
                raise NotFound("no such webhook subscription")
            raise _rotation_in_overlap(now, until)
        answer = {"rotatedAt": iso(now), "previousSecretExpiresAt": iso(expires)}
        if request.secret is None:
            answer["secret"] = secret
        return answer

    def dead_letters(
        self, principal: Principal, webhook_id: str, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        self.subscription(principal, webhook_id)
        now_iso = iso(self.clock())
        try:
            records, after = self.records.dead_letters(webhook_id, limit, cursor, now_iso)
        except ValueError:
            raise Invalid("cursor is not one this listing issued", {"field": "cursor"}) from None
        page: dict[str, Any] = {"deliveries": records}
        if after is not None:
            page["nextCursor"] = after
        return page


def _rotation_in_overlap(now: datetime, until: float) -> Conflict:
    expires = iso(EPOCH + timedelta(milliseconds=round(until * 1000)))
    return Conflict(
        f"the previous secret signs until {expires}; the secret can be rotated again from then on",
        {"previousSecretExpiresAt": expires},
        code="interlude.rotation_in_overlap",
        retry_after_s=max(1, math.ceil(until - now.timestamp())),
    )
