"""The arXiv version of each paper in the shared corpus (``corpus_papers.arxiv_version`` and
``arxiv_updated``), as the corpus file's ``papers`` keep them (corpus migration m080): a host
that reads an older version after a newer one was shared neither keeps nor publishes it, and
a replica takes a newer version with its number (``bot/state/shared_corpus.py``).

Columns a table already has are left alone: a SQLite state file gets them from the corpus
migrations first (m090), and a database that began at s030 with today's ``corpus_papers``
has them from the start.

Revision ID: s050_corpus_arxiv_version
Revises: s040_member_keys
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import Column, inspect

from bot.state.shared_corpus import corpus_papers

revision = "s050_corpus_arxiv_version"
down_revision = "s040_member_keys"
branch_labels = None
depends_on = None

COLUMNS = ("arxiv_version", "arxiv_updated")


def upgrade() -> None:
    bind = op.get_bind()
    inspector = inspect(bind)
    if corpus_papers.name not in set(inspector.get_table_names()):
        return  # s030 makes it, with these columns
    present = {c["name"] for c in inspector.get_columns(corpus_papers.name)}
    for name in COLUMNS:
        if name not in present:
            op.add_column(corpus_papers.name, Column(name, corpus_papers.c[name].type))


def downgrade() -> None:
    raise NotImplementedError("The shared state is never migrated down.")
