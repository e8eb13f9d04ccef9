"""Members' feedback on papers: 👍/👎 (``feedback``) and the reading list (``saves``).

Revision ID: s002
Revises: s001
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect

from bot.state.tables import FEEDBACK_TABLES

revision = "s002"
down_revision = "s001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    present = set(inspect(bind).get_table_names())
    for table in FEEDBACK_TABLES:
        if table.name not in present:
            table.create(bind)


def downgrade() -> None:
    raise NotImplementedError("The shared state is never migrated down.")
