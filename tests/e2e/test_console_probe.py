"""A hostile pass over what a person sees and clicks, on the shared local stack over HTTP (the real handlers on
127.0.0.1), beyond what test_console_scopes, test_console_http, test_protocol_residue and test_hostile_inputs cover:

* every console action answers as its API route does (allowed or refused, and why), walked from the route table
  (wiring.CONSOLE_ROUTES, each route's `acts_as`): a key lacking the route's scope, a key holding only it, another
  tenant's run, a key revoked mid-session and a tenant suspended mid-session;
* author-controlled text (titles, descriptions, step, field, option and workflow names, inputs, tags) reaches the
  console's pages and the approval page as text, never as markup, a link or a style, and every page answers with
  its CSP, framing, referrer and cache headers;
* a decision sent twice (two tabs, two people) decides once, and the second sees a sentence, not the protocol;
* form fields a person can type into that the page reads as numbers ("²": str.isdigit passes it, int refuses it)
  answer a page saying what is wrong, never a server error or the protocol's JSON;
* the Slack message's notification text (its `text`, mrkdwn too) shows an author's title as written, never as a
  mention or a link.
"""

from __future__ import annotations

import html
import re
import time
import uuid
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, unquote

import pytest
import requests

from interlude import wiring
from interlude.adapters.notify.messages import Content, slack_message
from tests.e2e.conftest import KEY_CACHE_SECONDS
from tests.support.console import Console
from tests.support.console_forms import FORMS, Tenant
from tests.support.local_stack import Api, cli, until, wire

ROUTES = {r.operation: r for r in wiring.ROUTES}
SESSION_ROUTES = {"consoleRoot", "consoleHome", "consoleSignInPage", "consoleSignIn", "consoleSignOut"}
ACTING = [r for r in wiring.CONSOLE_ROUTES if r.operation not in SESSION_ROUTES]
# What a console form's API route needs beyond its own scope (as tests/e2e/test_console_scopes.py).
ALSO_NEEDS = {"consoleForkRun": ("runs:read",), "consoleRedriveRun": ("runs:read",)}
HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)>"\'&<!channel>'
PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}
# Words of the protocol a person never meets on a page.
PROTOCOL_WORDS = ("internal_error", "correlationId", "interrupt_already_resolved", "holds no open interrupt", '{"error"')


@pytest.fixture(scope="module")
def tenant(stack_info: dict[str, str]) -> Tenant:
    return Tenant(stack_info)


@pytest.fixture(scope="module")
def other(stack_info: dict[str, str]) -> Tenant:
    return Tenant(stack_info)


def text_of(markup: str) -> str:
    body = markup[markup.find("<body") :] if "<body" in markup else markup
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


def params_of(route: wiring.Route, path: str) -> dict[str, str]:
    """The path parameters a console path fills in its route's path."""
    pattern = "^" + re.sub(r"{(\w+)}", r"(?P<\1>[^/]+)", route.path) + "$"
    found = re.fullmatch(pattern, path.split("?")[0])
    assert found, (route.path, path)
    return found.groupdict()


# -- each console action's API request, from the console's own path and form ---------------------------------------

ApiRequest = Callable[[dict[str, str], dict[str, Any]], tuple[Any, str | None]]
# acts_as → (body, a path parameter the API path takes that the console's path does not) from the console's path
# parameters and form. A console route whose API operation is missing here fails
# test_every_console_action_is_compared.
API_BODIES: dict[str, ApiRequest] = {
    "listInterrupts": lambda p, f: (None, None),
    "resolveInterruptByRun": lambda p, f: ({"resumeValue": {"action": f.get("action", "accept")}}, None),
    "claimInterrupt": lambda p, f: (None, None),
    "releaseInterrupt": lambda p, f: (None, None),
    "assignInterrupt": lambda p, f: ({"assignee": f.get("assignee", "someone")}, None),
    "listRuns": lambda p, f: (None, None),
    "bulkCancelRuns": lambda p, f: ({"runIds": [f["runId"]] if "runId" in f else ["x/y"]}, None),
    "getRun": lambda p, f: (None, None),
    "forkRun": lambda p, f: ({"mode": f.get("mode", "replay")}, None),
    "redriveRun": lambda p, f: (None, None),
    "listWorkflows": lambda p, f: (None, None),
    "getWorkflow": lambda p, f: (None, None),
    "createRun": lambda p, f: ({"workflowId": unquote(p.get("workflowId", "none"))}, None),
    "listKeys": lambda p, f: (None, None),
    "createKey": lambda p, f: ({"subjectId": f.get("subjectId", "made"), "scopes": list(f.get("scope") or ["runs:read"])}, None),
    "revokeKey": lambda p, f: (None, None),
    "listAuditEntries": lambda p, f: (None, None),
    "retryRunAction": lambda p, f: (None, None),
    "recoverRunDeliveries": lambda p, f: (None, None),
    "recoverRunNotifications": lambda p, f: (None, None),
    "listWebhookDeadLetters": lambda p, f: (None, None),
    "retryWebhookDelivery": lambda p, f: (None, None),
}


def page_target(tenant: Tenant, route: wiring.Route) -> tuple[str, dict[str, Any]]:
    """A console page's path (on a waiting run, the tenant's workflow), and what its API route names that the page
    does not (the webhook whose dead letters the page lists among all)."""
    path = route.path.replace("{runId}", wire(tenant.waiting_run())).replace("{workflowId}", tenant.workflow)
    return path, (tenant.dead_letter() if "{webhookId}" in ROUTES[route.acts_as or ""].path else {})


def console_target(tenant: Tenant, route: wiring.Route, held: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    if route.method == "GET":
        return page_target(tenant, route)
    return FORMS[route.operation](tenant, held)


def api_request(route: wiring.Route, path: str, form: dict[str, Any]) -> tuple[str, str, Any]:
    """(method, path, JSON body) of the API request the console's `path` and `form` stand for."""
    api = ROUTES[route.acts_as or ""]
    params = params_of(route, path)
    body, _ = API_BODIES[api.operation](params, form)
    if api.operation == "createRun":
        params = {}
    params.setdefault("webhookId", wire(str(form.get("webhookId", "none"))))
    params.setdefault("deliveryId", wire(str(form.get("deliveryId", "none"))))
    target = api.path
    for name, value in params.items():
        target = target.replace("{" + name + "}", value)
    assert "{" not in target, target
    return api.method, target, body


def api_answer(tenant: Tenant, key: str, route: wiring.Route, path: str, form: dict[str, Any]) -> requests.Response:
    method, target, body = api_request(route, path, form)
    return tenant.api.call(method, target, body, key=key)


def console_answer(console: Console, route: wiring.Route, path: str, form: dict[str, Any]) -> requests.Response:
    if route.method == "GET":
        return console.get(path, allow_redirects=False)
    return console.post(path, {"csrf": console.proof(), **form}, allow_redirects=False)


def said_alike(api: requests.Response, console: requests.Response) -> None:
    """The console refuses as the API does: the same status, and the API's message in the page's words."""
    assert console.status_code == api.status_code, (api.text[:300], console.text[:300])
    # The OpenWOP envelope, or ModuleX's {detail} with the code in a header (the workflows' routes).
    body = api.json()
    message = body.get("message") or body["detail"]
    code = body.get("error") or api.headers["X-Interlude-Error"]
    assert message[:1].upper() + message[1:] in text_of(console.text), (message, text_of(console.text)[:400])
    assert code not in text_of(console.text)


def test_every_console_action_is_compared() -> None:
    assert {r.acts_as for r in ACTING} == set(API_BODIES)


@pytest.mark.parametrize("route", ACTING, ids=lambda r: r.operation)
def test_a_key_lacking_the_scope_is_refused_alike_and_one_holding_it_acts_alike(tenant: Tenant, route: wiring.Route) -> None:
    scope = ROUTES[route.acts_as or ""].scope
    assert scope is not None
    held = tuple(s for s in wiring.ALL_SCOPES if s != scope)
    lacking_key = tenant.api.new_key(list(held))
    lacking = Console(tenant.api).signed_in(lacking_key)
    path, form = console_target(tenant, route, held)

    said_alike(api_answer(tenant, lacking_key, route, path, form), console_answer(lacking, route, path, form))

    # Holding only the scope (and what the API route needs besides): both act, each on a target of its own.
    only = (scope, *ALSO_NEEDS.get(route.operation, ()))
    only_key = tenant.api.new_key(list(only))
    acting = Console(tenant.api).signed_in(only_key)
    api_path, api_form = console_target(tenant, route, (scope,))
    by_api = api_answer(tenant, only_key, route, api_path, api_form)
    path, form = console_target(tenant, route, (scope,))
    by_console = console_answer(acting, route, path, form)
    assert by_api.status_code < 300, (route.operation, by_api.text[:300])
    assert by_console.status_code < 300, (route.operation, by_console.text[:300])


RUN_ROUTES = [r for r in ACTING if "{runId}" in r.path]


@pytest.mark.parametrize("route", RUN_ROUTES, ids=lambda r: r.operation)
def test_another_tenants_run_is_refused_alike(tenant: Tenant, other: Tenant, route: wiring.Route) -> None:
    theirs = wire(other.waiting_run())
    path, form = console_target(tenant, route, wiring.ALL_SCOPES)
    path = re.sub(r"/console/runs/[^/]+", f"/console/runs/{theirs}", path, count=1)
    key = tenant.api.new_key(list(wiring.ALL_SCOPES))
    by_api = api_answer(tenant, key, route, path, form)
    by_console = console_answer(Console(tenant.api).signed_in(key), route, path, form)
    said_alike(by_api, by_console)
    assert other.api.run(unquote(theirs.replace("~2F", "/")))["status"] == "waiting-approval"


@pytest.mark.parametrize("route", ACTING, ids=lambda r: r.operation)
def test_a_key_revoked_mid_session_is_refused_alike(tenant: Tenant, route: wiring.Route) -> None:
    key = tenant.api.new_key(list(wiring.ALL_SCOPES))
    console = Console(tenant.api).signed_in(key)
    proof = console.proof()
    path, form = console_target(tenant, route, wiring.ALL_SCOPES)
    assert tenant.api.call("DELETE", f"/keys/{key.split('_')[1]}").status_code == 200
    # Every instance refuses it once its cached read of the key lapses: the shared stack's key_cache_seconds, the
    # bound the console and the API promise alike.
    time.sleep(KEY_CACHE_SECONDS + 0.5)
    by_api = api_answer(tenant, key, route, path, form)
    got = console.get(path) if route.method == "GET" else console.post(path, {"csrf": proof, **form})
    assert by_api.status_code == 401
    # A page: the session's end, where to sign in again (a GET is sent on to the sign-in page).
    assert got.status_code in (200, 401), got.text[:300]
    assert "Sign in" in text_of(got.text)
    assert not any(word in got.text for word in PROTOCOL_WORDS)


def test_a_tenant_suspended_mid_session_is_refused_alike_everywhere(stack_info: dict[str, str]) -> None:
    suspended = Tenant(stack_info)
    key = suspended.api.new_key(list(wiring.ALL_SCOPES))
    console = Console(suspended.api).signed_in(key)
    proof = console.proof()
    targets = [(route, console_target(suspended, route, wiring.ALL_SCOPES)) for route in ACTING]
    cli(stack_info, "tenants", "suspend", suspended.name, "--local", "--reason", "unpaid")
    try:

        def refused_alike() -> bool:
            for route, (path, form) in targets:
                by_api = api_answer(suspended, key, route, path, form)
                got = console.get(path) if route.method == "GET" else console.post(path, {"csrf": proof, **form})
                if by_api.status_code != 403 or got.status_code != 403:
                    # Each instance trusts a tenant's status for tenant_status_cache_seconds: the request and the
                    # click may land on instances that learn of the suspension moments apart.
                    return False
                said_alike(by_api, got)
            return True

        assert until(refused_alike, timeout_s=30, interval_s=0.5), "the suspension was never seen"
    finally:
        cli(stack_info, "tenants", "resume", suspended.name, "--local")


# -- double submission -------------------------------------------------------------------------------------


def test_a_decision_sent_from_two_tabs_decides_once_and_the_second_reads_a_sentence(tenant: Tenant) -> None:
    run_id = tenant.waiting_run()
    first = tenant.console(tuple(wiring.ALL_SCOPES))
    second = Console(tenant.api).signed_in(tenant.api.new_key(list(wiring.ALL_SCOPES), subject="bob"))
    path = f"/console/runs/{wire(run_id)}/interrupts/review"
    forms = [{"csrf": c.proof(), "action": a} for c, a in ((first, "accept"), (second, "reject"))]

    decided = first.post(path, forms[0])
    late = second.post(path, forms[1])

    assert decided.status_code == 200
    assert late.status_code == 409
    words = text_of(late.text)
    assert "This request was already decided, or it timed out or its run was stopped: the run is completed." in words
    assert not any(word in late.text for word in PROTOCOL_WORDS)
    assert "'review'" not in words
    resolved = [e["payload"] for e in tenant.api.events(run_id) if e["type"] == "interrupt.resolved"]
    assert len(resolved) == 1


def test_a_gate_assigned_from_the_console_names_the_assignee_as_the_directory_does(tenant: Tenant) -> None:
    person = f"p-{uuid.uuid4().hex[:6]}"
    assert tenant.api.call("PUT", f"/principals/{person}", {"displayName": "Bea Nunes"}).status_code in (200, 201)
    run_id = tenant.waiting_run()
    console = tenant.console(tuple(wiring.ALL_SCOPES))

    got = console.post(f"/console/runs/{wire(run_id)}/interrupts/review/assignee", {"csrf": console.proof(), "assignee": person})

    assert got.status_code == 200, got.text[:300]
    words = text_of(got.text)
    assert "Assigned to Bea Nunes" in words
    assert f"Assigned to {person}" not in words


# -- numbers a person types ----------------------------------------------------------------------------------

# Characters str.isdigit() passes that int() refuses, and a number past what int() reads from text.
NOT_NUMBERS = ["²", "¹²", "9" * 5000]


@pytest.mark.parametrize("typed", NOT_NUMBERS, ids=["superscript", "superscripts", "5000-digits"])
def test_an_example_pressed_with_a_number_int_refuses_is_a_page_not_a_server_error(tenant: Tenant, typed: str) -> None:
    run_id = tenant.waiting_run()
    console = tenant.console(tuple(wiring.ALL_SCOPES))
    got = console.post(f"/console/runs/{wire(run_id)}/interrupts/review", {"csrf": console.proof(), "example": typed})
    assert got.status_code == 400, got.text[:300]
    assert got.headers["Content-Type"].startswith("text/html")
    assert "Choose one of the examples shown." in text_of(got.text)
    assert tenant.api.run(run_id)["status"] == "waiting-approval"

    link = tenant.api.call("POST", f"/runs/{wire(run_id)}/interrupts/review/tokens", {"intent": "resolve"}).json()["url"]
    browser = requests.Session()
    page = browser.get(link, headers={"Accept": "text/html"}, timeout=30)
    proof = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert proof
    posted = browser.post(link, data={"csrf": proof.group(1), "example": typed}, headers={"Accept": "text/html"}, timeout=30)
    assert posted.status_code == 400, posted.text[:300]
    assert "Choose one of the examples shown." in text_of(posted.text)
    assert not any(word in posted.text for word in PROTOCOL_WORDS)


@pytest.mark.parametrize("typed", NOT_NUMBERS, ids=["superscript", "superscripts", "5000-digits"])
def test_a_fork_from_an_event_int_refuses_is_a_page_not_a_server_error(tenant: Tenant, typed: str) -> None:
    run_id = tenant.waiting_run()
    console = tenant.console(tuple(wiring.ALL_SCOPES))
    got = console.post(f"/console/runs/{wire(run_id)}/fork", {"csrf": console.proof(), "mode": "branch", "fromSeq": typed})
    assert got.status_code == 400, got.text[:300]
    assert got.headers["Content-Type"].startswith("text/html")
    assert "Nothing was started" in text_of(got.text)
    assert not any(word in got.text for word in PROTOCOL_WORDS)


# -- author-controlled text ----------------------------------------------------------------------------------


def hostile_workflow(api: Api) -> str:
    workflow_id = f"hostile-{uuid.uuid4().hex[:8]}"
    definition = {
        "name": f"Flow {HOSTILE}",
        "variables": [
            {"name": "who", "type": "string", "description": f"Who {HOSTILE}", "defaultValue": HOSTILE},
            {"name": "pick", "schema": {"enum": [HOSTILE, "javascript:alert(3)"]}, "defaultValue": HOSTILE},
        ],
        "nodes": [
            {
                "id": "review",
                "typeId": "core.approvalGate",
                "name": f"Step {HOSTILE}",
                "config": {
                    "title": "Ship {{inputs.who}}? " + HOSTILE,
                    "description": f"[click](javascript:alert(4)) **{HOSTILE}** <a href='javascript:alert(5)'>x</a>",
                    "actions": ["accept", "reject"],
                    "artifactData": {HOSTILE: HOSTILE, "url": "javascript:alert(6)"},
                },
            }
        ],
        "edges": [],
    }
    got = api.put_workflow(workflow_id, definition)
    assert got.status_code == 201, got.text
    return workflow_id


class Tags(HTMLParser):
    """Every element and attribute of a page, as a browser's parser reads them."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.found: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, attrs))


# Where a value is a URL the browser follows, loads or posts to.
URL_ATTRIBUTES = ("href", "src", "action", "formaction")
# Ours: the console's own paths, the favicon's empty data URL, a workflow's definition to download as JSON
# (percent-encoded: its text never markup).
OUR_URLS = ("/", "#", "http://127.0.0.1", "data:,", "data:application/json;charset=utf-8,%7B")


def markup_is_ours(page: str) -> None:
    """No element, handler, link or style an author wrote: their text arrives as text, wherever it stands."""
    for tag, attrs in Tags(page).found:
        assert tag not in ("script", "img", "iframe", "object", "embed", "base"), tag
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            if name in URL_ATTRIBUTES and value:
                assert value.startswith(OUR_URLS), (tag, name, value[:200])
            if name == "style":
                assert "alert" not in (value or ""), (tag, value)


def headers_hold(got: requests.Response) -> None:
    for name, value in PAGE_HEADERS.items():
        assert got.headers.get(name) == value, (got.url, name, got.headers.get(name))
    csp = got.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "default-src 'none'" in csp
    assert "script-src" not in csp


def test_author_text_is_text_on_every_page_and_every_page_carries_its_headers(tenant: Tenant) -> None:
    workflow_id = hostile_workflow(tenant.api)
    run_id = tenant.api.start(workflow_id, tags=[HOSTILE[:60]], inputs={"who": HOSTILE})["runId"]
    assert tenant.api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    console = tenant.console(tuple(wiring.ALL_SCOPES))
    pages = [
        "/console/inbox",
        "/console/runs",
        f"/console/runs/{wire(run_id)}",
        f"/console/runs/{wire(run_id)}?step=review",
        "/console/workflows",
        f"/console/workflows/{workflow_id}",
        "/console/audit",
        "/console/keys",
        "/console/dead-letters",
        "/console/no-such-page",
    ]
    for path in pages:
        got = console.get(path)
        assert got.status_code in (200, 404), (path, got.status_code)
        headers_hold(got)
        markup_is_ours(got.text)
    link = tenant.api.call("POST", f"/runs/{wire(run_id)}/interrupts/review/tokens", {"intent": "resolve"}).json()["url"]
    page = requests.get(link, headers={"Accept": "text/html"}, timeout=30)
    assert page.status_code == 200
    headers_hold(page)
    markup_is_ours(page.text)
    assert "<script>alert(1)</script>" in text_of(page.text)
    # Broken, expired-looking and damaged links answer pages with the same headers.
    for broken in (link[:-3] + "xyz", link + "/", link.rsplit("/", 1)[0] + "/" + quote("<x>")):
        got = requests.get(broken, headers={"Accept": "text/html"}, timeout=30)
        assert 400 <= got.status_code < 500
        headers_hold(got)
        assert not any(word in got.text for word in PROTOCOL_WORDS)


# -- Slack ---------------------------------------------------------------------------------------------------


def test_a_slack_messages_notification_text_shows_an_authors_title_as_written() -> None:
    content = Content(
        purpose="raised",
        title="<!channel> <https://evil.example|Approve here> & more",
        description="",
        questions=(),
        workflow_name=None,
        asked_by=None,
        deadline=None,
        time_zone=None,
        recipient_name="Ana",
        link="https://interlude.example/interrupts/t",
        decision_value="v",
        form_value=None,
        actions=("accept", "reject"),
        on_behalf_of=(),
        form=False,
    )
    message = slack_message(content, "U123")
    texts = [message["text"], *(b["text"]["text"] for b in message["blocks"] if b.get("text", {}).get("type") == "mrkdwn")]
    for text in texts:
        assert "<!channel>" not in text, text
        assert "<https://evil" not in text, text
    assert message["text"].startswith("<@U123> ")
    assert "&lt;!channel&gt; &lt;https://evil.example|Approve here&gt; &amp; more" in message["text"]
