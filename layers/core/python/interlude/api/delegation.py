"""POST /runs/{runId}/interrupts/{nodeId}/delegation: an approver hands their vote on one gate to another (issue 14
item 4). The delegate then votes on the ordinary surfaces; the vote records both principals."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, parsed, principal_for
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.ids import check_author_id, from_wire
from interlude.domain.models.principal_requests import DelegateVoteRequest, VoteDelegated


@route("delegateVote")
def delegate(runId: str, nodeId: str) -> Response:  # noqa: N803 - the path parameters' names
    principal = principal_for("delegateVote")
    run_id = from_wire(runId)
    node_id = check_author_id(unquote(nodeId), "nodeId")
    delegated = services().delegation.delegate_vote(principal, run_id, node_id, parsed(DelegateVoteRequest))
    return json_response(200, VoteDelegated.model_validate(delegated))
