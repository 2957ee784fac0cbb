"""GET /runs/{runId}/deliveries: every callback delivery attempt of a run (status, attempt, HTTP status, error)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, principal_for
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.ids import from_wire
from interlude.domain.models.answers.deliveries import RunDeliveries


@route("listRunDeliveries")
def list_run_deliveries(runId: str) -> Response:
    principal = principal_for("listRunDeliveries")
    return json_response(200, RunDeliveries.model_validate(services().deliveries.run_deliveries(principal, from_wire(runId))))
