"""Settings read once per process from the environment (validated at cold start)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Settings:
    table_name: str
    step_budget: int
    # Longest a poll request may wait, bounded by API Gateway's 30 s integration timeout.
    max_poll_seconds: float
    # Secrets Manager secret holding the token key ring (interlude.tokens.keyring_store).
    key_ring_secret: str

    @staticmethod
    def from_env() -> Settings:
        table = os.environ.get("TABLE_NAME", "")
        if not table:
            raise RuntimeError("TABLE_NAME is not set")
        return Settings(
            table_name=table,
            step_budget=int(os.environ.get("INTERLUDE_STEP_BUDGET", "200")),
            max_poll_seconds=float(os.environ.get("INTERLUDE_MAX_POLL_SECONDS", "25")),
            key_ring_secret=os.environ.get("KEY_RING_SECRET", "interlude/token-keys"),
        )


@cache
def settings() -> Settings:
    return Settings.from_env()
