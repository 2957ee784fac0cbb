"""ModuleX definitions on the engine: translation, the interrupt node as the seed page describes it, the
conditional node's routing (branches not taken are skipped), the transformer, and the frames projected
from the resulting events."""

from __future__ import annotations

import pytest

from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import run as engine
from interlude.engine.events import to_docs
from interlude.faces.modulex import frames, nodes
from interlude.faces.modulex.definition import Invalid, content_id, translate
from interlude.faces.modulex.references import engine_id
from tests.support.engine import NOW, subject
from tests.support.engine import answer as answer_as
from tests.support.engine import start as start_run
from tests.support.modulex_example import APPROVAL_MESSAGE, DRAFT, MISTYPED_DEFINITION_FIELDS, worked_example

ADMIN = subject("admin")
E = engine_id


def compiled(raw: dict) -> WorkflowDefinition:
    wf = WorkflowDefinition.model_validate(translate(raw))
    assert engine.check_config(wf) == []
    return wf


def start(wf: WorkflowDefinition, inputs: dict | None = None) -> engine.Transition:
    return start_run(wf, workflowId="wf", owner={"tenant": "t1", "subject": ADMIN}, inputs=inputs or {})


def answer(t: engine.Transition, wf: WorkflowDefinition, node: str, value) -> engine.Transition:
    return answer_as(t, wf, E(node), value, ADMIN)


def node_status(t: engine.Transition) -> dict[str, str]:
    return {k: v.status for k, v in t.state.nodes.items()}


# -- the worked example --------------------------------------------------------------------------------


def test_the_interrupt_resolves_its_message_at_pause_time_and_forwards_schema_and_examples():
    wf = compiled(worked_example())
    t = start(wf, {"request": "the refund"})
    assert t.state.status == "waiting-approval"
    payload = t.state.interrupts[E("node_approval")].payload
    assert payload["kind"] == "custom"
    # resume_schema travels inside data, verbatim: not the payload's resumeSchema, so nothing enforces it.
    assert "resumeSchema" not in payload
    inner = payload["data"]["payload"]
    assert inner["message"] == APPROVAL_MESSAGE.replace("{{node_draft}}", DRAFT.format(request="the refund"))
    assert inner["resume_schema"] == worked_example()["nodes"][1]["interrupt_config"]["resume_schema"]
    assert inner["examples"] == worked_example()["nodes"][1]["interrupt_config"]["examples"]
    assert inner["data"] == {}


def test_approval_routes_to_send_and_skips_the_rejection_branch():
    wf = compiled(worked_example())
    t = answer(start(wf, {"request": "x"}), wf, "node_approval", {"approved": True})
    assert t.state.status == "completed"
    assert t.state.outputs[E("node_approval")] == {"approved": True}  # the value lands under the node id
    assert t.state.outputs[E("node_route")] == {"branch": "b_send", "target": "node_send"}
    assert t.state.outputs[E("node_send")] == "sent: " + DRAFT.format(request="x")
    assert node_status(t)[E("node_end_rejected")] == "skipped"
    skipped = [e for e in t.events if e.type == "node.skipped"]
    assert [e.node_id for e in skipped] == [E("node_end_rejected")]


def test_rejection_takes_the_default_target():
    wf = compiled(worked_example())
    t = answer(start(wf, {"request": "x"}), wf, "node_approval", {"approved": False, "notes": "Tone too casual"})
    assert t.state.status == "completed"
    assert t.state.outputs[E("node_route")] == {"branch": "default", "target": "node_end_rejected"}
    assert t.state.outputs[E("node_end_rejected")] == {"notes": "Tone too casual"}
    assert node_status(t)[E("node_send")] == "skipped"


def test_resume_schema_is_advisory_any_value_resumes():
    wf = compiled(worked_example())
    t = answer(start(wf), wf, "node_approval", "not even an object")
    assert t.state.status == "completed"
    assert t.state.outputs[E("node_approval")] == "not even an object"
    assert node_status(t)[E("node_end_rejected")] == "completed"


def test_a_reference_with_no_value_is_blank_never_raw_and_data_keys_snapshot_state():
    raw = worked_example()
    raw["nodes"][1]["interrupt_config"] = {
        "message": "Refund {{input.amount}} for {{node_draft}}?",
        "data_keys": ["node_draft", "request", "node_missing"],
        "output_key": "ignored",
    }
    wf = compiled(raw)
    t = start(wf, {"request": "r1"})
    inner = t.state.interrupts[E("node_approval")].payload["data"]["payload"]
    assert inner["message"] == "Refund  for " + DRAFT.format(request="r1") + "?"
    assert inner["data"] == {"node_draft": DRAFT.format(request="r1"), "request": "r1"}
    assert "resume_schema" not in inner
    assert "examples" not in inner
    t = answer(t, wf, "node_approval", {"approved": True})
    assert E("ignored") not in t.state.outputs
    assert t.state.outputs[E("node_approval")] == {"approved": True}


def test_an_empty_message_is_allowed_but_a_missing_interrupt_config_is_refused():
    raw = worked_example()
    raw["nodes"][1]["interrupt_config"] = {}
    assert start(compiled(raw)).state.interrupts[E("node_approval")].payload["data"]["payload"]["message"] == ""
    del raw["nodes"][1]["interrupt_config"]
    with pytest.raises(Invalid, match="has no interrupt_config"):
        translate(raw)


def test_an_interrupts_field_labels_name_its_fields_and_are_checked_like_any_gates():
    from interlude.api.page.names import names_of

    raw = worked_example()
    raw["nodes"][1]["interrupt_config"]["field_labels"] = {"approved": "Send it?"}
    wf = compiled(raw)
    assert names_of(wf, "wf").labels_of(E("node_approval")) == {"approved": "Send it?"}
    raw["nodes"][1]["interrupt_config"]["field_labels"] = {"approved": ""}
    with pytest.raises(Invalid) as refused:
        translate(raw)
    assert refused.value.errors[0]["loc"][-3:] == ["interrupt_config", "field_labels", "approved"]


def test_an_interrupts_audience_is_kept_in_its_node_for_the_notifications():
    from interlude.app.facts import asked_of

    raw = worked_example()
    raw["nodes"][1]["interrupt_config"]["audience"] = {"subjects": ["ana"], "groups": ["desk"]}
    wf = compiled(raw)
    interrupt = start(wf).state.interrupts[E("node_approval")]
    assert asked_of(interrupt.payload, wf.node(E("node_approval")).config) == {"audience": {"subjects": ["ana"], "groups": ["desk"]}}


# -- conditionals, loops, transformers ------------------------------------------------------------------


def mx_node(node_id: str, type_: str, **config) -> dict:
    return {"id": node_id, "type": type_, "x": 0, "y": 0, f"{type_}_config": config}


def test_expression_branches_are_evaluated_in_order_and_routes_map_expression_results():
    raw = {
        "nodes": [
            mx_node("gate_in", "transformer", source="{{input}}"),
            mx_node(
                "route",
                "conditional",
                expression_branches=[
                    {"name": "big", "condition": "gate_in.amount >= 100", "target": "big"},
                    {"name": "also_big", "condition": "gate_in.amount >= 10", "target": "medium"},
                ],
                expression="gate_in.kind",
                routes={"refund": "refund", "true": "refund"},
                default_target="small",
            ),
            mx_node("big", "transformer"),
            mx_node("medium", "transformer"),
            mx_node("refund", "transformer"),
            mx_node("small", "transformer"),
        ],
        "edges": [{"source": "gate_in", "target": "route"}],
    }
    wf = compiled(raw)
    for inputs, chosen in (
        ({"amount": 500}, "big"),
        ({"amount": 50}, "medium"),
        ({"amount": 1, "kind": "refund"}, "refund"),
        ({"amount": 1, "kind": "other"}, "small"),
    ):
        t = start(wf, inputs)
        statuses = node_status(t)
        assert t.state.status == "completed"
        assert statuses[E(chosen)] == "completed"
        assert [n for n in ("big", "medium", "refund", "small") if statuses[E(n)] == "completed"] == [chosen]


@pytest.mark.parametrize(
    ("operator", "source", "value", "taken"),
    [
        ("gte", 100, 100, True),
        ("lt", "b", "a", False),
        ("gt", "1", 0, False),  # a string and a number do not compare
        ("equals", True, 1, False),  # true is not 1
        ("contains", ["a", "b"], "b", True),
        ("not_contains", "abc", "b", False),
        ("in", "high", ["high", "urgent"], True),
        ("not_in", "low", ["high", "urgent"], True),
        ("starts_with", "refund-7", "refund", True),
        ("ends_with", 17, "7", False),  # only strings
        ("is_empty", [], None, True),
        ("is_not_empty", {}, None, False),
        ("is_true", 1, None, False),  # only the boolean
        ("is_false", False, None, True),
        ("exists", 0, None, True),
        ("not_exists", None, None, True),
    ],
)
def test_structured_branch_operators(operator, source, value, taken):
    branch = nodes.Branch(source="x.v", operator=operator, value=value, target="t")
    assert nodes.branch_taken(branch, {"x": {"v": source}}) is taken


def test_a_conditional_loops_back_until_its_condition_holds():
    raw = {
        "entry_point": "ask",
        "nodes": [
            mx_node("ask", "interrupt", message="Amount? (last answer: {{ask.amount}})"),
            mx_node(
                "check",
                "conditional",
                expression_branches=[{"condition": "ask.amount > 0", "target": "done"}],
                default_target="ask",
            ),
            mx_node("done", "transformer", source="{{ask.amount}}"),
        ],
        "edges": [{"source": "ask", "target": "check"}],
    }
    wf = compiled(raw)
    t = start(wf)
    # Its own answer does not exist yet on the first visit: blank, never the raw reference
    assert t.state.interrupts[E("ask")].payload["data"]["payload"]["message"] == "Amount? (last answer: )"
    t = answer(t, wf, "ask", {"amount": 0})
    assert t.state.status == "waiting-approval"  # looped back: the same node asks again, a new interrupt
    assert t.state.interrupts[E("ask")].payload["data"]["payload"]["message"] == "Amount? (last answer: 0)"
    t = answer(t, wf, "ask", {"amount": 7})
    assert t.state.status == "completed"
    assert t.state.outputs[E("done")] == 7


def test_routing_to_end_finishes_the_path():
    raw = {
        "nodes": [
            mx_node("a", "transformer"),
            mx_node(
                "route",
                "conditional",
                expression_branches=[{"condition": "false", "target": "b"}],
                default_target="__end__",
            ),
            mx_node("b", "transformer"),
        ],
        "edges": [
            {"source": "__start__", "target": "a"},
            {"source": "a", "target": "route"},
            {"source": "route", "target": "b"},
        ],
    }
    t = start(compiled(raw))
    assert t.state.status == "completed"
    assert node_status(t)[E("b")] == "skipped"


def test_transformer_operations():
    raw = {
        "nodes": [
            mx_node(
                "t",
                "transformer",
                source="{{input}}",
                operations=[
                    {"type": "set", "field": "who", "params": {"value": "{{input.name}}"}},
                    {"type": "uppercase", "field": "who"},
                    {"type": "rename", "field": "who", "params": {"to": "shout"}},
                    {"type": "default", "field": "missing", "params": {"value": 3}},
                    {"type": "omit", "params": {"fields": ["name"]}},
                    {"type": "split", "field": "tags", "params": {"separator": ","}},
                ],
            )
        ]
    }
    t = start(compiled(raw), {"name": "ada", "tags": "a,b"})
    assert t.state.outputs[E("t")] == {"shout": "ADA", "missing": 3, "tags": ["a", "b"]}


GUARDED: dict = {
    "nodes": [
        {"id": "node_draft", "type": "transformer", "x": 0, "y": 0},
        {
            "id": "node_check",
            "type": "guardrails",
            "x": 1,
            "y": 0,
            "guardrails_config": {"source": "{{node_draft}}", "on_failure": "route", "failure_route": "node_fail"},
        },
        {"id": "node_send", "type": "transformer", "x": 2, "y": 0},
        {"id": "node_fail", "type": "transformer", "x": 2, "y": 1},
        {"id": "node_after_fail", "type": "transformer", "x": 3, "y": 1},
    ],
    "edges": [
        {"source": "node_draft", "target": "node_check"},
        {"source": "node_check", "target": "node_send"},
        {"source": "node_fail", "target": "node_after_fail"},
    ],
}


def guarded_run(outcome: dict) -> engine.Transition:
    wf = compiled(GUARDED)
    t = start(wf)
    # Nothing on the failure route runs before the guardrail: the run waits on the guardrail's task alone.
    assert node_status(t)[E("node_fail")] == "pending"
    assert list(t.state.actions) == [E("node_check")]
    return engine.finish_action(t.state, wf, E("node_check"), 1, outcome, NOW)


def test_a_failing_guardrail_routes_to_its_failure_route_and_only_there():
    t = guarded_run({"error": {"code": "guardrail_failed", "message": "PII found"}})
    statuses = node_status(t)
    assert t.state.status == "completed"
    assert statuses[E("node_check")] == "failed"
    assert (statuses[E("node_fail")], statuses[E("node_after_fail")]) == ("completed", "completed")
    assert statuses[E("node_send")] == "skipped"
    started = [e.node_id for e in t.events if e.type == "node.started"]
    assert started == ["~~on-failure.0", E("node_fail"), E("node_after_fail")]


def test_a_passing_guardrail_never_enters_its_failure_route():
    t = guarded_run({"output": {"passed": True}})
    statuses = node_status(t)
    assert t.state.status == "completed"
    assert statuses[E("node_send")] == "completed"
    assert (statuses[E("node_fail")], statuses[E("node_after_fail")]) == ("skipped", "skipped")
    # The pass-through node is the translation's, not the author's: no ModuleX frame names it.
    docs = to_docs("t1/AAAAAAAAAAAAAAAAAAAA", t.events, 0, engine.iso(NOW))
    view = frames.view_of("t1/AAAAAAAAAAAAAAAAAAAA", "wf", 1, compiled(GUARDED))
    projected = [frames.project(d, view) for d in docs]
    assert not any(f and "on-failure" in str(f) for f in projected)


def test_a_failure_route_must_name_a_node_and_may_end_the_run():
    raw = {**GUARDED, "nodes": [dict(n) for n in GUARDED["nodes"]]}
    raw["nodes"][1] = {**raw["nodes"][1], "guardrails_config": {"failure_route": "node_nowhere"}}
    with pytest.raises(Invalid) as got:
        translate(raw)
    assert any("routes failures to 'node_nowhere'" in e["msg"] for e in got.value.errors)
    raw["nodes"][1]["guardrails_config"] = {"failure_route": "__end__"}
    raw["nodes"] = raw["nodes"][:3]
    raw["edges"] = raw["edges"][:2]
    wf = compiled(raw)
    t = engine.finish_action(start(wf).state, wf, E("node_check"), 1, {"error": {"code": "x", "message": "no"}}, NOW)
    assert (t.state.status, node_status(t)[E("node_send")]) == ("completed", "skipped")


@pytest.mark.parametrize("task_type", ["llm", "tool", "knowledge", "guardrails", "function"])
def test_node_types_interlude_does_not_run_become_tasks_on_their_queue(task_type):
    raw = worked_example()
    raw["nodes"][0] = {
        "id": "node_draft",
        "type": task_type,
        "x": 0,
        "y": 0,
        f"{task_type}_config": {"prompt": "{{input.request}}", "heartbeatTimeoutSeconds": 5},
        "retry_config": {"max_attempts": 2, "initial_interval": 10, "unknown": 1},
    }
    node = translate(raw)["nodes"][0]
    assert node["typeId"] == f"modulex.{task_type}"
    assert node["config"]["config"] == {"prompt": "{{input.request}}"}
    assert node["config"]["heartbeatTimeoutSeconds"] == 5
    assert node["config"]["retry_config"]["max_attempts"] == 2


def test_an_agent_node_without_a_system_prompt_is_refused():
    raw = worked_example()
    raw["nodes"][0] = {"id": "node_draft", "type": "agent", "x": 0, "y": 0, "agent_config": {}}
    with pytest.raises(Invalid) as got:
        translate(raw)
    assert any("needs a system_prompt" in e["msg"] for e in got.value.errors)


def test_an_unknown_node_type_is_refused_by_name():
    raw = worked_example()
    raw["nodes"][0] = {"id": "node_draft", "type": "vision", "x": 0, "y": 0}
    with pytest.raises(Invalid) as got:
        translate(raw)
    assert "has unknown type 'vision'" in got.value.errors[0]["msg"]
    assert got.value.errors[0]["loc"] == ["body", "workflow", "nodes", 0, "type"]


UNRUNNABLE = [
    (lambda w: w["nodes"][0].pop("x"), "Field required"),
    (lambda w: w["nodes"][2]["conditional_config"].update(default_target="node_nowhere"), "names no node"),
    (lambda w: w["nodes"][2]["conditional_config"].update(condition_type="llm"), "expression conditionals only"),
    (
        lambda w: w["nodes"][2]["conditional_config"]["expression_branches"][0].update(operator="resembles"),
        "is not one of",
    ),
    (
        lambda w: w["nodes"][2]["conditional_config"]["expression_branches"].append(
            {"condition": "a ==", "target": "node_send"}
        ),
        "unexpected end",
    ),
    (lambda w: w["edges"].append({"source": "node_route", "target": "node_draft"}), "leaves a conditional"),
    (lambda w: w["edges"].append({"source": "node_x", "target": "node_draft"}), "names no node"),
    (
        lambda w: (
            w.update(entry_point="node_draft"),
            w["nodes"].append({"id": "orphan", "type": "transformer", "x": 0, "y": 0}),
        ),
        "unreachable",
    ),
    (lambda w: w["nodes"][0]["transformer_config"]["operations"].append({"type": "eval"}), "Input should be"),
]


@pytest.mark.parametrize(("mutate", "message"), UNRUNNABLE)
def test_definitions_that_cannot_run_are_refused_at_validation(mutate, message):
    raw = worked_example()
    mutate(raw)
    with pytest.raises(Invalid) as got:
        translate(raw)
    assert any(message in e["msg"] for e in got.value.errors), got.value.errors


@pytest.mark.parametrize(("mutate", "message"), [*UNRUNNABLE, (lambda w: w.clear(), "Field required")])
@pytest.mark.parametrize("field", ["workflow", "workflow_schema"])
def test_each_refusal_names_the_body_field_the_definition_was_sent_in(field, mutate, message):
    # Where each problem is made: a deployed definition's name workflow_schema, an inline run's workflow, in their
    # place and in every message that names a place (modulex-python shows the messages alone).
    raw = worked_example()
    mutate(raw)
    with pytest.raises(Invalid) as got:
        translate(raw, field)
    for error in got.value.errors:
        assert error["loc"][:2] == ["body", field], error
        other = "workflow_schema" if field == "workflow" else "workflow"
        assert not error["msg"].startswith((f"{other}.", f"{other}:", f"{other} ")), error
    assert any(message in e["msg"] for e in got.value.errors), got.value.errors


def test_a_definition_that_is_no_object_is_refused_naming_its_field():
    with pytest.raises(Invalid) as got:
        translate([], "workflow_schema")
    assert got.value.errors == [
        {"loc": ["body", "workflow_schema"], "msg": "workflow_schema must be an object", "type": "value_error"}
    ]


@pytest.mark.parametrize("case", MISTYPED_DEFINITION_FIELDS)
def test_a_definition_field_of_another_json_type_is_refused_never_read_as_another_value(case):
    mutate, loc = MISTYPED_DEFINITION_FIELDS[case]
    raw = worked_example()
    mutate(raw)
    with pytest.raises(Invalid) as got:
        translate(raw)
    assert [e["loc"] for e in got.value.errors] == [["body", "workflow", *loc]], got.value.errors


def test_a_definition_s_numbers_may_be_written_as_json_writes_them():
    raw = worked_example()
    raw["config"] = {"recursion_limit": 7.0}  # a JSON integer, as Python's json writes 7.0
    raw["nodes"][0].update(x=1.5, y=2, enabled=True)
    raw["nodes"][0]["transformer_config"]["operations"].append({"type": "join", "params": {"separator": ""}})
    translated = translate(raw)
    assert translated["metadata"]["interlude.modulex"]["recursionLimit"] == 7
    llm = worked_example()
    llm["nodes"][0] = mx_node("node_draft", "llm", timeoutSeconds=30.0) | {"retry_config": {"initial_interval": 0.5}}
    assert engine.check_config(WorkflowDefinition.model_validate(translate(llm))) == []


def test_inline_definitions_are_content_addressed():
    a, b = translate(worked_example()), translate(worked_example())
    assert content_id(a) == content_id(b)
    changed = worked_example()
    changed["nodes"][1]["interrupt_config"]["message"] = "Other?"
    assert content_id(translate(changed)) != content_id(a)


# -- frames ---------------------------------------------------------------------------------------------


def test_frames_are_a_projection_of_the_event_log():
    wf = compiled(worked_example())
    first = start(wf, {"request": "x"})
    docs = to_docs("t1/AAAAAAAAAAAAAAAAAAAA", first.events, 0, engine.iso(NOW))
    second = answer(first, wf, "node_approval", {"approved": True})
    docs += to_docs("t1/AAAAAAAAAAAAAAAAAAAA", second.events, len(docs), engine.iso(NOW))
    view = frames.view_of("t1/AAAAAAAAAAAAAAAAAAAA", "wf", 1, wf)
    out = [f for d in docs if (f := frames.project(d, view)) is not None]
    kinds = [f["type"] for f in out]
    assert kinds[0] == "metadata"
    assert kinds[-1] == "done"
    at = kinds.index("interrupt")
    assert kinds[at + 1 : at + 3] == ["resumed", "node_update"]
    interrupt = out[at]["data"]
    assert interrupt["thread_id"] == "t1~2FAAAAAAAAAAAAAAAAAAAA"
    assert interrupt["message"].endswith(DRAFT.format(request="x"))
    assert set(interrupt) >= {"thread_id", "message", "data", "resume_schema", "examples"}
    assert out[at + 1]["data"]["resume_value"] == {"approved": True}
    assert out[at + 2]["output"] == {"node_approval": {"approved": True}}
    assert {f["node"] for f in out if f["type"] == "node_update"} == {
        "node_draft",
        "node_approval",
        "node_route",
        "node_send",
    }
    assert out[-1]["data"]["final_state"]["node_send"].startswith("sent: ")
    assert out[0]["data"]["workflow_name"] == "Approve before sending"
