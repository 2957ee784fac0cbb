"""Errors the code catches, logs and carries on from: each is counted as well as logged, since a log line pages
no one (docs/operations.md, "What to watch": `caught-errors`).

`caught()` writes the ERROR line (with the exception being handled, if any, and `caughtError`: what failed) and
calls the counter the entry point plugged in (interlude.adapters.metrics.count_caught_errors: the metric
CaughtErrors of the function). Below the edge nothing knows of metrics; without a counter (a test, the CLI) the
line alone is written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol


class ErrorLog(Protocol):
    """A stdlib logger or a Powertools Logger."""

    def error(self, msg: Any, *args: Any, **kwargs: Any) -> Any: ...


_counter: Callable[[], None] | None = None


def count_with(counter: Callable[[], None]) -> None:
    global _counter
    _counter = counter


def caught(log: ErrorLog, operation: str, message: str, *args: object, **extra: object) -> None:
    """Log `message` at ERROR (with the traceback of the exception being handled, and `operation` as `caughtError`)
    and count it."""
    log.error(message, *args, exc_info=sys.exc_info()[0] is not None, extra={"caughtError": operation, **extra})
    if _counter is not None:
        _counter()
