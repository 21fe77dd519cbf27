"""Replicas: a version per server's overrides (a write that lost a race is refused), and the store's change counter.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("overrides", sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
    op.create_table(
        "changes",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("counter", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_changes")),
    )


def downgrade() -> None:
    op.drop_table("changes")
    with op.batch_alter_table("overrides") as batch:
        batch.drop_column("version")
