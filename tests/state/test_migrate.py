"""Migrations run only when needed: a store at this code's head opens without Alembic; fresh and older stores
migrate to it, keeping their data."""

from __future__ import annotations

import subprocess
import sys

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from onetool.state import StateStore
from onetool.state.migrate import HEAD, current_revisions, shipped_head
from tests.state.conftest import sqlite_file

OLD = "0002"  # a revision before the OAuth tokens table


def test_the_head_constant_is_the_shipped_migrations_head() -> None:
    assert shipped_head() == HEAD


def alembic_imported_by_open(url: str) -> bool:
    """Open the store in a fresh interpreter; whether that imported Alembic."""
    code = (
        "import asyncio, sys\n"
        "from onetool.state import StateStore\n"
        "async def main():\n"
        f"    await (await StateStore.open({url!r})).aclose()\n"
        "asyncio.run(main())\n"
        "print('alembic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {"True\n": True, "False\n": False}[done.stdout]


def test_a_store_at_head_opens_without_importing_alembic(store_url: str) -> None:
    assert alembic_imported_by_open(store_url), "a fresh store is migrated, by Alembic"
    assert not alembic_imported_by_open(store_url)


async def revisions(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(current_revisions)
    finally:
        await engine.dispose()


async def test_an_older_store_is_migrated_to_head_and_keeps_its_data(store_url: str) -> None:
    from alembic import command

    from onetool.state.migrate import _alembic

    def upgrade_to_old(connection: Connection) -> None:
        config = _alembic()[0]
        config.attributes["connection"] = connection
        command.upgrade(config, OLD)

    if (file := sqlite_file(store_url)) is not None:
        file.parent.mkdir()
    engine = create_async_engine(store_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(upgrade_to_old)
            await conn.exec_driver_sql(
                "INSERT INTO overrides (server, enabled, created_at, updated_by, updated_at) "
                "VALUES ('kept', false, '2026-01-01 00:00:00+00:00', 'cli', '2026-01-01 00:00:00+00:00')"
            )
    finally:
        await engine.dispose()
    assert await revisions(store_url) == {OLD}

    async with await StateStore.open(store_url) as store:
        assert (await store.overrides())["kept"].enabled is False
        await store.save_oauth_record("kept", "{}")  # the table the migration added
        assert await store.oauth_record("kept") == "{}"
    assert await revisions(store_url) == {HEAD}
