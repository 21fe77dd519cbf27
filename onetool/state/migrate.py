"""Bring the store's schema to this code's head, on a live connection (run through ``run_sync``).

A store already at ``HEAD`` is recognised with plain SQLAlchemy: Alembic (about 11 MiB resident) is imported only
when there is something to migrate or refuse, so a gateway that opens its usual store never holds it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from onetool.errors import StateError

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

HEAD = "0003"
"""The newest revision in ``migrations/versions/`` (a test checks it against Alembic's own answer)."""

MIGRATIONS = Path(__file__).with_name("migrations")
_VERSION_TABLE = "alembic_version"
_MIGRATION_LOCK = 0x0E7001  # a fixed advisory lock key, held until the migrating transaction ends


def upgrade(connection: Connection, location: str) -> None:
    """Bring the schema to this code's head; refuse a schema from a newer OneTool rather than guess."""
    if current_revisions(connection) == {HEAD}:
        return
    if connection.dialect.name == "postgresql":
        # replicas may open one fresh database at once: the first migrates, the others then find it done
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
    _migrate(connection, location)


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
