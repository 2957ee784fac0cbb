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


def test_every_file_left_to_the_runtime_pass_exists_and_that_pass_runs_it() -> None:
    # `make test` runs RUNTIME_ONLY on the functions' runtime Python alone (its second pass: tests/unit and
    # tests/integration); a renamed file would come back into the first pass, a file elsewhere would run in neither.
    line = next(line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("RUNTIME_ONLY :="))
    runtime_only = line.partition(":=")[2].split()
    assert runtime_only
    assert [path for path in runtime_only if not (REPO / path).is_file()] == []
    assert [path for path in runtime_only if not path.startswith(("tests/unit/", "tests/integration/"))] == []
