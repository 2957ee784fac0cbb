"""The operator console's pure parts: the signed session cookie and its form proofs, and the pages' markup."""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import re

from interlude.api.console import pages, readable
from interlude.api.console import session as sessions
from interlude.api.console.pages import Frame, Notice, RunView
from interlude.api.console.routes import any_dead_notice
from interlude.api.page.graph import GraphNode
from interlude.api.page.names import Names
from interlude.rules.interrupts.payloads import approval_resume_schema

SECRET = b"s" * 32
OTHER = b"o" * 32
NOW = 1_800_000_000
HOSTILE = '<script>alert("x")</script>&\'"'
SUBJECT = {"issuer": "urn:interlude:api-key", "subjectId": "ana", "tenant": "acme", "lane": "api-key", "kind": "user"}
FRAME = Frame(subject_id="ana", tenant="acme", proof="p" * 64)


def a_session(now: int = NOW) -> sessions.Session:
    return sessions.new_session("0123456789abcdef", "acme", SUBJECT, frozenset({"runs:read", "keys:admin"}), now)


def body_of(cookie: str) -> dict:
    body = cookie.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


# -- the session cookie ---------------------------------------------------------------------------------


def test_a_sealed_session_opens_with_the_ring_that_signed_it():
    made = a_session()
    cookie = sessions.seal(made, "k1", SECRET)
    assert sessions.unseal(cookie, {"k1": SECRET}, NOW + 10) == made


def test_the_session_carries_the_keys_tenant_subject_and_scopes_and_nothing_more():
    cookie = sessions.seal(a_session(), "k1", SECRET)
    claims = body_of(cookie)
    # Key id (to re-check revocation), tenant, subject, scopes, issued/expiry and the CSRF nonce: no secret.
    assert set(claims) == {"k", "t", "s", "sc", "iat", "exp", "n"}
    assert claims["s"] == SUBJECT
    assert claims["sc"] == ["keys:admin", "runs:read"]
    assert claims["exp"] - claims["iat"] == sessions.SESSION_TTL_S
    assert "il_" not in cookie


def test_a_session_ends_when_it_expires():
    cookie = sessions.seal(a_session(), "k1", SECRET)
    assert sessions.unseal(cookie, {"k1": SECRET}, NOW + sessions.SESSION_TTL_S) is None


def test_an_altered_session_does_not_open():
    cookie = sessions.seal(a_session(), "k1", SECRET)
    kid, body, mac = cookie.split(".")
    claims = body_of(cookie)
    claims["sc"].append("workflows:write")
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert sessions.unseal(f"{kid}.{forged}.{mac}", {"k1": SECRET}, NOW) is None
    # Its first character changed (one that carries six bits of the tag: "…AA" at the end was, once in 4,096 nonces,
    # the tag itself, and a last character's low bits are padding)
    altered = ("B" if mac[0] == "A" else "A") + mac[1:]
    assert sessions.unseal(f"{kid}.{body}.{altered}", {"k1": SECRET}, NOW) is None


def test_a_session_signed_by_another_or_retired_kid_does_not_open():
    cookie = sessions.seal(a_session(), "k1", SECRET)
    assert sessions.unseal(cookie, {"k1": OTHER}, NOW) is None
    assert sessions.unseal(cookie, {"k2": SECRET}, NOW) is None


def test_malformed_cookies_do_not_open():
    for cookie in (None, "", "k1", "k1..", "k1.a.b.c", "bad kid.a.b", "k1.!!.??", "x" * 5000):
        assert sessions.unseal(cookie, {"k1": SECRET}, NOW) is None


def test_the_form_proof_belongs_to_one_session():
    one, two = a_session(), a_session()
    proof = sessions.form_proof(SECRET, one)
    assert sessions.form_proof_ok(SECRET, one, proof)
    assert not sessions.form_proof_ok(SECRET, two, proof)
    assert not sessions.form_proof_ok(OTHER, one, proof)
    assert not sessions.form_proof_ok(SECRET, one, None)
    assert not sessions.form_proof_ok(SECRET, one, "not-hex")


def test_the_sign_in_proof_belongs_to_the_browsers_pre_session_cookie():
    pre = sessions.pre_session(None)
    proof = sessions.sign_in_proof("k1", SECRET, pre)
    assert sessions.sign_in_proof_ok({"k1": SECRET}, pre, proof)
    assert not sessions.sign_in_proof_ok({"k1": SECRET}, sessions.pre_session(None), proof)
    assert not sessions.sign_in_proof_ok({"k2": SECRET}, pre, proof)
    assert not sessions.sign_in_proof_ok({"k1": SECRET}, None, proof)
    assert sessions.pre_session(pre) == pre
    assert sessions.pre_session("short") != "short"


# -- pages ------------------------------------------------------------------------------------------------


def approval_item(title: str = HOSTILE) -> dict:
    actions = ["accept", "reject", "refine"]
    return {
        "interruptId": "i1",
        "runId": "acme/r-1234567890abcdefghij",
        "nodeId": "review",
        "workflowId": "wf",
        "kind": "approval",
        "raisedAt": "2026-12-01T10:00:00Z",
        "payload": {
            "kind": "approval",
            "key": "k",
            "data": {
                "artifactId": "a",
                "artifactType": "doc",
                "title": title,
                "description": HOSTILE,
                "actions": actions,
            },
            "resumeSchema": approval_resume_schema(actions),
        },
        "votes": [{"principal": "urn:x|bo<b>", "action": "accept", "at": "2026-12-01T10:01:00Z", "surface": "console"}],
    }


def test_inbox_escapes_everything_from_a_payload_and_offers_the_gates_actions():
    markup = pages.inbox(FRAME, [approval_item()], None, None)
    assert "<script>" not in markup
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in markup
    assert "bo&lt;b&gt;" in markup
    assert 'action="/console/runs/acme~2Fr-1234567890abcdefghij/interrupts/review"' in markup
    assert re.findall(r'name="action" value="(\w[\w-]*)"', markup) == ["accept", "reject", "refine"]
    # Every form that posts carries the session's proof (the filters are a GET).
    assert markup.count('name="csrf"') == markup.count('<form method="post"') == markup.count("<form") - 1


def test_pages_carry_no_script_and_no_inline_style():
    view = RunView(
        snapshot={"runId": "acme/r-1", "workflowId": "wf", "status": "waiting-approval", "extensions": {}},
        nodes=[GraphNode("a", "core.noop", "completed"), GraphNode("review", "core.approvalGate", "suspended")],
        edges=[("a", "review")],
        open_interrupts={"review": {**approval_item(), "mayDecide": True}},
        events=[{"sequence": 0, "type": "run.started", "timestamp": "t", "payload": {"x": HOSTILE}}],
        more_events_after=None,
        deliveries=[],
    )
    for markup in (
        pages.document("t", pages.run(FRAME, view, Notice("ok", HOSTILE)), "nonce", FRAME, "runs"),
        pages.document("t", pages.sign_in("proof"), "nonce", None),
        pages.document("t", pages.keys(FRAME, [], None, None, {"apiKey": HOSTILE}, ["runs:read"]), "nonce", FRAME),
    ):
        assert "<script" not in markup
        assert " style=" not in markup
        assert markup.count("<style") == 1
        assert '<style nonce="nonce">' in markup


def test_a_timeline_entry_reads_as_words():
    resolved = {
        "type": "interrupt.resolved",
        "nodeId": "review",
        "payload": {
            "kind": "approval",
            "action": "accept",
            "decision": "granted",
            "resolvedBy": {"subjectId": "ana"},
            "resumeValue": {"action": "accept", "comment": "fine", "decidedBy": "ana"},
        },
    }
    assert (
        readable.event_summary(resolved, None, {"ana": "Ana Lima"}) == "Decided · review · Approved by Ana Lima: fine"
    )
    failed = {"type": "node.failed", "nodeId": "call", "payload": {"error": {"message": "timed out"}}}
    assert readable.event_summary(failed) == "Step failed · call · timed out"
    timed_out = {"type": "interrupt.resolved", "nodeId": "review", "payload": {"kind": "approval", "reason": "timeout"}}
    assert readable.event_summary(timed_out) == "Decided · review · Rejected automatically: nobody decided in time"


def run_view(**overrides) -> RunView:
    fields = {
        "snapshot": {"runId": "acme/r-1", "workflowId": "wf", "status": "waiting-approval", "extensions": {}},
        "nodes": [GraphNode("a", "core.noop", "completed"), GraphNode("review", "core.approvalGate", "suspended")],
        "edges": [("a", "review")],
        "open_interrupts": {},
        "events": [],
        "more_events_after": None,
        "deliveries": [],
    }
    return RunView(**{**fields, **overrides})


# What the protocol calls things: never on a page.
PROTOCOL_WORDS = (
    "nodeId",
    "interruptId",
    "resumeSchema",
    "resumeValue",
    "resolvedBy",
    "artifactData",
    "decidedBy",
    "{&#34;",
    '{"',
)


def test_a_timeline_shows_each_payload_as_readable_fields_never_as_json():
    requested = {
        "kind": "approval",
        "key": "k",
        "data": {"title": "Refund?", "artifactData": {"amount": 2150, "currency": "EUR"}, "actions": ["accept"]},
        "resumeSchema": approval_resume_schema(["accept"]),
    }
    events = [
        {
            "sequence": 0,
            "type": "run.started",
            "timestamp": "t",
            "payload": {"workflowId": "wf", "inputs": {"customer": "Ana"}},
        },
        {"sequence": 1, "type": "interrupt.requested", "nodeId": "review", "timestamp": "t", "payload": requested},
        {
            "sequence": 2,
            "type": "interrupt.resolved",
            "nodeId": "review",
            "timestamp": "t",
            "payload": {
                "nodeId": "review",
                "interruptId": "i",
                "kind": "approval",
                "action": "accept",
                "resolvedBy": {"subjectId": "bo"},
                "resumeValue": {"action": "accept", "decidedBy": "bo", "decidedAt": "t"},
            },
        },
        {
            "sequence": 3,
            "type": "node.completed",
            "nodeId": "a",
            "timestamp": "t",
            "payload": {"nodeId": "a", "outputs": {"sum": 3}},
        },
    ]
    markup = pages.run(FRAME, run_view(events=events), None)
    timeline = markup[markup.index('<ol class="timeline">') :]
    for word in PROTOCOL_WORDS:
        assert word not in timeline, word
    assert "<summary>What you are approving</summary>" in timeline
    assert '<th scope="row">amount</th><td>2150</td>' in timeline
    assert "<summary>Inputs</summary>" in timeline
    assert '<th scope="row">customer</th><td>Ana</td>' in timeline
    assert "Approved by bo" in timeline
    # Each step's events lead to its input and output
    assert 'href="/console/runs/acme~2Fr-1?step=review#io"' in timeline


def test_the_run_page_shows_the_runs_input_and_output_and_a_chosen_steps():
    snapshot = {
        "runId": "acme/r-1",
        "workflowId": "wf",
        "status": "completed",
        "inputs": {"customer": "Ana"},
        "variables": {"a": {"sum": 3}},
        "extensions": {},
    }
    whole = pages.run(FRAME, run_view(snapshot=snapshot), None)
    panel = whole[whole.index('id="io"') : whole.index("Open gates")]
    assert "Input and output of the run" in panel
    assert '<th scope="row">customer</th><td>Ana</td>' in panel
    assert "Results" in panel
    assert '<th scope="row">sum</th><td>3</td>' in panel
    # The graph's boxes and the list of steps lead to each step's panel
    assert whole.count('href="/console/runs/acme~2Fr-1?step=a#io"') == 2

    step = readable.StepInputs(asked=None, bound={"amount": 5}, output={"sum": 3}, error=None)
    chosen = pages.run(FRAME, run_view(snapshot=snapshot, selected="a", step=step), None)
    panel = chosen[chosen.index('id="io"') : chosen.index("Open gates")]
    assert "Input and output of a" in panel
    assert "This step is done." in panel
    assert '<th scope="row">amount</th><td>5</td>' in panel
    assert '<th scope="row">sum</th><td>3</td>' in panel
    assert '<g class="node s-completed chosen">' in chosen
    assert "Its inputs, as the run stands now" in panel  # none recorded at its start: bound from the run now

    # Inputs its start recorded are shown as that start's; inputs too large to keep, by their size
    recorded = readable.StepInputs(asked=None, bound={"amount": 4}, output=None, error=None, recorded=True)
    panel = pages.run(FRAME, run_view(snapshot=snapshot, selected="a", step=recorded), None)
    assert "Its inputs when it started" in panel
    assert '<th scope="row">amount</th><td>4</td>' in panel
    too_large = readable.StepInputs(asked=None, bound=None, output=None, error=None, recorded=True, too_large=3210)
    panel = pages.run(FRAME, run_view(snapshot=snapshot, selected="a", step=too_large), None)
    assert "3,210 bytes when it started: too large to keep, so not shown" in panel


def test_a_failed_runs_error_is_the_first_thing_in_its_summary():
    snapshot = {
        "runId": "acme/r-1",
        "workflowId": "wf",
        "status": "failed",
        "error": {"code": "node_failed", "message": "the refund service said 503"},
        "extensions": {"interlude.run": {"failedNodeId": "a"}},
    }
    markup = pages.run(FRAME, run_view(snapshot=snapshot), None)
    summary = markup[markup.index("<h2>Summary</h2>") :]
    assert summary.index("Failed at a: the refund service said 503") < summary.index("<dt>Status</dt>")


def test_a_delegated_vote_names_the_delegate_who_cast_it():
    markup = pages.votes_table([{"principal": "urn:x|ana", "castBy": "urn:x|bo", "action": "accept", "surface": "run"}])
    assert "ana (cast by bo)" in markup
    assert "urn:x" not in markup
    # By name where the directory gives one
    named = pages.vote_rows(
        [{"principal": "urn:x|ana", "castBy": "urn:x|bo", "action": "accept"}], {"ana": "Ana Lima", "bo": "Bo Berg"}
    )
    assert named[0][0] == "Ana Lima (cast by Bo Berg)"
    assert named[0][1] == "approved"  # the decision in words, not the protocol's `accept`
    assert "cast by" not in pages.votes_table([{"principal": "urn:x|ana", "action": "accept"}])


def test_an_inbox_item_decided_as_a_delegate_says_on_whose_behalf():
    markup = pages.inbox(FRAME, [{**approval_item("Ship?"), "onBehalfOf": ["ana", "bo<b>"]}], None, None)
    assert "<dt>On behalf of</dt><dd>ana, bo&lt;b&gt;</dd>" in markup
    named = pages.inbox(FRAME, [{**approval_item("Ship?"), "onBehalfOf": ["ana", "bo"]}], None, None, people={"ana": "Ana Lima"})
    assert "<dt>On behalf of</dt><dd>Ana Lima, bo</dd>" in named  # as the directory names them
    assert "On behalf of" not in pages.inbox(FRAME, [approval_item("Ship?")], None, None)


def test_a_run_page_lists_who_was_notified_and_how():
    view = RunView(
        snapshot={"runId": "acme/r-1", "workflowId": "wf", "status": "waiting-approval", "extensions": {}},
        nodes=[],
        edges=[],
        open_interrupts={},
        events=[],
        more_events_after=None,
        deliveries=[],
        notifications=[{"principalId": "ana", "purpose": "asked", "channel": "email", "outcome": "sent", "at": "t"}],
    )
    markup = pages.run(FRAME, view, None)
    assert "Who was told, how" in markup
    assert '<td role="cell" data-label="Channel">email</td>' in markup


def test_each_inbox_item_shows_the_runs_inputs_when_it_is_due_and_who_may_still_vote():
    item = approval_item("Refund?")
    item["payload"]["data"].update(requiredApprovals=2, approversList=["ana", "bo"], approverGroupRefs=["finance"])
    item["votes"] = [{"principal": "urn:x|ana", "action": "accept", "at": "t", "surface": "console"}]
    context = pages.RunContext(
        Names("Refunds"), {"amount": 2150, "currency": "EUR"}, {"review": "2026-12-06T10:00:00Z"}
    )
    markup = pages.inbox(FRAME, [item], None, None, {item["runId"]: context}, people={"bo": "Bo Berg"})
    entry = markup[markup.index('aria-labelledby="item-0"') :]
    assert "The run's inputs" in entry
    assert '<th scope="row">amount</th><td>2150</td>' in entry
    assert "<dt>Due</dt><dd>2026-12-06T10:00:00Z</dd>" in entry
    assert "<dt>May still vote</dt><dd>Bo Berg, anyone in group finance (1 more approval needed)</dd>" in entry
    # The inputs sit before the form that decides
    assert entry.index("The run's inputs") < entry.index("<form")


def test_the_inbox_filters_by_kind_workflow_and_claim_and_keeps_the_services_order():
    older = {**approval_item("Older"), "raisedAt": "2026-12-01T09:00:00Z", "runId": "acme/r-old"}
    newer = {**approval_item("Newer"), "raisedAt": "2026-12-01T11:00:00Z", "runId": "acme/r-new"}
    # The inbox service orders the whole inbox (store/inbox.py): a page shows its items as they come.
    markup = pages.inbox(FRAME, [older, newer], None, None, query=pages.InboxQuery(sort="oldest"), kinds=["approval"])
    assert re.findall(r'<h2 id="item-\d+">(\w+)</h2>', markup) == ["Older", "Newer"]
    query = pages.InboxQuery(kind="approval", workflow_id="refunds", sort="due", claim="unclaimed")
    assert query.filters() == {"kind": "approval", "workflowId": "refunds", "claim": "unclaimed", "sort": "due"}
    assert pages.InboxQuery().filters() == {}
    markup = pages.inbox(
        FRAME, [], "c1", None, query=query, kinds=["approval", "conversation.start", "conversation.close"]
    )
    assert '<option value="approval" selected>Approval request</option>' in markup
    assert '<option value="unclaimed" selected>Nobody works it</option>' in markup
    assert "Conversation (start)" in markup
    assert "Conversation (close)" in markup
    assert 'href="/console/inbox?kind=approval&amp;workflowId=refunds&amp;sort=due&amp;claim=unclaimed&amp;cursor=c1"' in markup
    assert "Nothing is waiting for you that matches." in markup


def test_the_notification_log_says_why_each_person_was_told_and_what_came_of_it():
    view = run_view(
        notifications=[
            {
                "principalId": "ana",
                "purpose": "reminder-1",
                "channel": "email",
                "outcome": "failed",
                "errorClass": "timeout",
                "at": "t",
            },
            {
                "principalId": "bo",
                "purpose": "raised",
                "channel": None,
                "outcome": "skipped",
                "reason": "no_channel",
                "at": "t",
            },
            {"principalId": "cy", "purpose": "escalation", "channel": "slack", "outcome": "sent", "at": "t"},
        ],
        people={"ana": "Ana Lima"},
    )
    markup = pages.run(FRAME, view, None)
    rows = re.findall(r"<tr role=\"row\">(.*?)</tr>", markup[markup.index("Who was told, how") :])
    cells = [found for r in rows if (found := re.findall(r'data-label="[^"]+">([^<]*)</td>', r))]
    assert cells == [
        ["t", "Ana Lima", "Reminder 1: not decided yet", "email", "Failed (no answer in time)"],
        ["t", "bo", "Asked to decide", "—", "Not sent: the directory has no way to reach them"],
        ["t", "cy", "Escalated: nobody decided in time", "slack", "Sent"],
    ]


def test_an_inbox_item_says_who_works_it_and_offers_claiming_releasing_and_assigning():
    item = approval_item("Refund?")
    free = pages.inbox(FRAME, [item], None, None, {item["runId"]: pages.RunContext(Names("wf"))}, may_claim=True)
    assert 'action="/console/runs/acme~2Fr-1234567890abcdefghij/interrupts/review/claim"' in free
    assert "/release" not in free
    assert '<label for="inbox-0-assignee">' in free

    worked = {item["runId"]: pages.RunContext(Names("wf"), assignees={"review": ("bo", "ana")})}
    markup = pages.inbox(FRAME, [item], None, None, worked, people={"bo": "Bo Berg"}, may_claim=True)
    assert "Assigned to Bo Berg by ana" in markup
    assert "/claim" not in markup
    # ana assigned it, so she may release it
    assert 'action="/console/runs/acme~2Fr-1234567890abcdefghij/interrupts/review/release"' in markup
    mine = {item["runId"]: pages.RunContext(Names("wf"), assignees={"review": ("ana", "ana")})}
    assert "Claimed by ana" in pages.inbox(FRAME, [item], None, None, mine, may_claim=True)


def test_the_runs_page_asks_the_run_searchs_filters_and_keeps_what_was_asked():
    rows = [{"runId": "acme/r-1", "workflowId": "wf", "status": "running", "startedAt": "t", "tags": ["eu", "vip"]}]
    asked = {"tags": "eu", "status": "running,failed", "createdAfter": "2026-12-05T10:00"}
    markup = pages.runs(FRAME, pages.RunsView(rows, "c1", asked, ("customer",)), None)
    assert 'name="tags" value="eu"' in markup
    assert 'value="running" checked' in markup
    assert 'value="failed" checked' in markup
    assert 'name="createdAfter" value="2026-12-05T10:00"' in markup
    assert '<label for="f-m-0">customer is</label>' in markup
    assert 'name="metadata.customer" value=""' in markup
    assert '<td role="cell" data-label="Tags">eu, vip</td>' in markup
    assert "tags=eu&amp;status=running%2Cfailed&amp;createdAfter=2026-12-05T10%3A00&amp;cursor=c1" in markup


def test_the_runs_page_names_each_workflow_and_offers_the_tenants_workflows_by_name():
    rows = [
        {"runId": "acme/r-1", "workflowId": "refund-eu", "workflowName": "Refunds", "status": "running", "startedAt": "t"},
        {"runId": "acme/r-2", "workflowId": "mx~3Aabc", "workflowName": None, "status": "running", "startedAt": "t"},
    ]
    choices = (("refund-eu", "Refunds"), ("plain", "plain"))
    markup = pages.runs(FRAME, pages.RunsView(rows, None, {"workflowId": "refund-eu"}, (), workflows=choices), None)
    cells = re.findall(r'<td role="cell" data-label="Workflow">(.*?)</td>', markup)
    assert cells == ['Refunds <span class="muted mono">refund-eu</span>', "An unnamed workflow"]
    assert '<label for="f-workflow">Workflow</label>' in markup
    assert '<option value="refund-eu" selected>Refunds (refund-eu)</option>' in markup
    assert '<option value="plain">plain</option>' in markup
    assert "Workflow id" not in markup
    inbox = pages.inbox(FRAME, [], None, None, query=pages.InboxQuery(workflow_id="plain"), workflows=choices)
    assert '<option value="plain" selected>plain</option>' in inbox
    assert "Workflow id" not in inbox
    # Too many workflows to offer: a text field, labelled in words all the same.
    typed = pages.runs(FRAME, pages.RunsView(rows, None, {"workflowId": "x"}, ()), None)
    assert '<input type="text" id="f-workflow" name="workflowId" value="x">' in typed


# -- no JSON, no protocol names on a console page (issue 29: audit rows, links made, a workflow's definition) ----------

JSON_SIGNS = ("{&#34;", '{"', "<pre>", "&#34;:", '":')


def text_of(markup: str) -> str:
    """What a person reads: the markup without its tags and attributes."""
    return re.sub(r"<[^>]*>", " ", markup)


def test_audit_entries_read_as_sentences_and_labelled_fields_never_as_json():
    entries = [
        {
            "chain": 3,
            "seq": 7,
            "at": "2026-12-05T10:00:00Z",
            "action": "interrupt.decided",
            "actor": {"subjectId": "ana", "keyId": "k1", "surface": "console"},
            "target": {"runId": "acme/r-1", "nodeId": "node~5Fapproval", "interruptId": "i-1"},
            "details": {"kind": "approval", "outcome": "completed", "action": "reject", "comment": "too casual"},
            "prevHash": "ab" * 32,
        },
        {
            "chain": 3,
            "seq": 8,
            "action": "token.minted",
            "actor": {"subjectId": "bo", "surface": "api"},
            "target": {"runId": "acme/r-1", "nodeId": "review", "interruptId": "i-2"},
            "details": {"intent": "resolve", "expiresAt": "2026-12-06T10:00:00Z", "principal": "ana"},
        },
        {
            "chain": 1,
            "seq": 2,
            "action": "settings.changed",
            "actor": {"subjectId": "operator", "surface": "cli"},
            "target": {"tenant": "acme"},
            "details": {"settings": {"retentionDays": 30, "allowDelegation": True}},
        },
        {"chain": 1, "seq": 3, "action": "key.revoked", "actor": {"subjectId": "ana", "surface": "console"}, "target": {"keyId": "k9"}},
        {
            "chain": 2,
            "seq": 5,
            "action": "run.forked",
            "actor": {"subjectId": "ana", "surface": "api"},
            "target": {"runId": "acme/r-2"},
            "details": {"sourceRunId": "acme/r-1", "fromSeq": 4, "mode": "branch", "redrive": False},
        },
    ]
    markup = pages.audit(FRAME, entries, None, None, {"ana": "Ana Lima", "bo": "Bo Berg"})
    table = markup[markup.index("<table") :]
    for sign in (*JSON_SIGNS, *PROTOCOL_WORDS):
        assert sign not in table, sign
    read = " ".join(text_of(table).split())
    for protocol in ("interrupt.decided", "token.minted", "subjectId", "runId", "interruptId", "prevHash", "~5F", "retentionDays"):
        assert protocol not in read, protocol
    assert "Decided a request" in read
    assert "Ana Lima in the console" in read
    assert '<a href="/console/runs/acme~2Fr-1">Run acme/r-1</a>, step node_approval' in table
    assert '<th scope="row">Chose</th><td>reject</td>' in table
    assert '<th scope="row">Comment</th><td>too casual</td>' in table
    assert "Made a link" in read
    assert "Bo Berg through the API" in read
    assert '<th scope="row">For</th><td>Ana Lima</td>' in table
    assert '<th scope="row">The link lets them</th><td>decide</td>' in table
    assert '<th scope="row">Retention days</th><td>30</td>' in table
    assert "Changed the settings" in read
    assert "operator from the command line" in read
    assert "Revoked a key" in read
    assert "Key k9" in read
    assert "Forked a run" in read
    assert '<th scope="row">How</th><td>branched at an event</td>' in table


def test_the_links_made_for_a_run_are_a_table_of_words():
    minted = {
        "at": "2026-12-05T10:00:00Z",
        "action": "token.minted",
        "actor": {"subjectId": "bo", "surface": "api"},
        "target": {"runId": "acme/r-1", "nodeId": "review", "interruptId": "i-2"},
        "details": {"intent": "resolve", "expiresAt": "2026-12-06T10:00:00Z", "principal": "ana"},
    }
    view = run_view(tokens=[minted], names=Names("wf", {"review": "Approve the refund"}), people={"ana": "Ana Lima", "bo": "Bo Berg"})
    markup = pages.run(FRAME, view, None)
    links = markup[markup.index("<h2>Links made</h2>") :]
    for sign in (*JSON_SIGNS, *PROTOCOL_WORDS, "token.minted", "interruptId", "<details>"):
        assert sign not in links, sign
    row = list(re.findall(r'<td role="cell" data-label="[^"]+">([^<]*)</td>', links))[:6]
    assert row == ["2026-12-05T10:00:00Z", "Bo Berg through the API", "Approve the refund", "Ana Lima", "decide", "2026-12-06T10:00:00Z"]


def test_a_workflow_page_says_its_steps_in_words_and_offers_its_json_only_as_a_download():
    from pathlib import Path
    from urllib.parse import unquote

    from interlude.api.page.graph import GraphNode as Node
    from interlude.domain.models.workflow import WorkflowDefinition

    raw = json.loads((Path(__file__).resolve().parents[2] / "examples/refund-with-changes.json").read_text())
    definition = WorkflowDefinition.model_validate(raw)
    nodes = [Node(n.id, n.typeId, "pending", definition.step_name(n.id)) for n in definition.nodes]
    got = {"workflowId": "refund-with-changes", "version": 2, "latestVersion": 2, "definition": raw}
    markup = pages.workflow(FRAME, got, nodes, [(e.sourceNodeId, e.targetNodeId) for e in definition.edges], None, None, definition)
    assert "<h1>Refund, with changes requested</h1>" in markup
    assert '<p class="muted">Registered as <span class="mono">refund-with-changes</span>.</p>' in markup
    steps = markup[markup.index("<h2>Its steps</h2>") :]
    read = " ".join(text_of(steps).split())
    for sign in (*JSON_SIGNS, "core.", "approvalGate", "typeId", "triggerRule", "sourceNodeId"):
        assert sign not in steps.split('<a href="data:')[0], sign
    assert "<strong>Approve the refund</strong>: Asks for approval: “Refund {{draft.amount}} for order {{draft.orderId}}?”." in steps
    assert "<strong>Pay the refund</strong>: Calls POST https://payments.example.com/refunds." in steps
    assert "Then: Draft the refund, when action is refine; Pay the refund, when decision == " in read
    assert "Tell the requester it was refused, if a step before it fails or is rejected." in read
    # The definition itself: a file to download, exactly what was registered
    href = re.search(r'<a href="data:application/json;charset=utf-8,([^"]+)" download="refund-with-changes-v2.json">', steps)
    assert href is not None
    assert json.loads(unquote(href.group(1))) == raw


def test_states_are_said_in_words_where_the_api_keeps_the_protocols():
    rows = [{"runId": "acme/r-1", "workflowId": "wf", "status": "waiting-approval", "startedAt": "t"}]
    markup = pages.runs(FRAME, pages.RunsView(rows, None, {}, ()), None)
    assert '<span class="pill s-waiting-approval">waiting for approval</span>' in markup
    assert '<label for="f-status-0">not started yet</label>' in markup
    assert ">waiting-approval<" not in markup
    run = pages.run(FRAME, run_view(), None)
    assert '<span class="pill s-waiting-approval">waiting for approval</span>' in run


def test_callback_deliveries_are_said_in_words():
    deliveries = [
        {"at": "t1", "type": "run.completed", "attempt": 1, "status": "failed", "errorClass": "timeout"},
        {"at": "t2", "type": "run.completed", "attempt": 2, "status": "succeeded", "httpStatus": 204},
        # dead-lettered on its message's last receive: no attempt
        {"at": "t3", "type": "interrupt.resolved", "status": "failed", "errorClass": "receives_exhausted", "final": True},
    ]
    markup = pages.run(FRAME, run_view(deliveries=deliveries), None)
    table = markup[markup.index('<caption>Delivery attempts</caption>') :]
    cells = re.findall(r'<td role="cell" data-label="[^"]+">([^<]*)</td>', table)[:15]
    assert cells == [
        *("t1", "Run completed", "1", "Failed: no answer in time", ""),
        *("t2", "Run completed", "2", "Delivered", "204"),
        *("t3", "Decided", "", "Failed: given up before its attempts ran out", ""),
    ]
    for protocol in ("run.completed", "timeout<", "succeeded", "receives_exhausted"):
        assert protocol not in table


def test_a_steps_panel_reads_the_inputs_its_latest_start_recorded_not_the_runs_values_now():
    from interlude.api.console.routes import step_inputs
    from interlude.engine import run as engine
    from interlude.engine.events import to_docs
    from tests.support.engine import NOW, answer, edge, gate, noop, start, wf_of

    # A gate reached again over a loop, whose input reads its own last decision: rejected, then accepted
    looped = {**gate("gate", actions=["accept", "reject"]), "inputs": {"last": "{{gate.action}}"}}
    wf = wf_of(
        [noop("start"), looped, noop("revise")],
        [edge("start", "gate", "any_success"), edge("gate", "revise", "any_failed"), edge("revise", "gate", "any_success")],
    )
    moves = [start(wf)]
    moves.append(answer(moves[-1], wf, "gate", {"action": "reject"}))
    moves.append(answer(moves[-1], wf, "gate", {"action": "accept"}))
    events: list[dict] = []
    for t in moves:
        events += to_docs(t.state.runId, t.events, len(events), engine.iso(NOW))

    shown = step_inputs(moves[-1].state, wf, "gate", events)

    # Its second visit started after the rejection; the run's values now hold the acceptance
    assert (shown.bound, shown.recorded) == ({"last": "reject"}, True)
    assert step_inputs(moves[-1].state, wf, "gate", []).bound == {"last": "accept"}  # none recorded on the page


def test_a_channel_that_failed_for_good_is_said_so_never_that_no_channel_is_set_up():
    failed_for_good = {"channel": "slack", "outcome": "failed", "reason": "undeliverable", "at": "t"}
    view = run_view(
        notifications=[
            {**failed_for_good, "principalId": "ana", "purpose": "closed", "errorClass": "credential_gone"},
            {**failed_for_good, "principalId": "bo", "purpose": "raised", "errorClass": "slack_token_revoked"},
            {**failed_for_good, "principalId": "cy", "purpose": "raised", "errorClass": "slack_ratelimited"},
        ]
    )
    markup = pages.run(FRAME, view, None)
    rows = re.findall(r"<tr role=\"row\">(.*?)</tr>", markup[markup.index("Who was told, how") :])
    said = [html.unescape(re.findall(r'data-label="[^"]+">([^<]*)</td>', r)[-1]) for r in rows if "data-label" in r]
    failed = "Failed: it cannot be delivered; trying again would not help"
    assert said == [
        f"{failed} (the Slack app that posted it was removed from the tenant's settings or replaced by a webhook)",
        f"{failed} (Slack no longer accepts the tenant's Slack app)",
        f"{failed} (Slack refused it)",
    ]
    assert "No channel set up" not in markup


def test_a_run_page_offers_to_send_its_failed_deliveries_and_notifications_again_only_when_it_has_some():
    plain = pages.run(FRAME, run_view(notifications=[]), None)
    assert "/deliveries/recover" not in plain
    assert "/notifications/recover" not in plain
    offered = pages.run(FRAME, run_view(notifications=[], recover_deliveries=True, recover_notifications=True), None)
    assert "/deliveries/recover" in offered
    assert "Send the failed deliveries again" in offered
    assert "/notifications/recover" in offered
    assert "Send the failed notifications again" in offered


def test_a_callback_notice_is_dead_while_its_last_attempt_failed_for_good():
    failed = {"noticeId": "ntc_1", "attempt": 2, "status": "failed", "final": True}
    assert any_dead_notice([{"noticeId": "ntc_1", "attempt": 1, "status": "failed"}, failed])
    # replayed and delivered since
    assert not any_dead_notice([failed, {"noticeId": "ntc_1", "attempt": 3, "status": "delivered"}])
    # a webhook subscription's delivery is not the run's callback notice
    assert not any_dead_notice([{**failed, "noticeId": "whd_1"}])
    # dead-lettered on its message's last receive, after one attempt
    given_up = {"noticeId": "ntc_1", "status": "failed", "errorClass": "receives_exhausted", "final": True}
    assert any_dead_notice([{"noticeId": "ntc_1", "attempt": 1, "status": "failed"}, given_up])


def test_the_header_names_the_holder_as_the_directory_does_else_the_kind_of_key_never_its_subject():
    named = dataclasses.replace(FRAME, holder="Ana Lima")
    assert "Signed in as Ana Lima" in pages.document("t", "", "nonce", named)
    admin = pages.document("t", "", "nonce", dataclasses.replace(FRAME, scopes=frozenset({"keys:admin"})))
    assert "Signed in with an administrator key" in admin
    plain = pages.document("t", "", "nonce", dataclasses.replace(FRAME, scopes=frozenset({"runs:read"})))
    assert "Signed in with a key" in plain
    for page in (admin, plain):
        assert ">ana<" not in page
        assert " ana " not in page


def test_the_keys_page_names_each_holder_as_the_directory_does():
    listed = [
        {"keyId": "k1", "subject": {"subjectId": "ana"}, "scopes": ["runs:read"], "status": "active"},
        {"keyId": "k2", "subject": {"subjectId": "bot-7"}, "scopes": ["runs:read"], "status": "active"},
    ]
    page = pages.keys(FRAME, listed, None, None, None, ["runs:read"], {"ana": "Ana Lima", "bot-7": "bot-7"})
    assert "Held by" in page
    assert "Subject" not in page
    assert "Ana Lima" in page
    assert ">ana<" not in page
