"""Where people browse (the console, the approval page), a request whose handler fails unexpectedly, or whose call to
another AWS service is throttled, answers a page in words with the page's headers, never the protocol's JSON (its
code, its correlation id): the real api handler behind an HTTP server on loopback, a fault put in its path in this
process (tests/e2e/test_console_probe.py probes the rest over the shared local stack)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
import requests
from botocore.exceptions import ClientError

from interlude.api import tokens
from interlude.api.console import routes as console_routes
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from tests.integration.conftest import decision_token, new_api_key, signed_in

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?", "actions": ["accept", "reject"]}}
PROOF = re.compile(r'name="csrf" value="([^"]+)"')
PROTOCOL_WORDS = ("internal_error", "correlationId", "runner_unavailable", '{"error"')


def broken(*_: Any, **__: Any) -> Any:
    raise RuntimeError("a fault no handler expects")


def throttled(*_: Any, **__: Any) -> Any:
    raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "SendMessage")


FAULTS = {"failed": (broken, 500, None), "throttled": (throttled, 503, "1")}


def words_of(page: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page[page.index("<body") :])))


def a_page_in_words(got: requests.Response, status: int, retry_after: str | None) -> str:
    assert got.status_code == status, got.text[:300]
    assert got.headers["Content-Type"].startswith("text/html"), got.text[:300]
    assert "frame-ancestors 'none'" in got.headers["Content-Security-Policy"]
    assert got.headers["Cache-Control"] == "no-store"
    assert got.headers["Referrer-Policy"] == "no-referrer"
    assert got.headers.get("Retry-After") == retry_after
    assert not any(word in got.text for word in PROTOCOL_WORDS), got.text[:300]
    return words_of(got.text)


def over_http(browser: requests.Session) -> requests.cookies.RequestsCookieJar:
    """The session's cookies sent over this loopback HTTP: the handler marks them Secure, its links being https."""
    for cookie in browser.cookies:
        cookie.secure = False
    return browser.cookies


def waiting_run(services) -> str:
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    return services.lifecycle.create_run(admin, CreateRunRequest(workflowId="wf")).runId


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_console_page_that_fails_says_so_in_words(services, gateway, monkeypatch, fault: str) -> None:
    raise_it, status, retry_after = FAULTS[fault]
    browser = requests.Session()
    sign_in = browser.get(gateway + "/console/sign-in", timeout=30)
    proof = PROOF.search(sign_in.text)
    assert proof
    got = browser.post(
        gateway + "/console/sign-in",
        data={"csrf": proof.group(1), "api_key": new_api_key(services)},
        cookies=over_http(browser),
        timeout=30,
    )
    assert got.status_code == 200, got.text[:300]
    over_http(browser)
    monkeypatch.setattr(console_routes, "run_contexts", raise_it)

    words = a_page_in_words(browser.get(gateway + "/console/inbox", timeout=30), status, retry_after)

    assert "Try again in a moment" in words
    assert "Back to the inbox" in words


@pytest.mark.parametrize("fault", list(FAULTS))
def test_an_approval_page_that_fails_says_so_in_words(services, gateway, monkeypatch, fault: str) -> None:
    raise_it, status, retry_after = FAULTS[fault]
    run_id = waiting_run(services)
    # The link, served here (it names the deployment's https address).
    link = gateway + "/interrupts/" + decision_token(gateway, run_id, new_api_key(services))
    monkeypatch.setattr(tokens, "surface", raise_it)

    words = a_page_in_words(requests.get(link, headers={"Accept": "text/html"}, timeout=30), status, retry_after)

    assert "Try again in a moment" in words
    # A client asking for JSON is answered in the protocol, as before.
    as_json = requests.get(link, headers={"Accept": "application/json"}, timeout=30)
    assert as_json.status_code == status
    assert as_json.json()["error"] == ("internal_error" if status == 500 else "runner_unavailable")
