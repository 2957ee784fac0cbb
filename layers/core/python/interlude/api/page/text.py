"""Values put into words for the pages: JSON shown pretty, and the `{{path}}` a workflow's template could not fill."""

from __future__ import annotations

import json
import re
from typing import Any

# A reference a template could not fill stays `{{path}}` in the payload; a page never shows it raw.
UNFILLED_RE = re.compile(r"\{\{\s*([^{}]{1,200}?)\s*\}\}")


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
