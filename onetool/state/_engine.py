"""From ``state.url`` (or the default SQLite file) to an async engine, and from a driver error to a StateError.

Every message names the store by its file or by its URL with the password masked, and says what to do.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import URL, event, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from onetool.errors import StateError, StoreUnreachable
from onetool.private import private_dir
from onetool.state.paths import default_database

# A bare dialect name gets the async driver OneTool ships, so `postgresql://...` works as users write it.
_ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg"}

# The execution option that marks a transaction as read-only (see read_only).
_READ_ONLY = "onetool_read_only"
# The execution option that gives a SQLite transaction its own wait for the write lock (see waiting).
_LOCK_WAIT = "onetool_lock_wait"

_ADVICE = (
    (
        re.compile(r"file is not a database|malformed|corrupt", re.I),
        "OneTool left it untouched: move it aside to start with an empty state, or restore a backup",
    ),
    (
        re.compile(r"async driver|Can't load plugin", re.I),
        "use a URL with an async driver, such as postgresql+asyncpg://... or sqlite+aiosqlite:///...",
    ),
    (
        re.compile(r"database is locked|busy|lock timeout", re.I),
        "another process holds a lock on it; stop that process (another OneTool?) or try again",
    ),
    (
        re.compile(r"unable to open database file|readonly|read-only", re.I),
        "check that the file and its folder exist and are writable by this user",
    ),
)


@dataclass(frozen=True)
class Target:
    """Where the store lives: the SQLAlchemy URL, and how messages name it."""

    url: URL
    location: str  # the file path, or the URL with its password masked
    file: Path | None  # the SQLite file, when there is one

    @classmethod
    def parse(cls, url: str | None) -> Target:
        if url is None:
            file = default_database()
            return cls(URL.create("sqlite+aiosqlite", database=str(file)), str(file), file)
        try:
            parsed = make_url(url)
        except ArgumentError:
            # the message of ArgumentError repeats the URL, password included
            raise StateError(
                "state.url is not a valid SQLAlchemy URL (expected e.g. "
                "postgresql+asyncpg://user:password@host:5432/onetool or sqlite+aiosqlite:////path/to/onetool.db)"
            ) from None
        parsed = parsed.set(drivername=_ASYNC_DRIVERS.get(parsed.drivername, parsed.drivername))
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            file = Path(parsed.database)
            return cls(parsed, str(file), file)
        return cls(parsed, parsed.render_as_string(hide_password=True), None)

    def explain(self, doing: str, error: BaseException) -> StateError:
        """A StateError for a failure while ``doing`` something; never the password, an SQL statement or data."""
        reason = _reason(error)
        if self.url.password:
            reason = reason.replace(str(self.url.password), "***")
        fallback = "check the file and its folder" if self.file else "check state.url and that the server is reachable"
        advice = next((text for pattern, text in _ADVICE if pattern.search(reason)), fallback)
        kind = StoreUnreachable if self.file is None and _unreachable(error) else StateError
        return kind(f"state store {self.location}: cannot {doing}: {reason}; {advice}")


# SQLSTATEs of a server that is there but cannot take us now: connection failures (class 08), shutting down or
# starting up (57P01-57P03), too many connections (53300).
_UNREACHABLE_STATES = ("08", "57P01", "57P02", "57P03", "53300")


def _unreachable(error: BaseException) -> bool:
    """Whether ``error`` says the store's server cannot be reached now (worth retrying), not that it refused us."""
    cause = getattr(error, "orig", None) or error  # SQLAlchemy wraps the driver's error
    if isinstance(cause, OSError | TimeoutError):
        return True
    state = getattr(cause, "sqlstate", None)
    return isinstance(state, str) and state.startswith(_UNREACHABLE_STATES)


def create_engine(target: Target, timeout: float) -> AsyncEngine:
    """The engine for ``target``; SQLite files are created private (0600 in a 0700 folder)."""
    options: dict[str, Any] = {"hide_parameters": True, "connect_args": _bounded_waits(target.url, timeout)}
    if target.url.get_backend_name() == "sqlite":
        if target.file is None:
            options["poolclass"] = StaticPool  # one in-memory database shared by every use of the engine
        else:
            # one connection: the store's transactions are tiny, and SQLite has one writer at a time anyway
            options.update(pool_size=1, max_overflow=0)
    try:
        engine = create_async_engine(target.url, **options)
        if target.file is not None:
            _private_file(target.file)
    except (SQLAlchemyError, ImportError, OSError) as e:
        raise target.explain("open it", e) from None
    if target.url.get_backend_name() == "sqlite":
        _transactions_for_sqlite(engine, timeout)
    return engine


def _bounded_waits(url: URL, timeout: float) -> dict[str, Any]:
    """Connect arguments that bound every wait for a lock or a connection by ``timeout`` seconds."""
    if url.drivername == "sqlite+aiosqlite":
        return {"timeout": timeout}  # the busy timeout
    if url.drivername == "postgresql+asyncpg":
        return {"timeout": timeout, "server_settings": {"lock_timeout": str(int(timeout * 1000))}}
    return {}  # another driver: its own defaults


def read_only(engine: AsyncEngine) -> AsyncEngine:
    """The same engine (same pool) for transactions that only read: on SQLite they take no write lock."""
    return engine.execution_options(**{_READ_ONLY: True})


def waiting(engine: AsyncEngine, seconds: float) -> AsyncEngine:
    """The same engine (same pool) for a SQLite transaction that waits up to ``seconds`` for the write lock, instead
    of the store's timeout: a holder may keep it longer than the store's usual transactions (an OAuth refresh).

    PostgreSQL takes its row locks inside the transaction: set the transaction's ``lock_timeout`` there.
    """
    return engine.execution_options(**{_LOCK_WAIT: seconds})


def _transactions_for_sqlite(engine: AsyncEngine, timeout: float) -> None:
    """Take SQLite's write lock when a writing transaction begins, and keep DDL inside it.

    The sqlite3 module begins transactions lazily and commits before DDL, so a migration could stop half done,
    and two writers that both read first could deadlock. `BEGIN IMMEDIATE` (the SQLAlchemy-documented recipe)
    makes every writing transaction atomic and serialises writers through the busy timeout.

    A transaction of :func:`read_only` begins deferred: it takes a shared lock at its first SELECT, so it reads
    one consistent snapshot while another process writes, and neither waits for the other until that writer
    commits (a moment).
    """

    @event.listens_for(engine.sync_engine, "connect")
    def _no_implicit_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: Any) -> None:
        options = connection.get_execution_options()
        # The busy timeout belongs to the connection (the pool reuses it): set it for this transaction when it
        # differs from what the connection has now, so a longer wait never outlives the transaction that asked.
        busy_ms = int(options.get(_LOCK_WAIT, timeout) * 1000)
        info = connection.connection.info
        if info.get(_LOCK_WAIT) != busy_ms:
            connection.exec_driver_sql(f"PRAGMA busy_timeout = {busy_ms}")
            info[_LOCK_WAIT] = busy_ms
        connection.exec_driver_sql("BEGIN" if options.get(_READ_ONLY, False) else "BEGIN IMMEDIATE")


def _private_file(file: Path) -> None:
    private_dir(file.parent)
    # an empty file is a valid empty SQLite database; creating it here fixes its mode before SQLite opens it
    with contextlib.suppress(FileExistsError):
        os.close(os.open(file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))


def _reason(error: BaseException) -> str:
    """The driver's own message: a DBAPIError's str() would add the SQL statement."""
    if isinstance(error, DBAPIError) and error.orig is not None:
        error = error.orig
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    text = str(error).split("\n[SQL:", 1)[0].strip() or type(error).__name__
    return text.splitlines()[0][:300].rstrip(".")
