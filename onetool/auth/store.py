"""Where OAuth tokens and client registrations live: one record per server, behind :class:`TokenStore`.

The gateway and the CLI keep them in the state store (:class:`StateTokenStore`); :class:`FileTokenStore`
(a file per server, readable only by the user) serves a pool built without a state store.

The record never reaches a log, a status or a snippet; only :mod:`onetool.auth` reads it.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import BaseModel, ConfigDict, ValidationError

from onetool.config import to_identifier
from onetool.logs import logger
from onetool.state.paths import state_dir, write_private

if TYPE_CHECKING:
    from onetool.state import StateStore

__all__ = ["FileTokenStore", "ServerStorage", "StateTokenStore", "StoredAuth", "TokenStore", "state_dir"]


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
    """Per-server OAuth records. Implementations must keep them readable only by the user.

    Async like the SDK's ``TokenStorage`` it backs, so a database can hold the records.
    """

    async def load(self, server: str) -> StoredAuth | None: ...

    async def save(self, server: str, record: StoredAuth) -> None: ...

    async def forget(self, server: str) -> bool:
        """Drop the server's record; False when there was none."""
        ...


class StateTokenStore:
    """The records in the state store (table ``oauth_tokens``), next to the gateway's other runtime state."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    async def load(self, server: str) -> StoredAuth | None:
        text = await self.state.oauth_record(server)
        return None if text is None else _parse(server, text, f"in {self.state.location}")

    async def save(self, server: str, record: StoredAuth) -> None:
        await self.state.save_oauth_record(server, record.model_dump_json(exclude_none=True))

    async def forget(self, server: str) -> bool:
        return await self.state.forget_oauth_record(server)


def _parse(server: str, text: str, where: str) -> StoredAuth | None:
    try:
        return StoredAuth.model_validate_json(text)
    except ValidationError:
        # Never echo the content: it holds tokens.
        logger.bind(server=server).warning("server '{}': ignoring unreadable OAuth record {}", server, where)
        return None


class FileTokenStore:
    """One JSON file per server in ``<state dir>/oauth``: folder 0700, files 0600, replaced atomically."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or state_dir() / "oauth"

    def _path(self, server: str) -> Path:
        return self.folder / f"{to_identifier(server)}.json"

    async def load(self, server: str) -> StoredAuth | None:
        path = self._path(server)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return _parse(server, text, str(path))

    async def save(self, server: str, record: StoredAuth) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)  # also when it existed with wider permissions
        write_private(self._path(server), record.model_dump_json(exclude_none=True))

    async def forget(self, server: str) -> bool:
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
        self.has_tokens = False
        """Whether the record last read or written held tokens: for a status asked outside any await."""
        self._held: StoredAuth | None = None

    @asynccontextmanager
    async def one_read(self) -> AsyncIterator[None]:
        """Inside, every :meth:`record` is the record read once on entry (or written since): the SDK asks for the
        tokens and the client one by one when a connection starts. Each entry reads the store again, so a record
        written elsewhere (``onetool auth``) is seen by the next connection attempt."""
        self._held = await self.record()
        try:
            yield
        finally:
            self._held = None

    async def record(self) -> StoredAuth:
        if self._held is not None:
            return self._held
        found = await self.store.load(self.server)
        if found is not None and found.url != self.url:
            logger.bind(server=self.server).info(
                "server '{}': stored OAuth credentials are for another URL; not using them", self.server
            )
            found = None
        record = found or StoredAuth(url=self.url)
        self.has_tokens = record.tokens is not None
        return record

    async def _save(self, record: StoredAuth) -> None:
        await self.store.save(self.server, record)
        self.has_tokens = record.tokens is not None
        if self._held is not None:
            self._held = record

    async def get_tokens(self) -> OAuthToken | None:
        return (await self.record()).tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await self._save((await self.record()).model_copy(update={"tokens": tokens, "expires_at": expires_at}))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return (await self.record()).client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._save((await self.record()).model_copy(update={"client": client_info}))

    async def clear_tokens(self) -> None:
        """Forget the tokens, keep the client registration."""
        record = await self.record()
        if record.tokens is not None:
            await self._save(record.model_copy(update={"tokens": None, "expires_at": None}))

    async def clear_client(self) -> None:
        record = await self.record()
        if record.client is not None:
            await self._save(record.model_copy(update={"client": None}))
