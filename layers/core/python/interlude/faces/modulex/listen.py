"""One response of `GET /workflows/listen/{run_id}`, written so that a client which never pages can act on it.

A response is bounded (interlude.app.streams: its time, and MAX_ANSWER_BYTES of events), and ModuleX's SDKs send no
Last-Event-ID: each `listen()` starts again from the run's first frame, reads until the response ends and stops after
`done`, `error`, `cancelled` or `interrupted`. So, for a client that sends no Last-Event-ID:

* the history leaves out the `interrupt` frame of every gate a later event closed (its answer, its node cancelled, the
  run's end). A resume answers with the run's own id, which the client listens to again (ModuleX's answers a new
  run's, whose stream starts after the resume): replayed, the answered question would be the first it reads, and a
  client that acts on it would take the run for waiting where it no longer does. The `resumed` frame still tells what
  was answered;
* a history past one answer is sent as its first frame (`metadata`), a `history_skipped` frame saying how many frames
  are left out and the Last-Event-ID that reads them, then the newest frames that fit: every response reaches the
  present (the interrupt the run waits on, or its end), where sending the history from its start would stop at the
  same place every time;
* a response that ends while the run waits on an interrupt, nothing left unsent, ends with `interrupted`, which the
  SDKs stop on, saying what to do; one that ends while the run runs ends with a heartbeat (the SDKs skip it).

A client that sends Last-Event-ID reads every frame after it, a page at a time, as on the OpenWOP stream. Every
response that does not end with the run's end carries the `retry:` hint on its last frame (a `retry:` block of its own
would reach modulex-python as a `message` with no data).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from interlude.app import streams as streaming
from interlude.domain.budgets import MAX_ANSWER_BYTES, answer_bytes, first_page, last_page
from interlude.domain.models.run import RunState
from interlude.engine.events import RUN_END_EVENTS
from interlude.faces.modulex import frames
from interlude.faces.modulex.frames import RunView

Read = Callable[[int], list[dict[str, Any]]]


def closed_gates(history: list[dict[str, Any]]) -> set[int]:
    """The sequences of the `interrupt.requested` events of `history` (a run's log, in order) whose gate a later event
    of it closed: its node's `interrupt.resolved` or `node.cancelled`, or the run's end. A node holds one gate open at a
    time, so the next close of its node after a request is that request's."""
    closing = ("interrupt.resolved", "node.cancelled")
    closed_later: set[str] = set()  # the nodes with a close after the event being read (the log is read backwards)
    ended = False
    closed: set[int] = set()
    for doc in reversed(history):
        kind = doc["type"]
        if kind in RUN_END_EVENTS:
            ended = True
        elif kind in closing:
            closed_later.add(doc.get("nodeId"))
        elif kind == "interrupt.requested" and (ended or doc.get("nodeId") in closed_later):
            closed.add(doc["sequence"])
    return closed


def catch_up(history: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(what to send, what to leave out) of a run's whole history for a client that cannot page: all of it when it
    fits `budget`, else its first event and the newest that fit with it, the events between left out."""
    if len(first_page(history, budget)) == len(history):
        return history, []
    tail = last_page(history[1:], budget - answer_bytes(history[:1]))
    return history[:1] + tail, history[1 : len(history) - len(tail)]


def response(
    read: Read,
    state: RunState,
    view: RunView,
    last_event_id: int | None,
    bounds: streaming.Bounds,
    now: Callable[[], str],
    head: Callable[[], RunState | None],
    budget: int = MAX_ANSWER_BYTES,
) -> list[str]:
    """The SSE frames of one listen: `read(after)` reads the run's events after a sequence, `state` is the run's head as
    the request loaded it (`head()` reads it again, when events came after it), `now()` the time frames carry."""
    parts: list[str] = []
    cursor = -1 if last_event_id is None else last_event_id  # the last event read
    opening: list[dict[str, Any]] | None = None
    # The frame that stands for the events left out, and the sequence of the event it follows.
    notice: tuple[int, str] | None = None
    if last_event_id is None:
        history = read(-1)
        closed = closed_gates(history)
        opening, skipped = catch_up([doc for doc in history if doc["sequence"] not in closed], budget)
        if skipped:
            after = opening[0]["sequence"]
            # What a read from `after` (Last-Event-ID) sends before the frames this response has: closed gates too.
            resumes = opening[1]["sequence"] if len(opening) > 1 else history[-1]["sequence"] + 1
            gap = [doc for doc in history if after < doc["sequence"] < resumes]
            shown = sum(frames.project(doc, view) is not None for doc in gap)
            notice = after, streaming.frame(frames.history_skipped(view, shown, after, skipped[-1]["timestamp"]))

    def reader(after: int) -> list[dict[str, Any]]:
        nonlocal opening
        if opening is not None:
            docs, opening = opening, None
            return docs
        return read(after)

    def on_events(docs: list[dict[str, Any]]) -> int:
        nonlocal cursor, notice
        written = 0
        for doc in docs:
            if notice is not None and cursor == notice[0]:
                parts.append(notice[1])
                notice = None
            cursor = doc["sequence"]
            projected = frames.project(doc, view)
            if projected is not None:
                parts.append(streaming.frame(projected, id=doc["sequence"]))
                written += 1
        return written

    ended = streaming.follow(
        reader,
        -1 if last_event_id is None else last_event_id,
        state.terminal,
        bounds,
        on_events,
        lambda: parts.append(streaming.frame(frames.heartbeat(now()))),
        answer_bytes=budget,
    )
    if ended != "terminal":
        parts.append(streaming.frame(_close(state, cursor, head, view, now()), retry=bounds.retry_ms))
    return parts


def _close(state: RunState, cursor: int, head: Callable[[], RunState | None], view: RunView, at: str) -> dict[str, Any]:
    """`interrupted` when the run waited on interrupts as of the last event sent, else a heartbeat (`at`: now)."""
    latest: RunState | None = state
    if cursor > state.nextSeq - 1:
        latest = head()  # events came after the request loaded the run: what does it wait on now?
    if latest is None or cursor != latest.nextSeq - 1 or latest.terminal or not latest.interrupts:
        return frames.heartbeat(at)
    # Stamped when the run paused, not when the response ends: the same state is told the same way.
    paused = max(interrupt.raisedAt for interrupt in latest.interrupts.values())
    return frames.interrupted(view, list(latest.interrupts), paused)
