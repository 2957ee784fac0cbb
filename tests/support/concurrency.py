"""Callers raced: each on a thread of its own, released together (a barrier), as concurrent requests arrive."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def race(*callers: Callable[[], Any]) -> list[Any]:
    """Each caller on a thread of its own, released together; what each returned, or the exception it raised."""
    barrier = threading.Barrier(len(callers))
    outcomes: list[Any] = [None] * len(callers)

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = callers[i]()
        except BaseException as exc:  # noqa: BLE001 - the outcome under test
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(callers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes
