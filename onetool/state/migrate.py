"""Apply the shipped Alembic migrations programmatically, on a live connection (run through ``run_sync``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection

from onetool.errors import StateError

MIGRATIONS = Path(__file__).with_name("migrations")
_MIGRATION_LOCK = 0x0E7001  # a fixed advisory lock key, held until the migrating transaction ends


def upgrade(connection: Connection, location: str) -> None:
    """Bring the schema to this code's head; refuse a schema from a newer OneTool rather than guess."""
    if connection.dialect.name == "postgresql":
        # replicas may open one fresh database at once: the first migrates, the others then find it done
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
    config = _config()
    config.attributes["connection"] = connection
    script = ScriptDirectory.from_config(config)
    for revision in MigrationContext.configure(connection).get_current_heads():
        try:
            script.get_revision(revision)
        except CommandError:
            raise StateError(
                f"state store {location}: its schema (revision {revision}) is newer than this OneTool knows "
                f"(up to {head_revision()}); upgrade OneTool, or point state.url at another database"
            ) from None
    command.upgrade(config, "head")


def head_revision() -> str:
    """The newest schema revision this code ships."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "the package ships at least one migration"
    return head


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config
