"""A form that sends a field twice, over HTTP against the local stack: every page form (the approval page, and each
console form wiring declares, walked with the forms tests/support/console_forms.py acts with) refuses a field it reads once
when the field comes more than once, with its own refusal page (400, a sentence, no field name), and changes
nothing; read by its first value, a crafted form showed one value to a check and acted on another. A field a person
may tick several of (a key's scopes, the runs to cancel) is still read as the list it is."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
import requests

from interlude import wiring
from tests.support.console import PROOF, Console, opens_a_session
from tests.support.console_forms import FORMS, Tenant, unexpiring
from tests.support.local_stack import Api, wire

SAID = "The form sent one of its fields more than once."
EVERY_SCOPE = tuple(wiring.ALL_SCOPES)
# The fields each console form reads once beyond the ones it acts with (FORMS): where to go back to, a comment, a
# reason, tags.
ALSO_READ: dict[str, dict[str, str]] = {
    "consoleDecide": {"back": "run", "feedback": "fine by me"},
    "consoleClaim": {"back": "run"},
    "consoleRelease": {"back": "run"},
    "consoleAssign": {"back": "run"},
    "consoleCancelRuns": {"reason": "wrong amount"},
    "consoleStartRun": {"tags": "urgent"},
}
# Fields a person may tick several of: read as the list they are.
LISTS = {"consoleCreateKey": "scope", "consoleCancelRuns": "runId"}
SIGNING_IN_AND_OUT = {"consoleSignIn", "consoleSignOut"}
CONSOLE_FORMS = [r for r in wiring.CONSOLE_ROUTES if r.method == "POST" and r.operation in FORMS]


def test_every_page_form_is_walked() -> None:
    # The console's forms, signing in and out (below), and the approval page's (below): a form added later is walked.
    posted = {r.operation for r in wiring.ROUTES if r.method == "POST" and r.html_errors}
    assert posted == {r.operation for r in CONSOLE_FORMS} | SIGNING_IN_AND_OUT | {"resolveInterruptByToken"}


@pytest.fixture(scope="module")
def tenant(stack_info: dict[str, str]) -> Tenant:
    return Tenant(stack_info)


def refused_as_a_page(got: requests.Response, where: str) -> None:
    assert (got.status_code, got.headers["Content-Type"].split(";")[0]) == (400, "text/html"), (where, got.text[:300])
    assert SAID in got.text, (where, got.text[:300])
    # Words for a person: no error code, no envelope.
    assert "validation_error" not in got.text, where
    assert '"error"' not in got.text, where


def twice(form: dict[str, Any], name: str) -> dict[str, Any]:
    return {**form, name: [form[name], form[name]]}


@pytest.mark.parametrize("route", CONSOLE_FORMS, ids=lambda r: r.operation)
def test_a_console_form_that_sends_a_field_twice_is_refused_as_a_page_and_changes_nothing(tenant: Tenant, route: wiring.Route) -> None:
    console = tenant.console(EVERY_SCOPE)
    path, acting = FORMS[route.operation](tenant, EVERY_SCOPE)
    form = {"csrf": console.proof(), **acting, **ALSO_READ.get(route.operation, {})}
    before = tenant.settled(path, form)
    for name in form:
        if name in ("action", LISTS.get(route.operation)):
            continue  # `action` twice is refused as choosing no button (tests/unit/test_page_forms.py)
        refused_as_a_page(console.post(path, twice(form, name)), f"{route.operation}: {name}")
    assert unexpiring(tenant.items(path, form)) == unexpiring(before), f"{route.operation} changed the tenant's items"
    done = console.post(path, form)
    assert done.status_code in (200, 201), (route.operation, done.text[:300])


def test_the_fields_a_person_ticks_several_of_are_still_read_as_lists(tenant: Tenant) -> None:
    console = tenant.console(EVERY_SCOPE)
    proof = console.proof()
    made = console.post("/console/keys", {"csrf": proof, "subjectId": f"two-{uuid.uuid4().hex[:6]}", "scope": ["runs:read", "runs:create"]})
    assert made.status_code == 201, made.text[:300]
    key_id = re.search(r"il_([0-9a-f]{16})_", made.text).group(1)
    listed = tenant.api.call("GET", "/keys").json()["keys"]
    assert set(next(k for k in listed if k["keyId"] == key_id)["scopes"]) == {"runs:read", "runs:create"}
    runs = [tenant.waiting_run(), tenant.waiting_run()]
    cancelled = console.post("/console/runs/cancel", {"csrf": proof, "runId": runs, "confirm": "yes"})
    assert cancelled.status_code == 200, cancelled.text[:300]
    assert "Cancelled 2 of 2" in cancelled.text
    assert {tenant.api.run(r)["status"] for r in runs} == {"cancelled"}


# -- signing in and out ----------------------------------------------------------------------------------------


def test_a_sign_in_that_sends_a_field_twice_opens_no_session(api: Api) -> None:
    console = Console(api)
    form = {"csrf": console.proof("/console/sign-in"), "api_key": api.api_key}
    for name in form:
        got = console.post("/console/sign-in", twice(form, name), allow_redirects=False)
        refused_as_a_page(got, name)
        assert "Sign in" in got.text
        assert not opens_a_session(got), name
    assert console.post("/console/sign-in", form, allow_redirects=False).status_code == 200


def test_a_sign_out_that_sends_its_proof_twice_keeps_the_session(api: Api) -> None:
    console = Console(api).signed_in(api.api_key)
    proof = console.proof()
    refused_as_a_page(console.post("/console/sign-out", {"csrf": [proof, proof]}), "csrf")
    assert console.get("/console/inbox", allow_redirects=False).status_code == 200
    assert "Signed out" in console.post("/console/sign-out", {"csrf": proof}).text
    assert console.get("/console/inbox", allow_redirects=False).status_code == 303


# -- the approval page ----------------------------------------------------------------------------------------


def test_an_approval_page_form_that_sends_a_field_twice_decides_nothing(api: Api) -> None:
    workflow_id = f"twice-{uuid.uuid4().hex[:8]}"
    gate = {"title": "Ship it?", "actions": ["accept", "refine", "edit-accept"], "artifactData": {"text": "Hello"}}
    definition = {
        "nodes": [{"id": "review", "typeId": "core.approvalGate", "config": gate}, {"id": "revise", "typeId": "core.noop"}],
        "edges": [
            {"sourceNodeId": "review", "targetNodeId": "revise", "condition": {"type": "equals", "left": "action", "right": "refine"}}
        ],
    }
    assert api.put_workflow(workflow_id, definition).status_code == 201
    run_id = api.start(workflow_id)["runId"]
    assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    minted = api.call("POST", f"/runs/{wire(run_id)}/interrupts/review/tokens", {"intent": "resolve"})
    assert minted.status_code == 201, minted.text
    url = minted.json()["url"]
    person = requests.Session()
    proof = PROOF.search(person.get(url, headers={"Accept": "text/html"}, timeout=30).text).group(1)
    forms = [
        {"csrf": proof, "action": "accept", "feedback": "fine by me"},
        {"csrf": proof, "action": "refine", "refine_scope": "whole", "refine_text": "Shorter"},
        {"csrf": proof, "action": "edit-accept", "e0": "Hi"},  # the artifact's one field
    ]
    for form in forms:
        for name in form:
            if name == "action":
                continue  # refused as choosing no button (tests/e2e/test_tokens_http.py)
            got = person.post(url, data=twice(form, name), headers={"Accept": "text/html"}, timeout=30)
            where = f"{form['action']}: {name}"
            assert (got.status_code, got.headers["Content-Type"].split(";")[0]) == (400, "text/html"), (where, got.text[:300])
            assert "Nothing was changed" in got.text, where
            if name == "e0":
                # An answer is refused beside its field, the rest of the form kept
                assert "The form sent more than one answer here; give one." in got.text, where
            else:
                assert SAID in got.text, where
            assert "validation_error" not in got.text, where
    assert api.run(run_id)["status"] == "waiting-approval"
    decided = person.post(url, data=forms[2], headers={"Accept": "text/html"}, timeout=30)
    assert decided.status_code == 200, decided.text[:300]
    assert api.wait_status(run_id, {"completed"})["variables"]["review"]["editedArtifactData"] == {"text": "Hi"}
