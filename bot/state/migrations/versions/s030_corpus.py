"""The shared corpus (issue 10): every paper, with a change sequence, so processes on hosts
that share no disk keep their local corpus files in step (``bot/state/shared_corpus.py``).

Created on both backends; with the state in the corpus file itself (no ``DATABASE_URL``) it
stays empty, since that file is the corpus.

Revision ID: s030_corpus
Revises: s010_taste
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import inspect

from bot.state.shared_corpus import corpus_papers

revision = "s030_corpus"
down_revision = "s010_taste"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if corpus_papers.name not in set(inspect(bind).get_table_names()):
        corpus_papers.create(bind)


def downgrade() -> None:
    raise NotImplementedError("The shared state is never migrated down.")
