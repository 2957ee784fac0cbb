"""moto's server on 127.0.0.1, serialised: one request at a time, so conditional writes are atomic as on AWS."""

from __future__ import annotations

import functools
import threading
from typing import Any

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from interlude.local import moto_patches
from interlude.local.http_gateway import LOOPBACK, STOP_POLL_S
from interlude.local.pump import DYNAMODB, OTHER, SCHEDULER, SQS, wake_pumps

# Operations that change nothing a pump carries (the stream, a queue, the schedules): the JSON protocols' read
# operations by name, and every GET or HEAD of the REST ones.
_READ_PREFIXES = ("Get", "Query", "Scan", "BatchGet", "Describe", "List", "Receive")


def changes_something(environ: dict[str, Any]) -> bool:
    target = environ.get("HTTP_X_AMZ_TARGET")
    if target:
        return not target.rpartition(".")[2].startswith(_READ_PREFIXES)
    return environ.get("REQUEST_METHOD") not in ("GET", "HEAD")


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


class _QuietHandler(MotoRequestHandler):
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
            LOOPBACK, port, self._locked, threaded=True, request_handler=_QuietHandler
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": STOP_POLL_S}, name="moto", daemon=True
        )

    def _locked(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        # moto's backends are not thread-safe (two conditional writers can both win); the whole
        # request, response body included, runs under one lock.
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
                    wake_pumps(written_service(environ) or OTHER)

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self._server.server_port}"

    def start(self) -> LockedMotoServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
