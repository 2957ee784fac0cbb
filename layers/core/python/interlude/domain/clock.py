"""The process clock, with an opt-in offset for the local stack and its tests.

Deployed functions read the real UTC clock. When `INTERLUDE_CLOCK_FILE` names a file (only the local stack
sets it; the CDK stack never does, which tests/infra asserts), every reading adds the number of seconds that
file holds. `interlude clock advance N` (or `advance()` in a test) moves that offset forward, so a test can
let a 1.5 s deadline pass without sleeping, and the API, the dispatch pump and the schedule pump — all in
the local stack's process — agree on the time. There is no HTTP route for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from interlude.config.runtime import CLOCK_FILE_ENV as CLOCK_FILE_ENV
from interlude.config.runtime import runtime_settings

# What the services take as their clock (`now` unless a test or the local stack injects another).
Clock = Callable[[], datetime]


def offset_seconds(path: str | os.PathLike[str] | None = None) -> float:
    target = path if path is not None else runtime_settings().clock_file
    if not target:
        return 0.0
    try:
        return float(Path(target).read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0.0


def iso(moment: datetime) -> str:
    """The wire form of a moment: UTC, milliseconds, `Z`."""
    global _last_printed
    last = _last_printed
    if last[0] is moment:  # held here, so no other object can have its id; a datetime never changes
        return last[1]
    text = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    _last_printed = (moment, text)
    return text


# The moment `iso` printed last and its text: a transition prints the one `now` it decides at several times (the
# decision, its audit draft, the engine's records of it, the commit: five in a resolve; docs/adr/0162).
_last_printed: tuple[datetime | None, str] = (None, "")


def instant(iso_text: str) -> datetime:
    """The moment a wire form (`iso`'s, or any ISO 8601 text with `Z` or an offset) names."""
    return datetime.fromisoformat(iso_text.replace("Z", "+00:00"))


def epoch_of(iso_text: str) -> float:
    """Seconds since the epoch of the moment a wire form names."""
    return instant(iso_text).timestamp()


def iso_epoch(epoch: float) -> str:
    return iso(datetime.fromtimestamp(epoch, UTC))


def now() -> datetime:
    return datetime.now(UTC) + timedelta(seconds=offset_seconds())


def reset(path: str | os.PathLike[str]) -> None:
    _write(Path(path), 0.0)


def advance(path: str | os.PathLike[str], seconds: float) -> float:
    """Move the clock forward by `seconds` (never backward); returns the new offset."""
    if seconds < 0:
        raise ValueError("the clock only moves forward")
    new = offset_seconds(path) + seconds
    _write(Path(path), new)
    return new


def _write(path: Path, value: float) -> None:
    # Atomic replace: a reader in another process sees the old offset or the new one, never half a number.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(repr(float(value)))
    os.replace(tmp, path)
