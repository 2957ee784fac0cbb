"""Strict JSON in and out (issue 11 finding 5): the edge's decoder, the approval page's JSON fields, expressions
that overflow, and every JSON writer of the package refusing NaN and Infinity."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from interlude.api import strict_json
from interlude.api.page.forms import FormError, resume_from_form
from interlude.app.streams import frame
from interlude.domain import written_numbers
from interlude.faces.modulex.expressions import ExpressionError, compile_expression, evaluate
from interlude.store.attributes import as_json, packed

PACKAGE = Path(strict_json.__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("NaN", "body"),
        ('{"a":{"b":[0,Infinity]}}', "a/b/1"),
        ('{"a":-Infinity}', "a"),
        ('{"a":1e309}', "a"),
        ('{"a":-2e308}', "a"),
        ('{"a":' + "1" * 310 + "}", "a"),
        ('{"a":' + "1" * 5000 + "}", "a"),
        ('{"a":1,"b":{"c":1,"c":2}}', "b"),
        ('{"a":1,"a":1}', "body"),
        ('{"a":"\\ud800"}', "a"),
        ('{"\\udfff":1}', "\\udfff"),
        ("[" * 66 + "]" * 66, "/".join(["0"] * 65)),
        ("[" * 100_000 + "]" * 100_000, "body"),
        ('{"a":1', "body"),
        ("", "body"),
    ],
)
def test_strict_decoding_refuses_naming_the_field(raw, field):
    with pytest.raises(strict_json.StrictJsonError) as refused:
        strict_json.loads(raw)
    assert refused.value.field == field


def test_strict_decoding_reads_every_finite_number_a_double_holds():
    raw = '{"max":1.7976931348623157e308,"min":5e-324,"neg":-0.0,"big":9223372036854775808,"e":1E+2,"u":"\\u202e😀"}'
    assert strict_json.loads(raw) == json.loads(raw)
    assert strict_json.loads('{"x":' + "9" * 308 + "}")["x"] == int("9" * 308)


def test_a_body_says_how_it_wrote_the_numbers_python_writes_back_otherwise_bounded():
    from interlude.api.page.text import Written, as_written, cell_of, spelled

    raw = '{"a": 1.50, "b": 1e3, "c": 12345678901234567890, "d": 0.1000, "e": 2.5, "f": 1.5000, "g": -0.0, "h": 7}'
    written = written_numbers.spellings(raw)
    # Only what reads back otherwise, the first spelling of a value winning; integers are kept exactly anyway
    assert written == {"1.5": "1.50", "1000.0": "1e3", "0.1": "0.1000"}
    assert written_numbers.spellings('{"n": 12, "s": "1.50"}') == {}
    many = "[" + ", ".join(f"{i}.50" for i in range(100)) + ", 3." + "0" * 60 + "]"
    assert len(written_numbers.spellings(many)) == written_numbers.MAX_SPELLINGS
    assert "3.0" not in written_numbers.spellings("[3." + "0" * 60 + "]")
    # Shown as written, computed with as the number it is
    value = spelled(strict_json.loads(raw), written)
    assert [as_written(value[k]) for k in "abcdeh"] == ["1.50", "1e3", "12345678901234567890", "0.1000", "2.5", "7"]
    assert value == json.loads(raw)
    assert isinstance(value["a"], Written)
    assert value["a"] * 2 == 3.0
    assert json.dumps(value["a"]) == "1.5"
    assert [r.cell.text for r in cell_of(value).rows][:4] == ["1.50", "1e3", "12345678901234567890", "0.1000"]
    assert spelled(value, {}) is value



def test_a_run_keeps_the_first_spelling_of_a_value_and_no_more_than_its_bound():
    from interlude.domain.budgets import MAX_WRITTEN_NUMBERS
    from tests.support.engine import new_state, noop, wf_of

    state = new_state(wf_of([noop("a")]), writtenNumbers={"1.5": "1.50"})
    assert state.with_written_numbers(None) is state
    kept = state.with_written_numbers({"1.5": "1.5000", "2.5": "2.50"})
    assert kept.writtenNumbers == {"1.5": "1.50", "2.5": "2.50"}
    assert state.writtenNumbers == {"1.5": "1.50"}
    full = kept.with_written_numbers({f"{i}.5": f"{i}.50" for i in range(10, 200)})
    assert len(full.writtenNumbers) == MAX_WRITTEN_NUMBERS
    assert full.with_written_numbers({"9.5": "9.50"}) is full


def test_the_approval_pages_json_fields_are_as_strict_as_a_body():
    bare = {"kind": "external-event", "key": "k", "data": {"eventType": "paid", "correlation": {}}}
    for raw in ('{"paid": NaN}', '{"paid": 1e400}', '{"paid": true, "paid": false}'):
        with pytest.raises(FormError) as refused:
            resume_from_form(bare, {"answer_json": [raw]})
        assert "not valid JSON" in refused.value.fields["answer_json"]


@pytest.mark.parametrize("text", ["1e308 * 10", "-1e308 * 10", 'float("inf")', 'float("nan")', "1e308 * 10 - 1e308 * 10"])
def test_expressions_never_yield_a_number_json_cannot_carry(text):
    # Float arithmetic overflows without raising; the expression language reads such a result as null.
    assert evaluate(compile_expression(text), {}) is None


def test_an_expression_literal_past_a_double_is_refused_at_registration():
    with pytest.raises(ExpressionError, match="not a finite number"):
        compile_expression("{{x}} > 1e400")


def test_what_is_stored_and_streamed_is_refused_rather_than_written_as_nan():
    for value in (math.nan, math.inf, -math.inf):
        for write in (as_json, packed, frame):
            with pytest.raises(ValueError, match="JSON compliant"):
                write({"x": value})


def json_writers_without_allow_nan_false() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        # Developer tooling (the CLI's printouts, the local stack's plumbing) writes nothing a client parses.
        if path.relative_to(PACKAGE).parts[0] in ("cli", "local"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("dump", "dumps")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "json"
                and not any(k.arg == "allow_nan" and getattr(k.value, "value", True) is False for k in node.keywords)
            ):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_every_json_writer_of_the_service_refuses_nan_and_infinity():
    assert json_writers_without_allow_nan_false() == []
