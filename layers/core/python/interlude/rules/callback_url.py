"""The egress guard at createRun: a callbackUrl the guard refuses is a 400 validation_error on field callbackUrl."""

from __future__ import annotations

from interlude.config.delivery import delivery_settings
from interlude.domain.errors import Invalid
from interlude.rules.egress import EgressRefused, Resolver, check_url

# Every refused destination reads the same to the tenant, whatever the reason (no oracle of internal DNS).
_DESTINATION_REASONS = {"address_not_global", "unresolvable"}


def check_callback_url(url: str, resolve: Resolver | None = None) -> str:
    try:
        check_url(url, resolve=resolve, allow_loopback=delivery_settings().allow_loopback)
    except EgressRefused as refused:
        if refused.reason in _DESTINATION_REASONS:
            reason, message = "destination_denied", "callbackUrl must name a publicly reachable https destination"
        else:
            reason, message = refused.reason, f"callbackUrl is refused: {refused.message}"
        raise Invalid(message, {"field": "callbackUrl", "reason": reason}) from None
    return url
