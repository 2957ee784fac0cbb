"""When a run's end leaves its retention turn nothing to write, decided on the head dispatch read with the end's batch
(app/retention.py `ended_with_nothing_to_write`, ADR 0176): each condition that sends the turn to read the run's items
(tests/integration/test_retention.py shows both outcomes end to end)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from interlude.app.retention import ended_with_nothing_to_write
from interlude.domain.clock import iso
from interlude.domain.models.run import RunState
from interlude.engine.effect_names import NODE_RETRIED, RERUN_REASON
from interlude.rules import run_search
from interlude.store.retention import RESTAMPING, RetainedRun

DAY_S = 24 * 3600
CREATED = 1_800_000_000
RETENTION_DAYS = 90
# Its search entries' provisional expiry, as a run created at CREATED under 90 days' retention is given it.
SEARCH_EXPIRY = CREATED + (RETENTION_DAYS + run_search.SEARCH_ENTRY_MARGIN_DAYS) * DAY_S


def instant(epoch_s: int) -> str:
    return iso(datetime.fromtimestamp(epoch_s, UTC))


def ended(after_s: int = 3600, **changes: Any) -> RetainedRun:
    """A run created at CREATED that completed `after_s` later in its transition of sequences 5–7, its head as that
    transition left it: its expiry its end + 90 days."""
    completed = CREATED + after_s
    state = RunState.model_validate(
        {
            "runId": "t/r",
            "tenant": "t",
            "workflowId": "w",
            "workflowVersion": 1,
            "owner": {},
            "status": "completed",
            "createdAt": instant(CREATED),
            "completedAt": instant(completed),
            "searchExpiry": SEARCH_EXPIRY,
            "nextSeq": 8,
            **changes,
        }
    )
    return RetainedRun.of(state, 3, completed + RETENTION_DAYS * DAY_S, None)


def ending_events(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": "node.completed", "sequence": 5},
        *extra,
        {"type": "interrupt.resolved", "sequence": 6},
        {"type": "run.completed", "sequence": 7},
    ]


def test_a_run_that_ended_within_its_items_margin_in_this_transition_leaves_its_turn_nothing_to_write() -> None:
    assert ended_with_nothing_to_write(ended(), ending_events())
    # its last day within the margin too
    assert ended_with_nothing_to_write(ended(run_search.ITEMS_MARGIN_DAYS * DAY_S), ending_events())


@pytest.mark.parametrize(
    ("why", "run", "events"),
    [
        ("ended past its items' margin", ended(run_search.ITEMS_MARGIN_DAYS * DAY_S + 1), ending_events()),
        ("runs again", replace(ended(), state=ended().state.model_copy(update={"status": "running"})), ending_events()),
        ("the head has no expiry yet", replace(ended(), ttl=None), ending_events()),
        ("a re-stamp is under way", replace(ended(), stamped=RESTAMPING), ending_events()),
        ("a re-stamp made it whole", replace(ended(), stamped=ended().ttl), ending_events()),
        ("created before its items had a provisional expiry", ended(searchExpiry=None), ending_events()),
        ("the head moved past this transition", ended(nextSeq=9), ending_events()),
        ("these events do not end it", ended(), [{"type": "node.completed", "sequence": 7}]),
        (
            # its tenant's retentionDays cut to 1 since its creation: within its margin, but ended with its items'
            # provisional expiry near, so a task it made then has none (rules/run_search.tasks_stamped_at_end)
            "ended 70 days in, its expiry a day later",
            replace(ended(70 * DAY_S), ttl=CREATED + 71 * DAY_S),
            ending_events(),
        ),
        (
            "this transition also ran it again",
            ended(),
            ending_events({"type": NODE_RETRIED, "sequence": 5, "payload": {"reason": RERUN_REASON}}),
        ),
    ],
)
def test_a_run_whose_turn_may_have_items_to_write_has_them_read(why: str, run: RetainedRun, events: list[Any]) -> None:
    assert not ended_with_nothing_to_write(run, events), why
