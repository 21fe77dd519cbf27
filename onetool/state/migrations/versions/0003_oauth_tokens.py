"""OAuth tokens and client registrations of HTTP upstreams, one record per server.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "oauth_tokens",
        sa.Column("server", sa.String(255), nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("server", name="pk_oauth_tokens"),
    )


def downgrade() -> None:
    op.drop_table("oauth_tokens")
