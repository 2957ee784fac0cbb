"""Deterministic schedule names and `at()` expressions. Pure."""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime

from interlude.engine.deadlines import Deadline

# Scheduler names: 1..64 of [0-9a-zA-Z-_.]; ClientToken: 1..64 of [a-zA-Z0-9-_]. "il-<p>-<40 hex>" fits both.
NAME_PREFIX = "il"


def schedule_name(run_id: str, deadline: Deadline) -> str:
    """One name per deadline occurrence: the same interrupt (or delay visit, or run) always maps to it,
    so creating it twice is a ConflictException, and deleting it needs nothing but the occurrence."""
    if deadline.purpose == "interrupt":
        identity = f"interrupt\x1f{deadline.interrupt_id}"
    elif deadline.purpose == "reminder":
        identity = f"reminder\x1f{deadline.interrupt_id}\x1f{deadline.visit}"
    elif deadline.purpose == "task":
        # Several checks of one claim (its heartbeats outrun the last): the due time is part of the occurrence.
        identity = f"task\x1f{deadline.interrupt_id}\x1f{deadline.visit}\x1f{deadline.due}"
    elif deadline.purpose == "delay":
        identity = f"delay\x1f{run_id}\x1f{deadline.node_id}\x1f{deadline.visit}"
    else:
        identity = f"run\x1f{run_id}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:40]
    letter = "m" if deadline.purpose == "reminder" else deadline.purpose[0]
    return f"{NAME_PREFIX}-{letter}-{digest}"


def at_expression(due_epoch: float) -> str:
    """`at(yyyy-mm-ddThh:mm:ss)` in UTC, rounded up to the second so it never fires before the deadline."""
    moment = datetime.fromtimestamp(math.ceil(due_epoch), UTC)
    return f"at({moment.strftime('%Y-%m-%dT%H:%M:%S')})"


def parse_at(expression: str) -> float | None:
    """Epoch seconds of an `at(...)` expression (UTC), or None for any other expression."""
    if not (expression.startswith("at(") and expression.endswith(")")):
        return None
    try:
        return datetime.strptime(expression[3:-1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
