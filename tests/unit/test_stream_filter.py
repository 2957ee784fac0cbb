"""The local stream pump applies the deployed mapping's filter (wiring.STREAM_FILTER) to the same records."""

from __future__ import annotations

import pytest

from interlude import wiring
from interlude.store.stream import is_event_insert, matches


def record(event_name: str, sk: str) -> dict:
    image = {wiring.PARTITION_KEY: {"S": "T#t#R#r"}, wiring.SORT_KEY: {"S": sk}}
    return {"eventName": event_name, "dynamodb": {"Keys": image, "NewImage": image}}


@pytest.mark.parametrize(
    ("event_name", "sk", "passes"),
    [
        ("INSERT", "E#000000000003", True),
        ("MODIFY", "E#000000000003", False),  # an event batch is written once; a rewrite is not new
        ("INSERT", "RUN", False),
        ("MODIFY", "RUN", False),
        ("INSERT", "I#t/r:gate:1", False),
        ("INSERT", "2026-12-01T00:00:00.000Z#t/i", False),  # an inbox entry
        ("REMOVE", "E#000000000003", False),
    ],
)
def test_only_new_event_log_items_reach_dispatch(event_name, sk, passes):
    assert is_event_insert(record(event_name, sk)) is passes


def test_the_matcher_reads_prefixes_exact_values_and_missing_fields():
    assert matches({"a": [{"prefix": "E#"}]}, {"a": "E#1"})
    assert not matches({"a": [{"prefix": "E#"}]}, {"a": 1})
    assert matches({"a": ["x", "y"]}, {"a": "y"})
    assert not matches({"a": {"b": ["x"]}}, {"c": 1})
    assert not matches({"a": {"b": ["x"]}}, {"a": "x"})
