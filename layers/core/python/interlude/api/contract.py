"""What each route of wiring.ROUTES answers, read at the edge: the models and values its declaration names by dotted
name (imported here, when the OpenAPI document is built: interlude.api.openapi), and every error code it may refuse
with. The suite holds the handlers to it (schemathesis against the local stack; tests/e2e/test_api_errors.py checks
every refusal's code against its operation's declaration).

An operation's error codes are the ones its route implies (a key → 401/403; acting for a tenant → 403 when it is
suspended; a body → 400/413/415; an Idempotency-Key → its three refusals; a path parameter → 400) plus the ones it
declares (wiring.Route.errors).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from interlude import wiring
from interlude.api.errors import status_for_code

FORM = "application/x-www-form-urlencoded"
PAGE = {"type": "string", "description": "The approval page"}

# Every refusal a request can meet whatever the operation: an unexpected failure (the correlation id is logged).
ALWAYS = ("internal_error",)
# A key's tenant may also be over its request rate (429 with Retry-After).
KEYED = ("unauthenticated", "forbidden", "rate_limited")
BODY = ("validation_error", "payload_too_large", "unsupported_media_type")
# A write that reads no body still refuses one past the limit, or one that is not UTF-8 (wiring.Route.body_limited).
BODY_LIMIT = ("validation_error", "payload_too_large")
IDEMPOTENT = ("idempotency_key_invalid", "idempotency_key_mismatch", "idempotency_in_flight")
# A route acting for a tenant (its key's, its console session's, its link's) refuses a suspended one.
TENANT_BOUND = ("interlude.tenant_suspended",)


def named(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(import_module(module), name)


def model(dotted: str) -> type[BaseModel]:
    found = named(dotted)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise TypeError(f"{dotted} is not a model")
    return found


def resolved(node: Any) -> Any:
    """`node` with each wiring.Ref in it replaced by the value it names."""
    if isinstance(node, wiring.Ref):
        value = named(node.name)
        if get_origin(value) is Literal:
            value = get_args(value)
        if isinstance(value, tuple):
            value = list(value)
        return node.text.format(value) if node.text else value
    if isinstance(node, dict):
        return {key: resolved(value) for key, value in node.items()}
    return node


def params(route: wiring.Route) -> list[wiring.Param]:
    """The route's query and header parameters, their values read (a Ref to several names: one parameter each)."""
    found: list[wiring.Param] = []
    for param in route.params:
        names = resolved(param.name)
        for name in names if isinstance(names, list) else [names]:
            found.append(wiring.Param(name, param.where, resolved(param.schema), resolved(param.description)))
    return found


def is_modulex(route: wiring.Route) -> bool:
    return route.face == "modulex"


def error_codes(route: wiring.Route) -> list[str]:
    """Every code `route` may refuse with: what its route implies, then what it declares."""
    codes: list[str] = [*ALWAYS]
    if route.scope:
        codes += KEYED
    if wiring.acts_for_a_tenant(route):
        codes += TENANT_BOUND
    if route.request is not None:
        codes += BODY
    elif route.body_limited:
        codes += BODY_LIMIT
    if route.mutating:
        codes += IDEMPOTENT
    if "{" in route.path:
        codes.append("validation_error")
    codes += route.errors
    return list(dict.fromkeys(codes))


def error_statuses(route: wiring.Route) -> dict[int, list[str]]:
    """The codes `route` may refuse with, by the status each answers with on the route's face."""
    by_status: dict[int, list[str]] = {}
    for code in error_codes(route):
        by_status.setdefault(status_for_code(code, route.face), []).append(code)
    return dict(sorted(by_status.items()))
