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
MAX_ATTEMPTS_ENV = "INTERLUDE_CALLBACK_MAX_ATTEMPTS"
BACKOFF_CAP_ENV = "INTERLUDE_CALLBACK_BACKOFF_CAP_S"
CALLBACKS_QUEUE = wiring.queue("callbacks")
# A notice's round of attempts runs within the receives SQS allows its message before redriving it (the worker's
# receive budget, adapters/delivery/worker.MAX_RECEIVES): a round that cannot fit in a fresh message's receives would
# be given up before its last attempts, so more attempts than that stop the cold start.
MAX_ATTEMPTS_BOUND = CALLBACKS_QUEUE.max_receive_count


def callback_max_attempts(raw: str) -> int:
    try:
        attempts = int(raw)
    except ValueError:
        raise ValueError("not a whole number") from None
    if attempts > MAX_ATTEMPTS_BOUND:
        raise ValueError(
            f"at most {MAX_ATTEMPTS_BOUND} (the callbacks queue's receives before its dead letters), not {attempts}"
        )
    return attempts


# The longest a message's rounds may wait in all: its retention, less one visibility timeout (one receive lost to an
# invocation that died comes back only after it).
WAITS_WITHIN_S = CALLBACKS_QUEUE.retention_s - CALLBACKS_QUEUE.visibility_timeout_s


def worst_case_wait_s(attempts: int, backoff_cap_s: float) -> float:
    """The longest a notice's round can wait between its attempts: every wait at the cap, as a receiver's Retry-After
    can hold each one (adapters/leased_work)."""
    return (attempts - 1) * backoff_cap_s


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
    max_attempts: int = setting(
        MAX_ATTEMPTS_ENV, default=wiring.CALLBACK_MAX_ATTEMPTS, parse=callback_max_attempts, at_least=1
    )
    # Backoff before attempt n+1: min(cap, base * 2**(n-1)), with "equal jitter" (half fixed, half random).
    backoff_base_s: float = setting("INTERLUDE_CALLBACK_BACKOFF_BASE_S", default=30.0)
    backoff_cap_s: float = setting(BACKOFF_CAP_ENV, default=4 * 3600.0, at_most=MAX_VISIBILITY_S)
    connect_timeout_s: float = setting("INTERLUDE_CALLBACK_CONNECT_TIMEOUT_S", default=5.0)
    total_timeout_s: float = setting("INTERLUDE_CALLBACK_TOTAL_TIMEOUT_S", default=DEFAULT_TOTAL_TIMEOUT_S)
    max_response_bytes: int = setting("INTERLUDE_CALLBACK_MAX_RESPONSE_BYTES", default=64 * 1024)
    # The CA bundle TLS verifies against (None: the system store).
    ca_file: str | None = setting("INTERLUDE_CALLBACK_CA_FILE", default=None)

    def conflicts(self) -> list[str]:
        # A round whose waits outlast its message's retention loses its last attempts with the message: refused, not
        # clamped, for either setting could be the one to lower and the operator chose both. (A bundle's later notice
        # whose round would outlast its message goes on in a copy of it: adapters/delivery/worker._round_fits.)
        wait = worst_case_wait_s(self.max_attempts, self.backoff_cap_s)
        if wait <= WAITS_WITHIN_S:
            return []
        return [
            f"{MAX_ATTEMPTS_ENV}={self.max_attempts} with {BACKOFF_CAP_ENV}={self.backoff_cap_s:g}: their worst-case "
            f"wait ({self.max_attempts - 1} x {self.backoff_cap_s:g} s = {wait:g} s) must be at most {WAITS_WITHIN_S} s, "
            "the callbacks queue's message retention less one visibility timeout; lower either"
        ]


delivery_settings = cached(DeliverySettings.from_env)
