"""moto's server on 127.0.0.1, serialised: one request at a time, so conditional writes are atomic as on AWS."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import socket
import threading
import time
from typing import Any

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.sqs.models import sqs_backends
from werkzeug.serving import BaseWSGIServer, make_server

from interlude.local import LOCAL_ACCOUNT, LOCAL_REGION, moto_patches
from interlude.local.http_gateway import LOOPBACK, STOP_POLL_S
from interlude.local.pump import DYNAMODB, OTHER, SCHEDULER, SQS, note_change, queue_name, wake_pumps

# Operations that change nothing a pump carries (the stream, a queue, the schedules): the JSON protocols' read
# operations by name, and every GET or HEAD of the REST ones.
_READ_PREFIXES = ("Get", "Query", "Scan", "BatchGet", "Describe", "List", "Receive")


def changes_something(environ: dict[str, Any]) -> bool:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return not target.rpartition(".")[2].startswith(_READ_PREFIXES)
    return environ.get("REQUEST_METHOD") not in ("GET", "HEAD")


# SQS writes that give no consumer anything to receive.
_SQS_REMOVALS = ("AmazonSQS.DeleteMessage", "AmazonSQS.DeleteMessageBatch", "AmazonSQS.PurgeQueue")


def written_queue(body: bytes) -> str | None:
    """The name of the queue an SQS write names (its JSON body's QueueUrl); None when it names none."""
    try:
        url = json.loads(body).get("QueueUrl")
    except (ValueError, AttributeError):
        return None
    return queue_name(str(url)) if url else None


def written_service(environ: dict[str, Any]) -> str | None:
    """Which pumps a write may give something to move: the table's (its stream), the queues', the schedules'; None for
    any other service's, which no pump carries."""
    target = environ.get("HTTP_X_AMZ_TARGET") or ""
    if target.startswith("DynamoDB_"):
        return DYNAMODB
    if target.startswith("AmazonSQS."):
        return SQS
    if str(environ.get("PATH_INFO", "")).startswith("/schedules"):
        return SCHEDULER
    return None


class _KeepAliveHandler(MotoRequestHandler):
    """Keeps the connection open between requests (HTTP/1.1), which werkzeug's own handler never does: each call of a
    pump or a handler opened a TCP connection, and the server a thread, for one request (≈ 5 % of a busy stack's CPU).
    The request's body is read whole by its Content-Length before the application sees it and the answer is sent with
    its length, so the next request on the connection starts where this one ended. A chunked request goes werkzeug's
    way (and its connection is closed)."""

    # An answer goes out in two writes (its head, then its body). On a connection kept open, Nagle's algorithm holds the
    # body until the client acknowledges the head, which a client delays by up to 40 ms: every request cost that.
    disable_nagle_algorithm = True

    def run_wsgi(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            super().run_wsgi()
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.environ = environ = self.make_environ()
        environ["wsgi.input"] = io.BytesIO(body)
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status, headers]
            return answer.append

        try:
            result = self.server.app(environ, start_response)
            data = b"".join([*answer[2:], *result])
        except Exception:
            self.close_connection = True
            self.send_error(500)
            raise
        status, headers = answer[0], answer[1]
        code = int(status.split(" ", 1)[0])
        self.send_response(code, status.partition(" ")[2])
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        head = self.command == "HEAD"
        if head:
            length = next((v for n, v in headers if n.lower() == "content-length"), None)
            if length is not None:
                self.send_header("Content-Length", length)
        elif code >= 200 and code not in (204, 304):
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and not head:
            self.wfile.write(data)
        self.wfile.flush()

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


class LockedMotoServer:
    def __init__(self, port: int = 0) -> None:
        # Transactions and queries that cost what they touch; their in-place undo relies on the lock below.
        moto_patches.apply()
        self._app = DomainDispatcherApplication(create_backend_app)
        # moto finds a request's backend by listing its package's directories and trying each service's URL patterns
        # in turn, for every request: a few percent of a busy stack's CPU for an answer that depends only on the host.
        self._app.get_backend_for_host = functools.lru_cache(maxsize=256)(self._app.get_backend_for_host)  # type: ignore[method-assign]
        self._lock = threading.Lock()
        self._server: BaseWSGIServer = make_server(
            LOOPBACK, port, self._locked, threaded=True, request_handler=_KeepAliveHandler
        )
        # Connections kept open between requests, closed on stop: their threads would serve a stopped server's clients.
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self.accepted = 0  # connections accepted so far (counted by tests)
        self._server.process_request = self._tracked(self._server.process_request)  # type: ignore[method-assign]
        self._server.shutdown_request = self._untracked(self._server.shutdown_request)  # type: ignore[method-assign]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": STOP_POLL_S}, name="moto", daemon=True
        )

    def _locked(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        # moto's backends are not thread-safe (two conditional writers can both win); the whole
        # request, response body included, runs under one lock.
        body = environ["wsgi.input"].read()
        environ["wsgi.input"] = io.BytesIO(body)
        with self._lock:
            result = self._app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                close = getattr(result, "close", None)
                if close:
                    close()
                # Every write reaches moto here, whoever makes it (an API instance, a pump's delivery, a test or the
                # CLI): the pumps that carry it do so now rather than at their next idle poll, and nothing else wakes
                # them, so a read (a client polling a run) costs the stack no round of polls. Only those: while the
                # stack is busy every pump woken by every write polled back to back (a third of its CPU).
                if changes_something(environ):
                    service = written_service(environ)
                    if service != SQS:
                        wake_pumps(service or OTHER)
                    elif environ.get("HTTP_X_AMZ_TARGET") in _SQS_REMOVALS:
                        note_change()
                    else:
                        # Only that queue's consumer: every queue's pump received after every write to any queue (a
                        # third of the stack's calls to moto while it dispatched a backlog).
                        wake_pumps(SQS, written_queue(body))

    def _tracked(self, process_request: Any) -> Any:
        def tracked(request: socket.socket, client_address: Any) -> None:
            with self._connections_lock:
                self._connections.add(request)
                self.accepted += 1
            process_request(request, client_address)

        return tracked

    def _untracked(self, shutdown_request: Any) -> Any:
        def untracked(request: socket.socket) -> None:
            with self._connections_lock:
                self._connections.discard(request)
            shutdown_request(request)

        return untracked

    def next_visible(self, queue_name: str) -> float | None:
        """When (epoch seconds) the earliest of the queue's messages now hidden (received and in flight, or delayed)
        becomes visible; None if none is. moto's queues are in this process; read under the server's lock."""
        now_ms = time.time() * 1000
        with self._lock:
            queue = sqs_backends[LOCAL_ACCOUNT][LOCAL_REGION].queues.get(queue_name)
            messages = list(queue._messages) if queue is not None else []
            hidden = [m for m in messages if max(m.visible_at, m.delayed_until) >= now_ms]
            soonest = min((max(m.visible_at, m.delayed_until) for m in hidden), default=None)
        return None if soonest is None else soonest / 1000

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_port}"

    def start(self) -> LockedMotoServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self._server.server_close()
        with self._connections_lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            with contextlib.suppress(OSError):  # closed by its client already
                connection.shutdown(socket.SHUT_RDWR)
