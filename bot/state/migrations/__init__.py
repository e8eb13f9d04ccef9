"""Alembic migrations of the shared state, run by ``StateStore`` on both backends."""
