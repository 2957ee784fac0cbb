"""External events meet their interrupts by (tenant, eventType, correlation).

Matching is exact: two correlations match when they are equal as JSON values — same keys (order does not
matter), same values, same types (`1` and `"1"` differ; numbers compare by their JSON text, so `1` and `1.0`
differ too). The pair is hashed into one partition key, so "who waits for this event" is a single Query.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def correlation_hash(event_type: str, correlation: dict[str, Any]) -> str:
    text = event_type + "\x1f" + canonical(correlation)
    return hashlib.sha256(text.encode()).hexdigest()
