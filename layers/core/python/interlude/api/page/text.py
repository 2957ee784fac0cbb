"""Values put into words for the pages: a value as a labelled table a person reads, JSON shown pretty, and the
`{{path}}` a workflow's template could not fill."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlude.rules.wording import Written, as_written

# A reference a template could not fill stays `{{path}}` in the payload; a page never shows it raw.
UNFILLED_RE = re.compile(r"\{\{\s*([^{}]{1,200}?)\s*\}\}")
# Text longer than this, or on several lines, is shown as paragraphs.
SHORT_TEXT = 120
# Deeper than this, a value is shown as its JSON text (no one nests a request's facts that deep).
MAX_DEPTH = 8
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def pretty(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, allow_nan=False)


def unfilled_parts(value: Any) -> list[tuple[str, str]]:
    """(text, the unfilled path after it or "") pairs, in order: what the `shown` macro draws."""
    pieces = UNFILLED_RE.split(str(value))
    pieces.append("")
    return list(zip(pieces[::2], pieces[1::2], strict=True))


def unfilled_in_words(text: str) -> str:
    """Plain text (a page's title) with every unfilled `{{path}}` said in words."""
    return UNFILLED_RE.sub(lambda m: f"(not filled: {m.group(1)})", text)


# A run's, a key's or a gate's state as a person reads it (the console's status pills and filters); the API keeps the
# protocol's word.
STATE_WORDS = {
    "pending": "not started yet",
    "running": "running",
    "waiting-approval": "waiting for approval",
    "waiting-input": "waiting for input",
    "waiting-external": "waiting for an outside event",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "rejected": "rejected",
    "active": "active",
    "revoked": "revoked",
    "expired": "expired",
}


def state_words(state: Any) -> str:
    return STATE_WORDS.get(str(state), str(state))


def spelled(value: Any, written: Mapping[str, str]) -> Any:
    """`value` with each number its run's caller wrote otherwise (RunState.writtenNumbers: by the text JSON writes)
    as a `Written`, for a page to show as written; `value` itself when there is nothing to respell."""
    if not written:
        return value
    if isinstance(value, Mapping):
        return {k: spelled(v, written) for k, v in value.items()}
    if isinstance(value, list):
        return [spelled(v, written) for v in value]
    if isinstance(value, float) and not isinstance(value, Written):
        text = written.get(json.dumps(value, allow_nan=False)) if math.isfinite(value) else None
        return Written(value, text) if text is not None else value
    return value


# -- a value as a table -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One value as the `value` macro (templates/ui.html) draws it."""

    # text (short text, a number as written, yes / no) | paragraphs | empty | table | list
    kind: str
    text: str = ""
    paragraphs: tuple[str, ...] = ()
    rows: tuple[Row, ...] = ()
    items: tuple[Cell, ...] = ()


@dataclass(frozen=True)
class Row:
    label: str
    cell: Cell


def cell_of(value: Any, labels: Mapping[str, str] | None = None, path: tuple[str, ...] = ()) -> Cell:
    """`value` to read: an object as a table of its keys in the author's order (each labelled by `labels`, by dotted
    path, else by its key), a list as a list, long text as paragraphs, a number exactly as written."""
    labels = labels or {}
    if len(path) > MAX_DEPTH:
        return Cell("text", text=pretty(value))
    if isinstance(value, Mapping):
        if not value:
            return Cell("empty")
        rows = tuple(
            Row(labels.get(".".join((*path, str(k)))) or str(k), cell_of(v, labels, (*path, str(k)))) for k, v in value.items()
        )
        return Cell("table", rows=rows)
    if isinstance(value, list):
        if not value:
            return Cell("empty")
        return Cell("list", items=tuple(cell_of(v, labels, (*path, str(i))) for i, v in enumerate(value)))
    if value is None or value == "":
        return Cell("empty")
    if isinstance(value, bool):
        return Cell("text", text="yes" if value else "no")
    if isinstance(value, int | float):
        return Cell("text", text=as_written(value))
    text = str(value)
    if len(text) > SHORT_TEXT or "\n" in text:
        return Cell("paragraphs", paragraphs=tuple(p.strip("\n") for p in PARAGRAPH_BREAK.split(text) if p.strip()))
    return Cell("text", text=text)
