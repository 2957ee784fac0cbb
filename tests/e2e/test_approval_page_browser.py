"""The approval page in a real browser: headless Chromium (Debian's package) driven by Playwright.

A person opens a token link on a phone, reads the request, decides, and sees the run resume; a second
submission from another tab of the same link says it was already decided. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import uuid

from tests.support.browser import ARTIFACTS, NEEDS_CHROMIUM
from tests.support.local_stack import wire

PHONE = {"width": 390, "height": 844}

pytestmark = NEEDS_CHROMIUM

WORKFLOW = {
    "nodes": [
        {"id": "draft", "typeId": "core.transform", "config": {"outputs": {"title": "{{inputs.title}}"}}},
        {
            "id": "review",
            "typeId": "core.approvalGate",
            "config": {
                "title": "Publish “{{draft.title}}”?",
                "description": "The draft <b>{{draft.title}}</b> is ready; approve to publish it.",
                "artifactType": "blog.post",
                "artifactData": {"title": "{{draft.title}}", "tags": ["release", "notes"], "words": 812},
                "actions": ["accept", "reject", "refine", "edit-accept"],
            },
        },
        {"id": "publish", "typeId": "core.transform", "config": {"outputs": {"by": "{{review.decidedBy}}"}}},
        {"id": "archive", "typeId": "core.noop"},
        {"id": "revise", "typeId": "core.transform", "config": {"outputs": {"asked": "{{review.refineFeedback.text}}"}}},
    ],
    "edges": [
        {"sourceNodeId": "draft", "targetNodeId": "review"},
        {"sourceNodeId": "review", "targetNodeId": "publish"},
        {"sourceNodeId": "review", "targetNodeId": "archive", "triggerRule": "any_failed"},
        # A refine goes only where a condition sends it (never on to publish)
        {
            "sourceNodeId": "review",
            "targetNodeId": "revise",
            "condition": {"type": "equals", "left": "action", "right": "refine"},
        },
    ],
}


def start_gated_run(api) -> tuple[str, str]:
    workflow_id = f"page-{uuid.uuid4().hex[:8]}"
    assert api.put_workflow(workflow_id, WORKFLOW).status_code == 201
    run = api.start(workflow_id, inputs={"title": "Release notes <2.0> & more"})
    minted = api.call("GET", f"/runs/{wire(run['runId'])}/interrupts/review")
    assert minted.status_code == 200, minted.text
    return run["runId"], minted.json()["url"]


def test_a_person_decides_from_a_link_and_a_second_submission_is_already_decided(api, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    run_id, url = start_gated_run(api)
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    console_errors: list[str] = []
    try:
        first = context.new_page()
        first.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
        response = first.goto(url)

        # Given the link opened on a phone: a strict policy, and the page reads well without horizontal scrolling
        assert response is not None
        assert response.status == 200
        assert "default-src 'none'" in response.headers["content-security-policy"]
        assert response.headers["referrer-policy"] == "no-referrer"
        assert first.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        # The nonce'd style sheet applied (a CSP-blocked sheet would leave the default white background)
        assert first.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(244, 245, 247)"
        # The request, with its templates resolved at raise time and markup shown as text
        assert first.get_by_role("heading", level=1).inner_text() == "Publish “Release notes <2.0> & more”?"
        assert "The draft <b>Release notes <2.0> & more</b> is ready" in first.inner_text(".desc")
        # What is being approved: a table of its fields in the author's order, numbers as written
        assert first.locator("table.fields th").all_inner_texts() == ["title", "tags", "words"]
        assert first.locator("table.fields td").all_inner_texts()[-1] == "812"
        # Only the gate's actions are offered; refine and edit-accept ask for their fields first
        assert first.get_by_role("button", name="Approve", exact=True).is_visible()
        assert first.get_by_role("button", name="Reject").is_visible()
        assert first.get_by_role("button", name="Ask a question").count() == 0
        assert first.locator("summary").all_inner_texts() == ["Request changes", "Approve with my edits"]
        # Where the run stands: the workflow drawn with the gate highlighted
        assert first.locator("svg.graph g.gate").count() == 1
        assert "review: waiting for this decision" in first.inner_text("ul.steps")
        first.screenshot(path=str(ARTIFACTS / "approval-page-open.png"), full_page=True)

        # And a second tab of the same link, opened before anyone decides
        second = context.new_page()
        second.goto(url)

        # When the person approves with a comment in the first tab
        first.fill("#feedback", "Looks good — ship it.")
        first.get_by_role("button", name="Approve", exact=True).click()
        first.wait_for_load_state()

        # Then the page says so in plain words, and the run has resumed to completion
        assert first.get_by_role("heading", level=1).first.inner_text() == "Decision recorded"
        assert "You approved this request. The run is now completed." in first.inner_text("body")
        assert "review: done (this request)" in first.inner_text("ul.steps")
        first.screenshot(path=str(ARTIFACTS / "approval-page-decided.png"), full_page=True)
        snap = api.run(run_id)
        assert snap["status"] == "completed"
        assert snap["variables"]["review"]["comment"] == "Looks good — ship it."

        # When the second tab submits too
        second.get_by_role("button", name="Reject").click()
        second.wait_for_load_state()

        # Then it is told the request was already decided, and nothing changed
        assert second.get_by_role("heading", level=1).first.inner_text() == "Already decided"
        second.screenshot(path=str(ARTIFACTS / "approval-page-already-decided.png"), full_page=True)
        assert api.run(run_id)["status"] == "completed"
        assert console_errors == []
    finally:
        context.close()


def test_refine_asks_for_its_text_and_sends_the_run_on(api, browser):
    run_id, url = start_gated_run(api)
    context = browser.new_context(viewport=PHONE)
    try:
        page = context.new_page()
        page.goto(url)
        page.locator("summary", has_text="Request changes").click()
        page.select_option("#refine_scope", "section")
        page.fill("#refine_text", "Shorten the intro.")
        page.screenshot(path=str(ARTIFACTS / "approval-page-refine.png"), full_page=True)
        page.get_by_role("button", name="Request changes").click()
        page.wait_for_load_state()
        assert "You sent this request back for changes." in page.inner_text("body")
        assert page.get_by_role("heading", level=1).first.inner_text() == "Decision recorded"
        resolved = [e for e in api.events(run_id) if e["type"] == "interrupt.resolved"]
        assert resolved[0]["payload"]["refineFeedback"] == {"scope": "section", "text": "Shorten the intro."}
        # The run went back to revise with the feedback, and nothing was published
        snap = api.run(run_id)
        assert snap["variables"]["revise"] == {"asked": "Shorten the intro."}
        assert snap["nodeStates"]["publish"]["status"] == "skipped"
    finally:
        context.close()
