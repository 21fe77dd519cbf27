"""The state store: servers added at run time, per-server overrides, approved and rejected tool fingerprints,
converted servers, OAuth credentials, an audit log.

    store = await StateStore.open(config.store_url)     # or: async with await StateStore.open(...) as store:
    await store.set_quarantined("wix", True, actor="api")
    ...
    await store.aclose()

Every method is one transaction (a read-only one when it only reads: on SQLite it does not wait for a writer),
writes its audit entry in that same transaction, and returns frozen records.
Any failure of the database itself (corrupt, locked, unreachable) is a StateError naming the store.
The store does not know the config: callers check names and validate specs (``onetool.config.ServerConfig``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
from sqlalchemy import Table, delete, func, insert, select, text, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from onetool.errors import LostRace, ServerExists, StateError
from onetool.state._engine import Target, create_engine, read_only, waiting
from onetool.state._migrate import upgrade
from onetool.state._models import (
    approved_tools,
    audit_log,
    changes,
    conversions,
    oauth_tokens,
    overrides,
    rejected_tools,
    servers,
)
from onetool.state.fingerprint import canonical_json, fingerprint_of
from onetool.state.locks import file_lock
from onetool.state.records import (
    ACTORS,
    Actor,
    AddedServer,
    ApprovedTool,
    AuditEntry,
    ConvertedServer,
    Override,
    RejectedTool,
)

if TYPE_CHECKING:
    from mcp.types import Tool
    from sqlalchemy.dialects import postgresql, sqlite


DEFAULT_TIMEOUT = 5.0

CHANNEL = "onetool_changes"
"""The PostgreSQL notification channel: every write that bumps the change counter notifies it on commit."""

_DB_ERRORS = (SQLAlchemyError, OSError, TimeoutError)
"""What a database failure raises (the driver, the socket, a wait that ran out): each becomes a StateError."""


@dataclass(frozen=True)
class Snapshot:
    """What a replica serves from, read in one transaction: the change counter first, so a change committed
    while it was read shows as a newer counter next time."""

    counter: int
    added: dict[str, AddedServer]
    overrides: dict[str, Override]
    approvals: dict[str, dict[str, ApprovedTool]]
    rejections: dict[str, dict[str, RejectedTool]]


class StateStore:
    """One open state store. Build it with ``await StateStore.open(url)``; close it with ``aclose()``."""

    def __init__(self, engine: AsyncEngine, target: Target, timeout: float = DEFAULT_TIMEOUT) -> None:
        self._engine = engine
        self._reader = read_only(engine)
        self._target = target
        self._timeout = timeout

    @classmethod
    async def open(cls, url: str | None = None, *, timeout: float = DEFAULT_TIMEOUT) -> StateStore:
        """Open (creating it if needed) and migrate the store at ``url``, default SQLite in the state folder.

        ``timeout`` (seconds) bounds every wait for a lock held elsewhere, and for a connection to a server.
        """
        target = Target.parse(url)
        store = cls(create_engine(target, timeout), target, timeout)
        try:
            async with store._transaction("open it") as conn:
                await conn.run_sync(upgrade, target.location)
        except BaseException:
            await store.aclose()
            raise
        return store

    @property
    def location(self) -> str:
        """The file, or the URL with its password masked: safe to print and log."""
        return self._target.location

    async def aclose(self) -> None:
        await self._engine.dispose()

    async def __aenter__(self) -> StateStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- servers added at run time -------------------------------------------------------------------

    async def added_servers(self) -> dict[str, AddedServer]:
        async with self._transaction("read the added servers", write=False) as conn:
            rows = await conn.execute(select(servers).order_by(servers.c.added_at, servers.c.name))
            return {row.name: AddedServer(**row._mapping) for row in rows}

    async def add_server(
        self, name: str, spec: Mapping[str, Any], actor: Actor, *, proposed: bool = False
    ) -> AddedServer:
        """Store a server spec as given (JSON data; validate it with ServerConfig first). ServerExists if added.

        ``proposed``: a model's proposal, which nothing runs until :meth:`accept_proposal`.
        """
        _check_actor(actor)
        data = _json_data(name, spec)
        async with self._transaction(f"add server '{name}'") as conn:
            existing = (await conn.execute(select(servers).where(servers.c.name == name))).first()
            if existing is not None:
                raise ServerExists(
                    f"server '{name}' was already added (by {existing.added_by} at {existing.added_at:%Y-%m-%d %H:%M} "
                    "UTC); remove it first to replace it"
                )
            added = AddedServer(name=name, spec=data, added_by=actor, added_at=_now(), proposed=proposed)
            # a concurrent add of the same name (another replica) loses here, without a duplicate-key error
            inserted = await conn.execute(
                _insert(conn, servers).values(**vars(added)).on_conflict_do_nothing(index_elements=[servers.c.name])
            )
            if inserted.rowcount == 0:
                raise ServerExists(f"server '{name}' was added meanwhile (by another replica); list servers again")
            await _bump(conn)
            # the spec may hold secrets (env, headers): the log names its keys only
            await _audit(conn, actor, "propose_server" if proposed else "add_server", name, {"keys": sorted(data)})
            return added

    async def accept_proposal(self, name: str, actor: Actor, details: Mapping[str, Any]) -> bool:
        """An operator lets a proposed server run; ``details`` (what it runs, no secret) go to the audit log.

        False if ``name`` is not a proposal (any more).
        """
        _check_actor(actor)
        async with self._transaction(f"accept the proposal '{name}'") as conn:
            accepted = await conn.execute(
                update(servers).where(servers.c.name == name, servers.c.proposed.is_(True)).values(proposed=False)
            )
            if accepted.rowcount == 0:
                return False
            await _bump(conn)
            await _audit(conn, actor, "accept_proposal", name, dict(details))
            return True

    async def edit_server(
        self,
        name: str,
        spec: Mapping[str, Any],
        actor: Actor,
        *,
        changed: Sequence[str],
        expected: int | None = None,
    ) -> Override:
        """Replace an added server's spec (validated by the caller, who names the ``changed`` keys for the audit log:
        never their values, which may be secrets). Its override version is bumped, so an edit and any other change
        of the server made at once by two replicas cannot both apply (``expected`` as for :meth:`set_enabled`); a
        server no longer added is a LostRace too."""
        _check_actor(actor)
        data = _json_data(name, spec)
        async with self._transaction(f"edit server '{name}'") as conn:
            if (await conn.execute(select(servers.c.name).where(servers.c.name == name))).first() is None:
                raise LostRace(f"server '{name}' was removed meanwhile; nothing was changed")
            override = await _set_override(conn, name, actor, _now(), expected)
            await conn.execute(update(servers).where(servers.c.name == name).values(spec=data))
            await _bump(conn)
            await _audit(conn, actor, "edit_server", name, {"keys": sorted(changed)})
            return override

    async def remove_server(self, name: str, actor: Actor) -> bool:
        """Remove an added server with its overrides, approvals and OAuth record; False if it was not added."""
        _check_actor(actor)
        # Its OAuth record goes too: after a refresh under way has stored its tokens, never before (see below).
        async with self._oauth_lock(name, self._timeout), self._transaction(f"remove server '{name}'") as conn:
            removed = (await conn.execute(delete(servers).where(servers.c.name == name))).rowcount > 0
            if removed:
                await _forget(conn, name)
                await _bump(conn)
                await _audit(conn, actor, "remove_server", name, {})
            return removed

    # --- overrides -----------------------------------------------------------------------------------

    async def overrides(self) -> dict[str, Override]:
        async with self._transaction("read the overrides", write=False) as conn:
            rows = await conn.execute(select(overrides).order_by(overrides.c.server))
            return {row.server: Override(**row._mapping) for row in rows}

    async def set_enabled(
        self, name: str, enabled: bool | None, actor: Actor, *, expected: int | None = None
    ) -> Override:
        """Enable or disable a server across restarts; ``None`` drops the override (the config decides again).

        The override keeps who decided (``enabled_by``): a model may not undo an operator's decision.
        ``expected``: the override version the caller knows (0: none); another one now is a LostRace, and
        nothing is written. Without it the write applies over whatever is there.
        """
        decided_by = actor if enabled is not None else None
        return await self._override(
            name, actor, "set_enabled", {"enabled": enabled}, expected, enabled=enabled, enabled_by=decided_by
        )

    async def set_quarantined(
        self, name: str, quarantined: bool | None, actor: Actor, *, expected: int | None = None
    ) -> Override:
        """Quarantine a server (this withdraws its approval), or release it; ``None`` drops the override.

        Approved tool fingerprints are kept, so a later approval can show what changed since.
        """
        values: dict[str, Any] = {"quarantined": quarantined}
        if quarantined:
            values.update(approved_by=None, approved_at=None)
        return await self._override(name, actor, "set_quarantined", {"quarantined": quarantined}, expected, **values)

    async def set_tools(
        self, name: str, tools: Mapping[str, Any] | None, actor: Actor, *, expected: int | None = None
    ) -> Override:
        """Set which of a server's tools are offered (``{"allow": [...] | None, "deny": [...]}``, the caller
        validated it), replacing its entry's own filter; ``None`` drops the override (the entry decides again)."""
        value = dict(tools) if tools is not None else None
        return await self._override(name, actor, "set_tools", {"tools": value}, expected, tools=value)

    async def approve_server(
        self, name: str, actor: Actor, tools: Iterable[Tool] | None = None, *, expected: int | None = None
    ) -> Override:
        """Release a server from quarantine, recording who approved it and when.

        With ``tools`` (the server's current tools), they become its approved set, replacing any earlier one;
        without, the approved fingerprints stay as they are.
        """
        _check_actor(actor)
        async with self._transaction(f"approve server '{name}'") as conn:
            now = _now()
            # the override first: a lost race writes nothing else
            override = await _set_override(
                conn, name, actor, now, expected, quarantined=False, approved_by=actor, approved_at=now
            )
            details: dict[str, Any] = {}
            if tools is not None:
                await conn.execute(delete(approved_tools).where(approved_tools.c.server == name))
                await conn.execute(delete(rejected_tools).where(rejected_tools.c.server == name))
                details["tools"] = await _approve(conn, name, tools, actor)
            await _bump(conn)
            await _audit(conn, actor, "approve_server", name, details)
            return override

    # --- approved tools (rug-pull detection) ---------------------------------------------------------

    async def approved_tools(self, server: str) -> dict[str, ApprovedTool]:
        async with self._transaction(f"read the approved tools of '{server}'", write=False) as conn:
            rows = await conn.execute(
                select(approved_tools).where(approved_tools.c.server == server).order_by(approved_tools.c.tool)
            )
            return {row.tool: ApprovedTool(**row._mapping) for row in rows}

    async def all_approved_tools(self) -> dict[str, dict[str, ApprovedTool]]:
        """Every server's approved tools, by server then tool, as :meth:`approved_tools` gives them one by one."""
        found: dict[str, dict[str, ApprovedTool]] = {}
        async with self._transaction("read the approved tools", write=False) as conn:
            rows = await conn.execute(select(approved_tools).order_by(approved_tools.c.server, approved_tools.c.tool))
            for row in rows:
                found.setdefault(row.server, {})[row.tool] = ApprovedTool(**row._mapping)
        return found

    async def approve_tools(
        self, server: str, tools: Iterable[Tool], actor: Actor, *, expected: int | None = None
    ) -> dict[str, ApprovedTool]:
        """Approve these tools as they are now (e.g. held after a change); other approved tools stay.

        The server's override version is bumped (``expected`` as for :meth:`set_enabled`).
        """
        _check_actor(actor)
        async with self._transaction(f"approve tools of '{server}'") as conn:
            await _set_override(conn, server, actor, _now(), expected)
            names = await _approve(conn, server, tools, actor)
            await _bump(conn)
            await _audit(conn, actor, "approve_tools", server, {"tools": names})
            rows = await conn.execute(
                select(approved_tools).where(approved_tools.c.server == server, approved_tools.c.tool.in_(names))
            )
            return {row.tool: ApprovedTool(**row._mapping) for row in rows}

    async def reject_tools(
        self, server: str, tools: Iterable[Tool], actor: Actor, *, expected: int | None = None
    ) -> dict[str, RejectedTool]:
        """Reject these tools as they are now (held after a change): their approved definitions stay, and while the
        server offers these very definitions they stay hidden without being offered for review again. One audit
        entry ``reject_tool`` per tool, with the rejected fingerprint.

        The server's override version is bumped (``expected`` as for :meth:`set_enabled`).
        """
        _check_actor(actor)
        fingerprints = {tool.name: fingerprint_of(canonical_json(tool)) for tool in tools}
        async with self._transaction(f"reject tools of '{server}'") as conn:
            now = _now()
            await _set_override(conn, server, actor, now, expected)
            names = sorted(fingerprints)
            await conn.execute(
                delete(rejected_tools).where(rejected_tools.c.server == server, rejected_tools.c.tool.in_(names))
            )
            rejected = {
                name: RejectedTool(server, name, fingerprints[name], rejected_by=actor, rejected_at=now)
                for name in names
            }
            await conn.execute(insert(rejected_tools), [dataclasses.asdict(r) for r in rejected.values()])
            await _bump(conn)
            for name in names:
                await _audit(conn, actor, "reject_tool", server, {"tool": name, "fingerprint": fingerprints[name]})
            return rejected

    async def forget_server(self, name: str, actor: Actor) -> None:
        """Drop a server's overrides, approved tools and OAuth record (e.g. a config-file server that was removed)."""
        _check_actor(actor)
        async with self._oauth_lock(name, self._timeout), self._transaction(f"forget server '{name}'") as conn:
            await _forget(conn, name)
            await _bump(conn)
            await _audit(conn, actor, "forget_server", name, {})

    # --- servers converted to HTTP through a bridge -------------------------------------------------

    async def conversions(self) -> dict[str, ConvertedServer]:
        async with self._transaction("read the converted servers", write=False) as conn:
            rows = await conn.execute(select(conversions).order_by(conversions.c.server))
            return {row.server: ConvertedServer(**row._mapping) for row in rows}

    async def conversion(self, name: str) -> ConvertedServer | None:
        async with self._transaction(f"read the conversion of '{name}'", write=False) as conn:
            row = (await conn.execute(select(conversions).where(conversions.c.server == name))).first()
            return ConvertedServer(**row._mapping) if row is not None else None

    async def record_conversion(
        self, name: str, *, command: str, args: Sequence[str], env: Mapping[str, str], url: str, actor: Actor
    ) -> ConvertedServer:
        """Store that ``name`` (a stdio server: ``command``, ``args``, ``env``) is served at ``url`` by a bridge.

        Converting a server again replaces its record (the bridge may serve it at a new URL).
        """
        _check_actor(actor)
        async with self._transaction(f"record the conversion of '{name}'") as conn:
            now = _now()
            record = ConvertedServer(
                server=name,
                command=command,
                args=list(args),
                env=dict(env),
                url=url,
                converted_by=actor,
                converted_at=now,
                updated_at=now,
            )
            # converting again replaces the record: one upsert, so two replicas converting at once never collide
            replace = {k: v for k, v in vars(record).items() if k != "server"}
            await conn.execute(
                _insert(conn, conversions)
                .values(**vars(record))
                .on_conflict_do_update(index_elements=[conversions.c.server], set_=replace)
            )
            await _bump(conn)
            # env values may be secrets: the log names the keys only
            await _audit(conn, actor, "convert_server", name, {"url": url, "env_keys": sorted(env)})
            return record

    async def set_conversion_url(self, name: str, url: str, actor: Actor) -> ConvertedServer | None:
        """The bridge now serves ``name`` at ``url`` (re-registered after a restart); None if it is not converted."""
        _check_actor(actor)
        async with self._transaction(f"update the conversion of '{name}'") as conn:
            changed = await conn.execute(
                update(conversions).where(conversions.c.server == name).values(url=url, updated_at=_now())
            )
            if changed.rowcount == 0:
                return None
            await _bump(conn)
            await _audit(conn, actor, "conversion_url", name, {"url": url})
            row = (await conn.execute(select(conversions).where(conversions.c.server == name))).one()
            return ConvertedServer(**row._mapping)

    async def remove_conversion(self, name: str, actor: Actor) -> ConvertedServer | None:
        """Forget that ``name`` was converted (reverted, or removed); the record it had, or None."""
        _check_actor(actor)
        async with self._transaction(f"remove the conversion of '{name}'") as conn:
            row = (await conn.execute(select(conversions).where(conversions.c.server == name))).first()
            if row is None:
                return None
            await conn.execute(delete(conversions).where(conversions.c.server == name))
            await _bump(conn)
            await _audit(conn, actor, "revert_server", name, {"url": row.url})
            return ConvertedServer(**row._mapping)

    # --- OAuth credentials (opaque here: onetool.auth.StateTokenStore reads and writes them) -----------

    async def oauth_record(self, server: str) -> str | None:
        async with self._transaction(f"read the OAuth record of '{server}'", write=False) as conn:
            row = (await conn.execute(select(oauth_tokens.c.record).where(oauth_tokens.c.server == server))).first()
            return row.record if row is not None else None

    async def save_oauth_record(self, server: str, record: str) -> None:
        """Replace the server's record. Not audited: tokens refresh every few minutes, and the record is secret.

        Waits (up to the store's timeout) while :meth:`held_oauth_record` holds it elsewhere."""
        async with self._oauth_lock(server, self._timeout):
            await self._save_oauth_record(server, record)

    async def _save_oauth_record(self, server: str, record: str) -> None:
        async with self._transaction(f"store the OAuth record of '{server}'") as conn:
            await _save_oauth(conn, server, record)

    @asynccontextmanager
    async def held_oauth_record(self, server: str, wait: float) -> AsyncIterator[HeldOAuthRecord]:
        """The server's OAuth record, held until the context exits: every other holder and writer of it, in any
        process, waits meanwhile. For a token refresh, which must not spend a single-use refresh token twice
        (replicas). What the holder writes is stored when the context exits without an error; what the body raises
        passes through untouched (it is no failure of the store), and nothing is written then.

        PostgreSQL locks the record's row (``SELECT ... FOR UPDATE``) in one transaction, and first an advisory lock
        on the server's name, which holds also while there is no row yet (the first holder creates the record: a
        DPoP key that every replica must share). A SQLite file is held with a lock file per server beside it
        (``<file>.locks/``), never with the database's own write lock, which covers the whole file: the store's
        other writes, and other servers' refreshes, go on while a token request takes its time. Either waits at
        most ``wait`` seconds for another holder, then raises StateError; a holder that died releases at once (its
        connection, or its file lock, goes with it).
        """
        if self._target.file is not None:
            async with self._oauth_lock(server, wait):
                held = HeldOAuthRecord(server, self._target, read=lambda: self.oauth_record(server))
                yield held
                if held.written is not None:
                    await self._save_oauth_record(server, held.written)
            return
        doing = f"hold the OAuth record of '{server}'"
        passing = False
        try:
            async with waiting(self._engine, wait).begin() as conn:
                if conn.dialect.name == "postgresql":
                    # this transaction's own wait: a holder keeps the row for a whole token request
                    await conn.execute(select(func.set_config("lock_timeout", f"{int(wait * 1000)}ms", True)))
                    await conn.execute(select(func.pg_advisory_xact_lock(func.hashtext(f"onetool.oauth:{server}"))))
                held = HeldOAuthRecord(server, self._target, conn=conn)
                await held.read()  # on PostgreSQL, this takes the row lock
                try:
                    yield held
                except BaseException:
                    passing = True
                    raise
        except _DB_ERRORS as e:
            if passing:
                raise
            raise self._target.explain(doing, e) from None

    def _oauth_lock(self, server: str, wait: float) -> AbstractAsyncContextManager[None]:
        """The lock file that holds ``server``'s record of a SQLite file, for every write of that record (a token
        saved, forgotten, or dropped with its server): one made while a refresh holds it would be overwritten by the
        refresh's tokens as the hold ends. Nothing to take elsewhere: PostgreSQL's writes wait for the row lock."""
        if self._target.file is None:
            return nullcontext()
        name = hashlib.sha256(server.encode()).hexdigest()[:32]  # any server name, one safe file name
        locks = self._target.file.with_name(self._target.file.name + ".locks")
        return file_lock(locks / f"oauth-{name}.lock", wait, f"the OAuth record of '{server}'")

    async def forget_oauth_record(self, server: str) -> bool:
        """Drop the server's record; False when there was none."""
        async with (
            self._oauth_lock(server, self._timeout),
            self._transaction(f"forget the OAuth record of '{server}'") as conn,
        ):
            return (await conn.execute(delete(oauth_tokens).where(oauth_tokens.c.server == server))).rowcount > 0

    # --- change propagation (replicas) ----------------------------------------------------------------

    async def change_counter(self) -> int:
        """Bumped by every write that changes what a gateway serves; 0 for a store never written."""
        async with self._transaction("read the change counter", write=False) as conn:
            return await _counter(conn)

    async def snapshot(self) -> Snapshot:
        """The added servers, overrides and approvals, with the change counter they are at (one transaction)."""
        async with self._transaction("read the servers' state", write=False) as conn:
            counter = await _counter(conn)
            added = {
                row.name: AddedServer(**row._mapping)
                for row in await conn.execute(select(servers).order_by(servers.c.added_at, servers.c.name))
            }
            found = {
                row.server: Override(**row._mapping)
                for row in await conn.execute(select(overrides).order_by(overrides.c.server))
            }
            approvals: dict[str, dict[str, ApprovedTool]] = {}
            rows = await conn.execute(select(approved_tools).order_by(approved_tools.c.server, approved_tools.c.tool))
            for row in rows:
                approvals.setdefault(row.server, {})[row.tool] = ApprovedTool(**row._mapping)
            rejections: dict[str, dict[str, RejectedTool]] = {}
            rows = await conn.execute(select(rejected_tools).order_by(rejected_tools.c.server, rejected_tools.c.tool))
            for row in rows:
                rejections.setdefault(row.server, {})[row.tool] = RejectedTool(**row._mapping)
            return Snapshot(counter, added, found, approvals, rejections)

    @asynccontextmanager
    async def notifications(self, wake: Callable[[], None]) -> AsyncIterator[Callable[[], bool] | None]:
        """While inside, ``wake()`` is called (on the event loop) whenever another writer commits a change.

        PostgreSQL only (LISTEN on one connection of its own, dropped on the way out); yields a check that the
        connection still listens. Other stores have no notifications: yields None (poll :meth:`change_counter`).
        """
        if self._target.url.get_backend_name() != "postgresql":
            yield None
            return
        try:
            conn = await self._engine.connect()
        except _DB_ERRORS as e:
            raise self._target.explain("listen for changes", e) from None
        try:
            driver = (await conn.get_raw_connection()).driver_connection
            assert driver is not None, "an open connection has its driver's"
            await driver.add_listener(CHANNEL, lambda *_: wake())
        except BaseException as e:
            with anyio.CancelScope(shield=True):
                await conn.invalidate()
            if isinstance(e, _DB_ERRORS):
                raise self._target.explain("listen for changes", e) from None
            raise
        try:
            yield lambda: not driver.is_closed()
        finally:
            # never back to the pool with a LISTEN on it
            with anyio.CancelScope(shield=True):
                await conn.invalidate()

    # --- audit log -----------------------------------------------------------------------------------

    async def record(
        self, action: str, actor: Actor, server: str | None = None, details: Mapping[str, Any] | None = None
    ) -> None:
        """Log an event the store did not make itself (a restart, a detected tool change with its diff)."""
        _check_actor(actor)
        async with self._transaction(f"record '{action}'") as conn:
            await _audit(conn, actor, action, server, dict(details or {}))

    async def audit_log(self, *, server: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The newest ``limit`` entries, newest first; only those about ``server`` if given."""
        query = select(audit_log).order_by(audit_log.c.id.desc()).limit(limit)
        if server is not None:
            query = query.where(audit_log.c.server == server)
        async with self._transaction("read the audit log", write=False) as conn:
            return [AuditEntry(**row._mapping) for row in await conn.execute(query)]

    # --- helpers -------------------------------------------------------------------------------------

    async def _override(
        self, name: str, actor: Actor, action: str, details: dict[str, Any], expected: int | None, **values: Any
    ) -> Override:
        _check_actor(actor)
        async with self._transaction(f"change the overrides of '{name}'") as conn:
            override = await _set_override(conn, name, actor, _now(), expected, **values)
            await _bump(conn)
            await _audit(conn, actor, action, name, details)
            return override

    @asynccontextmanager
    async def _transaction(self, doing: str, *, write: bool = True) -> AsyncIterator[AsyncConnection]:
        """One transaction; a database failure becomes a StateError that says what we were doing.

        ``write=False`` for one that only reads: it neither waits for nor blocks a writer elsewhere (SQLite).
        """
        try:
            async with (self._engine if write else self._reader).begin() as conn:
                yield conn
        except StateError:
            raise
        except _DB_ERRORS as e:
            raise self._target.explain(doing, e) from None


class HeldOAuthRecord:
    """One server's OAuth record inside :meth:`StateStore.held_oauth_record`. On PostgreSQL (``conn``) it is read
    and replaced in the holding transaction, so no other holder comes between the two; on a SQLite file (``read``)
    each read is a short transaction of its own under the lock file, and what is written waits for the end."""

    def __init__(
        self,
        server: str,
        target: Target,
        *,
        conn: AsyncConnection | None = None,
        read: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self._server = server
        self._target = target
        self._conn = conn
        self._read = read
        self.written: str | None = None
        """What the holder wrote last (under a lock file: stored as the hold ends)."""

    async def read(self) -> str | None:
        """The record as stored now (a fresh read each time), or as this holder last wrote it."""
        if self._conn is None:
            assert self._read is not None
            return self.written if self.written is not None else await self._read()
        query = select(oauth_tokens.c.record).where(oauth_tokens.c.server == self._server).with_for_update()
        try:
            row = (await self._conn.execute(query)).first()
        except _DB_ERRORS as e:
            raise self._target.explain(f"read the OAuth record of '{self._server}'", e) from None
        return row.record if row is not None else None

    async def write(self, record: str) -> None:
        """Replace the record; it is stored when the holding context exits without an error."""
        self.written = record
        if self._conn is None:
            return
        try:
            await _save_oauth(self._conn, self._server, record)
        except _DB_ERRORS as e:
            raise self._target.explain(f"store the OAuth record of '{self._server}'", e) from None


def _now() -> datetime:
    return datetime.now(UTC)


def _json_data(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(json.dumps(spec))
    except (TypeError, ValueError) as e:
        raise ValueError(f"server spec for '{name}' must be JSON data: {e}") from None
    return data


def _check_actor(actor: str) -> None:
    if actor not in ACTORS:
        raise ValueError(f"unknown actor {actor!r}; expected one of {', '.join(sorted(ACTORS))}")


async def _set_override(
    conn: AsyncConnection, name: str, actor: Actor, now: datetime, expected: int | None, **values: Any
) -> Override:
    """One upsert (two writers never both insert); with ``expected``, only over that version (0: no row)."""
    changed = {**values, "updated_by": actor, "updated_at": now}
    upsert = (
        _insert(conn, overrides)
        .values(server=name, created_at=now, version=1, **changed)
        .on_conflict_do_update(
            index_elements=[overrides.c.server],
            set_={**changed, "version": overrides.c.version + 1},
            where=overrides.c.version == expected if expected is not None else None,
        )
    )
    applied = (await conn.execute(upsert)).rowcount > 0
    row = (await conn.execute(select(overrides).where(overrides.c.server == name))).one()
    if not applied:
        raise LostRace(
            f"server '{name}' was changed meanwhile (by {row.updated_by} at {row.updated_at:%H:%M:%S} UTC, now "
            f"version {row.version}, this change was made over version {expected}); nothing was changed"
        )
    return Override(**row._mapping)


def _insert(conn: AsyncConnection, table: Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT that can say ON CONFLICT, in this connection's dialect (imported by its engine already: a
    gateway on SQLite never loads PostgreSQL's, 2.3 MiB)."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)
    raise StateError(f"the state store supports SQLite and PostgreSQL, not {conn.dialect.name}")


async def _counter(conn: AsyncConnection) -> int:
    return (await conn.execute(select(changes.c.counter).where(changes.c.id == 1))).scalar() or 0


async def _bump(conn: AsyncConnection) -> None:
    """Count a change of what gateways serve; on PostgreSQL, notify the replicas when the transaction commits."""
    bump = _insert(conn, changes).values(id=1, counter=1)
    await conn.execute(
        bump.on_conflict_do_update(index_elements=[changes.c.id], set_={"counter": changes.c.counter + 1})
    )
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": CHANNEL})


async def _approve(conn: AsyncConnection, server: str, tools: Iterable[Tool], actor: Actor) -> list[str]:
    """Record these tools' current definitions as approved, ending any rejection of them; returns their names."""
    definitions = {tool.name: canonical_json(tool) for tool in tools}
    if not definitions:
        return []
    names = sorted(definitions)
    await conn.execute(
        delete(approved_tools).where(approved_tools.c.server == server, approved_tools.c.tool.in_(names))
    )
    await conn.execute(
        delete(rejected_tools).where(rejected_tools.c.server == server, rejected_tools.c.tool.in_(names))
    )
    now = _now()
    await conn.execute(
        insert(approved_tools),
        [
            {
                "server": server,
                "tool": name,
                "fingerprint": fingerprint_of(definitions[name]),
                "definition": definitions[name],
                "approved_by": actor,
                "approved_at": now,
            }
            for name in names
        ],
    )
    return names


async def _save_oauth(conn: AsyncConnection, server: str, record: str) -> None:
    values = {"record": record, "updated_at": _now()}
    await conn.execute(
        _insert(conn, oauth_tokens)
        .values(server=server, **values)
        .on_conflict_do_update(index_elements=[oauth_tokens.c.server], set_=values)
    )


async def _forget(conn: AsyncConnection, name: str) -> None:
    await conn.execute(delete(overrides).where(overrides.c.server == name))
    await conn.execute(delete(approved_tools).where(approved_tools.c.server == name))
    await conn.execute(delete(rejected_tools).where(rejected_tools.c.server == name))
    await conn.execute(delete(oauth_tokens).where(oauth_tokens.c.server == name))


async def _audit(conn: AsyncConnection, actor: Actor, action: str, server: str | None, details: dict[str, Any]) -> None:
    await conn.execute(insert(audit_log).values(at=_now(), actor=actor, action=action, server=server, details=details))
