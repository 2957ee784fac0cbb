"""The suite's own scheduling list (tests/conftest.py) names files that exist: a renamed file would silently lose
its place at the front."""

from __future__ import annotations

from tests.conftest import INFRA, LONGEST_FIRST, scheduling_unit
from tests.support.local_stack import REPO


def test_every_file_put_first_exists() -> None:
    assert [path for path in LONGEST_FIRST if not (REPO / path).exists()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_the_infra_files_are_one_unit_and_every_other_file_its_own() -> None:
    # One worker takes every infra module, so each app is synthesized once per run (tests/infra/conftest.py).
    assert scheduling_unit("tests/infra/test_stack.py") == scheduling_unit("tests/infra/test_layer.py") == INFRA
    assert scheduling_unit("tests/e2e/test_readme.py") == "tests/e2e/test_readme.py"


def makefile_list(name: str) -> list[str]:
    """A Makefile variable's paths (`NAME := a b \\` and its continuation lines)."""
    lines = (REPO / "Makefile").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} :="))
    text = lines[at].partition(":=")[2]
    while text.endswith("\\"):
        at += 1
        text = text[:-1] + " " + lines[at]
    return text.split()


def test_every_file_left_to_the_runtime_pass_exists_and_that_pass_runs_it() -> None:
    # `make test` runs RUNTIME_ONLY on the functions' runtime Python alone (its second pass: tests/unit and
    # tests/integration); a renamed file would come back into the first pass, a file elsewhere would run in neither.
    runtime_only = makefile_list("RUNTIME_ONLY")
    assert runtime_only
    assert [path for path in runtime_only if not (REPO / path).is_file()] == []
    assert [path for path in runtime_only if not path.startswith(("tests/unit/", "tests/integration/"))] == []


def test_every_development_side_integration_file_exists() -> None:
    # The integration files the first pass runs on the development Python besides the runtime pass (ADR 0149): a
    # renamed one would silently run on the runtime's Python alone.
    development_side = makefile_list("DEVELOPMENT_SIDE")
    assert development_side
    assert [path for path in development_side if not (REPO / path).is_file() or not path.startswith("tests/integration/")] == []
