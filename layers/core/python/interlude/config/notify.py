"""Notification settings (issue 14), read from the environment each time they are needed, like delivery's.

SES_FROM_ADDRESS and SES_CONFIGURATION_SET come from the construct's props; without a from-address no e-mail is
sent (the notification log says `not_configured`). Slack posts and the development loopback switch follow the
callback delivery rules (INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS admits loopback receivers; off when deployed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from interlude import wiring
from interlude.config.delivery import DEV_ALLOW_LOOPBACK_ENV, PUBLIC_BASE_URL_ENV

SES_FROM_ADDRESS_ENV = "SES_FROM_ADDRESS"
SES_CONFIGURATION_SET_ENV = "SES_CONFIGURATION_SET"
SLACK_SECRET_PREFIX_ENV = "SLACK_SECRET_PREFIX"
# Slack's Web API (chat.postMessage with a bot token); the tests point it at a loopback receiver.
SLACK_API_URL_ENV = "INTERLUDE_SLACK_API_URL"
DEFAULT_SLACK_API_URL = "https://slack.com/api"
# How long a personal decision link lives (never past the gate's own deadline).
DEFAULT_LINK_LIFETIME_S = 7 * 24 * 3600


@dataclass(frozen=True)
class NotifySettings:
    queue_url: str
    dlq_url: str
    public_base_url: str
    from_address: str
    configuration_set: str
    slack_secret_prefix: str
    slack_api_url: str
    allow_loopback: bool
    max_attempts: int
    backoff_base_s: float
    backoff_cap_s: float
    connect_timeout_s: float
    total_timeout_s: float
    link_lifetime_s: int

    @staticmethod
    def from_env() -> NotifySettings:
        env = os.environ
        return NotifySettings(
            queue_url=env.get(wiring.queue("notifications").url_env, ""),
            dlq_url=env.get(wiring.queue("notifications-dlq").url_env, ""),
            public_base_url=env.get(PUBLIC_BASE_URL_ENV, "").rstrip("/"),
            from_address=env.get(SES_FROM_ADDRESS_ENV, ""),
            configuration_set=env.get(SES_CONFIGURATION_SET_ENV, ""),
            slack_secret_prefix=env.get(SLACK_SECRET_PREFIX_ENV, wiring.SECRET_PREFIXES[SLACK_SECRET_PREFIX_ENV]),
            slack_api_url=env.get(SLACK_API_URL_ENV, DEFAULT_SLACK_API_URL).rstrip("/"),
            allow_loopback=env.get(DEV_ALLOW_LOOPBACK_ENV, "") == "1",
            max_attempts=max(1, int(env.get("INTERLUDE_NOTIFY_MAX_ATTEMPTS", str(wiring.NOTIFY_MAX_ATTEMPTS)))),
            backoff_base_s=float(env.get("INTERLUDE_NOTIFY_BACKOFF_BASE_S", "30")),
            backoff_cap_s=min(float(env.get("INTERLUDE_NOTIFY_BACKOFF_CAP_S", str(3600))), 12 * 3600),
            connect_timeout_s=float(env.get("INTERLUDE_NOTIFY_CONNECT_TIMEOUT_S", "5")),
            total_timeout_s=float(env.get("INTERLUDE_NOTIFY_TOTAL_TIMEOUT_S", "15")),
            link_lifetime_s=int(env.get("INTERLUDE_NOTIFY_LINK_LIFETIME_S", str(DEFAULT_LINK_LIFETIME_S))),
        )


def notify_settings() -> NotifySettings:
    return NotifySettings.from_env()
