"""`route()`: registers a handler for an operation of wiring.ROUTES on the resolver, with Idempotency-Key on
every mutating route. Above http.py and idempotency.py, so neither imports the other's importer.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from aws_lambda_powertools.event_handler import Response

from interlude.api import http
from interlude.api.idempotency import idempotent


def route(operation: str) -> Callable[[Callable[..., Response]], Callable[..., Response]]:
    spec = http.ROUTES_BY_OPERATION[operation]
    rule = re.sub(r"{(\w+)}", r"<\1>", spec.path)
    register = http.app.route(rule, spec.method)

    def decorator(handler: Callable[..., Response]) -> Callable[..., Response]:
        # Every mutating route honours Idempotency-Key here, once, whatever module its handler lives in.
        if spec.mutating:
            register(idempotent(spec, handler))
        else:
            register(handler)
        return handler

    return decorator
