"""Routes of issue 14 items 2 and 6: the notification log of a run, and the tenant's Slack credential; and its Slack
app's signing secret (issue 28 item 6)."""

from __future__ import annotations

from urllib.parse import urlsplit

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.adapters.notify.slack_settings import store_signing_secret, store_slack
from interlude.api.http import json_response, parsed, principal_for
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.errors import DomainError, Invalid
from interlude.domain.ids import from_wire
from interlude.domain.models.answers.notifications import RunNotifications, SlackConfigured
from interlude.domain.models.principal_requests import SlackSettings, SlackSigningSecret
from interlude.rules.callback_url import check_callback_url


@route("listRunNotifications")
def list_run_notifications(runId: str) -> Response:  # noqa: N803 - the path parameter's name
    principal = principal_for("listRunNotifications")
    log = services().notifications.run_notifications(principal, from_wire(runId))
    return json_response(200, RunNotifications.model_validate(log))


@route("putSlackSettings")
def put_slack_settings() -> Response:
    principal = principal_for("putSlackSettings")
    settings = parsed(SlackSettings, "Slack settings")
    if settings.webhookUrl is not None:
        # Checked as a callback URL is (the worker checks it again at each post, pinned to what it admitted).
        try:
            check_callback_url(settings.webhookUrl, services().callback_resolver)
        except DomainError as refused:
            raise Invalid(
                refused.message.replace("callbackUrl", "webhookUrl"), {**(refused.details or {}), "field": "webhookUrl"}
            ) from None
        store_slack(principal.tenant, {"webhookUrl": settings.webhookUrl})
        parts = urlsplit(settings.webhookUrl)
        answer = {"tenant": principal.tenant, "configured": "webhook", "webhookHost": parts.hostname or ""}
    else:
        store_slack(principal.tenant, {"botToken": settings.botToken})
        answer = {"tenant": principal.tenant, "configured": "bot-token"}
    return json_response(200, SlackConfigured.model_validate(answer))


@route("putSlackSigningSecret")
def put_slack_signing_secret() -> Response:
    principal = principal_for("putSlackSigningSecret")
    settings = parsed(SlackSigningSecret, "Slack signing secret")
    store_signing_secret(principal.tenant, settings.signingSecret)
    return json_response(200, SlackConfigured.model_validate({"tenant": principal.tenant, "configured": "signing-secret"}))
