"""How a JSON document writes its numbers, kept beside their values so a person reads them as their caller wrote them
(docs/adr/0119; RunState.writtenNumbers): the edge keeps a request's, the workers a task's output and an HTTP step's
answer."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from interlude.domain.budgets import MAX_WRITTEN_NUMBER_CHARS, MAX_WRITTEN_NUMBERS

# How many numbers a document keeps the spelling of, and how long one may be: a run stores them (RunState.writtenNumbers).
MAX_SPELLINGS = MAX_WRITTEN_NUMBERS
MAX_SPELLING_CHARS = MAX_WRITTEN_NUMBER_CHARS
# A number with a fraction or an exponent (only such a number can read back written otherwise: an integer is kept
# exactly as written, sign aside).
_FRACTIONAL = re.compile(r"\d[.eE]")


def spellings(raw: str) -> dict[str, str]:
    """How `raw` (already accepted by `loads`) writes each of its numbers that Python writes back otherwise: `1.50`,
    `1e3`, `0.1000`, by the text Python writes (`1.5`, `1000.0`, `0.1`); the first spelling of a value wins."""
    if _FRACTIONAL.search(raw) is None:
        return {}
    found: dict[str, str] = {}

    def kept(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):  # a peer's 1e400 (the edge refuses one before this)
            return value
        written = json.dumps(value, allow_nan=False)
        if written != text and len(found) < MAX_SPELLINGS and len(text) <= MAX_SPELLING_CHARS:
            found.setdefault(written, text)
        return value

    json.loads(raw, parse_float=kept)
    return found


# An action's or task's outcome ({"output": ...}) carries how its body wrote its numbers under this key, into the
# effect's or task's record (a replay or a late landing keeps them) and onto the run (app/actions.finish_action).
OUTCOME_KEY = "writtenNumbers"


def with_spellings(outcome: dict[str, Any], raw: str | bytes) -> dict[str, Any]:
    """`outcome`, carrying how `raw` (the JSON its output was read from) writes its numbers, when it writes any
    otherwise than Python does."""
    found = spellings(raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw)
    return {**outcome, OUTCOME_KEY: found} if found else outcome


def split_outcome(outcome: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the outcome as the engine reads it, the spellings it carries)."""
    written = outcome.get(OUTCOME_KEY)
    landed = {k: v for k, v in outcome.items() if k != OUTCOME_KEY}
    return landed, {str(k): str(v) for k, v in written.items()} if isinstance(written, Mapping) else {}
