"""Callback delivery settings: the callbacks worker's, and what the API tells a run's caller about delivery.

INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS is a development-only switch: on, the egress guard admits http:// and
loopback receivers (demos and tests on one machine). It is off by default and the deployed stack never sets it.
"""

from __future__ import annotations

from collections.abc import Callable

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


def attempts_within(queue: wiring.Queue) -> Callable[[str], int]:
    """A max-attempts setting's parser for the work `queue` carries: a round of attempts runs within the receives SQS
    allows its message before redriving it (the callbacks worker's receive budget, adapters/delivery/worker.
    MAX_RECEIVES; the notifications worker's likewise), so a round that cannot fit in a fresh message's receives would
    be given up before its last attempts: more attempts than that stop the cold start."""
    bound = queue.max_receive_count

    def parse(raw: str) -> int:
        try:
            attempts = int(raw)
        except ValueError:
            raise ValueError("not a whole number") from None
        if attempts > bound:
            raise ValueError(
                f"at most {bound} (the {queue.name} queue's receives before its dead letters), not {attempts}"
            )
        return attempts

    return parse


def waits_within_s(queue: wiring.Queue) -> int:
    """The longest a message's rounds may wait in all: its retention, less one visibility timeout (one receive lost to
    an invocation that died comes back only after it)."""
    return queue.retention_s - queue.visibility_timeout_s


WAITS_WITHIN_S = waits_within_s(CALLBACKS_QUEUE)


def worst_case_wait_s(attempts: int, backoff_cap_s: float) -> float:
    """The longest a round can wait between its attempts: every wait at the cap, as a receiver's Retry-After can hold
    each one (adapters/leased_work)."""
    return (attempts - 1) * backoff_cap_s


def waits_outlasting(
    queue: wiring.Queue, attempts: tuple[str, int], backoff_cap: tuple[str, float], *, attempts_settable: bool = True
) -> list[str]:
    """The conflict, naming both settings and how far to lower each, when a round of `attempts` waiting `backoff_cap`
    each time would outlast its message in `queue`: its last attempts would be lost with the message. Refused, not
    clamped, for either setting could be the one to lower and the operator chose both (only the cap, when the
    attempts are not the operator's: `attempts_settable`)."""
    (attempts_name, count), (cap_env, cap) = attempts, backoff_cap
    wait, within = worst_case_wait_s(count, cap), waits_within_s(queue)
    if wait <= within:
        return []
    lower = f"lower {cap_env} to at most {within // (count - 1)} s"
    if attempts_settable:
        lower += f" or {attempts_name} to at most {int(within // cap) + 1}"
    return [
        f"{attempts_name}={count} with {cap_env}={cap:g}: their worst-case wait ({count - 1} x {cap:g} s = {wait:g} s) "
        f"must be at most {within} s, the {queue.name} queue's message retention less one visibility timeout; {lower}"
    ]


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
        MAX_ATTEMPTS_ENV, default=wiring.CALLBACK_MAX_ATTEMPTS, parse=attempts_within(CALLBACKS_QUEUE), at_least=1
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
        # A bundle's later notice whose round would outlast its message goes on in a copy of it
        # (adapters/delivery/worker._round_fits); one round alone must fit.
        attempts, cap = (MAX_ATTEMPTS_ENV, self.max_attempts), (BACKOFF_CAP_ENV, self.backoff_cap_s)
        return waits_outlasting(CALLBACKS_QUEUE, attempts, cap)


delivery_settings = cached(DeliverySettings.from_env)
