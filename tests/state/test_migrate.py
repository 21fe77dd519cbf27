"""Migrations run only when needed: a store at this code's head, and an empty one, open without Alembic (the empty
one gets this code's tables); an older store migrates to head, keeping its data. The migrations build exactly
the schema an empty store gets."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from sqlalchemy import Connection, inspect

from onetool.state import StateStore
from onetool.state._migrate import HEAD, _alembic, current_revisions, shipped_head
from onetool.state._models import metadata
from tests.state.conftest import engine_for

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


async def test_a_fresh_store_is_created_at_head_without_importing_alembic(store_url: str) -> None:
    assert not alembic_imported_by_open(store_url), "a fresh store gets its tables from models.metadata"
    assert await revisions(store_url) == {HEAD}
    assert not alembic_imported_by_open(store_url)


async def revisions(url: str) -> set[str]:
    async with engine_for(url) as engine, engine.connect() as conn:
        return await conn.run_sync(current_revisions)


def alembic_upgrade(revision: str) -> Callable[[Connection], None]:
    """Alembic's upgrade of a connection to ``revision`` (for ``run_sync``), as OneTool's migrations run."""
    from alembic import command

    def upgrade(connection: Connection) -> None:
        config = _alembic()[0]
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    return upgrade


async def test_an_older_store_is_migrated_to_head_and_keeps_its_data(store_url: str) -> None:
    async with engine_for(store_url) as engine, engine.begin() as conn:
        await conn.run_sync(alembic_upgrade(OLD))
        await conn.exec_driver_sql(
            "INSERT INTO overrides (server, enabled, created_at, updated_by, updated_at) "
            "VALUES ('kept', false, '2026-01-01 00:00:00+00:00', 'cli', '2026-01-01 00:00:00+00:00')"
        )
    assert await revisions(store_url) == {OLD}

    assert alembic_imported_by_open(store_url), "an older store is migrated, by Alembic"
    async with await StateStore.open(store_url) as store:
        assert (await store.overrides())["kept"].enabled is False
        await store.save_oauth_record("kept", "{}")  # the table the migration added
        assert await store.oauth_record("kept") == "{}"
    assert await revisions(store_url) == {HEAD}


def schema(connection: Connection) -> dict[str, object]:
    """Every table as the database describes it: columns, primary key, indexes, unique and foreign keys."""
    found = inspect(connection)
    return {
        table: {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], c.get("default"), c.get("autoincrement"))
                for c in found.get_columns(table)
            ],
            "primary key": found.get_pk_constraint(table),
            "indexes": sorted((i["name"], tuple(i["column_names"]), i["unique"]) for i in found.get_indexes(table)),
            "unique": sorted((u["name"], tuple(u["column_names"])) for u in found.get_unique_constraints(table)),
            "foreign keys": found.get_foreign_keys(table),
        }
        for table in sorted(found.get_table_names())
    }


async def test_the_migrations_build_the_schema_of_a_fresh_store(new_store_url: Callable[[], str]) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    created, migrated = new_store_url(), new_store_url()
    await (await StateStore.open(created)).aclose()
    async with engine_for(migrated) as engine:
        async with engine.begin() as conn:
            await conn.run_sync(alembic_upgrade("head"))
        async with engine.connect() as conn:
            differences = await conn.run_sync(lambda c: compare_metadata(MigrationContext.configure(c), metadata))
            by_migrations = await conn.run_sync(schema)
    assert differences == [], "models.py and the migrations disagree"
    async with engine_for(created) as engine, engine.connect() as conn:
        assert await conn.run_sync(schema) == by_migrations
    assert await revisions(created) == await revisions(migrated) == {HEAD}
