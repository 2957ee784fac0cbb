"""One HTTP request (a callback's POST, an action's call) to a checked target, over a connection pinned to the addresses the egress guard admitted.

The client never resolves a name: it dials one of ``target.addresses`` and, for https, verifies the certificate
against the original host name (which is also sent as SNI and in the Host header). It uses http.client directly,
which reads no proxy environment variables and follows no redirects. Every socket operation gets only the time
left before the total deadline, and the bytes read from the server are capped, so a slow or endless response
cannot hold a delivery worker.
"""

from __future__ import annotations

import functools
import http.client
import io
import socket
import ssl
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlude.rules.egress import CheckedTarget

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

# Room for the status line and headers; http.client's own limits (100 headers of 64 KiB) are far looser.
HEADER_BYTES_LIMIT = 64 * 1024
# Read-ahead of the buffered reader plus chunked-encoding framing, on top of the body excerpt.
_BODY_READ_SLACK = 16 * 1024


@dataclass(frozen=True)
class DeliveryResponse:
    status: int
    body_excerpt: bytes
    elapsed_ms: int


class DeliveryFailed(Exception):
    """A delivery attempt that did not end in a 2xx response.

    ``error_class`` is one of ``connect`` (no TCP connection to any checked address), ``tls`` (handshake or
    certificate verification failed), ``timeout`` (the total deadline passed before the response headers),
    ``io`` (the connection broke mid-exchange), ``protocol`` (not a valid HTTP response), ``too_large`` (response
    headers over HEADER_BYTES_LIMIT), ``redirect`` (a 3xx, never followed) and ``http_status`` (any other
    non-2xx). ``status``, ``body_excerpt`` and ``retry_after`` are set when the server answered.
    """

    def __init__(
        self,
        error_class: str,
        message: str,
        *,
        status: int | None = None,
        body_excerpt: bytes = b"",
        retry_after: str | None = None,
    ) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message
        self.status = status
        self.body_excerpt = body_excerpt
        self.retry_after = retry_after


@dataclass(frozen=True)
class AnsweredResponse:
    """Any answer the server gave (send_pinned): its status, the headers a caller may read, and the body excerpt."""

    status: int
    body_excerpt: bytes
    elapsed_ms: int
    content_type: str | None
    retry_after: str | None


def post_pinned(
    target: CheckedTarget,
    body: bytes,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    total_timeout: float,
    max_response_bytes: int,
    ca_file: str | None = None,
) -> DeliveryResponse:
    """POST ``body`` to ``target`` and return the 2xx response, or raise DeliveryFailed.

    ``target`` must come from egress.check_url: its addresses are trusted as checked. ``connect_timeout`` bounds
    each TCP connect; ``total_timeout`` bounds the whole attempt up to the response headers and cuts the body
    excerpt short after that. At most ``max_response_bytes`` of the body are read and returned. ``ca_file``
    replaces the system trust store (tests, private CAs).
    """
    response = send_pinned(
        "POST",
        target,
        body,
        headers,
        connect_timeout=connect_timeout,
        total_timeout=total_timeout,
        max_response_bytes=max_response_bytes,
        ca_file=ca_file,
    )
    status = response.status
    if 200 <= status < 300:
        return DeliveryResponse(status=status, body_excerpt=response.body_excerpt, elapsed_ms=response.elapsed_ms)
    error_class = "redirect" if 300 <= status < 400 else "http_status"
    raise DeliveryFailed(
        error_class,
        f"callback answered {status}" + (" (redirects are not followed)" if error_class == "redirect" else ""),
        status=status,
        body_excerpt=response.body_excerpt,
        retry_after=response.retry_after,
    )


def send_pinned(
    method: str,
    target: CheckedTarget,
    body: bytes | None,
    headers: dict[str, str],
    *,
    connect_timeout: float,
    total_timeout: float,
    max_response_bytes: int,
    ca_file: str | None = None,
) -> AnsweredResponse:
    """One request to ``target`` (bounded as post_pinned's): whatever status the server answers, or DeliveryFailed
    when it did not answer (connect, tls, timeout, io, protocol, too_large). Redirects are never followed."""
    if any(name.lower() == "host" for name in headers):
        raise ValueError("the Host header is derived from the target and cannot be overridden")
    if not target.addresses:
        raise DeliveryFailed("connect", "target has no checked address")

    started = time.monotonic()
    deadline = _Deadline(started + total_timeout)
    tls_context = _tls_context(ca_file) if target.scheme == "https" else None
    connection = _PinnedConnection(target, connect_timeout=connect_timeout, deadline=deadline, tls_context=tls_context)
    try:
        response = _exchange(connection, target, method, body, headers, deadline)
        excerpt = _read_excerpt(response, connection, max_response_bytes)
    finally:
        connection.close()
    return AnsweredResponse(
        status=response.status,
        body_excerpt=excerpt,
        elapsed_ms=int((time.monotonic() - started) * 1000),
        content_type=response.getheader("Content-Type"),
        retry_after=response.getheader("Retry-After"),
    )


def _exchange(
    connection: _PinnedConnection,
    target: CheckedTarget,
    method: str,
    body: bytes | None,
    headers: dict[str, str],
    deadline: _Deadline,
) -> http.client.HTTPResponse:
    connection.connect()
    try:
        assert connection.sock is not None
        connection.sock.settimeout(deadline.remaining())
        # One request per connection: nothing is pooled, and closing frees the worker at once.
        request_headers = {name: value for name, value in headers.items() if name.lower() != "connection"}
        request_headers["Connection"] = "close"
        connection.request(method, target.path_and_query, body=body, headers=request_headers)
        return connection.getresponse()
    except _ResponseTooLarge:
        raise DeliveryFailed("too_large", f"response headers exceed {HEADER_BYTES_LIMIT} bytes") from None
    except TimeoutError:
        raise DeliveryFailed("timeout", "no response before the total timeout") from None
    except ssl.SSLError as exc:
        raise DeliveryFailed("tls", f"TLS error during the exchange: {exc}") from None
    except http.client.HTTPException as exc:
        raise DeliveryFailed("protocol", f"invalid HTTP response: {exc!r}") from None
    except OSError as exc:
        raise DeliveryFailed("io", f"connection failed during the exchange: {exc}") from None


def _read_excerpt(response: http.client.HTTPResponse, connection: _PinnedConnection, limit: int) -> bytes:
    """Read at most ``limit`` body bytes. The status is already known, so a body that stalls, breaks or runs
    past the byte cap only shortens the excerpt; it does not turn an answered delivery into a failure."""
    assert connection.reader is not None
    connection.reader.cap = connection.reader.consumed + limit + _BODY_READ_SLACK
    chunks: list[bytes] = []
    received = 0
    while received < limit:
        try:
            chunk = response.read(min(limit - received, 64 * 1024))
        except http.client.IncompleteRead as exc:
            chunks.append(exc.partial[: limit - received])
            break
        except (_ResponseTooLarge, OSError, http.client.HTTPException):
            break
        if not chunk:
            break
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)


@functools.cache
def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    # Made once per process and CA file: loading the trust store is ≈ 24 ms of CPU, more than the rest of a POST
    # (docs/adr/0136). A context is safe to share between connections and threads; each POST still dials and
    # verifies its own pinned address.
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class _Deadline:
    def __init__(self, at: float) -> None:
        self._at = at

    def remaining(self) -> float:
        left = self._at - time.monotonic()
        if left <= 0:
            raise TimeoutError("total timeout reached")
        return left


class _ResponseTooLarge(Exception):
    pass


class _BoundedSocketReader(io.RawIOBase):
    """Raw reader for the response: each recv gets only the time left before the deadline (so a server that
    sends one byte at a time cannot extend the attempt) and reading stops at ``cap`` bytes."""

    def __init__(self, sock: socket.socket, deadline: _Deadline, cap: int) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self.cap = cap
        self.consumed = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Buffer) -> int:
        room = self.cap - self.consumed
        if room <= 0:
            raise _ResponseTooLarge
        self._sock.settimeout(self._deadline.remaining())
        with memoryview(buffer) as view:
            count = self._sock.recv_into(view, min(len(view), room))
        self.consumed += count
        return count


class _BoundedResponse(http.client.HTTPResponse):
    def __init__(self, sock: socket.socket, *args: Any, reader: _BoundedSocketReader, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp.close()
        self.fp = io.BufferedReader(reader)


class _PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection whose connect() dials the checked addresses instead of resolving ``host``.

    ``host`` stays the original name, so http.client writes it in the Host header and TLS verifies it.
    """

    def __init__(
        self,
        target: CheckedTarget,
        *,
        connect_timeout: float,
        deadline: _Deadline,
        tls_context: ssl.SSLContext | None,
    ) -> None:
        super().__init__(target.host, target.port)
        self.default_port = 443 if tls_context is not None else 80
        self._addresses = target.addresses
        self._connect_timeout = connect_timeout
        self._deadline = deadline
        self._tls_context = tls_context
        self.reader: _BoundedSocketReader | None = None
        # http.client calls response_class(sock, method=..., ...) to build each response; a bound method that
        # builds ours serves, though typeshed declares the attribute a class.
        self.response_class = self._make_response  # type: ignore[assignment]

    def connect(self) -> None:
        sock = self._dial()
        if self._tls_context is not None:
            sock = self._start_tls(sock)
        self.sock = sock

    def _dial(self) -> socket.socket:
        failures: list[str] = []
        for address in self._addresses:
            try:
                timeout = min(self._connect_timeout, self._deadline.remaining())
            except TimeoutError:
                raise DeliveryFailed("timeout", "total timeout reached while connecting") from None
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect((address, self.port))
            except OSError as exc:
                sock.close()
                failures.append(f"{address}: {exc}")
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        raise DeliveryFailed("connect", "could not connect: " + "; ".join(failures))

    def _start_tls(self, sock: socket.socket) -> ssl.SSLSocket:
        assert self._tls_context is not None
        try:
            sock.settimeout(self._deadline.remaining())
            return self._tls_context.wrap_socket(sock, server_hostname=self.host)
        except TimeoutError:
            sock.close()
            raise DeliveryFailed("timeout", "total timeout reached during the TLS handshake") from None
        except OSError as exc:  # ssl.SSLError, certificate verification failures and resets alike
            sock.close()
            raise DeliveryFailed("tls", f"TLS handshake with {self.host!r} failed: {exc}") from None

    def _make_response(self, sock: socket.socket, *args: Any, **kwargs: Any) -> _BoundedResponse:
        self.reader = _BoundedSocketReader(sock, self._deadline, HEADER_BYTES_LIMIT)
        return _BoundedResponse(sock, *args, reader=self.reader, **kwargs)
