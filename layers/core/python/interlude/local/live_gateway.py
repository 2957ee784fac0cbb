"""The local stack's WebSocket API (wiring.LIVE_API), playing API Gateway on loopback: a WebSocket server whose
connections invoke the api function with API Gateway's WebSocket event shapes ($connect with the handshake's
headers, a message routed by its `action`, $disconnect), and the management API the functions send through
(`POST /{stage}/@connections/{connectionId}`; `GET` reads it; `DELETE` closes it, its $disconnect following; 410
GoneException for a connection that is not open, as API Gateway answers). A $connect answered with a status other than 2xx refuses the handshake with that status; a 2xx answer's
`Sec-WebSocket-Protocol` header is the subprotocol the handshake's answer names, as API Gateway passes it on."""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve
from websockets.typing import Subprotocol

from interlude import wiring
from interlude.local.http_gateway import LOOPBACK, JsonHandler, LoopbackServer

CONNECTIONS_PATH = "/@connections/"
# API Gateway's route selection expression for the API: $request.body.action.
DEFAULT_ROUTE = "$default"
Invoke = Callable[[dict[str, Any]], Any]


class LiveGateway:
    def __init__(self, invoke: Invoke, port: int = 0) -> None:
        self.invoke = invoke
        self.open: dict[str, ServerConnection] = {}
        self._ids: dict[uuid.UUID, str] = {}
        # The subprotocol each accepted handshake's $connect answered with, until the handshake's answer names it.
        self._protocols: dict[uuid.UUID, Subprotocol] = {}
        self._lock = threading.Lock()
        self.server: Server = serve(
            self._serve,
            LOOPBACK,
            port,
            process_request=self._connect,
            select_subprotocol=self._protocol,
            compression=None,
        )
        self.thread = threading.Thread(target=self.server.serve_forever, name="live-gateway", daemon=True)
        self.management = LoopbackServer(_ManagementServer(self), "live-management")

    @property
    def url(self) -> str:
        """Where clients connect (API Gateway's wss://{api}.execute-api.{region}.amazonaws.com/{stage})."""
        return f"ws://{LOOPBACK}:{self.server.socket.getsockname()[1]}/{wiring.LIVE_API.stage}"

    @property
    def endpoint(self) -> str:
        """The management endpoint (the deployed one's https://…/{stage}): LIVE_API.endpoint_env's value."""
        return f"{self.management.endpoint}/{wiring.LIVE_API.stage}"

    def start(self) -> LiveGateway:
        self.thread.start()
        self.management.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.management.stop()

    def send(self, connection_id: str, data: bytes) -> bool:
        with self._lock:
            connection = self.open.get(connection_id)
        if connection is None:
            return False
        try:
            connection.send(data.decode())
        except ConnectionClosed:
            return False
        return True

    def is_open(self, connection_id: str) -> bool:
        with self._lock:
            return connection_id in self.open

    def close(self, connection_id: str) -> bool:
        with self._lock:
            connection = self.open.get(connection_id)
        if connection is None:
            return False
        connection.close()  # its handler's loop ends, and invokes $disconnect
        return True

    # -- API Gateway's side of a connection ------------------------------------------------------------------

    def _connect(self, connection: ServerConnection, request: Request) -> Response | None:
        connection_id = secrets.token_urlsafe(12)
        event = {
            "headers": dict(request.headers.raw_items()),
            "isBase64Encoded": False,
            "requestContext": self._context(connection_id, "$connect", "CONNECT"),
        }
        answer = self.invoke(event) or {}
        status = int(answer.get("statusCode", 200))
        if status >= 300:
            body = str(answer.get("body") or "").encode()
            headers = Headers({"Content-Type": "application/json", "Content-Length": str(len(body))})
            return Response(status, HTTPStatus(status).phrase, headers, body)
        protocol = {name.lower(): value for name, value in (answer.get("headers") or {}).items()}.get(
            "sec-websocket-protocol"
        )
        with self._lock:
            self._ids[connection.id] = connection_id
            if protocol:
                self._protocols[connection.id] = Subprotocol(protocol)
        return None

    def _protocol(self, connection: ServerConnection, offered: Any) -> Subprotocol | None:
        with self._lock:
            return self._protocols.pop(connection.id, None)

    def _serve(self, connection: ServerConnection) -> None:
        with self._lock:
            connection_id = self._ids.pop(connection.id)
            self.open[connection_id] = connection
        try:
            for message in connection:
                text = message if isinstance(message, str) else message.decode()
                context = {**self._context(connection_id, route_of(text), "MESSAGE"), "messageId": uuid.uuid4().hex}
                self.invoke({"body": text, "isBase64Encoded": False, "requestContext": context})
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                self.open.pop(connection_id, None)
            context = {**self._context(connection_id, "$disconnect", "DISCONNECT"), "disconnectStatusCode": 1000}
            self.invoke({"isBase64Encoded": False, "requestContext": context})

    def _context(self, connection_id: str, route_key: str, event_type: str) -> dict[str, Any]:
        return request_context(connection_id, route_key, event_type, f"{LOOPBACK}:{self.server.socket.getsockname()[1]}")


def request_context(connection_id: str, route_key: str, event_type: str, domain: str) -> dict[str, Any]:
    """An API Gateway WebSocket event's requestContext (CONNECT, MESSAGE or DISCONNECT)."""
    return {
        "routeKey": route_key,
        "eventType": event_type,
        "messageDirection": "IN",
        "connectionId": connection_id,
        "requestId": uuid.uuid4().hex,
        "requestTimeEpoch": int(time.time() * 1000),
        "stage": wiring.LIVE_API.stage,
        "domainName": domain,
        "apiId": "local",
        "identity": {"sourceIp": LOOPBACK},
    }


def route_of(text: str) -> str:
    """The route a message takes: its `action` when the API has that route, else $default."""
    try:
        action = json.loads(text).get("action")
    except (ValueError, AttributeError, RecursionError):  # not an object naming its action, however malformed
        return DEFAULT_ROUTE
    return action if action in wiring.LIVE_API.actions else DEFAULT_ROUTE


class _ManagementHandler(JsonHandler):
    server_version = "interlude-local-live"
    server: _ManagementServer

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        data = self.rfile.read(int(self.headers.get("content-length") or 0))
        connection_id = self._connection_id()
        if connection_id is not None:
            self._answer(self.server.gateway.send(connection_id, data), 200)

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        connection_id = self._connection_id()
        if connection_id is not None:
            self._answer(self.server.gateway.is_open(connection_id), 200, {"identity": {"sourceIp": LOOPBACK}})

    def do_DELETE(self) -> None:  # noqa: N802 - stdlib name
        connection_id = self._connection_id()
        if connection_id is not None:
            self._answer(self.server.gateway.close(connection_id), 204)

    def _connection_id(self) -> str | None:
        path = unquote(self.path)
        if CONNECTIONS_PATH not in path:
            self._refuse(404, "NotFoundException", "only /@connections/{connectionId}")
            return None
        return path.split(CONNECTIONS_PATH, 1)[1]

    def _answer(self, found: bool, status: int, body: Any = None) -> None:
        if found:
            self.answer(status, body)
        else:
            self._refuse(410, "GoneException", None)

    def _refuse(self, status: int, error: str, message: str | None) -> None:
        self.answer(status, {"message": message}, {"x-amzn-ErrorType": error})


class _ManagementServer(ThreadingHTTPServer):
    def __init__(self, gateway: LiveGateway) -> None:
        super().__init__((LOOPBACK, 0), _ManagementHandler)
        self.gateway = gateway
