"""JSON Merge Patch (RFC 7396, section 2): a patch names only what changes; `null` removes a member, an object is
merged member by member, any other value replaces. Written out here (the RFC's eight lines) rather than taken
from a package: docs/adr/0096."""

from __future__ import annotations

from typing import Any


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` with `patch` applied; neither is changed. Its depth is the patch's, which the edge bounds."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            merged.pop(name, None)
        else:
            merged[name] = merge_patch(merged.get(name), value)
    return merged
