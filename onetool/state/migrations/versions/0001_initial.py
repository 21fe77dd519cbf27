"""The first schema: servers added at run time, per-server overrides, approved tools, the audit log.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels = None
depends_on = None

NAME = sa.String(255)
ACTOR = sa.String(16)


def _when() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "servers",
        sa.Column("name", NAME, nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("added_by", ACTOR, nullable=False),
        sa.Column("added_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_servers"),
    )
    op.create_table(
        "overrides",
        sa.Column("server", NAME, nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=True),
        sa.Column("quarantined", sa.Boolean(), nullable=True),
        sa.Column("approved_by", ACTOR, nullable=True),
        sa.Column("approved_at", _when(), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_by", ACTOR, nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("server", name="pk_overrides"),
    )
    op.create_table(
        "approved_tools",
        sa.Column("server", NAME, nullable=False),
        sa.Column("tool", NAME, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("approved_by", ACTOR, nullable=False),
        sa.Column("approved_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("server", "tool", name="pk_approved_tools"),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", _when(), nullable=False),
        sa.Column("actor", ACTOR, nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("server", NAME, nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_server_id", "audit_log", ["server", "id"])


def downgrade() -> None:
    for table in ("audit_log", "approved_tools", "overrides", "servers"):
        op.drop_table(table)
