"""Pinned delivery client against real HTTP(S) servers on 127.0.0.1.

Every server listens on 127.0.0.1 with an OS-assigned port. Targets that name another host are pinned to
127.0.0.1, and socket.getaddrinfo is replaced by a tripwire, so a client that tried to resolve a name would fail
the test instead of reaching DNS.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from interlude.adapters.delivery.pinned_http import HEADER_BYTES_LIMIT, DeliveryFailed, DeliveryResponse, post_pinned
from interlude.rules.egress import CheckedTarget, EgressRefused, check_url

LOOPBACK = "127.0.0.1"
CALLBACK_HOST = "callback.interlude.test"
LIMITS = {"connect_timeout": 2.0, "total_timeout": 5.0, "max_response_bytes": 4096}


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class LoopbackServer:
    """A threaded HTTP(S) server on 127.0.0.1 that records requests and answers with ``respond``."""

    respond: Callable[[BaseHTTPRequestHandler, threading.Event], None]
    tls: ssl.SSLContext | None = None
    hits: list[Hit] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LoopbackServer:
        server_ref = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                server_ref.hits.append(Hit("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                # The client hangs up on purpose when it reaches its byte cap or deadline.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    server_ref.respond(self, server_ref.stop)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.httpd = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        if self.tls is not None:
            self.tls.sni_callback = lambda sslobj, name, context: self.server_names.append(name)
            self.httpd.socket = self.tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def serve() -> Iterator[Callable[..., LoopbackServer]]:
    servers: list[LoopbackServer] = []

    def start(respond: Callable[[BaseHTTPRequestHandler, threading.Event], None], **kwargs: object) -> LoopbackServer:
        server = LoopbackServer(respond, **kwargs).start()  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """Replace getaddrinfo with a tripwire: the client must dial the pinned address without resolving."""
    attempts: list[tuple[object, ...]] = []

    def tripwire(*args: object, **kwargs: object) -> list[object]:
        attempts.append(args)
        raise AssertionError(f"delivery resolved {args[0]!r}; it must dial only target.addresses")

    monkeypatch.setattr(socket, "getaddrinfo", tripwire)
    return attempts


def reply(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> Callable[..., None]:
    def respond(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(status)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


def pinned(server: LoopbackServer, *, host: str = LOOPBACK, scheme: str = "http", path: str = "/hook") -> CheckedTarget:
    return CheckedTarget(scheme=scheme, host=host, port=server.port, path_and_query=path, addresses=(LOOPBACK,))


# --- TLS material: a throwaway CA and a leaf for CALLBACK_HOST, generated per test session. ---


@dataclass(frozen=True)
class TlsMaterial:
    ca_file: str
    cert_file: str
    key_file: str

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    pytest.importorskip("cryptography.x509")
    from tests.support.certificates import Issuer

    directory: Path = tmp_path_factory.mktemp("tls")
    ca = Issuer("Interlude test CA", key="ec")
    leaf = Issuer(CALLBACK_HOST, ca, hosts=[CALLBACK_HOST], addresses=[LOOPBACK], key="ec")
    ca_file = directory / "ca.pem"
    cert_file = directory / "leaf.pem"
    key_file = directory / "leaf.key"
    ca_file.write_bytes(ca.pem())
    cert_file.write_bytes(leaf.pem())
    key_file.write_bytes(leaf.key_pem())
    return TlsMaterial(str(ca_file), str(cert_file), str(key_file))


# --- Delivery ---


def test_delivers_the_post_and_returns_the_answer(serve: Callable[..., LoopbackServer], no_dns: list) -> None:
    server = serve(reply(200, b'{"ok":true}', {"Content-Type": "application/json"}))

    response = post_pinned(
        pinned(server, path="/hook?run=r-1"),
        b'{"event":"interrupt.resolved"}',
        {"Content-Type": "application/json", "webhook-id": "msg_0123456789abcdef"},
        **LIMITS,
    )

    assert response.status == 200
    assert response.body_excerpt == b'{"ok":true}'
    assert response.elapsed_ms >= 0
    [hit] = server.hits
    assert (hit.method, hit.path, hit.body) == ("POST", "/hook?run=r-1", b'{"event":"interrupt.resolved"}')
    assert hit.headers["host"] == f"{LOOPBACK}:{server.port}"
    assert hit.headers["webhook-id"] == "msg_0123456789abcdef"
    assert hit.headers["content-length"] == str(len(hit.body))
    assert no_dns == []


def test_tls_verifies_the_original_host_name_and_sends_it_as_sni_and_host(
    serve: Callable[..., LoopbackServer], tls_material: TlsMaterial, no_dns: list
) -> None:
    server = serve(reply(204), tls=tls_material.server_context())

    response = post_pinned(
        pinned(server, host=CALLBACK_HOST, scheme="https"), b"{}", {}, ca_file=tls_material.ca_file, **LIMITS
    )

    assert response == DeliveryResponse(status=204, body_excerpt=b"", elapsed_ms=response.elapsed_ms)
    assert server.server_names == [CALLBACK_HOST]
    assert [hit.headers["host"] for hit in server.hits] == [f"{CALLBACK_HOST}:{server.port}"]
    assert no_dns == []


def test_tls_refuses_a_certificate_for_another_name(
    serve: Callable[..., LoopbackServer], tls_material: TlsMaterial, no_dns: list
) -> None:
    server = serve(reply(200), tls=tls_material.server_context())

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(
            pinned(server, host="other.interlude.test", scheme="https"),
            b"{}",
            {},
            ca_file=tls_material.ca_file,
            **LIMITS,
        )

    assert failed.value.error_class == "tls"
    assert server.hits == []


def test_tls_refuses_an_untrusted_certificate(
    serve: Callable[..., LoopbackServer], tls_material: TlsMaterial, no_dns: list
) -> None:
    server = serve(reply(200), tls=tls_material.server_context())

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(pinned(server, host=CALLBACK_HOST, scheme="https"), b"{}", {}, **LIMITS)

    assert failed.value.error_class == "tls"
    assert server.hits == []


def test_a_redirect_is_a_failure_and_is_not_followed(serve: Callable[..., LoopbackServer], no_dns: list) -> None:
    elsewhere = serve(reply(200, b"redirect target"))
    redirecting = serve(reply(302, b"moved", {"Location": f"http://{LOOPBACK}:{elsewhere.port}/landing"}))

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(pinned(redirecting), b"{}", {}, **LIMITS)

    assert (failed.value.error_class, failed.value.status) == ("redirect", 302)
    assert len(redirecting.hits) == 1
    assert elsewhere.hits == []


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_every_3xx_is_a_redirect_failure(status: int, serve: Callable[..., LoopbackServer]) -> None:
    server = serve(reply(status, headers={"Location": "/elsewhere"}))

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(pinned(server), b"{}", {}, **LIMITS)

    assert (failed.value.error_class, failed.value.status) == ("redirect", status)
    assert [hit.path for hit in server.hits] == ["/hook"]


def test_an_error_status_is_a_failure_carrying_status_body_and_retry_after(
    serve: Callable[..., LoopbackServer],
) -> None:
    server = serve(reply(503, b"busy", {"Retry-After": "7"}))

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(pinned(server), b"{}", {}, **LIMITS)

    assert (failed.value.error_class, failed.value.status) == ("http_status", 503)
    assert (failed.value.body_excerpt, failed.value.retry_after) == (b"busy", "7")


def test_a_server_that_never_answers_hits_the_total_timeout(serve: Callable[..., LoopbackServer]) -> None:
    def never_answer(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        stop.wait(30)

    server = serve(never_answer)

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(pinned(server), b"{}", {}, connect_timeout=2.0, total_timeout=0.3, max_response_bytes=4096)

    assert failed.value.error_class == "timeout"
    # The request was sent once: its server thread, which a loaded machine may not have run within the 0.3 s, records
    # it from the bytes the client left behind.
    received = time.monotonic() + 10
    while not server.hits and time.monotonic() < received:
        time.sleep(0.01)
    assert len(server.hits) == 1


def test_headers_sent_a_byte_at_a_time_still_hit_the_total_timeout(serve: Callable[..., LoopbackServer]) -> None:
    # Each byte arrives well within any per-read timeout; only a deadline over the whole attempt stops this.
    def drip_headers(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        handler.wfile.flush()
        for _ in range(250):  # about 5 s, so a client without a deadline fails instead of hanging
            if stop.wait(0.02):
                return
            handler.wfile.write(b"a")
            handler.wfile.flush()

    server = serve(drip_headers)

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(pinned(server), b"{}", {}, connect_timeout=2.0, total_timeout=0.3, max_response_bytes=4096)

    assert failed.value.error_class == "timeout"


def test_a_body_sent_a_byte_at_a_time_is_cut_at_the_deadline(serve: Callable[..., LoopbackServer]) -> None:
    full_body = b"x" * 200

    def drip_body(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(full_body)))
        handler.end_headers()
        handler.wfile.flush()
        for byte in full_body:
            if stop.wait(0.05):
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()

    server = serve(drip_body)

    # 10 s of body against a 1.5 s deadline: a wide margin for the headers on a loaded machine.
    response = post_pinned(pinned(server), b"{}", {}, connect_timeout=2.0, total_timeout=1.5, max_response_bytes=4096)

    # The status arrived, so the delivery is answered; the excerpt is whatever came before the deadline.
    assert response.status == 200
    assert full_body.startswith(response.body_excerpt)
    assert len(response.body_excerpt) < len(full_body)


def test_an_oversize_body_is_cut_at_max_response_bytes(serve: Callable[..., LoopbackServer]) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    server = serve(reply(200, payload))

    response = post_pinned(pinned(server), b"{}", {}, connect_timeout=2.0, total_timeout=5.0, max_response_bytes=1000)

    assert response.body_excerpt == payload[:1000]


def test_an_endless_chunked_body_is_read_only_up_to_the_cap(serve: Callable[..., LoopbackServer]) -> None:
    def endless(handler: BaseHTTPRequestHandler, stop: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        chunk = b"y" * 4096
        while not stop.is_set():
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    server = serve(endless)

    response = post_pinned(pinned(server), b"{}", {}, connect_timeout=2.0, total_timeout=5.0, max_response_bytes=10_000)

    assert response.body_excerpt == b"y" * 10_000


def test_oversize_response_headers_are_refused(serve: Callable[..., LoopbackServer]) -> None:
    headers = {f"X-Filler-{index}": "f" * 2000 for index in range(HEADER_BYTES_LIMIT // 2000 + 2)}
    server = serve(reply(200, b"ok", headers))

    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(pinned(server), b"{}", {}, **LIMITS)

    assert failed.value.error_class == "too_large"


def test_a_closed_port_is_a_connect_failure() -> None:
    # The port stays bound, never listening, while it is dialled: no other process can take it meanwhile.
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        target = CheckedTarget("http", LOOPBACK, probe.getsockname()[1], "/", (LOOPBACK,))

        with pytest.raises(DeliveryFailed) as failed:
            post_pinned(target, b"{}", {}, **LIMITS)

    assert failed.value.error_class == "connect"


def test_a_target_without_addresses_is_never_dialled() -> None:
    with pytest.raises(DeliveryFailed) as failed:
        post_pinned(CheckedTarget("https", CALLBACK_HOST, 443, "/", ()), b"{}", {}, **LIMITS)

    assert failed.value.error_class == "connect"


def test_a_caller_cannot_override_the_host_header(serve: Callable[..., LoopbackServer]) -> None:
    server = serve(reply(200))

    with pytest.raises(ValueError, match="Host"):
        post_pinned(pinned(server), b"{}", {"host": "internal.example"}, **LIMITS)

    assert server.hits == []


def test_proxy_environment_variables_are_ignored(
    serve: Callable[..., LoopbackServer], monkeypatch: pytest.MonkeyPatch, no_dns: list
) -> None:
    proxy = serve(reply(200, b"proxy"))
    target_server = serve(reply(200, b"direct"))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, f"http://{LOOPBACK}:{proxy.port}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    response = post_pinned(pinned(target_server, host=CALLBACK_HOST), b"{}", {}, **LIMITS)

    assert response.body_excerpt == b"direct"
    assert proxy.hits == []


# --- DNS rebinding ---


def test_check_refuses_a_name_that_answers_public_then_loopback() -> None:
    def rebinding(host: str, port: int) -> list[str]:
        return ["93.184.215.14", LOOPBACK]

    with pytest.raises(EgressRefused) as refused:
        check_url(f"https://{CALLBACK_HOST}/hook", resolve=rebinding)

    assert refused.value.reason == "address_not_global"


def test_delivery_dials_the_checked_address_even_if_the_name_rebinds(
    serve: Callable[..., LoopbackServer], tls_material: TlsMaterial, no_dns: list
) -> None:
    # Given a name whose first answer is the (checked, loopback-allowed) server and whose later answers point
    # elsewhere, the delivery must reach the first answer: it never asks again.
    server = serve(reply(200, b"pinned"), tls=tls_material.server_context())
    answers = iter([[LOOPBACK], ["192.0.2.66"], ["192.0.2.66"]])
    lookups: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return next(answers)

    target = check_url(f"https://{CALLBACK_HOST}:{server.port}/hook", resolve=rebinding, allow_loopback=True)
    response = post_pinned(target, b"{}", {}, ca_file=tls_material.ca_file, **LIMITS)

    assert target.addresses == (LOOPBACK,)
    assert response.body_excerpt == b"pinned"
    assert lookups == [CALLBACK_HOST]
    assert server.server_names == [CALLBACK_HOST]
    assert [hit.headers["host"] for hit in server.hits] == [f"{CALLBACK_HOST}:{server.port}"]
    assert no_dns == []
