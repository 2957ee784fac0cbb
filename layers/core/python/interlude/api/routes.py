"""`route()`: registers a handler for an operation of wiring.ROUTES on the resolver, with Idempotency-Key on
every mutating route and the route's face (how its refusals are shaped) on every request. Above http.py and
idempotency.py, so neither imports the other's importer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api import http
from interlude.api.idempotency import idempotent

NO_STORE = "no-store"
# The module that registered each operation (api/app.py imports route modules by it; a test compares).
REGISTERED: dict[str, str] = {}


def route(operation: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    spec = http.ROUTES_BY_OPERATION[operation]
    rule = re.sub(r"{(\w+)}", r"<\1>", spec.path)
    register = http.app.route(rule, spec.method)

    def decorator(handler: Callable[..., Response]) -> Callable[..., Response]:
        bounded = within_body_limit(handler) if spec.body_limited else handler
        # Every mutating route honours Idempotency-Key here, once, whatever module its handler lives in; a console
        # form in its handler, once its credential holds (wiring.Route.keyed_in_handler).
        answer = idempotent(spec, bounded) if spec.mutating and not spec.keyed_in_handler else bounded

        @functools.wraps(handler)
        def on_face(**params: str) -> Response:
            # First, so that every refusal of this request (idempotency's included) takes the route's face.
            http.app.append_context(**{http.FACE_CONTEXT: spec.face})
            answered = answer(**params)
            if spec.credential:
                # No cache between the caller and the API keeps it, replayed or not (wiring.Route.credential).
                answered.headers["Cache-Control"] = NO_STORE
            return answered

        register(on_face)
        REGISTERED[operation] = handler.__module__
        return handler

    return decorator


def within_body_limit(handler: Callable[..., Response]) -> Callable[..., Response]:
    """`handler`, its request's body refused past the limit first (wiring.Route.body_limited)."""

    @functools.wraps(handler)
    def bounded(**params: str) -> Response:
        http.raw_body()
        return handler(**params)

    return bounded
