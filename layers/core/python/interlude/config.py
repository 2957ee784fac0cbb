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
    # How long a warm function reuses the key ring it read (a retired kid stops verifying within this time).
    key_ring_cache_seconds: int = 60
    # SSE streams behind a buffering gateway (interlude.streaming.Bounds): the longest one request waits with
    # nothing to send, how long it lingers for more once it has sent a frame, and the `retry:` hint it ends with.
    stream_hold_seconds: float = 20.0
    stream_linger_seconds: float = 0.5
    stream_retry_ms: int = 1000

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
            key_ring_cache_seconds=int(os.environ.get("INTERLUDE_KEY_RING_CACHE_SECONDS", "60")),
            stream_hold_seconds=min(25.0, float(os.environ.get("INTERLUDE_STREAM_HOLD_SECONDS", "20"))),
            stream_linger_seconds=float(os.environ.get("INTERLUDE_STREAM_LINGER_SECONDS", "0.5")),
            stream_retry_ms=int(os.environ.get("INTERLUDE_STREAM_RETRY_MS", "1000")),
        )


@cache
def settings() -> Settings:
    return Settings.from_env()
