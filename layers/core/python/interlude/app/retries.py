"""Optimistic writes retry a bounded number of times; past that the caller hears a retryable refusal."""

from __future__ import annotations

from interlude.domain.errors import Unavailable

MAX_RACE_RETRIES = 8


def busy(message: str) -> Unavailable:
    """Too many concurrent writers won the race in a row: a retryable refusal, never a wrong answer."""
    return Unavailable(message, retry_after_s=1)
