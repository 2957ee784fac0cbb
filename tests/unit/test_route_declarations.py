"""Each route is declared once, whole, in wiring.ROUTES, and everything else about it is derived from that declaration.
These hold each declaration to what it names: a module that registers exactly its routes, models that are models,
codes that are registered, values that exist; a declaration that drifts from the code fails here, by name."""

from __future__ import annotations

import re
from importlib import import_module

import pytest
from pydantic import BaseModel

from interlude import wiring
from interlude.api import app as api_app
from interlude.api import contract, routes
from interlude.api.errors import status_for_code
from interlude.domain.errors import ERROR_CODES

ROUTES = {r.operation: r for r in wiring.ROUTES}


def named_models(route: wiring.Route) -> list[str]:
    return [
        *([route.request] if route.request else []),
        *(a.model for a in route.answers if a.model),
        *(m for a in route.answers for m in a.one_of),
    ]


def test_operations_and_route_keys_are_declared_once():
    assert len(ROUTES) == len(wiring.ROUTES)
    keys = [f"{r.method} {r.path}" for r in wiring.ROUTES]
    assert sorted(k for k in keys if keys.count(k) > 1) == []


def test_api_gateway_declares_each_parameter_whole_and_routes_sharing_a_key_share_a_throttle_class():
    # API Gateway refuses a path part that mixes a parameter with text ("/runs/{runId}:fork": "one or more path
    # parts appear to be invalid"), so such a route is declared as its parameter's segment alone, shared.
    for route in wiring.ROUTES:
        for part in route.gateway_path.split("/"):
            assert "{" not in part or re.fullmatch(r"\{\w+\+?\}", part), route.gateway_key
    by_operation = {r.operation: r for r in wiring.ROUTES}
    assert by_operation["forkRun"].gateway_key == by_operation["redriveRun"].gateway_key == "POST /runs/{runId}"
    classes: dict[str, set[str]] = {}
    for route in wiring.ROUTES:
        classes.setdefault(route.gateway_key, set()).add(wiring.route_class(route))
    assert {key: c for key, c in classes.items() if len(c) > 1} == {}
    assert [r.gateway_key for r in wiring.gateway_routes()] == list(classes)


def test_each_module_registers_exactly_the_routes_that_name_it():
    api_app.load_all_routes()
    registered: dict[str, set[str]] = {}
    for operation, module in routes.REGISTERED.items():
        registered.setdefault(module, set()).add(operation)
    declared: dict[str, set[str]] = {}
    for route in wiring.ROUTES:
        declared.setdefault(f"interlude.api.{route.module}", set()).add(route.operation)
    assert registered == declared


def test_an_undeclared_operation_cannot_be_registered():
    with pytest.raises(KeyError):
        routes.route("noSuchOperation")


@pytest.mark.parametrize("route", wiring.ROUTES, ids=lambda r: r.operation)
def test_a_route_declares_its_summary_answers_and_models(route: wiring.Route):
    assert route.summary
    assert route.answers
    assert len({a.status for a in route.answers}) == len(route.answers)
    assert all(200 <= a.status < 400 for a in route.answers)
    for answer in route.answers:
        # A body is one of a model, several models, or a schema; or none at all (no media: 204, 304).
        kinds = [answer.model is not None, bool(answer.one_of), answer.schema is not None]
        assert sum(kinds) == (1 if answer.media else 0), answer
    for dotted in named_models(route):
        assert issubclass(contract.model(dotted), BaseModel), dotted
    assert not (route.optional_body or route.form) or route.request, "a body option without a body"


@pytest.mark.parametrize("route", wiring.ROUTES, ids=lambda r: r.operation)
def test_a_route_declares_registered_codes_each_with_a_status_on_its_face(route: wiring.Route):
    assert [code for code in route.errors if code not in ERROR_CODES] == []
    assert all(400 <= status_for_code(code, route.face) < 600 for code in contract.error_codes(route))


@pytest.mark.parametrize("route", wiring.ROUTES, ids=lambda r: r.operation)
def test_a_routes_parameters_are_read_and_named_once(route: wiring.Route):
    params = contract.params(route)
    names = [*re.findall(r"{(\w+)}", route.path), *(p.name for p in params)]
    assert len(set(names)) == len(names), names
    for param in params:
        assert isinstance(param.name, str)
        assert isinstance(param.description, str)
        assert "Ref(" not in repr(param.schema), param


@pytest.mark.parametrize("route", wiring.ROUTES, ids=lambda r: r.operation)
def test_a_routes_kind_is_consistent(route: wiring.Route):
    """Writes are not GETs and keep Idempotency-Key; a deciding route is a write; a console route acts as an API
    route that is not a console route."""
    assert (route.method != "GET") == route.mutating
    assert route.decides is None or route.mutating
    import_module(f"interlude.api.{route.module}")
    if route.acts_as is not None:
        assert ROUTES[route.acts_as].module != route.module


def test_a_value_named_by_a_declaration_is_read_as_the_document_needs_it():
    """A Ref reads a constant as it is, a tuple or a Literal as a list, and formats into text."""
    limit, kinds, statuses = (
        wiring.Ref("interlude.app.keys.MAX_KEYS_LIMIT"),
        wiring.Ref("interlude.app.inbox.INTERRUPT_KINDS"),
        wiring.Ref("interlude.domain.models.run.RunStatus"),
    )
    from interlude.app import inbox, keys

    assert contract.resolved({"maximum": limit}) == {"maximum": keys.MAX_KEYS_LIMIT}
    assert contract.resolved(kinds) == list(inbox.INTERRUPT_KINDS)
    assert "pending" in contract.resolved(statuses)
    assert contract.resolved(wiring.Ref("interlude.app.keys.MAX_KEYS_LIMIT", "at most {}")) == (
        f"at most {keys.MAX_KEYS_LIMIT}"
    )
