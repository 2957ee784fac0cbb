"""A loopback HTTP server that plays API Gateway (HTTP API, payload 2.0) in front of the real `api` handler."""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, Self
from urllib.parse import parse_qsl, urlsplit

from interlude import wiring
from interlude.local import LOCAL_ACCOUNT, mailbox
from interlude.local.lambda_runtime import InstancePool

MAX_BODY = 2_000_000
LOOPBACK = "127.0.0.1"
# How often a loopback server's loop looks whether it was asked to stop (the standard library's 0.5 s made each
# stop of a server cost half a second: every stack's stop, every test's own gateway).
STOP_POLL_S = 0.05


def to_event(method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str) -> dict[str, Any]:
    parts = urlsplit(target)
    query: dict[str, str] = {}
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        query[k] = f"{query[k]},{v}" if k in query else v
    try:
        text, is_b64 = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, is_b64 = base64.b64encode(body).decode(), True
    lowered = {k.lower(): v for k, v in headers.items()}
    lowered.setdefault("x-forwarded-proto", "http")
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": parts.path,
        "rawQueryString": parts.query,
        "headers": lowered,
        "queryStringParameters": query or None,
        "requestContext": {
            "accountId": LOCAL_ACCOUNT,
            "apiId": "local",
            "domainName": lowered.get("host", "127.0.0.1"),
            "http": {
                "method": method,
                "path": parts.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime()),
            "timeEpoch": int(time.time() * 1000),
        },
        "body": text or None,
        "isBase64Encoded": is_b64,
        # API Gateway (payload 2.0) hands the Cookie header over as a list.
        **({"cookies": [c.strip() for c in lowered["cookie"].split(";") if c.strip()]} if "cookie" in lowered else {}),
    }


def combined_headers(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """A header sent more than once arrives once, its values joined by commas, as API Gateway (payload 2.0) does:
    two Idempotency-Keys read as one key the route refuses, never as whichever came last."""
    combined: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        separator = "; " if key == "cookie" else ","
        combined[key] = f"{combined[key]}{separator}{value}" if key in combined else value
    return combined


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "interlude-local"
    # Headers and body leave in separate writes: with Nagle on, the body waits for the client's delayed ACK
    # (about 40 ms on Linux) on every keep-alive response.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        if self.server.verbose:
            super().log_message(format, *args)

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY:
            self.send_error(413)
            return
        body = self.rfile.read(length) if length else b""
        if self.command == "GET" and urlsplit(self.path).path.startswith(mailbox.OUTBOX_PATH):
            # Development only: the mail moto's SES kept (interlude.local.mailbox); never part of a deployment.
            self._answer(mailbox.serve(urlsplit(self.path).path))
            return
        event = to_event(self.command, self.path, combined_headers(self.headers.items()), body, self.client_address[0])
        try:
            if self.server.instances is None:
                raise RuntimeError("the gateway is not started")
            result = self.server.instances.invoke(event)
        except Exception:  # Lambda would answer 502 when the function itself crashes
            result = {
                "statusCode": 502,
                "headers": {"Content-Type": "application/json"},
                "body": '{"message":"Internal Server Error"}',
            }
        self._answer(result)

    def _answer(self, result: dict[str, Any]) -> None:
        """Write the function's result (payload 2.0) as API Gateway would."""
        payload = result.get("body") or ""
        data = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode()
        self.send_response(int(result.get("statusCode", 200)))
        for name, value in (result.get("headers") or {}).items():
            self.send_header(name, value)
        for name, values in (result.get("multiValueHeaders") or {}).items():
            for value in values:
                self.send_header(name, value)
        for cookie in result.get("cookies") or []:
            self.send_header("Set-Cookie", cookie)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def __getattr__(self, name: str) -> Any:
        # Every method (TRACE, QUERY, ...) reaches the function, which answers 405 where a path does not serve
        # it; the stdlib's 501 for a method without a do_ would be a server error that no deployment gives.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)


class Instances(Protocol):
    """What serves the gateway's requests: the `api` function's instances."""

    def invoke(self, event: dict[str, Any]) -> Any: ...

    def stop(self) -> None: ...


class _Server(ThreadingHTTPServer):
    # Bursts of concurrent clients (approvers racing) must queue, not be reset.
    request_queue_size = 256
    verbose = False
    # The `api` function's instances; made when the gateway starts.
    instances: Instances | None = None


class JsonHandler(BaseHTTPRequestHandler):
    """A loopback surface's request handler that answers JSON and logs nothing: the Lambda Invoke API, the control
    endpoint, the WebSocket gateway's management API (the API gateway's own handler logs when verbose)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def answer(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        """`body` as JSON (none: an empty answer) with `headers`."""
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LoopbackServer:
    """One of the local stack's HTTP surfaces: `server` (bound to LOOPBACK) served on a daemon thread named `name`."""

    def __init__(self, server: ThreadingHTTPServer, name: str) -> None:
        server.daemon_threads = True
        self.server = server
        self.thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": STOP_POLL_S}, name=name, daemon=True
        )

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.server.server_port}"

    def start(self) -> Self:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Gateway:
    def __init__(self, port: int = 0, verbose: bool = False) -> None:
        self.server = _Server((LOOPBACK, port), _Handler)
        self.server.daemon_threads = True
        self.server.verbose = verbose
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": STOP_POLL_S}, name="gateway", daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.server.server_port}"

    def start(self, instances: Instances | None = None) -> Gateway:
        """Serve through `instances` (default: a pool of the `api` function's processes)."""
        self.server.instances = instances or InstancePool(wiring.ROUTES_FUNCTION)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self.server.instances is not None:
            self.server.instances.stop()
