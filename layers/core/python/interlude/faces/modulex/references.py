"""ModuleX node ids on the engine, and `{{node_id.field}}` references resolved against run state.

ModuleX node ids are free-form (`node_draft`), while OpenWOP node ids match `^[A-Za-z0-9._~:-]{1,128}$`
(no underscore). A ModuleX id therefore runs on the engine under an escaped form (`node~5Fdraft`: every
byte outside the OpenWOP set, and `~` itself, becomes `~XX`), which `modulex_id` reverses exactly.

References keep their ModuleX spelling in the stored definition; one that names no node (nor the run input) is
refused when the definition is registered (engine/references.py, with this face's MODULEX dialect), and one with no
value when it is rendered is null, or empty inside text (domain/templates.py), never the raw `{{…}}`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from interlude.domain import templates
from interlude.domain.budgets import Meter
from interlude.domain.templates import MISSING, Dialect, walk

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.:-")
_ESCAPED = re.compile(r"~([0-9A-F]{2})")
REFERENCE = re.compile(r"\{\{\s*([^{}\s]+)\s*\}\}")
# Where run inputs live in a ModuleX reference: `{{input.request}}` (the SDK's spelling) or `{{inputs.x}}`.
INPUT_HEADS = ("input", "inputs")


def engine_id(modulex_id: str) -> str:
    return "".join(chr(b) if b in _PLAIN else f"~{b:02X}" for b in modulex_id.encode())


def modulex_id(node_id: str) -> str:
    raw = _ESCAPED.sub(lambda m: f"%{m.group(1)}", node_id)
    return node_id if raw == node_id else unquote(raw)


# References as this face writes them, for registration's check (engine/references.py); its nodes' outputs are
# free-form, so only the node a reference names is checked.
MODULEX = Dialect(REFERENCE, engine_id, INPUT_HEADS, fields_checked=False)


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
            found = walk(scope[key], parts[head_len:])
            if found is not MISSING:
                return found
    if parts[0] in INPUT_HEADS:
        return walk(inputs, parts[1:])
    return walk(inputs, parts)


def render(template: Any, scope: Mapping[str, Any], meter: Meter | None = None) -> Any:
    """Resolve references in a string (recursively in lists and objects), as templates.render does.

    A string that is exactly one reference takes the value itself (a boolean stays a boolean; one with no value is
    None). Spends from `meter` as templates.render does.
    """
    return templates.render(template, scope, lookup, REFERENCE, meter)
