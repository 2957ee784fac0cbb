"""The egress guard at the API edge: a callbackUrl at createRun (a refusal is a 400 validation_error on field
callbackUrl), and a core.http node's URL written without a template when its definition is registered."""

from __future__ import annotations

from collections.abc import Iterable

from interlude.config.delivery import delivery_settings
from interlude.domain.errors import Invalid
from interlude.rules.egress import UNRESOLVED, EgressRefused, Resolver, check_url, refusal_without_lookup

# Every refused destination reads the same to the tenant, whatever the reason (no oracle of internal DNS).
_DESTINATION_REASONS = {"address_not_global", UNRESOLVED}


def check_callback_url(url: str, resolve: Resolver | None = None) -> str:
    try:
        check_url(url, resolve=resolve, allow_loopback=delivery_settings().allow_loopback)
    except EgressRefused as refused:
        reason, message = refusal_words(refused, "callbackUrl")
        raise Invalid(message, {"field": "callbackUrl", "reason": reason}) from None
    return url


def action_url_problems(urls: Iterable[tuple[int, object]]) -> list[dict[str, str]]:
    """Registration's problems with core.http nodes' URLs, `(node index, its config's url)`, those written without a
    template: what the guard refuses before any lookup (its scheme, its form, an address, a local name). A host name
    is resolved, and a templated URL judged, when the call is made."""
    allow_loopback = delivery_settings().allow_loopback
    problems = []
    for index, url in urls:
        if not isinstance(url, str) or "{{" in url:
            continue
        refused = refusal_without_lookup(url, allow_loopback=allow_loopback)
        if refused is not None:
            problems.append({"path": f"nodes/{index}/config/url", "message": refusal_words(refused, "url")[1]})
    return problems


def refusal_words(refused: EgressRefused, field: str) -> tuple[str, str]:
    """(reason, message) the tenant reads of a refused `field`."""
    if refused.reason in _DESTINATION_REASONS:
        return "destination_denied", f"{field} must name a publicly reachable https destination"
    return refused.reason, f"{field} is refused: {refused.message}"
