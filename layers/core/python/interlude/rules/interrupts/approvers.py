"""Which approver refs bind on a gate, and the inbox families they list it under (store/inbox.py writes them; the
decision rules, rules/interrupts/decide.py, judge eligibility by the same refs)."""

from __future__ import annotations

from typing import Any

# The approver ref kinds this host resolves and enforces, advertised as discovery `interrupt.refKinds`.
# A ref kind not listed here is ignored on a gate (openwop-notes §1.1 Approver enforcement).
REF_KINDS: tuple[str, ...] = ("principal", "group", "role")


def binding_refs(data: dict[str, Any], ref_kinds: tuple[str, ...] = REF_KINDS) -> list[str]:
    """The eligibility fields of an approval that bind on this host (approversList always)."""
    fields = ["approversList"] if data.get("approversList") else []
    if "group" in ref_kinds and data.get("approverGroupRefs"):
        fields.append("approverGroupRefs")
    if "role" in ref_kinds and data.get("approverRoleRefs"):
        fields.append("approverRoleRefs")
    return fields


# An approval naming more refs than this is indexed as open to anyone (one entry instead of one per ref): what the
# inbox reads stays bounded, and eligibility is still enforced on every page and every decision.
MAX_INDEXED_REFS = 20
ANYONE = "ANY"


def approver_families(kind: str, data: dict[str, Any], ref_kinds: tuple[str, ...] = REF_KINDS) -> list[str]:
    """The inbox families an open interrupt is listed under for `eligible`: each binding ref, else ANY."""
    if kind != "approval":
        return [ANYONE]
    fields = binding_refs(data, ref_kinds)
    families = [f"P#{ref}" for ref in data.get("approversList") or []] if "approversList" in fields else []
    if "approverGroupRefs" in fields:
        families += [f"G#{ref}" for ref in data["approverGroupRefs"]]
    if "approverRoleRefs" in fields:
        families += [f"ROLE#{ref}" for ref in data["approverRoleRefs"]]
    unique = list(dict.fromkeys(families))
    return unique if unique and len(unique) <= MAX_INDEXED_REFS else [ANYONE]
