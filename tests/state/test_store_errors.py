"""A store that cannot be used is one clear StateError: it names the file or URL (never a password), says what
to do, carries no chained traceback, comes quickly, and leaves the data as it was."""

from __future__ import annotations

import time
from pathlib import Path

import asyncpg
import pytest

from onetool.errors import StateError
from onetool.state import StateStore
from tests.state.conftest import hold_lock, release, sqlite_execute

SECONDS = 10.0  # generous: the busy timeout below is 0.5 s, a refused connection is immediate


async def open_fails(url: str | None, *, timeout: float = 0.5) -> StateError:
    started = time.monotonic()
    with pytest.raises(StateError) as caught:
        await StateStore.open(url, timeout=timeout)
    assert time.monotonic() - started < SECONDS
    error = caught.value
    assert error.__cause__ is None and error.__suppress_context__, "the message is the whole story"
    assert "[SQL:" not in str(error)
    return error


async def test_a_corrupt_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "onetool.db"
    garbage = b"this is not SQLite\n" * 500
    db.write_bytes(garbage)
    error = await open_fails(f"sqlite:///{db}")
    assert str(error).startswith(f"state store {db}: cannot open it: file is not a database;")
    assert "move it aside" in str(error)
    assert db.read_bytes() == garbage


async def test_a_database_locked_by_another_process_fails_at_open(tmp_path: Path) -> None:
    db = tmp_path / "onetool.db"
    await (await StateStore.open(f"sqlite:///{db}")).aclose()
    holder = hold_lock(db, "EXCLUSIVE")
    try:
        error = await open_fails(f"sqlite:///{db}")
    finally:
        release(holder)
    assert f"state store {db}: cannot open it: database is locked;" in str(error)
    assert "another process holds a lock" in str(error)


async def test_a_lock_taken_while_open_fails_the_change_and_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "onetool.db"
    async with await StateStore.open(f"sqlite:///{db}", timeout=0.5) as store:
        await store.set_enabled("kept", False, "cli")
        holder = hold_lock(db, "EXCLUSIVE")
        try:
            with pytest.raises(StateError, match="cannot change the overrides of 'new': database is locked"):
                await store.set_enabled("new", False, "cli")
        finally:
            release(holder)
        # the lock is gone: the store works again, and nothing was half written
        assert list(await store.overrides()) == ["kept"]
        await store.set_enabled("new", False, "cli")
        assert list(await store.overrides()) == ["kept", "new"]


async def test_a_schema_from_a_newer_onetool_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "onetool.db"
    async with await StateStore.open(f"sqlite:///{db}") as store:
        await store.set_enabled("x", False, "cli")
    sqlite_execute(db, "UPDATE alembic_version SET version_num = '9999'")
    error = await open_fails(f"sqlite:///{db}")
    assert "its schema (revision 9999) is newer than this OneTool knows" in str(error)
    assert "upgrade OneTool" in str(error)
    assert sqlite_execute(db, "SELECT server FROM overrides") == [("x",)]


async def test_an_unreachable_postgresql_url_never_shows_its_password() -> None:
    error = await open_fails("postgresql+asyncpg://u:secret@127.0.0.1:1/x")
    assert "secret" not in str(error)
    assert str(error).startswith("state store postgresql+asyncpg://u:***@127.0.0.1:1/x: cannot open it:")
    assert "check state.url and that the server is reachable" in str(error)


async def test_a_plain_postgresql_url_gets_the_async_driver() -> None:
    error = await open_fails("postgresql://u:secret@127.0.0.1:1/x")
    assert "postgresql+asyncpg://u:***@127.0.0.1:1/x" in str(error)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("not a url: secret", "state.url is not a valid SQLAlchemy URL (expected e.g."),
        ("nosuchdb://u:secret@host/x", "state store nosuchdb://u:***@host/x: cannot open it: Can't load plugin"),
        ("sqlite+pysqlite:///x.db", "cannot open it: The asyncio extension requires an async driver"),
    ],
)
async def test_a_url_that_cannot_work_is_a_clear_error(
    url: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    error = await open_fails(url)
    assert expected in str(error)
    assert "secret" not in str(error)
    assert list(tmp_path.iterdir()) == [], "a URL that cannot work creates no file"


async def test_a_file_where_the_folder_should_be(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    error = await open_fails(f"sqlite:///{tmp_path / 'afile' / 'onetool.db'}")
    assert str(error).startswith(f"state store {tmp_path / 'afile' / 'onetool.db'}: cannot open it:")


@pytest.mark.parametrize("new_store_url", ["postgresql"], indirect=True)
async def test_a_postgresql_lock_held_elsewhere_fails_the_change_quickly(store_url: str) -> None:
    async with await StateStore.open(store_url, timeout=0.5) as store:
        holder = await asyncpg.connect(store_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            async with holder.transaction():
                await holder.execute("LOCK TABLE overrides IN ACCESS EXCLUSIVE MODE")
                started = time.monotonic()
                with pytest.raises(StateError, match=r"cannot change the overrides of 'x': .*lock timeout.*another"):
                    await store.set_enabled("x", False, "cli")
                assert time.monotonic() - started < SECONDS
        finally:
            await holder.close()
        await store.set_enabled("x", False, "cli")
