"""The WebSocket API's routes (wiring.LIVE_API, ADR 0143): $connect, $disconnect and the messages, in API Gateway's
WebSocket event shapes, answered by the api function.

Every surface authorizes exactly as its API route does: following a run is `GET /runs/{runId}/events`
(streamRunEvents) by another transport, so $connect takes what that route takes (`Authorization: Bearer <API key>`,
or from a browser, which cannot set that header on a handshake, the key as a subprotocol: `handshake_credential`),
admits it against the tenant's rate and requires the route's scope, and each message does so again with the key the
connection opened with (read as every request reads it: a revoked key's next message is refused), its run read as
the route reads it (another tenant's run is refused as there). A refused $connect is answered with the route's
status, which API Gateway returns to the client's handshake; a refused message with an `error` message on the
connection (interlude.app.live).
"""

from __future__ import annotations

import json
from typing import Any

from interlude import wiring
from interlude.api import strict_json
from interlude.api.errors import reply
from interlude.api.http import admit, authorize
from interlude.composition import services
from interlude.domain.errors import DomainError, Invalid
from interlude.domain.ids import from_wire

# The API route a live connection follows runs as: its scope, its checks.
FOLLOWS_AS = "streamRunEvents"
OK = {"statusCode": 200}
PROTOCOL_HEADER = "Sec-WebSocket-Protocol"


def handle(event: dict[str, Any]) -> dict[str, Any]:
    context = event["requestContext"]
    connection_id = str(context["connectionId"])
    kind = context.get("eventType")
    if kind == "CONNECT":
        return connect(event, connection_id)
    if kind == "DISCONNECT":
        services().live.disconnect(connection_id)
        return OK
    return message(event.get("body"), connection_id)


def connect(event: dict[str, Any], connection_id: str) -> dict[str, Any]:
    headers = {name.lower(): value for name, value in (event.get("headers") or {}).items()}
    try:
        authorization, protocol = handshake_credential(headers)
        principal = services().keys.authenticate(authorization)
        admit(principal)
        services().live.connect(authorize(principal, FOLLOWS_AS), connection_id)
    except DomainError as refused:
        status, body, answer_headers = reply(refused, "openwop")
        return {"statusCode": status, "headers": answer_headers, "body": json.dumps(body, allow_nan=False)}
    # API Gateway answers the handshake with this header: the protocol the client offered, never its key.
    return {**OK, "headers": {PROTOCOL_HEADER: protocol}} if protocol else OK


def handshake_credential(headers: dict[str, str]) -> tuple[str | None, str | None]:
    """(the Authorization value to authenticate, the subprotocol to echo) of a handshake. A browser offers
    `Sec-WebSocket-Protocol: interlude.live.v1, interlude.key.<API key>` (ADR 0146): the key travels in a header, as
    Authorization does, never in the URL that access logs and proxies record; the answer echoes `interlude.live.v1`."""
    live = wiring.LIVE_API
    offered = [value.strip() for value in (headers.get(PROTOCOL_HEADER.lower()) or "").split(",") if value.strip()]
    protocol = live.protocol if live.protocol in offered else None
    keys = [value.removeprefix(live.key_protocol) for value in offered if value.startswith(live.key_protocol)]
    if not keys:
        return headers.get("authorization"), protocol
    field = {"field": PROTOCOL_HEADER, "protocols": [live.protocol]}
    if len(keys) > 1 or headers.get("authorization"):
        raise Invalid("a handshake carries one API key: Authorization or one key subprotocol", field)
    if protocol is None:
        # The answer must echo a protocol the client offered; the key is one it must never echo.
        raise Invalid(f"offer the subprotocol {live.protocol} beside the key", field)
    return f"Bearer {keys[0]}", protocol


def message(body: str | None, connection_id: str) -> dict[str, Any]:
    live = services().live
    run_id: str | None = None
    try:
        action, wire_run_id, after = parsed(body)
        run_id = from_wire(wire_run_id)
        connection = live.connection(connection_id)
        principal = services().keys.connected_principal(connection.key_id, connection.tenant)
        admit(principal)
        authorize(principal, FOLLOWS_AS)
        if action == "subscribe":
            state, _ = services().runs.load_run(principal.tenant, run_id)
            live.subscribe(connection, state, after)
        else:
            live.unsubscribe(connection, run_id)
    except DomainError as refused:
        live.error(connection_id, refused.code, refused.message, refused.details, run_id)
    return OK


def parsed(body: str | None) -> tuple[str, str, int]:
    """(action, runId as sent, after) of a message: `{"action": "subscribe", "runId": "...", "after": 41}`."""
    try:
        # As strictly as a request's body: a message nested past any document is refused, not a RecursionError.
        message = strict_json.loads(body or "")
    except strict_json.StrictJsonError:
        message = None
    if not isinstance(message, dict):
        raise Invalid("a message is a JSON object naming its action", {"actions": list(wiring.LIVE_API.actions)})
    action, run_id, after = message.get("action"), message.get("runId"), message.get("after", -1)
    if action not in wiring.LIVE_API.actions:
        raise Invalid(f"no action {action!r}", {"field": "action", "actions": list(wiring.LIVE_API.actions)})
    if not isinstance(run_id, str) or not run_id:
        raise Invalid("runId names the run to follow", {"field": "runId"})
    if isinstance(after, bool) or not isinstance(after, int) or after < -1:
        raise Invalid("after is the last sequence the client has (-1: none)", {"field": "after"})
    return action, run_id, after
