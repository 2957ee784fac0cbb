"""The rules of a transition's notices delivered together (format 10, docs/adr/0155): how a bundle's notices move
with an attempt's POSTs, when the bundle is settled, which attempt records it keeps, and what a replay reopens. Each
notice is a plain dict as its record keeps it: id, type, sequence, tries (its attempts), since (its tries before its
current round) and status (DELIVERED or DEAD; absent: pending). The store keeps them (store/deliveries.py)."""

from collections import Counter
from typing import Any

DELIVERED = "delivered"
DEAD = "dead"


def applied(
    parts: list[dict[str, Any]], records: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A bundle's notices after an attempt's POST records (`final`: its notice is dead), and the records, each numbered
    as its notice's next try. A notice delivered stays delivered."""
    notices = [dict(p) for p in parts]
    by_id = {p["id"]: p for p in notices}
    numbered = []
    for record in records:
        part = by_id[record["noticeId"]]
        part["tries"] = int(part.get("tries", 0)) + 1
        numbered.append({**record, "attempt": part["tries"]})
        if record.get("status") == "succeeded":
            part["status"] = DELIVERED
        elif record.get("final") and part.get("status") != DELIVERED:
            part["status"] = DEAD
    return notices, numbered


def bundle_status(parts: list[dict[str, Any]]) -> str | None:
    """A bundle's status once every notice is settled (delivered: all were), None while one is pending."""
    if any(not p.get("status") for p in parts):
        return None
    return DELIVERED if all(p["status"] == DELIVERED for p in parts) else DEAD


def latest_per_notice(history: list[dict[str, Any]], kept_per_notice: int) -> list[dict[str, Any]]:
    """A bundle's attempt records, oldest first, less each notice's older than its last `kept_per_notice`."""
    seen: Counter[Any] = Counter()
    kept: list[dict[str, Any]] = []
    for record in reversed(history):
        seen[record.get("noticeId")] += 1
        if seen[record.get("noticeId")] <= kept_per_notice:
            kept.append(record)
    return kept[::-1]


def reopened_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A dead bundle's notices as a replay reopens them: every one not delivered pending again, for a round of its own."""
    return [
        part
        if part.get("status") == DELIVERED
        else {**{k: v for k, v in part.items() if k != "status"}, "since": part.get("tries", 0)}
        for part in parts
    ]
