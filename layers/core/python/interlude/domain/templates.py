"""`{{node_id.field}}` and `{{inputs.x}}` references, resolved against run state.

A string that is exactly one reference takes the referenced value as is (a number stays a number);
references embedded in longer text are rendered as text (JSON for objects). A reference that does
not resolve is left intact, as the ModuleX contract requires for interrupt messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

REFERENCE_RE = re.compile(r"\{\{\s*([A-Za-z0-9._~:-]+(?:\.[A-Za-z0-9_~:-]+)*)\s*\}\}")
MISSING = object()
Lookup = Callable[[str, Mapping[str, Any]], Any]


def walk(value: Any, parts: list[str]) -> Any:
    """Follow field names and list indexes into a value; MISSING where the path leaves it."""
    for part in parts:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def lookup(path: str, scope: Mapping[str, Any]) -> Any:
    """Walk `a.b.c` through scope; node ids may contain dots, so try the longest head first."""
    parts = path.split(".")
    for head_len in range(len(parts), 0, -1):
        head = ".".join(parts[:head_len])
        if head in scope:
            found = walk(scope[head], parts[head_len:])
            if found is not MISSING:
                return found
    return MISSING


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)


def render(template: Any, scope: Mapping[str, Any], find: Lookup = lookup, pattern: re.Pattern[str] = REFERENCE_RE) -> Any:
    """Resolve references in a string, or recursively in lists and objects."""
    if isinstance(template, str):
        whole = pattern.fullmatch(template.strip())
        if whole:
            value = find(whole.group(1), scope)
            return template if value is MISSING else value

        def substitute(m: re.Match[str]) -> str:
            value = find(m.group(1), scope)
            return m.group(0) if value is MISSING else as_text(value)

        return pattern.sub(substitute, template)
    if isinstance(template, list):
        return [render(item, scope, find, pattern) for item in template]
    if isinstance(template, dict):
        return {key: render(value, scope, find, pattern) for key, value in template.items()}
    return template


def references(template: Any) -> list[str]:
    if isinstance(template, str):
        return REFERENCE_RE.findall(template)
    if isinstance(template, list):
        return [ref for item in template for ref in references(item)]
    if isinstance(template, dict):
        return [ref for value in template.values() for ref in references(value)]
    return []
