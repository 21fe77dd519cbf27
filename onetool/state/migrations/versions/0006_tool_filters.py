"""A server's tools filter, set at run time (`onetool servers tools NAME --allow/--deny`).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("overrides", sa.Column("tools", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("overrides") as batch:
        batch.drop_column("tools")
