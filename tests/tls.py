"""A throwaway private CA and a server certificate it signed, for tests of TLS serving: written as PEM files the
way an operator would hand them to ``onetool bridge --tls-cert/--tls-key``, and trusted by clients through the CA
file only (never the system's store)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Pki", "client_context", "make_pki", "write_key"]


@dataclass(frozen=True)
class Pki:
    ca: Path
    """The CA's certificate: what a client that trusts this bridge is given."""
    cert: Path
    """The server's certificate, signed by the CA, for the addresses it was made for."""
    key: Path
    """The server certificate's private key (unencrypted)."""


def write_key(path: Path, key: ec.EllipticCurvePrivateKey | None = None, passphrase: bytes | None = None) -> Path:
    """A P-256 private key as PEM (a fresh one unless given), encrypted when a passphrase is given."""
    key = key or ec.generate_private_key(ec.SECP256R1())
    encryption = serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    return path


def make_pki(folder: Path, *, ips: Sequence[str] = ("127.0.0.1",), names: Sequence[str] = ("localhost",)) -> Pki:
    """A CA valid for a day and a server certificate for ``ips`` and DNS ``names``, in ``folder``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "onetool test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    alt_names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    alt_names += [x509.DNSName(name) for name in names]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (list(names) + list(ips))[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(folder / "ca.pem", folder / "server.pem", folder / "server-key.pem")
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_key(pki.key, key)
    return pki


def client_context(ca: Path) -> ssl.SSLContext:
    """What a client that trusts only this CA verifies the server with (hostname checked)."""
    return ssl.create_default_context(cafile=ca)
