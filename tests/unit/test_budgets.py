"""Issue 11, findings 1, 2 and 4 on the pure parts: budgets enforced while rendering, growth refused at
registration, an expression language that cannot recurse out, and node failures that route like any other."""

from __future__ import annotations

import json

import pytest

from interlude.domain import budgets, templates
from interlude.domain.budgets import MAX_STATE_BYTES, MAX_VALUE_BYTES, BudgetExceeded, json_size
from interlude.domain.models.workflow import WorkflowDefinition
from interlude.engine import registry
from interlude.engine import run as engine
from interlude.engine.nodetypes import NodeType, NoopConfig
from interlude.faces.modulex.definition import Invalid, translate
from interlude.faces.modulex.expressions import ExpressionError, compile_expression, evaluate
from interlude.faces.modulex.references import engine_id
from tests.support.engine import NOW, answer, edge, gate, start, wf_of

SEED = "x" * 100


def transform(node_id: str, outputs: dict) -> dict:
    return {"id": node_id, "typeId": "core.transform", "config": {"outputs": outputs}}


def amplifying_chain(levels: int, copies: int = 10) -> WorkflowDefinition:
    """The finding: each transform's output repeats the previous one `copies` times (100 bytes × 10^levels)."""
    nodes = [transform("t0", {"v": "{{inputs.seed}}" * copies})]
    nodes += [transform(f"t{i}", {"v": f"{{{{t{i - 1}.v}}}}" * copies}) for i in range(1, levels)]
    edges = [edge(f"t{i - 1}", f"t{i}") for i in range(1, levels)]
    return wf_of(nodes, edges, [{"name": "seed", "type": "string"}])


def failed_node(t: engine.Transition) -> tuple[str | None, str | None]:
    return t.state.failedNodeId, (t.state.error or {}).get("code")


# -- rendering stops at the budget --------------------------------------------------------------------


def test_rendering_stops_at_the_budget_before_building_the_whole_output():
    scope = {"t": {"v": "y" * 50_000}}
    # Before the fix this built 500 KB and returned it; the meter refuses the second copy.
    with pytest.raises(BudgetExceeded):
        templates.render({"v": "{{t.v}}" * 10}, scope)
    meter = budgets.Meter()
    with pytest.raises(BudgetExceeded):
        templates.render({"a": "{{t}}", "b": "{{t}}"}, scope, meter=meter)  # whole values count too
    assert meter.spent <= MAX_VALUE_BYTES + 50_100


def test_json_size_is_exact_for_compact_json_and_refuses_depth_without_recursing():
    value = {"a": [1, 2.5, "é\n", None, True, False], "b": {"c": "x"}}
    assert json_size(value) == len(json.dumps(value, separators=(",", ":")))
    deep: object = "leaf"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(BudgetExceeded):
        json_size(deep)
    with pytest.raises(BudgetExceeded):
        json_size(10**5000)  # more digits than Python prints


def test_the_seven_level_amplification_fails_its_node_at_once():
    wf = amplifying_chain(7)
    t = start(wf, inputs={"seed": SEED})
    assert t.state.status == "failed"
    assert failed_node(t) == ("t2", "interlude.budget_exceeded")  # t2 would be 100 KB
    assert t.state.error["details"]["nodeId"] == "t2"
    assert json_size(t.state.model_dump(mode="json"), 1 << 40, depth=1 << 20) < MAX_STATE_BYTES


def test_a_budget_failure_routes_like_any_failure():
    wf = wf_of(
        [transform("big", {"v": "{{inputs.seed}}" * 1000}), transform("cleanup", {"ok": True})],
        [edge("big", "cleanup", "all_complete")],
        [{"name": "seed", "type": "string"}],
    )
    t = start(wf, inputs={"seed": SEED})
    assert t.state.nodes["big"].status == "failed"
    assert t.state.status == "completed"
    assert t.state.outputs["cleanup"] == {"ok": True}


def test_the_run_state_has_a_budget_of_its_own():
    # Five outputs of 60 KB each fit their own budget but not, together, the run's.
    nodes = [transform(f"n{i}", {"v": "{{inputs.seed}}" * 600}) for i in range(5)]
    edges = [edge(f"n{i - 1}", f"n{i}") for i in range(1, 5)]
    wf = wf_of(nodes, edges, [{"name": "seed", "type": "string"}])
    t = start(wf, inputs={"seed": SEED})
    for _ in range(5):
        if t.state.queue:
            t = engine.advance(t.state, wf, NOW)
    assert failed_node(t) == ("n4", "interlude.budget_exceeded")
    assert t.state.error["details"]["budget"] == "the run's state"


def test_a_transition_leaves_the_rest_to_dispatch_past_its_soft_byte_budget():
    def chain(length: int) -> WorkflowDefinition:
        nodes = [transform(f"n{i}", {"v": "{{inputs.seed}}" * 500}) for i in range(length)]  # 50 KB each
        return wf_of(
            nodes, [edge(f"n{i - 1}", f"n{i}") for i in range(1, length)], [{"name": "seed", "type": "string"}]
        )

    assert start(chain(3), inputs={"seed": SEED}).state.status == "completed"
    t = start(chain(4), inputs={"seed": SEED})
    assert (t.state.status, t.state.queue) == ("running", ["n3"])  # 150 KB recorded: the rest is dispatch's
    t = engine.advance(t.state, chain(4), NOW)
    assert t.state.status == "completed"


def test_nesting_that_grows_node_by_node_stops_at_the_depth_budget():
    nodes = [transform("n0", {"v": 1})] + [transform(f"n{i}", {"a": f"{{{{n{i - 1}}}}}"}) for i in range(1, 80)]
    wf = wf_of(nodes, [edge(f"n{i - 1}", f"n{i}") for i in range(1, 80)])
    t = start(wf)
    node, code = failed_node(t)
    assert code == "interlude.budget_exceeded"
    assert int(node[1:]) < 70


def test_a_gate_whose_rendered_payload_passes_the_budget_fails_instead_of_suspending():
    wf = wf_of([gate("g", artifactData=["{{inputs.seed}}" * 400] * 2)], variables=[{"name": "seed", "type": "string"}])
    t = start(wf, inputs={"seed": SEED})
    assert failed_node(t) == ("g", "interlude.budget_exceeded")
    assert t.opened == []


def test_a_node_that_raises_fails_and_routes_instead_of_escaping(monkeypatch):
    def broken(cfg, scope):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setitem(registry.NODE_TYPES, "core.noop", NodeType("core.noop", NoopConfig, compute=broken))
    wf = wf_of(
        [{"id": "bug", "typeId": "core.noop"}, transform("after", {"ok": True})], [edge("bug", "after", "all_complete")]
    )
    t = start(wf)
    assert t.state.nodes["bug"].status == "failed"
    assert t.state.status == "completed"
    failed = next(e for e in t.events if e.type == "node.failed")
    assert failed.payload["error"]["code"] == "interlude.node_error"


# -- registration refuses provable unbounded growth ------------------------------------------------------


def loop(outputs: dict) -> WorkflowDefinition:
    return wf_of(
        [{"id": "start", "typeId": "core.noop"}, transform("t", outputs)],
        [edge("start", "t", "any_success"), edge("t", "t", "any_success")],
    )


def test_a_loop_whose_transform_references_its_own_output_twice_is_refused_naming_the_node():
    problems = engine.check_config(loop({"v": "{{t.v}}{{t.v}}"}))
    assert [p["path"] for p in problems] == ["nodes/1/config"]
    assert "'t'" in problems[0]["message"]
    assert "without bound" in problems[0]["message"]


def test_two_transforms_of_a_loop_feeding_each_other_twice_are_refused():
    wf = wf_of(
        [{"id": "s", "typeId": "core.noop"}, transform("a", {"v": "{{b.v}}"}), transform("b", {"v": "{{a.v}}{{a}}"})],
        [edge("s", "a", "any_success"), edge("a", "b"), edge("b", "a", "any_success")],
    )
    assert [p["path"] for p in engine.check_config(wf)] == ["nodes/2/config"]


@pytest.mark.parametrize(
    "wf",
    [
        loop({"v": "{{t.v}}!"}),  # linear growth: left to the run-time budget
        amplifying_chain(7),  # no loop: each node runs once, the run-time budget stops it
    ],
)
def test_growth_that_is_not_provably_unbounded_registers(wf):
    assert engine.check_config(wf) == []


def test_a_modulex_transformer_loop_doubling_its_output_is_refused():
    raw = {
        "entry_point": "grow",
        "nodes": [
            {
                "id": "grow",
                "type": "transformer",
                "x": 0,
                "y": 0,
                "transformer_config": {
                    "operations": [{"type": "template", "params": {"template": "{{grow}}{{grow}}"}}]
                },
            },
            {
                "id": "again",
                "type": "conditional",
                "x": 0,
                "y": 0,
                "conditional_config": {"expression_branches": [{"condition": "true", "target": "grow"}]},
            },
        ],
        "edges": [{"source": "grow", "target": "again"}],
    }
    problems = engine.check_config(WorkflowDefinition.model_validate(translate(raw)))
    assert len(problems) == 1
    assert engine_id("grow") in problems[0]["message"]


# -- the expression language ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[" * 130 + "]" * 130,
        "len(" * 130 + "1" + ")" * 130,
        "not " * 45 + "true",
        "-" * 130 + "1",
        "(" * 45 + "1" + ")" * 45,
    ],
)
def test_deep_expressions_are_refused_at_compile_time_never_a_recursion_error(text):
    with pytest.raises(ExpressionError):
        compile_expression(text)


def test_long_flat_expressions_evaluate_in_a_loop():
    assert evaluate(compile_expression("+".join(["1"] * 990)), {}) == 990
    assert evaluate(compile_expression(" or ".join(["false"] * 200) + " or true"), {}) is True
    assert evaluate(compile_expression(" and ".join(["true"] * 200)), {}) is True
    assert evaluate(compile_expression("10 - 2 - 3 * 2 / 4"), {}) == 6.5  # still left-associative, * before -


def test_values_an_expression_cannot_make_sense_of_are_null_and_joins_have_a_budget():
    scope = {"inputs": {"n": 10**1400, "s": "y" * 40_000}}
    assert evaluate(compile_expression("str(n * n * n)"), scope) == "null"  # no ValueError from str()
    with pytest.raises(BudgetExceeded):
        evaluate(compile_expression("s + s"), scope)


def test_a_990_term_condition_behind_an_interrupt_resumes():
    condition = "+".join(["1"] * 990) + " == 990"
    raw = {
        "entry_point": "ask",
        "nodes": [
            {"id": "ask", "type": "interrupt", "x": 0, "y": 0, "interrupt_config": {"message": "?"}},
            {
                "id": "route",
                "type": "conditional",
                "x": 0,
                "y": 0,
                "conditional_config": {"expression_branches": [{"condition": condition, "target": "done"}]},
            },
            {"id": "done", "type": "transformer", "x": 0, "y": 0, "transformer_config": {}},
        ],
        "edges": [{"source": "ask", "target": "route"}],
    }
    wf = WorkflowDefinition.model_validate(translate(raw))
    t = start(wf)
    t = answer(t, wf, engine_id("ask"), {"ok": True})
    assert t.state.status == "completed"
    assert t.state.nodes[engine_id("done")].status == "completed"


def test_a_deep_condition_is_refused_at_translation_naming_the_branch():
    raw = {
        "nodes": [
            {
                "id": "route",
                "type": "conditional",
                "x": 0,
                "y": 0,
                "conditional_config": {
                    "expression_branches": [{"name": "deep", "condition": "[" * 130 + "]" * 130, "target": "x"}]
                },
            },
            {"id": "x", "type": "transformer", "x": 0, "y": 0, "transformer_config": {}},
        ],
        "edges": [],
    }
    with pytest.raises(Invalid) as refused:
        translate(raw)
    assert any("expression_branches[0].condition" in e["msg"] for e in refused.value.errors)


def test_an_answer_listing_what_a_run_accumulated_is_paged_by_size():
    events = [{"sequence": i, "payload": "p" * 1000} for i in range(100)]
    page = budgets.first_page(events, limit=10_000)
    assert [e["sequence"] for e in page] == list(range(9))
    assert budgets.first_page(events) == events
    assert budgets.first_page([{"huge": "h" * 20_000}], limit=10_000) == [{"huge": "h" * 20_000}]  # never empty
