"""Server-sent event streams over the run's event log, for a platform that buffers each response.

API Gateway (HTTP API) hands a Lambda's response to the client only when the function returns, so a
stream cannot stay open: each request sends what the log holds after the client's cursor, waits a bounded
time for more, and ends with a `retry:` hint. The client reconnects with `Last-Event-ID` (the sequence of
the last frame it saw) and loses nothing, because the log is the stream: every frame is re-derived from it.

`follow` is the loop (pure: the reads, the clock and the sleep are passed in); `frame`, `comment` and
`retry` write the SSE wire format. Both faces (OpenWOP `GET /runs/{runId}/events`, ModuleX
`GET /workflows/listen/{run_id}`) use them over the same log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from interlude.domain.budgets import MAX_ANSWER_BYTES, first_page
from interlude.engine.events import RUN_END_EVENTS

# OpenWOP asks for a keep-alive comment at least every 30 s; we write one every 15 s of waiting.
KEEPALIVE_SECONDS = 15.0
# RFC 0247 §A: a host does not end an opted-in (resumable=true) stream within 15 s of opening it unless it
# has sent a frame; the Python client reads an earlier frame-less close as "the run is terminal".
RESUMABLE_FLOOR_SECONDS = 15.5
FIRST_POLL_SECONDS = 0.1
MAX_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Bounds:
    """How long one request may last (see README, "Live event streams")."""

    # Longest a request waits when it has nothing to send (API Gateway cuts integrations at 30 s).
    hold_s: float
    # Once a request has sent a frame, it ends when no further event arrives within this window.
    linger_s: float
    # The `retry:` hint (milliseconds) a request ends with when the run is not finished.
    retry_ms: int

    def for_resumable(self) -> Bounds:
        return Bounds(max(self.hold_s, RESUMABLE_FLOOR_SECONDS), self.linger_s, self.retry_ms)


def follow(
    read: Callable[[int], list[dict[str, Any]]],
    after: int,
    run_terminal: bool,
    bounds: Bounds,
    on_events: Callable[[list[dict[str, Any]]], int],
    on_keepalive: Callable[[], None],
    already_sent: bool = False,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    answer_bytes: int = MAX_ANSWER_BYTES,
) -> str:
    """Read events after `after` (exclusive) until the terminal event or the request's bounds.

    `on_events` writes the frames for a batch of events and returns how many it wrote (a mode may admit
    none of them); `on_keepalive` writes a keep-alive while waiting. Returns "terminal" when the run's
    terminal event was passed on (or the run had already ended and nothing follows the cursor: that ends
    at once, without a frame — OpenWOP §Last-Event-ID), else "bounded". `already_sent`: the caller wrote
    a frame before following (the request then lingers instead of holding). `answer_bytes`: the events one
    request passes on stay within it (a long log is sent over several requests, each far under API Gateway's
    6 MB answer); the request that reaches it ends "bounded" after the last event that fits.
    """
    start = clock()
    last_sent: float | None = start if already_sent else None
    next_keepalive = start + KEEPALIVE_SECONDS
    cursor = after
    delay = FIRST_POLL_SECONDS
    remaining = answer_bytes
    while True:
        read_docs = read(cursor)
        docs = first_page(read_docs, remaining) if read_docs else read_docs
        if docs:
            cursor = docs[-1]["sequence"]
            remaining -= _size(docs)
            delay = FIRST_POLL_SECONDS
            if on_events(docs) > 0:
                last_sent = clock()
            if any(d["type"] in RUN_END_EVENTS for d in docs):
                return "terminal"
            if len(docs) < len(read_docs) or remaining <= 0:
                return "bounded"
        elif run_terminal:
            return "terminal"
        now = clock()
        if last_sent is not None and now - last_sent >= bounds.linger_s:
            return "bounded"
        if now - start >= bounds.hold_s:
            return "bounded"
        if now >= next_keepalive:
            next_keepalive += KEEPALIVE_SECONDS
            on_keepalive()
        wake = min(start + bounds.hold_s, next_keepalive)
        if last_sent is not None:
            wake = min(wake, last_sent + bounds.linger_s)
        sleep(max(0.0, min(delay, wake - now)))
        delay = min(delay * 1.5, MAX_POLL_SECONDS)


def _size(docs: list[dict[str, Any]]) -> int:
    return sum(len(_json(doc).encode()) + 1 for doc in docs)


def _json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def frame(
    data: Any, *, event: str | None = None, id: int | str | None = None, retry: int | None = None  # noqa: A002
) -> str:
    """One SSE frame; the JSON is written on one line, so `data:` is a single field. `retry`: the reconnection
    hint as a field of this frame (a block of `retry:` alone is an event with empty data to some parsers)."""
    lines = []
    if id is not None:
        lines.append(f"id: {id}")
    if event is not None:
        lines.append(f"event: {event}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    lines.append(f"data: {_json(data)}")
    return "\n".join(lines) + "\n\n"


def comment(text: str) -> str:
    return f": {text}\n\n"


def retry(ms: int) -> str:
    return f"retry: {ms}\n\n"


def parse_last_event_id(raw: str | None) -> int | None:
    """None when absent; the integer when it is a non-negative integer; ValueError otherwise."""
    if raw is None or raw.strip() == "":
        return None
    text = raw.strip()
    if not text.isdigit() or len(text) > 15:
        raise ValueError(text)
    return int(text)
