"""The operator console over HTTP against the local stack: sign-in and its session cookie, the proof every form
carries, decisions under the same rules as the API, revocation ending a session, and refusals as pages."""

from __future__ import annotations

import re
import uuid

import pytest
import requests

from interlude import wiring
from tests.support.console import PROOF, Console, failed_run, gate_workflow, refund_workflow
from tests.support.local_stack import Api, tenant_admin_key, until, wire

SESSION = "il_console"
UNKNOWN_RUN = "demo~2FN0-such-run-xxxxxxxxxxxx"


@pytest.fixture(scope="module")
def admin(api: Api) -> Console:
    return Console(api).signed_in(api.api_key)


@pytest.fixture(scope="module")
def admin_proof(admin: Console) -> str:
    """The admin session's form proof, read once: the same on every page for the session's life (an HMAC of its
    nonce), and the inbox page it is read from is the shared tenant's, which every module's waiting runs fill."""
    return admin.proof()


def waiting_run(api: Api, **config) -> str:
    run = api.start(gate_workflow(api, **config))
    assert api.wait_status(run["runId"], {"waiting-approval"})["status"] == "waiting-approval"
    return run["runId"]


def decide_path(run_id: str) -> str:
    return f"/console/runs/{wire(run_id)}/interrupts/review"


def test_without_a_session_every_page_leads_to_sign_in(api: Api) -> None:
    anonymous = Console(api)
    assert "<h1>Sign in</h1>" in anonymous.get("/console", allow_redirects=False).text
    for route in wiring.CONSOLE_ROUTES:
        if route.method != "GET" or route.operation in ("consoleSignInPage", "consoleHome", "consoleRoot"):
            continue
        path = route.path.replace("{runId}", UNKNOWN_RUN).replace("{workflowId}", "wf")
        got = anonymous.get(path, allow_redirects=False)
        assert (got.status_code, got.headers["Location"]) == (303, "/console/sign-in"), path


def test_sign_in_exchanges_the_key_for_a_strict_short_lived_session(api: Api) -> None:
    console = Console(api)
    page = console.get("/console/sign-in")
    assert page.status_code == 200
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert page.headers["Cache-Control"] == "no-store"

    got = console.sign_in(api.api_key)

    assert got.status_code == 200
    cookie = next(c for c in got.raw.headers.getlist("Set-Cookie") if c.startswith(SESSION + "="))
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "path", "max-age", "samesite"} <= attributes
    assert "SameSite=Strict" in cookie
    assert "Path=/console" in cookie
    assert "Max-Age=3600" in cookie
    # Plain http on loopback: Secure would keep the browser from sending it back (it is set on https).
    assert "secure" not in attributes
    assert api.api_key not in cookie
    inbox = console.get("/console/inbox")
    assert inbox.status_code == 200
    # The directory has no name for demo-admin: the header names the key, never its subject.
    assert "Signed in with an administrator key" in inbox.text
    assert "demo-admin" not in inbox.text


def test_the_header_and_the_keys_page_name_the_keys_holder_as_the_directory_does(api: Api, admin: Console) -> None:
    subject = f"ana-{uuid.uuid4().hex[:6]}"
    assert api.call("PUT", f"/principals/{subject}", {"displayName": "Ana Lima"}).status_code == 201
    console = Console(api)
    signed = console.sign_in(api.new_key(["approvals:respond", "runs:read"], subject=subject))
    assert "Signed in as Ana Lima." in signed.text
    runs = console.get("/console/runs")
    assert "<strong>Signed in as Ana Lima</strong>" in runs.text
    assert subject not in runs.text
    keys = admin.get("/console/keys")
    assert "Held by" in keys.text
    assert "Ana Lima" in keys.text
    assert subject not in keys.text


def test_a_key_that_is_not_valid_is_refused_at_sign_in(api: Api) -> None:
    console = Console(api)
    got = console.sign_in("il_0000000000000000_" + "x" * 43)
    assert got.status_code == 401
    assert "That key was not accepted" in got.text
    assert SESSION not in console.session.cookies


def test_sign_in_needs_the_forms_proof_and_this_site(api: Api) -> None:
    console = Console(api)
    proof = console.proof("/console/sign-in")
    missing = console.post("/console/sign-in", {"api_key": api.api_key}, allow_redirects=False)
    foreign = console.post(
        "/console/sign-in",
        {"csrf": proof, "api_key": api.api_key},
        headers={"Origin": "http://attacker.example"},
        allow_redirects=False,
    )
    assert (missing.status_code, foreign.status_code) == (403, 403)
    assert SESSION not in console.session.cookies


def test_a_form_without_the_sessions_proof_changes_nothing(api: Api, admin: Console, admin_proof: str) -> None:
    run_id = waiting_run(api)
    proof = admin_proof
    forged = admin.post(decide_path(run_id), {"csrf": "0" * 64, "action": "accept"})
    no_proof = admin.post(decide_path(run_id), {"action": "accept"})
    cross_site = admin.post(
        decide_path(run_id), {"csrf": proof, "action": "accept"}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    # Another session's proof does not stand for this one.
    other = Console(api).signed_in(api.api_key)
    borrowed = other.post(decide_path(run_id), {"csrf": proof, "action": "accept"})
    for got in (forged, no_proof, cross_site, borrowed):
        assert got.status_code == 403
        assert "Not sent from this console" in got.text
    assert api.run(run_id)["status"] == "waiting-approval"


def test_a_decision_in_the_console_is_a_vote_like_any_other(api: Api, admin: Console, admin_proof: str) -> None:
    run_id = waiting_run(api, requiredApprovals=2)

    got = admin.post(decide_path(run_id), {"csrf": admin_proof, "action": "accept", "feedback": "fine by me"})

    assert got.status_code == 200
    assert "Your vote was counted" in got.text
    (vote,) = api.run(run_id)["extensions"]["interlude.run"]["openInterrupts"]["review"]["votes"]
    assert (vote["action"], vote["surface"]) == ("accept", "console")
    assert vote["principal"].endswith("|demo-admin")
    # The same rules as every surface: one vote per principal, whichever surface it came from
    again = admin.post(decide_path(run_id), {"csrf": admin_proof, "action": "accept"})
    assert again.status_code == 409
    assert "already voted" in again.text
    assert api.resolve(run_id, "review", {"action": "accept"}).status_code == 409
    # And a second approver through the API completes the gate
    second = api.new_key(["approvals:respond", "runs:read"], subject="second-approver")
    assert api.resolve(run_id, "review", {"action": "accept"}, key=second).status_code == 200
    assert api.wait_status(run_id, {"completed"})["status"] == "completed"
    run_page = admin.get(f"/console/runs/{wire(run_id)}")
    assert "Decided · review" in run_page.text
    assert "by second-approver" in run_page.text


def test_a_form_answer_that_is_not_allowed_is_a_page_not_a_decision(api: Api, admin: Console, admin_proof: str) -> None:
    run_id = waiting_run(api)
    got = admin.post(decide_path(run_id), {"csrf": admin_proof, "action": "edit-accept"})
    assert got.status_code == 400
    assert "Choose one of the buttons" in got.text
    assert api.run(run_id)["status"] == "waiting-approval"


def test_revoking_the_key_ends_its_session(api: Api, admin: Console) -> None:
    key = api.new_key(["approvals:respond", "runs:read"], subject=f"leaver-{uuid.uuid4().hex[:6]}")
    console = Console(api).signed_in(key)
    assert console.get("/console/inbox").status_code == 200
    key_id = key.split("_")[1]

    assert api.call("DELETE", f"/keys/{key_id}").status_code == 200

    # Every instance refuses it within the keys service's cache bound (the stack's key_cache_seconds; slack for a
    # loaded box).
    def refused() -> str | None:
        got = console.get("/console/inbox")
        return got.text if got.status_code == 401 else None

    saved = console.session.cookies[SESSION]
    ended = until(refused, timeout_s=30)
    assert ended is not None, "the session outlived its key"
    assert "Your session has ended" in ended
    assert "revoked" in ended
    # A saved copy of the cookie is refused as well, on every instance (each reads the key within its cache bound).
    assert until(lambda: all(sign_in_page_for(api, saved).status_code == 401 for _ in range(8)), timeout_s=30)
    # The session cookie is gone with it: the next visit asks to sign in.
    assert console.get("/console/inbox", allow_redirects=False).status_code == 303
    assert until(lambda: api.call("GET", "/interrupts", key=key).status_code == 401, timeout_s=30)


def test_the_runs_page_names_the_workflow_of_each_run(api: Api, admin: Console) -> None:
    workflow_id = refund_workflow(api)
    run_id = api.start(workflow_id, inputs={"amount": 12})["runId"]
    listed = admin.get("/console/runs", params={"workflowId": workflow_id})
    assert listed.status_code == 200
    assert f'Refunds <span class="muted mono">{workflow_id}</span>' in listed.text
    # Other tests' workflows share the tenant: past WORKFLOW_CHOICES of them the filter is a text field.
    assert f'<option value="{workflow_id}" selected>' in listed.text or f'name="workflowId" value="{workflow_id}"' in listed.text
    assert f'href="/console/runs/{wire(run_id)}"' in listed.text


def test_the_workflows_page_lists_the_tenants_workflows_with_links(api: Api, admin: Console) -> None:
    workflow_id = gate_workflow(api)
    link = f'href="/console/workflows/{workflow_id}"'
    page, found = 1, False
    while not found:
        listed = admin.get(f"/console/workflows?page={page}")
        assert listed.status_code == 200
        found = link in listed.text
        if not found:
            # Other tests' workflows share the tenant: follow "Next page" to the id's page.
            assert f'href="/console/workflows?page={page + 1}"' in listed.text, "the workflow is on no page"
            page += 1
    assert admin.get(f"/console/workflows/{workflow_id}").status_code == 200
    assert admin.get("/console/workflows?page=0").status_code == 400


def test_a_key_without_a_pages_scope_sees_a_refusal_page(api: Api) -> None:
    reader = Console(api).signed_in(api.new_key(["runs:read"]))
    for path in ("/console/keys", "/console/inbox", "/console/workflows", "/console/audit"):
        got = reader.get(path)
        assert got.status_code == 403, path
        assert "Not allowed" in got.text
        assert "lacks the scope" in got.text
    assert reader.get("/console/runs").status_code == 200


def test_a_session_grants_no_more_than_the_key_it_signed_in_with(api: Api) -> None:
    approver = Console(api).signed_in(api.new_key(["approvals:respond", "runs:read"]))
    run_id = waiting_run(api)
    got = approver.post("/console/runs/cancel", {"csrf": approver.proof(), "runId": run_id})
    assert got.status_code == 403
    assert api.run(run_id)["status"] == "waiting-approval"


def test_bad_and_foreign_ids_are_pages_not_server_errors(api: Api, admin: Console, stack_info) -> None:
    other_key = tenant_admin_key(stack_info, "console-other", "o-admin")
    foreign = api.start(gate_workflow(api), key=None)["runId"].replace("demo/", "console-other/")
    cases = {
        "/console/runs/demo~2Fshort": 400,
        f"/console/runs/{UNKNOWN_RUN}": 404,
        f"/console/runs/{wire(foreign)}": 403,
        "/console/workflows/no-such-workflow": 404,
        "/console/workflows/bad%20id": 400,
        "/console/runs?status=sleeping": 400,
        "/console/keys?cursor=not-a-cursor": 400,
        "/console/inbox?cursor=not-a-cursor": 400,
    }
    for path, status in cases.items():
        got = admin.get(path)
        assert got.status_code == status, (path, got.text[:300])
        assert got.headers["Content-Type"].startswith("text/html")
    assert other_key


def test_a_tampered_session_is_no_session(api: Api) -> None:
    console = Console(api).signed_in(api.api_key)
    value = console.session.cookies[SESSION]
    kid, body, mac = value.split(".")
    tampered = f"{kid}.{body[:-4]}AAAA.{mac}"
    assert sign_in_page_for(api, value).status_code == 200
    got = sign_in_page_for(api, tampered)
    assert (got.status_code, got.headers["Location"]) == (303, "/console/sign-in")


def sign_in_page_for(api: Api, session_cookie: str) -> requests.Response:
    return requests.get(
        api.base_url + "/console/inbox",
        headers={"Cookie": f"{SESSION}={session_cookie}"},
        allow_redirects=False,
        timeout=30,
    )


def test_keys_are_created_shown_once_and_revoked_from_the_console(api: Api, admin: Console, admin_proof: str) -> None:
    subject = f"bot-{uuid.uuid4().hex[:6]}"
    created = admin.post("/console/keys", {"csrf": admin_proof, "subjectId": subject, "scope": ["runs:read"]})
    assert created.status_code == 201
    key = re.search(r'id="new-key">(il_[^<]+)<', created.text).group(1)
    assert api.call("GET", f"/runs/{UNKNOWN_RUN}", key=key).status_code == 404
    assert key not in admin.get("/console/keys").text
    key_id = key.split("_")[1]

    revoked = admin.post(f"/console/keys/{key_id}/revoke", {"csrf": admin.proof("/console/keys")})

    assert revoked.status_code == 200
    assert "Key revoked" in revoked.text
    assert until(lambda: api.call("GET", f"/runs/{UNKNOWN_RUN}", key=key).status_code == 401, timeout_s=30)
    refused = admin.post("/console/keys", {"csrf": admin_proof, "subjectId": "x", "scope": ["no:such"]})
    assert refused.status_code == 400


def test_signing_out_ends_the_session(api: Api) -> None:
    console = Console(api).signed_in(api.api_key)
    out = console.post("/console/sign-out", {"csrf": console.proof()}, allow_redirects=False)
    assert out.status_code == 200
    assert "Signed out" in out.text
    got = console.get("/console/inbox", allow_redirects=False)
    assert got.status_code == 303


def test_a_saved_copy_of_the_cookie_is_refused_after_sign_out_on_every_instance(api: Api) -> None:
    # Issue 26, S2: signing out ends the session itself, not only the browser's copy of its cookie.
    console = Console(api).signed_in(api.api_key)
    saved = console.session.cookies[SESSION]
    proof = console.proof()
    run_id = waiting_run(api)
    assert sign_in_page_for(api, saved).status_code == 200

    assert console.post("/console/sign-out", {"csrf": proof}).status_code == 200

    # The stack runs several API instances: each request may land on another, and each refuses it at once.
    for _ in range(8):
        got = sign_in_page_for(api, saved)
        assert got.status_code == 401, got.text[:300]
        assert "Your session has ended" in got.text
        assert "signed out" in got.text
    replayed = requests.post(
        api.base_url + decide_path(run_id),
        data={"csrf": proof, "action": "accept"},
        headers={"Cookie": f"{SESSION}={saved}"},
        allow_redirects=False,
        timeout=30,
    )
    assert replayed.status_code == 401
    assert api.run(run_id)["status"] == "waiting-approval"
    # Signing in again opens a new session; the old cookie stays refused.
    again = Console(api).signed_in(api.api_key)
    assert again.get("/console/inbox").status_code == 200
    assert sign_in_page_for(api, saved).status_code == 401


def test_a_run_page_shows_status_graph_timeline_and_open_gates(api: Api, admin: Console, admin_proof: str) -> None:
    run_id = waiting_run(api)
    page = admin.get(f"/console/runs/{wire(run_id)}")
    assert page.status_code == 200
    assert '<svg class="graph"' in page.text
    assert "review: waiting" in page.text
    assert "Asked for a decision · review" in page.text
    assert "Notifications" in page.text
    assert "Callback deliveries" in page.text
    assert "Open gates" in page.text
    assert "Ship it?" in page.text
    assert len(PROOF.findall(page.text)) == page.text.count("<form")

    # Cancelling asks once more, and changes nothing until it is confirmed
    asked = admin.post("/console/runs/cancel", {"csrf": admin_proof, "runId": run_id, "reason": "wrong amount"})
    assert asked.status_code == 200
    assert "Cancel this run?" in asked.text
    assert "It cannot be undone. Reason: wrong amount" in asked.text
    assert 'name="confirm" value="yes"' in asked.text
    assert api.run(run_id)["status"] == "waiting-approval"
    cancelled = admin.post("/console/runs/cancel", {"csrf": admin_proof, "runId": run_id, "confirm": "yes"})
    assert cancelled.status_code == 200
    assert "Cancelled 1 of 1" in cancelled.text
    assert api.run(run_id)["status"] == "cancelled"


def test_a_bulk_cancel_says_what_became_of_each_run_in_words(api: Api, admin: Console, admin_proof: str) -> None:
    waiting, ended = waiting_run(api), waiting_run(api)
    admin.post("/console/runs/cancel", {"csrf": admin_proof, "runId": ended, "confirm": "yes"})
    other_tenants = "someone-else/" + uuid.uuid4().hex
    missing = f"{ended.split('/')[0]}/{uuid.uuid4().hex}"
    ids = [waiting, ended, "not-an-id", other_tenants, missing]
    got = admin.post("/console/runs/cancel", {"csrf": admin_proof, "runId": ids, "confirm": "yes"})
    assert got.status_code == 200, got.text[:300]
    assert "Cancelled 1 of 5" in got.text
    assert f"{waiting}: cancelled" in got.text
    assert f"{ended}: not cancelled: it is cancelled" in got.text
    assert "not-an-id: not cancelled: this is not a run&#x27;s id" in got.text
    assert f"{other_tenants}: not cancelled: no run of yours has this id" in got.text
    assert f"{missing}: not cancelled: no run has this id" in got.text
    for internal in ("tenant-bound", "tenant/opaque", "another tenant", "already cancelled"):
        assert internal not in got.text


def test_the_services_address_leads_to_the_console(api: Api) -> None:
    got = Console(api).get("/", allow_redirects=False)
    assert (got.status_code, got.headers["Location"]) == (303, "/console")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/console/nope"),
        # A run id pasted into the address as the tables show it (tenant/id), not in its one-segment form.
        ("GET", "/console/runs/demo/N0-such-run-xxxxxxxxxxxx"),
        ("POST", "/console/runs/demo/N0-such-run-xxxxxxxxxxxx/fork"),
        ("GET", "/console/sign-out"),
    ],
)
def test_an_address_in_the_console_that_names_no_page_is_a_page_not_json(api: Api, admin: Console, method: str, path: str) -> None:
    for person in (admin, Console(api)):
        got = person.session.request(method, api.base_url + path, timeout=30, allow_redirects=False)
        assert got.status_code in (404, 405), got.text[:300]
        assert got.headers["Content-Type"].startswith("text/html"), got.text[:300]
        assert "<!DOCTYPE html>" in got.text
        assert "not_found" not in got.text
        assert "method_not_allowed" not in got.text


REFRESH = re.compile(r'<meta http-equiv="refresh" content="(\d+)">')


def test_a_page_following_a_moving_run_refreshes_itself_without_script(api: Api, admin: Console, admin_proof: str) -> None:
    run_id = waiting_run(api)
    path = f"/console/runs/{wire(run_id)}"
    # Someone who may decide the gate is typing into its form: no reload unless asked for.
    assert REFRESH.search(admin.get(path).text) is None
    asked = admin.get(path + "?live=on")
    assert REFRESH.search(asked.text).group(1) == "10"
    assert asked.headers["Content-Security-Policy"].startswith("default-src 'none';")
    assert "script-src" not in asked.headers["Content-Security-Policy"]
    assert "<script" not in asked.text
    # A watcher who cannot decide it follows it live at once, and may stop.
    watcher = Console(api).signed_in(api.new_key(["runs:read"]))
    watched = watcher.get(path)
    assert REFRESH.search(watched.text).group(1) == "10"
    assert "Stop refreshing" in watched.text
    assert REFRESH.search(watcher.get(path + "?live=off").text) is None
    # The runs list refreshes when asked to, while a run on it goes on.
    assert REFRESH.search(watcher.get("/console/runs").text) is None
    assert REFRESH.search(watcher.get("/console/runs?live=on").text) is not None
    # An ended run has nothing to follow.
    admin.post("/console/runs/cancel", {"csrf": admin_proof, "runId": run_id, "confirm": "yes"})
    assert REFRESH.search(watcher.get(path + "?live=on").text) is None


def test_a_steps_input_and_output_are_read_on_the_run_page(api: Api, admin: Console, admin_proof: str) -> None:
    workflow_id = gate_workflow(
        api, artifactData={"amount": "{{inputs.amount}}"}, fieldLabels={"amount": "Amount to refund"}
    )
    run_id = api.start(workflow_id, inputs={"amount": 2150})["runId"]
    assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    decided = admin.post(
        decide_path(run_id), {"csrf": admin_proof, "action": "accept", "feedback": "fine", "back": "run"}
    )
    assert decided.status_code == 200
    assert api.wait_status(run_id, {"completed"})["status"] == "completed"

    page = admin.get(f"/console/runs/{wire(run_id)}?step=review").text
    panel = page[page.index('id="io"') : page.index("Open gates")]
    assert "Input and output of review" in panel
    assert '<th scope="row">Amount to refund</th><td>2150</td>' in panel
    assert "Approved by demo-admin: fine" in panel
    timeline = page[page.index('<ol class="timeline">') :]
    assert "Decided · review · Approved by demo-admin: fine" in timeline
    for protocol in ("resumeValue", "interruptId", "resumeSchema", '{"', "&#34;"):
        assert protocol not in page, protocol
    unknown = admin.get(f"/console/runs/{wire(run_id)}?step=nope")
    assert unknown.status_code == 400
    assert "no such step" in unknown.text


def test_the_inbox_filters_as_get_interrupts_does(api: Api, admin: Console) -> None:
    workflow_id = gate_workflow(api)
    run_id = api.start(workflow_id, inputs={"amount": 2150})["runId"]
    assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    mine = admin.get(f"/console/inbox?kind=approval&workflowId={workflow_id}&sort=due")
    assert mine.status_code == 200
    assert mine.text.count('aria-labelledby="item-') == 1
    assert wire(run_id) in mine.text
    assert "The run's inputs" in mine.text
    assert "May still vote" in mine.text
    assert wire(run_id) not in admin.get(f"/console/inbox?kind=clarification&workflowId={workflow_id}").text
    refused = admin.get("/console/inbox?sort=sideways")
    assert refused.status_code == 400
    assert "Sort must be one of" in refused.text


def test_a_run_is_started_from_the_form_its_workflows_inputs_draw(api: Api, admin: Console, admin_proof: str) -> None:
    workflow_id = refund_workflow(api)
    page = admin.get(f"/console/workflows/{workflow_id}").text
    start = page[page.index('id="start-heading"'):]
    assert '<label for="start-f0">amount</label>' in start
    assert '<p class="hint" id="start-f0-hint">In the order&#x27;s currency</p>' in start
    assert '<option value="EUR" selected>' in start
    action = f"/console/workflows/{workflow_id}/runs"

    refused = admin.post(action, {"csrf": admin_proof, "f1": "EUR", "tags": "urgent"})
    assert refused.status_code == 400
    assert "The run was not started" in refused.text
    assert 'id="start-f0-error"' in refused.text
    assert ">urgent</textarea>" in refused.text  # nothing typed is lost

    started = admin.post(action, {"csrf": admin_proof, "f0": "2150.50", "f1": "USD", "tags": "urgent\nq4"})
    assert started.status_code == 201
    assert "Run started" in started.text
    # The amount as it was typed, on the run's page (the API's answer is JSON's number)
    assert '<th scope="row">amount</th><td>2150.50</td>' in started.text
    run_id = re.search(r'<h1 class="mono">([^<]+)</h1>', started.text).group(1)
    snap = api.run(run_id)
    assert snap["inputs"] == {"amount": 2150.5, "currency": "USD"}
    assert snap["tags"] == ["urgent", "q4"]
    # A key that may not start runs is offered no form, and is refused the post
    reader = Console(api).signed_in(api.new_key(["workflows:read"]))
    assert "Start a run" not in reader.get(f"/console/workflows/{workflow_id}").text
    assert reader.post(action, {"csrf": reader.proof("/console/workflows"), "f0": "1"}).status_code == 403


def test_a_failed_run_is_redriven_and_any_run_forked_from_its_page(api: Api, admin: Console, admin_proof: str) -> None:
    source = failed_run(api)
    page = admin.get(f"/console/runs/{wire(source)}").text
    assert "Redrive from call" in page
    assert page.index("Failed at call") < page.index("<dt>Status</dt>")

    redriven = admin.post(f"/console/runs/{wire(source)}/redrive", {"csrf": admin_proof})
    assert redriven.status_code == 201, redriven.text[:500]
    assert "Redriven: a new run" in redriven.text
    assert f'Redriven from <a href="/console/runs/{wire(source)}" class="mono">{source}</a>' in redriven.text
    new_run = re.search(r'<h1 class="mono">([^<]+)</h1>', redriven.text).group(1)
    assert api.run(new_run)["extensions"]["interlude.run"]["ancestry"]["sourceRunId"] == source
    assert f"Forked as <a href=\"/console/runs/{wire(new_run)}\"" in admin.get(f"/console/runs/{wire(source)}").text

    # Any run forks; a branch past the end of the log is refused in words, nothing started
    waiting = waiting_run(api)
    replayed = admin.post(f"/console/runs/{wire(waiting)}/fork", {"csrf": admin_proof, "mode": "replay"})
    assert replayed.status_code == 201
    assert "Replayed from" in replayed.text
    past = admin.post(f"/console/runs/{wire(waiting)}/fork", {"csrf": admin_proof, "mode": "branch", "fromSeq": "999"})
    assert past.status_code == 422
    assert "Nothing was started" in past.text
    assert "past the source run" in past.text
    # A waiting run is not redriven
    refused = admin.post(f"/console/runs/{wire(waiting)}/redrive", {"csrf": admin_proof})
    assert refused.status_code == 409
    assert "Only a failed run is redriven" in refused.text
    # As on the API, forking needs runs:read besides runs:create
    creator = Console(api).signed_in(api.new_key(["runs:create"]))
    unread = creator.post(f"/console/runs/{wire(source)}/redrive", {"csrf": creator.proof()})
    assert unread.status_code == 403
    assert "runs:read" in unread.text


def test_runs_are_found_by_tag_words_time_and_several_statuses(api: Api, admin: Console) -> None:
    tag = f"find-{uuid.uuid4().hex[:6]}"
    workflow_id = gate_workflow(api)
    tagged = api.start(workflow_id, tags=[tag, "eu"])["runId"]
    other = api.start(workflow_id, tags=["eu"])["runId"]
    assert api.wait_status(tagged, {"waiting-approval"})["status"] == "waiting-approval"
    began = api.run(tagged)["startedAt"][:16]  # as a browser's date-time field sends it: minutes, no offset

    def found(**query) -> list[str]:
        got = admin.get("/console/runs", params=query)
        assert got.status_code == 200, got.text[:300]
        return re.findall(r'aria-label="Select run ([^"]+)"', got.text)

    assert found(tags=f"{tag},eu") == [tagged]
    assert set(found(tags="eu", workflowId=workflow_id)) == {tagged, other}
    assert found(tags=tag, createdAfter=began, status=["waiting-approval", "completed"], q="", workflowIdPrefix=workflow_id[:10]) == [tagged]
    assert found(tags=tag, createdBefore=began) == []
    assert found(tags=tag, status="completed") == []
    # The search is kept: in the form, in the next page's and the live link
    page = admin.get("/console/runs", params={"tags": tag, "status": ["waiting-approval", "failed"]}).text
    assert f'name="tags" value="{tag}"' in page
    assert 'value="waiting-approval" checked' in page
    assert 'value="failed" checked' in page
    assert f"tags={tag}&amp;status=waiting-approval%2Cfailed&amp;live=on" in page
    refused = admin.get("/console/runs", params={"createdAfter": "yesterday"})
    assert refused.status_code == 400
    assert "CreatedAfter must be an RFC 3339 date-time" in refused.text


# A number of each kind a JSON parser writes back otherwise, as its caller wrote it (issue 28 item 3: "numbers as
# written"): a trailing zero, an exponent, an integer past a double's precision, zeros after a decimal.
WRITTEN = {"amount": "1.50", "fee": "1e3", "order": "12345678901234567890", "rate": "0.1000"}


def test_an_artifact_shows_every_number_as_its_caller_wrote_it_on_the_page_and_in_the_console(
    api: Api, admin: Console
) -> None:
    workflow_id = gate_workflow(api, actions=["accept", "reject", "edit-accept"], artifactData="{{inputs.refund}}")
    refund = ", ".join(f'"{key}": {text}' for key, text in WRITTEN.items())
    started = api.call("POST", "/runs", f'{{"workflowId": "{workflow_id}", "inputs": {{"refund": {{{refund}}}}}}}')
    assert started.status_code == 201, started.text
    run_id = started.json()["runId"]
    assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    # The API's own answers are JSON as they always were
    assert api.run(run_id)["inputs"]["refund"] == {"amount": 1.5, "fee": 1000.0, "order": 12345678901234567890, "rate": 0.1}

    minted = api.call("POST", f"/runs/{wire(run_id)}/interrupts/review/tokens", {"intent": "resolve"})
    assert minted.status_code == 201, minted.text
    person = requests.Session()
    page = person.get(minted.json()["url"], headers={"Accept": "text/html"}, timeout=30).text
    inbox = admin.get(f"/console/inbox?workflowId={workflow_id}").text
    run_page = admin.get(f"/console/runs/{wire(run_id)}").text
    for markup in (page, inbox, run_page):
        for key, text in WRITTEN.items():
            # The artifact's table, and the "approve with my edits" field that starts from it
            assert f'<th scope="row">{key}</th><td>{text}</td>' in markup, (key, markup)
            assert re.search(rf'<input type="number"[^>]*value="{re.escape(text)}"', markup), (key, text)

    # The approver edits one number: the others come back the same numbers, and the page shows the new one as typed
    proof = PROOF.search(page)
    assert proof is not None
    typed = {**WRITTEN, "amount": "2.50"}
    form = {"csrf": proof.group(1), "action": "edit-accept", **{f"e{i}": text for i, text in enumerate(typed.values())}}
    decided = person.post(minted.json()["url"], data=form, headers={"Accept": "text/html"}, timeout=30)
    assert decided.status_code == 200, decided.text
    done = api.wait_status(run_id, {"completed"})
    assert done["variables"]["review"]["editedArtifactData"] == {**done["inputs"]["refund"], "amount": 2.5}
    step = admin.get(f"/console/runs/{wire(run_id)}?step=review").text
    assert '<th scope="row">amount</th><td>2.50</td>' in step
