"""The Slack interactivity route (issue 28 item 6): `POST /slack/{tenant}/interactions`, authenticated by Slack's
signature over the raw body (interlude.app.slack), never by an API key."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.adapters import metrics
from interlude.api.http import app, json_response, raw_body, standing
from interlude.api.routes import route
from interlude.composition import services


@route("slackInteraction")
def slack_interaction(tenant: str) -> Response:
    headers = app.current_event.headers
    body = raw_body().encode("utf-8", "surrogatepass")
    interactions = services().slack_interactions(admit=standing().require_active)
    answered = interactions.answer(
        unquote(tenant), headers.get("x-slack-request-timestamp"), headers.get("x-slack-signature"), body
    )
    if answered.voted:
        # The API's deciding routes are counted by route (api.app.count_response); a Slack click only when it voted.
        metrics.count("Decisions", surface="slack")
    return json_response(200, answered.shown)
