"""Callback delivery settings, read from the environment each time they are needed (cheap, and lets the local
stack set PUBLIC_BASE_URL once its port is known).

INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS is a development-only switch: with "1" the egress guard admits http:// and
loopback receivers (demos and tests on one machine). It is off by default and the deployed stack never sets it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from interlude import wiring

DEV_ALLOW_LOOPBACK_ENV = "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS"
PUBLIC_BASE_URL_ENV = "PUBLIC_BASE_URL"
# Bound of one attempt, connect included (the callbacks function's timeout is sized from it and the batch size).
DEFAULT_TOTAL_TIMEOUT_S = 15.0
WEBHOOK_SECRET_PREFIX_ENV = "WEBHOOK_SECRET_PREFIX"


@dataclass(frozen=True)
class DeliverySettings:
    queue_url: str
    dlq_url: str
    public_base_url: str
    secret_prefix: str
    allow_loopback: bool
    max_attempts: int
    # Backoff before attempt n+1: min(cap, base * 2**(n-1)), with "equal jitter" (half fixed, half random).
    backoff_base_s: float
    backoff_cap_s: float
    connect_timeout_s: float
    total_timeout_s: float
    max_response_bytes: int
    # The CA bundle TLS verifies against (None: the system store).
    ca_file: str | None
    # What a tenant's signing secret is created under and with (wiring.CREATED_SECRETS_*_ENV).
    secret_kms_key_id: str | None = None
    secret_tags: Mapping[str, str] = field(default_factory=dict)

    @staticmethod
    def from_env() -> DeliverySettings:
        env = os.environ
        return DeliverySettings(
            queue_url=env.get(wiring.queue("callbacks").url_env, ""),
            dlq_url=env.get(wiring.queue("callbacks-dlq").url_env, ""),
            public_base_url=env.get(PUBLIC_BASE_URL_ENV, "").rstrip("/"),
            secret_prefix=env.get(WEBHOOK_SECRET_PREFIX_ENV, wiring.SECRET_PREFIXES[WEBHOOK_SECRET_PREFIX_ENV]),
            allow_loopback=env.get(DEV_ALLOW_LOOPBACK_ENV, "") == "1",
            max_attempts=max(1, int(env.get("INTERLUDE_CALLBACK_MAX_ATTEMPTS", str(wiring.CALLBACK_MAX_ATTEMPTS)))),
            backoff_base_s=float(env.get("INTERLUDE_CALLBACK_BACKOFF_BASE_S", "30")),
            # SQS caps a message's visibility timeout at 12 h.
            backoff_cap_s=min(float(env.get("INTERLUDE_CALLBACK_BACKOFF_CAP_S", str(4 * 3600))), 12 * 3600),
            connect_timeout_s=float(env.get("INTERLUDE_CALLBACK_CONNECT_TIMEOUT_S", "5")),
            total_timeout_s=float(env.get("INTERLUDE_CALLBACK_TOTAL_TIMEOUT_S", str(DEFAULT_TOTAL_TIMEOUT_S))),
            max_response_bytes=int(env.get("INTERLUDE_CALLBACK_MAX_RESPONSE_BYTES", str(64 * 1024))),
            ca_file=env.get("INTERLUDE_CALLBACK_CA_FILE") or None,
            secret_kms_key_id=env.get(wiring.CREATED_SECRETS_KMS_KEY_ENV) or None,
            secret_tags=json.loads(env.get(wiring.CREATED_SECRETS_TAGS_ENV) or "{}"),
        )


def delivery_settings() -> DeliverySettings:
    return DeliverySettings.from_env()
