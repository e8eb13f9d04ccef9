"""Installing into many workspaces: the workspaces Paperboy is in (``workspaces``) and
slack_sdk's OAuth tables (installations, bot tokens, OAuth state), on SQLite and PostgreSQL.

Revision ID: s020_workspaces
Revises: s030_corpus
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect

from bot.state.tables import WORKSPACE_TABLES

revision = "s020_workspaces"
down_revision = "s030_corpus"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    present = set(inspect(bind).get_table_names())
    for table in WORKSPACE_TABLES:
        if table.name not in present:
            table.create(bind)


def downgrade() -> None:
    raise NotImplementedError("The shared state is never migrated down.")
