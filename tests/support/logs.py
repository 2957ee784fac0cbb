"""The JSON lines a function's Powertools Logger writes, captured from the real handler module."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from interlude.local import lambda_runtime


@contextmanager
def function_log(name: str, level: str = "INFO") -> Iterator[list[dict[str, Any]]]:
    """The lines function `name`'s logger writes inside the block (at `level` and above), parsed; filled on exit."""
    logger = lambda_runtime.handler_module(name).logger
    stream = io.StringIO()
    previous_level = logger.log_level
    previous_stream = logger.registered_handler.setStream(stream)
    logger.setLevel(level)
    lines: list[dict[str, Any]] = []
    try:
        yield lines
    finally:
        logger.setLevel(previous_level)
        logger.registered_handler.setStream(previous_stream)
        lines.extend(json.loads(line) for line in stream.getvalue().splitlines() if line.strip())
