"""Where OAuth tokens and client registrations live: one record per server, behind :class:`TokenStore`.

The record never reaches a log, a status or a snippet; only :mod:`onetool.auth` reads it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from typing import Protocol

from loguru import logger
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import BaseModel, ConfigDict, ValidationError

from onetool.config import to_identifier

__all__ = ["FileTokenStore", "ServerStorage", "StoredAuth", "TokenStore", "state_dir"]

ENV_STATE_DIR = "ONETOOL_STATE_DIR"


def state_dir() -> Path:
    """``$ONETOOL_STATE_DIR``, else ``$XDG_STATE_HOME/onetool``, else ``~/.local/state/onetool``."""
    if explicit := os.environ.get(ENV_STATE_DIR):
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "onetool"


class StoredAuth(BaseModel):
    """What OneTool keeps for one OAuth server."""

    model_config = ConfigDict(extra="ignore")

    url: str
    """The server these credentials were obtained for: a record for another URL is not used."""
    tokens: OAuthToken | None = None
    expires_at: float | None = None
    """When the access token expires (epoch seconds); the SDK only knows ``expires_in`` at issue time."""
    client: OAuthClientInformationFull | None = None
    """A dynamic registration (RFC 7591), reused until the redirect URI changes."""


class TokenStore(Protocol):
    """Per-server OAuth records. Implementations must keep them readable only by the user."""

    def load(self, server: str) -> StoredAuth | None: ...

    def save(self, server: str, record: StoredAuth) -> None: ...

    def forget(self, server: str) -> bool:
        """Drop the server's record; False when there was none."""
        ...


class FileTokenStore:
    """One JSON file per server in ``<state dir>/oauth``: folder 0700, files 0600, replaced atomically."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or state_dir() / "oauth"

    def _path(self, server: str) -> Path:
        return self.folder / f"{to_identifier(server)}.json"

    def load(self, server: str) -> StoredAuth | None:
        path = self._path(server)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return StoredAuth.model_validate_json(text)
        except ValidationError:
            # Never echo the content: it holds tokens.
            logger.bind(server=server).warning("server '{}': ignoring unreadable OAuth record {}", server, path)
            return None

    def save(self, server: str, record: StoredAuth) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)  # also when it existed with wider permissions
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".json")  # created 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(record.model_dump_json(exclude_none=True))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path(server))
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def forget(self, server: str) -> bool:
        try:
            self._path(server).unlink()
        except FileNotFoundError:
            return False
        return True


class ServerStorage:
    """The SDK's ``TokenStorage`` for one server, over a :class:`TokenStore` record."""

    def __init__(self, store: TokenStore, server: str, url: str) -> None:
        self.store = store
        self.server = server
        self.url = url

    def record(self) -> StoredAuth:
        found = self.store.load(self.server)
        if found is not None and found.url != self.url:
            logger.bind(server=self.server).info(
                "server '{}': stored OAuth credentials are for another URL; not using them", self.server
            )
            found = None
        return found or StoredAuth(url=self.url)

    async def get_tokens(self) -> OAuthToken | None:
        return self.record().tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self.store.save(self.server, self.record().model_copy(update={"tokens": tokens, "expires_at": expires_at}))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.record().client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.store.save(self.server, self.record().model_copy(update={"client": client_info}))

    def clear_tokens(self) -> None:
        """Forget the tokens, keep the client registration."""
        record = self.record()
        if record.tokens is not None:
            self.store.save(self.server, record.model_copy(update={"tokens": None, "expires_at": None}))

    def clear_client(self) -> None:
        record = self.record()
        if record.client is not None:
            self.store.save(self.server, record.model_copy(update={"client": None}))
