"""Alembic's entry point: runs on the connection ``bot.state.store`` hands it (no ini file)."""

from __future__ import annotations

from alembic import context

from bot.state.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
