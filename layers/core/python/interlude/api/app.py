"""Lambda entry point of the HTTP face: a request imports the route modules its path needs, which registers their
routes on the resolver."""

from __future__ import annotations

from importlib import import_module
from typing import Any
from urllib.parse import quote, unquote

from interlude import wiring
from interlude.adapters import metrics
from interlude.api.http import app, logger
from interlude.api.page.headers import with_page_headers
from interlude.coldstart import importing

# The route modules of this package (wiring.Route.module), in the order their first routes are declared. A module is
# imported when a request's path first matches one of its routes (which its `@route(...)`s register), so a cold start
# loads the module of the route it answers, not all of them.
ROUTE_MODULES = tuple(dict.fromkeys(r.module for r in wiring.ROUTES))
MODULE_OF = {r.operation: r.module for r in wiring.ROUTES}
# (method, path segments with None for a parameter, module to import) per route; a trailing '/' matches too (loading
# more is harmless; a path no route of its method matches loads nothing: the resolver's not-found handler answers 404
# or 405 from wiring). Segments, not one compiled pattern per route: every cold start built them all.
_ROUTE_LOADS = [
    (r.method, tuple(None if part.startswith("{") else part for part in r.path.split("/")), r.module)
    for r in wiring.ROUTES
]
_loaded: set[str] = set()


def _matches(pattern: tuple[str | None, ...], parts: list[str]) -> bool:
    """A parameter matches any non-empty segment (API Gateway's `{name}`), anything else only itself."""
    return len(pattern) == len(parts) and all(
        p == part if p is not None else part != "" for p, part in zip(pattern, parts, strict=True)
    )


def modules_for(method: str, path: str) -> set[str]:
    """The route modules of the routes `method` and `path` match."""
    parts = path.split("/")
    if len(parts) > 2 and parts[-1] == "":
        parts.pop()
    return {module for m, pattern, module in _ROUTE_LOADS if m == method and _matches(pattern, parts)}


def load_routes(method: str, path: str) -> None:
    """Import (so register) the route modules whose routes match `method` and `path`, in the table's order, once."""
    # A path no route matches under a page's prefix: that page's module, to refuse it (wiring.PAGE_PREFIXES).
    page = wiring.page_module(path)
    wanted = modules_for(method, path) or ({page} if page is not None else set())
    missing = [module for module in ROUTE_MODULES if module in wanted and module not in _loaded]
    if not missing:
        return
    # What a route module loads lives as long as the instance, like what the handler's import made: the collector
    # does not walk it while it is made (a first request's young collections were ≈ 5 % of its CPU).
    with importing():
        for module in missing:
            import_module(f"interlude.api.{module}")
            _loaded.add(module)


def load_all_routes() -> None:
    """Every route module (the OpenAPI tests and tools that walk the resolver's routes)."""
    for module in ROUTE_MODULES:
        if module not in _loaded:
            import_module(f"interlude.api.{module}")
            _loaded.add(module)


# The routes by which an interrupt is decided (by route key, as API Gateway names it), and the surface each is.
DECIDING_ROUTES = {r.gateway_key: r.decides for r in wiring.ROUTES if r.decides}

# -- entry point -------------------------------------------------------------------------------------


def normalise_path(raw_path: str) -> str:
    """Decode each segment, keeping an encoded '/' inside a segment as the ~2F wire form."""
    segments = raw_path.split("/")
    return "/".join(quote(unquote(s), safe="~!$&'()*+,;=:@-._").replace("%2F", "~2F") if s else s for s in segments)


@logger.inject_lambda_context(clear_state=True, correlation_id_path="requestContext.requestId")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if (event.get("requestContext") or {}).get("connectionId"):
        # The WebSocket API's routes (wiring.LIVE_API): loaded with the first of them, as a route module is.
        from interlude.api.live import handle

        return handle(event)
    if "rawPath" in event:
        event = {**event, "rawPath": normalise_path(event["rawPath"])}
        load_routes(str((event.get("requestContext") or {}).get("http", {}).get("method", "")).upper(), event["rawPath"])
    else:
        load_all_routes()
    response = app.resolve(event, context)
    if wiring.page_module(str(event.get("rawPath") or "")) is not None:
        # Where people browse, every answer carries the pages' headers, whatever made it (interlude.api.page.headers).
        response["headers"] = with_page_headers(response.get("headers"))
    count_response(event.get("routeKey", "unmatched"), int(response.get("statusCode", 500)))
    return response


def count_response(route: str, status: int) -> None:
    if status >= 400:
        metrics.count("ApiErrors", route=route, status=f"{status // 100}xx")
    elif route in DECIDING_ROUTES:
        metrics.count("Decisions", surface=DECIDING_ROUTES[route])
