"""The shared state: members and their settings, topics, the digest ledger, sent papers and
the clock's heartbeat, the workspaces Paperboy is installed in (with slack_sdk's own
installation and OAuth-state stores on the same database). Every SQL statement of ours
about them is in ``store.py``.

SQLite by default (the tables live in the corpus file, as they always have); PostgreSQL when
``DATABASE_URL`` is set, so processes on different hosts share one state. Engine level: it
knows nothing of Slack or of the digest package, which builds its objects on top.

A process says where its state is once (``configure(settings.database_url)``, done by the
commands when they open the engine); code that has an engine gets the store with
``state_for(engine.db_path)``.
"""

import logging

# Importing Alembic logs a line per plugin it sets up, and every migration run says which
# backend it found: only its warnings are news for an operator. Set before it is imported.
logging.getLogger("alembic").setLevel(logging.WARNING)

from .store import (  # noqa: E402
    Heartbeat,
    StateError,
    StateStore,
    StateUnavailable,
    configure,
    configured,
    database_url,
    describe,
    open_state,
    state_for,
    state_of,
)

__all__ = [
    "Heartbeat",
    "StateError",
    "StateStore",
    "StateUnavailable",
    "configure",
    "configured",
    "database_url",
    "describe",
    "open_state",
    "state_for",
    "state_of",
]
