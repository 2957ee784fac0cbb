"""Issue 26, S8: every id and name grammar matches whole strings. Python's `$` also matches before a trailing newline,
so the package never matches a pattern anchored with `$` by its prefix (`re.match`, a one-argument `match`) unless
the pattern ends the text itself (`\\Z`, domain.ids.whole) or is a detector for which matching more is the safe side."""

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


def compiled_patterns(tree: ast.AST) -> dict[str, str]:
    """Module-level `NAME = re.compile("literal", ...)` of a file: name → pattern text."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and ast.unparse(value.func) == "re.compile" and value.args:
                text = value.args[0]
                if isinstance(text, ast.Constant) and isinstance(text.value, str):
                    found[node.targets[0].id] = text.value
    return found


def prefix_matches(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls that match a pattern anchored at the end (`$`) by its prefix: `re.match(pattern, s)` and a pattern's
    one-argument `match(s)`, unless the pattern is known whole (domain.ids) or known to hold no `$` (a parse of a
    string's head, such as a version's major number). A pattern this cannot read counts as anchored."""
    patterns = compiled_patterns(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "match"):
            continue
        receiver = node.func.value
        name = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "?")
        if name == "re":
            text = node.args[0] if node.args else None
            if not (isinstance(text, ast.Constant) and isinstance(text.value, str) and "$" not in text.value):
                found.append((node.lineno, name))
        elif len(node.args) == 1 and not node.keywords and name not in WHOLE_BY_CONSTRUCTION | DETECTORS:
            anchored = "$" in patterns.get(name, "$")
            if anchored:
                found.append((node.lineno, name))
    return found


def test_no_id_pattern_is_matched_by_its_prefix_anywhere_in_the_package() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line} {name}.match"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name in prefix_matches(ast.parse(path.read_text(), str(path)))
    ]
    assert offenders == []


def test_the_scan_sees_a_prefix_match() -> None:
    source = """
ID_RE = re.compile(r"^[a-z]+$")
HEAD_RE = re.compile(r"v([0-9]+)")
ID_RE.match(value)
re.match(r"^a$", v)
re.match(pattern, v)
X.fullmatch(v)
Y.match(t, 3)
HEAD_RE.match(v)
re.match(r"v([0-9]+)[.]", v)
IMPORTED_RE.match(v)
"""
    assert prefix_matches(ast.parse(source)) == [(4, "ID_RE"), (5, "re"), (6, "re"), (11, "IMPORTED_RE")]


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
