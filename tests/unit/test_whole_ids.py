"""Issue 26, S8: every id and name grammar matches whole strings. Python's `$` also matches before a trailing newline,
so the package never calls a pattern's `match` with one argument unless the pattern ends the text itself (`\\Z`,
domain.ids.whole) or is a detector for which matching more is the safe side."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import interlude
from interlude.domain import ids

PACKAGE = Path(interlude.__file__).parent
# Patterns whose one-argument `match` is fine: whole by construction (domain.ids), or a credential-name detector
# (rules/interrupts/secrets.py) that should rather catch "password\n" too.
WHOLE_BY_CONSTRUCTION = {
    name for name, value in vars(ids).items() if isinstance(value, re.Pattern) and value.pattern.endswith("\\Z")
}
DETECTORS = {"_KEY_RE"}


def one_argument_matches(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "match"):
            continue
        receiver = node.func.value
        name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "?")
        if name == "re" or (len(node.args) == 1 and not node.keywords):
            found.append((node.lineno, name))
    return found


def test_no_id_pattern_is_matched_by_its_prefix_anywhere_in_the_package() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line} {name}.match"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name in one_argument_matches(ast.parse(path.read_text(), str(path)))
        if name not in WHOLE_BY_CONSTRUCTION | DETECTORS
    ]
    assert offenders == []


def test_the_scan_sees_a_prefix_match() -> None:
    caught = one_argument_matches(ast.parse("ID_RE.match(value)\nre.match(r'^a$', v)\nX.fullmatch(v)\nY.match(t, 3)"))
    assert caught == [(1, "ID_RE"), (2, "re")]


@pytest.mark.parametrize(
    ("pattern", "good"),
    [
        (ids.TENANT_RE, "acme"),
        (ids.TENANT_BOUND_RE, "acme/0123456789abcdef"),
        (ids.AUTHOR_ID_RE, "nl-wf"),
        (ids.SUBJECT_ID_RE, "alice"),
    ],
)
def test_the_id_grammars_refuse_a_trailing_newline_whichever_method_is_called(pattern: re.Pattern[str], good: str) -> None:
    assert pattern.match(good)
    for bad in (good + "\n", good + "\n\n", "\n" + good):
        assert not pattern.match(bad), repr(bad)
        assert not pattern.search(bad), repr(bad)


def test_the_exported_grammars_are_whole_by_construction() -> None:
    assert {"TENANT_RE", "TENANT_BOUND_RE", "AUTHOR_ID_RE", "SUBJECT_ID_RE"} <= WHOLE_BY_CONSTRUCTION


def test_a_subject_id_holds_no_control_character() -> None:
    for bad in ("\x00", "al\x00ice", "alice\x1b", "a\x7f", "a\x85b", "a/b", "a b"):
        assert not ids.SUBJECT_ID_RE.match(bad), repr(bad)
    assert ids.SUBJECT_ID_RE.match("urn:example:alice@example.com")
