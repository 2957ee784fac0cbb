"""The local stack's control endpoint, for tests alone: a loopback server answering `POST /quiesce?timeoutSeconds=N`
with 200 once every pump is quiet (interlude.local.pump.quiesce), 504 and the reason if it was not within N seconds.
It is no route of the product's API (the gateway) and no function's: a test that drives the stack over HTTP asks it
whether every background effect of its requests has landed instead of guessing from repeated reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from interlude.local.http_gateway import LOOPBACK, LoopbackServer
from interlude.local.pump import NotQuiet

QUIESCE_PATH = "/quiesce"
DEFAULT_TIMEOUT_S = 30.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "interlude-local-control"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        url = urlsplit(self.path)
        if url.path != QUIESCE_PATH:
            self._answer(404, {"error": f"only POST {QUIESCE_PATH}"})
            return
        try:
            timeout_s = float(parse_qs(url.query).get("timeoutSeconds", [DEFAULT_TIMEOUT_S])[0])
        except ValueError:
            self._answer(400, {"error": "timeoutSeconds is a number of seconds"})
            return
        try:
            self.server.quiesce(timeout_s)
        except NotQuiet as exc:
            self._answer(504, {"error": str(exc)})
            return
        self._answer(200, {"quiet": True})

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    def __init__(self, port: int, quiesce: Callable[[float], None]) -> None:
        super().__init__((LOOPBACK, port), _Handler)
        self.quiesce = quiesce


class ControlApi(LoopbackServer):
    def __init__(self, quiesce: Callable[[float], None], port: int = 0) -> None:
        super().__init__(_Server(port, quiesce), "control-api")
