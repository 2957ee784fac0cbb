"""GET /runs/{runId}/deliveries: every callback delivery attempt of a run (status, attempt, HTTP status, error)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response

from ..delivery.worker import PUBLIC_ATTEMPT_FIELDS
from ..ids import from_wire
from ..store.deliveries import DeliveryStore
from .http import json_response, principal_for, route, service


@route("listRunDeliveries")
def list_run_deliveries(runId: str) -> Response:
    principal = principal_for("listRunDeliveries")
    run_id = from_wire(runId)
    # Tenant check and existence first: a foreign or unknown run answers as getRun would.
    state, _ = service().load_run(principal.tenant, run_id)
    attempts = DeliveryStore(service().store).attempts(run_id)
    attempts.sort(key=lambda a: (a.get("at", ""), a.get("noticeId", ""), a.get("attempt", 0)))
    deliveries = [{k: a[k] for k in PUBLIC_ATTEMPT_FIELDS if k in a} for a in attempts]
    return json_response(200, {"runId": state.runId, "callbackUrl": state.callbackUrl, "deliveries": deliveries})
