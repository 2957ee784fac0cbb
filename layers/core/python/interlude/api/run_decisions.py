"""The run-scoped resolve: a key holder's decision on the interrupt a run's gate holds.

A module of its own (not api/runs.py) because a cold start loads the route module of the request it answers: a
resolve loads the decisions service and what it reads, not the run lifecycle's (createRun's inputs and callback
checks, the run search keys), the snapshots or the other run routes' request bodies.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

# The service this route calls, which the composition builds at its first use: a resolve reads the directory,
# delegations and the tenant's facts (app/decisions.py) and refuses credential material in a resume value. Loaded
# with the route, so a resolve's first use counts them.
import interlude.app.decisions  # noqa: F401
import interlude.rules.interrupts.secrets  # noqa: F401
from interlude.api.http import json_response, principal_for, raw_body, resume_value_body
from interlude.api.idempotency import keyed
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.ids import check_author_id, from_wire
from interlude.domain.models.answers.decisions import Resolution
from interlude.domain.written_numbers import spellings


@route("resolveInterruptByRun")
def resolve_interrupt_by_run(runId: str, nodeId: str) -> Response:
    principal = principal_for("resolveInterruptByRun")
    run_id = from_wire(runId)
    node_id = check_author_id(unquote(nodeId), "nodeId")
    resume_value = resume_value_body()
    written = spellings(raw_body())
    return resolved(
        services().decisions.resolve_interrupt(
            principal, run_id, node_id, resume_value, keyed(resolved), written_numbers=written
        )
    )


def resolved(outcome: dict[str, Any]) -> Response:
    return json_response(200, Resolution.model_validate(outcome))
