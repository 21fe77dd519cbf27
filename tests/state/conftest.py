"""Fixtures for the state store: a fresh store URL per test, on SQLite and, where it is installed, PostgreSQL.

The PostgreSQL cluster is real and local: initdb in a temp folder, listening on 127.0.0.1 only, trust auth,
one fresh database per test. Without PostgreSQL's binaries the PostgreSQL cases are skipped.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from itertools import count
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from onetool.state import StateStore
from tests.conftest import free_port, wait_for_port
from tests.processes import start_and_read_line

PG_USER = "onetool"
_databases = count()


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(candidates[-1]) if candidates else None


def _as_pg_owner(args: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; drop to the packaged `postgres` user then
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """A scratch PostgreSQL server; yields its base URL (without a database name)."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("PostgreSQL is not installed (initdb, pg_ctl)")
    home = Path(tempfile.mkdtemp(prefix="onetool-pg-"))
    data, port = home / "data", free_port()
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    try:
        if os.geteuid() == 0:
            shutil.chown(home, "postgres")
        initdb_args = [initdb, "-D", str(data), "-A", "trust", "-U", PG_USER, "--no-sync"]
        subprocess.run(_as_pg_owner(initdb_args), check=True, **quiet)
        options = f"-h 127.0.0.1 -p {port} -k {home} -F"
        start = [pg_ctl, "-D", str(data), "-o", options, "-w", "-l", str(home / "log"), "start"]
        subprocess.run(_as_pg_owner(start), check=True, **quiet)
        wait_for_port(port)
        yield f"postgresql+asyncpg://{PG_USER}@127.0.0.1:{port}"
    finally:
        # Whatever failed on the way: no postmaster and no folder left behind (a stop with none running fails).
        subprocess.run(_as_pg_owner([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), check=False, **quiet)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """Makes URLs of stores that do not exist yet, all on SQLite or all on PostgreSQL."""
    if request.param == "sqlite":
        files = count()
        return lambda: f"sqlite+aiosqlite:///{tmp_path / f'state{next(files)}' / 'onetool.db'}"
    base: str = request.getfixturevalue("postgres")
    port = base.rsplit(":", 1)[1]
    psql = _pg_bin("psql") or "psql"

    def new() -> str:
        name = f"t{os.getpid()}_{next(_databases)}"
        connect = [psql, "-h", "127.0.0.1", "-p", port, "-U", PG_USER, "-d", "postgres"]
        subprocess.run([*connect, "-qc", f"CREATE DATABASE {name}"], check=True)
        return f"{base}/{name}"

    return new


@pytest.fixture
def store_url(new_store_url: Callable[[], str]) -> str:
    """A URL for a store that does not exist yet."""
    return new_store_url()


@asynccontextmanager
async def engine_for(url: str) -> AsyncIterator[AsyncEngine]:
    """A plain engine on the store at ``url``, beside the store's own (for a SQLite file, its folder is made)."""
    if (file := sqlite_file(url)) is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url)
    try:
        yield engine
    finally:
        await engine.dispose()


def sqlite_file(url: str) -> Path | None:
    return Path(url.split(":///", 1)[1]) if url.startswith("sqlite") else None


def sqlite_execute(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Run SQL on a store file with the plain sqlite3 module: a second, independent client."""
    with sqlite3.connect(path) as con:
        return con.execute(sql).fetchall()


def hold_lock(path: Path, mode: Literal["IMMEDIATE", "EXCLUSIVE"]) -> subprocess.Popen[str]:
    """Another process that holds SQLite's write lock until its stdin closes.

    IMMEDIATE: the reserved lock of a writer in progress (readers may still read); EXCLUSIVE: no one else may
    even read.
    """
    code = (
        "import sqlite3, sys\n"
        f"con = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        f"con.execute('BEGIN {mode}')\n"
        "print('locked', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc, line = start_and_read_line([sys.executable, "-c", code], stdin=subprocess.PIPE)
    assert line == "locked"
    return proc


def release(proc: subprocess.Popen[str]) -> None:
    with proc:  # closes stdin, which ends the holder, then waits for it
        pass


class RecordingStore(StateStore):
    """The real store, noting what each of its transactions was for: to count a caller's trips to the database."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.transactions: list[str] = []

    def _transaction(self, doing: str, *, write: bool = True) -> AbstractAsyncContextManager[AsyncConnection]:
        self.transactions.append(doing)
        return super()._transaction(doing, write=write)
