"""Edge conditions and the expression language they share with ModuleX conditionals (engine/conditions.py,
engine/expressions.py): what each type holds for, what an expression reads, and that its cost is bounded."""

from __future__ import annotations

import pytest

from interlude.domain import schemas
from interlude.domain.budgets import MAX_VALUE_BYTES
from interlude.domain.models.workflow import Edge, EdgeCondition
from interlude.domain.outcomes import approval_outcome
from interlude.engine.conditions import KINDS, condition_context, holds, js_truthy, problems
from interlude.engine.expressions import MAX_DEPTH, MAX_LENGTH, ExpressionError, compile_expression, evaluate, names_in
from tests.support.engine import refund_definition

REFINED = condition_context(
    "completed",
    approval_outcome({"refineFeedback": {"scope": "section", "text": "shorter"}, "decidedBy": "ana"}, "refine"),
)
REJECTED = condition_context("failed", approval_outcome({"comment": "no", "decidedBy": "bo"}, "reject", "rejected"))


def condition(**fields) -> EdgeCondition:
    return EdgeCondition.model_validate(fields)


@pytest.mark.parametrize(
    ("fields", "refined", "rejected"),
    [
        ({"type": "equals", "left": "action", "right": "refine"}, True, False),
        ({"type": "notEquals", "left": "action", "right": "refine"}, False, True),
        ({"type": "equals", "left": "decision", "right": None}, True, False),  # a refine grants nothing
        ({"type": "equals", "left": "output.decision", "right": "rejected"}, False, True),
        ({"type": "equals", "left": "status", "right": "failed"}, False, True),
        ({"type": "equals", "left": "refineFeedback.scope", "right": "section"}, True, False),
        ({"type": "contains", "left": "refineFeedback.text", "right": "short"}, True, False),
        ({"type": "contains", "left": "refineFeedback", "right": "scope"}, True, False),  # an object's key
        ({"type": "truthy", "left": "comment"}, False, True),
        ({"type": "falsy", "left": "comment"}, True, False),
        ({"type": "truthy", "left": "nowhere.at.all"}, False, False),
        ({"type": "truthy", "left": "comment", "right": "ignored"}, False, True),
        ({"expression": "action == 'refine' and refineFeedback.scope != 'items'"}, True, False),
        ({"type": "expression", "expression": "decision == 'rejected' && len(comment) > 0"}, False, True),
        ({"type": "expression", "expression": "action in ['reject', 'timeout']"}, False, True),
    ],
)
def test_each_type_holds_for_what_it_says(fields, refined, rejected):
    assert holds(condition(**fields), REFINED) is refined
    assert holds(condition(**fields), REJECTED) is rejected


@pytest.mark.parametrize(
    ("value", "truthy"),
    [(None, False), (False, False), (0, False), (0.0, False), (float("nan"), False), ("", False),
     (True, True), (1, True), (-0.5, True), ("0", True), ("false", True), ([], True), ({}, True), ([0], True)],
)
def test_truthy_is_javascripts(value, truthy):
    assert js_truthy(value) is truthy
    assert holds(condition(type="truthy", left="v"), {"v": value}) is truthy
    assert holds(condition(type="falsy", left="v"), {"v": value}) is not truthy


def test_equality_is_of_json_values_true_is_not_one():
    assert holds(condition(type="equals", left="v", right=1), {"v": True}) is False
    assert holds(condition(type="equals", left="v", right={"a": [1, "x"]}), {"v": {"a": [1, "x"]}}) is True
    assert holds(condition(type="equals", left="v", right=None), {}) is True  # a path that leads nowhere is null


def test_the_whole_output_is_reachable_also_when_it_is_not_an_object():
    context = condition_context("completed", "just text")
    assert holds(condition(type="contains", left="output", right="text"), context) is True
    assert holds(condition(type="equals", left="status", right="completed"), context) is True


def test_an_expression_that_would_pass_the_value_budget_does_not_hold():
    big = "x" * (MAX_VALUE_BYTES // 2 + 1)
    assert holds(condition(expression="v + v + v == ''"), {"v": big}) is False


def test_a_condition_of_no_type_or_regex_never_holds_though_registration_refuses_it_first():
    assert holds(condition(left="action"), REFINED) is False
    assert holds(condition(type="regex", left="action", right="ref.*"), REFINED) is False
    assert [at for at, _ in problems(condition(type="regex", left="action", right="x"), None, "s")] == ["type"]


def test_names_are_checked_only_where_the_source_says_what_it_outputs():
    assert problems(condition(expression="total > 3 and output.lines != null"), None, "s") == []
    assert problems(condition(expression="total > 3"), frozenset({"total"}), "s") == []
    ((at, message),) = problems(condition(expression="totl > 3"), frozenset({"total"}), "s")
    assert at == "expression"
    assert "reads 'totl', which step 's' does not output (it outputs: total; also output, status)" in message


# -- the language ------------------------------------------------------------------------------------------------------


def test_names_in_lists_every_name_an_expression_reads():
    node = compile_expression("a.b == 1 and (c or not {{d.e}}) and len(f) in [g, 2] and -h * i > 0")
    assert names_in(node) == ["a.b", "c", "d.e", "f", "g", "h", "i"]


def test_evaluate_reads_names_from_the_scope_it_is_given():
    node = compile_expression("order.amount >= 100 or priority in ['high']")
    assert evaluate(node, {"order": {"amount": 120}}) is True
    assert evaluate(node, {"order": {"amount": 5}, "priority": "low"}) is False


def test_the_cost_of_an_expression_is_bounded_before_it_runs():
    with pytest.raises(ExpressionError, match="longer than"):
        compile_expression("1 + " * (MAX_LENGTH // 4) + "1")
    with pytest.raises(ExpressionError, match="nests too deeply"):
        compile_expression("not " * (MAX_DEPTH + 1) + "true")
    with pytest.raises(ExpressionError, match="unknown function"):
        compile_expression("__import__('os')")
    # A long flat chain is one node evaluated in a loop, never a recursion past Python's limit
    chain = " or ".join(["f"] * (MAX_LENGTH // 5))
    assert evaluate(compile_expression(chain), {}) is False


# -- the form OpenWOP defines ----------------------------------------------------------------------------------------

EDGE_SCHEMA = "workflow-definition.edge-extract.schema.json"


def test_edges_and_conditions_take_the_form_openwop_defines():
    # Our model reads exactly the fields of OpenWOP's EdgeCondition and WorkflowEdge
    condition = schemas.load(EDGE_SCHEMA)["$defs"]["EdgeCondition"]
    assert set(EdgeCondition.model_fields) == set(condition["properties"])
    assert set(condition["properties"]["type"]["enum"]) == {*KINDS, "regex"}
    edge = schemas.load(EDGE_SCHEMA)["$defs"]["WorkflowEdge"]
    assert set(Edge.model_fields) == set(edge["properties"])
    # And the refund example's edges are valid OpenWOP edges
    example = refund_definition()
    validator = schemas.validator(EDGE_SCHEMA)
    assert [schemas.errors_of(validator, e) for e in example["edges"]] == [[]] * len(example["edges"])
    assert sum("condition" in e for e in example["edges"]) == 2


@pytest.mark.parametrize("value", [[], {}])
def test_an_empty_list_or_object_is_truthy_to_the_truthy_type_and_false_to_an_expression(value):
    # Two rules on purpose (ADR 0094): the condition types follow JavaScript as the RFC says, the expression
    # language keeps the rule ModuleX conditionals were written against.
    assert holds(condition(type="truthy", left="v"), {"v": value}) is True
    assert holds(condition(expression="v"), {"v": value}) is False
    assert holds(condition(expression="not v"), {"v": value}) is True
