"""The TLS side of serving: a server context from a certificate file and its key, or an error that says which
file is wrong and how (the handshake itself runs in the connection protocol, :mod:`onetool.httpd._limits`)."""

from __future__ import annotations

import ssl
from pathlib import Path

from onetool.errors import ServeError


class _EncryptedKey(Exception):
    """Raised instead of answering OpenSSL's passphrase prompt, which would otherwise wait on the terminal."""


def _no_passphrase() -> str:
    raise _EncryptedKey


def server_tls(cert: Path, key: Path) -> ssl.SSLContext:
    """A TLS server context for ``cert`` (PEM: the server's certificate first, then any intermediates) and ``key``
    (its PEM private key, unencrypted). :class:`ServeError` names the file at fault."""
    for path in (cert, key):
        try:
            with path.open("rb") as f:
                f.read(1)
        except OSError as e:
            raise ServeError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        # Tells a file that holds no certificate from a key that is wrong: OpenSSL says "PEM lib" for both.
        ssl.create_default_context(cafile=cert)
    except ssl.SSLError:
        raise ServeError(f"{cert} holds no PEM certificate") from None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key, password=_no_passphrase)
    except _EncryptedKey:
        raise ServeError(
            f"{key} is encrypted: give the key without a passphrase (openssl pkey -in {key} -out plain-key.pem)"
        ) from None
    except ssl.SSLError as e:
        if e.reason == "KEY_VALUES_MISMATCH":
            raise ServeError(f"{key} is not the private key of the certificate in {cert}") from None
        detail = f" ({e.reason})" if e.reason else ""  # OpenSSL's "PEM lib" says no more than this message
        raise ServeError(f"{key} holds no PEM private key{detail}") from None
    return context
