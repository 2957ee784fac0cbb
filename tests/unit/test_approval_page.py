"""The approval page's pure parts: markup (escaped, only allowed actions, schema-generated fields), form parsing,
the cross-site proof, the layered graph, the key ring's deploy-time seed form and the token's minter claim."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interlude.adapters.keyring_store import SEED_KID, _parse_ring
from interlude.api.page import approval, csrf
from interlude.api.page.approval import View
from interlude.api.page.cookies import PageCookie, parse_cookies
from interlude.api.page.forms import FormError, resume_from_form
from interlude.api.page.graph import GraphNode, layer_of, positions, render_svg
from interlude.api.page.headers import content_security_policy, page_headers, with_page_headers
from interlude.rules.interrupts.decide import Resolver
from interlude.rules.interrupts.payloads import approval_resume_schema, clarification_resume_schema
from interlude.rules.tokens import KeyRing, TokenClaims, TokenInvalid, mint, verify

HOSTILE = '<script>alert("x")</script>&\'"'


def approval_payload(actions: list[str], **data) -> dict:
    return {
        "kind": "approval",
        "key": "k",
        "data": {"artifactId": "a", "artifactType": "doc", "title": "T", "actions": actions, **data},
        "resumeSchema": approval_resume_schema(actions),
    }


def view(payload: dict, **kw) -> View:
    base = {
        "payload": payload,
        "node_id": "gate",
        "intent": "resolve",
        "run_status": "waiting-approval",
        "expires_at": 1_800_000_000,
        "nodes": [GraphNode("a", "core.noop", "completed"), GraphNode("gate", "core.approvalGate", "suspended")],
        "edges": [("a", "gate")],
    }
    return View(**{**base, **kw})


def buttons(markup: str) -> list[str]:
    return re.findall(r'<button type="submit" name="action" value="([^"]+)"', markup)


# -- markup ------------------------------------------------------------------------------------------------


def test_everything_shown_is_escaped():
    payload = approval_payload(["accept"], title=HOSTILE, description=HOSTILE, artifactData={HOSTILE: HOSTILE})
    markup = approval.document("t", approval.render_open(view(payload, node_id=HOSTILE), style_nonce="n", csrf_field="f"), "n")
    assert "<script>" not in markup
    assert markup.count("&lt;script&gt;") >= 3


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        (["accept", "reject"], ["accept", "reject"]),
        (["reject"], ["reject"]),
        (["accept", "ask"], ["accept", "ask"]),
        (["accept", "reject", "refine", "edit-accept", "ask"], ["accept", "reject", "ask", "refine", "edit-accept"]),
    ],
)
def test_only_the_gates_actions_are_offered(actions, expected):
    markup = approval.render_open(view(approval_payload(actions)), style_nonce="n", csrf_field="f")
    assert buttons(markup) == expected
    # refine and edit-accept ask for their fields
    assert ('name="refine_text" required' in markup) is ("refine" in actions)
    assert ('name="edited" required' in markup) is ("edit-accept" in actions)


def test_an_inspect_view_has_no_form_and_every_form_carries_the_proof():
    payload = approval_payload(["accept", "refine", "edit-accept"])
    assert "<form" not in approval.render_open(view(payload, intent="inspect"), style_nonce="n", csrf_field=None)
    markup = approval.render_open(view(payload), style_nonce="n", csrf_field="PROOF")
    assert markup.count("<form") == 3
    assert markup.count('name="csrf" value="PROOF"') == 3


def test_security_headers_are_strict():
    headers = with_page_headers({"Content-Security-Policy": content_security_policy("abc"), "Location": "/console"})
    csp = headers["Content-Security-Policy"]
    for directive in ("default-src 'none'", "style-src 'nonce-abc'", "form-action 'self'", "frame-ancestors 'none'"):
        assert directive in csp
    assert "script-src" not in csp
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cache-Control"] == "no-store"
    assert headers["Location"] == "/console"
    # An answer without a page's style (a redirect, a refusal's JSON) loads none; one setting its own cache rule keeps
    # none of it.
    assert "style-src" not in page_headers()["Content-Security-Policy"]
    assert with_page_headers({"cache-control": "public"}) == page_headers()
    document = approval.document("t", "", "abc")
    assert '<style nonce="abc">' in document
    assert 'name="viewport"' in document
    # No style attribute anywhere (the CSP would block it), no script, no external asset
    assert " style=" not in document
    assert "<script" not in document
    assert "http" not in re.sub(r'xmlns="http://www.w3.org/2000/svg"', "", document)


def test_outcomes_in_plain_words():
    words = {
        kind: approval.outcome_words(approval.Result(kind, action="accept", run_status="completed"))[1]
        for kind in ("decided", "recorded", "already", "expired", "invalid", "cross-site", "vote-cast")
    }
    assert words == {
        "decided": "Decision recorded",
        "recorded": "Your vote was counted",
        "already": "Already decided",
        "expired": "This link has expired",
        "invalid": "This link is not valid",
        "cross-site": "Not sent from this page",
        "vote-cast": "You already voted",
    }
    # A rejection is a decision taking effect, not a failure of the page or the run.
    cls, heading, sentence = approval.outcome_words(approval.Result("decided", action="reject", run_status="failed"))
    assert (cls, heading) == ("ok", "Decision recorded")
    assert sentence == "You rejected this request. The run stopped at this step, as it does when this is rejected."
    assert "failure" not in sentence


# -- form → resume value -------------------------------------------------------------------------------------


def test_approval_forms_make_resume_values():
    payload = approval_payload(["accept", "reject", "refine", "edit-accept", "ask"], artifactData={"a": 1})
    assert resume_from_form(payload, {"action": ["accept"], "feedback": [" ok "]}) == {"action": "accept", "comment": "ok"}
    assert resume_from_form(payload, {"action": ["reject"], "feedback": [""]}) == {"action": "reject"}
    assert resume_from_form(payload, {"action": ["refine"], "refine_scope": ["items"], "refine_text": ["x"]}) == {
        "action": "refine",
        "refineFeedback": {"scope": "items", "text": "x"},
    }
    # The artifact is edited field by field: {"a": 1} has one number field
    assert resume_from_form(payload, {"action": ["edit-accept"], "e0": ["2"]}) == {
        "action": "edit-accept",
        "editedArtifactData": {"a": 2},
    }
    for bad in (
        {"action": ["timeout"]},
        {},
        {"action": ["refine"], "refine_text": [" "]},
        {"action": ["refine"], "refine_scope": ["everything"], "refine_text": ["x"]},
        {"action": ["edit-accept"], "e0": ["two"]},
        {"action": ["ask"]},
    ):
        with pytest.raises(FormError):
            resume_from_form(payload, bad)
    with pytest.raises(FormError):
        resume_from_form(approval_payload(["accept"]), {"action": ["reject"]})


def test_clarification_fields_follow_each_questions_schema():
    questions = [
        {"id": "why", "question": "Why?"},
        {"id": "count", "question": "How many?", "schema": {"type": "integer"}},
        {"id": "ok", "question": "OK?", "schema": {"type": "boolean"}},
        {"id": "colour", "question": "Colour?", "schema": {"enum": ["red", "blue", 3]}},
        {"id": "extra", "question": "Extra?", "schema": {"type": "object"}},
    ]
    payload = {"kind": "clarification", "key": "k", "data": {"questions": questions},
               "resumeSchema": clarification_resume_schema(questions)}
    markup = approval.render_open(view(payload), style_nonce="n", csrf_field="f")
    assert 'type="number" step="1"' in markup
    assert 'type="radio"' in markup
    assert '<option value="blue">' in markup
    assert 'class="json"' in markup
    form = {"f0": ["because"], "f1": ["3"], "f2": ["true"], "f3": ["3"], "f4": ['{"k": [1]}']}
    assert resume_from_form(payload, form) == {"why": "because", "count": 3, "ok": True, "colour": 3, "extra": {"k": [1]}}
    assert resume_from_form(payload, {**form, "f2": ["false"]})["ok"] is False
    bad_forms = ({**form, "f0": [""]}, {**form, "f1": ["3.5"]}, {**form, "f2": []}, {**form, "f3": ["green"]}, {**form, "f4": ["{"]})
    for bad in bad_forms:
        with pytest.raises(FormError):
            resume_from_form(payload, bad)


def test_other_kinds_use_their_resume_schema_or_a_json_answer():
    schema = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}, "note": {"type": "string"}}}
    custom = {"kind": "custom", "key": "k", "data": {"customKind": "pay"}, "resumeSchema": schema}
    assert resume_from_form(custom, {"f0": ["1.5"], "f1": [""]}) == {"amount": 1.5}
    bare = {"kind": "external-event", "key": "k", "data": {"eventType": "paid", "correlation": {}}}
    # Without a schema: a text answer, or JSON (under "Advanced")
    assert resume_from_form(bare, {"answer": ["paid in full"], "answer_json": [""]}) == "paid in full"
    assert resume_from_form(bare, {"answer": [""], "answer_json": ['{"paid": true}']}) == {"paid": True}
    for bad in ({"answer_json": ["nope"]}, {"answer": [" "]}):
        with pytest.raises(FormError):
            resume_from_form(bare, bad)


# -- cross-site proof -------------------------------------------------------------------------------------------


def test_the_form_proof_binds_token_browser_and_key():
    key = csrf.derive_key(b"k" * 32)
    browser = csrf.browser_secret(None)
    assert csrf.browser_secret(browser) == browser
    assert csrf.browser_secret("short") != "short"
    field = csrf.field_value(key, "tok", browser)
    assert csrf.check(key, "tok", field, browser)
    assert not csrf.check(key, "other", field, browser)
    assert not csrf.check(key, "tok", field, csrf.browser_secret(None))
    assert not csrf.check(csrf.derive_key(b"j" * 32), "tok", field, browser)
    assert not csrf.check(key, "tok", None, browser)
    assert not csrf.check(key, "tok", field, None)
    assert not csrf.check(key, "tok", field.upper(), browser)
    assert csrf.cookie_of("a").base != csrf.cookie_of("b").base


@pytest.mark.parametrize(
    ("origin", "site", "refused"),
    [
        (None, None, False),
        ("http://h", "same-origin", False),
        ("null", "same-origin", False),
        (None, "none", False),
        (None, "cross-site", True),
        (None, "same-site", True),
        ("https://evil.example", None, True),
        ("http://h", "cross-site", True),
    ],
)
def test_cross_site_signals(origin, site, refused):
    assert csrf.cross_site(origin, site, "http://h") is refused


def test_cookies_parse_from_header_or_list():
    assert parse_cookies(["a=1; b=2", "c=3"]) == {"a": "1", "b": "2", "c": "3"}
    assert parse_cookies(["a=1; a=2"]) == {"a": "1"}


@pytest.mark.parametrize("https", [True, False], ids=["https", "http"])
def test_a_page_cookie_takes_the_strongest_prefix_its_scope_allows(https: bool):
    """Over https, `__Host-` for the whole host's cookie (Secure, Path=/, no Domain) and `__Secure-` for one kept to a
    path; over plain http (the local stack), neither, which a browser would refuse: the name and path as before."""
    host_wide = PageCookie("il_session", "/console", host_wide=True).made("v", 60, https)
    kept = PageCookie("il_proof", "/interrupts/", host_wide=False).made("v", 60, https)
    if https:
        assert str(host_wide) == "__Host-il_session=v; Path=/; Max-Age=60; HttpOnly; Secure; SameSite=Strict"
        assert str(kept) == "__Secure-il_proof=v; Path=/interrupts/; Max-Age=60; HttpOnly; Secure; SameSite=Strict"
    else:
        assert str(host_wide) == "il_session=v; Path=/console; Max-Age=60; HttpOnly; SameSite=Strict"
        assert str(kept) == "il_proof=v; Path=/interrupts/; Max-Age=60; HttpOnly; SameSite=Strict"


def test_an_earlier_releases_cookie_is_read_over_https_only_where_asked_and_ended_where_it_was_set():
    spec = PageCookie("il_proof", "/interrupts/", host_wide=False)
    earlier = {"il_proof": "old"}
    assert spec.held(earlier, https=True) is None
    assert spec.held_or_earlier(earlier, https=True) == "old"
    assert spec.held_or_earlier({**earlier, "__Secure-il_proof": "new"}, https=True) == "new"
    assert str(spec.earlier_ended()) == "il_proof=; Path=/interrupts/; Max-Age=0; HttpOnly; Secure; SameSite=Strict"


# -- graph -----------------------------------------------------------------------------------------------------------


def test_layers_follow_edges_and_ignore_loop_backs():
    nodes = ["a", "b", "c", "d"]
    assert layer_of(nodes, [("a", "b"), ("b", "c"), ("a", "c"), ("c", "b"), ("c", "d")]) == {
        "a": 0, "b": 1, "c": 2, "d": 3,
    }
    assert layer_of(["x", "y"], [("x", "y"), ("y", "x")]) == {"x": 0, "y": 1}
    pos, width, height = positions([GraphNode(n, "t", "pending") for n in nodes], [("a", "b"), ("a", "c")])
    assert pos["b"][1] == pos["c"][1] > pos["a"][1]
    assert width > 0
    assert height > 0


def test_the_svg_highlights_the_gate_and_escapes_labels():
    svg = render_svg([GraphNode("<x>", "t", "completed"), GraphNode("gate", "t", "suspended")], [("<x>", "gate")], "gate")
    assert svg.count('class="node s-suspended gate"') == 1
    assert "&lt;x&gt;" in svg
    assert "<x>" not in svg
    assert "waiting for you" in svg
    assert "style=" not in svg


# -- key ring seed form and the minter claim ------------------------------------------------------------------------------


def test_the_deploy_time_seed_is_a_one_kid_ring_and_bad_seeds_are_refused():
    ring = _parse_ring(json.dumps({"seed": "A1b2" * 11}))
    assert ring.current_kid == SEED_KID
    assert len(ring.keys[SEED_KID]) == 33
    claims = TokenClaims("t/aaaaaaaaaaaaaaaa", "t/bbbbbbbbbbbbbbbb", "n", 2_000_000_000, "resolve")
    assert verify(mint(claims, ring), ring, now=0) == claims
    assert _parse_ring(ring.rotated().to_json()).current_kid != SEED_KID
    for bad in ("A" * 43, "A" * 45, "A!" * 22):
        with pytest.raises(ValueError):
            _parse_ring(json.dumps({"seed": bad}))


def test_the_minter_claim_round_trips_and_is_covered_by_the_mac():
    ring = KeyRing.generate("k1")
    claims = TokenClaims("t/aaaaaaaaaaaaaaaa", "t/bbbbbbbbbbbbbbbb", "n", 2_000_000_000, "resolve", minter="0123abcd0123abcd")
    token = mint(claims, ring)
    assert verify(token, ring, now=0).minter == "0123abcd0123abcd"
    plain = mint(TokenClaims("t/aaaaaaaaaaaaaaaa", "t/bbbbbbbbbbbbbbbb", "n", 2_000_000_000, "resolve"), ring)
    assert verify(plain, ring, now=0).minter is None
    # Swapping payloads between the two tokens breaks the MAC
    swapped = ".".join(token.split(".")[:3] + [plain.split(".")[3], token.split(".")[4]])
    with pytest.raises(TokenInvalid):
        verify(swapped, ring, now=0)
    with pytest.raises(ValueError):
        TokenClaims("t/a", "t/b", "n", 1, "resolve", minter="not a key id")


def test_a_minterless_token_votes_as_one_anonymous_principal():
    # Host-minted tokens (no minter) count as one voter per gate, so they cannot stuff a quorum.
    assert Resolver(subject=None, surface="token").principal == "token:anonymous"


# -- issue 16: who asked, when, which workflow and step; what a reopened link says; unfilled values ----------


def polished_view(**changes) -> approval.View:
    base = {
        "payload": approval_payload(["accept", "reject"]),
        "node_id": "review",
        "intent": "resolve",
        "run_status": "waiting-approval",
        "expires_at": 1_796_132_400,  # 2026-12-01 13:40 UTC
        "nodes": [GraphNode("draft", "core.noop", "completed", "Draft the post"), GraphNode("review", "core.approvalGate", "suspended", "Editor review")],
        "edges": [("draft", "review")],
        "asked_by": "Alice Martin",
        "asked_at": "2026-12-01T13:05:00Z",
        "workflow_name": "Publish a blog post",
        "time_zone": "Europe/Paris",
    }
    return approval.View(**{**base, **changes})


def test_the_page_says_who_asked_when_in_the_approvers_zone_with_utc_which_workflow_and_which_step():
    html = approval.render_open(polished_view(), style_nonce="n", csrf_field="c")
    assert "<dt>Asked by</dt><dd>Alice Martin</dd>" in html
    assert "<dt>Asked on</dt><dd>Tue 1 Dec 2026, 14:05 (Europe/Paris) · 13:05 UTC</dd>" in html
    assert "<dt>Workflow</dt><dd>Publish a blog post</dd>" in html
    assert "<dt>Step</dt><dd>Editor review</dd>" in html
    assert "This link works until Tue 1 Dec 2026, 14:40 (Europe/Paris) · 13:40 UTC." in html
    # Steps by name in the list and the drawing, never their raw ids
    assert "<li class=\"\">Draft the post: done</li>" in html
    assert ">Editor review<" in html
    assert ">draft<" not in html
    # Without a time zone (no directory entry): UTC alone
    plain = approval.render_open(polished_view(time_zone=None), style_nonce="n", csrf_field="c")
    assert "<dd>Tue 1 Dec 2026, 13:05 UTC</dd>" in plain


def test_a_view_only_link_never_says_it_is_waiting_for_you():
    decides = approval.render_open(polished_view(), style_nonce="n", csrf_field="c")
    views = approval.render_open(polished_view(intent="inspect"), style_nonce="n", csrf_field=None)
    assert "waiting for you" in decides
    assert "waiting for you" not in views.lower()
    assert "waiting for a decision" in views


def test_a_value_a_template_could_not_fill_is_marked_never_shown_raw():
    payload = approval_payload(["accept"], title="Refund {{inputs.amount}} to {{ inputs.customer }}", artifactData={"note": "{{draft.summary}}"})
    payload["data"]["description"] = "Reason: {{inputs.reason}}"
    html = approval.document("Refund {{inputs.amount}}", approval.render_open(polished_view(payload=payload), style_nonce="n", csrf_field="c"), "n")
    assert "{{" not in html
    assert '<mark class="unfilled" title="not filled: inputs.amount">not filled (inputs.amount)</mark>' in html
    assert "not filled (inputs.customer)" in html
    assert "not filled (inputs.reason)" in html
    assert "not filled (draft.summary)" in html
    assert "<title>Refund (not filled: inputs.amount)</title>" in html


def test_a_reopened_link_says_what_was_decided_by_whom_and_when():
    result = approval.Result("already", run_status="failed", extra={"decision": "rejected", "by": "Bob", "at": "Tue 1 Dec 2026, 14:20 (Europe/Paris) · 13:20 UTC"})
    assert approval.outcome_words(result) == (
        "info",
        "Already decided",
        "Bob rejected this request on Tue 1 Dec 2026, 14:20 (Europe/Paris) · 13:20 UTC. Nothing was changed. The run stopped at this step.",
    )
    granted = approval.Result("already", run_status="completed", extra={"decision": "granted", "by": "Bob", "at": None})
    assert approval.outcome_words(granted)[2] == "Bob approved this request. Nothing was changed. The run is completed."
    assert approval.outcome_words(approval.Result("already", extra={"status": "cancelled"}))[1] == "No longer open"
    assert "timed out on" in approval.outcome_words(approval.Result("already", extra={"timedOut": True, "at": "x"}))[2]


def test_the_footer_is_in_plain_words():
    html = approval.document("t", "", "n")
    assert "<footer>Sent by Interlude, the approval service your team uses. This page runs no scripts and loads nothing from other sites; your answer goes only to Interlude.</footer>" in html


# -- what is being decided, readable -----------------------------------------------------------------------


def test_the_artifact_is_a_labelled_table_in_the_authors_order_never_json_never_a_link():
    artifact = {
        "zeta": "first key",
        "customer": {"name": "Ana", "site": "https://ana.example", "phone": "+351 912 345 678"},
        "amount": 812.5,
        "count": 3,
        "body": "Line one.\nLine two.\n\nA second paragraph.",
        "tags": ["a", "b"],
        "none": None,
    }
    payload = approval_payload(["accept"], artifactData=artifact)
    html = approval.document("t", approval.render_open(view(payload, labels={"customer.name": "Customer", "amount": "Amount (EUR)"}), style_nonce="n", csrf_field="f"), "n")
    body = html[html.index("What you are approving") :]
    # In the author's key order, labelled where the gate names a label, else by the key
    assert list(re.findall(r'<th scope="row">([^<]+)</th>', body)) == [
        "zeta", "customer", "Customer", "site", "phone", "Amount (EUR)", "count", "body", "tags", "none"
    ]
    assert "<td>812.5</td>" in body
    assert "<td>3</td>" in body
    assert '<p class="para">Line one.\nLine two.</p><p class="para">A second paragraph.</p>' in body
    assert "<ul class=\"values\"><li>a</li><li>b</li></ul>" in body
    assert "<pre" not in body
    assert '"zeta"' not in body
    # Shown, never followed: no link, and no phone number or address turned into one by the browser
    assert "<a " not in body.split("<section class=\"card\"><h2>Your decision")[0]
    assert '<meta name="format-detection" content="telephone=no, date=no, email=no, address=no">' in html


def test_modulex_steps_read_as_their_author_wrote_them_and_an_inline_workflow_is_not_named_by_its_hash():
    from interlude.domain.models.workflow import WorkflowDefinition
    from interlude.faces.modulex.definition import translate

    worked = json.loads((Path(__file__).resolve().parents[2] / "examples/worker/approve-before-sending.json").read_text())
    definition = WorkflowDefinition.model_validate(translate(worked))
    engine_ids = [n.id for n in definition.nodes]
    assert "node~5Fapproval" in engine_ids
    assert [definition.step_name(n) for n in engine_ids] == ["node_draft", "node_approval", "node_route", "node_send", "node_end_rejected"]
    assert definition.display_name("modulex-inline-0123abcd") is None
    openwop = WorkflowDefinition.model_validate({"name": None, "nodes": [{"id": "a~5Fb", "typeId": "core.noop", "name": "Draft"}, {"id": "c~5Fd", "typeId": "core.noop"}]})
    # An OpenWOP id is its author's as written, even one that looks escaped
    assert [openwop.step_name("a~5Fb"), openwop.step_name("c~5Fd")] == ["Draft", "c~5Fd"]
    assert openwop.display_name("refunds") == "refunds"


# -- dead ends become next steps -------------------------------------------------------------------------------


def test_an_expired_link_names_the_request_and_whom_to_ask():
    result = approval.Result(
        "expired",
        extra={"title": "Refund Ana?", "expiredAt": "Tue 1 Dec 2026, 13:40 UTC", "askedBy": "Alice Martin", "overrides": ["Bob", "Carol"]},
    )
    assert approval.outcome_words(result) == (
        "warn",
        "This link has expired",
        "This link to “Refund Ana?” stopped working on Tue 1 Dec 2026, 13:40 UTC. The request is still open: for a new "
        "link, ask Alice Martin, who asked for this decision; or Bob or Carol, who may decide it in anyone's place.",
    )
    alone = approval.Result("expired", extra={"title": "Refund Ana?", "askedBy": "Alice Martin"})
    assert approval.outcome_words(alone)[2].endswith("ask Alice Martin, who asked for this decision.")
    assert approval.outcome_words(approval.Result("expired"))[2] == "This link has stopped working. Ask whoever sent it for a new link."


def test_a_gate_that_timed_out_says_when_and_that_it_was_rejected_automatically():
    extra = {"timedOut": True, "kind": "approval", "at": "Tue 1 Dec 2026, 13:40 UTC"}
    for kind in ("already", "expired"):  # a link past its time to a gate that timed out says the same
        cls, heading, sentence = approval.outcome_words(approval.Result(kind, run_status="failed", extra=extra))
        assert (cls, heading) == ("info", "Timed out")
        assert sentence.startswith("Nobody decided in time: this request timed out on Tue 1 Dec 2026, 13:40 UTC and was rejected automatically.")
    assert approval.verdict(extra) == "timed out, rejected automatically"
    other = approval.outcome_words(approval.Result("already", extra={**extra, "kind": "clarification"}))[2]
    assert "closed without an answer" in other


def test_a_cancelled_run_shows_who_cancelled_it_and_why():
    extra = {"status": "cancelled", "by": "Alice Martin", "at": "Tue 1 Dec 2026, 13:40 UTC", "reason": "customer withdrew"}
    assert approval.outcome_words(approval.Result("already", extra=extra)) == (
        "info",
        "No longer open",
        "This request was withdrawn: its run was cancelled by Alice Martin on Tue 1 Dec 2026, 13:40 UTC: “customer withdrew”. Nothing was changed.",
    )


def test_a_reopened_decided_link_shows_the_title_the_decision_its_comment_and_who_decided():
    payload = approval_payload(["accept", "reject"], title="Refund Ana?")
    result = approval.Result("already", run_status="failed", extra={"decision": "rejected", "by": "Ana Lima", "comment": "Tone too casual"})
    nodes = [GraphNode("a", "core.noop", "completed"), GraphNode("gate", "core.approvalGate", "failed", "Review", approval.verdict(result.extra))]
    html = approval.render_result(result, view(payload, intent="inspect", run_status="failed", nodes=nodes))
    assert "<h1>Refund Ana?</h1>" in html
    assert "Ana Lima rejected this request: “Tone too casual”. Nothing was changed. The run stopped at this step." in html
    # Where the run stands: a rejection is a decision, shown in neutral colours, never "failed" in red
    assert '<li class="here">Review: rejected by Ana Lima: Tone too casual</li>' in html
    assert 'class="node s-verdict gate"' in html
    assert "failed" not in html.replace('run_status="failed"', "")
