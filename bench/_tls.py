"""HTTPS on loopback, as a deployed function reaches AWS's endpoints: a TLS-terminating forwarder in front of a plain
HTTP server (moto's), with a certificate chain made at run time.

The chain has AWS's shape: a root (which goes into the client's CA bundle, beside the bundle's own roots), an
intermediate and the server's certificate, each RSA 2048 signed with SHA-256; the server sends its certificate and the
intermediate, so the client verifies two signatures up to a root it loaded, as against an AWS endpoint. The keys are
written into the directory given (a temporary one) and never leave it.
"""

from __future__ import annotations

import contextlib
import datetime
import select
import socket
import socketserver
import ssl
import threading
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The name the client connects to: it resolves to 127.0.0.1 from /etc/hosts; the server's certificate names it.
HOST = "localhost"
LOOPBACK = "127.0.0.1"
_CHUNK = 64 * 1024


class _Issuer:
    """A certificate and its key, from which the next certificate of the chain is signed."""

    def __init__(self, name: str, issuer: _Issuer | None = None, *, server_name: str | None = None) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        signer = issuer or self
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer.certificate.subject if issuer else subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.key.public_key()), critical=False)
        )
        if server_name is None:  # a CA: the root, or the intermediate (which signs only the server's certificate)
            builder = builder.add_extension(
                x509.BasicConstraints(ca=True, path_length=0 if issuer else None), critical=True
            ).add_extension(
                x509.KeyUsage(
                    digital_signature=False, content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
        else:
            builder = (
                builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(server_name)]), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            )
        self.certificate: x509.Certificate = builder.sign(signer.key, hashes.SHA256())

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)


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
        self.root = _Issuer("Interlude bench root CA")
        intermediate = _Issuer("Interlude bench intermediate CA", self.root)
        server = _Issuer(HOST, intermediate, server_name=HOST)
        chain, key = directory / "server-chain.pem", directory / "server-key.pem"
        chain.write_bytes(server.pem() + intermediate.pem())
        key.write_bytes(
            server.key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
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
