"""Settings of the actions worker (core.http), read from the environment each time they are needed.

The development-only loopback switch is the callbacks' one (config.delivery.DEV_ALLOW_LOOPBACK_ENV): with "1" the
egress guard admits http:// and loopback targets for actions too. The deployed stack never sets it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from interlude import wiring
from interlude.config.delivery import DEV_ALLOW_LOOPBACK_ENV

ACTION_SECRET_PREFIX_ENV = "ACTION_SECRET_PREFIX"


@dataclass(frozen=True)
class ActionSettings:
    queue_url: str
    # Auth headers are read from `{secret_prefix}{tenant}/{name}` (core.http secretHeaders).
    secret_prefix: str
    allow_loopback: bool
    connect_timeout_s: float
    # A claim's lease lasts the attempt's own timeout plus this margin; a crashed worker's claim is taken over
    # after it (the message is hidden exactly that long first, so its redelivery finds the lease run out).
    lease_margin_s: float
    # Backoff before attempt n+1: min(cap, base * 2**(n-1)), with equal jitter (through the message's visibility).
    backoff_base_s: float
    backoff_cap_s: float
    ca_file: str | None

    @staticmethod
    def from_env() -> ActionSettings:
        env = os.environ
        return ActionSettings(
            queue_url=env.get(wiring.queue("actions").url_env, ""),
            secret_prefix=env.get(ACTION_SECRET_PREFIX_ENV, wiring.SECRET_PREFIXES[ACTION_SECRET_PREFIX_ENV]),
            allow_loopback=env.get(DEV_ALLOW_LOOPBACK_ENV, "") == "1",
            connect_timeout_s=float(env.get("INTERLUDE_ACTION_CONNECT_TIMEOUT_S", "5")),
            lease_margin_s=float(env.get("INTERLUDE_ACTION_LEASE_MARGIN_S", "30")),
            backoff_base_s=float(env.get("INTERLUDE_ACTION_BACKOFF_BASE_S", "2")),
            # SQS caps a message's visibility timeout at 12 h.
            backoff_cap_s=min(float(env.get("INTERLUDE_ACTION_BACKOFF_CAP_S", "300")), 12 * 3600),
            ca_file=env.get("INTERLUDE_ACTION_CA_FILE") or env.get("INTERLUDE_CALLBACK_CA_FILE") or None,
        )


def action_settings() -> ActionSettings:
    return ActionSettings.from_env()
