"""Notification settings (issue 14).

SES_FROM_ADDRESS and SES_CONFIGURATION_SET come from the construct's props; without a from-address no e-mail is
sent (the notification log says `not_configured`). Slack posts and the development loopback switch follow the
callback delivery rules (INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS admits loopback receivers; off when deployed).
"""

from __future__ import annotations

from interlude import wiring
from interlude.config.delivery import (
    DEV_ALLOW_LOOPBACK_ENV,
    MAX_VISIBILITY_S,
    PUBLIC_BASE_URL_ENV,
    attempts_within,
    waits_outlasting,
)
from interlude.config.reading import EnvironmentSettings, base_url, cached, setting

SES_FROM_ADDRESS_ENV = "SES_FROM_ADDRESS"
SES_CONFIGURATION_SET_ENV = "SES_CONFIGURATION_SET"
SLACK_SECRET_PREFIX_ENV = "SLACK_SECRET_PREFIX"
SLACK_SIGNING_SECRET_PREFIX_ENV = "SLACK_SIGNING_SECRET_PREFIX"
# Slack's Web API (chat.postMessage with a bot token); the tests point it at a loopback receiver.
SLACK_API_URL_ENV = "INTERLUDE_SLACK_API_URL"
DEFAULT_SLACK_API_URL = "https://slack.com/api"
# How long a personal decision link lives (never past the gate's own deadline).
DEFAULT_LINK_LIFETIME_S = 7 * 24 * 3600
MAX_ATTEMPTS_ENV = "INTERLUDE_NOTIFY_MAX_ATTEMPTS"
BACKOFF_CAP_ENV = "INTERLUDE_NOTIFY_BACKOFF_CAP_S"
NOTIFICATIONS_QUEUE = wiring.queue("notifications")


class NotifySettings(EnvironmentSettings):
    queue_url: str = setting(wiring.queue("notifications").url_env, default="")
    dlq_url: str = setting(wiring.queue("notifications-dlq").url_env, default="")
    public_base_url: str = setting(PUBLIC_BASE_URL_ENV, default="", parse=base_url)
    from_address: str = setting(SES_FROM_ADDRESS_ENV, default="")
    configuration_set: str = setting(SES_CONFIGURATION_SET_ENV, default="")
    slack_secret_prefix: str = setting(SLACK_SECRET_PREFIX_ENV, default=wiring.SECRET_PREFIXES[SLACK_SECRET_PREFIX_ENV])
    slack_signing_secret_prefix: str = setting(
        SLACK_SIGNING_SECRET_PREFIX_ENV, default=wiring.SECRET_PREFIXES[SLACK_SIGNING_SECRET_PREFIX_ENV]
    )
    slack_api_url: str = setting(SLACK_API_URL_ENV, default=DEFAULT_SLACK_API_URL, parse=base_url)
    allow_loopback: bool = setting(DEV_ALLOW_LOOPBACK_ENV, default=False)
    # A notification's round runs within its message's receives and retention, as a callback notice's does.
    max_attempts: int = setting(
        MAX_ATTEMPTS_ENV, default=wiring.NOTIFY_MAX_ATTEMPTS, parse=attempts_within(NOTIFICATIONS_QUEUE), at_least=1
    )
    backoff_base_s: float = setting("INTERLUDE_NOTIFY_BACKOFF_BASE_S", default=30.0)
    backoff_cap_s: float = setting(BACKOFF_CAP_ENV, default=3600.0, at_most=MAX_VISIBILITY_S)
    connect_timeout_s: float = setting("INTERLUDE_NOTIFY_CONNECT_TIMEOUT_S", default=5.0)
    total_timeout_s: float = setting("INTERLUDE_NOTIFY_TOTAL_TIMEOUT_S", default=15.0)
    link_lifetime_s: int = setting("INTERLUDE_NOTIFY_LINK_LIFETIME_S", default=DEFAULT_LINK_LIFETIME_S)

    def conflicts(self) -> list[str]:
        attempts, cap = (MAX_ATTEMPTS_ENV, self.max_attempts), (BACKOFF_CAP_ENV, self.backoff_cap_s)
        return waits_outlasting(NOTIFICATIONS_QUEUE, attempts, cap)


notify_settings = cached(NotifySettings.from_env)
