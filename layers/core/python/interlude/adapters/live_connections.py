"""Sending to the WebSocket API's connections through its management endpoint (wiring.LIVE_API: API Gateway's
`POST /@connections/{connectionId}`, the local stack's gateway on loopback alike)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from interlude import sdk_clients


class ApiGatewayConnections:
    def __init__(self, endpoint: str, client: Any = None) -> None:
        self.client = client or sdk_clients.client("apigatewaymanagementapi", endpoint_url=endpoint)

    def send(self, connection_id: str, data: bytes) -> bool:
        try:
            self.client.post_to_connection(ConnectionId=connection_id, Data=data)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "GoneException":
                raise
            return False
        return True
