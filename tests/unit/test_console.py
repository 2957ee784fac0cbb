"""The operator console's pure parts: the signed session cookie and its form proofs, and the pages' markup."""

from __future__ import annotations

import base64
import json
import re

from interlude.api.console import pages
from interlude.api.console import session as sessions
from interlude.api.console.pages import Frame, Notice, RunView
from interlude.api.page.graph import GraphNode
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
    assert sessions.unseal(f"{kid}.{body}.{mac[:-2]}AA", {"k1": SECRET}, NOW) is None


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
            "data": {"artifactId": "a", "artifactType": "doc", "title": title, "description": HOSTILE, "actions": actions},
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
    # Every form carries the session's proof.
    assert markup.count('name="csrf"') == markup.count("<form")


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
        "payload": {"kind": "approval", "action": "accept", "resolvedBy": {"subjectId": "ana"}},
    }
    assert pages.event_summary(resolved) == "Decided · review · kind approval · action accept · by ana"
    failed = {"type": "node.failed", "nodeId": "call", "payload": {"error": {"message": "timed out"}}}
    assert pages.event_summary(failed) == "Step failed · call · timed out"


def test_a_delegated_vote_names_the_delegate_who_cast_it():
    markup = pages.votes_table([{"principal": "urn:x|ana", "castBy": "urn:x|bo", "action": "accept", "surface": "run"}])
    assert "ana (cast by bo)" in markup
    assert "urn:x" not in markup
    # By name where the directory gives one
    named = pages.vote_rows([{"principal": "urn:x|ana", "castBy": "urn:x|bo", "action": "accept"}], {"ana": "Ana Lima", "bo": "Bo Berg"})
    assert named[0][0] == "Ana Lima (cast by Bo Berg)"
    assert "cast by" not in pages.votes_table([{"principal": "urn:x|ana", "action": "accept"}])


def test_an_inbox_item_decided_as_a_delegate_says_on_whose_behalf():
    markup = pages.inbox(FRAME, [{**approval_item("Ship?"), "onBehalfOf": ["ana", "bo<b>"]}], None, None)
    assert "<dt>On behalf of</dt><dd>ana, bo&lt;b&gt;</dd>" in markup
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
