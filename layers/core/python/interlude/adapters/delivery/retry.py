"""What the callback worker decides about a queued notice: its log ids, what the dead-letter queue keeps (pure).

Apart from adapters/delivery/notices.py (which builds notices from run events) so the callbacks function imports no
engine: its cold start pays only for what delivering a notice needs.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit


def message_ids(body: str) -> dict[str, str]:
    """`runId` and `noticeId` of a queued message (as far as it has them; a transition's notices delivered together,
    format 10: its first notice's): what its log lines are correlated by."""
    try:
        message = json.loads(body)
        notice = message.get("notice") or (message.get("notices") or [{}])[0]
    except (ValueError, AttributeError, IndexError, KeyError, TypeError):
        return {}
    if not isinstance(notice, dict):
        return {}
    ids = {"runId": notice.get("runId"), "noticeId": notice.get("id")}
    return {k: v for k, v in ids.items() if isinstance(v, str)}


def origin_of(url: str) -> str:
    """scheme://host[:port] of a callback URL: its path and query may hold a tenant's own secrets."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "(unparseable)"


def dead_letter(message: dict[str, Any], history: list[dict[str, Any]], now_iso: str) -> dict[str, Any]:
    """What the dead-letter queue keeps of a notice: identity and delivery history; no body, token or secret."""
    notice = message.get("notice") or {}
    record = {
        "v": 1,
        "deadLetteredAt": now_iso,
        "tenant": message.get("tenant"),
        "callbackOrigin": origin_of(message.get("callbackUrl") or ""),
        "noticeId": notice.get("id"),
        "type": notice.get("type"),
        "runId": notice.get("runId"),
        "sequence": notice.get("sequence"),
        "attempts": attempts_made(history),
        "deliveryHistory": history,
    }
    for field in ("nodeId", "interruptId", "kind", "key"):
        if notice.get(field) is not None:
            record[field] = notice[field]
    return record


# A notice's decision link (adapters/delivery/notices.py): the token, what it may do and until when, and its URLs.
LINK_FIELDS = ("token", "intent", "expiresAt")
LINK_URLS = ("inspect", "page", "resolve")


def receives(record: dict[str, Any]) -> int:
    """How many times SQS has handed out the record's message, this time included."""
    return int((record.get("attributes") or {}).get("ApproximateReceiveCount", 1))


def sent_at(record: dict[str, Any]) -> float | None:
    """When the record's message was sent, epoch seconds (None: the record does not say)."""
    sent = (record.get("attributes") or {}).get("SentTimestamp")
    return int(sent) / 1000 if sent else None


def without_links(body: str) -> dict[str, Any] | None:
    """A queued message as the dead letters keep it when it fails on its last receive and its record cannot be written:
    whole, so an operator can send it back once the cause is fixed, but without its notices' decision links; None when
    the body is no JSON object (no release writes one)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return dropped_links(message) if isinstance(message, dict) else None


def notices_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The notices a callbacks message carries: its one, or a transition's (format 10)."""
    return [n for n in (message.get("notice"), *(message.get("notices") or [])) if isinstance(n, dict)]


def dropped_links(message: dict[str, Any]) -> dict[str, Any]:
    """`message` (a callbacks message), its notices' decision links (a bearer credential each) taken out of it."""
    for notice in notices_of(message):
        for name in LINK_FIELDS:
            notice.pop(name, None)
        links = notice.get("links")
        if isinstance(links, dict):
            for name in LINK_URLS:
                links.pop(name, None)
    return message


def attempts_made(history: list[dict[str, Any]]) -> int:
    """The attempts a delivery made, its last attempt's number: its history keeps only the latest attempts. A record
    without a number is no attempt (a dead letter made on its message's last receive: store/deliveries.py)."""
    numbered = [int(a["attempt"]) for a in history if "attempt" in a]
    return max([len(numbered), *numbered])
