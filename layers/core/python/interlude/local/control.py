"""The local stack's control endpoint, for tests alone: a loopback server answering `POST /quiesce?timeoutSeconds=N`
with 200 once every pump is quiet (interlude.local.pump.quiesce), 504 and the reason if it was not within N seconds.
It is no route of the product's API (the gateway) and no function's: a test that drives the stack over HTTP asks it
whether every background effect of its requests has landed instead of guessing from repeated reads.
"""

from __future__ import annotations

from collections.abc import Callable
from http.server import ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from interlude.local.http_gateway import LOOPBACK, JsonHandler, LoopbackServer
from interlude.local.pump import NotQuiet

QUIESCE_PATH = "/quiesce"
DEFAULT_TIMEOUT_S = 30.0


class _Handler(JsonHandler):
    server_version = "interlude-local-control"
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self.rfile.read(int(self.headers.get("content-length") or 0))
        url = urlsplit(self.path)
        if url.path != QUIESCE_PATH:
            self.answer(404, {"error": f"only POST {QUIESCE_PATH}"})
            return
        try:
            timeout_s = float(parse_qs(url.query).get("timeoutSeconds", [DEFAULT_TIMEOUT_S])[0])
        except ValueError:
            self.answer(400, {"error": "timeoutSeconds is a number of seconds"})
            return
        try:
            self.server.quiesce(timeout_s)
        except NotQuiet as exc:
            self.answer(504, {"error": str(exc)})
            return
        self.answer(200, {"quiet": True})


class _Server(ThreadingHTTPServer):
    def __init__(self, port: int, quiesce: Callable[[float], None]) -> None:
        super().__init__((LOOPBACK, port), _Handler)
        self.quiesce = quiesce


class ControlApi(LoopbackServer):
    def __init__(self, quiesce: Callable[[float], None], port: int = 0) -> None:
        super().__init__(_Server(port, quiesce), "control-api")
