"""The operator console in a real browser: headless Chromium (Debian's package) driven by Playwright.

An operator signs in with an API key, sees the inbox, decides, finds the run in Runs, opens it and sees the
timeline and the vote, cancels two runs at once, and revokes a key, which its own session then finds refused.
Every page is captured at 390 px and 1280 px in test-artifacts/ (the operator works at 390 px, where the controls
are tightest; each page is then laid out at both widths, neither of which may scroll sideways); any
Content-Security-Policy violation (or any console error) fails the test.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from tests.support.browser import ARTIFACTS, NEEDS_CHROMIUM
from tests.support.console import failed_run, gate_workflow, refund_workflow
from tests.support.local_stack import Api, until

pytestmark = NEEDS_CHROMIUM

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
# Each page is checked and captured at every width; one scenario serves both (it took 42 s per width at load 8-14).
VIEWPORTS = (PHONE, DESKTOP)
# Recorded in the page before any of its own content runs; read back after each step.
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""


class Watched:
    """A browser context whose pages report CSP violations and console errors."""

    def __init__(self, browser, viewport: dict[str, int] = PHONE) -> None:
        self.context = browser.new_context(viewport=viewport)
        self.context.add_init_script(CSP_LISTENER)
        self.errors: list[str] = []
        self.page = self.context.new_page()
        self.page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        self.viewport = viewport

    def violations(self) -> list[str]:
        return list(self.page.evaluate("window.__csp || []"))

    def clean(self) -> None:
        assert self.violations() == []
        assert self.errors == []

    def shot(self, name: str) -> None:
        self.clean()
        for viewport in VIEWPORTS:
            self.page.set_viewport_size(viewport)
            # No horizontal scrolling of the page itself at any width (wide tables scroll inside their own box).
            assert self.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], viewport
            self.page.screenshot(path=str(ARTIFACTS / f"console-{name}-{viewport['width']}.png"), full_page=True)
        self.page.set_viewport_size(self.viewport)
        self.clean()

    def close(self) -> None:
        self.context.close()


def sign_in(watched: Watched, base_url: str, key: str) -> None:
    page = watched.page
    page.goto(base_url + "/console")
    assert page.get_by_role("heading", name="Sign in").is_visible()
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/console/inbox")


def test_the_csp_watch_sees_a_violation(api: Api, browser) -> None:
    """The check below can fail: an inline style without the nonce is reported."""
    watched = Watched(browser, PHONE)
    try:
        watched.page.goto(api.base_url + "/console/sign-in")
        assert watched.violations() == []
        watched.page.evaluate(
            "document.head.appendChild(Object.assign(document.createElement('style'), {textContent: 'body{color:red}'}))"
        )
        assert until(watched.violations, timeout_s=10)
    finally:
        watched.close()


def test_an_operator_works_through_the_console(api: Api, browser) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    workflow_id = gate_workflow(
        api,
        requiredApprovals=2,
        description="A <b>release</b> & its notes",
        artifactData={"amount": "{{inputs.amount}}", "currency": "EUR"},
        fieldLabels={"amount": "Amount to refund"},
    )
    voted = api.start(workflow_id, inputs={"amount": 2150})["runId"]
    others = [api.start(workflow_id)["runId"] for _ in range(2)]
    operator = f"operator-{uuid.uuid4().hex[:6]}"
    operator_key = api.new_key(
        ["approvals:respond", "runs:read", "runs:cancel", "runs:create", "workflows:read", "keys:admin", "audit:read"],
        subject=operator,
    )
    refunds = refund_workflow(api)
    tag = f"console-{uuid.uuid4().hex[:6]}"
    failed = failed_run(api)
    doomed_key = api.new_key(["approvals:respond", "runs:read"], subject=f"doomed-{uuid.uuid4().hex[:6]}")
    for run_id in (voted, *others):
        assert api.wait_status(run_id, {"waiting-approval"})["status"] == "waiting-approval"
    watched = Watched(browser)
    page = watched.page
    try:
        # Sign in: the key becomes a session, and the inbox shows what waits
        sign_in(watched, api.base_url, operator_key)
        assert page.get_by_role("heading", name="Inbox", level=1).is_visible()
        item = page.locator("section.card", has=page.locator(f'a[href$="{voted.split("/")[1]}"]'))
        assert item.get_by_role("heading", name="Ship it?").is_visible()
        assert "A <b>release</b> & its notes" in item.locator(".desc").inner_text()
        watched.shot("inbox")

        # Claim it: the inbox says who works it, and offers to release it
        item.get_by_role("button", name="Claim").click()
        page.wait_for_load_state()
        item = page.locator("section.card", has=page.locator(f'a[href$="{voted.split("/")[1]}"]'))
        assert item.get_by_text(f"Claimed by {operator}").is_visible()
        assert item.get_by_role("button", name="Release").is_visible()
        watched.shot("claimed")

        # Decide: a vote, by keyboard-reachable controls with labels
        item.get_by_label("Comment (optional)").fill("Looks right to me")
        item.get_by_role("button", name="Approve").click()
        page.wait_for_load_state()
        assert page.get_by_role("status").get_by_text("Your vote was counted").is_visible()
        watched.shot("decided")

        # Find the run in Runs (filtered by its workflow) and open it
        page.get_by_role("link", name="Runs").click()
        choose_workflow(page, workflow_id)
        page.get_by_role("button", name="Find").click()
        page.wait_for_load_state()
        listed = page.get_by_role("table", name="Runs, newest first")
        assert listed.locator("tbody tr").count() == 3
        listed.get_by_role("link", name=voted).click()
        page.wait_for_url(f"**/console/runs/*{voted.split('/')[1]}")
        assert page.get_by_role("heading", name=voted).is_visible()

        # The timeline and the vote: who, when, which surface
        timeline = page.locator("ol.timeline")
        assert "Asked for a decision · review" in timeline.inner_text()
        assert "Vote received · review" in timeline.inner_text()
        votes = page.get_by_role("table", name="Votes on review")
        row = votes.locator("tbody tr")
        assert row.count() == 1
        cells = row.locator("td").all_inner_texts()
        assert cells[0] == operator  # by name: the directory has none for it, so its subject id
        assert cells[1] == "approved"  # the decision in words
        assert cells[3] == "console"
        assert page.locator("svg.graph g.s-suspended").count() == 1
        # The run's input and output, then a step's: chosen in the graph
        io = page.locator("#io")
        assert "Input and output of the run" in io.inner_text()
        assert "2150" in io.get_by_role("row", name="amount").inner_text()
        page.locator("svg.graph a", has=page.locator("g.s-suspended")).click()
        page.wait_for_url("**step=review#io")
        assert io.get_by_role("heading", name="Input and output of review").is_visible()
        asked = io.get_by_role("row", name="Amount to refund").inner_text()
        assert "2150" in asked
        watched.shot("run")
        # The same page in the system's dark scheme
        page.emulate_media(color_scheme="dark")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(15, 19, 26)", background
        watched.shot("run-dark")
        page.emulate_media(color_scheme="light")

        # Cancel two runs at once
        page.get_by_role("link", name="Runs").click()
        page.get_by_label("waiting for approval", exact=True).check()
        choose_workflow(page, workflow_id)
        page.get_by_role("button", name="Find").click()
        page.wait_for_load_state()
        for run_id in others:
            page.get_by_label(f"Select run {run_id}").check()
        watched.shot("runs")
        page.get_by_role("button", name="Cancel selected runs").click()
        page.wait_for_load_state()
        # A confirmation first: nothing is cancelled until it is pressed
        assert page.get_by_role("heading", name="Cancel 2 runs?").is_visible()
        assert api.run(others[0])["status"] == "waiting-approval"
        watched.shot("confirm-cancel")
        page.get_by_role("button", name="Yes, cancel 2 runs").click()
        page.wait_for_load_state()
        assert page.get_by_role("status").get_by_text("Cancelled 2 of 2").is_visible()
        for run_id in others:
            assert api.run(run_id)["status"] == "cancelled"
        assert api.run(voted)["status"] == "waiting-approval"
        watched.shot("cancelled")

        # Workflows: the definition drawn and its steps in words (its JSON only a file to download)
        page.goto(api.base_url + f"/console/workflows/{workflow_id}")
        assert page.locator("svg.graph").count() == 1
        assert "Asks for approval: “Ship it?” (2 approvals needed)." in page.locator("ol.definition").inner_text()
        assert page.get_by_role("link", name="Download the definition").get_attribute("download") == f"{workflow_id}-v1.json"
        assert page.locator("pre").count() == 0
        watched.shot("workflow")

        # Start a run from the form the workflow's declared inputs draw
        page.goto(api.base_url + f"/console/workflows/{refunds}")
        start = page.locator("section", has=page.get_by_role("heading", name="Start a run"))
        start.get_by_label("amount").fill("40")
        start.get_by_label("currency").select_option("USD")
        start.get_by_label("Tags (optional, one a line)").fill(tag)
        watched.shot("start-run")
        start.get_by_role("button", name="Start run").click()
        page.wait_for_load_state()
        assert page.get_by_role("status").get_by_text("Run started").is_visible()
        started = page.locator("h1.mono").inner_text()
        assert api.run(started)["inputs"] == {"amount": 40, "currency": "USD"}
        assert "Refund 40?" in page.locator("#main").inner_text()

        # Find it again by its tag and the minutes it started in
        began = datetime.fromisoformat(api.run(started)["startedAt"].replace("Z", "+00:00"))
        created = began.replace(second=0, microsecond=0) - timedelta(minutes=1)
        page.get_by_role("link", name="Runs").click()
        page.get_by_label("Tags (all of them, comma-separated)").fill(tag)
        page.get_by_label("Started after (UTC)").fill(created.strftime("%Y-%m-%dT%H:%M"))
        page.get_by_label("Started before (UTC)").fill((created + timedelta(minutes=3)).strftime("%Y-%m-%dT%H:%M"))
        page.get_by_role("button", name="Find").click()
        page.wait_for_load_state()
        found = page.get_by_role("table", name="Runs, newest first")
        assert found.locator("tbody tr").count() == 1
        assert found.get_by_role("link", name=started).is_visible()
        watched.shot("found-by-tag")

        # Redrive a failed run: a new run, linked both ways
        page.goto(api.base_url + f"/console/runs/{failed.replace('/', '~2F')}")
        assert page.get_by_role("alert").get_by_text("Failed at call").is_visible()
        page.get_by_role("button", name="Redrive from call").click()
        page.wait_for_load_state()
        assert page.get_by_role("status").get_by_text("Redriven: a new run").is_visible()
        assert page.locator("ul.lineage").get_by_role("link", name=failed).is_visible()
        watched.shot("redriven")

        # Revoke a key, and see it refused: in its own console session and on the API
        doomed = Watched(browser)
        try:
            sign_in(doomed, api.base_url, doomed_key)
            page.get_by_role("link", name="Keys").click()
            page.get_by_role("button", name=f"Revoke key {doomed_key.split('_')[1]}").click()
            page.wait_for_load_state()
            assert page.get_by_role("status").get_by_text("Key revoked").is_visible()
            watched.shot("keys")

            def refused() -> bool:
                doomed.page.reload()
                return "Your session has ended" in doomed.page.inner_text("body")

            assert until(refused, timeout_s=30, interval_s=0.5)
            assert "revoked" in doomed.page.inner_text("body")
            assert until(lambda: api.call("GET", "/interrupts", key=doomed_key).status_code == 401, timeout_s=30)
            # Its last page was a 401, which Chromium logs as a failed load: only the policy is checked here.
            assert doomed.violations() == []
        finally:
            doomed.close()

        # Audit: what the operator did here, each entry naming the console as its surface. A vote's and a cancel's
        # entries are chained from their records by dispatch (docs/adr/0128): the page is read once they are.
        def chained() -> bool:
            actions = {e["action"] for e in api.call("GET", "/audit?limit=100").json()["entries"]}
            return {"interrupt.voted", "run.cancelled", "key.revoked"} <= actions

        assert until(chained, timeout_s=30)
        page.get_by_role("link", name="Audit").click()
        entries = page.get_by_role("table", name="Audit entries, newest first").inner_text()
        for action in ("Voted on a request", "Cancelled a run", "Revoked a key"):
            assert action in entries
        assert f"{operator} in the console" in entries
        assert "{" not in entries
        watched.shot("audit")
    finally:
        watched.close()


def choose_workflow(page, workflow_id: str) -> None:
    """The run search's Workflow filter: a choice among the tenant's workflows by name, a text field past 100."""
    field = page.get_by_label("Workflow", exact=True)
    if field.evaluate("e => e.tagName") == "SELECT":
        field.select_option(workflow_id)
    else:
        field.fill(workflow_id)
