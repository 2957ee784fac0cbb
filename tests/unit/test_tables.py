"""The deployment's two tables (docs/adr/0161), declared once in wiring and required by every store."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.store.table import Table


def test_the_second_table_is_declared_beside_the_first_with_no_stream_and_no_index():
    assert wiring.TABLES == (wiring.TABLE, wiring.ENTRIES_TABLE)
    second = wiring.ENTRIES_TABLE
    assert (second.logical_name, second.output, second.env) == ("EntriesTable", "EntriesTableName", "ENTRIES_TABLE_NAME")
    assert (second.stream_view, second.global_indexes) == (None, ())
    assert wiring.key_attributes(second) == [(wiring.PARTITION_KEY, "S"), (wiring.SORT_KEY, "S")]


@pytest.mark.parametrize("spec", wiring.FUNCTIONS, ids=lambda spec: spec.name)
def test_a_function_has_on_the_second_table_only_verbs_it_has_on_the_first(spec):
    # The moved families' items are worked on there as they were on the first table: no new verb comes with the move.
    assert set(spec.entries_table_actions) <= set(spec.table_actions)


def test_a_store_refuses_to_start_without_the_second_tables_name():
    # Never the first table's items' home by default: a deployment must not write entries there for want of a name.
    for missing in ("", None, object()):  # object(): a client passed where the name goes (the one-table signature)
        with pytest.raises(TypeError, match="the second table's name is required"):
            Table("interlude", missing)  # type: ignore[arg-type]


def test_only_the_api_and_the_entries_move_put_into_the_second_table_and_no_function_batch_reads_it():
    # The Puts the second table receives are inbox entries' in a transaction: a gate-assigned event's
    # (store/transitions.transition_items), which only a claim, release or assignment makes (app/claims.py: the api's
    # routes and console), and migration 0011's, which moves a gate's entries there with its marks (ADR 0170); a
    # delivery record is created and updated with UpdateItem (store/leases). No path of this release or of 0.5.0 sends
    # the second table a BatchGetItem (ADR 0161, "Grants no call used").
    putting = {spec.name for spec in wiring.FUNCTIONS if "dynamodb:PutItem" in spec.entries_table_actions}
    batch_reading = {spec.name for spec in wiring.FUNCTIONS if "dynamodb:BatchGetItem" in spec.entries_table_actions}
    assert (putting, batch_reading) == ({"api", "migrate"}, set())
