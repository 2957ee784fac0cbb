"""docs/scale.md prints the table's key layout as store/layout.py declares it (scripts/key_layout.py writes it)."""

from __future__ import annotations

import sys
from pathlib import Path

from interlude.store import layout

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import key_layout  # noqa: E402


def test_docs_scale_prints_the_key_layout_the_code_declares():
    assert key_layout.written(key_layout.DOC.read_text()) == key_layout.block()


def test_the_printed_layout_is_the_one_layout_py_builds():
    """The table is the docstring's: each key it shows is the one layout.py's functions make, filled in."""
    built = {
        layout.run_pk("{tenant}/{run}"): layout.RUN_SK,
        layout.workflow_pk("{tenant}", "{workflow}"): layout.WORKFLOW_LATEST_SK,
        layout.api_key_pk("{keyId}"): layout.API_KEY_SK,
        layout.console_session_pk("{tenant}", "{sid}"): layout.CONSOLE_SESSION_SK,
        layout.catalogue_pk("{tenant}"): "{workflow}",
        layout.listing_bookmark_pk("{tenant}", "{listing}"): "{offset:012}",
        layout.live_connection_pk("{connectionId}"): layout.LIVE_CONNECTION_SK,
        layout.followers_pk("{tenant}/{run}"): layout.FOLLOWERS_SK,
    }
    rows = [line.split() for line in key_layout.block().splitlines()]
    printed = {(words[i], words[i + 1]) for words in rows for i in range(len(words) - 1)}
    assert [pair for pair in built.items() if pair not in printed] == []
