"""Every HTTP route, served by one powertools resolver. Handlers here only wire: parse, call the service, respond."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import cache
from typing import Any
from urllib.parse import quote, unquote

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response

from .. import __version__, wiring
from ..auth import Principal
from ..config import settings
from ..engine.events import ENGINE_VERSION, EVENT_LOG_SCHEMA_VERSION
from ..errors import ApiError
from ..ids import check_author_id, from_wire, to_wire
from ..service import Service
from ..store import Store
from . import openapi

logger = Logger(service="interlude")
app = APIGatewayHttpResolver()
OPENWOP_VERSION = "2.0"
MAX_BODY_BYTES = 1_000_000
ROUTES_BY_OPERATION = {r.operation: r for r in wiring.ROUTES}


@cache
def service() -> Service:
    cfg = settings()
    return Service(Store(cfg.table_name), step_budget=cfg.step_budget)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps(body, separators=(",", ":")),
        headers={"OpenWOP-Version": OPENWOP_VERSION, **(headers or {})},
    )


@app.exception_handler(ApiError)
def _api_error(exc: ApiError) -> Response:
    headers = dict(exc.headers)
    if exc.status == 401 and exc.code == "unauthenticated":
        headers.setdefault("WWW-Authenticate", 'Bearer realm="interlude"')
    return json_response(exc.status, exc.envelope(), headers)


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    logger.exception("unhandled error")
    request_id = app.current_event.request_context.request_id or "unknown"
    return json_response(
        500, {"error": "internal_error", "message": "internal error", "details": {"correlationId": request_id}}
    )


@app.not_found
def _not_found(exc: Exception) -> Response:
    return json_response(404, {"error": "not_found", "message": "no such route"})


# -- request helpers -----------------------------------------------------------------------------


def principal_for(operation: str) -> Principal:
    principal = service().authenticate(app.current_event.get_header_value("authorization"))
    scope = ROUTES_BY_OPERATION[operation].scope
    if scope:
        principal.require(scope)
    return principal


def body() -> Any:
    raw = app.current_event.decoded_body or ""
    if len(raw.encode()) > MAX_BODY_BYTES:
        raise ApiError("payload_too_large", f"the request body exceeds {MAX_BODY_BYTES} bytes")
    if not raw.strip():
        return None
    content_type = (app.current_event.get_header_value("content-type") or "application/json").lower()
    if "json" not in content_type:
        raise ApiError("unsupported_media_type", "send the body as application/json")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError("validation_error", f"the body is not valid JSON: {exc}") from None


def required_body() -> Any:
    value = body()
    if value is None:
        raise ApiError("validation_error", "a JSON body is required")
    return value


def query_int(name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = (app.current_event.query_string_parameters or {}).get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"-?\d{1,12}", raw) or not lo <= int(raw) <= hi:
        raise ApiError("validation_error", f"{name} must be an integer from {lo} to {hi}", {"field": name})
    return int(raw)


def base_url() -> str:
    headers = app.current_event.headers or {}
    host = headers.get("x-forwarded-host") or headers.get("host") or app.current_event.request_context.domain_name
    proto = headers.get("x-forwarded-proto", "https")
    return f"{proto}://{host}"


def run_links(run_id: str) -> dict[str, str]:
    wire = to_wire(run_id)
    return {"eventsUrl": f"{base_url()}/runs/{wire}/events/poll", "statusUrl": f"{base_url()}/runs/{wire}"}


def route(operation: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    spec = ROUTES_BY_OPERATION[operation]
    rule = re.sub(r"{(\w+)}", r"<\1>", spec.path)
    return app.route(rule, spec.method)


# -- routes ----------------------------------------------------------------------------------------


@route("getCapabilities")
def get_capabilities() -> Response:
    return json_response(200, capabilities(), {"Cache-Control": "public, max-age=60"})


def capabilities() -> dict[str, Any]:
    # Advertise only what this deployment actually serves.
    return {
        "protocolVersions": [OPENWOP_VERSION],
        "preferredVersion": OPENWOP_VERSION,
        "implementation": {"name": "interlude", "version": __version__},
        "engineVersion": ENGINE_VERSION,
        "eventLogSchemaVersion": EVENT_LOG_SCHEMA_VERSION,
        "eventLog": {"status": "stable", "since": "2.0", "witness": "witnessable-unaided", "poll": True},
    }


@route("getOpenApi")
def get_openapi() -> Response:
    return json_response(200, openapi.document())


@route("putWorkflow")
def put_workflow(workflowId: str) -> Response:
    principal = principal_for("putWorkflow")
    workflow_id = check_author_id(unquote(workflowId), "workflowId")
    return json_response(201, service().put_workflow(principal, workflow_id, required_body()))


@route("getWorkflow")
def get_workflow(workflowId: str) -> Response:
    principal = principal_for("getWorkflow")
    return json_response(200, service().get_workflow(principal, check_author_id(unquote(workflowId), "workflowId")))


@route("createRun")
def create_run() -> Response:
    principal = principal_for("createRun")
    state = service().create_run(principal, required_body())
    links = run_links(state.runId)
    return json_response(201, {"runId": state.runId, "status": state.status, **links}, {"Location": links["statusUrl"]})


@route("getRun")
def get_run(runId: str) -> Response:
    principal = principal_for("getRun")
    state, _ = service().load_run(principal.tenant, from_wire(runId))
    etag = f'"{state.nextSeq}-{state.status}"'
    if app.current_event.get_header_value("if-none-match") == etag:
        return Response(status_code=304, headers={"OpenWOP-Version": OPENWOP_VERSION, "ETag": etag})
    return json_response(200, service().snapshot(state), {"ETag": etag})


@route("cancelRun")
def cancel_run(runId: str) -> Response:
    principal = principal_for("cancelRun")
    state = service().cancel_run(principal, from_wire(runId), body())
    return json_response(200, {"runId": state.runId, "status": state.status})


@route("pollRunEvents")
def poll_run_events(runId: str) -> Response:
    principal = principal_for("pollRunEvents")
    run_id = from_wire(runId)
    after = query_int("afterSequence", None, 0, 10**12)
    timeout = query_int("timeout", 30, 1, 60) or 30
    wait = min(float(timeout), settings().max_poll_seconds)
    # afterSequence is an exclusive cursor; omitted means "from the first event".
    return json_response(200, service().poll_events(principal, run_id, -1 if after is None else after, wait))


@route("resolveInterruptByRun")
def resolve_interrupt_by_run(runId: str, nodeId: str) -> Response:
    principal = principal_for("resolveInterruptByRun")
    run_id = from_wire(runId)
    node_id = check_author_id(unquote(nodeId), "nodeId")
    payload = required_body()
    if not isinstance(payload, dict) or set(payload) != {"resumeValue"}:
        raise ApiError("validation_error", "the body must be exactly {resumeValue}", {"field": "body"})
    return json_response(200, service().resolve_interrupt(principal, run_id, node_id, payload["resumeValue"]))


@route("createKey")
def create_key() -> Response:
    principal = principal_for("createKey")
    return json_response(201, service().create_key(principal, required_body()))


# -- entry point -------------------------------------------------------------------------------------


def normalise_path(raw_path: str) -> str:
    """Decode each segment, keeping an encoded '/' inside a segment as the ~2F wire form."""
    segments = raw_path.split("/")
    return "/".join(quote(unquote(s), safe="~!$&'()*+,;=:@-._").replace("%2F", "~2F") if s else s for s in segments)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "rawPath" in event:
        event = {**event, "rawPath": normalise_path(event["rawPath"])}
    return app.resolve(event, context)
