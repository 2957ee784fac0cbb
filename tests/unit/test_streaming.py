"""The bounded follow loop behind both SSE faces, on a simulated clock (no real waiting), and the wire format."""

from __future__ import annotations

import pytest

from interlude.app import streams as streaming
from interlude.config import Settings
from interlude.wiring import function


class Log:
    """An event log that grows as simulated time passes: {time: [event types]}."""

    def __init__(self, schedule: dict[float, list[str]]) -> None:
        self.now = 0.0
        self.schedule = schedule
        self.reads = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += max(seconds, 0.001)

    def docs(self) -> list[dict]:
        out = []
        for at in sorted(self.schedule):
            if at <= self.now:
                out += [{"type": t} for t in self.schedule[at]]
        return [{**d, "sequence": i} for i, d in enumerate(out)]

    def read(self, after: int) -> list[dict]:
        self.reads += 1
        return [d for d in self.docs() if d["sequence"] > after]


def run(log: Log, after: int = -1, terminal: bool = False, bounds: streaming.Bounds | None = None, frames_per=None):
    seen: list[tuple[float, list[int]]] = []
    keepalives: list[float] = []

    def on_events(docs):
        seen.append((log.now, [d["sequence"] for d in docs]))
        return len(docs) if frames_per is None else frames_per(docs)

    ended = streaming.follow(
        log.read,
        after,
        terminal,
        bounds or streaming.Bounds(hold_s=20, linger_s=0.5, retry_ms=1000),
        on_events,
        lambda: keepalives.append(log.now),
        clock=log.clock,
        sleep=log.sleep,
    )
    return ended, seen, keepalives


def test_sends_what_exists_then_lingers_briefly_and_ends_bounded():
    log = Log({0: ["run.started", "node.started", "node.suspended"]})
    ended, seen, _ = run(log)
    assert ended == "bounded"
    assert seen == [(0.0, [0, 1, 2])]
    assert 0.5 <= log.now < 1.0  # the linger window, not the hold


def test_an_empty_request_holds_until_events_arrive_then_returns_them():
    log = Log({0: ["run.started"], 7.0: ["node.completed", "run.completed"]})
    ended, seen, _ = run(log, after=0)
    assert ended == "terminal"
    assert seen == [(pytest.approx(7.0, abs=1.01), [1, 2])]


def test_an_empty_request_on_a_quiet_run_ends_at_the_hold_with_keepalives():
    log = Log({0: ["run.started"]})
    ended, seen, keepalives = run(log, after=0, bounds=streaming.Bounds(hold_s=20, linger_s=0.5, retry_ms=1000))
    assert (ended, seen) == ("bounded", [])
    assert 20 <= log.now < 21
    assert keepalives
    assert keepalives[0] == pytest.approx(15, abs=1.01)


def test_a_finished_run_past_the_cursor_ends_at_once_without_a_frame():
    log = Log({0: ["run.started", "run.completed"]})
    assert run(log, after=1, terminal=True) == ("terminal", [], [])
    assert log.now == 0
    assert log.reads == 1


def test_the_terminal_event_ends_the_request_at_once():
    log = Log({0: ["run.started", "run.completed"]})
    assert run(log)[0] == "terminal"
    assert log.now == 0


def test_a_long_log_is_sent_over_several_requests_each_within_the_answer_budget():
    # A run whose log outgrows one answer (API Gateway stops at 6 MB): each request passes on a prefix that fits
    # and ends bounded; the client's Last-Event-ID (the last sequence it got) picks up exactly where it stopped.
    big = "x" * 1000
    docs = [{"type": "node.completed", "sequence": i, "payload": big} for i in range(50)]
    docs.append({"type": "run.completed", "sequence": 50})
    got: list[int] = []
    requests = 0
    after = -1
    ended = ""
    while ended != "terminal":
        requests += 1
        batches: list[list[int]] = []

        def on_events(batch: list[dict]) -> int:
            batches.append([d["sequence"] for d in batch])  # noqa: B023
            return len(batch)

        ended = streaming.follow(
            lambda cursor: [d for d in docs if d["sequence"] > cursor],
            after,
            False,
            streaming.Bounds(hold_s=20, linger_s=0.5, retry_ms=1000),
            on_events,
            lambda: None,
            clock=lambda: 0.0,
            sleep=lambda _s: None,
            answer_bytes=10_000,
        )
        sent = [seq for batch in batches for seq in batch]
        assert sent, "every request makes progress"
        assert sum(len(streaming._json(docs[s])) + 1 for s in sent) <= 10_000 + 1100  # at most one event past
        got += sent
        after = sent[-1]
    assert got == list(range(51))
    assert requests > 4


def test_a_batch_that_writes_no_frame_does_not_start_the_linger():
    # e.g. `updates` admits none of a transition's events: the request keeps waiting for something to send.
    log = Log({0: ["node.started"], 3.0: ["node.completed"]})
    ended, seen, _ = run(log, frames_per=lambda docs: sum(d["sequence"] > 0 for d in docs))
    assert ended == "bounded"
    assert len(seen) == 2
    assert log.now >= 3.0


def test_resumable_clients_get_the_rfc0247_floor_and_the_api_timeout_leaves_room():
    assert streaming.Bounds(2, 0.1, 100).for_resumable().hold_s >= 15
    defaults = Settings(table_name="t", entries_table_name="e", step_budget=1, max_poll_seconds=1, key_ring_secret="s")
    assert defaults.stream_hold_seconds + defaults.stream_linger_seconds < function("api").timeout_s
    assert function("api").timeout_s > streaming.RESUMABLE_FLOOR_SECONDS


def test_wire_format():
    assert (
        streaming.frame({"a": "é\n"}, event="node.completed", id=4)
        == 'id: 4\nevent: node.completed\ndata: {"a":"é\\n"}\n\n'
    )
    assert streaming.frame({"type": "done"}) == 'data: {"type":"done"}\n\n'
    assert streaming.comment("keep-alive") == ": keep-alive\n\n"
    assert streaming.retry(250) == "retry: 250\n\n"


@pytest.mark.parametrize(("raw", "expected"), [(None, None), ("", None), ("0", 0), (" 12 ", 12)])
def test_last_event_id_accepts_non_negative_integers(raw, expected):
    assert streaming.parse_last_event_id(raw) == expected


@pytest.mark.parametrize("raw", ["-1", "1.5", "abc", "9" * 16])
def test_last_event_id_refuses_the_rest(raw):
    with pytest.raises(ValueError):
        streaming.parse_last_event_id(raw)
