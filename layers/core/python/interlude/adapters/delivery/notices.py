"""Callback notices: what a run's callbackUrl receives, built from the events of one transition (pure).

A notice is sent when an interrupt is raised (`interrupt.requested`), decided or timed out (`interrupt.resolved`,
with `reason: "timeout"` for a timeout) and when the run ends (`run.completed`, `run.failed`, `run.cancelled`).
Its id is derived from (run, sequence) of the event it reports, so a stream record delivered twice yields the same
notice id, which is also the Standard Webhooks `webhook-id` on every attempt.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from interlude.domain import formats
from interlude.domain.ids import derive_opaque, to_wire
from interlude.domain.models.run import OpenInterrupt, RunState
from interlude.engine.events import RUN_END_EVENTS
from interlude.engine.visits import interrupt_key, visit_of
from interlude.store import layout
from interlude.store.layout import marked_message

NOTICE_VERSION = 1
INTERRUPT_EVENTS = ("interrupt.requested", "interrupt.resolved")
NOTICE_EVENTS = frozenset(INTERRUPT_EVENTS + RUN_END_EVENTS)

# (open interrupt) -> (token, expiresAt epoch seconds, intent: "resolve" or "inspect")
TokenMinter = Callable[[OpenInterrupt], tuple[str, int, str]]


def notice_id(run_id: str, sequence: int) -> str:
    """Stable per (run, event sequence); fits Standard Webhooks' id rules (no '.', ^[A-Za-z0-9_-]{16,128}$)."""
    return "ntc_" + derive_opaque("notice", run_id, str(sequence))


def wants_notices(events: list[dict[str, Any]]) -> bool:
    return any(e.get("type") in NOTICE_EVENTS for e in events)


def build_notices(
    state: RunState, events: list[dict[str, Any]], mint: TokenMinter | None, public_base_url: str
) -> list[dict[str, Any]]:
    """The notices for `events` (one transition's RunEventDocs) of the run whose current state is `state`.

    A resolve token is minted only for an interrupt that is still open in `state`: a notice processed after its
    interrupt was already decided carries no token (it could only ever answer 409).
    """
    notices = []
    for event in events:
        kind = event.get("type")
        if kind not in NOTICE_EVENTS:
            continue
        notice: dict[str, Any] = {
            "id": notice_id(state.runId, event["sequence"]),
            "type": kind,
            "version": NOTICE_VERSION,
            "occurredAt": event["timestamp"],
            "sequence": event["sequence"],
            "runId": state.runId,
            "workflowId": state.workflowId,
            "links": {},
        }
        if public_base_url:
            notice["links"]["run"] = f"{public_base_url}/runs/{to_wire(state.runId)}"
        payload = event.get("payload") or {}
        if kind == "interrupt.requested":
            _interrupt_requested(notice, state, event, payload, mint, public_base_url)
        elif kind == "interrupt.resolved":
            _interrupt_resolved(notice, state, event, payload)
        else:
            notice["runStatus"] = kind.split(".", 1)[1]
            if "error" in payload:
                notice["error"] = {k: v for k, v in payload["error"].items() if k in ("code", "message")}
            if payload.get("failedNodeId"):
                notice["nodeId"] = payload["failedNodeId"]
            if payload.get("reason"):
                notice["reason"] = payload["reason"]
        notices.append(notice)
    return notices


def _interrupt_requested(
    notice: dict[str, Any],
    state: RunState,
    event: dict[str, Any],
    payload: dict[str, Any],
    mint: TokenMinter | None,
    public_base_url: str,
) -> None:
    node_id = event.get("nodeId", "")
    notice.update({"nodeId": node_id, "kind": payload.get("kind"), "key": payload.get("key"), "payload": payload})
    interrupt = state.interrupts.get(node_id)
    if interrupt is not None and interrupt.key == payload.get("key"):
        notice["interruptId"] = interrupt.interruptId
        if mint is not None:
            add_link(notice, interrupt, mint, public_base_url)
    else:
        notice["open"] = False


def add_link(notice: dict[str, Any], interrupt: OpenInterrupt, mint: TokenMinter, public_base_url: str) -> None:
    """The decision link of `interrupt` (open) on its `interrupt.requested` notice: the token, what it may do and until
    when, and its URLs."""
    token, expires_at, intent = mint(interrupt)
    notice["token"] = token
    notice["intent"] = intent
    notice["expiresAt"] = datetime.fromtimestamp(expires_at, UTC).isoformat().replace("+00:00", "Z")
    if public_base_url:
        url = f"{public_base_url}/interrupts/{token}"
        # One URL serves all three: GET inspects (JSON) or shows the page (a browser), POST resolves.
        links = {"inspect": url, "page": url, **({"resolve": url} if intent == "resolve" else {})}
        notice.setdefault("links", {}).update(links)


def _interrupt_resolved(
    notice: dict[str, Any], state: RunState, event: dict[str, Any], payload: dict[str, Any]
) -> None:
    node_id = payload.get("nodeId") or event.get("nodeId", "")
    notice.update({"nodeId": node_id, "interruptId": payload.get("interruptId")})
    if payload.get("kind"):
        notice["kind"] = payload["kind"]
    key = _key_of(state, node_id, payload.get("interruptId"))
    if key:
        notice["key"] = key
    notice["payload"] = {k: v for k, v in payload.items() if k not in ("nodeId", "interruptId")}
    if payload.get("reason"):
        notice["reason"] = payload["reason"]


def _key_of(state: RunState, node_id: str, interrupt_id: str | None) -> str | None:
    # The interrupt may have left the run head already; its id still names its visit, and so its key.
    visit = visit_of(state, node_id, interrupt_id)
    return None if visit is None else interrupt_key(state.runId, node_id, visit)


def queue_message(tenant: str, callback_url: str, notice: dict[str, Any]) -> dict[str, Any]:
    return {"v": 1, "tenant": tenant, "callbackUrl": callback_url, "notice": notice}


def queue_messages(
    tenant: str, callback_url: str, notices: list[dict[str, Any]], created_expiry: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """The messages that deliver one transition's notices: one for them all (format 10, ADR 0155: one delivery, its
    notices in order) once this release writes it, else one each; `created_expiry`: what their records are created
    with to expire, when known (store/layout.py CREATED_EXPIRY)."""
    if len(notices) > 1 and formats.NOTICE_BUNDLES_WRITTEN:
        messages = [bundle_message([queue_message(tenant, callback_url, n) for n in notices])]
    else:
        messages = [queue_message(tenant, callback_url, n) for n in notices]
    known = {} if created_expiry is None else {layout.CREATED_EXPIRY: created_expiry}
    # Each names the table its delivery's record is written in (store/layout.py), for the worker.
    return [marked_message({**m, **known}, layout.DELIVERY_RECORDS.written) for m in messages]


def bundle_message(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One message (format 10) for the notices of `messages` (one transition's, to one callbackUrl), in order."""
    first = messages[0]
    return {
        formats.FORMAT_FIELD: formats.NOTICE_BUNDLES,
        "tenant": first["tenant"],
        "callbackUrl": first["callbackUrl"],
        "notices": [m["notice"] for m in messages],
    }
