"""Lambda entry point of the HTTP face: importing the route modules registers their routes on the resolver."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from interlude import wiring
from interlude.adapters import metrics

# Importing a route module registers its routes: inbox (inbox, events, tenant; issue 3), tokens (issue 4),
# deliveries (issue 6), modulex and streams (the ModuleX face and the SSE stream; issue 7), keys (issue 11),
# effects (issue 15), principals, delegation, webhooks and notifications (issue 14).
from interlude.api import (  # noqa: F401
    audit,  # (issue 16: the audit log)
    delegation,
    deliveries,
    effects,
    inbox,
    keys,
    modulex,
    modulex_workflows,
    notifications,
    principals,
    run_listing,
    runs,
    streams,
    subworkflows,  # noqa: F401  (issue 15 item 3: GET /runs/{runId}/ancestry)
    tasks,  # (issue 15 item 2: task workers)
    tokens,
    webhooks,
)

# The operator console (issue 16).
from interlude.api.console import routes as console_routes  # noqa: F401
from interlude.api.http import app, logger

# The routes by which an interrupt is decided (by route key, as API Gateway names it), and the surface each is.
DECIDING_SURFACES = {"resolveInterruptByRun": "run", "resolveInterruptByToken": "token", "modulexResume": "modulex"}
DECIDING_ROUTES = {
    f"{r.method} {r.path}": DECIDING_SURFACES[r.operation] for r in wiring.ROUTES if r.operation in DECIDING_SURFACES
}

# -- entry point -------------------------------------------------------------------------------------


def normalise_path(raw_path: str) -> str:
    """Decode each segment, keeping an encoded '/' inside a segment as the ~2F wire form."""
    segments = raw_path.split("/")
    return "/".join(quote(unquote(s), safe="~!$&'()*+,;=:@-._").replace("%2F", "~2F") if s else s for s in segments)


@logger.inject_lambda_context(clear_state=True, correlation_id_path="requestContext.requestId")
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "rawPath" in event:
        event = {**event, "rawPath": normalise_path(event["rawPath"])}
    response = app.resolve(event, context)
    count_response(event.get("routeKey", "unmatched"), int(response.get("statusCode", 500)))
    return response


def count_response(route: str, status: int) -> None:
    if status >= 400:
        metrics.count("ApiErrors", route=route, status=f"{status // 100}xx")
    elif route in DECIDING_ROUTES:
        metrics.count("Decisions", surface=DECIDING_ROUTES[route])
