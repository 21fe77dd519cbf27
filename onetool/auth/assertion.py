"""What OneTool presents at a token endpoint besides a client secret: a ``private_key_jwt`` client assertion
(RFC 7523 2.2) signed with the configured key, and the tokens of the jwt_bearer and token_exchange grants, read from
their files.

Each is read when a token request is built, not when the config is loaded: keys and workload identity tokens are
rotated on disk (a Kubernetes projected token lives an hour), and a missing one then fails that request with a
message naming the key, never its content.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Final

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from mcp.client.auth import OAuthFlowError

from onetool.config import OAuthConfig

__all__ = ["CLIENT_ASSERTION_TYPE", "ClientAssertion", "CredentialUnavailable", "read_token_file"]

CLIENT_ASSERTION_TYPE: Final = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME: Final = 300
"""Seconds a client assertion is valid: one token request's worth, as RFC 7523 3 advises."""


class CredentialUnavailable(OAuthFlowError):
    """A key or token file the config names could not be read or used. The message names its config key, never its
    content; :attr:`detail` its path or variable, for operators (a host path is not for the model)."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.detail = detail


class ClientAssertion:
    """Signs the ``private_key_jwt`` client assertions of one client: ``iss`` and ``sub`` its client_id, ``aud`` the
    authorization server's issuer (RFC 7523bis), a fresh ``jti`` each."""

    def __init__(self, oauth: OAuthConfig, server: str) -> None:
        assert oauth.client_id is not None  # the config requires it for private_key_jwt
        self.client_id = oauth.client_id
        self.algorithm = oauth.signing_algorithm
        self.key_file = oauth.private_key_file
        self.key_env = oauth.private_key_env
        self.where = f"servers.{server}.oauth"

    def fields(self, audience: str) -> dict[str, str]:
        """The token request's ``client_assertion`` and ``client_assertion_type``."""
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": audience,
            "iat": now,
            "exp": now + ASSERTION_LIFETIME,
            "jti": uuid.uuid4().hex,
        }
        try:
            signed = jwt.encode(claims, self._key(), algorithm=self.algorithm)
        except (jwt.PyJWTError, TypeError, ValueError) as e:
            raise CredentialUnavailable(
                f"{self.where}: the private key cannot sign {self.algorithm} ({type(e).__name__}); set"
                f" signing_algorithm to one that fits the key (RS256 for RSA, ES256 for P-256, EdDSA for Ed25519)"
            ) from None
        return {"client_assertion": signed, "client_assertion_type": CLIENT_ASSERTION_TYPE}

    def _key(self) -> bytes:
        """The PEM key, checked to be one (PyJWT's own error would not say which key was wrong)."""
        if self.key_file is not None:
            what, where = f"{self.where}.private_key_file", str(self.key_file)
            try:
                pem = self.key_file.read_bytes()
            except OSError as e:
                raise CredentialUnavailable(f"{what} cannot be read ({_why(e)})", where) from None
        else:
            what, where = f"{self.where}.private_key_env", f"${self.key_env}"
            value = os.environ.get(self.key_env or "")
            if not value:
                raise CredentialUnavailable(f"{what}: the environment variable is not set", where) from None
            pem = value.encode()
        try:
            load_pem_private_key(pem, password=None)
        except (ValueError, TypeError):
            # never the content: it is the key, or whatever was put there by mistake
            raise CredentialUnavailable(f"{what} is not an unencrypted PEM private key", where) from None
        return pem


def read_token_file(path: Path, key: str) -> str:
    """The token a grant presents, from its file (``key`` names the config key in messages)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise CredentialUnavailable(f"{key} cannot be read ({_why(e)})", str(path)) from None
    if not token:
        raise CredentialUnavailable(f"{key} is an empty file", str(path))
    return token


def _why(error: Exception) -> str:
    return error.strerror if isinstance(error, OSError) and error.strerror else type(error).__name__
