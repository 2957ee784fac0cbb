"""Issue 28 over HTTP on the local stack, as a person meets it: every gate's page is a form of fields; a refused
answer comes back with what to fix beside each field and everything typed kept; steps and people by their names;
a link that leads nowhere says what became of the request and whom to ask (items 1-3 and 7).

Each test runs in a tenant of its own: its directory, settings and names are that test's.
"""

from __future__ import annotations

import html
import re
import time
import uuid
from typing import Any
from urllib.parse import quote

import pytest
import requests

from interlude.faces.modulex.references import engine_id
from tests.support.console import Console
from tests.support.local_stack import Api, run_cli, tenant_admin_key, until, wire
from tests.support.modulex_example import worked_example

# A ModuleX node by its engine id in the API's paths (they take the author's too: test_the_apis_paths_take_…).
APPROVAL_NODE = engine_id("node_approval")
PROOF = re.compile(r'name="csrf" value="([^"]+)"')
HTML = {"Accept": "text/html"}


@pytest.fixture
def api(stack_info: dict[str, str]) -> Api:
    name = f"moment-{uuid.uuid4().hex[:8]}"
    tenant = Api(stack_info["baseUrl"], tenant_admin_key(stack_info, name), name)
    # The key's subject is `admin`: the directory names the person.
    assert tenant.call("PUT", "/principals/admin", {"displayName": "Alice Martin"}).status_code in (200, 201)
    return tenant


class LinkPage:
    """A person with a link: opens it and posts its forms as a browser would (cookie and form proof)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()

    def open(self) -> requests.Response:
        return self.session.get(self.url, headers=HTML, timeout=30)

    def post(self, form: dict[str, Any]) -> requests.Response:
        proof = PROOF.search(self.open().text)
        assert proof, "the page has no form"
        return self.session.post(self.url, data={"csrf": proof.group(1), **form}, headers=HTML, timeout=30)


def register(api: Api, definition: dict[str, Any]) -> str:
    workflow_id = f"moment-{uuid.uuid4().hex[:8]}"
    got = api.put_workflow(workflow_id, definition)
    assert got.status_code == 201, got.text
    return workflow_id


def link(api: Api, run_id: str, node_id: str, **mint: Any) -> str:
    got = api.call("POST", f"/runs/{wire(run_id)}/interrupts/{node_id}/tokens", {"intent": "resolve", **mint})
    assert got.status_code == 201, got.text
    return got.json()["url"]


def text_of(markup: str) -> str:
    """What a person reads: the markup's text, without the style sheet or what is folded away (the console's
    event payloads, shown as recorded on demand)."""
    body = re.sub(r"<details>.*?</details>", " ", markup[markup.index("<body>") :], flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


APPROVAL = {
    "name": "Refunds",
    "nodes": [
        {
            "id": "review",
            "typeId": "core.approvalGate",
            "name": "Finance review",
            "config": {
                "title": "Refund Ana Lima?",
                "actions": ["accept", "reject"],
                "artifactData": {"customer": "Ana Lima", "amount": 120.5},
                "overridePrincipals": ["bob"],
            },
        }
    ],
    "edges": [],
}
CLARIFY = {
    "nodes": [
        {
            "id": "ask",
            "typeId": "core.clarificationGate",
            "config": {
                "questions": [
                    {"id": "order", "question": "Which order?", "schema": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$"}},
                    {"id": "amount", "question": "How much to refund?", "schema": {"type": "number", "exclusiveMinimum": 0}},
                    {"id": "why", "question": "Why?"},
                ]
            },
        }
    ],
    "edges": [],
}


# -- item 2: a refused answer keeps what was typed -------------------------------------------------------------


def test_a_clarification_answered_wrongly_keeps_its_values_and_says_what_to_fix_beside_each_field(api: Api) -> None:
    run_id = api.start(register(api, CLARIFY))["runId"]
    person = LinkPage(link(api, run_id, "ask"))
    # When an order number in the wrong form and a zero amount are sent
    refused = person.post({"f0": ["ab-12"], "f1": ["0"], "f2": ["Damaged in transit"], "action": "submit"})
    # Then the same form comes back, each problem beside its field, every value as it was typed
    assert refused.status_code == 400
    page = refused.text
    assert '<p class="field-error" id="f0-error">This is not in the form this answer needs.</p>' in page
    assert '<p class="field-error" id="f1-error">Must be more than 0.</p>' in page
    assert 'value="ab-12"' in page
    assert 'value="0"' in page
    assert ">Damaged in transit</textarea>" in page
    for word in ("resumeValue", "resumeSchema", "is not valid under", "does not match"):
        assert word not in page
    assert api.run(run_id)["status"] == "waiting-input"
    # And once fixed, the answer is the run's, typed as the questions' schemas say
    assert person.post({"f0": ["AB-12"], "f1": ["12.5"], "f2": ["Damaged in transit"], "action": "submit"}).status_code == 200
    assert api.run(run_id)["variables"]["ask"] == {"order": "AB-12", "amount": 12.5, "why": "Damaged in transit"}


def test_the_console_fills_a_gate_from_its_example_and_keeps_a_refused_answer(api: Api) -> None:
    started = api.call("POST", "/workflows/run", {"workflow": worked_example(), "input": {"request": "the refund"}}).json()
    run_id = started["run_id"].replace("~2F", "/")
    console = Console(api).signed_in(api.api_key)
    decide = f"/console/runs/{wire(run_id)}/interrupts/{quote(APPROVAL_NODE, safe='')}"
    # An example pressed fills the gate's form in the inbox, and decides nothing
    filled = console.post(decide, {"csrf": console.proof(), "back": "inbox", "example": "1"})
    assert filled.status_code == 200
    assert 'id="inbox-0-f0-1" name="f0" value="false" checked' in filled.text
    assert ">Tone too casual</textarea>" in filled.text
    assert "Filled in from “reject”" in filled.text
    # An answer without its required yes / no comes back with the reason beside it and the notes kept
    refused = console.post(decide, {"csrf": console.proof(), "back": "inbox", "action": "submit", "f1": "kept as typed"})
    assert refused.status_code == 400
    assert '<p class="field-error" id="inbox-0-f0-error">Please answer this.</p>' in refused.text
    assert ">kept as typed</textarea>" in refused.text
    assert api.run(run_id)["status"] == "waiting-approval"


# -- item 3: names, not ids ---------------------------------------------------------------------------------------


def test_a_modulex_interrupt_is_a_form_with_its_steps_named_as_their_author_wrote_them(api: Api) -> None:
    workflow = worked_example()
    for node in workflow["nodes"]:
        node.pop("name")  # as in examples/worker/approve-before-sending.json: the ids are all a person can be shown
    workflow["metadata"].pop("name")
    started = api.call("POST", "/workflows/run", {"workflow": workflow, "input": {"request": "the refund"}})
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"].replace("~2F", "/")
    url = link(api, run_id, APPROVAL_NODE)
    page = LinkPage(url).open().text
    read = text_of(page)
    assert "<h1>Approve sending this draft?</h1>" in page
    assert "Dear customer, about the refund: it is done." in read
    assert "Step node_approval" in read
    assert "node_draft: done" in read
    assert "Workflow" not in read  # an unnamed inline definition: its id is a hash, never shown
    for residue in ("~5F", "modulex", "Input requested", "resume_schema", "JSON"):
        assert residue not in read, residue
    assert 'name="example" value="1"' in page


def test_the_console_names_steps_workflows_and_deciders(api: Api) -> None:
    workflow = worked_example()
    started = api.call("POST", "/workflows/run", {"workflow": workflow, "input": {"request": "the refund"}}).json()
    run_id = started["run_id"].replace("~2F", "/")
    assert api.resolve(run_id, APPROVAL_NODE, {"approved": False, "notes": "Tone too casual"}).status_code == 200
    console = Console(api).signed_in(api.api_key)
    run_page = text_of(console.get(f"/console/runs/{wire(run_id)}").text)
    assert "Approval: done" in run_page
    assert "Decided · Approval" in run_page
    assert "by Alice Martin" in run_page
    assert "Approve before sending (version" in run_page
    assert "~5F" not in run_page, run_page[max(0, run_page.find("~5F") - 300) : run_page.find("~5F") + 100]


def test_votes_on_an_open_gate_name_the_voter_on_the_console_and_in_the_cli(api: Api) -> None:
    quorum = {"nodes": [{**APPROVAL["nodes"][0], "config": {**APPROVAL["nodes"][0]["config"], "requiredApprovals": 2}}], "edges": []}
    assert api.call("PUT", "/principals/bob", {"displayName": "Bob Stone"}).status_code in (200, 201)
    bob = api.new_key(["approvals:respond", "runs:read"], subject="bob")
    run_id = api.start(register(api, quorum))["runId"]
    assert api.resolve(run_id, "review", {"action": "accept"}, key=bob).status_code == 200
    assert api.run(run_id)["status"] == "waiting-approval"  # one vote of two
    console = Console(api).signed_in(api.api_key)
    for page in (console.get(f"/console/runs/{wire(run_id)}").text, console.get("/console/inbox").text):
        start = page.index("<caption>Votes")
        votes = text_of("<body>" + page[start : page.index("</table>", start)])
        assert "Who Decision When Surface Bob Stone approved " in votes
        assert "|" not in votes
        assert "urn:" not in votes
    shown = run_cli("runs", "show", run_id, "--url", api.base_url, "--key", api.api_key).stdout
    assert "Bob Stone approved" in shown  # by the directory's name (the admin key may read it), the vote in words
    assert "|" not in shown.split("OPEN GATE", 1)[1]


def test_the_apis_paths_take_a_modulex_node_id_as_its_author_wrote_it(api: Api) -> None:
    started = api.call("POST", "/workflows/run", {"workflow": worked_example(), "input": {"request": "the refund"}}).json()
    run_id = started["run_id"].replace("~2F", "/")
    # A link by the id in the definition, not the engine's escaped one; the CLI's links too
    assert api.call("GET", f"/runs/{wire(run_id)}/interrupts/node_approval").status_code == 200
    endpoint = ("--url", api.base_url, "--key", api.api_key)
    assert run_cli("links", "mint", run_id, "node_approval", "--for", "admin", *endpoint).stdout.startswith(api.base_url)
    assert api.resolve(run_id, "node_approval", {"approved": False, "notes": "Tone too casual"}).status_code == 200
    assert api.run(run_id)["status"] != "waiting-approval"
    # The engine's id names the same gate, now decided
    assert api.resolve(run_id, APPROVAL_NODE, {"approved": True}).json()["error"] == "interrupt_already_resolved"
    assert api.resolve(run_id, "node_nowhere", {"approved": True}).status_code == 404


def test_the_cli_tables_name_modulex_steps_as_their_author_wrote_them(api: Api) -> None:
    started = api.call("POST", "/workflows/run", {"workflow": worked_example(), "input": {"request": "the refund"}}).json()
    run_id = started["run_id"].replace("~2F", "/")
    endpoint = ("--url", api.base_url, "--key", api.api_key)
    shown = run_cli("runs", "show", run_id, *endpoint).stdout
    assert "status    waiting for a decision at node_approval" in shown
    assert "node_draft " in shown
    inbox = run_cli("inbox", *endpoint).stdout
    assert "node_approval" in inbox
    assert "Approve sending this draft?" in inbox
    listed = run_cli("runs", "list", *endpoint).stdout
    assert "node_approval" in listed
    for table in (shown, inbox, listed):
        assert "~5F" not in table
        assert "modulex.interrupt" not in table


# -- item 7: dead ends become next steps ------------------------------------------------------------------------


def test_an_expired_link_names_the_request_and_whom_to_ask(api: Api) -> None:
    assert api.call("PUT", "/principals/bob", {"displayName": "Bob Stone"}).status_code in (200, 201)
    assert api.call("PUT", "/tenant/settings", {"overridePrincipals": ["carol"]}).status_code == 200
    run_id = api.start(register(api, APPROVAL))["runId"]
    url = link(api, run_id, "review", lifetimeSeconds=1)
    time.sleep(1.2)  # a real second: the session stack's clock is shared, so it is not moved here
    got = requests.get(url, headers=HTML, timeout=30)
    assert got.status_code == 410
    read = text_of(got.text)
    assert "This link has expired" in read
    assert "This link to “Refund Ana Lima?” stopped working on " in read
    assert (
        "The request is still open: for a new link, ask Alice Martin, who asked for this decision; or Bob Stone or "
        "carol, who may decide it in anyone's place." in read
    )
    assert "<h1>Refund Ana Lima?</h1>" in got.text


def test_a_link_to_a_gate_that_timed_out_says_when_and_that_it_was_rejected_automatically(api: Api) -> None:
    # Long enough for the link to be minted while the gate is open on a loaded machine (a closed gate's mint is a 409).
    timed = {**APPROVAL, "nodes": [{**APPROVAL["nodes"][0], "config": {**APPROVAL["nodes"][0]["config"], "timeoutMs": 3000}}]}
    run_id = api.start(register(api, timed))["runId"]
    url = link(api, run_id, "review")
    assert until(lambda: api.run(run_id)["status"] == "failed", timeout_s=60, interval_s=0.2)
    read = text_of(requests.get(url, headers=HTML, timeout=30).text)
    assert "Timed out" in read
    assert re.search(r"Nobody decided in time: this request timed out on \w+ \d+ \w+ \d{4}, \d\d:\d\d UTC and was rejected automatically", read)
    assert "Finance review: timed out, rejected automatically" in read
    assert "failed" not in read


def test_a_link_to_a_cancelled_run_says_who_cancelled_it_and_why(api: Api) -> None:
    run_id = api.start(register(api, APPROVAL))["runId"]
    url = link(api, run_id, "review")
    assert api.call("POST", f"/runs/{wire(run_id)}/cancel", {"reason": "the customer withdrew"}).status_code == 200
    got = requests.get(url, headers=HTML, timeout=30)
    assert got.status_code == 409
    read = text_of(got.text)
    assert re.search(r"This request was withdrawn: its run was cancelled by Alice Martin on .+?: “the customer withdrew”\. Nothing was changed\.", read)
    assert "<h1>Refund Ana Lima?</h1>" in got.text
    assert "Finance review: withdrawn, the run was cancelled" in read


def test_a_reopened_link_shows_the_title_the_decision_its_comment_and_who_decided(api: Api) -> None:
    run_id = api.start(register(api, APPROVAL))["runId"]
    person = LinkPage(link(api, run_id, "review"))
    decided = person.post({"action": "reject", "feedback": "The amount is wrong"})
    assert decided.status_code == 200
    # A rejection is a decision: never "failed" in red where the run stands
    assert "Finance review: rejected by Alice Martin: The amount is wrong" in text_of(decided.text)
    assert "s-failed" not in decided.text[decided.text.index("<body>") :]
    reopened = person.open()
    assert reopened.status_code == 409
    read = text_of(reopened.text)
    assert "<h1>Refund Ana Lima?</h1>" in reopened.text
    assert re.search(r"Alice Martin rejected this request on .+?: “The amount is wrong”\. Nothing was changed\. The run stopped at this step\.", read)
