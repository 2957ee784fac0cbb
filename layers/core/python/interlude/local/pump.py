"""The polling loop every local stand-in for an AWS poller shares (stream mapping, SQS mapping, Scheduler)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Self

# An idle polling pump waits twice as long after each empty poll, up to this. Idle, a stack's pumps polled moto
# ≈ 100 times a second (the stream, each queue, the schedules), a quarter of a core for a stack doing nothing,
# which the suite's stacks paid beside every test; what wakes them (wake_pumps) keeps the latency of real work.
IDLE_MAX_S = 0.5
_POLLING: set[Pump] = set()
# The services whose writes the pumps carry (the table's stream, the queues, the schedules), and any other.
DYNAMODB, SQS, SCHEDULER, OTHER = "dynamodb", "sqs", "scheduler", "other"
# How many times something may have changed (note_change): quiesce's round is quiet only if it did not move.
_changes = 0
_changes_lock = threading.Lock()


class NotQuiet(TimeoutError):
    """quiesce's bound passed before the pumps were quiet."""


def note_change() -> None:
    """Something may have changed: quiesce's round in progress is not quiet."""
    global _changes
    with _changes_lock:
        _changes += 1


def wake_pumps(service: str | None = None, target: str | None = None) -> None:
    """Something may have changed (a request was answered, a pump delivered): every polling pump polls now, or, when
    the change was a write to `service`, those that carry that service's changes (and those that name none); when it
    was a write to one `target` of it (a queue), only the pumps of that target among them."""
    note_change()
    for pump in list(_POLLING):
        if (service is None or pump.carries in (None, service)) and (target is None or pump.target in (None, target)):
            pump.wake()


def queue_name(queue_url: str) -> str:
    """The name a queue's URL ends with: the `target` of its pump, which a write naming that URL wakes."""
    return queue_url.rstrip("/").rpartition("/")[2]


def quiesce(pumps: Sequence[Pump], timeout_s: float) -> None:
    """Return once every one of `pumps` has completed a poll begun after a round started that found nothing to move,
    and nothing changed (note_change) during that round: every effect of what was done before the call has landed.

    A deterministic signal for tests, where reading the table twice a poll's interval apart is a guess a pump starved
    of CPU defeats. Raises NotQuiet naming the pumps that had no such poll (stuck, failing, or kept busy) in time."""
    deadline = time.monotonic() + timeout_s
    while True:
        with _changes_lock:
            changes = _changes
        begun = [pump.polls_begun() for pump in pumps]
        for pump in pumps:
            pump.wake()
        late = [pump.name for pump, mark in zip(pumps, begun, strict=True) if not pump.empty_poll_after(mark, deadline)]
        if late:
            raise NotQuiet(f"no poll that found nothing to move within {timeout_s} s: {', '.join(late)}")
        with _changes_lock:
            if _changes == changes:
                return
        if time.monotonic() >= deadline:
            raise NotQuiet(f"the stack kept changing for {timeout_s} s")


class Pump:
    """A daemon thread calling `pump_once` until stopped; an idle or failed tick waits `interval_s`.

    A pump that `backs_off` waits longer after each idle tick (up to `idle_max_s`) until woken: by a write to the
    service it `carries` (moto's server), or by any change when it names none. A recurring pump (a rate) does not
    back off and is not woken.

    Each poll is numbered when it begins; the number of the last one that found nothing to move (returned 0, did not
    fail, left nothing `in_flight`) is kept, so `empty_poll_after` tells whether one begun after a moment has ended so.
    """

    def __init__(
        self, name: str, interval_s: float, backs_off: bool = False, carries: str | None = None, idle_max_s: float = IDLE_MAX_S
    ) -> None:
        self.interval_s = interval_s
        self.backs_off = backs_off
        self.idle_max_s = idle_max_s
        # The service whose writes may give this pump something to move (moto_server.written_service); None: any.
        self.carries = carries
        # Which one of that service's resources (a queue's name) it carries; None: all of them.
        self.target: str | None = None
        self.idle = threading.Event()
        self._stop = threading.Event()
        self._woken = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._polls = threading.Condition()
        self._begun = 0
        self._last_empty = 0

    @property
    def name(self) -> str:
        return self._thread.name

    def start(self) -> Self:
        if self.backs_off:
            _POLLING.add(self)
        self._thread.start()
        return self

    def stop(self) -> None:
        _POLLING.discard(self)
        self._stop.set()
        self._woken.set()
        self._thread.join(timeout=5)

    def wake(self) -> None:
        self._woken.set()

    def pump_once(self) -> int:
        """Deliver what is due; return how much moved."""
        raise NotImplementedError

    def sleep_s(self, backoff_s: float) -> float | None:
        """How long an idle poll may sleep before time alone can give this pump something to move (a hidden message
        visible again, a schedule due); None: only a wake can. By default the back-off (`backoff_s`): unknown."""
        return backoff_s

    def _idle_wait(self, seconds: float | None) -> bool:
        """Sleep `seconds` (None: until woken); whether it was woken."""
        return self._woken.wait(seconds)

    def in_flight(self) -> bool:
        """Whether work this pump handed on (to other threads) has not ended yet."""
        return False

    def polls_begun(self) -> int:
        with self._polls:
            return self._begun

    def empty_poll_after(self, begun: int, deadline: float) -> bool:
        """Wait until a poll numbered above `begun` has found nothing to move; False if `deadline` (monotonic) came."""
        with self._polls:
            return self._polls.wait_for(lambda: self._last_empty > begun, timeout=max(0.0, deadline - time.monotonic()))

    def _loop(self) -> None:
        wait = self.interval_s
        while not self._stop.is_set():
            with self._polls:
                self._begun += 1
                number = self._begun
            try:
                moved = self.pump_once()
                empty = not moved and not self.in_flight()
            except Exception:  # a failed poll is retried on the next tick, as AWS's poller would
                moved, empty = 0, False
            if empty:
                with self._polls:
                    self._last_empty = number
                    self._polls.notify_all()
            if moved:
                self.idle.clear()
                wait = self.interval_s
                if self.backs_off:
                    # What it delivered wrote through moto's server, which woke the pumps that carry it; a change all
                    # the same for quiesce.
                    note_change()
                continue
            self.idle.set()
            if not self.backs_off:
                self._stop.wait(wait)
                continue
            # A failed poll retries after the back-off; an empty one sleeps until something can be due, or a wake.
            woken = self._idle_wait(wait if not empty else self.sleep_s(wait))
            self._woken.clear()
            wait = self.interval_s if woken else min(wait * 2, max(self.idle_max_s, self.interval_s))
