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


def test_keyed_ids_reads_back_the_ids_the_key_and_connection_keys_were_made_of():
    """A tenant's deletion closes the connections and counts the keys it deleted by the ids their keys hold
    (app/tenant_lifecycle.py): the inverse of api_key_pk and live_connection_pk, whatever else the page held."""
    keys = [
        {"pk": {"S": layout.api_key_pk("k1")}, "sk": {"S": layout.API_KEY_SK}},
        {"pk": {"S": layout.live_connection_pk("c#1=")}, "sk": {"S": layout.LIVE_CONNECTION_SK}},
        {"pk": {"S": layout.run_pk("acme/r1")}, "sk": {"S": layout.RUN_SK}},
        {"pk": {"S": layout.followers_pk("acme/r1")}, "sk": {"S": layout.FOLLOWERS_SK}},
    ]
    assert layout.keyed_ids(keys) == layout.KeyedIds(connections=["c#1="], api_keys=["k1"])
