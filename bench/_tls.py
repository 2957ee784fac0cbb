"""HTTPS on loopback, as a deployed function reaches AWS's endpoints: a TLS-terminating forwarder in front of a plain
HTTP server (moto's), with a certificate chain made at run time.

The chain has AWS's shape: a root (which goes into the client's CA bundle, beside the bundle's own roots), an
intermediate and the server's certificate, each RSA 2048 signed with SHA-256; the server sends its certificate and the
intermediate, so the client verifies two signatures up to a root it loaded, as against an AWS endpoint. The keys are
written into the directory given (a temporary one) and never leave it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import socketserver
import ssl
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository's root: tests.support
from tests.support.certificates import Issuer  # noqa: E402

# The name the client connects to: it resolves to 127.0.0.1 from /etc/hosts; the server's certificate names it.
HOST = "localhost"
LOOPBACK = "127.0.0.1"
_CHUNK = 64 * 1024


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    forwarder: TlsForwarder


class _Connection(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.forwarder.forward(self.request)


class TlsForwarder:
    """Accepts TLS connections for `HOST` on 127.0.0.1 and passes each one's bytes, decrypted, to `upstream` over a
    connection of its own. Its CPU is its process's, not the client's."""

    def __init__(self, upstream: tuple[str, int], directory: Path) -> None:
        self.upstream = upstream
        self.root = Issuer("Interlude bench root CA")
        intermediate = Issuer("Interlude bench intermediate CA", self.root)
        server = Issuer(HOST, intermediate, hosts=[HOST])
        chain, key = directory / "server-chain.pem", directory / "server-key.pem"
        chain.write_bytes(server.pem() + intermediate.pem())
        key.write_bytes(server.key_pem())
        key.chmod(0o600)
        self.directory = directory
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._context.load_cert_chain(chain, key)
        self._server = _Server((LOOPBACK, 0), _Connection)
        self._server.forwarder = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._lock = threading.Lock()
        self.handshakes = 0
        self.negotiated: set[str] = set()

    @property
    def endpoint(self) -> str:
        return f"https://{HOST}:{self._server.server_address[1]}"

    def ca_bundle(self, default: Path) -> Path:
        """A file holding the CA bundle `default` (the client's own) and this forwarder's root: what the client loads
        is its usual bundle's size, and trusts this server."""
        bundle = self.directory / "ca-bundle.pem"
        bundle.write_bytes(default.read_bytes().rstrip(b"\n") + b"\n" + self.root.pem())
        return bundle

    def forward(self, client: socket.socket) -> None:
        # The client may go at any point: the bench's children end with os._exit.
        with contextlib.suppress(OSError), self._context.wrap_socket(client, server_side=True) as tls:
            with self._lock:
                self.handshakes += 1
                self.negotiated.add(f"{tls.version()} {(tls.cipher() or ('?',))[0]}")
            with socket.create_connection(self.upstream) as plain:
                plain.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                _pump(tls, plain)

    def __enter__(self) -> TlsForwarder:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self._server.server_close()


def _pump(tls: ssl.SSLSocket, plain: socket.socket) -> None:
    """Both ways, in one thread (an SSL socket is not to be read and written from two at once), until either side
    closes."""
    while True:
        readable, _, _ = select.select([tls, plain], [], [])
        for source in readable:
            data = source.recv(_CHUNK)
            if source is tls:
                while data and tls.pending():  # decrypted bytes select does not see
                    data += tls.recv(tls.pending())
            if not data:
                return
            (plain if source is tls else tls).sendall(data)
