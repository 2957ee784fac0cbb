"""The words a run's title is found by, and the time bounds a listing and the CLI take (issue 29, items 1 and 4)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from interlude.cli.client import CliError
from interlude.cli.lifecycle import instant_of
from interlude.domain import title_words
from interlude.domain.errors import Invalid
from interlude.rules import run_search

if TYPE_CHECKING:
    from interlude.domain.models.run import RunState


def test_a_title_is_split_into_whole_case_folded_words() -> None:
    assert run_search.words("refundApproval: Check the INVOICE, 2150 EUR – Zürich a") == [
        "refund", "approval", "check", "the", "invoice", "2150", "eur", "zürich",
    ]
    assert run_search.name_words("refund-approval", "Refund approval") == ["refund", "approval"]
    assert run_search.words("x" * 40) == ["x" * title_words.MAX_WORD_LENGTH]


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


CREATED = datetime(2026, 12, 1, tzinfo=UTC)


def created_run(retention_days: int, search_titles: bool = False, tags: list[str] | None = None) -> RunState:
    """A run created at CREATED by a tenant that keeps finished runs `retention_days`, as its creation indexes it."""
    from interlude.domain.models.run import RunState
    from interlude.rules.limits import Limits

    limits = Limits(10, 10, 10, 1024, 10, retention_days=retention_days)._replace(search_titles=search_titles)
    return RunState(
        runId="t1/r", tenant="t1", workflowId="refund-approval", workflowVersion=1, owner={}, tags=tags or [],
        createdAt="2026-12-01T00:00:00.000Z", **run_search.indexing(limits, CREATED),
    )


def test_a_run_is_indexed_by_title_words_only_where_its_tenant_asks_and_its_entries_expire_on_their_own() -> None:
    from interlude.rules.retention import DAY_S

    plain, titled = created_run(30, False, ["eu"]), created_run(30, True, ["eu"])
    assert run_search.creation_families(plain) == ["TAG#eu"]
    assert run_search.creation_families(titled) == ["TAG#eu", "TOK#refund", "TOK#approval"]
    assert run_search.gate_families(plain, [{"data": {"title": "Check the invoice"}}]) == []
    # Written with a provisional expiry: creation + retentionDays + the margin, which a run ending within the margin
    # does not pass (the retention job leaves its entries); one ending later has them written with its own.
    assert plain.searchExpiry == int(CREATED.timestamp()) + (30 + run_search.SEARCH_ENTRY_MARGIN_DAYS) * DAY_S
    ended_soon = int(CREATED.timestamp()) + 2 * DAY_S + 30 * DAY_S
    assert not run_search.stamped_at_end(plain, ended_soon)
    assert run_search.stamped_at_end(plain, plain.searchExpiry + 1)
    assert not run_search.stamped_at_end(plain, None)  # runs again: its entries keep their provisional expiry
    # A run created before either existed: indexed by its title words, its entries stamped when it ends.
    legacy = plain.model_copy(update={"searchExpiry": None})
    assert "TOK#refund" in run_search.creation_families(legacy)
    assert run_search.stamped_at_end(legacy, ended_soon)


def test_a_runs_listing_entry_keeps_its_provisional_expiry_unless_the_run_ends_or_waits_near_it() -> None:
    from interlude.rules.retention import DAY_S

    start = int(CREATED.timestamp())
    state = created_run(30)
    provisional = state.searchExpiry
    assert provisional is not None
    near = run_search.LISTING_KEPT_DAYS * DAY_S
    # A run that ends within the margin less the sweep's window leaves its entry as it was written
    assert not run_search.listing_stamped_at_end(state, provisional - near)
    # one that ends later, or was created before entries had an expiry, has it written, never sooner than it was
    assert run_search.listing_stamped_at_end(state, provisional - near + 1)
    assert run_search.listing_expiry(state, provisional - near + 1, start) == provisional
    assert run_search.listing_expiry(state, provisional + DAY_S, start) == provisional + DAY_S
    legacy = state.model_copy(update={"searchExpiry": None})
    assert run_search.listing_stamped_at_end(legacy, start + 31 * DAY_S)
    assert run_search.listing_expiry(legacy, start + 31 * DAY_S, start) == start + 31 * DAY_S
    # A run that runs again gets its provisional expiry back, or none once the daily sweep would take it off
    assert run_search.listing_expiry(state, None, start) == provisional
    assert not run_search.listing_kept_open(provisional, provisional - near)
    assert run_search.listing_kept_open(provisional, provisional - near + 1)
    assert run_search.listing_expiry(state, None, provisional - near + 1) is None


def test_a_runs_own_items_keep_their_provisional_expiry_unless_the_run_ends_past_it_or_waits_near_it() -> None:
    from interlude.rules.retention import DAY_S

    start = int(CREATED.timestamp())
    state = created_run(90)
    # The run's items are written to expire its creation + retentionDays + the items' margin
    provisional = run_search.items_expiry(state.searchExpiry)
    assert provisional == start + (90 + run_search.ITEMS_MARGIN_DAYS) * DAY_S
    assert run_search.items_expiry(None) is None
    # while that is not near; then without one (the daily sweep takes it off what has it)
    near = run_search.LISTING_KEPT_DAYS * DAY_S
    assert run_search.open_expiry(provisional, start) == provisional
    assert run_search.open_expiry(provisional, provisional - near) == provisional
    assert run_search.open_expiry(provisional, provisional - near + 1) is None
    assert run_search.open_expiry(None, start) is None
    # A run that ends within the margin keeps them; one that ends later, or has none, has every item written
    ended_soon = start + run_search.ITEMS_MARGIN_DAYS * DAY_S + 90 * DAY_S
    assert not run_search.items_stamped_at_end(provisional, ended_soon)
    assert run_search.items_stamped_at_end(provisional, ended_soon + 1)
    assert run_search.items_stamped_at_end(None, ended_soon)


def test_a_runs_tasks_are_written_at_its_end_when_its_items_are_or_when_it_ended_with_their_expiry_near() -> None:
    from interlude.domain.clock import iso_epoch
    from interlude.rules.retention import DAY_S

    start = int(CREATED.timestamp())
    provisional = run_search.items_expiry(created_run(90).searchExpiry)
    assert provisional is not None
    near = provisional - run_search.LISTING_KEPT_DAYS * DAY_S
    # A run whose items keep their provisional expiry (it ended within the margin) leaves its tasks, made with it
    assert not run_search.tasks_stamped_at_end(provisional, True, iso_epoch(start + DAY_S))
    assert not run_search.tasks_stamped_at_end(provisional, True, iso_epoch(near))
    # unless it ended with that expiry near: a task made then, or kept by the daily sweep, has none
    assert run_search.tasks_stamped_at_end(provisional, True, iso_epoch(near + 1))
    # A run whose every item is written (ended past the margin, re-stamped, running again) has its tasks written
    assert run_search.tasks_stamped_at_end(provisional, False, iso_epoch(start + DAY_S))
    assert run_search.tasks_stamped_at_end(None, True, iso_epoch(start + DAY_S))
