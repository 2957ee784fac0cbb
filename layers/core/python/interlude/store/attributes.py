"""DynamoDB attribute values, written by hand for the low-level client (no Decimal round trips)."""

from __future__ import annotations

import json
from typing import Any

Item = dict[str, dict[str, Any]]


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int | float) -> dict[str, str]:
    return {"N": str(value)}


def as_json(value: Any) -> dict[str, str]:
    return {"S": json.dumps(value, separators=(",", ":"), sort_keys=True)}


def plain(item: Item) -> dict[str, Any]:
    """A low-level item as plain Python: strings stay strings, numbers become int or float."""
    out: dict[str, Any] = {}
    for name, typed in item.items():
        ((kind, value),) = typed.items()
        if kind == "N":
            out[name] = int(value) if value.lstrip("-").isdigit() else float(value)
        else:
            out[name] = value
    return out
