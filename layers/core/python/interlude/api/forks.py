"""POST /runs/{runId}:fork (OpenWOP forkRun), POST /runs/{runId}:redrive (a failed run again from its failed node) and
GET /runs/{runId}:diff (OpenWOP diffRun: a run against another, typically its fork)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import app, json_response, parsed, principal_for, run_links
from interlude.api.idempotency import keyed
from interlude.api.routes import route
from interlude.app.forks import Forked
from interlude.composition import services
from interlude.domain.errors import Invalid, NotFound
from interlude.domain.ids import from_wire
from interlude.domain.models.requests import ForkRunRequest
from interlude.domain.models.responses import RunDiff, RunForked


@route("forkRun")
def fork_run(runId: str) -> Response:
    principal = principal_for("forkRun")
    # forkRun needs runs:read besides its route's runs:create: the fork reads the source's whole history.
    principal.require("runs:read")
    request = parsed(ForkRunRequest)
    return run_forked(services().forks.fork_run(principal, from_wire(runId), request, keyed(run_forked)))


@route("redriveRun")
def redrive_run(runId: str) -> Response:
    principal = principal_for("redriveRun")
    principal.require("runs:read")
    return run_forked(services().forks.redrive_run(principal, from_wire(runId), keyed(run_forked)))


@route("diffRun")
def diff_run(runId: str) -> Response:
    principal = principal_for("diffRun")
    # diffRun is of the replay family: served while discovery advertises it.
    from interlude.api.effects import REPLAY_CAPABILITY

    if REPLAY_CAPABILITY is None:
        raise NotFound("this host does not advertise replay, so it serves no diff of runs")
    against = (app.current_event.query_string_parameters or {}).get("against")
    if not against:
        raise Invalid("name the run to diff against: ?against=<runId>", {"field": "against"})
    diff = services().forks.diff_runs(principal, from_wire(runId), from_wire(against, what="against"))
    return json_response(200, RunDiff.model_validate(diff))


def run_forked(forked: Forked) -> Response:
    links = run_links(forked.state.runId)
    answer = RunForked(
        runId=forked.state.runId,
        sourceRunId=forked.source_run_id,
        fromSeq=forked.from_seq,
        mode=forked.mode,  # type: ignore[arg-type]
        status=forked.state.status,
        eventsUrl=links["eventsUrl"],
    )
    return json_response(201, answer, {"Location": links["statusUrl"]})
