"""Where people browse (wiring.page_module: the service's address `/`, the console, the approval links), through the
real api handler behind an HTTP server on loopback: every answer (a page, a redirect, a refusal, a failure, the JSON an
API client asked for) carries the pages' headers, walked from the route table; a refusal or a failure is a page in
words with the refusal's status, and an API client asking for JSON (Accept: application/json) is given the envelope.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
import requests

from interlude import wiring
from interlude.api.console import routes as console_routes
from interlude.api.page.headers import page_headers
from interlude.composition import Services
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.tenants import TenantSettings
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local.lambda_runtime import fresh_instances
from tests.integration.conftest import decision_token, new_api_key, signed_in
from tests.support.console import Browser
from tests.support.local_stack import wire

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?", "actions": ["accept", "reject"]}}
PROTOCOL_WORDS = ("internal_error", "correlationId", "unauthenticated", "method_not_allowed", '{"error"')
PAGE_ROUTES = [r for r in wiring.ROUTES if wiring.page_module(r.path) is not None]


def words_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page[page.find("<body") :])))


def carries_the_page_headers(got: requests.Response) -> None:
    for name, value in page_headers().items():
        if name != "Content-Security-Policy":
            assert got.headers.get(name) == value, (got.request.method, got.url, got.status_code, name)
    csp = got.headers["Content-Security-Policy"]
    for directive in ("default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"):
        assert directive in csp, (got.url, csp)
    assert "script-src" not in csp


def a_page_in_words(got: requests.Response, status: int) -> str:
    assert got.status_code == status, (got.url, got.status_code, got.text[:300])
    assert got.headers["Content-Type"].startswith("text/html"), got.text[:300]
    carries_the_page_headers(got)
    assert not any(word in got.text for word in PROTOCOL_WORDS), got.text[:300]
    return words_of(got.text)


def the_envelope(got: requests.Response, status: int, code: str) -> None:
    assert got.status_code == status, (got.url, got.text[:300])
    assert got.headers["Content-Type"].startswith("application/json")
    carries_the_page_headers(got)
    body = got.json()
    assert body["error"] == code, body
    assert body["message"]


# -- a world with something on every page --------------------------------------------------------------------------


class World:
    def __init__(self, services: Services, gateway: str) -> None:
        self.gateway = gateway
        self.key = new_api_key(services)
        admin = signed_in(services)
        definition = WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []})
        services.workflows.put_workflow(admin, "wf", definition)
        self.run_id = services.lifecycle.create_run(admin, CreateRunRequest(workflowId="wf")).runId
        self.other_key_id = new_api_key(services, "someone").split("_")[1]
        self.token = decision_token(gateway, self.run_id, self.key)

    def path_of(self, route: wiring.Route) -> str:
        values = {
            "runId": wire(self.run_id),
            "nodeId": "gate",
            "workflowId": "wf",
            "keyId": self.other_key_id,
            "token": self.token,
        }
        return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], route.path)


@pytest.fixture
def world_of_pages(services, gateway) -> World:
    return World(services, gateway)


# -- every answer where people browse carries the headers ---------------------------------------------------------


def test_the_walk_covers_the_console_and_the_approval_links() -> None:
    operations = {r.operation for r in PAGE_ROUTES}
    assert {r.operation for r in wiring.CONSOLE_ROUTES} <= operations
    assert {"inspectInterruptByToken", "resolveInterruptByToken"} <= operations


@pytest.mark.parametrize("route", PAGE_ROUTES, ids=lambda r: r.operation)
def test_every_answer_of_every_page_route_carries_the_page_headers(world_of_pages: World, route: wiring.Route) -> None:
    path = world_of_pages.path_of(route)
    stranger = Browser(world_of_pages.gateway)
    person = Browser(world_of_pages.gateway).signed_in(world_of_pages.key)
    proof = person.proof("/console/inbox")
    answers = [
        # No session: a redirect to the sign-in page, the sign-in page, or a refusal.
        stranger.send(route.method, path, {"csrf": "x"} if route.method == "POST" else None),
        # A form without its proof: refused.
        person.send(route.method, path, {} if route.method == "POST" else None),
        # An API client asking for JSON.
        person.as_api_client().send(route.method, path, {} if route.method == "POST" else None),
        # A method the address does not serve.
        person.send("PUT", path),
        # The page or the form as a person uses it: last, since a form may end the session (sign-out) or the run.
        person.send(route.method, path, {"csrf": proof} if route.method == "POST" else None),
    ]
    statuses = set()
    for got in answers:
        carries_the_page_headers(got)
        statuses.add(got.status_code)
    assert 405 in statuses
    assert any(300 <= s < 400 for s in statuses) or any(s >= 400 for s in statuses)


# -- a refusal is a page, or the envelope when JSON is asked for -------------------------------------------------------


def broken(*_: Any, **__: Any) -> Any:
    raise RuntimeError("a fault no handler expects")


def session_signed_out_elsewhere(w: World, monkeypatch: pytest.MonkeyPatch, services: Services) -> Browser:
    """A browser holding a copy of a session signed out in another tab (its item deleted)."""
    person = Browser(w.gateway).signed_in(w.key)
    copy = Browser(w.gateway)
    copy.session.cookies.update(person.session.cookies)
    assert person.send("POST", "/console/sign-out", {"csrf": person.proof("/console/inbox")}).status_code == 200
    return copy


def lacking_keys_admin(w: World, monkeypatch: pytest.MonkeyPatch, services: Services) -> Browser:
    return Browser(w.gateway).signed_in(new_api_key(services, "reader", scopes=["runs:read", "approvals:respond"]))


def at_its_rate_limit(w: World, monkeypatch: pytest.MonkeyPatch, services: Services) -> Browser:
    """A session whose tenant allows one request a second: the second in a second is refused (`answered` sends
    until one is)."""
    services.tenants.put_settings(
        signed_in(services).tenant, TenantSettings.model_validate({"limits": {"requestsPerSecond": 1}}), "ops"
    )
    # The api instance read the tenant's limits with the world's first request: a new instance reads them.
    fresh_instances()
    return Browser(w.gateway).signed_in(w.key)


def failing(target: str, with_session: bool = True) -> Callable[[World, pytest.MonkeyPatch, Services], Browser]:
    """A browser (with a session, or none) whose next request fails inside the console's handler: `target`, a
    function of the console's routes the handler calls, raises what no handler expects."""

    def made(w: World, monkeypatch: pytest.MonkeyPatch, services: Services) -> Browser:
        browser = Browser(w.gateway).signed_in(w.key) if with_session else Browser(w.gateway)
        monkeypatch.setattr(console_routes, target, broken)
        return browser

    return made


def fresh(w: World, monkeypatch: pytest.MonkeyPatch, services: Services) -> Browser:
    return Browser(w.gateway)


def signed(w: World, monkeypatch: pytest.MonkeyPatch, services: Services) -> Browser:
    return Browser(w.gateway).signed_in(w.key)


TOO_LARGE = "runId=" + "x" * 1_000_001
# The refusal's code, by its status, in the envelope an API client is given.
CODES = {
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "interlude.method_not_allowed",
    413: "payload_too_large",
    429: "rate_limited",
    500: "internal_error",
}
# name → (the browser sending it, "METHOD path", the form, the status, words its page says)
CASES: dict[str, tuple[Callable[..., Browser], str, Any, int, str]] = {
    "401-get": (session_signed_out_elsewhere, "GET /console/inbox", None, 401, "Your session has ended"),
    "401-post": (fresh, "POST /console/runs/cancel", {"runId": "x"}, 401, "Please sign in"),
    "403-get": (lacking_keys_admin, "GET /console/keys", None, 403, "Not allowed"),
    "403-post": (
        signed,
        "POST /console/runs/cancel",
        {"runId": "x", "csrf": "forged"},
        403,
        "Not sent from this console",
    ),
    "404-get": (signed, "GET /console/no-such-page", None, 404, "There is no page at this address."),
    "404-post": (signed, "POST /console/no-such-page", {}, 404, "There is no page at this address."),
    "405-get": (signed, "GET /console/sign-out", None, 405, "This address is a form's"),
    "405-post-root": (fresh, "POST /", {}, 405, "nothing can be sent to it"),
    "405-post-console": (signed, "POST /console", {}, 405, "nothing can be sent to it"),
    "413-post": (signed, "POST /console/runs/cancel", TOO_LARGE, 413, "Too large"),
    "413-post-sign-in": (fresh, "POST /console/sign-in", TOO_LARGE, 413, "Sign in"),
    "429-get": (at_its_rate_limit, "GET /console/inbox", None, 429, "Too many requests"),
    "429-post": (at_its_rate_limit, "POST /console/runs/cancel", {"runId": "x"}, 429, "Too many requests"),
    "500-get-root": (failing("see_other", with_session=False), "GET /", None, 500, "Something went wrong"),
    "500-get-console": (failing("ring", with_session=False), "GET /console", None, 500, "Something went wrong"),
    "500-get-page": (failing("run_contexts"), "GET /console/inbox", None, 500, "Something went wrong"),
    "500-post-sign-in": (
        failing("ring_with", with_session=False),
        "POST /console/sign-in",
        {},
        500,
        "Something went wrong",
    ),
    "500-post-form": (failing("signed_in"), "POST /console/sign-out", {}, 500, "Something went wrong"),
}


def answered(browser: Browser, method: str, path: str, form: Any, status: int) -> requests.Response:
    """The answer; a rate limit's, once reached (the first request of a window passes)."""
    for _ in range(40 if status == 429 else 1):
        got = browser.send(method, path, form)
        if got.status_code == status:
            break
    return got


@pytest.mark.parametrize("case", list(CASES))
def test_a_refusal_or_failure_is_a_page_in_words_and_the_envelope_to_an_api_client(
    world_of_pages: World, services: Services, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    made, request, form, status, words = CASES[case]
    method, path = request.split(" ")
    browser = made(world_of_pages, monkeypatch, services)

    # The envelope first: the page of an ended session ends its cookie too.
    as_json = answered(browser.as_api_client(), method, path, form, status)
    page = answered(browser, method, path, form, status)

    assert words in a_page_in_words(page, status)
    the_envelope(as_json, status, CODES[status])
    if status == 405:
        assert page.headers["Allow"] == as_json.headers["Allow"]
    if status == 429:
        assert page.headers["Retry-After"]


# -- a form refused for what it holds: the page again, or the envelope when JSON is asked for ---------------------------


def claimed_by_someone(services: Services, w: World) -> None:
    services.claims.move(signed_in(services, "someone"), w.run_id, "gate", "claim")


TOO_MANY_TAGS = "\n".join(f"tag{i}" for i in range(101))  # CreateRunRequest takes 100
# name → (what comes first, the console route, the form it is sent, the status, the refusal's code, words its page says)
FORM_REFUSALS: dict[str, tuple[Callable[[Services, World], None] | None, str, dict[str, str], int, str, str]] = {
    "400-decide": (
        None,
        "consoleDecide",
        {"action": "maybe", "back": "run"},
        400,
        "validation_error",
        "Choose one of the buttons",
    ),
    "400-start-run": (
        None,
        "consoleStartRun",
        {"tags": TOO_MANY_TAGS},
        400,
        "validation_error",
        "The run was not started",
    ),
    "409-claim": (claimed_by_someone, "consoleClaim", {}, 409, "interlude.gate_claimed", "Nothing was changed"),
}


@pytest.mark.parametrize("case", list(FORM_REFUSALS))
def test_a_form_refused_for_what_it_holds_is_its_page_again_and_the_envelope_to_an_api_client(
    world_of_pages: World, services: Services, case: str
) -> None:
    before, operation, form, status, code, words = FORM_REFUSALS[case]
    w = world_of_pages
    if before is not None:
        before(services, w)
    browser = Browser(w.gateway).signed_in(w.key)
    path = w.path_of(next(r for r in wiring.ROUTES if r.operation == operation))
    sent = {**form, "csrf": browser.proof("/console/inbox")}

    as_json = browser.as_api_client().send("POST", path, sent)
    page = browser.send("POST", path, sent)

    # The page says why, beside the form again; an API client reads the refusal's envelope
    assert words in a_page_in_words(page, status)
    if status == 400:
        assert f'action="{path}"' in page.text
    the_envelope(as_json, status, code)
    # Neither started a run or moved the gate
    assert [r.runId for r in services.run_listing.list_runs(signed_in(services).tenant, 10, None).runs] == [w.run_id]
    state = services.store.get_run(w.run_id)[0]
    assert state.status == "waiting-approval"
    assert state.interrupts["gate"].assignee == ("someone" if before is claimed_by_someone else None)


# -- the approval page's form: the page, or the envelope when JSON is asked for (as the console's forms) ----------------


def decided_already(w: World) -> None:
    decided = requests.post(
        f"{w.gateway}/interrupts/{w.token}", json={"resumeValue": {"action": "accept"}}, timeout=30
    )
    assert decided.status_code == 200, decided.text


# name → (what comes between opening the page and sending its form, the form, whether it carries the page's proof, the
# status, the refusal's code, words its page says, whether the gate is still open after)
APPROVAL_FORM_REFUSALS: dict[str, tuple[Callable[[World], None] | None, dict[str, str], bool, int, str, str, bool]] = {
    "400-no-such-button": (None, {"action": "maybe"}, True, 400, "validation_error", "Choose one of the buttons", True),
    "403-not-from-its-page": (None, {"action": "accept"}, False, 403, "forbidden", "Not sent from this page", True),
    "409-decided-already": (decided_already, {"action": "reject"}, True, 409, "interrupt_already_resolved", "Already decided", False),
}


@pytest.mark.parametrize("case", list(APPROVAL_FORM_REFUSALS))
def test_the_approval_form_refused_is_its_page_and_the_envelope_to_an_api_client(
    world_of_pages: World, services: Services, case: str
) -> None:
    between, form, with_proof, status, code, words, still_open = APPROVAL_FORM_REFUSALS[case]
    w = world_of_pages
    path = f"/interrupts/{w.token}"
    browser = Browser(w.gateway)
    sent = {**form, "csrf": browser.proof(path) if with_proof else "forged"}
    if between is not None:
        between(w)

    # The page's own cookie and proof, as the person's browser sends them; the API client asks for JSON first.
    as_json = browser.as_api_client().send("POST", path, sent)
    page = browser.send("POST", path, sent)

    assert words in a_page_in_words(page, status)
    if status == 400:
        assert '<form method="post"' in page.text  # the form again
    the_envelope(as_json, status, code)
    assert (services.store.get_run(w.run_id)[0].status == "waiting-approval") is still_open
