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
        return self._not_gone(lambda: self.client.post_to_connection(ConnectionId=connection_id, Data=data), connection_id, self._not_sent)

    def is_open(self, connection_id: str) -> bool:
        return self._not_gone(lambda: self.client.get_connection(ConnectionId=connection_id), connection_id, self._not_read)

    @staticmethod
    def _not_gone(call: Callable[[], Any], connection_id: str, on_error: Callable[[str, Exception], None]) -> bool:
        """False when API Gateway answers that the connection is gone; any other failure goes to `on_error`."""
        try:
            call()
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "GoneException":
                return False
            on_error(connection_id, exc)
        except BotoCoreError as exc:
            on_error(connection_id, exc)
        return True

    @staticmethod
    def _not_read(connection_id: str, exc: Exception) -> None:
        # Taken as open: a follower's place is freed only when API Gateway says its connection is gone.
        log.error("a live connection was not read", extra={"connectionId": connection_id, "error": repr(exc)})

    def close(self, connection_id: str) -> bool:
        try:
            self.client.delete_connection(ConnectionId=connection_id)
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "GoneException":
                return False
            refused: Exception = exc
        except BotoCoreError as exc:
            refused = exc
        # Left open, a connection ends within API Gateway's 2 hours, and its messages are refused meanwhile (its key
        # and items are gone with its tenant): a deletion goes on.
        log.error("a live connection was not closed", extra={"connectionId": connection_id, "error": repr(refused)})
        return False

    @staticmethod
    def _not_sent(connection_id: str, exc: Exception) -> None:
        # A live follower's push is best-effort: a refusal other than a gone connection (throttled past botocore's
        # retries, a permission missing) must not fail the outbox record and hold the run's other work with it. The
        # follower stays: it sees a gap in the sequence numbers and subscribes again after the last it holds.
        log.error("a live connection was not sent to", extra={"connectionId": connection_id, "error": repr(exc)})
