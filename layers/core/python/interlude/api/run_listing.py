"""GET /runs (listRuns, the runList family) and POST /runs:bulk-cancel (bulkCancelRuns): interlude.app.run_listing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, get_args

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.errors import envelope
from interlude.api.http import app, json_response, parsed, principal_for, query_int
from interlude.api.routes import route
from interlude.app import run_listing
from interlude.app.snapshots import snapshot
from interlude.composition import services
from interlude.domain.errors import Invalid
from interlude.domain.models.answers.run_listing import BulkCancelAnswer, RunList
from interlude.domain.models.requests import BulkCancelRequest
from interlude.domain.models.run import RunState, RunStatus
from interlude.rules import run_search

RUN_STATUSES = get_args(RunStatus)
METADATA_PARAM = run_search.OPENWOP.metadata


def run_list_capability() -> dict[str, Any]:
    """The runList family in discovery: what GET /runs honours."""
    return {
        "status": "stable",
        "since": "2.0",
        "witness": "witnessable-gated",
        "maxPageSize": run_listing.MAX_RUNS_PAGE,
        "filters": list(run_listing.RUN_LIST_FILTERS),
    }


def search_filters(query: dict[str, str], searchable: Iterable[str]) -> run_search.RunFilters:
    """GET /runs's filters, as OpenWOP spells them (rules/run_search.parse_filters)."""
    return run_search.parse_filters(query, searchable, {status: (status,) for status in RUN_STATUSES})


@route("listRuns")
def list_runs() -> Response:
    principal = principal_for("listRuns")
    query = app.current_event.query_string_parameters or {}
    # Clamped to maxPageSize, never refused for asking more (RFC 0182).
    limit = min(query_int("limit", run_listing.DEFAULT_RUNS_PAGE, 1, 10**9), run_listing.MAX_RUNS_PAGE)
    cursor = query.get("cursor")
    if cursor is not None and not 1 <= len(cursor) <= 2048:
        raise Invalid("cursor must be 1 to 2048 characters", {"field": "cursor"})
    listing = services().run_listing
    searchable = listing.searchable_metadata(principal.tenant) if run_search.asks_metadata(query) else ()
    page = listing.list_runs(principal.tenant, limit, cursor, filters=search_filters(query, searchable))
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
