"""Every gate is a form a person answers, in a real browser (Debian's Chromium, driven by Playwright) at 390 and
1280 px (issue 28, items 1-3): the README's worked example decided through its form by pressing its "reject"
example and typing notes; a clarification answered wrongly, coming back with every value kept and each problem
beside its field; an approval's artifact edited field by field. Screenshots go to test-artifacts/. The person
answers at 390 px, where a form is tightest; each page they see is laid out and captured at both widths.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from examples.worker import worker as example
from interlude.faces.modulex.references import engine_id
from tests.support.browser import ARTIFACTS, NEEDS_CHROMIUM
from tests.support.local_stack import REPO, Api, tenant_admin_key, until, wire

pytestmark = NEEDS_CHROMIUM

WORKED = json.loads((REPO / "examples/worker/approve-before-sending.json").read_text())
DRAFT = "Echo draft: Write a reply to: the late refund"
VIEWPORTS = [{"width": 390, "height": 844}, {"width": 1280, "height": 900}]


@pytest.fixture(scope="module")
def api(stack_info: dict[str, str]) -> Api:
    """A tenant of its own: its worker's queues hold only this module's tasks, its directory names its people."""
    name = f"forms-{uuid.uuid4().hex[:8]}"
    tenant = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    assert tenant.call("PUT", "/principals/admin", {"displayName": "Alice Martin"}).status_code in (200, 201)
    return tenant


@pytest.fixture(scope="module")
def outbox(api: Api, tmp_path_factory) -> Iterator[example.Outbox]:
    """examples/worker/worker.py's worker (the echo for `llm`, the recording `send_email` tool), in a thread."""
    sent = example.Outbox(tmp_path_factory.mktemp("worker") / "outbox.jsonl")
    worker = example.build_worker(api.base_url, api.api_key, sent, wait_seconds=1)
    thread = threading.Thread(target=worker.run, kwargs={"handle_signals": False}, daemon=True)
    thread.start()
    try:
        yield sent
    finally:
        worker.stop()
        thread.join(30)


class Person:
    """One browser tab, answering at one width, failing on any console error; each page checked and captured at every
    width (one walk serves both: a walk per width decided a run per width, 36 s for the file at load 8-14)."""

    def __init__(self, browser, viewport: dict[str, int]) -> None:
        self.context = browser.new_context(viewport=viewport)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        self.viewport = viewport
        self.width = viewport["width"]

    def submit(self, button) -> None:
        """Press a submit button from the keyboard and wait for the page it answers with. (A mouse click right after
        a full-page screenshot at phone width can miss in headless Chromium; the keyboard reaches it as a person's
        would.)"""
        button.focus()
        with self.page.expect_navigation():
            self.page.keyboard.press("Enter")

    def shot(self, name: str, refused: bool = False) -> None:
        # A refused answer is a 400 page, which Chromium logs as a failed load: that one is expected.
        expected = ["Failed to load resource: the server responded with a status of 400 (Bad Request)"] if refused else []
        assert [e for e in self.errors if e not in expected] == []
        ARTIFACTS.mkdir(exist_ok=True)
        for viewport in VIEWPORTS:
            self.page.set_viewport_size(viewport)
            assert self.page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], viewport
            self.page.screenshot(path=str(ARTIFACTS / f"{name}-{viewport['width']}.png"), full_page=True)
        self.page.set_viewport_size(self.viewport)
        assert [e for e in self.errors if e not in expected] == []

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def person(browser) -> Iterator[Person]:
    tab = Person(browser, VIEWPORTS[0])
    yield tab
    tab.close()


def link(api: Api, run_id: str, node_id: str) -> str:
    got = api.call("POST", f"/runs/{wire(run_id)}/interrupts/{node_id}/tokens", {"intent": "resolve"})
    assert got.status_code == 201, got.text
    return got.json()["url"]


def register(api: Api, definition: dict[str, Any]) -> str:
    workflow_id = f"forms-{uuid.uuid4().hex[:8]}"
    assert api.put_workflow(workflow_id, definition).status_code == 201
    return workflow_id


def test_the_worked_example_is_decided_by_pressing_its_reject_example_and_typing_notes(api, outbox, person):
    started = api.call("POST", "/workflows/run", {"workflow": WORKED, "input": {"request": "the late refund", "customer_email": "ana@example.com"}})
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"].replace("~2F", "/")
    assert until(lambda: api.run(run_id)["status"] == "waiting-approval", timeout_s=60, interval_s=0.2)
    page = person.page
    page.goto(link(api, run_id, engine_id("node_approval")))
    # The message as text: its first line the title, the draft under it; the step as its author named it
    assert page.get_by_role("heading", level=1).inner_text() == "Approve sending this draft?"
    assert DRAFT in page.inner_text(".desc")
    assert "Step\nnode_approval" in page.inner_text("dl.facts")
    assert "~5F" not in page.inner_text("body")
    # Its resume_schema as fields: yes / no, unchosen; notes optional
    approved = page.get_by_role("group", name="approved")
    assert approved.get_by_label("Yes").is_checked() is False
    assert approved.get_by_label("No").is_checked() is False
    person.shot("worked-example-open")

    # When the person presses the "reject" example, the form is filled in from it, and nothing is decided
    person.submit(page.get_by_role("button", name="reject", exact=True))
    assert approved.get_by_label("No").is_checked()
    assert page.get_by_label("notes (optional)").input_value() == "Tone too casual"
    assert api.run(run_id)["status"] == "waiting-approval"
    person.shot("worked-example-filled")

    # And types notes of their own, and sends
    page.get_by_label("notes (optional)").fill("No, too casual: warmer, please.")
    person.submit(page.get_by_role("button", name="Send"))

    # Then the answer is the run's: the rejected branch ran with the notes, and nothing was sent
    assert page.get_by_role("heading", level=1).first.inner_text() == "Answer recorded"
    person.shot("worked-example-answered")
    final = until(lambda: (s := api.run(run_id))["status"] == "completed" and s, timeout_s=60, interval_s=0.2)
    assert final["variables"][engine_id("node_end_rejected")] == {"approved": False, "notes": "No, too casual: warmer, please."}
    assert [m for m in outbox.messages() if wire(m["runId"]) == wire(run_id)] == []


CLARIFY = {
    "name": "Refund questions",
    "nodes": [
        {
            "id": "ask",
            "typeId": "core.clarificationGate",
            "name": "Questions for the customer desk",
            "config": {
                "questions": [
                    {"id": "order", "question": "Which order?", "schema": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$", "description": "Two capitals, a dash, digits: AB-123"}},
                    {"id": "amount", "question": "How much to refund?", "schema": {"type": "number", "exclusiveMinimum": 0}},
                    {"id": "channel", "question": "How do we tell them?", "schema": {"enum": ["email", "phone", "letter"]}},
                    {"id": "why", "question": "Why?"},
                ]
            },
        }
    ],
    "edges": [],
}


def test_a_clarification_answered_wrongly_keeps_its_values_and_shows_each_fields_message(api, person):
    run_id = api.start(register(api, CLARIFY))["runId"]
    page = person.page
    page.goto(link(api, run_id, "ask"))
    # A required choice starts unchosen
    assert page.get_by_label("How do we tell them?").input_value() == ""
    # When the person answers two questions wrongly and sends
    page.get_by_label("Which order?").fill("ab-12")
    page.get_by_label("How much to refund?").fill("0")
    page.get_by_label("How do we tell them?").select_option("phone")
    page.get_by_label("Why?").fill("Damaged in transit")
    person.submit(page.get_by_role("button", name="Send"))

    # Then the form comes back: each message beside its field, every value as it was typed
    assert page.get_by_role("heading", name="That did not go through").is_visible()
    assert page.locator("#f0-error").inner_text() == "This is not in the form this answer needs."
    assert page.locator("#f1-error").inner_text() == "Must be more than 0."
    assert page.get_by_label("Which order?").get_attribute("aria-invalid") == "true"
    assert page.get_by_label("Which order?").input_value() == "ab-12"
    assert page.get_by_label("How much to refund?").input_value() == "0"
    assert page.get_by_label("How do we tell them?").input_value() == "phone"
    assert page.get_by_label("Why?").input_value() == "Damaged in transit"
    assert "resumeValue" not in page.inner_text("body")
    person.shot("clarification-refused", refused=True)

    # And once fixed, the answers are the run's
    page.get_by_label("Which order?").fill("AB-12")
    page.get_by_label("How much to refund?").fill("12.5")
    person.submit(page.get_by_role("button", name="Send"))
    assert page.get_by_role("heading", level=1).first.inner_text() == "Answer recorded"
    answers = api.run(run_id)["variables"]["ask"]
    assert answers == {"order": "AB-12", "amount": 12.5, "channel": "phone", "why": "Damaged in transit"}


REFUND = {
    "name": "Refunds",
    "nodes": [
        {
            "id": "review",
            "typeId": "core.approvalGate",
            "name": "Finance review",
            "config": {
                "title": "Refund Ana Lima?",
                "actions": ["accept", "reject", "edit-accept"],
                "artifactData": {"customer": {"name": "Ana Lima", "email": "ana@example.com"}, "amount": 120.5, "reason": "Damaged in transit"},
                "fieldLabels": {"customer.name": "Customer", "amount": "Amount (EUR)"},
            },
        }
    ],
    "edges": [],
}


def test_an_edit_accept_changes_one_field_of_the_artifact(api, person):
    run_id = api.start(register(api, REFUND))["runId"]
    page = person.page
    page.goto(link(api, run_id, "review"))
    # What is being decided: a table in the author's order, labelled as the gate names its fields
    table = page.locator("table.fields").first
    assert table.locator(":scope > tbody > tr > th").all_inner_texts() == ["customer", "Amount (EUR)", "reason"]
    assert "Customer" in table.inner_text()
    person.shot("edit-accept-open")

    # When the person opens "Approve with my edits", changes the amount and approves
    page.locator("summary", has_text="Approve with my edits").click()
    edits = page.locator("details", has=page.get_by_role("button", name="Approve with my edits"))
    assert edits.get_by_label("Customer").input_value() == "Ana Lima"
    edits.get_by_label("Amount (EUR)").fill("99.5")
    person.shot("edit-accept-editing")
    person.submit(edits.get_by_role("button", name="Approve with my edits"))

    # Then the edited artifact is the old one with that one field changed, in the same order
    assert "You approved this request with your edits." in page.inner_text("body")
    person.shot("edit-accept-decided")
    resolved = [e for e in api.events(run_id) if e["type"] == "interrupt.resolved"]
    edited = resolved[0]["payload"]["resumeValue"]["editedArtifactData"]
    assert edited == {"customer": {"name": "Ana Lima", "email": "ana@example.com"}, "amount": 99.5, "reason": "Damaged in transit"}
    assert list(edited) == ["customer", "amount", "reason"]


def test_a_long_word_never_widens_the_page_at_390px(browser):
    """A run id of wide letters in a banner once made the console 393 px wide at 390: every page wraps a word too
    long for its line instead (run ids are random, so some are wide)."""
    from interlude.api.console import pages

    frame = pages.Frame(subject_id="operator-abc123", tenant="demo", proof="p" * 64)
    wide = "demo/" + "WM" * 12
    notice = pages.Notice("ok", "Your vote was counted", f"review of run {wide}: the run is now waiting for another decision.")
    person = Person(browser, VIEWPORTS[0])
    try:
        person.page.set_content(pages.document("Inbox", pages.inbox(frame, [], None, notice), "n", frame, "inbox"))
        assert person.page.evaluate("document.documentElement.scrollWidth") <= person.width
    finally:
        person.close()
