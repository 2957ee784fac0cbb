"""ModuleX node ids on the engine, and `{{node_id.field}}` references resolved against run state.

ModuleX node ids are free-form (`node_draft`), while OpenWOP node ids match `^[A-Za-z0-9._~:-]{1,128}$`
(no underscore). A ModuleX id therefore runs on the engine under an escaped form (`node~5Fdraft`: every
byte outside the OpenWOP set, and `~` itself, becomes `~XX`), which `modulex_id` reverses exactly.

References keep their ModuleX spelling in the stored definition, so a reference that does not resolve is
left intact in the text the human reads (the seed page's rule), not in its escaped form.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.:-")
_ESCAPED = re.compile(r"~([0-9A-F]{2})")
REFERENCE = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")
MISSING = object()
# Where run inputs live in a ModuleX reference: `{{input.request}}` (the SDK's spelling) or `{{inputs.x}}`.
INPUT_HEADS = ("input", "inputs")


def engine_id(modulex_id: str) -> str:
    return "".join(chr(b) if b in _PLAIN else f"~{b:02X}" for b in modulex_id.encode())


def modulex_id(node_id: str) -> str:
    raw = _ESCAPED.sub(lambda m: f"%{m.group(1)}", node_id)
    return node_id if raw == node_id else unquote(raw)


def _walk(value: Any, parts: list[str]) -> Any:
    for part in parts:
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return MISSING
    return value


def lookup(path: str, scope: Mapping[str, Any]) -> Any:
    """Resolve `a.b.c` against engine scope (node outputs by engine id, plus `inputs`); MISSING if absent.

    The head is a ModuleX node id (which may itself contain dots, so the longest head wins), `input` /
    `inputs`, or a bare field of the run's input (ModuleX state keys live beside the node results).
    """
    parts = path.split(".")
    inputs = scope.get("inputs") if isinstance(scope.get("inputs"), Mapping) else {}
    for head_len in range(len(parts), 0, -1):
        head = ".".join(parts[:head_len])
        key = engine_id(head)
        if key in scope and key != "inputs":
            found = _walk(scope[key], parts[head_len:])
            if found is not MISSING:
                return found
    if parts[0] in INPUT_HEADS:
        return _walk(inputs, parts[1:])
    return _walk(inputs, parts)


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)


def render(template: Any, scope: Mapping[str, Any]) -> Any:
    """Resolve references in a string (recursively in lists and objects); unresolvable ones stay as written.

    A string that is exactly one reference takes the value itself (a boolean stays a boolean).
    """
    if isinstance(template, str):
        whole = REFERENCE.fullmatch(template.strip())
        if whole:
            value = lookup(whole.group(1), scope)
            return template if value is MISSING else value
        return REFERENCE.sub(
            lambda m: m.group(0) if (v := lookup(m.group(1), scope)) is MISSING else _as_text(v), template
        )
    if isinstance(template, list):
        return [render(item, scope) for item in template]
    if isinstance(template, dict):
        return {key: render(value, scope) for key, value in template.items()}
    return template


def resolve(template: Any, scope: Mapping[str, Any]) -> Any:
    """Like render, but a string that is exactly one unresolvable reference becomes None (for comparisons)."""
    if isinstance(template, str):
        whole = REFERENCE.fullmatch(template.strip())
        if whole:
            value = lookup(whole.group(1), scope)
            return None if value is MISSING else value
    return render(template, scope)
