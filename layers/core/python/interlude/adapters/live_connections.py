"""Sending to, reading and closing the WebSocket API's connections through its management endpoint (wiring.LIVE_API:
API Gateway's `POST`, `GET` and `DELETE /@connections/{connectionId}`, the local stack's gateway on loopback alike)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from interlude import sdk_clients

log = logging.getLogger(__name__)


class ApiGatewayConnections:
    def __init__(self, endpoint: str, client: Any = None) -> None:
        self.client = client or sdk_clients.client("apigatewaymanagementapi", endpoint_url=endpoint)

    def send(self, connection_id: str, data: bytes) -> bool:
        outcome = _outcome(lambda: self.client.post_to_connection(ConnectionId=connection_id, Data=data))
        if isinstance(outcome, Exception):
            # A live follower's push is best-effort: a refusal other than a gone connection (throttled past
            # botocore's retries, a permission missing) must not fail the outbox record and hold the run's other work
            # with it. The follower stays: it sees a gap in the sequence numbers and subscribes again after the last
            # it holds.
            _log("a live connection was not sent to", connection_id, outcome)
        return outcome is not False

    def is_open(self, connection_id: str) -> bool:
        outcome = _outcome(lambda: self.client.get_connection(ConnectionId=connection_id))
        if isinstance(outcome, Exception):
            # Taken as open: a follower's place is freed only when API Gateway says its connection is gone.
            _log("a live connection was not read", connection_id, outcome)
        return outcome is not False

    def close(self, connection_id: str) -> bool:
        outcome = _outcome(lambda: self.client.delete_connection(ConnectionId=connection_id))
        if isinstance(outcome, Exception):
            # Left open, a connection ends within API Gateway's 2 hours, and its messages are refused meanwhile (its
            # key and items are gone with its tenant): a deletion goes on.
            _log("a live connection was not closed", connection_id, outcome)
        return outcome is True


def _outcome(call: Callable[[], Any]) -> bool | Exception:
    """True when the management API did it, False when it answered that the connection is gone, else the failure."""
    try:
        call()
    except ClientError as exc:
        return False if exc.response["Error"]["Code"] == "GoneException" else exc
    except BotoCoreError as exc:
        return exc
    return True


def _log(what: str, connection_id: str, exc: Exception) -> None:
    log.error(what, extra={"connectionId": connection_id, "error": repr(exc)})
