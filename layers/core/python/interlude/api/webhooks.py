"""Routes of the OpenWOP webhook subscriptions (issue 14): register, unregister, rotate the secret, dead letters."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import OPENWOP_VERSION, app, json_response, parsed, principal_for, query_int
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.ids import from_wire
from interlude.domain.models.webhooks import (
    DEAD_LETTER_MAX_PAGE,
    RegisterWebhookRequest,
    RotateWebhookSecretRequest,
    WebhookDeadLetterPage,
    WebhookRegistered,
    WebhookSecretRotated,
)


@route("registerWebhook")
def register_webhook() -> Response:
    principal = principal_for("registerWebhook")
    registered = services().webhooks.register(principal, parsed(RegisterWebhookRequest))
    # The secret is in this answer only: no cache keeps it (wiring.Route.credential).
    return json_response(201, WebhookRegistered.model_validate(registered))


@route("unregisterWebhook")
def unregister_webhook(webhookId: str) -> Response:  # noqa: N803 - the path parameter's name
    principal = principal_for("unregisterWebhook")
    services().webhooks.unregister(principal, from_wire(webhookId, what="webhookId"))
    return Response(status_code=204, headers={"OpenWOP-Version": OPENWOP_VERSION})


@route("rotateWebhookSecret")
def rotate_webhook_secret(webhookId: str) -> Response:  # noqa: N803
    principal = principal_for("rotateWebhookSecret")
    request = parsed(RotateWebhookSecretRequest, optional=True)
    rotated = services().webhooks.rotate(principal, from_wire(webhookId, what="webhookId"), request)
    return json_response(200, WebhookSecretRotated.model_validate(rotated))


@route("listWebhookDeadLetters")
def list_webhook_dead_letters(webhookId: str) -> Response:  # noqa: N803
    principal = principal_for("listWebhookDeadLetters")
    webhook_id = from_wire(webhookId, what="webhookId")
    # Clamped, never refused: OpenWOP's pagination serves at most maxPageSize rows whatever `limit` asks.
    limit = min(query_int("limit", DEAD_LETTER_MAX_PAGE, 1, 10**9) or DEAD_LETTER_MAX_PAGE, DEAD_LETTER_MAX_PAGE)
    cursor = (app.current_event.query_string_parameters or {}).get("cursor")
    page = services().webhooks.dead_letters(principal, webhook_id, limit, cursor)
    return json_response(200, WebhookDeadLetterPage.model_validate(page))
