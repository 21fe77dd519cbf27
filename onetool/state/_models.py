"""The state store's tables (SQLAlchemy Core), in portable column types only (SQLite and PostgreSQL alike).

A change here needs a new migration in ``migrations/versions/`` that builds the same schema: an empty store is
created from these tables (``migrate.create_at_head``), an older one is migrated, and a test checks that both end
alike. Migrations write the database-level types directly (``sa.DateTime(timezone=True)``), so they do not import
this module and stay valid when it changes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Column, DateTime, Dialect, Index, Integer, MetaData, String, Table, Text, false
from sqlalchemy.types import TypeDecorator

NAME = 255  # server and tool names: config keys and MCP tool names are far shorter in practice
ACTOR = 16


class UtcDateTime(TypeDecorator[datetime]):
    """An aware UTC datetime on both sides: SQLite keeps no offset, so values are stored as UTC and read back so."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("state timestamps must be timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        stamp: datetime = value
        return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# Servers added at run time. An edit of one bumps its override's version (the one version a server's changes are
# written over) and leaves its audit entry; the row keeps only the spec.
servers = Table(
    "servers",
    metadata,
    Column("name", String(NAME), primary_key=True),
    Column("spec", JSON, nullable=False),  # a config-file server entry, as given (the caller validated it)
    Column("added_by", String(ACTOR), nullable=False),
    Column("added_at", UtcDateTime, nullable=False),
    # A server a model proposed (added through MCP): nothing runs until an operator approves it.
    Column("proposed", Boolean, nullable=False, server_default=false()),
)

# Per-server overrides, of config-file and added servers alike.
overrides = Table(
    "overrides",
    metadata,
    Column("server", String(NAME), primary_key=True),
    # NULL: no override, the config (or the add) decides
    Column("enabled", Boolean, nullable=True),
    Column("quarantined", Boolean, nullable=True),
    Column("approved_by", String(ACTOR), nullable=True),
    Column("approved_at", UtcDateTime, nullable=True),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_by", String(ACTOR), nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    # who made the last enable/disable decision: a model may not undo an operator's
    Column("enabled_by", String(ACTOR), nullable=True),
    # bumped by every change of the row: a replica writes only over the version it knows (else: lost a race)
    Column("version", Integer, nullable=False, server_default="1"),
    # the tools filter set at run time, {"allow": [...] | null, "deny": [...]}: it replaces the entry's own
    Column("tools", JSON, nullable=True),
)

# One row (id 1): bumped by every write that changes what a replica serves (servers, overrides, approvals,
# conversions). Replicas compare it with the one they applied, so a missed notification still converges.
changes = Table(
    "changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("counter", Integer, nullable=False),
)

approved_tools = Table(
    "approved_tools",
    metadata,
    Column("server", String(NAME), primary_key=True),
    Column("tool", String(NAME), primary_key=True),
    Column("fingerprint", String(64), nullable=False),  # sha256 hex of `definition`
    Column("definition", Text, nullable=False),  # the approved tool's canonical JSON, to diff a later change
    Column("approved_by", String(ACTOR), nullable=False),
    Column("approved_at", UtcDateTime, nullable=False),
)

# A held tool's change an operator rejected: while the server offers that very definition (this fingerprint) the
# tool stays hidden and is not offered for review again; another change is held for review as usual. Approving the
# tool (or the whole server) deletes the row.
rejected_tools = Table(
    "rejected_tools",
    metadata,
    Column("server", String(NAME), primary_key=True),
    Column("tool", String(NAME), primary_key=True),
    Column("fingerprint", String(64), nullable=False),  # sha256 hex of the rejected definition's canonical JSON
    Column("rejected_by", String(ACTOR), nullable=False),
    Column("rejected_at", UtcDateTime, nullable=False),
)

# Append-only: rows are inserted, never updated or deleted.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", UtcDateTime, nullable=False),
    Column("actor", String(ACTOR), nullable=False),
    Column("action", String(32), nullable=False),
    Column("server", String(NAME), nullable=True),
    Column("details", JSON, nullable=False),
    Index(None, "server", "id"),
)

# Stdio servers converted to HTTP through a bridge (onetool bridge): what to send it again, where it serves them.
# A row means "converted_from_stdio"; reverting deletes it, and the server's own entry applies again.
conversions = Table(
    "conversions",
    metadata,
    Column("server", String(NAME), primary_key=True),
    Column("command", Text, nullable=False),
    Column("args", JSON, nullable=False),
    Column("env", JSON, nullable=False),  # the stdio env as given: it may hold secrets
    Column("url", Text, nullable=False),
    Column("converted_by", String(ACTOR), nullable=False),
    Column("converted_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

# OAuth credentials of HTTP upstreams: tokens and a dynamic client registration. ``record`` is the JSON that
# onetool.auth reads; it holds secrets, so no audit entry, log line or status ever carries it.
oauth_tokens = Table(
    "oauth_tokens",
    metadata,
    Column("server", String(NAME), primary_key=True),
    Column("record", Text, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)
