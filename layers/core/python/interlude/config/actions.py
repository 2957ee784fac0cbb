"""Settings of the actions worker (core.http).

The development-only loopback switch is the callbacks' one (config.delivery.DEV_ALLOW_LOOPBACK_ENV): on, the egress
guard admits http:// and loopback targets for actions too. The deployed stack never sets it.
"""

from __future__ import annotations

from interlude import wiring
from interlude.config.delivery import DEV_ALLOW_LOOPBACK_ENV, MAX_VISIBILITY_S, waits_outlasting
from interlude.config.reading import EnvironmentSettings, cached, setting

ACTION_SECRET_PREFIX_ENV = "ACTION_SECRET_PREFIX"
BACKOFF_CAP_ENV = "INTERLUDE_ACTION_BACKOFF_CAP_S"
# What a definition sets an action's attempts by, at most wiring.ACTION_MAX_ATTEMPTS (not the operator's to choose).
ATTEMPTS_NAME = "core.http maxAttempts"
ACTIONS_QUEUE = wiring.queue("actions")


class ActionSettings(EnvironmentSettings):
    queue_url: str = setting(wiring.queue("actions").url_env, default="")
    # Auth headers are read from `{secret_prefix}{tenant}/{name}` (core.http secretHeaders).
    secret_prefix: str = setting(ACTION_SECRET_PREFIX_ENV, default=wiring.SECRET_PREFIXES[ACTION_SECRET_PREFIX_ENV])
    allow_loopback: bool = setting(DEV_ALLOW_LOOPBACK_ENV, default=False)
    connect_timeout_s: float = setting("INTERLUDE_ACTION_CONNECT_TIMEOUT_S", default=5.0)
    # A claim's lease lasts the attempt's own timeout plus this margin; a crashed worker's claim is taken over
    # after it (the message is hidden exactly that long first, so its redelivery finds the lease run out).
    lease_margin_s: float = setting("INTERLUDE_ACTION_LEASE_MARGIN_S", default=30.0)
    # Backoff before attempt n+1: min(cap, base * 2**(n-1)), with equal jitter (through the message's visibility).
    backoff_base_s: float = setting("INTERLUDE_ACTION_BACKOFF_BASE_S", default=2.0)
    backoff_cap_s: float = setting(BACKOFF_CAP_ENV, default=300.0, at_most=MAX_VISIBILITY_S)
    # The actions' own CA bundle, else the callbacks' (None: the system store).
    ca_file: str | None = setting(("INTERLUDE_ACTION_CA_FILE", "INTERLUDE_CALLBACK_CA_FILE"), default=None)

    def conflicts(self) -> list[str]:
        # An action's round waits through its message's visibility as a callback notice's does (adapters/leased_work,
        # a Retry-After holding each wait up to the cap), and any definition may ask for the most attempts.
        attempts, cap = (ATTEMPTS_NAME, wiring.ACTION_MAX_ATTEMPTS), (BACKOFF_CAP_ENV, self.backoff_cap_s)
        return waits_outlasting(ACTIONS_QUEUE, attempts, cap, attempts_settable=False)


action_settings = cached(ActionSettings.from_env)
