"""The polling loop every local stand-in for an AWS poller shares (stream mapping, SQS mapping, Scheduler)."""

from __future__ import annotations

import threading
from typing import Self


class Pump:
    """A daemon thread calling `pump_once` until stopped; an idle or failed tick waits `interval_s`."""

    def __init__(self, name: str, interval_s: float) -> None:
        self.interval_s = interval_s
        self.idle = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def pump_once(self) -> int:
        """Deliver what is due; return how much moved."""
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                moved = self.pump_once()
            except Exception:  # a failed poll is retried on the next tick, as AWS's poller would
                moved = 0
            if moved:
                self.idle.clear()
            else:
                self.idle.set()
                self._stop.wait(self.interval_s)
