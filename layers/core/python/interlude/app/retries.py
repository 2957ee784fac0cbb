"""Optimistic writes retry a bounded number of times; past that the caller hears a retryable refusal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlude.domain.errors import Conflict, Unavailable

if TYPE_CHECKING:
    from interlude.store.transactions import LostRace

MAX_RACE_RETRIES = 8


def busy(message: str) -> Unavailable:
    """Too many concurrent writers won the race in a row: a retryable refusal, never a wrong answer."""
    return Unavailable(message, retry_after_s=1)


def closed_meanwhile(lost: LostRace) -> None:
    """A write to an open gate lost its race: 409 interrupt_already_resolved when the gate closed meanwhile (the
    failed condition tells what won, no further read); otherwise the caller reads the run again and retries."""
    old = lost.interrupt_old_image()
    if old is not None and old.get("status") != "open":
        raise Conflict("the interrupt was resolved meanwhile", code="interrupt_already_resolved") from None
