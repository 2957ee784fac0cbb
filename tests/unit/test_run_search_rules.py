"""The words a run's title is found by, and the time bounds a listing and the CLI take (issue 29, items 1 and 4)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from interlude.cli.client import CliError
from interlude.cli.lifecycle import instant_of
from interlude.domain.errors import Invalid
from interlude.rules import run_search


def test_a_title_is_split_into_whole_case_folded_words() -> None:
    assert run_search.words("refundApproval: Check the INVOICE, 2150 EUR – Zürich a") == [
        "refund", "approval", "check", "the", "invoice", "2150", "eur", "zürich",
    ]
    assert run_search.name_words("refund-approval", "Refund approval") == ["refund", "approval"]
    assert run_search.words("x" * 40) == ["x" * run_search.MAX_WORD_LENGTH]


def test_a_query_asks_every_word_it_holds() -> None:
    assert run_search.query_words("Refund  invoice") == ("refund", "invoice")
    for bad in ("", "- .", "one two three four five six", "x" * 129):
        with pytest.raises(Invalid):
            run_search.query_words(bad)


@pytest.mark.parametrize(
    ("given", "bound"),
    [
        ("2026-12-05T10:00:00+02:00", "2026-12-05T08:00:00.000Z"),
        ("2026-12-05t08:00:00.5z", "2026-12-05T08:00:00.500Z"),
    ],
)
def test_a_time_bound_is_the_index_s_own_form(given: str, bound: str) -> None:
    assert run_search.query_instant(given, "createdAfter") == bound


@pytest.mark.parametrize("given", ["2026-12-05T10:00:00", "2026-12-05", "yesterday", "0001-01-01T00:00:00+01:00"])
def test_a_time_without_its_offset_or_out_of_range_is_refused(given: str) -> None:
    with pytest.raises(Invalid) as refused:
        run_search.query_instant(given, "createdBefore")
    assert refused.value.details == {"field": "createdBefore"}


def test_the_cli_takes_a_time_a_date_or_a_time_ago() -> None:
    now = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    assert instant_of("90m", "--since", now) == "2026-12-05T10:30:00.000Z"
    assert instant_of("7d", "--since", now) == "2026-11-28T12:00:00.000Z"
    assert instant_of("2026-12-01", "--until") == "2026-12-01T00:00:00.000+00:00"
    assert instant_of("2026-12-01T09:00:00+01:00", "--until") == "2026-12-01T09:00:00.000+01:00"
    with pytest.raises(CliError, match="--since takes"):
        instant_of("last week", "--since", now)
