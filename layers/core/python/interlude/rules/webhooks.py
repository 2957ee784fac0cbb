"""Webhook subscriptions, the pure part (OpenWOP webhooks.md): which URL and event types a subscription may name,
which events it receives, and the delivery's identity and body. Delivery itself is interlude.adapters.delivery.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from interlude.config.delivery import delivery_settings
from interlude.domain import schemas
from interlude.domain.errors import Invalid
from interlude.domain.ids import derive_opaque, tenant_bound, tenant_of
from interlude.rules.egress import EgressRefused, Resolver, check_url

# Every refused destination reads the same, whatever the reason (no oracle of internal DNS).
_DESTINATION_REASONS = {"address_not_global", "unresolvable"}


def check_webhook_url(url: str, resolve: Resolver | None = None) -> str:
    """The registration guard: https (loopback http only in the development stack), a public destination."""
    try:
        check_url(url, resolve=resolve, allow_loopback=delivery_settings().allow_loopback)
    except EgressRefused as refused:
        if refused.reason in _DESTINATION_REASONS:
            reason, message = "destination_denied", "url must name a publicly reachable https destination"
        else:
            reason, message = refused.reason, f"url is refused: {refused.message}"
        raise Invalid(message, {"field": "url", "reason": reason}, code="webhook_url_rejected") from None
    return url


@cache
def _event_type_grammar() -> tuple[frozenset[str], re.Pattern[str]]:
    # run-event.schema.json's `type`: a registered name, or a vendor event `<org>.<name>` (openwop. reserved).
    registered, vendor = schemas.load("run-event.schema.json")["properties"]["type"]["anyOf"]
    return frozenset(registered["enum"]), re.compile(vendor["pattern"])


def check_event_types(events: list[str]) -> list[str]:
    """The subscription's filter, deduplicated in order; an unknown shape of name is a 400 naming it."""
    registered, vendor = _event_type_grammar()
    for index, name in enumerate(events):
        if name not in registered and not vendor.match(name):
            raise Invalid(f"events[{index}] is not a v2 event type name: {name!r}", {"field": f"events[{index}]"})
    return list(dict.fromkeys(events))


def wants(subscription: dict[str, Any], event_type: str, run_tags: list[str] | None) -> bool:
    """Whether `subscription` receives an event of `event_type` from a run tagged `run_tags`.

    `run_tags` is None when the run was not read (no subscription with a tag filter wanted this type)."""
    if event_type not in subscription["events"]:
        return False
    tags = subscription.get("tags")
    return not tags or bool(set(tags) & set(run_tags or ()))


def delivery_opaque(webhook_id: str, run_id: str, sequence: int) -> str:
    """Stable per (subscription, run, event): every attempt and every duplicate queue message is one delivery."""
    return "whd_" + derive_opaque("webhook-delivery", webhook_id, run_id, str(sequence))


def delivery_id(webhook_id: str, run_id: str, sequence: int) -> str:
    return tenant_bound(tenant_of(webhook_id), delivery_opaque(webhook_id, run_id, sequence))


def delivery_body(run_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """`{runId, event}` (webhook-delivery.schema.json): the event as persisted, the run id tenant-bound.

    No `workspaceId`: a run here has no workspace (its owner is a tenant and a subject), and the tenant never
    stands in for one."""
    return {"runId": run_id, "event": event}
