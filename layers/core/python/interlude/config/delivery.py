"""Callback delivery settings: the callbacks worker's, and what the API tells a run's caller about delivery.

INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS is a development-only switch: on, the egress guard admits http:// and
loopback receivers (demos and tests on one machine). It is off by default and the deployed stack never sets it.
"""

from __future__ import annotations

from interlude import wiring
from interlude.config.reading import EnvironmentSettings, base_url, cached, setting

DEV_ALLOW_LOOPBACK_ENV = "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS"
PUBLIC_BASE_URL_ENV = "PUBLIC_BASE_URL"
# Bound of one attempt, connect included (the callbacks function's timeout is sized from it and the batch size).
DEFAULT_TOTAL_TIMEOUT_S = 15.0
WEBHOOK_SECRET_PREFIX_ENV = "WEBHOOK_SECRET_PREFIX"
SUBSCRIPTION_SECRET_PREFIX_ENV = "SUBSCRIPTION_SECRET_PREFIX"
# SQS caps a message's visibility timeout (the backoff's vehicle) at 12 h.
MAX_VISIBILITY_S = 12 * 3600.0


class DeliverySettings(EnvironmentSettings):
    queue_url: str = setting(wiring.queue("callbacks").url_env, default="")
    dlq_url: str = setting(wiring.queue("callbacks-dlq").url_env, default="")
    public_base_url: str = setting(PUBLIC_BASE_URL_ENV, default="", parse=base_url)
    # A tenant's signing secret is `{secret_prefix}{tenant}`; a webhook subscription's, under its own prefix.
    secret_prefix: str = setting(WEBHOOK_SECRET_PREFIX_ENV, default=wiring.SECRET_PREFIXES[WEBHOOK_SECRET_PREFIX_ENV])
    subscription_secret_prefix: str = setting(
        SUBSCRIPTION_SECRET_PREFIX_ENV, default=wiring.SECRET_PREFIXES[SUBSCRIPTION_SECRET_PREFIX_ENV]
    )
    allow_loopback: bool = setting(DEV_ALLOW_LOOPBACK_ENV, default=False)
    max_attempts: int = setting("INTERLUDE_CALLBACK_MAX_ATTEMPTS", default=wiring.CALLBACK_MAX_ATTEMPTS, at_least=1)
    # Backoff before attempt n+1: min(cap, base * 2**(n-1)), with "equal jitter" (half fixed, half random).
    backoff_base_s: float = setting("INTERLUDE_CALLBACK_BACKOFF_BASE_S", default=30.0)
    backoff_cap_s: float = setting("INTERLUDE_CALLBACK_BACKOFF_CAP_S", default=4 * 3600.0, at_most=MAX_VISIBILITY_S)
    connect_timeout_s: float = setting("INTERLUDE_CALLBACK_CONNECT_TIMEOUT_S", default=5.0)
    total_timeout_s: float = setting("INTERLUDE_CALLBACK_TOTAL_TIMEOUT_S", default=DEFAULT_TOTAL_TIMEOUT_S)
    max_response_bytes: int = setting("INTERLUDE_CALLBACK_MAX_RESPONSE_BYTES", default=64 * 1024)
    # The CA bundle TLS verifies against (None: the system store).
    ca_file: str | None = setting("INTERLUDE_CALLBACK_CA_FILE", default=None)


delivery_settings = cached(DeliverySettings.from_env)
