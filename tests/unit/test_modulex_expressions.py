"""The conditional node's expression language: what it computes, and what it refuses to parse."""

from __future__ import annotations

import pytest

from interlude.faces.modulex.expressions import ExpressionError, compile_expression, evaluate
from interlude.faces.modulex.references import engine_id, modulex_id, render

SCOPE = {
    engine_id("node_approval"): {"approved": True, "notes": "ok", "n": 3},
    engine_id("node_draft"): "Dear customer",
    "inputs": {"priority": "high", "amount": 120},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{node_approval.approved}} == true", True),
        ("node_approval.approved == true and node_approval.n >= 3", True),
        ("node_approval.approved == 1", False),  # booleans are not numbers
        ("not node_approval.approved || false", False),
        ("input.priority in ['high', 'urgent']", True),
        ("priority not in ['low']", True),  # a bare field of the run input
        ("len(node_draft) > 5 && startswith(node_draft, 'Dear')", True),
        ("input.amount * 2 - 40 == 200", True),
        ("-input.amount < 0", True),
        ("node_missing.x == null", True),  # unresolvable is null
        ("input.amount / 0 == null", True),  # arithmetic that makes no sense is null, not an exception
        ("'a' < 1", None),  # so is an ordering of unlike values
        ("lower('ABC') == \"abc\" and (1 + 2) * 3 == 9", True),
        ("contains(node_approval.notes, 'o') and 2 >= 2.0", True),
    ],
)
def test_expressions_evaluate(text, expected):
    assert evaluate(compile_expression(text), SCOPE) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1 +",
        "(1",
        "a ==",
        "__import__('os')",
        "open('x')",
        "a.b(",
        "x = 1",
        "1 ; 2",
        "{{a}",
        "'" + "x" * 3000 + "'",
    ],
)
def test_syntax_errors_and_unknown_functions_are_refused(text):
    with pytest.raises(ExpressionError):
        compile_expression(text)


def test_deep_nesting_is_refused_not_a_recursion_error():
    with pytest.raises(ExpressionError):
        compile_expression("(" * 100 + "1" + ")" * 100)


def test_modulex_ids_survive_the_engine_id_grammar():
    for mx in ("node_draft", "a.b-c:d", "über", "x~y", "__start__"):
        escaped = engine_id(mx)
        assert all(c.isalnum() and c.isascii() or c in "._~:-" for c in escaped)
        assert modulex_id(escaped) == mx


def test_references_resolve_whole_values_and_ones_with_no_value_are_blank():
    assert render("{{node_approval.approved}}", SCOPE) is True
    assert render("Draft: {{node_draft}} / {{node_nope.x}}", SCOPE) == "Draft: Dear customer / "
    assert render("{{node_nope.x}}", SCOPE) is None
    assert render("{{input.amount}}", SCOPE) == 120
    assert render({"a": ["{{node_approval.n}}"]}, SCOPE) == {"a": [3]}
