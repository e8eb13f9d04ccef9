"""Members' choices about the taste features (``member_taste``: the teammates-saved line).

Revision ID: s010_taste
Revises: s002
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect

from bot.state.tables import TASTE_TABLES

revision = "s010_taste"
down_revision = "s002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    present = set(inspect(bind).get_table_names())
    for table in TASTE_TABLES:
        if table.name not in present:
            table.create(bind)


def downgrade() -> None:
    raise NotImplementedError("The shared state is never migrated down.")
