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
from interlude.rules.callback_url import refusal_words
from interlude.rules.egress import EgressRefused, Resolver, check_url


def check_webhook_url(url: str, resolve: Resolver | None = None) -> str:
    """The registration guard: https (loopback http only in the development stack), a public destination."""
    try:
        check_url(url, resolve=resolve, allow_loopback=delivery_settings().allow_loopback)
    except EgressRefused as refused:
        reason, message = refusal_words(refused, "url")
        raise Invalid(message, {"field": "url", "reason": reason}, code="webhook_url_rejected") from None
    return url


# The vendor organisation this host declares: the vendor events it emits are `interlude.<name>` (engine/), and a
# subscription may name no other organisation's, which it would never receive.
VENDOR_PREFIX = "interlude."


@cache
def _event_type_grammar() -> tuple[frozenset[str], frozenset[str], re.Pattern[str]]:
    # run-event.schema.json's `type`: a registered name, or a vendor event `<org>.<name>` (openwop. reserved).
    registered, vendor = schemas.load("run-event.schema.json")["properties"]["type"]["anyOf"]
    names = frozenset(registered["enum"])
    return names, frozenset(name.split(".", 1)[0] for name in names), re.compile(vendor["pattern"])


def check_event_types(events: list[str]) -> list[str]:
    """The subscription's filter, deduplicated in order. Refused (a 400 naming every such name): a name of no v2
    shape, a name of a registered family (`interrupt.`, `run.`, …) that is not a registered type (a typo would
    never match), and a vendor name outside this host's vendor prefix."""
    registered, families, vendor = _event_type_grammar()
    refused: dict[str, str] = {}
    for index, name in enumerate(events):
        if name in registered:
            continue
        if name.split(".", 1)[0] in families:
            refused[f"events[{index}]"] = f"{name!r} is not a registered type of its family"
        elif not vendor.fullmatch(name):
            refused[f"events[{index}]"] = f"{name!r} is not a v2 event type name"
        elif not name.startswith(VENDOR_PREFIX):
            refused[f"events[{index}]"] = f"{name!r} is a vendor type outside this host's prefix {VENDOR_PREFIX!r}"
    if refused:
        raise Invalid(
            "; ".join(f"{field}: {why}" for field, why in refused.items()),
            {"field": next(iter(refused)), "errors": [{"path": f, "message": why} for f, why in refused.items()]},
        )
    return list(dict.fromkeys(events))


def check_signature_algorithms(requested: list[str] | None, advertised: tuple[str, ...]) -> list[str]:
    """The schemes a subscription is signed with: what it asks for, each advertised and `v1` among them (all
    advertised ones when it asks for none). Refused: a 400 naming the first offending entry."""
    if requested is None:
        return list(advertised)
    for index, name in enumerate(requested):
        if name not in advertised:
            raise Invalid(
                f"signatureAlgorithms[{index}]: {name!r} is not a scheme this host signs with ({', '.join(advertised)})",
                {"field": f"signatureAlgorithms[{index}]", "advertised": list(advertised)},
            )
    if "v1" not in requested:
        raise Invalid("signatureAlgorithms must list v1", {"field": "signatureAlgorithms"})
    return list(dict.fromkeys(requested))


def live_previous(value: dict[str, Any], now: float) -> dict[str, Any] | None:
    """The previous secret of a subscription's stored secret while the last rotation's overlap lasts, else None.

    At most one previous secret is ever live (a rotation is refused while one is): a secret written by an older
    version of this host may list more, newest first, and only the newest counts."""
    previous = value.get("previous") or []
    if previous and float(previous[0]["until"]) > now:
        return dict(previous[0])
    return None


def signing_secrets(value: dict[str, Any], now: float) -> tuple[str, list[str]]:
    """(the secret `OpenWOP-Signature` is keyed with, the secrets `webhook-signature` carries one entry each for).

    webhooks.md §Rotation: "For overlapSeconds after a rotation, webhook-signature MUST carry one entry per secret
    and OpenWOP-Signature stays on the previous secret; afterwards only the new secret signs."""
    previous = live_previous(value, now)
    if previous is None:
        return value["current"], [value["current"]]
    return previous["secret"], [value["current"], previous["secret"]]


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
