"""GET /runs (listRuns, the runList family) and POST /runs:bulk-cancel (bulkCancelRuns): interlude.app.run_listing."""

from __future__ import annotations

from typing import Any, get_args

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.errors import envelope
from interlude.api.http import app, json_response, parsed, principal_for, query_int
from interlude.api.routes import route
from interlude.app import run_listing
from interlude.app.snapshots import snapshot
from interlude.composition import services
from interlude.domain.errors import Invalid
from interlude.domain.ids import check_author_id
from interlude.domain.models.answers.run_listing import BulkCancelAnswer, RunList
from interlude.domain.models.requests import BulkCancelRequest
from interlude.domain.models.run import RunState, RunStatus

RUN_STATUSES = get_args(RunStatus)


def run_list_capability() -> dict[str, Any]:
    """The runList family in discovery: what GET /runs honours."""
    return {
        "status": "stable",
        "since": "2.0",
        "witness": "witnessable-gated",
        "maxPageSize": run_listing.MAX_RUNS_PAGE,
        "filters": list(run_listing.RUN_LIST_FILTERS),
    }


def run_filters(query: dict[str, str], workflow_name: str, status_name: str) -> tuple[str | None, str | None]:
    """(workflowId, status) of a listing's query string, each checked; a 400 naming the parameter otherwise."""
    workflow_id = query.get(workflow_name)
    if workflow_id is not None:
        check_author_id(workflow_id, workflow_name)
    status = query.get(status_name)
    if status is not None and status not in RUN_STATUSES:
        raise Invalid(f"{status_name} must be one of {list(RUN_STATUSES)}", {"field": status_name})
    return workflow_id, status


@route("listRuns")
def list_runs() -> Response:
    principal = principal_for("listRuns")
    query = app.current_event.query_string_parameters or {}
    # Clamped to maxPageSize, never refused for asking more (RFC 0182).
    limit = min(query_int("limit", run_listing.DEFAULT_RUNS_PAGE, 1, 10**9), run_listing.MAX_RUNS_PAGE)
    cursor = query.get("cursor")
    if cursor is not None and not 1 <= len(cursor) <= 2048:
        raise Invalid("cursor must be 1 to 2048 characters", {"field": "cursor"})
    workflow_id, status = run_filters(query, "workflowId", "status")
    page = services().run_listing.list_runs(principal.tenant, limit, cursor, workflow_id, status)
    body: dict[str, Any] = {"runs": [snapshot(state) for state in page.runs]}
    if page.next_cursor is not None:
        body["nextCursor"] = page.next_cursor
    return json_response(200, RunList.model_validate(body))


@route("bulkCancelRuns")
def bulk_cancel_runs() -> Response:
    principal = principal_for("bulkCancelRuns")
    request = parsed(BulkCancelRequest)
    outcomes = services().run_listing.bulk_cancel(principal, request.runIds, request.reason)
    results = [
        {"runId": run_id, "ok": True, "status": outcome.status}
        if isinstance(outcome, RunState)
        else {"runId": run_id, "ok": False, "error": envelope(outcome)}
        for run_id, outcome in outcomes
    ]
    return json_response(200, BulkCancelAnswer.model_validate({"results": results}))
