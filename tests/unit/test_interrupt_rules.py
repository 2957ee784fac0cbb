"""Issue 3, pure: every approval rule (actions, quorum, eligibility, rejection) and every interrupt kind.

Normative text: shared/reference/openwop-notes.md §1.1 and suspend-request.schema.json $defs.
"""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from interlude.domain import schemas
from interlude.domain.errors import Conflict, DomainError, Forbidden, Invalid
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import run as engine
from interlude.engine.events import to_docs
from interlude.engine.gates import resolved_threshold
from interlude.rules.interrupts import decide
from interlude.rules.interrupts.decide import REF_KINDS, Resolver, eligible
from interlude.rules.interrupts.payloads import approval_resume_schema, validate_payload
from interlude.rules.interrupts.secrets import credential_material
from tests.support.engine import NOW, answer, edge, fixture, gate, new_state, subject, types, wf_of
from tests.support.engine import start as start_run


def who(sid: str, groups=(), roles=(), overrides=(), scopes=None) -> Resolver:
    return Resolver(
        subject(sid),
        "run",
        groups=tuple(groups),
        roles=tuple(roles),
        tenant_override_principals=tuple(overrides),
        granted_scopes=scopes,
    )


ALICE, BOB, CAROL = who("alice"), who("bob"), who("carol")


# The runs' owner is a subject that never answers in these tests: no rule can pass or refuse because of it.
OWNER = {"tenant": "t1", "subject": subject("owner")}


def start(wf: WorkflowDefinition, **state_fields) -> engine.Transition:
    return start_run(wf, **{"workflowId": "wf", "owner": OWNER, **state_fields})


def refused(t, wf, node, value, resolver=ALICE) -> DomainError:
    with pytest.raises(DomainError) as caught:
        answer(t, wf, node, value, resolver)
    return caught.value


def event(t: engine.Transition, type_: str) -> dict[str, Any]:
    return next(e.payload for e in t.events if e.type == type_)


def valid_events(t: engine.Transition) -> None:
    """Every event the transition wrote validates against the OpenWOP envelope and its payload schema."""
    for doc in to_docs(t.state.runId, t.events, 0, engine.iso(NOW)):
        assert schemas.validator("run-event.schema.json").is_valid(doc), doc
        payload = schemas.payload_validator(doc["type"])
        assert payload is None or payload.is_valid(doc["payload"]), doc


# -- Approval: the five actions, their fields, ask, decidedAt/By, timeout ---------------------------

ALL_ACTIONS = ["accept", "reject", "refine", "edit-accept", "ask"]
VALUES = {
    "accept": {"action": "accept"},
    "reject": {"action": "reject"},
    "refine": {"action": "refine", "refineFeedback": {"scope": "whole", "text": "tighten it"}},
    "edit-accept": {"action": "edit-accept", "editedArtifactData": {"body": "edited"}},
    "ask": {"action": "ask", "comment": "why?"},
}


@pytest.mark.parametrize("action", ALL_ACTIONS)
def test_an_action_outside_the_gates_actions_is_refused_400(action):
    allowed = [a for a in ALL_ACTIONS if a != action]
    wf = wf_of([gate(actions=allowed)])
    t = start(wf)
    error = refused(t, wf, "g", VALUES[action])
    assert (error.code, type(error), error.details["field"]) == ("validation_error", Invalid, "resumeValue.action")
    assert error.details["actions"] == allowed


@pytest.mark.parametrize("actions", [["accept"], ["accept", "reject"], ALL_ACTIONS])
def test_a_bare_action_the_gate_allows_is_valid_by_its_resume_schema_without_running_the_validator(actions):
    # decide._valid_by_construction skips the validator for exactly these values; the validator agrees with it.
    schema = approval_resume_schema(actions)
    for action in actions:
        assert schemas.errors_of(Draft202012Validator(schema), {"action": action}) == []


def test_a_bare_approval_is_decided_without_a_validator_lookup():
    # A cold api instance's first decision then never imports jsonschema (bench/cold_resolve.py).
    wf = wf_of([gate(actions=ALL_ACTIONS)])
    t = start(wf)
    before = decide._validator_of.cache_info()
    t = answer(t, wf, "g", {"action": "accept"})
    after = decide._validator_of.cache_info()
    assert t.state.status == "completed"
    assert (after.hits, after.misses) == (before.hits, before.misses)


@pytest.mark.parametrize("value", [{"action": "accept", "bogus": 1}, {"action": "accept", "comment": "x" * 10001}])
def test_an_action_with_anything_the_resume_schema_refuses_is_still_refused_400(value):
    wf = wf_of([gate(actions=ALL_ACTIONS)])
    error = refused(start(wf), wf, "g", value)
    assert (error.code, type(error)) == ("validation_error", Invalid)
    assert error.details["field"] == "resumeValue"


@pytest.mark.parametrize("action", ALL_ACTIONS)
def test_each_action_inside_the_gates_actions_is_accepted(action):
    wf = wf_of([gate(actions=ALL_ACTIONS)])
    t = answer(start(wf), wf, "g", VALUES[action])
    valid_events(t)
    if action == "ask":
        assert t.state.status == "waiting-approval"
    elif action == "reject":
        assert t.state.status == "failed"
    else:
        assert t.state.status == "completed"
        resolved = event(t, "interrupt.resolved")
        assert resolved["action"] == action


def test_refine_requires_refine_feedback_of_the_registered_shape():
    wf = wf_of([gate(actions=["refine"])])
    t = start(wf)
    assert refused(t, wf, "g", {"action": "refine"}).details["field"] == "resumeValue.refineFeedback"
    bad_scope = refused(t, wf, "g", {"action": "refine", "refineFeedback": {"scope": "everything"}})
    assert (bad_scope.code, bad_scope.details["field"]) == ("validation_error", "resumeValue")
    done = answer(t, wf, "g", VALUES["refine"])
    resolved = event(done, "interrupt.resolved")
    # refine exits the suspend and carries its feedback; it grants nothing, so it records no decision.
    assert resolved["refineFeedback"] == {"scope": "whole", "text": "tighten it"}
    assert resolved["action"] == "refine"
    assert "decision" not in resolved


def test_edit_accept_requires_edited_artifact_data_and_carries_it():
    wf = wf_of([gate(actions=["edit-accept"])])
    t = start(wf)
    error = refused(t, wf, "g", {"action": "edit-accept"})
    assert (type(error), error.details["field"]) == (Invalid, "resumeValue.editedArtifactData")
    done = answer(t, wf, "g", VALUES["edit-accept"])
    resolved = event(done, "interrupt.resolved")
    assert resolved["editedArtifactData"] == {"body": "edited"}
    assert resolved["decision"] == "granted"
    assert done.state.outputs["g"]["editedArtifactData"] == {"body": "edited"}


def test_ask_is_recorded_and_keeps_the_suspend_open():
    wf = wf_of([gate(actions=["accept", "ask"])])
    t = answer(start(wf), wf, "g", VALUES["ask"], BOB)
    assert t.state.status == "waiting-approval"
    assert "interrupt.resolved" not in types(t)
    assert types(t) == ["approval.received"]
    assert [(v.principal, v.action) for v in t.state.interrupts["g"].votes] == [("urn:test|bob", "ask")]
    assert t.updated
    assert t.updated[0].votes[0].resumeValue["comment"] == "why?"
    valid_events(t)
    # An ask is not a vote: the same principal may still decide.
    assert answer(t, wf, "g", {"action": "accept"}, BOB).state.status == "completed"


def test_decided_at_and_decided_by_are_stamped_from_the_clock_and_the_subject_never_the_caller():
    wf = wf_of([gate()])
    forged = {"action": "accept", "decidedBy": "mallory", "decidedAt": "2000-01-01T00:00:00Z"}
    t = answer(start(wf), wf, "g", forged)
    out = t.state.outputs["g"]
    assert out["decidedBy"] == "alice"
    assert out["decidedAt"] == engine.iso(NOW)
    assert event(t, "interrupt.resolved")["resolvedBy"]["subjectId"] == "alice"
    assert event(t, "node.resumed")["resumeValue"]["decidedAt"] == engine.iso(NOW)


def test_every_recorded_vote_carries_decided_at():
    wf = wf_of([gate(requiredApprovals=2)])
    t = answer(start(wf), wf, "g", {"action": "accept"})
    assert t.state.interrupts["g"].votes[0].resumeValue["decidedAt"] == engine.iso(NOW)


def test_a_resume_carrying_action_timeout_is_refused_400_even_when_the_gate_lists_every_action():
    wf = wf_of([gate(actions=ALL_ACTIONS)])
    error = refused(start(wf), wf, "g", {"action": "timeout"})
    assert (error.code, type(error), error.details) == ("validation_error", Invalid, {"field": "resumeValue.action"})


# -- Quorum --------------------------------------------------------------------------------------


def test_three_of_majority_two_accepts_wait_silently_the_third_grants():
    wf = wf_of([gate(requiredApprovals=3, rejectionPolicy="majority")])
    t = answer(start(wf), wf, "g", {"action": "accept"}, ALICE)
    t = answer(t, wf, "g", {"action": "accept"}, BOB)
    assert t.state.status == "waiting-approval"
    assert types(t) == ["approval.received"]
    assert event(t, "approval.received")["action"] == "accept"
    assert "decision" not in event(t, "approval.received")
    t = answer(t, wf, "g", {"action": "accept"}, CAROL)
    assert t.state.status == "completed"
    resolved = event(t, "interrupt.resolved")
    assert (resolved["action"], resolved["decision"]) == ("accept", "granted")
    assert [v["principal"] for v in t.closed[0].resolution["votes"]] == [
        "urn:test|alice",
        "urn:test|bob",
        "urn:test|carol",
    ]
    valid_events(t)


def test_three_of_majority_reject_decides_on_the_deciding_vote():
    wf = wf_of([gate(requiredApprovals=3, rejectionPolicy="majority")])
    t = answer(start(wf), wf, "g", {"action": "reject"}, ALICE)
    assert t.state.status == "waiting-approval"
    assert types(t) == ["approval.received"]  # 1 reject is not more than half of 3
    t = answer(t, wf, "g", {"action": "accept"}, BOB)
    assert t.state.status == "waiting-approval"
    t = answer(t, wf, "g", {"action": "reject"}, CAROL)  # 2 rejects > 1.5: decided
    assert t.state.status == "failed"
    resolved = event(t, "interrupt.resolved")
    assert resolved["action"] == "reject"
    assert resolved["decision"] == "rejected"
    assert resolved["reason"] == "quorum-reject"
    assert types(t)[:2] == ["interrupt.resolved", "approval.rejected"]
    valid_events(t)


def test_single_veto_one_reject_decides_whatever_the_quorum():
    wf = wf_of([gate(requiredApprovals=3)])
    t = answer(start(wf), wf, "g", {"action": "accept"}, ALICE)
    t = answer(t, wf, "g", {"action": "reject"}, BOB)
    assert t.state.status == "failed"
    assert event(t, "interrupt.resolved")["decision"] == "rejected"


def test_the_same_principal_cannot_vote_twice_and_is_not_counted_twice():
    wf = wf_of([gate(requiredApprovals=2)])
    t = answer(start(wf), wf, "g", {"action": "accept"}, ALICE)
    error = refused(t, wf, "g", {"action": "accept"}, ALICE)
    assert (error.code, type(error)) == ("interlude.vote_already_cast", Conflict)
    error = refused(t, wf, "g", {"action": "reject"}, ALICE)
    assert error.code == "interlude.vote_already_cast"
    assert len(t.state.interrupts["g"].votes) == 1


def test_an_override_principal_releases_the_gate_alone_when_override_bypasses_quorum():
    wf = wf_of([gate(requiredApprovals=3, overrideBypassesQuorum=True, overridePrincipals=["boss"])])
    t = answer(start(wf), wf, "g", {"action": "accept"}, who("boss"))
    assert t.state.status == "completed"
    assert event(t, "interrupt.resolved")["decision"] == "overridden"
    valid_events(t)


def test_a_tenant_override_principal_releases_the_gate_alone_too():
    wf = wf_of([gate(requiredApprovals=3, overrideBypassesQuorum=True)])
    t = answer(start(wf), wf, "g", {"action": "accept"}, who("ops", overrides=["ops"]))
    assert event(t, "interrupt.resolved")["decision"] == "overridden"
    # Named with its issuer too.
    t2 = answer(start(wf), wf, "g", {"action": "accept"}, who("ops", overrides=["urn:test|ops"]))
    assert t2.state.status == "completed"


def test_without_override_bypasses_quorum_an_override_principal_counts_once():
    wf = wf_of([gate(requiredApprovals=2, overridePrincipals=["boss"])])
    t = answer(start(wf), wf, "g", {"action": "accept"}, who("boss", overrides=["boss"]))
    assert t.state.status == "waiting-approval"
    assert answer(t, wf, "g", {"action": "accept"}, BOB).state.status == "completed"


def test_a_non_override_principal_cannot_bypass_the_quorum():
    wf = wf_of([gate(requiredApprovals=2, overrideBypassesQuorum=True, overridePrincipals=["boss"])])
    assert answer(start(wf), wf, "g", {"action": "accept"}, BOB).state.status == "waiting-approval"


# -- Eligibility ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "eligible_resolver", "field"),
    [
        ({"approversList": ["bob"]}, who("bob"), "approversList"),
        ({"approversList": ["urn:test:bob"]}, who("bob"), "approversList"),
        ({"approverGroupRefs": ["finance"]}, who("zed", groups=["finance"]), "approverGroupRefs"),
        ({"approverRoleRefs": ["cfo"]}, who("zed", roles=["cfo"]), "approverRoleRefs"),
    ],
)
def test_an_ineligible_resolver_gets_403_forbidden_and_the_run_stays_waiting(config, eligible_resolver, field):
    wf = wf_of([gate(**config)])
    t = start(wf)
    error = refused(t, wf, "g", {"action": "accept"}, who("alice", groups=["sales"], roles=["clerk"]))
    assert (error.code, type(error), error.details["field"]) == ("forbidden", Forbidden, field)
    assert t.state.status == "waiting-approval"
    assert t.state.interrupts["g"].votes == []
    assert answer(t, wf, "g", {"action": "accept"}, eligible_resolver).state.status == "completed"


def test_ineligibility_is_checked_before_anything_else_is_revealed():
    wf = wf_of([gate(approversList=["bob"])])
    assert refused(start(wf), wf, "g", {"action": "nonsense"}).code == "forbidden"


def test_eligibility_is_the_union_of_the_binding_refs():
    data = {"approversList": ["bob"], "approverGroupRefs": ["finance"], "approverRoleRefs": ["cfo"]}
    assert eligible(data, who("bob"))
    assert eligible(data, who("x", groups=["finance"]))
    assert eligible(data, who("x", roles=["cfo"]))
    assert not eligible(data, who("x", groups=["sales"], roles=["clerk"]))


def test_group_and_role_refs_bind_only_where_the_host_advertises_their_ref_kind():
    assert REF_KINDS == ("principal", "group", "role")
    data = {"approverGroupRefs": ["finance"], "approverRoleRefs": ["cfo"]}
    assert not eligible(data, ALICE)
    # A host that does not advertise a ref kind MUST ignore that field.
    assert eligible(data, ALICE, ref_kinds=("principal",))
    assert not eligible(data, ALICE, ref_kinds=("principal", "role"))
    # approversList binds everywhere.
    assert not eligible({"approversList": ["bob"]}, ALICE, ref_kinds=("principal",))


def test_audience_is_a_notification_hint_never_eligibility():
    wf = wf_of([gate(audience={"subjects": ["bob"], "groups": ["finance"]})])
    assert answer(start(wf), wf, "g", {"action": "accept"}, ALICE).state.status == "completed"
    wf = wf_of([gate(approversList=["carol"], audience={"subjects": ["bob"]})])
    assert refused(start(wf), wf, "g", {"action": "accept"}, BOB).code == "forbidden"


def test_membership_is_resolved_at_decision_time_recorded_on_the_vote_and_never_re_resolved():
    wf = wf_of([gate(requiredApprovals=2, approverGroupRefs=["finance"])])
    t = answer(start(wf), wf, "g", {"action": "accept"}, who("zed", groups=["finance"], roles=["clerk"]))
    vote = t.state.interrupts["g"].votes[0]
    assert (vote.groups, vote.roles) == (["finance"], ["clerk"])
    # zed has since left finance; the recorded vote stands, and the next decision reads only its own membership.
    t2 = answer(t, wf, "g", {"action": "accept"}, who("amy", groups=["finance"]))
    votes = t2.closed[0].resolution["votes"]
    assert [(v["principal"], v["groups"]) for v in votes] == [
        ("urn:test|zed", ["finance"]),
        ("urn:test|amy", ["finance"]),
    ]


# -- Rejection ------------------------------------------------------------------------------------


def test_a_decided_reject_fails_the_gate_never_retried_and_fails_the_run_naming_it():
    wf = wf_of([gate(), {"id": "next", "typeId": "core.noop"}], [edge("g", "next")])
    t = answer(start(wf), wf, "g", {"action": "reject", "feedback": "no"})
    resolved = event(t, "interrupt.resolved")
    assert (resolved["action"], resolved["decision"]) == ("reject", "rejected")
    failed = event(t, "node.failed")
    assert failed["error"]["code"] == "approval_rejected"
    assert failed["error"]["retryable"] is False
    assert failed["attempts"] == 1
    assert types(t).count("node.started") == 0  # never retried, and the all_success edge does not pass
    run_failed = event(t, "run.failed")
    assert (run_failed["error"]["code"], run_failed["failedNodeId"]) == ("approval_rejected", "g")
    assert t.state.nodes["next"].visits == 0  # the all_success edge never passed it
    valid_events(t)


@pytest.mark.parametrize(
    ("rule", "passes"),
    [
        ("all_success", False),
        ("any_success", False),
        ("none_failed", False),
        ("all_complete", True),
        ("any_failed", True),
    ],
)
def test_only_all_complete_and_any_failed_edges_pass_a_rejected_gate(rule, passes):
    wf = wf_of([gate(), {"id": "next", "typeId": "core.noop"}], [edge("g", "next", rule)])
    t = answer(start(wf), wf, "g", {"action": "reject"})
    assert t.state.status == ("completed" if passes else "failed")
    assert (t.state.nodes["next"].status == "completed") is passes


# -- Other kinds ----------------------------------------------------------------------------------


def clarification_wf():
    questions = [
        {"id": "color", "question": "Favourite colour?"},
        {"id": "count", "question": "How many?", "schema": {"type": "integer", "minimum": 1}},
    ]
    return wf_of([{"id": "ask", "typeId": "core.clarificationGate", "config": {"questions": questions}}])


def test_clarification_waits_for_input_and_validates_each_answer_by_its_question_schema():
    wf = clarification_wf()
    t = start(wf)
    assert t.state.status == "waiting-input"
    assert t.opened[0].payload["data"]["questions"][1]["schema"] == {"type": "integer", "minimum": 1}
    for bad in ({"color": "red"}, {"color": "red", "count": 0}, {"color": "red", "count": "2"}, ["red", 2]):
        error = refused(t, wf, "ask", bad)
        assert (error.code, error.details["field"]) == ("validation_error", "resumeValue")
    done = answer(t, wf, "ask", {"color": "red", "count": 2})
    assert done.state.outputs["ask"] == {"color": "red", "count": 2}
    assert event(done, "interrupt.resolved")["kind"] == "clarification"


def test_external_event_waits_external():
    wf = wf_of(
        [
            {
                "id": "w",
                "typeId": "core.interrupt",
                "config": {"kind": "external-event", "data": {"eventType": "pay.done", "correlation": {"o": 1}}},
            }
        ]
    )
    t = start(wf)
    assert t.state.status == "waiting-external"
    assert t.opened[0].payload["data"] == {"eventType": "pay.done", "correlation": {"o": 1}}


@pytest.mark.parametrize("payload", [None, 0, "text", [1, {"a": None}], {"deep": {"er": [True, 1.5]}}])
def test_custom_is_persisted_whatever_its_payload(payload):
    data: dict[str, Any] = {"customKind": "acme.review"}
    if payload is not None:
        data["payload"] = payload
    wf = wf_of([{"id": "c", "typeId": "core.interrupt", "config": {"kind": "custom", "data": data}}])
    t = start(wf)
    assert t.opened[0].payload["data"] == data
    assert event(t, "interrupt.requested")["data"] == data
    done = answer(t, wf, "c", {"anything": [payload]})
    assert done.state.outputs["c"] == {"anything": [payload]}


def conversation_wf(outcome_schema=None):
    exchange: dict[str, Any] = {"turn": "exchange", "conversationId": "{{open.conversationId}}", "prompt": "Which?"}
    if outcome_schema is not None:
        exchange["outcomeSchema"] = outcome_schema
    return wf_of(
        [
            {"id": "open", "typeId": "core.conversationGate", "config": {"turn": "start", "title": "Pick"}},
            {"id": "turn", "typeId": "core.conversationGate", "config": exchange},
            {
                "id": "close",
                "typeId": "core.conversationGate",
                "config": {"turn": "close", "conversationId": "{{open.conversationId}}", "reason": "goal-reached"},
            },
        ],
        [edge("open", "turn"), edge("turn", "close")],
    )


def test_a_conversation_starts_exchanges_and_closes_with_one_tenant_unique_id():
    wf = conversation_wf({"type": "object", "required": ["choice"], "properties": {"choice": {"enum": ["a", "b"]}}})
    t = start(wf)
    assert t.state.status == "waiting-input"
    cid = t.opened[0].payload["data"]["conversationId"]
    assert cid.startswith("conv-")
    assert t.claims == [cid]
    assert event(t, "conversation.opened")["conversationId"] == cid
    t = answer(t, wf, "open", {"hello": True})
    assert t.opened[0].kind == "conversation.exchange"
    assert t.opened[0].payload["data"]["conversationId"] == cid
    error = refused(t, wf, "turn", {"choice": "c"})
    assert (error.code, error.details["field"]) == ("validation_error", "resumeValue")
    t = answer(t, wf, "turn", {"choice": "a"})
    assert event(t, "conversation.exchanged")["response"] == {"choice": "a"}
    assert t.opened[0].kind == "conversation.close"
    t = answer(t, wf, "close", {})
    assert event(t, "conversation.closed") == {
        "nodeId": "close",
        "interruptId": event(t, "interrupt.resolved")["interruptId"],
        "conversationId": cid,
        "reason": "goal-reached",
    }
    assert t.state.status == "completed"
    assert t.state.conversations == {cid: "closed"}
    valid_events(t)


def test_another_run_mints_another_conversation_id():
    wf = conversation_wf()
    first = start(wf).opened[0].payload["data"]["conversationId"]
    other = new_state(wf, runId="t1/BBBBBBBBBBBBBBBBBBBB", owner={"tenant": "t1", "subject": subject("o")})
    assert engine.start(other, wf, NOW).opened[0].payload["data"]["conversationId"] != first


def test_an_exchange_on_a_conversation_that_is_not_open_fails_the_node():
    wf = wf_of(
        [
            {
                "id": "turn",
                "typeId": "core.conversationGate",
                "config": {"turn": "exchange", "conversationId": "conv-x", "prompt": "?"},
            }
        ]
    )
    t = start(wf)
    assert t.state.status == "failed"
    assert event(t, "node.failed")["error"]["code"] == "validation_error"


def test_no_exchange_follows_a_close():
    wf = wf_of(
        [
            {"id": "open", "typeId": "core.conversationGate", "config": {"turn": "start"}},
            {
                "id": "close",
                "typeId": "core.conversationGate",
                "config": {"turn": "close", "conversationId": "{{open.conversationId}}"},
            },
            {
                "id": "late",
                "typeId": "core.conversationGate",
                "config": {"turn": "exchange", "conversationId": "{{open.conversationId}}", "prompt": "?"},
            },
        ],
        [edge("open", "close"), edge("open", "late", "all_success")],
    )
    t = answer(start(wf), wf, "open", {})
    # close is raised first and marks the conversation closing, so the exchange queued after it is refused.
    assert t.state.nodes["late"].status == "failed"
    assert "not open" in event(t, "node.failed")["error"]["message"]
    assert "conversation.exchanged" not in types(t)


def test_the_conversation_fixture_runs_its_lifecycle_under_the_conformance_mock():
    wf = fixture("conformance-conversation-lifecycle")
    assert engine.check_config(wf) == []
    t = start(wf)
    assert t.state.status == "completed"
    convo = [e.payload for e in t.events if e.type.startswith("conversation.")]
    assert [e.type for e in t.events if e.type.startswith("conversation.")] == [
        "conversation.opened",
        "conversation.exchanged",
        "conversation.closed",
    ]
    assert len({c["conversationId"] for c in convo}) == 1
    assert t.claims == [convo[0]["conversationId"]]
    valid_events(t)


def confidence_wf(observed, threshold=None, **extra):
    config: dict[str, Any] = {"agentId": "triage-bot", "observed": observed, "decision": {"route": "refund"}}
    if threshold is not None:
        config["threshold"] = threshold
    return wf_of([{"id": "conf", "typeId": "core.confidenceGate", "config": config}], **extra)


def test_low_confidence_suspends_with_reason_below_the_threshold():
    wf = confidence_wf(0.5)
    t = start(wf)
    assert t.state.status == "waiting-approval"
    suspended = event(t, "node.suspended")
    assert (suspended["reason"], suspended["kind"]) == ("low-confidence", "low-confidence")
    assert t.opened[0].payload["data"] == {
        "agentId": "triage-bot",
        "threshold": 0.7,
        "observed": 0.5,
        "decision": {"route": "refund"},
    }
    valid_events(t)
    done = answer(t, wf, "conf", {"action": "accept"})
    assert done.state.outputs["conf"]["ratified"] is True
    rejected = answer(t, wf, "conf", {"action": "reject"})
    assert event(rejected, "node.failed")["error"]["code"] == "approval_rejected"


def test_confidence_at_or_above_the_threshold_passes_through():
    t = start(confidence_wf(0.7))
    assert t.state.status == "completed"
    assert t.state.outputs["conf"]["escalated"] is False
    assert "interrupt.requested" not in types(t)


def test_the_observed_confidence_may_come_from_inputs_through_a_template():
    wf = confidence_wf("{{inputs.confidence}}", threshold=0.9)
    assert start(wf, inputs={"confidence": 0.85}).state.status == "waiting-approval"
    assert start(wf, inputs={"confidence": 0.95}).state.status == "completed"
    failed = start(wf, inputs={"confidence": "high"})
    assert event(failed, "node.failed")["error"]["code"] == "validation_error"


def test_the_runs_escalation_threshold_overrides_the_gates():
    wf = confidence_wf(0.5, threshold=0.4)
    assert start(wf).state.status == "completed"
    per_run = {"version": 1, "run": {"escalationThreshold": 60}}  # an integer in the schema: read as percent
    t = start(wf, configurable=per_run)
    assert t.state.status == "waiting-approval"
    assert t.opened[0].payload["data"]["threshold"] == 0.6


@pytest.mark.parametrize(("configured", "expected"), [(0, 0.0), (1, 1.0), (70, 0.7), (100, 1.0), (250, 1.0)])
def test_escalation_threshold_reading(configured, expected):
    from interlude.engine.gates import ConfidenceGateConfig

    cfg = ConfidenceGateConfig(agentId="a", observed=0.1)
    assert resolved_threshold(cfg, {"escalationThreshold": configured}) == expected
    assert resolved_threshold(cfg, None) == 0.7


def credential_wf(url="https://connect.example.com/oauth/start", scopes=("repo", "read:user")):
    config = {"provider": "github", "scopes": list(scopes), "reason": "missing", "connectUrl": url}
    return wf_of([{"id": "cred", "typeId": "core.credentialGate", "config": config}])


def test_a_credential_interrupt_is_closed_and_carries_exactly_the_fixed_resume_schema():
    t = start(credential_wf())
    payload = t.opened[0].payload
    # Written out from the schema's `const` (suspend-request.schema.json, credential branch), not the code's constant.
    assert payload["resumeSchema"] == {
        "type": "object",
        "additionalProperties": False,
        "required": ["outcome"],
        "properties": {"outcome": {"enum": ["authorized", "declined"]}},
    }
    assert set(payload["data"]) == {"provider", "scopes", "reason", "connectUrl"}
    assert t.state.status == "waiting-input"
    assert validate_payload({**payload, "resumeSchema": {"type": "object"}})  # any other schema is invalid
    assert validate_payload({**payload, "data": {**payload["data"], "token": "x"}})  # closed


@pytest.mark.parametrize("value", [{}, {"outcome": "maybe"}, {"outcome": "authorized", "code": "abc"}, "authorized"])
def test_a_credential_resume_is_outcome_only(value):
    wf = credential_wf()
    error = refused(start(wf), wf, "cred", value, who("a", scopes=frozenset({"repo", "read:user"})))
    assert (error.code, error.details["field"]) == ("validation_error", "resumeValue")


def test_authorized_is_accepted_only_when_the_tenant_holds_a_grant_for_the_provider_and_scopes():
    wf = credential_wf()
    t = start(wf)
    for scopes in (None, frozenset(), frozenset({"repo"})):
        error = refused(t, wf, "cred", {"outcome": "authorized"}, who("a", scopes=scopes))
        assert (error.code, type(error), error.details["field"]) == ("validation_error", Invalid, "resumeValue")
    assert refused(t, wf, "cred", {"outcome": "authorized"}, who("a", scopes=frozenset({"repo"}))).details[
        "missingScopes"
    ] == ["read:user"]
    done = answer(t, wf, "cred", {"outcome": "authorized"}, who("a", scopes=frozenset({"repo", "read:user", "x"})))
    assert done.state.status == "completed"
    assert done.state.outputs["cred"] == {
        "outcome": "authorized",
        "provider": "github",
        "scopes": ["repo", "read:user"],
    }


def test_declined_fails_the_node_connector_auth_declined():
    wf = credential_wf()
    t = answer(start(wf), wf, "cred", {"outcome": "declined"})
    failed = event(t, "node.failed")
    assert failed["error"]["code"] == "connector_auth_declined"
    assert failed["error"]["retryable"] is False
    assert event(t, "run.failed")["failedNodeId"] == "cred"
    valid_events(t)


SECRETS = [
    {"action": "accept", "comment": "Bearer abcdefghijklmnop"},
    {"action": "accept", "comment": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig"},
    {"action": "edit-accept", "editedArtifactData": {"password": "hunter2"}},
    {"action": "edit-accept", "editedArtifactData": {"nested": [{"access_token": "t"}]}},
    {"action": "accept", "comment": "-----BEGIN RSA PRIVATE KEY-----"},
    {"action": "accept", "comment": "ghp_abcdefghijklmnopqrstuvwxyz0123"},
    {"action": "accept", "comment": "AKIAABCDEFGHIJKLMNOP"},
    {"action": "accept", "comment": "il_0123456789abcdef_" + "a" * 43},
]


@pytest.mark.parametrize("value", SECRETS)
def test_no_approval_accepts_credential_material(value):
    wf = wf_of([gate(actions=ALL_ACTIONS)])
    error = refused(start(wf), wf, "g", value)
    assert (error.code, error.details["field"]) == ("validation_error", "resumeValue")
    assert error.details["path"].startswith("/")


@pytest.mark.parametrize(
    "wf_and_node",
    [
        (clarification_wf, "ask", {"color": "Bearer abcdefghijklmnop", "count": 1}),
        (lambda: credential_wf(), "cred", {"outcome": "authorized", "refresh_token": "r"}),
        (
            lambda: wf_of(
                [{"id": "c", "typeId": "core.interrupt", "config": {"kind": "custom", "data": {"customKind": "k"}}}]
            ),
            "c",
            {"client_secret": "s"},
        ),
        (lambda: confidence_wf(0.1), "conf", {"action": "accept", "decision": {"apiKey": "k"}}),
    ],
)
def test_no_interrupt_of_any_kind_accepts_credential_material(wf_and_node):
    make, node, value = wf_and_node
    wf = make()
    error = refused(start(wf), wf, node, value, who("a", scopes=frozenset({"repo", "read:user"})))
    assert (error.code, error.details["field"]) == ("validation_error", "resumeValue")


def test_no_string_shorter_than_the_shortest_credential_shape_could_be_one():
    """A string under SHORTEST_MATCH characters is not searched (the patterns compile at the first longer one): no
    pattern matches fewer characters, and each of SECRETS' shapes is still found at its shortest."""
    import re._parser

    from interlude.rules.interrupts import secrets

    shortest = min(re._parser.parse(pattern, flags).getwidth()[0] for pattern, flags in secrets.VALUE_PATTERNS)
    assert shortest == secrets.SHORTEST_MATCH
    assert credential_material({"comment": "basic abcdefgh"}) == "/comment"
    assert credential_material({"comment": "basic abcdefg"}) is None


def test_ordinary_values_are_not_mistaken_for_secrets():
    for value in (
        {"action": "accept", "comment": "looks good, ship it"},
        {"password": ""},
        {"tokenCount": 3},
        42,
        None,
    ):
        assert credential_material(value) is None


# -- Payload validation when raised and at registration ---------------------------------------------


@pytest.mark.parametrize(
    ("node", "path"),
    [
        (
            {
                "id": "c",
                "typeId": "core.credentialGate",
                "config": {"provider": "gh", "scopes": [], "connectUrl": "http://insecure.example"},
            },
            "nodes/0/config",
        ),
        (
            {"id": "c", "typeId": "core.confidenceGate", "config": {"agentId": "bad id", "observed": 0.1}},
            "nodes/0/config/agentId",
        ),
        (
            {"id": "c", "typeId": "core.confidenceGate", "config": {"agentId": "a", "observed": 0.1, "threshold": 2}},
            "nodes/0/config/threshold",
        ),
        (
            {"id": "c", "typeId": "core.conversationGate", "config": {"turn": "exchange", "conversationId": "x"}},
            "nodes/0/config",
        ),
        (
            {"id": "c", "typeId": "core.conversationGate", "config": {"turn": "start", "conversationId": "mine"}},
            "nodes/0/config",
        ),
        (
            {"id": "c", "typeId": "core.conversationGate", "config": {"lifecycle": "open-exchange-close"}},
            "nodes/0/config",
        ),
        (
            {
                "id": "c",
                "typeId": "core.conversationGate",
                "config": {"turn": "exchange", "conversationId": "x", "prompt": "p", "outcomeSchema": {"type": 7}},
            },
            "nodes/0/config",
        ),
        (
            {"id": "c", "typeId": "core.interrupt", "config": {"kind": "external-event", "data": {"eventType": "e"}}},
            "nodes/0/config",
        ),
        (
            {"id": "c", "typeId": "core.interrupt", "config": {"kind": "custom", "data": {"payload": 1}}},
            "nodes/0/config",
        ),
        ({"id": "c", "typeId": "core.approvalGate", "config": {"title": "t", "actions": []}}, "nodes/0/config/actions"),
    ],
)
def test_a_workflow_that_would_raise_an_invalid_payload_is_refused_at_registration(node, path):
    problems = engine.check_config(wf_of([node]))
    assert problems, node
    assert any(p["path"].startswith(path) for p in problems), problems


def test_a_payload_invalid_only_at_run_time_fails_the_node_and_is_never_raised():
    wf = credential_wf(url="{{inputs.url}}")
    assert engine.check_config(wf) == []
    t = start(wf, inputs={"url": "http://not-https.example"})
    assert t.opened == []
    assert event(t, "node.failed")["error"]["code"] == "validation_error"
