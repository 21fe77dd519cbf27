"""Where OAuth tokens and client registrations live: one record per server, behind :class:`TokenStore`.

The gateway and the CLI keep them in the state store (:class:`StateTokenStore`); :class:`FileTokenStore`
(a file per server, readable only by the user) serves a pool built without a state store.

A token refresh holds the server's record (:meth:`TokenStore.hold`) from reading it to storing the new tokens, so
processes sharing a store (replicas) refresh one at a time, and the others find the new tokens instead of spending
the refresh token again: authorization servers rotate them, and refuse one used twice.

The record never reaches a log, a status or a snippet; only :mod:`onetool.auth` reads it.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from onetool.config import OAuthConfig, to_identifier
from onetool.errors import StateError
from onetool.logs import logger
from onetool.state.locks import file_lock
from onetool.state.paths import state_dir, write_private

if TYPE_CHECKING:
    from onetool.state import HeldOAuthRecord, StateStore

__all__ = [
    "FileTokenStore",
    "HeldRecord",
    "KeyringTokenStore",
    "ServerStorage",
    "StateTokenStore",
    "StoredAuth",
    "TokenStore",
    "state_dir",
    "store_for",
]


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
    refused: str | None = None
    """Why the tokens were dropped: the authorization server refused the refresh token (its error, safe to show).
    Kept so every process sharing the record names the real cause; gone once tokens are stored again."""
    issued_at: float | None = None
    """When the stored tokens were obtained (a grant or a refresh; epoch seconds), for ``onetool auth status``."""
    refreshed_at: float | None = None
    """When the access token was last refreshed (epoch seconds)."""
    wanted_scope: str | None = None
    """The scopes a server asked for (403 ``insufficient_scope``) that only the browser step can grant: the next
    authorization asks for them. Gone once tokens granting them are stored."""
    dpop_key: str | None = Field(default=None, repr=False)
    """The private key (PEM) the server's tokens are bound to (``oauth.dpop``, RFC 9449): kept for as long as the
    record, so every process sharing it proves with the same key (see :meth:`ServerStorage.dpop_key`)."""


class HeldRecord(Protocol):
    """One server's record while :meth:`TokenStore.hold` keeps every other holder out."""

    async def load(self) -> StoredAuth | None:
        """The record as stored now (read again on each call)."""
        ...

    async def save(self, record: StoredAuth) -> None: ...


class TokenStore(Protocol):
    """Per-server OAuth records. Implementations must keep them readable only by the user.

    Async like the SDK's ``TokenStorage`` it backs, so a database can hold the records.
    """

    async def load(self, server: str) -> StoredAuth | None: ...

    async def save(self, server: str, record: StoredAuth) -> None:
        """Replace the record; waits while another process holds it (:meth:`hold`)."""
        ...

    async def forget(self, server: str) -> bool:
        """Drop the server's record; False when there was none. Waits while another process holds it."""
        ...

    def hold(self, server: str, wait: float) -> AbstractAsyncContextManager[HeldRecord]:
        """Keep every other holder of the server's record out, in this process and in any other sharing the store,
        until the context exits: a token refresh reads, refreshes and saves inside. Waits at most ``wait`` seconds
        for another holder, then raises StateError. A holder that dies releases the record."""
        ...


class StateTokenStore:
    """The records in the state store (table ``oauth_tokens``), next to the gateway's other runtime state."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    async def load(self, server: str) -> StoredAuth | None:
        text = await self.state.oauth_record(server)
        return None if text is None else _parse(server, text, f"in {self.state.location}")

    async def save(self, server: str, record: StoredAuth) -> None:
        await self.state.save_oauth_record(server, _dump(record))

    async def forget(self, server: str) -> bool:
        return await self.state.forget_oauth_record(server)

    @asynccontextmanager
    async def hold(self, server: str, wait: float) -> AsyncIterator[HeldRecord]:
        async with self.state.held_oauth_record(server, wait) as held:
            yield _HeldRow(server, held, f"in {self.state.location}")


class _HeldRow:
    def __init__(self, server: str, held: HeldOAuthRecord, where: str) -> None:
        self._server = server
        self._held = held
        self._where = where

    async def load(self) -> StoredAuth | None:
        text = await self._held.read()
        return None if text is None else _parse(self._server, text, self._where)

    async def save(self, record: StoredAuth) -> None:
        await self._held.write(_dump(record))


def _dump(record: StoredAuth) -> str:
    return record.model_dump_json(exclude_none=True)


def _parse(server: str, text: str, where: str) -> StoredAuth | None:
    try:
        return StoredAuth.model_validate_json(text)
    except ValidationError:
        # Never echo the content: it holds tokens.
        logger.bind(server=server).warning("server '{}': ignoring unreadable OAuth record {}", server, where)
        return None


class FileTokenStore:
    """One JSON file per server in ``<state dir>/oauth``: folder 0700, files 0600, replaced atomically.

    Beside each, an empty ``<server>.lock`` that :meth:`hold`, :meth:`save` and :meth:`forget` lock (``flock``), so
    processes sharing the folder refresh one at a time, as replicas sharing a state store do.
    """

    def __init__(self, folder: Path | None = None, *, wait: float = 5.0) -> None:
        self.folder = folder or state_dir() / "oauth"
        self.wait = wait
        """How long :meth:`save` and :meth:`forget` wait for a holder elsewhere (a refresh holds the record for a
        token request), as the state store's writes wait its timeout."""

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
        async with self._locked(server, self.wait):
            self._write(server, record)

    def _write(self, server: str, record: StoredAuth) -> None:
        write_private(self._path(server), _dump(record))

    async def forget(self, server: str) -> bool:
        async with self._locked(server, self.wait):  # not under a refresh, which would store the record again
            try:
                self._path(server).unlink()
            except FileNotFoundError:
                return False
            return True

    @asynccontextmanager
    async def hold(self, server: str, wait: float) -> AsyncIterator[HeldRecord]:
        async with self._locked(server, wait):
            yield _HeldFile(self, server)

    def _locked(self, server: str, wait: float) -> AbstractAsyncContextManager[None]:
        return _file_lock(self.folder, server, wait)


def _file_lock(folder: Path, server: str, wait: float) -> AbstractAsyncContextManager[None]:
    """The server's lock file in ``folder``, held exclusively while inside."""
    return file_lock(folder / f"{to_identifier(server)}.lock", wait, f"the OAuth record of '{server}'")


class _HeldFile:
    def __init__(self, store: FileTokenStore, server: str) -> None:
        self._store = store
        self._server = server

    async def load(self) -> StoredAuth | None:
        return await self._store.load(self._server)

    async def save(self, record: StoredAuth) -> None:
        self._store._write(self._server, record)


class KeyringTokenStore:
    """The records in the OS keyring (``oauth.store: keyring``): macOS Keychain, Windows Credential Locker, the
    Secret Service of a Linux desktop, whichever backend the ``keyring`` package finds. One entry per server and URL
    (service ``onetool-oauth``), so projects naming the same server share its login, as a user expects of a desktop.

    The keyring has no locks: :meth:`hold`, :meth:`save` and :meth:`forget` take the same lock file per server as
    :class:`FileTokenStore`, in ``<state dir>/oauth-keyring``.
    """

    SERVICE: Final = "onetool-oauth"

    def __init__(self, urls: Mapping[str, str], locks: Path | None = None, *, wait: float = 5.0) -> None:
        self.urls = urls
        """The URL of each server, part of its entry's name: an entry for another URL is another login."""
        self.locks = locks or state_dir() / "oauth-keyring"
        self.wait = wait

    def _entry(self, server: str) -> str:
        return f"{server} {self.urls.get(server, '')}"

    async def _call(self, method: str, *args: str) -> Any:
        # lazy: keyring loads its backends' entry points; and its backends block (D-Bus, Keychain), so off the loop
        import keyring
        from keyring.errors import KeyringError, PasswordDeleteError

        def call() -> Any:
            try:
                return getattr(keyring, method)(self.SERVICE, *args)
            except PasswordDeleteError:
                return False
            except KeyringError as e:
                raise StateError(f"the OS keyring ({type(keyring.get_keyring()).__name__}) failed: {e}") from None

        return await anyio.to_thread.run_sync(call)

    async def load(self, server: str) -> StoredAuth | None:
        text = await self._call("get_password", self._entry(server))
        return None if text is None else _parse(server, text, "in the OS keyring")

    async def save(self, server: str, record: StoredAuth) -> None:
        async with _file_lock(self.locks, server, self.wait):
            await self._write(server, record)

    async def _write(self, server: str, record: StoredAuth) -> None:
        await self._call("set_password", self._entry(server), _dump(record))

    async def forget(self, server: str) -> bool:
        async with _file_lock(self.locks, server, self.wait):
            if await self.load(server) is None:
                return False
            return await self._call("delete_password", self._entry(server)) is not False

    @asynccontextmanager
    async def hold(self, server: str, wait: float) -> AsyncIterator[HeldRecord]:
        async with _file_lock(self.locks, server, wait):
            yield _HeldEntry(self, server)


class _HeldEntry:
    def __init__(self, store: KeyringTokenStore, server: str) -> None:
        self._store = store
        self._server = server

    async def load(self) -> StoredAuth | None:
        return await self._store.load(self._server)

    async def save(self, record: StoredAuth) -> None:
        await self._store._write(self._server, record)


def store_for(server: str, oauth: OAuthConfig, url: str, default: TokenStore) -> TokenStore:
    """Where the server's record lives: the OS keyring when its ``oauth.store`` says so, else ``default``."""
    return KeyringTokenStore({server: url}) if oauth.store == "keyring" else default


class ServerStorage:
    """The SDK's ``TokenStorage`` for one server, over a :class:`TokenStore` record."""

    def __init__(self, store: TokenStore, server: str, url: str) -> None:
        self.store = store
        self.server = server
        self.url = url
        self.has_tokens = False
        """Whether the record last read or written held tokens: for a status asked outside any await."""
        self._held: StoredAuth | None = None
        self._hold: HeldRecord | None = None

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

    @asynccontextmanager
    async def held(self, wait: float) -> AsyncIterator[StoredAuth]:
        """Hold the record against every other holder, in any process (:meth:`TokenStore.hold`); yields it as read
        under the hold. Inside, :meth:`record` is that record (or what was written since), :meth:`reread` reads it
        again, and every write goes through the hold."""
        async with self.store.hold(self.server, wait) as hold:
            self._hold = hold
            try:
                self._held = self._usable(await hold.load())
                yield self._held
            finally:
                self._hold = self._held = None

    async def record(self) -> StoredAuth:
        if self._held is not None:
            return self._held
        return await self.reread()

    async def reread(self) -> StoredAuth:
        """The record as stored now, whatever :meth:`one_read` or :meth:`held` read before."""
        found = await (self._hold.load() if self._hold is not None else self.store.load(self.server))
        record = self._usable(found)
        if self._held is not None:
            self._held = record
        return record

    def _usable(self, found: StoredAuth | None) -> StoredAuth:
        if found is not None and found.url != self.url:
            logger.bind(server=self.server).info(
                "server '{}': stored OAuth credentials are for another URL; not using them", self.server
            )
            found = None
        record = found or StoredAuth(url=self.url)
        self.has_tokens = record.tokens is not None
        return record

    async def _save(self, record: StoredAuth) -> None:
        if self._hold is not None:
            await self._hold.save(record)
        else:
            await self.store.save(self.server, record)
        self.has_tokens = record.tokens is not None
        if self._held is not None:
            self._held = record

    async def get_tokens(self) -> OAuthToken | None:
        return (await self.record()).tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        record = await self.record()
        now = time.time()
        expires_at = now + tokens.expires_in if tokens.expires_in is not None else None
        update: dict[str, object] = {"tokens": tokens, "expires_at": expires_at, "refused": None, "issued_at": now}
        if self._hold is not None:  # only a refresh holds the record (:meth:`held`)
            update["refreshed_at"] = now
        if record.wanted_scope and set(record.wanted_scope.split()) <= set((tokens.scope or "").split()):
            update["wanted_scope"] = None
        await self._save(record.model_copy(update=update))

    async def want_scope(self, scope: str) -> None:
        """Keep the scopes a step-up needs for the next authorization (see :attr:`StoredAuth.wanted_scope`)."""
        record = await self.record()
        if record.wanted_scope != scope:
            await self._save(record.model_copy(update={"wanted_scope": scope}))

    async def dpop_key(self, wait: float) -> str:
        """The record's DPoP key; the first process to ask creates it, holding the record (:meth:`held`), so
        replicas starting together agree on one key."""
        record = await self.record()
        if record.dpop_key is not None:
            return record.dpop_key
        from onetool.auth.dpop import new_key_pem  # lazy: cryptography only for DPoP servers

        async with self.held(wait) as stored:
            if stored.dpop_key is None:
                stored = stored.model_copy(update={"dpop_key": new_key_pem()})
                await self._save(stored)
            assert stored.dpop_key is not None
            return stored.dpop_key

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return (await self.record()).client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._save((await self.record()).model_copy(update={"client": client_info}))

    async def clear_tokens(self, refused: str | None = None) -> None:
        """Forget the tokens, keep the client registration; ``refused`` says why (see :attr:`StoredAuth.refused`)."""
        record = await self.record()
        if record.tokens is not None:
            await self._save(record.model_copy(update={"tokens": None, "expires_at": None, "refused": refused}))

    async def clear_client(self) -> None:
        record = await self.record()
        if record.client is not None:
            await self._save(record.model_copy(update={"client": None}))
