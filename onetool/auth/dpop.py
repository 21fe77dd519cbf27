"""DPoP (RFC 9449): the key a server's tokens are bound to, and the proofs that show OneTool holds it.

One key pair per server (``oauth.dpop: true``), generated once and kept in the server's token store record beside its
tokens, so replicas sharing the store prove with the same key (a token bound to one replica's key would be refused
from another). The private key never leaves the record: not in a log, a status or a message.

A proof is a JWT signed by that key for one HTTP request (``htm``, ``htu``), fresh each time (``iat``, ``jti``), with
``ath`` (the access token's hash) on a request to the MCP server and the ``nonce`` the server last gave, when it gave
one (:class:`Nonces`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from typing import Final

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

__all__ = ["DPOP_ALGORITHM", "DPoPKey", "Nonces", "new_key_pem"]

DPOP_ALGORITHM: Final = "ES256"
"""The JWS algorithm of the proofs: ECDSA on P-256, the one RFC 9449's own examples use and authorization servers
commonly list in ``dpop_signing_alg_values_supported``, with small keys and proofs."""


def new_key_pem() -> str:
    """A new private key for a server's record (PKCS#8 PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return pem.decode()


def _access_token_hash(token: str) -> str:
    """RFC 9449 4.2 ``ath``: base64url (no padding) of the SHA-256 of the access token."""
    return _b64(hashlib.sha256(token.encode()).digest())


def _origin_of(url: httpx2.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode()}"


class DPoPKey:
    """One server's key: signs its proofs; its public half goes in each proof's ``jwk`` header."""

    def __init__(self, pem: str) -> None:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("a DPoP key is an EC P-256 key")
        self.pem = pem
        self._key = key
        self.jwk: dict[str, str] = json.loads(ECAlgorithm.to_jwk(key.public_key()))
        self.thumbprint = _b64(
            hashlib.sha256(
                # RFC 7638: the required members only, sorted, without whitespace
                json.dumps({k: self.jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":")).encode()
            ).digest()
        )
        """RFC 7638 JWK thumbprint: the ``cnf.jkt`` of a token bound to this key."""

    def proof(self, method: str, url: httpx2.URL, *, access_token: str | None, nonce: str | None) -> str:
        claims: dict[str, object] = {
            "htm": method,
            "htu": str(url.copy_with(query=None, fragment=None)),  # RFC 9449 4.2: without query and fragment
            "iat": int(time.time()),
            "jti": uuid.uuid4().hex,
        }
        if access_token is not None:
            claims["ath"] = _access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        return jwt.encode(claims, self._key, algorithm=DPOP_ALGORITHM, headers={"typ": "dpop+jwt", "jwk": self.jwk})


class Nonces:
    """The last ``DPoP-Nonce`` each origin gave (RFC 9449 8 and 9): the authorization server's and the MCP server's
    may differ, and each may change one at any answer."""

    def __init__(self) -> None:
        self._by_origin: dict[str, str] = {}

    def get(self, url: httpx2.URL) -> str | None:
        return self._by_origin.get(_origin_of(url))

    def update(self, response: httpx2.Response) -> None:
        """Remember the nonce the answer gives, if any."""
        if nonce := response.headers.get("DPoP-Nonce"):
            self._by_origin[_origin_of(response.request.url)] = nonce


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
