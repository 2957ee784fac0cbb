"""The pages' cookies through the real api handler behind an HTTP server on loopback (interlude.api.page.cookies):

* over an https base URL (a deployment), each takes the strongest name prefix its scope allows, which a browser enforces
  whoever sets it: the console's session and sign-in cookies `__Host-` (Secure, Path=/, no Domain), the approval page's
  proof cookie `__Secure-` (Secure, kept to /interrupts/);
* over the local stack's plain http base URL, neither (a browser refuses both from http): the names and paths as before;
* a browser holding what a release before 0.12.0 set over https (the same values, unprefixed) meets no error page: its
  console session ends (it is asked to sign in, and the sign-in page ends the old cookie), and the sign-in form or an
  approval page it had open still sends (docs/adr/0189).
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from interlude.api.console.session import SESSION, SIGN_IN
from interlude.api.page import csrf
from interlude.config.delivery import PUBLIC_BASE_URL_ENV
from interlude.domain.models.requests import CreateRunRequest
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.local.lambda_runtime import fresh_instances
from tests.integration.conftest import decision_token, new_api_key, signed_in
from tests.support.console import BROWSER_ACCEPT, PROOF, Browser

GATE = {"id": "gate", "typeId": "core.approvalGate", "config": {"title": "Ship it?", "actions": ["accept", "reject"]}}
HTTPS_BASE = "https://approvals.example.com"


def served_at(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    """The deployment's base URL (PUBLIC_BASE_URL), read by the api instance that starts next."""
    monkeypatch.setenv(PUBLIC_BASE_URL_ENV, base_url)
    fresh_instances()


def set_cookies(got: requests.Response) -> dict[str, dict[str, Any]]:
    """Each cookie the answer sets: its value and attributes, names of attributes in lower case."""
    out: dict[str, dict[str, Any]] = {}
    for header in got.raw.headers.getlist("Set-Cookie"):
        pair, *attributes = (part.strip() for part in header.split(";"))
        name, _, value = pair.partition("=")
        fields: dict[str, Any] = {"value": value}
        for attribute in attributes:
            key, _, val = attribute.partition("=")
            fields[key.lower()] = val or True
        out[name] = fields
    return out


def a_browser_keeps(name: str, cookie: dict[str, Any], https: bool) -> bool:
    """Whether a browser stores the cookie as set (RFC 6265bis, "Cookie Name Prefixes"; a Secure cookie only from a
    secure origin)."""
    if cookie.get("secure") and not https:
        return False
    if name.startswith("__Secure-"):
        return bool(cookie.get("secure"))
    if name.startswith("__Host-"):
        return bool(cookie.get("secure")) and cookie.get("path") == "/" and "domain" not in cookie
    return True


def waiting_run_and_link(services, gateway: str) -> tuple[str, str]:
    """A waiting approval's run, and its decision link as served here."""
    admin = signed_in(services)
    services.workflows.put_workflow(admin, "wf", WorkflowDefinition.model_validate({"nodes": [GATE], "edges": []}))
    run_id = services.lifecycle.create_run(admin, CreateRunRequest(workflowId="wf")).runId
    return run_id, "/interrupts/" + decision_token(gateway, run_id, new_api_key(services))


@pytest.mark.parametrize("https", [True, False], ids=["https", "local-http"])
def test_each_cookie_takes_the_strongest_prefix_its_scope_allows_and_the_console_and_page_work(
    services, gateway, monkeypatch, https: bool
) -> None:
    served_at(monkeypatch, HTTPS_BASE if https else gateway)
    person = Browser(gateway)

    sign_in_page = person.send("GET", "/console/sign-in")
    proof = PROOF.search(sign_in_page.text)
    assert proof
    signed = person.send("POST", "/console/sign-in", {"csrf": proof.group(1), "api_key": new_api_key(services)})
    inbox = person.send("GET", "/console/inbox")
    signed_out = person.send("POST", "/console/sign-out", {"csrf": person.proof("/console/inbox")})
    after = person.send("GET", "/console/inbox")

    expected = {
        SESSION: ("__Host-il_console", "/") if https else ("il_console", "/console"),
        SIGN_IN: ("__Host-il_console_pre", "/") if https else ("il_console_pre", "/console"),
    }
    pre_name, pre_path = expected[SIGN_IN]
    session_name, session_path = expected[SESSION]
    pre = set_cookies(sign_in_page)[pre_name]
    session = set_cookies(signed)[session_name]
    assert (pre["path"], session["path"]) == (pre_path, session_path)
    for name, cookie in ((pre_name, pre), (session_name, session)):
        assert a_browser_keeps(name, cookie, https), (name, cookie)
        assert cookie["httponly"]
        assert cookie["samesite"] == "Strict"
        assert bool(cookie.get("secure")) is https
        assert "domain" not in cookie
    assert set_cookies(signed)[pre_name]["max-age"] == "0"
    assert inbox.status_code == 200, inbox.text[:300]
    assert signed_out.status_code == 200
    assert set_cookies(signed_out)[session_name]["max-age"] == "0"
    assert after.status_code == 303

    run_id, link = waiting_run_and_link(services, gateway)
    approver = Browser(gateway)
    page = approver.send("GET", link)
    name = ("__Secure-" if https else "") + csrf.cookie_of(link.rsplit("/", 1)[1]).base
    proof_cookie = set_cookies(page)[name]
    assert proof_cookie["path"] == "/interrupts/"
    assert a_browser_keeps(name, proof_cookie, https)
    assert bool(proof_cookie.get("secure")) is https
    field = PROOF.search(page.text)
    assert field
    decided = approver.send("POST", link, {"csrf": field.group(1), "action": "accept"})
    assert decided.status_code == 200, decided.text[:300]
    assert services.store.get_run(run_id)[0].status == "completed"


# -- cookies an earlier release set ------------------------------------------------------------------------------------


def earlier_release_browser(gateway: str, cookies: dict[str, str]) -> Browser:
    """A browser holding cookies as a release before 0.12.0 set them over https: unprefixed, at their old paths."""
    browser = Browser(gateway)
    for name, value in cookies.items():
        path = "/interrupts/" if name.startswith(csrf.COOKIE_PREFIX) else "/console"
        browser.session.cookies.set(name, value, path=path, secure=True)
    return browser


def test_a_session_an_earlier_release_set_ends_cleanly_and_its_holder_signs_in_again(
    services, gateway, monkeypatch
) -> None:
    served_at(monkeypatch, HTTPS_BASE)
    key = new_api_key(services)
    # An earlier release set the same session, sealed the same way, unprefixed at /console.
    value = set_cookies(Browser(gateway).sign_in(key))["__Host-il_console"]["value"]
    upgraded = earlier_release_browser(gateway, {SESSION.base: value})

    page = upgraded.send("GET", "/console/inbox")
    form = upgraded.send("POST", "/console/runs/cancel", {"runId": "x", "csrf": "a proof of the old page"})
    home = upgraded.send("GET", "/console")

    assert page.status_code == 303
    assert page.headers["Location"] == "/console/sign-in"
    assert form.status_code == 401
    assert "Please sign in" in form.text
    assert home.status_code == 200
    assert "Sign in" in home.text
    ended = set_cookies(home)[SESSION.base]
    assert (ended["max-age"], ended["path"]) == ("0", "/console")
    assert upgraded.signed_in(key).send("GET", "/console/inbox").status_code == 200


def test_a_sign_in_form_an_earlier_release_rendered_still_signs_in(services, gateway, monkeypatch) -> None:
    served_at(monkeypatch, HTTPS_BASE)
    pre = "an-earlier-releases-pre-session"
    # The form's proof is of the browser's pre-session value, made as every release makes it.
    rendered = earlier_release_browser(gateway, {SIGN_IN.base: pre}).send("GET", "/console/sign-in")
    proof = PROOF.search(rendered.text)
    assert proof
    assert set_cookies(rendered)[SIGN_IN.name(https=True)]["value"] == pre

    signed = earlier_release_browser(gateway, {SIGN_IN.base: pre}).send(
        "POST", "/console/sign-in", {"csrf": proof.group(1), "api_key": new_api_key(services)}
    )

    assert signed.status_code == 200, signed.text[:300]
    assert set_cookies(signed)[SIGN_IN.base]["max-age"] == "0"
    assert SESSION.name(https=True) in set_cookies(signed)


def test_an_approval_page_an_earlier_release_rendered_still_decides(services, gateway, monkeypatch) -> None:
    served_at(monkeypatch, HTTPS_BASE)
    run_id, link = waiting_run_and_link(services, gateway)
    earlier = {csrf.cookie_of(link.rsplit("/", 1)[1]).base: "an-earlier-releases-browser-secret"}
    rendered = earlier_release_browser(gateway, earlier).send("GET", link, headers={"Accept": BROWSER_ACCEPT})
    field = PROOF.search(rendered.text)
    assert field

    decided = earlier_release_browser(gateway, earlier).send("POST", link, {"csrf": field.group(1), "action": "accept"})

    assert decided.status_code == 200, decided.text[:300]
    assert services.store.get_run(run_id)[0].status == "completed"
    assert set_cookies(rendered)[next(iter(earlier))]["max-age"] == "0"
