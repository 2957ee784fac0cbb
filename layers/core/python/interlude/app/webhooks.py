"""Webhook subscriptions (OpenWOP webhooks.md; issue 14): register, unregister, rotate the secret, read dead letters.

A subscription is tenant-wide: every run of its tenant feeds it (filtered by event type and, optionally, run
tags). Deliveries go through the callback pipeline (interlude.adapters.delivery): the dispatch outbox queues
them on the callbacks queue, the callbacks worker signs and sends them.
"""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, timedelta
from typing import TYPE_CHECKING, Any

from interlude.domain.clock import iso
from interlude.domain.errors import Forbidden, Invalid, NotFound
from interlude.domain.ids import mint_opaque, tenant_bound, tenant_of
from interlude.domain.models.webhooks import (
    MAX_WEBHOOKS_PER_TENANT,
    ROTATION_OVERLAP_SECONDS,
    RegisterWebhookRequest,
    RotateWebhookSecretRequest,
)
from interlude.rules.auth import Principal
from interlude.rules.webhooks import check_event_types, check_webhook_url

if TYPE_CHECKING:
    from interlude.app.service import Service

SECRET_BYTES = 32


def new_secret() -> str:
    # Standard Webhooks' form, so deliveries can carry its headers beside OpenWOP's v1 signature.
    return "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def register(service: Service, principal: Principal, request: RegisterWebhookRequest) -> dict[str, Any]:
    url = check_webhook_url(request.url, service.callback_resolver)
    events = check_event_types(request.events)
    webhook_id = tenant_bound(principal.tenant, mint_opaque())
    secret = request.secret or new_secret()
    created_at = iso(service.clock())
    record: dict[str, Any] = {"webhookId": webhook_id, "url": url, "events": events, "createdAt": created_at}
    if request.tags:
        record["tags"] = list(dict.fromkeys(request.tags))
    record["createdBy"] = principal.subject.get("subjectId")
    # The secret first: a subscription the worker finds always has one. A refused put leaves none behind.
    service.webhook_secrets.create(webhook_id, {"current": secret, "previous": []})
    try:
        service.webhooks.put(record, MAX_WEBHOOKS_PER_TENANT)
    except BaseException:
        service.webhook_secrets.delete(webhook_id)
        raise
    answer = {
        "webhookId": webhook_id,
        "subscriptionId": webhook_id,
        "url": url,
        "secret": secret,
        "eventTypes": events,
        "createdAt": created_at,
    }
    if "tags" in record:
        answer["tags"] = record["tags"]
    return answer


def owned(principal: Principal, webhook_id: str) -> str:
    """The id, once it is known to be of the caller's tenant (checked before any lookup)."""
    if tenant_of(webhook_id) != principal.tenant:
        raise Forbidden("the webhook id belongs to another tenant", code="id_tenant_mismatch")
    return webhook_id


def subscription(service: Service, principal: Principal, webhook_id: str) -> dict[str, Any]:
    found = service.webhooks.get(owned(principal, webhook_id))
    if found is None:
        raise NotFound("no such webhook subscription")
    return found


def unregister(service: Service, principal: Principal, webhook_id: str) -> None:
    if service.webhooks.delete(owned(principal, webhook_id)) is None:
        raise NotFound("no such webhook subscription")
    # The worker reads the subscription before every delivery: none is sent from here on, whatever is queued.
    service.webhook_secrets.delete(webhook_id)


def rotate(
    service: Service, principal: Principal, webhook_id: str, request: RotateWebhookSecretRequest
) -> dict[str, Any]:
    subscription(service, principal, webhook_id)
    value = service.webhook_secrets.read(webhook_id)
    if value is None:
        raise NotFound("no such webhook subscription")
    now = service.clock()
    until = now + timedelta(seconds=ROTATION_OVERLAP_SECONDS)
    previous = [p for p in value.get("previous", []) if float(p["until"]) > now.timestamp()]
    if request.secret is not None and request.secret in (value["current"], *(p["secret"] for p in previous)):
        raise Invalid("the new secret must differ from the secrets in use", {"field": "secret"})
    previous.insert(0, {"secret": value["current"], "until": int(until.timestamp())})
    secret = request.secret or new_secret()
    service.webhook_secrets.replace(webhook_id, {"current": secret, "previous": previous})
    answer = {"rotatedAt": iso(now), "previousSecretExpiresAt": iso(until.astimezone(UTC))}
    if request.secret is None:
        answer["secret"] = secret
    return answer


def dead_letters(
    service: Service, principal: Principal, webhook_id: str, limit: int, cursor: str | None
) -> dict[str, Any]:
    subscription(service, principal, webhook_id)
    now_iso = iso(service.clock())
    try:
        records, after = service.webhooks.dead_letters(webhook_id, limit, cursor, now_iso)
    except ValueError:
        raise Invalid("cursor is not one this listing issued", {"field": "cursor"}) from None
    page: dict[str, Any] = {"deliveries": records}
    if after is not None:
        page["nextCursor"] = after
    return page
