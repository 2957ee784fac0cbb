"""GET /runs/{runId}/ancestry (getRunAncestry): the run and its immediate parent, for core.subWorkflow children."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, principal_for
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.ids import from_wire
from interlude.domain.models.answers.subworkflows import RunAncestry


@route("getRunAncestry")
def get_run_ancestry(runId: str) -> Response:
    principal = principal_for("getRunAncestry")
    return json_response(200, RunAncestry.model_validate(services().sub_workflows.run_ancestry(principal, from_wire(runId))))
