"""Servers a model proposed (nothing runs until an operator approves), and who last enabled or disabled a server.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("servers", sa.Column("proposed", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("overrides", sa.Column("enabled_by", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("overrides") as batch:
        batch.drop_column("enabled_by")
    with op.batch_alter_table("servers") as batch:
        batch.drop_column("proposed")
