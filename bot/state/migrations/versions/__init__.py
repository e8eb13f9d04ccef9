"""One module per migration (Alembic revisions s001, s002, ...)."""
