"""The suite's own scheduling list (tests/conftest.py) names files that exist: a renamed file would silently lose
its place at the front."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST
from tests.support.local_stack import REPO


def test_every_file_put_first_exists() -> None:
    assert [path for path in LONGEST_FIRST if not (REPO / path).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
