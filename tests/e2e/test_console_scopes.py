"""Issue 26, S1: every console page and form holds the scope of the API operation it performs (wiring.Route.acts_as),
walked over every console route wiring declares, so a new page or form cannot escape: a session whose key lacks the
scope is refused and nothing in its tenant changes (every partition the form could write, read by Query: `Tenant.items`);
a session whose key holds only that scope acts, and is answered with a page, never a refusal after the fact."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from interlude import wiring
from tests.support.console_forms import FORMS, Tenant, unexpiring
from tests.support.local_stack import wire

ROUTES = {r.operation: r for r in wiring.ROUTES}
# The console's own routes: they perform no API operation, and need no scope.
SESSION_ROUTES = {"consoleRoot", "consoleHome", "consoleSignInPage", "consoleSignIn", "consoleSignOut"}
ACTING = [r for r in wiring.CONSOLE_ROUTES if r.operation not in SESSION_ROUTES]


def scope_of(route: wiring.Route) -> str:
    assert route.acts_as is not None, route.operation
    scope = ROUTES[route.acts_as].scope
    assert scope is not None, route.acts_as
    return scope


@pytest.fixture(scope="module")
def tenant(stack_info: dict[str, str]) -> Tenant:
    return Tenant(stack_info)


# What a console form's API route needs beyond its own scope (forkRun and redriveRun read the source's history).
ALSO_NEEDS = {"consoleForkRun": ("runs:read",), "consoleRedriveRun": ("runs:read",)}
# Path parameters of the console's pages.
PAGE_PARAMETERS: dict[str, Callable[[Tenant], dict[str, str]]] = {
    "runId": lambda t: {"runId": wire(t.waiting_run())},
    "workflowId": lambda t: {"workflowId": t.workflow},
}


def page_path(tenant: Tenant, route: wiring.Route) -> str:
    path = route.path
    for name, made in PAGE_PARAMETERS.items():
        if "{" + name + "}" in path:
            path = path.replace("{" + name + "}", made(tenant)[name])
    assert "{" not in path, path
    return path


def test_every_console_route_but_signing_in_and_out_performs_an_api_operation() -> None:
    assert {r.operation for r in wiring.CONSOLE_ROUTES if r.acts_as is None} == SESSION_ROUTES
    for route in ACTING:
        api = ROUTES[route.acts_as or ""]
        assert api not in wiring.CONSOLE_ROUTES
        assert api.mutating == route.mutating, route.operation
        scope_of(route)


def test_every_console_form_is_walked() -> None:
    assert {r.operation for r in ACTING if r.method == "POST"} == set(FORMS)


@pytest.mark.parametrize("route", [r for r in ACTING if r.method == "POST"], ids=lambda r: r.operation)
def test_a_form_whose_scope_the_session_lacks_changes_nothing(tenant: Tenant, route: wiring.Route) -> None:
    scope = scope_of(route)
    lacking = tenant.without(scope)
    held = tuple(s for s in wiring.ALL_SCOPES if s != scope)
    path, form = FORMS[route.operation](tenant, held)
    # Every signed-in page carries the proof (its sign-out form), a refusal page too.
    proof = lacking.proof()
    before = tenant.settled(path, form)

    got = lacking.post(path, {"csrf": proof, **form})

    assert got.status_code == 403, (route.operation, got.text[:300])
    assert "Not allowed" in got.text
    assert "lacks the scope" in got.text
    assert scope in got.text
    assert unexpiring(tenant.items(path, form)) == unexpiring(before), f"{route.operation} changed the tenant's items while refusing"

    # The same form from a session whose key holds only that scope (and what its API route needs besides) acts, and
    # is answered with a page: on the same target, which the refusal left as it was (asserted above); a form that
    # names scopes is drawn again, for scopes the acting session holds.
    only = tenant.console((scope, *ALSO_NEEDS.get(route.operation, ())))
    if "scope" in form:
        path, form = FORMS[route.operation](tenant, (scope,))
    before = tenant.settled(path, form)
    done = only.post(path, {"csrf": only.proof(), **form})
    assert done.status_code in (200, 201), (route.operation, done.text[:300])
    assert tenant.items(path, form) != before, f"{route.operation} did nothing with its scope"


@pytest.mark.parametrize("route", [r for r in ACTING if r.method == "GET"], ids=lambda r: r.operation)
def test_a_page_whose_scope_the_session_lacks_is_refused(tenant: Tenant, route: wiring.Route) -> None:
    scope = scope_of(route)
    path = page_path(tenant, route)
    refused = tenant.without(scope).get(path)
    assert refused.status_code == 403, (route.operation, refused.text[:300])
    assert "Not allowed" in refused.text
    shown = tenant.only(scope).get(path)
    assert shown.status_code == 200, (route.operation, shown.text[:300])

