"""Optimistic writes retry a bounded number of times; past that the caller hears a retryable refusal."""

from __future__ import annotations

from interlude.domain.errors import ApiError

MAX_RACE_RETRIES = 8


def busy(message: str) -> ApiError:
    """Too many concurrent writers won the race in a row: a retryable refusal, never a wrong answer."""
    return ApiError("runner_unavailable", message, headers={"Retry-After": "1"})
