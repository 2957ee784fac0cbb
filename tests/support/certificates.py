"""Throwaway X.509 certificates for TLS on loopback, made at run time (the keys never leave the directory a test or a
bench writes them to): a CA, or a server's certificate naming its host names and addresses, each signed by the
certificate before it in its chain."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


class Issuer:
    """A certificate and its key, from which the next certificate of the chain is signed: a CA unless it names a host
    or an address (a server's certificate for them). `key`: RSA 2048, as AWS's endpoints use, or EC P-256."""

    def __init__(
        self,
        name: str,
        issuer: Issuer | None = None,
        *,
        hosts: Sequence[str] = (),
        addresses: Sequence[str] = (),
        key: Literal["rsa", "ec"] = "rsa",
    ) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048) if key == "rsa" else ec.generate_private_key(ec.SECP256R1())
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
        if not hosts and not addresses:  # a CA: a root, or an intermediate (which signs only servers' certificates)
            builder = builder.add_extension(
                x509.BasicConstraints(ca=True, path_length=0 if issuer else None), critical=True
            ).add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, key_cert_sign=True, crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
        else:
            names: list[x509.GeneralName] = [x509.DNSName(host) for host in hosts]
            names += [x509.IPAddress(ipaddress.ip_address(address)) for address in addresses]
            builder = (
                builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName(names), critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            )
        self.certificate: x509.Certificate = builder.sign(signer.key, hashes.SHA256())

    def pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
