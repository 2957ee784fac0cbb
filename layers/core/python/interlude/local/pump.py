"""The polling loop every local stand-in for an AWS poller shares (stream mapping, SQS mapping, Scheduler)."""

from __future__ import annotations

import threading
from typing import Self

# An idle polling pump waits twice as long after each empty poll, up to this. Idle, a stack's pumps polled moto
# ≈ 100 times a second (the stream, each queue, the schedules), a quarter of a core for a stack doing nothing,
# which the suite's stacks paid beside every test; what wakes them (wake_pumps) keeps the latency of real work.
IDLE_MAX_S = 0.5
_POLLING: set[Pump] = set()


def wake_pumps() -> None:
    """Something may have changed (a request was answered, a pump delivered): every polling pump polls now."""
    for pump in list(_POLLING):
        pump.wake()


class Pump:
    """A daemon thread calling `pump_once` until stopped; an idle or failed tick waits `interval_s`.

    A pump that `backs_off` waits longer after each idle tick (up to IDLE_MAX_S) until woken; one that moved
    something wakes them all, since what it delivered may have written what another one carries. A recurring pump
    (a rate) does not back off and is not woken.
    """

    def __init__(self, name: str, interval_s: float, backs_off: bool = False) -> None:
        self.interval_s = interval_s
        self.backs_off = backs_off
        self.idle = threading.Event()
        self._stop = threading.Event()
        self._woken = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

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

    def _loop(self) -> None:
        wait = self.interval_s
        while not self._stop.is_set():
            try:
                moved = self.pump_once()
            except Exception:  # a failed poll is retried on the next tick, as AWS's poller would
                moved = 0
            if moved:
                self.idle.clear()
                wait = self.interval_s
                if self.backs_off:
                    wake_pumps()
                continue
            self.idle.set()
            woken = self._woken.wait(wait) if self.backs_off else self._stop.wait(wait)
            self._woken.clear()
            wait = self.interval_s if woken or not self.backs_off else min(wait * 2, max(IDLE_MAX_S, self.interval_s))
