"""The ModuleX face: POST /workflows/run, GET /workflows/listen/{run_id}, POST /workflows/resume/{thread_id},
POST /workflows/cancel/{run_id}, GET /workflows/state/{thread_id} (shared/reference/modulex-contract.md).

Same keys, engine and event log as the OpenWOP face. Every refusal on these routes, an unexpected failure and
an Idempotency-Key refusal included, is `{"detail": ...}` with the OpenWOP code in the `X-Interlude-Error`
header (their routes are declared with face="modulex"; interlude.api.errors shapes them). A run that is
unknown, malformed or another organisation's is one identical 404. `X-Organization-ID` is optional; when sent it must name the key's
tenant (the organisation): otherwise 404 on run routes (no existence leak) and 403 on POST /workflows/run.
"""

from __future__ import annotations

import json

from aws_lambda_powertools.event_handler.api_gateway import Response
from pydantic import BaseModel

from interlude.api.http import (
    ORG_HEADER,
    app,
    body,
    last_event_id,
    principal_for,
    raw_body,
    required_body,
    sse_response,
    stream_bounds,
)
from interlude.api.idempotency import keyed
from interlude.api.routes import route
from interlude.composition import services
from interlude.domain.errors import Forbidden
from interlude.domain.models.run import RunState
from interlude.domain.written_numbers import spellings
from interlude.engine.run import iso
from interlude.faces.modulex import listen as listening
from interlude.faces.modulex.operations import ModulexFace, not_found
from interlude.rules.auth import Principal


def face() -> ModulexFace:
    return services().modulex


def caller(operation: str, run_scoped: bool, what: str = "run") -> Principal:
    """The key holder, when `X-Organization-ID` (if sent) names its tenant; else the request's `what` is not found
    (`run_scoped`: a route about one resource, which answers as if it were missing) or it is refused (403)."""
    return acting_for(principal_for(operation), run_scoped, what)


def acting_for(principal: Principal, run_scoped: bool, what: str = "run") -> Principal:
    org = (app.current_event.headers or {}).get(ORG_HEADER)
    if org and org != principal.tenant:
        if run_scoped:
            raise not_found(what)
        raise Forbidden(f"this key does not act for organisation {org!r}")
    return principal


def ok(answer: BaseModel, status: int = 200) -> Response:
    body = json.dumps(answer.model_dump(mode="json"), separators=(",", ":"), allow_nan=False)
    return Response(status_code=status, content_type="application/json", body=body)


@route("modulexRun")
def run() -> Response:
    body = required_body()
    return ok(face().run(caller("modulexRun", run_scoped=False), body, keyed(ok), spellings(raw_body())))


@route("modulexResume")
def resume(threadId: str) -> Response:
    principal = caller("modulexResume", run_scoped=True)
    resumed = body()
    return ok(face().resume(principal, threadId, resumed, keyed(ok), spellings(raw_body())))


@route("modulexCancel")
def cancel(runId: str) -> Response:
    principal = caller("modulexCancel", run_scoped=True)
    return ok(face().cancel(principal, runId, body(), keyed(ok)))


@route("modulexState")
def state(threadId: str) -> Response:
    return ok(face().state(caller("modulexState", run_scoped=True), threadId))


@route("modulexListen")
def listen(runId: str) -> Response:
    """History from the start (or after Last-Event-ID), then what arrives within the request's bounds
    (interlude.faces.modulex.listen says how a response ends)."""
    principal = caller("modulexListen", run_scoped=True)
    mx = face()
    run_state, _ = mx.load(principal, runId)
    store = services().store

    def head() -> RunState | None:
        got = store.get_run(run_state.runId)
        return None if got is None else got[0]

    parts = listening.response(
        lambda after: store.read_events(run_state.runId, after, holder=run_state),
        run_state,
        mx.view(run_state),
        last_event_id(),
        stream_bounds(),
        lambda: iso(services().clock()),
        head,
    )
    return sse_response(parts)
