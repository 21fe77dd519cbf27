"""Changed tools an operator rejected: remembered by fingerprint, so the same change stays hidden and is not offered
for review again (`onetool servers reject NAME --tool T`).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rejected_tools",
        sa.Column("server", sa.String(255), nullable=False),
        sa.Column("tool", sa.String(255), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("rejected_by", sa.String(16), nullable=False),
        sa.Column("rejected_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("server", "tool", name=op.f("pk_rejected_tools")),
    )


def downgrade() -> None:
    op.drop_table("rejected_tools")
