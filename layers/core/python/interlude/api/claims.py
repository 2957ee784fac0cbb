"""Who works an open gate (issue 29 item 3): POST and DELETE /runs/{runId}/interrupts/{nodeId}/claim, PUT
.../assignee. Any eligible approver claims a gate for themselves, releases it, or assigns it; nobody's eligibility
changes (interlude.app.claims)."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, parsed, principal_for
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.ids import check_author_id, from_wire
from interlude.domain.models.principal_requests import AssignGateRequest, GateAssignment
from interlude.rules.interrupts.claims import Move


def moved(operation: str, run_id: str, node_id: str, move: Move) -> Response:
    # The caller first (a suspended tenant or a missing scope is refused before its body is read), as every route.
    principal = principal_for(operation)
    named = parsed(AssignGateRequest).assignee if move == "assign" else None
    got = services().claims.move(principal, from_wire(run_id), check_author_id(unquote(node_id), "nodeId"), move, named)
    return json_response(200, GateAssignment.model_validate(got))


@route("claimInterrupt")
def claim(runId: str, nodeId: str) -> Response:  # noqa: N803 - the path parameters' names
    return moved("claimInterrupt", runId, nodeId, "claim")


@route("releaseInterrupt")
def release(runId: str, nodeId: str) -> Response:  # noqa: N803
    return moved("releaseInterrupt", runId, nodeId, "release")


@route("assignInterrupt")
def assign(runId: str, nodeId: str) -> Response:  # noqa: N803
    return moved("assignInterrupt", runId, nodeId, "assign")
