"""Fixtures for the state store: a fresh store URL per test, on SQLite and, where it is installed, PostgreSQL.

The PostgreSQL cluster is real and local (tests/postgres.py, the `postgres` fixture of tests/conftest.py), one fresh
database per test. Without PostgreSQL's binaries the PostgreSQL cases are skipped.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, closing
from itertools import count
from pathlib import Path
from typing import Any, Literal

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from onetool.state import StateStore
from tests.postgres import create_database
from tests.processes import start_and_read_line

_databases = count()


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """Makes URLs of stores that do not exist yet, all on SQLite or all on PostgreSQL."""
    if request.param == "sqlite":
        files = count()
        return lambda: f"sqlite+aiosqlite:///{tmp_path / f'state{next(files)}' / 'onetool.db'}"
    base: str = request.getfixturevalue("postgres")
    return lambda: create_database(base, f"t{os.getpid()}_{next(_databases)}")


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
    # closing() closes it; the connection's own with-block commits (and does not close).
    with closing(sqlite3.connect(path)) as con, con:
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
