"""ModuleX database mode and run rows (issue 16, items 1 and 2): POST /workflows, GET /workflows (both faces' workflows),
DELETE /workflows/{id}, GET /workflow-runs, GET /workflow-runs/{run_pk}. GET and PUT /workflows/{id} answer on the
ModuleX face for a ModuleX client and for a ModuleX workflow's id (interlude.api.http.answers_as_modulex):
interlude.api.runs hands those requests to `get_modulex` / `put_modulex`.
"""

from __future__ import annotations

from typing import Any, get_args

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api import http
from interlude.api.http import app, principal_for, query_int, required_body
from interlude.api.modulex import acting_for, caller, face, ok
from interlude.api.routes import route
from interlude.app.workflows import DEFAULT_WORKFLOW_PAGE, MAX_WORKFLOW_PAGE
from interlude.composition import services
from interlude.domain.errors import DomainError, Invalid, MethodNotAllowed
from interlude.domain.ids import check_author_id
from interlude.domain.models.run import RunStatus
from interlude.faces.modulex import workflows as mxw
from interlude.rules import run_search
from interlude.rules.auth import Principal

# A ModuleX status names the OpenWOP statuses it covers (`interrupted`: the three waiting ones); an OpenWOP one itself.
STATUSES: dict[str, tuple[str, ...]] = {**{status: (status,) for status in get_args(RunStatus)}, **mxw.STATUS_FILTERS}


def workflows() -> mxw.ModulexWorkflows:
    return services().modulex_workflows


def as_modulex() -> None:
    """From here on this request answers, refusals included, on the ModuleX face."""
    app.append_context(**{http.FACE_CONTEXT: "modulex"})


def addressed(principal: Principal, workflow_id: str) -> str:
    """The workflow id of a ModuleX request about one workflow: one that is malformed, or asked for on behalf of
    another organisation, is not found (the same 404 as a missing one)."""
    acting_for(principal, run_scoped=True, what="workflow")
    try:
        return check_author_id(workflow_id, "workflowId")
    except DomainError:
        raise mxw.not_found() from None


def get_modulex(principal: Principal, workflow_id: str) -> Response:
    as_modulex()
    return ok(workflows().read(principal, addressed(principal, workflow_id)))


def put_modulex(principal: Principal, workflow_id: str) -> Response:
    as_modulex()
    workflow_id = addressed(principal, workflow_id)
    return ok(mxw.ModulexWorkflow.model_validate(workflows().update(principal, workflow_id, required_body())))


@route("modulexCreateWorkflow")
def create_workflow() -> Response:
    principal = caller("modulexCreateWorkflow", run_scoped=False)
    return ok(mxw.ModulexWorkflow.model_validate(workflows().create(principal, required_body())), 201)


@route("listWorkflows")
def list_workflows() -> Response:
    principal = caller("listWorkflows", run_scoped=False)
    page = query_int("page", 1, 1, 10**6)
    page_size = query_int("page_size", DEFAULT_WORKFLOW_PAGE, 1, MAX_WORKFLOW_PAGE)
    query: dict[str, str] = app.current_event.query_string_parameters or {}
    wanted = mxw.ListingFilter.of({name: query[name] for name in mxw.LISTING_FILTERS if name in query})
    listed = services().workflows.list_workflows(principal.tenant, page, page_size, wanted.keeps if wanted.any else None)
    items = [mxw.summary(entry.pop("id"), entry) for entry in listed.pop("workflows")]
    return ok(mxw.WorkflowList(workflows=items, **listed))


@route("modulexDeleteWorkflow")
def delete_workflow(workflowId: str) -> Response:  # noqa: N803 - the path parameter's name
    principal = principal_for("modulexDeleteWorkflow")
    workflow_id = addressed(principal, workflowId)
    if services().store.get_modulex_workflow(principal.tenant, workflow_id) is None:
        if services().store.latest_workflow_version(principal.tenant, workflow_id) is not None:
            # An OpenWOP workflow: its versions are immutable and its runs read them.
            raise MethodNotAllowed("an OpenWOP workflow's versions are never deleted", ["GET", "PUT"])
        raise mxw.not_found()
    return ok(mxw.WorkflowDeleted.model_validate(workflows().delete(principal, workflow_id)))


@route("modulexListRuns")
def list_runs() -> Response:
    principal = caller("modulexListRuns", run_scoped=False)
    query: dict[str, Any] = app.current_event.query_string_parameters or {}
    limit = query_int("limit", 50, 1, mxw.MAX_RUN_LIMIT)
    offset = query_int("offset", 0, 0, mxw.MAX_RUN_OFFSET)
    listing = services().run_listing
    # GET /runs's filters in ModuleX's spelling, parsed by the same rules (a ModuleX status names its OpenWOP ones).
    searchable = listing.searchable_metadata(principal.tenant) if run_search.asks_metadata(query, run_search.MODULEX) else ()
    filters = run_search.parse_filters(query, searchable, STATUSES, run_search.MODULEX)
    trigger = query.get("trigger_type")
    if trigger is not None and len(trigger) > mxw.MAX_NAME:
        raise Invalid(f"trigger_type must be at most {mxw.MAX_NAME} characters", {"field": "trigger_type"})
    rows = mxw.list_run_rows(listing, services().store, services().clock, principal.tenant, offset, limit, filters, trigger)
    return ok(mxw.RunRows.model_validate(rows))


@route("modulexGetRun")
def get_run(runPk: str) -> Response:  # noqa: N803 - the path parameter's name
    principal = caller("modulexGetRun", run_scoped=True)
    mx = face()
    state, _ = mx.load(principal, runPk)
    return ok(mxw.RunDetail.model_validate(mxw.run_detail(state, mx.view(state))))
