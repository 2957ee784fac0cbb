"""The one powertools resolver, its refusal handlers, and the request helpers every route module uses."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar, overload

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler.api_gateway import APIGatewayHttpResolver, Response
from pydantic import BaseModel

# Every request is authenticated (app/keys.py) and admitted by its tenant's limits (app/limits.py): the composition
# builds both at the first request; their modules load with the API's import, where every request needs them.
import interlude.app.keys  # noqa: F401
import interlude.app.limits  # noqa: F401
from interlude import sdk_clients, wiring
from interlude.api import strict_json
from interlude.api.errors import reply
from interlude.api.page.cookies import parse_cookies
from interlude.app.caught import caught
from interlude.composition import services
from interlude.config import settings
from interlude.config.delivery import delivery_settings
from interlude.domain.errors import (
    DomainError,
    Internal,
    Invalid,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    TooLarge,
    Unavailable,
    UnsupportedMedia,
)
from interlude.domain.ids import AUTHOR_ID_RE, to_wire
from interlude.domain.validation import parse
from interlude.rules.auth import Principal
from interlude.store.tenant_standing import TenantStanding, standing_of
from interlude.wiring import Face

if TYPE_CHECKING:
    from interlude.app import streams as streaming

logger = Logger(service="interlude")
app = APIGatewayHttpResolver()
OPENWOP_VERSION = "2.0"
MAX_BODY_BYTES = 1_000_000
MAX_JSON_DEPTH = strict_json.MAX_DEPTH
ROUTES_BY_OPERATION = {r.operation: r for r in wiring.ROUTES}
M = TypeVar("M", bound=BaseModel)
# The resolver's per-request context key naming the face of the route being answered.
FACE_CONTEXT = "face"


@cache
def standing() -> TenantStanding:
    """Whether a request's tenant may act now (suspended tenants are refused on every surface: issue 30 item 6)."""
    return standing_of(services().store, services().clock)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    """`body` as JSON: an answer model (interlude.domain.models.responses) or a plain JSON value."""
    return Response(
        status_code=status,
        content_type="application/json",
        body=json_text(body),
        headers={"OpenWOP-Version": OPENWOP_VERSION, **(headers or {})},
    )


def json_text(body: Any) -> str:
    if isinstance(body, BaseModel):
        body = body.model_dump(mode="json")
    return json.dumps(body, separators=(",", ":"), allow_nan=False)


def tagged_json(body: Any, headers: dict[str, str] | None = None) -> Response:
    """200 with `body` as JSON and a strong ETag of exactly those bytes, or 304 when If-None-Match names it."""
    text = json_text(body)
    etag = '"' + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'
    if if_none_match(etag):
        return not_modified(etag, headers)
    return Response(
        status_code=200,
        content_type="application/json",
        body=text,
        headers={"OpenWOP-Version": OPENWOP_VERSION, "ETag": etag, **(headers or {})},
    )


def if_none_match(etag: str) -> bool:
    """Whether the request's If-None-Match names `etag`: `*`, or a listed tag equal to it by weak comparison (RFC
    9110 §13.1.2: a W/ prefix is ignored)."""
    header = (app.current_event.headers or {}).get("if-none-match")
    if header is None:
        return False
    if header.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag.removeprefix("W/") for tag in header.split(","))


def not_modified(etag: str, headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=304, headers={"OpenWOP-Version": OPENWOP_VERSION, "ETag": etag, **(headers or {})})


def current_face() -> Face:
    """The face of the route answering this request (set by routes.route; the OpenWOP face if none matched)."""
    face: Face = app.context.get(FACE_CONTEXT, "openwop")
    return face


def error_response(exc: DomainError) -> Response:
    status, body, headers = reply(exc, current_face())
    if current_face() == "openwop":
        return json_response(status, body, headers)
    return Response(
        status_code=status,
        content_type="application/json",
        body=json.dumps(body, separators=(",", ":"), allow_nan=False),
        headers=headers,
    )


@app.exception_handler(DomainError)
def _refused(exc: DomainError) -> Response:
    return refusal_answer(exc)


@app.exception_handler(Exception)
def _unexpected(exc: Exception) -> Response:
    if sdk_clients.throttled(exc):
        # Another service the request called (SQS, Scheduler, Secrets Manager, S3) still throttled it once the SDK's
        # retries were spent: that call did nothing, and the caller comes back. DynamoDB's throttles are refused as
        # Unavailable by the store itself (store/table.refuse_throttled).
        logger.warning("an AWS service throttled the request; answered 503", extra={"error": str(exc)})
        return refusal_answer(Unavailable("a service this deployment calls is busy (throttled); retry", retry_after_s=1))
    caught(logger, "unhandled-request", "unhandled error")
    request_id = app.current_event.request_context.request_id or "unknown"
    return refusal_answer(Internal("internal error", {"correlationId": request_id}))


def refusal_answer(exc: DomainError) -> Response:
    """A refusal or failure a route's handler let through: where people browse (wiring.page_module), the page its
    module words it in, never the protocol's body; elsewhere the body of the route's face."""
    module = wiring.page_module(app.current_event.path)
    page = REFUSAL_PAGES.get(module) if module is not None else None
    return page(exc) if page is not None else error_response(exc)


def asks_for_json() -> bool:
    """Whether the request asks for JSON before a page: its Accept names application/json at a higher quality than
    text/html (left out: 0). A browser names text/html; curl, requests and fetch() send */* and are given the page."""
    quality: dict[str, float] = {}
    for media_range in (app.current_event.headers.get("accept") or "").split(","):
        media, *params = (part.strip().lower() for part in media_range.split(";"))
        q = next((value for name, _, value in (p.partition("=") for p in params) if name.strip() == "q"), "1")
        try:
            quality[media] = max(float(q), quality.get(media, 0.0))
        except ValueError:
            continue
    return quality.get("application/json", 0.0) > quality.get("text/html", 0.0)


def refused_as_asked(exc: DomainError, page: Callable[[], Response]) -> Response:
    """A refusal where people browse: `page()`, the refusal in words; to an API client asking for JSON
    (asks_for_json), the refusal's body on the route's face, as everywhere else."""
    return error_response(exc) if asks_for_json() else page()


# A path segment ending in an OpenWOP custom method (`{runId}:fork`, `:pause`, `:resume`, `:diff`): an operation of
# its own, which this host serves only where a route names it literally (`/runs:bulk-cancel`). One it does not serve
# answers 404, as an unadvertised family's operation must (capabilities.md), not 405 for the run's own route.
CUSTOM_METHOD = r"[^/]*:[a-z][a-z-]*"


def is_custom_method(segment: str) -> bool:
    return re.fullmatch(CUSTOM_METHOD, segment) is not None


@cache
def route_patterns() -> list[tuple[re.Pattern[str], str]]:
    """(path pattern, method) of every route; compiled by the first request no route matches (≈ 130 patterns that
    every cold start compiled for the few requests answered 404 or 405). A parameter is never a custom method."""
    parameter = rf"(?!{CUSTOM_METHOD}(?:/|$))[^/]+"
    return [(re.compile("^" + re.sub(r"{\w+}", parameter, r.path) + "$"), r.method) for r in wiring.ROUTES]


@cache
def _faces_by_static_prefix() -> dict[tuple[str, ...], set[str]]:
    """Each route's path segments before its first parameter, with the faces of the routes that share them."""
    faces: dict[tuple[str, ...], set[str]] = {}
    for r in wiring.ROUTES:
        segments = r.path.strip("/").split("/")
        static = tuple(segments[: next((i for i, s in enumerate(segments) if "{" in s), len(segments))])
        faces.setdefault(static, set()).add(r.face)
    return faces


def face_of_unmatched(path: str) -> Face:
    """The face a path no route answers is refused in: the ModuleX face's where the longest run of fixed segments it
    starts with is ModuleX's alone (`/workflows/resume/{threadId}` met as `/workflows/resume/demo/x`), else OpenWOP's."""
    segments = tuple(path.strip("/").split("/"))
    found = [(len(k), faces) for k, faces in _faces_by_static_prefix().items() if k and segments[: len(k)] == k]
    faces = max(found, key=lambda f: f[0])[1] if found else set()
    return "modulex" if faces == {"modulex"} else "openwop"


# By route module: the page refusing a path among its pages (wiring.page_module) that no route answers, or a request
# there whose handler failed (refusal_answer), which the module registers as it loads (interlude.api.app loads it for
# such a path).
REFUSAL_PAGES: dict[str, Callable[[DomainError], Response]] = {}


@app.not_found
def _not_found(exc: Exception) -> Response:
    path = app.current_event.path
    allowed = sorted({method for pattern, method in route_patterns() if pattern.fullmatch(path)})
    refusal: DomainError = (
        MethodNotAllowed(f"{app.current_event.http_method} is not allowed here", allowed)
        if allowed
        else NotFound("no such route")
    )
    app.append_context(**{FACE_CONTEXT: face_of_unmatched(path)})
    return refusal_answer(refusal)


# -- request helpers -----------------------------------------------------------------------------


def principal_for(operation: str) -> Principal:
    """The request's key holder, counted once per request against its tenant's rate, holding the route's scope."""
    principal = app.context.get("principal")
    if principal is None:
        principal = services().keys.authenticate(app.current_event.headers.get("authorization"))
        admit(principal)
        # The Idempotency-Key layer and the handler both ask: one request is counted once.
        app.append_context(principal=principal)
    return authorize(principal, operation)


def admit(principal: Principal) -> None:
    """A request of `principal`'s (an API request, a live connection's message) counted against its tenant's rate,
    the tenant active."""
    read_tenant_once(principal.tenant)
    standing().require_active(principal.tenant)
    admission = services().limiter.admit(principal)
    if not admission.allowed:
        raise RateLimited(
            f"this tenant's limit of {admission.limit} requests per second was reached",
            {"limit": admission.limit, "unit": "requests per second"},
            retry_after_s=admission.retry_after_s,
        )


def read_tenant_once(tenant: str) -> None:
    """Where this instance trusts neither the tenant's status nor its limits (its first request of the tenant), both
    are read in one call, not one each (ADR 0137); what it trusts already is not read again."""
    limiter = services().limiter
    if not standing().knows(tenant) and not limiter.knows(tenant):
        status, settings = standing().statuses.status_and_settings(tenant)
        standing().remember(tenant, status)
        limiter.remember(tenant, settings)


def scope_of(operation: str) -> str | None:
    """The scope a request for `operation` must hold: its route's, or, for a console route, the scope of the API
    operation it performs (wiring.Route.acts_as)."""
    spec = ROUTES_BY_OPERATION[operation]
    return ROUTES_BY_OPERATION[spec.acts_as].scope if spec.acts_as else spec.scope


def authorize(principal: Principal, operation: str) -> Principal:
    """`principal` when it holds the scope `operation` requires; else 403 naming the scope. The API's routes and the
    console's pages and forms all pass through here."""
    scope = scope_of(operation)
    if scope:
        principal.require(scope)
    return principal


def raw_body() -> str:
    try:
        raw = app.current_event.decoded_body or ""
    except UnicodeDecodeError:
        raise Invalid("the body is not valid UTF-8") from None
    if len(raw.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise TooLarge(f"the request body exceeds {MAX_BODY_BYTES} bytes")
    return raw


def parse_json(raw: str) -> Any:
    """`raw` as strict JSON (interlude.api.strict_json): else a 400 validation_error naming the field."""
    try:
        return strict_json.loads(raw, MAX_JSON_DEPTH)
    except strict_json.StrictJsonError as exc:
        raise Invalid(exc.message, {"field": exc.field}) from None


def body() -> Any:
    raw = raw_body()
    if not raw.strip():
        return None
    content_type = (app.current_event.headers.get("content-type") or "application/json").lower()
    if "json" not in content_type:
        raise UnsupportedMedia("send the body as application/json")
    return parse_json(raw)


def required_body() -> Any:
    value = body()
    if value is None:
        raise Invalid("a JSON body is required")
    return value


def parsed(model: type[M], what: str = "request body", optional: bool = False) -> M:
    """The request's body as `model`: the one place a body becomes a typed request (400 validation_error with
    each problem's field path otherwise). An `optional` body left out reads as `{}`."""
    raw = body() if optional else required_body()
    parsed_body: M = parse(model, {} if raw is None else raw, what)
    return parsed_body


def resume_value_body() -> Any:
    """A resolve's body, which is exactly {resumeValue}: the resume value."""
    payload = required_body()
    if not isinstance(payload, dict) or set(payload) != {"resumeValue"}:
        raise Invalid("the body must be exactly {resumeValue}", {"field": "body"})
    return payload["resumeValue"]


@overload
def query_int(name: str, default: int, lo: int, hi: int, query: dict[str, str] | None = None) -> int: ...
@overload
def query_int(name: str, default: None, lo: int, hi: int, query: dict[str, str] | None = None) -> int | None: ...
def query_int(name: str, default: int | None, lo: int, hi: int, query: dict[str, str] | None = None) -> int | None:
    """An integer query parameter (of this request, or of `query`) within [lo, hi]; else a 400 naming it."""
    raw = (query if query is not None else app.current_event.query_string_parameters or {}).get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"-?[0-9]{1,12}", raw) or not lo <= int(raw) <= hi:
        raise Invalid(f"{name} must be an integer from {lo} to {hi}", {"field": name})
    return int(raw)


def query_flag(name: str) -> bool:
    """A true/false query parameter (in any case: a client may send Python's `True`), false when left out; else a 400
    naming it, never a value read as false."""
    raw = ((app.current_event.query_string_parameters or {}).get(name) or "false").lower()
    if raw not in ("true", "false"):
        raise Invalid(f"{name} must be true or false", {"field": name})
    return raw == "true"


def last_event_id() -> int | None:
    """The request's Last-Event-ID (an event sequence to resume after), or None; else a 400 naming it."""
    # The SSE routes' module, imported by them: no other request loads it.
    from interlude.app import streams as streaming

    try:
        return streaming.parse_last_event_id((app.current_event.headers or {}).get("last-event-id"))
    except ValueError:
        raise Invalid(
            "Last-Event-ID must be a non-negative integer (an event sequence)",
            {"field": "Last-Event-ID"},
        ) from None


def stream_bounds() -> streaming.Bounds:
    from interlude.app import streams as streaming

    cfg = settings()
    return streaming.Bounds(cfg.stream_hold_seconds, cfg.stream_linger_seconds, cfg.stream_retry_ms)


def sse_response(parts: list[str], headers: dict[str, str] | None = None) -> Response:
    # No caching and no proxy buffering: each frame is meant to reach the client as it is written.
    return Response(
        status_code=200,
        content_type="text/event-stream",
        body="".join(parts),
        headers={**(headers or {}), "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def request_cookies() -> dict[str, str]:
    """The request's cookies by name (API Gateway hands them over as a list; a bare invocation, in its header)."""
    event = app.current_event
    values = list(event.cookies or [])
    if not values and event.headers.get("cookie"):
        values = [event.headers.get("cookie") or ""]
    return parse_cookies(values)


def over_https() -> bool:
    """Whether the deployment is served over https (base_url): the pages' cookies are Secure and prefixed then
    (interlude.api.page.cookies); the local stack serves plain http on loopback."""
    return base_url().startswith("https://")


def base_url() -> str:
    """The base of every link Interlude hands out: the deployment's PUBLIC_BASE_URL (the local stack sets its own).
    Never a request header (Host, X-Forwarded-Host/-Proto, Forwarded): a caller must not choose where links point.
    Unset only when a handler is invoked bare; then the domain API Gateway itself records it served."""
    configured = delivery_settings().public_base_url
    return configured or f"https://{app.current_event.request_context.domain_name}"


def run_links(run_id: str) -> dict[str, str]:
    wire = to_wire(run_id)
    return {"eventsUrl": f"{base_url()}/runs/{wire}/events", "statusUrl": f"{base_url()}/runs/{wire}"}


# The organisation a ModuleX request acts for (the SDKs send it when one is configured): a header only ModuleX defines.
ORG_HEADER = "x-organization-id"
# The product names modulex-python and modulex-js put in User-Agent.
MODULEX_USER_AGENTS = ("modulex-python/", "modulex-js/")


def is_modulex_client() -> bool:
    """Whether the request comes from a ModuleX client: it names an organisation, or its User-Agent is a ModuleX SDK's."""
    headers = app.current_event.headers or {}
    return ORG_HEADER in headers or headers.get("user-agent", "").startswith(MODULEX_USER_AGENTS)


def answers_as_modulex(tenant: str, workflow_id: str) -> bool:
    """Whether GET and PUT /workflows/{id} answer on the ModuleX face: for a ModuleX client (which reads every workflow
    in ModuleX's shape), and for the id of a ModuleX workflow of the tenant (live or deleted), whoever asks.

    Here, not beside the ModuleX routes: the OpenWOP workflow routes ask it of every id, and importing those routes'
    module loads the whole ModuleX face."""
    if is_modulex_client():
        return True
    return bool(AUTHOR_ID_RE.fullmatch(workflow_id)) and services().store.get_modulex_workflow(tenant, workflow_id) is not None
