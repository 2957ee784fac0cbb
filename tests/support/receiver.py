"""A callback receiver on 127.0.0.1 that records every POST and answers from a script of responses."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook


def delivering_to_loopback(max_attempts: int) -> dict[str, str]:
    """The environment under which the callbacks worker delivers to a Receiver: loopback allowed, no backoff, and
    `max_attempts` before a dead letter; timeouts generous enough that a loaded machine never turns a good delivery
    into one."""
    return {
        "INTERLUDE_DEV_ALLOW_LOOPBACK_CALLBACKS": "1",
        "INTERLUDE_CALLBACK_MAX_ATTEMPTS": str(max_attempts),
        "INTERLUDE_CALLBACK_BACKOFF_BASE_S": "0",
        "INTERLUDE_CALLBACK_CONNECT_TIMEOUT_S": "2",
        "INTERLUDE_CALLBACK_TOTAL_TIMEOUT_S": "4",
    }


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    method: str = "POST"
    # Every header line as sent, in order: a name sent twice is here twice.
    header_lines: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Receiver:
    """`script` lists what to answer, in order: an int status, ("sleep", seconds), or ("redirect", url).
    Once the script runs out, every request gets 200."""

    script: list[Any] = field(default_factory=list)
    hits: list[Received] = field(default_factory=list)
    # What a 2xx/4xx/5xx answer carries (every method is answered alike).
    answer: bytes = b"ok"
    answer_type: str | None = None

    def start(self) -> Receiver:
        owner = self
        self._lock = threading.Lock()
        self._stop = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with owner._lock:
                    owner.hits.append(Received(self.path, headers, body, self.command, list(self.headers.items())))
                    step = owner.script.pop(0) if owner.script else 200
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    if isinstance(step, tuple) and step[0] == "sleep":
                        owner._stop.wait(step[1])
                        return
                    headers = {}
                    status = step
                    if isinstance(step, tuple) and step[0] == "redirect":
                        status, headers = 302, {"Location": step[1]}
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    if owner.answer_type:
                        self.send_header("Content-Type", owner.answer_type)
                    self.send_header("Content-Length", str(len(owner.answer)))
                    self.end_headers()
                    self.wfile.write(owner.answer)

            do_GET = do_PUT = do_PATCH = do_DELETE = do_POST  # noqa: N815 - http.server's naming

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def wait_for(self, count: int, timeout_s: float = 60.0) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while len(self.hits) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.hits)


def verify(secret: str, hit: Received) -> dict[str, Any]:
    """The reference verifier of the `standardwebhooks` package, as a tenant's receiver would run it."""
    return Webhook(secret).verify(hit.body, hit.headers)
