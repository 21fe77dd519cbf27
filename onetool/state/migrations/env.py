"""Alembic environment for the state store.

OneTool applies migrations itself when it opens the store (onetool.state._migrate), on the store's own
connection; there is no alembic.ini. A schema change is a new hand-written file in versions/ whose
``down_revision`` is the previous head, numbered ``000N_what.py``; models.py changes with it.
"""

from __future__ import annotations

from alembic import context

from onetool.state._models import metadata

connection = context.config.attributes.get("connection")
if connection is None or context.is_offline_mode():
    raise RuntimeError("the state store's migrations run inside OneTool (onetool.state._migrate), on a live connection")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
