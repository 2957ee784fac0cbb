"""The tenant's Slack app as the interactivity endpoint meets it (issue 28 item 6; app.ports.SlackChannel): its signing
secret and its bot token read from Secrets Manager (kept briefly: adapters/secret_values.py), a click's answer posted
to the click's `response_url`, and a modal opened with `views.open` — each through the egress guard, pinned to the
addresses it admitted, as every outbound request of Interlude is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from interlude import sdk_clients
from interlude.adapters.delivery.pinned_http import DeliveryFailed, post_pinned
from interlude.adapters.notify.slack_settings import slack_secret_name, slack_signing_secret_name
from interlude.adapters.secret_values import secret_value_if_set
from interlude.config.notify import NotifySettings, notify_settings
from interlude.rules.egress import EgressRefused, Resolver, check_url

logger = Logger(service="interlude", child=True)
USER_AGENT = "interlude-slack/1"
# A secret set (or rotated) reaches every api instance within this long; its absence is kept as long, and what an
# instance keeps is bounded however many tenants requests name (adapters/secret_values.py).
SECRET_CACHE_S = 60.0
# Slack wants its request acknowledged within 3 seconds, and the answer is posted before the acknowledgement.
REPLY_CONNECT_TIMEOUT_S = 1.0
REPLY_TOTAL_TIMEOUT_S = 2.0


@dataclass
class SlackApp:
    secrets: Any
    settings: NotifySettings
    resolve: Resolver | None = None
    ca_file: str | None = None

    def signing_secret(self, tenant: str) -> str | None:
        name = slack_signing_secret_name(tenant, self.settings.slack_signing_secret_prefix)
        return self._secret(name, "signingSecret")

    def bot_token(self, tenant: str) -> str | None:
        """The tenant's bot token (None: it has none, or posts through an incoming webhook)."""
        return self._secret(slack_secret_name(tenant, self.settings.slack_secret_prefix), "botToken")

    def _secret(self, name: str, key: str) -> str | None:
        """The secret's `key` field (None: no such secret, or no such field), as this instance keeps the secret."""
        value = secret_value_if_set(name, SECRET_CACHE_S, client=self.secrets)
        read = None if value is None else json.loads(value).get(key)
        return read if isinstance(read, str) and read else None

    def reply(self, response_url: str, message: dict[str, Any]) -> None:
        """Best-effort: a refused or failed post is logged (without the URL, which is a credential of its own)."""
        self._post(response_url, message, {}, "reply")

    def open_view(self, tenant: str, trigger_id: str, view: dict[str, Any]) -> bool:
        """Open `view` for the clicker (views.open with the click's trigger_id and the tenant's bot token): whether
        Slack opened it. The only outbound call of the click, inside Slack's 3 seconds."""
        token = self.bot_token(tenant)
        if token is None:
            return False
        answer = self._post(
            f"{self.settings.slack_api_url}/views.open",
            {"trigger_id": trigger_id, "view": view},
            {"Authorization": f"Bearer {token}"},
            "views.open",
        )
        try:
            opened = answer is not None and json.loads(answer).get("ok") is True
        except (ValueError, AttributeError):
            opened = False
        if not opened:
            logger.warning("slack views.open refused", extra={"answer": (answer or b"")[:200].decode("utf-8", "replace")})
        return opened

    def _post(self, url: str, body: dict[str, Any], headers: dict[str, str], what: str) -> bytes | None:
        """The answer's body (at most 4 KB), or None when the post was refused or failed (logged without the URL:
        a response_url is a credential of its own)."""
        headers = {"Content-Type": "application/json; charset=utf-8", "User-Agent": USER_AGENT, **headers}
        try:
            target = check_url(url, resolve=self.resolve, allow_loopback=self.settings.allow_loopback)
            response = post_pinned(
                target,
                json.dumps(body, separators=(",", ":"), allow_nan=False).encode(),
                headers,
                connect_timeout=REPLY_CONNECT_TIMEOUT_S,
                total_timeout=REPLY_TOTAL_TIMEOUT_S,
                max_response_bytes=4 * 1024,
                ca_file=self.ca_file,
            )
        except EgressRefused as refused:
            logger.warning(f"slack {what} refused by the egress guard", extra={"reason": refused.reason})
            return None
        except DeliveryFailed as failed:
            logger.warning(f"slack {what} failed", extra={"errorClass": failed.error_class, "status": failed.status})
            return None
        return response.body_excerpt


def slack_app(resolve: Resolver | None = None) -> SlackApp:
    """The deployment's: its Secrets Manager, its settings; `resolve` is the egress guard's host-name resolver."""
    return SlackApp(sdk_clients.client("secretsmanager"), notify_settings(), resolve)
