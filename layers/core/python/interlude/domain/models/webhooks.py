"""Webhook subscriptions (OpenWOP webhooks.md; issue 14): request bodies, answers and the limits on them.

The limits are the documented ceilings of what one tenant may register (docs/limits.md); the request models
hold the per-subscription ones, the store the per-tenant count.
"""


import base64
import binascii
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from interlude.domain.models import Answer, Closed

# Subscriptions a tenant may hold at once (each one is a Secrets Manager secret and a query row per transition).
MAX_WEBHOOKS_PER_TENANT = 25
MAX_EVENTS_PER_WEBHOOK = 64
MAX_URL_LENGTH = 2048
MAX_TAGS_PER_WEBHOOK = 20
MAX_TAG_LENGTH = 128
# A caller's own secret: HMAC-SHA256 keys shorter than 16 characters are guessable, longer than 256 pointless.
MIN_SECRET_LENGTH = 16
MAX_SECRET_LENGTH = 256
# The dead-letter read (webhooks.deadLetter): how long a record stays readable, and the largest page.
DEAD_LETTER_RETENTION_DAYS = 14
DEAD_LETTER_MAX_PAGE = 100
# The previous secret keeps signing for this long after a rotation (webhooks.secretRotation.overlapSeconds).
ROTATION_OVERLAP_SECONDS = 24 * 3600
# The signature schemes this host signs with (discovery's webhooks.signatureAlgorithms; `v1` is required there).
SIGNATURE_ALGORITHMS = ("v1",)
# A Standard Webhooks secret: `whsec_` and the base64 of 24 to 64 bytes (webhooks.md §Standard Webhooks).
STANDARD_SECRET_PREFIX = "whsec_"
STANDARD_SECRET_BYTES = (24, 64)

Secret = Annotated[
    str, StringConstraints(min_length=MIN_SECRET_LENGTH, max_length=MAX_SECRET_LENGTH, pattern=r"^[\x21-\x7e]+$")
]


def _standard_webhooks_secret(value: str) -> str:
    low, high = STANDARD_SECRET_BYTES
    try:
        raw = base64.b64decode(value.removeprefix(STANDARD_SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not value.startswith(STANDARD_SECRET_PREFIX) or not low <= len(raw) <= high:
        raise ValueError(f"must be {STANDARD_SECRET_PREFIX}<base64 of {low} to {high} bytes>")
    return value


# What a rotation may switch to: a subscriber that takes the new secret at once verifies with it through the
# overlap only in the Standard Webhooks header (OpenWOP-Signature stays on the previous secret), so it has that form.
StandardWebhooksSecret = Annotated[Secret, AfterValidator(_standard_webhooks_secret)]
EventTypeName = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TAG_LENGTH)]


class RegisterWebhookRequest(Closed):
    url: str = Field(min_length=1, max_length=MAX_URL_LENGTH)
    # The filter: only events of these types are delivered (registered v2 names or vendor `<org>.<name>`).
    events: list[EventTypeName] = Field(min_length=1, max_length=MAX_EVENTS_PER_WEBHOOK)
    # Left out: the host generates one (`whsec_…`) and returns it once, in the 201 answer.
    secret: Secret | None = None
    # Only runs whose tags overlap these (RunOptions.tags) are delivered; left out: every run of the tenant.
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS_PER_WEBHOOK)
    # The schemes the subscriber asks for; only advertised ones (SIGNATURE_ALGORITHMS), `v1` among them.
    signatureAlgorithms: list[Annotated[str, StringConstraints(max_length=64)]] | None = Field(
        default=None, min_length=1, max_length=8
    )


class RotateWebhookSecretRequest(Closed):
    # The new secret (openwop-client sends one); left out, the host generates it and returns it in the answer.
    secret: StandardWebhooksSecret | None = None


class WebhookRegistered(Answer):
    """`webhookId` is the OpenAPI's name, `subscriptionId` openwop-client's: the same tenant-bound id."""

    webhookId: str
    subscriptionId: str
    url: str
    # Shown this once; only its Secrets Manager secret holds it afterwards.
    secret: str
    eventTypes: list[str]
    tags: list[str] | None = Field(default=None, exclude_if=lambda value: value is None)
    # The schemes applied (webhooks.md: "The 201 echoes the applied list").
    signatureAlgorithms: list[str]
    createdAt: str


class WebhookSecretRotated(Answer):
    rotatedAt: str
    previousSecretExpiresAt: str
    # Present only when the host generated the new secret (the request carried none).
    secret: str | None = Field(default=None, exclude_if=lambda value: value is None)


class DeadLetteredDelivery(Answer):
    """Names a delivery that will not be retried; never its body, its headers or the secret (RFC 0188 §B.1)."""

    deliveryId: str
    webhookId: str
    runId: str
    eventId: str
    eventType: str
    attempts: int = Field(ge=1)
    deadLetteredAt: str
    expiresAt: str
    reason: Literal["retries_exhausted", "payload_unprojectable"]
    lastStatus: int | None = Field(default=None, exclude_if=lambda value: value is None)


class WebhookDeadLetterPage(Answer):
    deliveries: list[DeadLetteredDelivery]
    nextCursor: str | None = Field(default=None, exclude_if=lambda value: value is None)
