"""Bring the store's schema to this code's head, on a live connection (run through ``run_sync``).

Alembic (about 11 MiB resident, for the life of the process) is imported only for a store that needs a migration
or must be refused: an older one, or one from a newer OneTool. A store already at ``HEAD`` is recognised with
plain SQLAlchemy, and an empty database gets this code's tables from ``models.metadata`` and is stamped ``HEAD``,
as Alembic's own cookbook does it; a test checks that the migrations build exactly that schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Column, Connection, MetaData, PrimaryKeyConstraint, String, Table, insert, inspect, text

from onetool.errors import StateError
from onetool.state._models import metadata

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory


HEAD = "0007"
"""The newest revision in ``migrations/versions/`` (a test checks it against Alembic's own answer)."""

MIGRATIONS = Path(__file__).with_name("migrations")
_VERSION_TABLE = "alembic_version"
_MIGRATION_LOCK = 0x0E7001  # a fixed advisory lock key, held until the migrating transaction ends

# Alembic's version table exactly as Alembic creates it, so a stamped store migrates later like any other.
_version = Table(
    _VERSION_TABLE,
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


def upgrade(connection: Connection, location: str) -> None:
    """Bring the schema to this code's head; refuse a schema from a newer OneTool rather than guess."""
    if current_revisions(connection) == {HEAD}:
        return
    if connection.dialect.name == "postgresql":
        # replicas may open one fresh database at once: the first migrates, the others then find it done
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        if current_revisions(connection) == {HEAD}:
            return
    if not inspect(connection).get_table_names():
        create_at_head(connection)
    else:
        _migrate(connection, location)


def create_at_head(connection: Connection) -> None:
    """Give an empty database this code's tables, recorded as at ``HEAD``."""
    metadata.create_all(connection)
    _version.create(connection)
    connection.execute(insert(_version).values(version_num=HEAD))


def current_revisions(connection: Connection) -> set[str]:
    """The revisions the store records (none for a fresh store), read as Alembic's version table holds them."""
    # inspect first: selecting from a missing table would abort the whole transaction on PostgreSQL
    if not inspect(connection).has_table(_VERSION_TABLE):
        return set()
    return set(connection.execute(text(f"SELECT version_num FROM {_VERSION_TABLE}")).scalars())


def _migrate(connection: Connection, location: str) -> None:
    # lazy: Alembic is needed only for a fresh, older or newer store, never for one at HEAD
    from alembic import command
    from alembic.runtime.migration import MigrationContext
    from alembic.util import CommandError

    config, script = _alembic()
    config.attributes["connection"] = connection
    for revision in MigrationContext.configure(connection).get_current_heads():
        try:
            script.get_revision(revision)
        except CommandError:
            raise StateError(
                f"state store {location}: its schema (revision {revision}) is newer than this OneTool knows "
                f"(up to {HEAD}); upgrade OneTool, or point state.url at another database"
            ) from None
    command.upgrade(config, "head")


def shipped_head() -> str:
    """The head revision as Alembic computes it from the shipped migrations: what ``HEAD`` must equal."""
    head = _alembic()[1].get_current_head()
    assert head is not None, "the package ships at least one migration"
    return head


def _alembic() -> tuple[Config, ScriptDirectory]:
    from alembic.config import Config  # lazy, as in _migrate
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config, ScriptDirectory.from_config(config)
