"""What a delivery's queued message says of its record (store/layout.py): the table it is in, and what it is created
with to expire (ADR 0178)."""

from __future__ import annotations

from typing import Any

import pytest

from interlude.store.layout import CREATED_EXPIRY, SECOND, marked_message, message_created_expiry, message_table


@pytest.mark.parametrize(
    ("said", "read"),
    [
        ({"ttl": 1_805_000_000}, (1_805_000_000,)),
        ({}, ()),
        # what this release does not read, or a message that says nothing: its ledger reads the run's head
        ({"ttl": "1805000000"}, None),
        ({"ttl": True}, None),
        ({"ttl": 1, "later": 2}, None),
        ([1_805_000_000], None),
    ],
)
def test_a_message_says_what_its_record_is_created_with_to_expire(said: Any, read: tuple[int, ...] | None) -> None:
    assert message_created_expiry({CREATED_EXPIRY: said}) == read


def test_a_message_that_says_nothing_of_its_records_expiry_leaves_it_to_the_head() -> None:
    message = marked_message({"v": 1, "tenant": "t"}, SECOND)
    assert message_created_expiry(message) is None
    assert message_table(message) == SECOND
