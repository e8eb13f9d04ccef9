"""The shared state's tables (members, topics, digests, sent papers, clock heartbeat).

A SQLite corpus file already has them (migrations m002-m006 of ``bot/engine/schema.py``), so
only missing tables are created: an existing deployment is adopted as it is.

Revision ID: s001
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect

from bot.state.tables import ALL

revision = "s001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    present = set(inspect(bind).get_table_names())
    for table in ALL:
        if table.name not in present:
            table.create(bind)


def downgrade() -> None:
    raise NotImplementedError("The shared state is never migrated down.")
