"""``StateStore``: every read and write of the shared state, for SQLite and PostgreSQL alike.

One code path (SQLAlchemy Core) serves both; what differs between them stays in here:

* **Writes that read first** (claim a digest, add a topic) run in ``member_transaction``: on
  SQLite a ``BEGIN IMMEDIATE`` transaction (one writer at a time, queued on the busy timeout);
  on PostgreSQL a transaction holding the member's advisory lock
  (``pg_advisory_xact_lock``), so processes on different hosts decide one member's digest
  one after the other while other members go on in parallel. Inserts that may collide are
  ``INSERT ... ON CONFLICT DO NOTHING`` on both.
* **Errors**: SQLite's are raised as the ``sqlite3`` errors they are (the callers already
  tell a read-only or full database apart); PostgreSQL going away (restart, network) is
  ``StateUnavailable``, one sentence, and the pool's pre-ping reconnects on the next call.
* **Connections** are held only for the statements themselves, never while Slack is asked.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import click
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import (
    Connection,
    Text,
    any_,
    bindparam,
    create_engine,
    event,
    func,
    inspect,
    literal,
    make_url,
    select,
    text,
    tuple_,
    union,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Engine
from sqlalchemy.pool import NullPool
from sqlite_utils import Database

from bot.engine.corpus import DatabaseError, db_path, is_writable, open_database

from .tables import (
    ALL,
    FEEDBACK_TABLES,
    MEMBER_TABLES,
    TASTE_TABLES,
    WORKSPACE_TABLES,
    clock_heartbeat,
    digests,
    feedback,
    member_taste,
    members,
    saves,
    sent_papers,
    topics,
    workspaces,
)

#: A member: ``(team_id, user_id)``; ``""`` is the team of a deployment that never learned it.
MemberKey = tuple[str, str]


class ByMember(dict):
    """A dict by ``(team_id, user_id)`` in which a bare user id also finds its member when
    that id is a member of one workspace only (for the CLI and scripts that name a user)."""

    def __missing__(self, key: Any) -> Any:
        if isinstance(key, str):
            found = [k for k in self if isinstance(k, tuple) and k[1] == key]
            if len(found) == 1:
                return self[found[0]]
        raise KeyError(key)

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


log = logging.getLogger(__name__)

#: How long a write waits for another writer on SQLite (a slash command's reply can wait
#: that long; the transactions themselves take milliseconds).
SQLITE_WAIT_SECONDS = 60
#: PostgreSQL: the longest one statement may run, and how long to wait for a connection.
STATEMENT_TIMEOUT_MS = 15_000
CONNECT_TIMEOUT_SECONDS = 5
#: Ids per ``IN (...)`` list: below SQLite's variable limit.
BATCH = 5000
MEMBER_COLUMNS = frozenset(c.name for c in members.columns) - {"user_id", "team_id"}


class StateError(DatabaseError):
    """The shared state cannot be used as asked; the message is one sentence."""


class StateUnavailable(StateError, click.ClickException):
    """The state database does not answer (PostgreSQL down, restarting, unreachable).

    Also a ``ClickException`` so a command prints it as ``Error: ...`` and exits 1.
    """

    def __init__(self, message: str) -> None:
        click.ClickException.__init__(self, message)


def database_url(target: str | Path) -> URL:
    """The SQLAlchemy URL for a ``DATABASE_URL`` or a SQLite path.

    ``postgresql://`` and Heroku's older ``postgres://`` both mean psycopg 3.
    """
    if isinstance(target, Path) or "://" not in str(target):
        return URL.create("sqlite", database=str(Path(target).absolute()))
    raw = str(target)
    if raw.startswith("postgres://"):
        raw = "postgresql://" + raw[len("postgres://") :]
    url = make_url(raw)
    if url.host and "@" in url.host:  # (the URL not shown: part of a password is in it)
        raise StateError(UNENCODED_AT)
    if url.drivername in ("postgresql", "postgresql+psycopg"):
        return url.set(drivername="postgresql+psycopg")
    if url.get_backend_name() == "sqlite" and url.database:
        return url
    raise StateError(
        f"DATABASE_URL must be a postgresql:// URL (or unset, to keep the state in the SQLite "
        f"database), not {url.render_as_string(hide_password=True)!r}."
    )


#: An @ left in a URL's password ends it there: the rest is read as the host.
UNENCODED_AT = "The database URL has an @ in its password: write it %40 there."


def describe(url: URL) -> str:
    """The database named for an operator, password hidden."""
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    return url.render_as_string(hide_password=True).replace("+psycopg", "")


#: PostgreSQL's answers at connection that no retry mends: the URL names a database, user or
#: password the server does not accept (psycopg gives no SQLSTATE for them, only the text).
REFUSALS = (
    "does not exist",
    "authentication failed",
    "no password supplied",
    "pg_hba.conf",
    "permission denied for database",
)


@dataclass
class Heartbeat:
    last_tick: str
    tick_seconds: int
    worker: str


def _sqlite_creator(path: str, read_only: bool) -> Callable[[], sqlite3.Connection]:
    """Connections to the corpus file; read-only ones never write (as ``corpus.connect``),
    and once the file exists, none creates it again: a file moved away or on a disk since
    unmounted is refused (``mode=rw``), not recreated empty under the members' settings."""
    existed = Path(path).exists()

    def connect() -> sqlite3.Connection:
        if not read_only:
            target, uri = (
                (Path(path).absolute().as_uri() + "?mode=rw", True) if existed else (path, False)
            )
            return sqlite3.connect(
                target,
                uri=uri,
                timeout=SQLITE_WAIT_SECONDS,
                check_same_thread=False,
                isolation_level=None,
            )
        uri = Path(path).absolute().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            conn.execute("select count(*) from sqlite_master").fetchone()
        except sqlite3.OperationalError:
            if Path(f"{path}-wal").exists():
                raise
            conn = sqlite3.connect(
                uri + "&immutable=1", uri=True, check_same_thread=False, isolation_level=None
            )
        conn.execute(f"PRAGMA busy_timeout = {SQLITE_WAIT_SECONDS * 1000}")
        _member_key_views(conn)
        return conn

    return connect


def _member_key_views(conn: sqlite3.Connection) -> None:
    """A read-only file from before s040_member_keys (which it cannot be migrated to): a
    TEMP view of each member table with its ``team_id`` (the member's, else the row's own,
    else ``""``) under the table's own name, which SQLite reads before the file's table, so
    every query of this version reads the file as it is. Nothing is written to the file."""

    def columns(name: str) -> list[str]:
        return [row[1] for row in conn.execute(f"PRAGMA main.table_info({name})")]

    topic_columns = columns("topics")
    if not topic_columns or "team_id" in topic_columns:
        return
    member_team = "(select m.team_id from main.members m where m.user_id = t.user_id)"
    for table in MEMBER_TABLES:
        own = columns(table.name)
        if not own:
            continue
        if table is members:
            team = "coalesce(t.team_id, '')"
        elif "team_id" in own:
            team = f"coalesce(nullif({member_team}, ''), t.team_id, '')"
        else:
            team = f"coalesce({member_team}, '')"
        listed = ", ".join(f"t.{c}" for c in own if c != "team_id")
        conn.execute(
            f"CREATE TEMP VIEW {table.name} AS SELECT {listed}, {team} AS team_id "
            f"FROM main.{table.name} t"
        )


#: The latest migration in ``migrations/versions`` (a test checks they agree): knowing it, a
#: process whose database is up to date never loads Alembic, which takes a third of a second.
HEAD = "s050_corpus_arxiv_version"
#: Revisions a read-only store can serve as they are: s002 only added the feedback tables, and
#: without them a member simply has no 👍/👎 or saved papers yet (``_has_feedback``); s010_taste
#: only ``member_taste``, without which every member has the default choices (``_has_taste``);
#: s030_corpus only added the shared corpus, which a SQLite state (a corpus file) leaves empty;
#: s020 the workspace tables, without which every workspace is installed (``_has_workspaces``).
#: Before s040_member_keys no table had the member key, which every query now uses: a
#: read-only file from before it is read through views that add it (``_member_key_views``).
#: s050_corpus_arxiv_version only added columns to the shared corpus (as s030_corpus, empty in
#: a SQLite state).
READABLE = frozenset(
    {"s001", "s002", "s010_taste", "s030_corpus", "s020_workspaces", "s040_member_keys", HEAD}
)


def _upgrade(connection: Connection) -> None:
    """Run Alembic's pending migrations on ``connection`` (imported here, when there are
    some: see ``HEAD``)."""
    from alembic import command

    command.upgrade(_migrations_config(connection), "head")


def _migrations_config(connection: Connection) -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option(
        "script_location", str(resources.files("bot.state").joinpath("migrations"))
    )
    config.attributes["connection"] = connection
    return config


class StateStore:
    """Members, topics, the digest ledger, sent papers and the clock's heartbeat.

    Obtain it with ``bot.state.open_state(DATABASE_URL or corpus path)`` or, beside an
    engine, ``bot.state.state_for(engine.db_path)``. Safe to share between threads.
    """

    def __init__(
        self,
        target: str | Path | URL,
        *,
        pool_size: int = 20,
        migrate: bool = True,
        read_only: bool | None = None,
    ):
        """``read_only`` (SQLite): open the file without ever writing it; by default, when
        this process may not write it (lookups still work, as with the corpus)."""
        self.url = target if isinstance(target, URL) else database_url(target)
        self.dialect = self.url.get_backend_name()
        self.read_only = False
        if self.dialect == "sqlite":
            path = str(self.url.database)
            if read_only is None:
                read_only = Path(path).exists() and not is_writable(path)
            self.read_only = read_only
            # A connection per use: opening a SQLite file costs microseconds, and no file
            # descriptors stay open between calls (the corpus keeps its own connections).
            self.engine: Engine = create_engine(
                "sqlite://", creator=_sqlite_creator(path, self.read_only), poolclass=NullPool
            )
            event.listen(self.engine, "begin", _sqlite_begin)
        else:
            self.engine = create_engine(
                self.url,
                pool_size=pool_size,
                max_overflow=pool_size // 2,
                pool_timeout=CONNECT_TIMEOUT_SECONDS * 2,
                pool_pre_ping=True,  # a connection the server dropped (restart) is replaced
                pool_recycle=1800,
                connect_args={
                    "connect_timeout": CONNECT_TIMEOUT_SECONDS,
                    "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
                    "application_name": "paperboy",
                },
            )
        self._writer = self.engine.execution_options(immediate=True)
        self._feedback_present: bool | None = None  # see _has_feedback
        self._taste_present: bool | None = None  # see _has_taste
        self._workspaces_present: bool | None = None  # see _has_workspaces
        if migrate:
            self.migrate()

    def __repr__(self) -> str:
        return f"StateStore({describe(self.url)!r})"

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    def close(self) -> None:
        self.engine.dispose()

    # -- connections and errors ------------------------------------------------------------

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sa_exc.DBAPIError as error:
            if self.dialect == "sqlite" and isinstance(error.orig, sqlite3.Error):
                raise error.orig from None
            if error.connection_invalidated or isinstance(
                error, sa_exc.OperationalError | sa_exc.InterfaceError
            ):
                raise self._unavailable(error) from None
            raise
        except sa_exc.TimeoutError:
            raise StateUnavailable(
                f"Every connection to the database {describe(self.url)} is busy; try again in "
                "a moment."
            ) from None

    def _unavailable(self, error: Exception) -> StateUnavailable:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        if any(refusal in reason for refusal in REFUSALS):
            return StateUnavailable(
                f"The database {describe(self.url)} refused the connection ({reason}): check "
                "the database name, user and password in DATABASE_URL."
            )
        return StateUnavailable(
            f"The database {describe(self.url)} is not answering ({reason}); try again in a moment."
        )

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reads, returned to the pool at once."""
        with self._translated(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """One write transaction (SQLite: the write lock taken at its start)."""
        with self._translated(), self._writer.begin() as conn:
            yield conn

    @contextmanager
    def member_transaction(self, user_id: str, team_id: str = "") -> Iterator[Connection]:
        """One transaction in which nobody else decides for this member: a read-then-write
        (claim a digest, count then add a topic) cannot race another process, on any host."""
        with self.write() as conn:
            if self.is_postgres:
                key = _member_key(user_id, team_id)
                conn.execute(text("select pg_advisory_xact_lock(:k)"), {"k": key})
            yield conn

    @contextmanager
    def members_transaction(self, keys: Iterable[MemberKey]) -> Iterator[Connection]:
        """``member_transaction`` for many members (``(team_id, user_id)``) at once (the
        digest batch claims a hundred in one transaction). Their advisory locks are taken in
        key order in one statement, so two batches, or a batch and one member's request,
        never deadlock."""
        with self.write() as conn:
            if self.is_postgres:
                locks = sorted({_member_key(u, t) for t, u in keys})
                conn.execute(
                    text(
                        "select count(pg_advisory_xact_lock(k)) from "
                        "(select k from unnest(cast(:keys as bigint[])) as k order by k) as ordered"
                    ),
                    {"keys": locks},
                )
            yield conn

    def _insert(self, table: Any) -> Any:
        """``INSERT`` in this dialect, so ``on_conflict_do_nothing`` is available."""
        module = pg_dialect if self.is_postgres else sqlite_dialect
        return module.insert(table)

    def check(self) -> None:
        """Raise ``StateUnavailable`` (or sqlite3's error) unless the database answers now."""
        with self.read() as conn:
            conn.execute(select(literal(1))).scalar()

    # -- schema ----------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the state tables to the latest revision (Alembic; nothing is written when
        they are there already).

        On SQLite the corpus's own migrations create the tables first, so the file is a
        complete Paperboy database, and Alembic only has work once a revision after ``s001``
        exists. On PostgreSQL a session lock makes processes starting together migrate one
        after the other.
        """
        if self.read_only:
            self._refuse_if_behind()
            return
        if self.dialect == "sqlite":
            open_database(Path(str(self.url.database))).close()
        if self._is_current():
            return
        with self._translated(), self._writer.connect() as conn:
            if self.is_postgres:
                conn.execute(text("select pg_advisory_lock(7357001)"))
                conn.commit()
            try:
                _upgrade(conn)
                conn.commit()
            finally:
                if self.is_postgres:
                    conn.execute(text("select pg_advisory_unlock(7357001)"))
                    conn.commit()
        if self.dialect == "sqlite":
            self._checkpoint()

    def _checkpoint(self) -> None:
        """Move a migration's writes from the WAL into the file itself, so the file on disk
        is the whole database (for a copy of it, or a health check reading it afresh).
        Best effort: a busy database keeps them in the WAL, which is as safe."""
        with (
            contextlib.suppress(sqlite3.Error),
            contextlib.closing(_sqlite_creator(str(self.url.database), False)()) as raw,
        ):
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _is_current(self) -> bool:
        return self.revision() == HEAD

    def _refuse_if_behind(self) -> None:
        if self.revision() not in READABLE:
            raise StateError(
                f"The database at {describe(self.url)} needs upgrading to this version of "
                "Paperboy, which a read-only database cannot be: run any command that writes "
                "(such as `paperboy serve`) once as a user who may write it."
            )

    def revision(self) -> str | None:
        """The state's schema revision; a SQLite file whose tables the corpus migrations made
        (every file so far) is at the last revision whose tables it has, in order
        (``_REVISION_TABLES``): corpus migrations m029, m070 and m050 make the tables of s002,
        s010_taste and s030_corpus."""
        with self.read() as conn:
            present = set(inspect(conn).get_table_names())
            current = None
            if "alembic_version" in present:
                current = conn.execute(text("select version_num from alembic_version")).scalar()
            if current is None and {t.name for t in ALL} <= present:
                return _inferred_revision(present)
            return current

    # -- members and their settings --------------------------------------------------------

    def members(self, keys: Iterable[MemberKey] | None = None) -> list[dict[str, Any]]:
        """Member rows (all, or those asked for by ``(team_id, user_id)``) in that order, each
        with ``topic_count``.

        All members means those of the workspaces Paperboy is installed in: members of a
        workspace it was uninstalled from are left out (and so get no digest) until it is
        installed there again; asked for by id, they are found."""
        count = (
            select(func.count())
            .where(topics.c.user_id == members.c.user_id, topics.c.team_id == members.c.team_id)
            .scalar_subquery()
            .label("topic_count")
        )
        query = select(members, count).order_by(members.c.team_id, members.c.user_id)
        key = tuple_(members.c.team_id, members.c.user_id)
        with self.read() as conn:
            if keys is None:
                return [dict(r._mapping) for r in conn.execute(self._installed_only(query))]
            rows = []
            for batch in _batches(self.resolve_keys(keys)):
                rows += conn.execute(query.where(key.in_(batch))).mappings().all()
        return sorted((dict(r) for r in rows), key=lambda r: (r["team_id"], r["user_id"]))

    def team_for(self, user_id: str, team_id: str | None) -> str:
        """``team_id`` as given (``""`` too: the member of no known workspace); None means
        the user's only workspace (``""`` when they are in none or in several). Slack's
        requests and the digest always name the team; None is for the CLI and scripts."""
        if team_id is not None:
            return team_id
        teams = self.teams_of(user_id)
        return teams[0] if len(teams) == 1 else ""

    def resolve_keys(self, keys: Iterable[MemberKey | str]) -> list[MemberKey]:
        """Members as ``(team_id, user_id)``; a bare user id is the member in their only
        workspace (see ``team_for``)."""
        return [k if isinstance(k, tuple) else (self.team_for(k, None), k) for k in keys]

    def teams_of(self, user_id: str) -> list[str]:
        """The workspaces in which ``user_id`` is a member or clicked on papers (for a
        command that names no team)."""
        tables = (members, saves, feedback) if self._has_feedback() else (members,)
        query = union(*(select(t.c.team_id).where(t.c.user_id == user_id) for t in tables))
        with self.read() as conn:
            return sorted(set(conn.execute(query).scalars()))

    def add_member(self, user_id: str, team_id: str | None, defaults: dict[str, Any]) -> None:
        """Create the member unless they exist.

        A member a single-workspace deployment knew without their team (``""``: made by the
        CLI, or before Slack's team was recorded) becomes this team's member with everything
        they have, the first time their workspace is known, while it has no member of that id.
        """
        team_id = self.team_for(user_id, team_id)
        with self.write() as conn:
            if team_id:
                self._adopt(conn, team_id, user_id)
            conn.execute(
                self._insert(members)
                .values(user_id=user_id, team_id=team_id, **defaults)
                .on_conflict_do_nothing()
            )

    def adopt(self, user_id: str, team_id: str) -> bool:
        """Make the member known without a team (``""``) this workspace's member, with all
        they have, unless the workspace has a member of that id already (see ``add_member``).
        Reads first, so that the usual case (nothing to adopt) takes no write lock."""
        if not team_id:
            return False
        with self.read() as conn:
            if not self._adoptable(conn, team_id, user_id):
                return False
        with self.write() as conn:
            return self._adopt(conn, team_id, user_id)

    def _adopt(self, conn: Connection, team_id: str, user_id: str) -> bool:
        if not self._adoptable(conn, team_id, user_id):
            return False
        for table in MEMBER_TABLES:
            conn.execute(
                table.update()
                .where(table.c.team_id == "", table.c.user_id == user_id)
                .values(team_id=team_id)
            )
        return True

    def _adoptable(self, conn: Connection, team_id: str, user_id: str) -> bool:
        def exists(team: str) -> bool:
            mine = (members.c.team_id == team) & (members.c.user_id == user_id)
            return conn.execute(select(literal(1)).where(mine)).first() is not None

        return not exists(team_id) and exists("")

    def update_member(self, user_id: str, team_id: str | None = None, **values: Any) -> None:
        unknown = set(values) - MEMBER_COLUMNS
        if unknown:
            raise ValueError(f"not a member setting: {', '.join(sorted(unknown))}")
        if not values:
            return
        team_id = self.team_for(user_id, team_id)
        with self.write() as conn:
            conn.execute(members.update().where(_mine(members, team_id, user_id)).values(**values))

    def digests_on(self) -> bool:
        """Whether any member's digest is on (on by default once they have a topic)."""
        has_topic = (
            select(topics.c.id)
            .where(topics.c.user_id == members.c.user_id, topics.c.team_id == members.c.team_id)
            .exists()
        )
        query = select(literal(1)).where(func.coalesce(members.c.digest_enabled, 1) == 1, has_topic)
        query = self._installed_only(query)
        with self.read() as conn:
            return conn.execute(query.limit(1)).first() is not None

    # -- topics ----------------------------------------------------------------------------

    def topics(self, keys: Iterable[MemberKey] | None = None) -> list[dict[str, Any]]:
        """Topic rows by member (all, or those of these ``(team_id, user_id)``), each member's
        in the order they subscribed."""
        query = select(topics).order_by(topics.c.team_id, topics.c.user_id, topics.c.id)
        key = tuple_(topics.c.team_id, topics.c.user_id)
        with self.read() as conn:
            if keys is None:
                return [dict(r) for r in conn.execute(query).mappings()]
            rows = []
            for batch in _batches(self.resolve_keys(keys)):
                rows += conn.execute(query.where(key.in_(batch))).mappings().all()
        return sorted((dict(r) for r in rows), key=lambda r: (r["team_id"], r["user_id"], r["id"]))

    def add_topic(
        self,
        user_id: str,
        query: str,
        normalized: str,
        created_at: str,
        most: int,
        team_id: str | None = None,
    ) -> str:
        """Add the topic: ``"added"``, ``"exists"`` (same normalized topic) or ``"full"``
        (the member already has ``most``)."""
        team_id = self.team_for(user_id, team_id)
        with self.member_transaction(user_id, team_id) as conn:
            count = conn.execute(
                select(func.count()).where(_mine(topics, team_id, user_id))
            ).scalar_one()
            if count >= most:
                return "full"
            added = conn.execute(
                self._insert(topics)
                .values(
                    team_id=team_id,
                    user_id=user_id,
                    query=query,
                    normalized=normalized,
                    created_at=created_at,
                )
                .on_conflict_do_nothing()
                .returning(topics.c.id)
            ).first()
            return "added" if added is not None else "exists"

    def remove_topic(self, topic_id: int) -> None:
        with self.write() as conn:
            conn.execute(topics.delete().where(topics.c.id == topic_id))

    # -- the digest ledger -----------------------------------------------------------------

    def digest(self, digest_id: str, conn: Connection | None = None) -> dict[str, Any] | None:
        """The digest's row, or None."""
        query = select(digests).where(digests.c.id == digest_id)
        if conn is not None:
            row = conn.execute(query).mappings().first()
            return dict(row) if row else None
        with self.read() as own:
            return self.digest(digest_id, own)

    def scheduled_digest(
        self, conn: Connection, team_id: str, user_id: str, local_date: str
    ) -> dict[str, Any] | None:
        """The member's digest of that local date (or on-demand slot), whatever its id (ids
        from before s040 have no team: ``U1:2025-03-04``), or the one of this user known
        without a workspace (``""``, not yet adopted: ``add_member``), which was theirs: a day
        has one digest either way."""
        query = (
            select(digests)
            .where(
                digests.c.user_id == user_id,
                digests.c.team_id.in_(sorted({team_id, ""})),
                digests.c.local_date == local_date,
            )
            .order_by(digests.c.team_id.desc())  # the workspace's own row first
        )
        row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def latest_digest(self, user_id: str, team_id: str | None = None) -> dict[str, Any] | None:
        """The member's most recent digest row (any status), or None."""
        team_id = self.team_for(user_id, team_id)
        query = (
            select(digests)
            .where(_mine(digests, team_id, user_id))
            .order_by(func.coalesce(digests.c.finished_at, digests.c.claimed_at).desc())
            .order_by(digests.c.id.desc())
            .limit(1)
        )
        with self.read() as conn:
            row = conn.execute(query).mappings().first()
        return dict(row) if row else None

    def existing_digests(self, digest_ids: Iterable[str]) -> set[str]:
        """Which of these digests already have a row, whatever its status."""
        found: set[str] = set()
        with self.read() as conn:
            for batch in _batches(digest_ids):
                found.update(
                    conn.execute(select(digests.c.id).where(digests.c.id.in_(batch))).scalars()
                )
        return found

    def digests_among(self, conn: Connection, digest_ids: Iterable[str]) -> dict[str, dict]:
        """The rows of those of these digests that exist, by id."""
        out: dict[str, dict] = {}
        for batch in self._batches(digest_ids):
            query = select(digests).where(self._among(digests.c.id, batch))
            for row in conn.execute(query).mappings():
                out[row["id"]] = dict(row)
        return out

    def _batches(self, values: Iterable[Any]) -> Iterator[list[Any]]:
        """``values`` in lists for ``_among``: all at once in PostgreSQL (one array)."""
        return iter([list(values)]) if self.is_postgres else _batches(values)

    def _among(self, column: Any, values: list[str]) -> Any:
        """``column IN values``; in PostgreSQL ``column = ANY(array)``: one parameter
        whatever their number, so the statement stays short and psycopg parses it once (see
        ``_insert_many``)."""
        if self.is_postgres:
            return column == any_(_text_array(values))
        return column.in_(values)

    def _members_among(self, table: Any, keys: list[MemberKey]) -> Any:
        """``(team_id, user_id) IN keys``; in PostgreSQL from two arrays (``unnest``), for
        the same reason as ``_among``."""
        key = tuple_(table.c.team_id, table.c.user_id)
        if not self.is_postgres:
            return key.in_(keys)
        pairs = (
            func.unnest(_text_array([t for t, _ in keys]), _text_array([u for _, u in keys]))
            .table_valued("team_id", "user_id")
            .render_derived()
        )
        return key.in_(select(pairs.c.team_id, pairs.c.user_id))

    def in_flight_among(
        self, conn: Connection, keys: Iterable[MemberKey], stale_before: str
    ) -> set[MemberKey]:
        """Which of these members (``(team_id, user_id)``) have a digest claimed by a live
        worker."""
        found: set[MemberKey] = set()
        for batch in self._batches(set(keys)):
            query = select(digests.c.team_id, digests.c.user_id).where(
                self._members_among(digests, batch),
                digests.c.status == "claimed",
                digests.c.claimed_at >= stale_before,
            )
            found.update((t, u) for t, u in conn.execute(query))
        return found

    def sent_pairs(
        self, conn: Connection, keys: Iterable[MemberKey], paper_ids: Iterable[str]
    ) -> set[tuple[str, str, str]]:
        """Which (team, user, paper) among these members and papers were sent."""
        users, papers = list(set(keys)), list(set(paper_ids))
        found: set[tuple[str, str, str]] = set()
        for user_batch in self._batches(users):
            for paper_batch in self._batches(papers):
                query = select(
                    sent_papers.c.team_id, sent_papers.c.user_id, sent_papers.c.paper_id
                ).where(
                    self._members_among(sent_papers, user_batch),
                    self._among(sent_papers.c.paper_id, paper_batch),
                )
                found.update((t, u, p) for t, u, p in conn.execute(query))
        return found

    def insert_digests(self, conn: Connection, rows: list[dict[str, Any]]) -> set[str]:
        """Many digests' rows in one statement; the ids inserted (a row whose id, or member
        and date, exists is left out)."""
        return set(self._insert_many(conn, digests, rows, digests.c.id))

    def _insert_many(
        self, conn: Connection, table: Any, rows: list[dict[str, Any]], returning: Any = None
    ) -> list[Any]:
        """Rows (dicts with the same keys, all text) inserted, those that conflict left out;
        ``returning``'s values for the inserted ones.

        PostgreSQL gets one array per column (``unnest``): a short statement whatever the
        number of rows, where a hundred rows of VALUES (or a thousand from executemany) made
        a statement of thousands of parameters that psycopg parses afresh each time (most of
        the batch's client time in its claims and records). SQLite: executemany (with
        ``returning``, SQLAlchemy's insertmanyvalues)."""
        if not rows:
            return []
        if not self.is_postgres:
            statement = self._insert(table).on_conflict_do_nothing()
            if returning is None:
                conn.execute(statement, rows)
                return []
            # executemany with RETURNING: SQLAlchemy's "insertmanyvalues" batches the rows
            # into a statement compiled once (cached), where ``values(batch)`` compiled a
            # 100-row VALUES of 1,100 parameters afresh each claim (0.3 s of a batch's CPU).
            return list(conn.execute(statement.returning(returning), rows).scalars())
        names = list(rows[0])
        arrays = [_text_array([r[name] for r in rows]) for name in names]
        source = func.unnest(*arrays).table_valued(*names).render_derived()
        statement = (
            self._insert(table)
            .from_select(names, select(*(source.c[name] for name in names)))
            .on_conflict_do_nothing()
        )
        if returning is None:
            conn.execute(statement)
            return []
        return list(conn.execute(statement.returning(returning)).scalars())

    def in_flight(
        self, conn: Connection, user_id: str, stale_before: str, team_id: str = ""
    ) -> bool:
        """Whether the member has a digest claimed by a live worker."""
        query = select(literal(1)).where(
            _mine(digests, team_id, user_id),
            digests.c.status == "claimed",
            digests.c.claimed_at >= stale_before,
        )
        return conn.execute(query.limit(1)).first() is not None

    def sent_among(
        self, conn: Connection, user_id: str, paper_ids: list[str], team_id: str = ""
    ) -> set[str]:
        """Which of these papers the member has already been sent."""
        found: set[str] = set()
        for batch in _batches(paper_ids):
            found.update(
                conn.execute(
                    select(sent_papers.c.paper_id).where(
                        _mine(sent_papers, team_id, user_id), sent_papers.c.paper_id.in_(batch)
                    )
                ).scalars()
            )
        return found

    def count_digests_like(
        self, conn: Connection, user_id: str, local_date_prefix: str, team_id: str = ""
    ) -> int:
        """How many of the member's digests have a ``local_date`` starting with the prefix."""
        return conn.execute(
            select(func.count()).where(
                _mine(digests, team_id, user_id),
                digests.c.local_date.like(local_date_prefix.replace("%", r"\%") + "%", escape="\\"),
            )
        ).scalar_one()

    def insert_digest(self, conn: Connection, **row: Any) -> bool:
        """The digest's row; False when one with its id (or member and date) exists."""
        done = conn.execute(
            self._insert(digests).values(**row).on_conflict_do_nothing().returning(digests.c.id)
        )
        return done.first() is not None

    def retake(
        self, conn: Connection, digest_id: str, worker: str, now: str, stale_before: str
    ) -> bool:
        """Take over a claim whose holder stopped renewing it; False when it is not stale."""
        done = conn.execute(
            digests.update()
            .where(
                digests.c.id == digest_id,
                digests.c.status == "claimed",
                digests.c.claimed_at < stale_before,
            )
            .values(claimed_by=worker, claimed_at=now)
        )
        return done.rowcount == 1

    def stale_claims(
        self, stale_before: str, user_id: str | None = None, team_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Claims not renewed since ``stale_before``, oldest first (only the member's, when
        ``user_id`` is given)."""
        if user_id is not None:
            team_id = self.team_for(user_id, team_id)
        query = select(
            digests.c.id, digests.c.team_id, digests.c.user_id, digests.c.local_date
        ).where(digests.c.status == "claimed", digests.c.claimed_at < stale_before)
        if user_id is not None:
            query = query.where(_mine(digests, team_id, user_id))
        elif self._has_workspaces():  # an uninstalled workspace's claims wait for its return
            query = query.where(digests.c.team_id.not_in(self._uninstalled()))
        with self.read() as conn:
            return [dict(r) for r in conn.execute(query.order_by(digests.c.claimed_at)).mappings()]

    def renew(self, digest_id: str, worker: str, now: str, channel: str | None) -> bool:
        """Refresh the worker's claim (and note its channel); False when it is not theirs."""
        with self.write() as conn:
            done = conn.execute(
                digests.update()
                .where(
                    digests.c.id == digest_id,
                    digests.c.status == "claimed",
                    digests.c.claimed_by == worker,
                )
                .values(claimed_at=now, channel=func.coalesce(channel, digests.c.channel))
            )
        return done.rowcount == 1

    def release(self, digest_id: str, worker: str, stale_at: str, keep_channel: bool) -> None:
        """Make the worker's claim stale at once (forgetting its channel unless kept)."""
        values: dict[str, Any] = {"claimed_at": stale_at}
        if not keep_channel:
            values["channel"] = None
        with self.write() as conn:
            conn.execute(
                digests.update()
                .where(
                    digests.c.id == digest_id,
                    digests.c.status == "claimed",
                    digests.c.claimed_by == worker,
                )
                .values(**values)
            )

    def record_sent(
        self,
        digest_id: str,
        user_id: str,
        paper_ids: list[str],
        channel: str,
        ts: str,
        now: str,
        team_id: str | None = None,
    ) -> None:
        """The digest is sent, and its papers with it, in one transaction."""
        team_id = self.team_for(user_id, team_id)
        with self.write() as conn:
            conn.execute(
                digests.update()
                .where(digests.c.id == digest_id, digests.c.status == "claimed")
                .values(status="sent", channel=channel, ts=ts, finished_at=now, error=None)
            )
            if paper_ids:
                conn.execute(
                    self._insert(sent_papers).on_conflict_do_nothing(),
                    [
                        {
                            "team_id": team_id,
                            "user_id": user_id,
                            "paper_id": p,
                            "digest_id": digest_id,
                            "sent_at": now,
                        }
                        for p in paper_ids
                    ],
                )

    def record_sent_many(self, records: list[dict[str, Any]], now: str) -> None:
        """``record_sent`` for many digests in one transaction; each record has
        ``digest_id``, ``team_id``, ``user_id``, ``paper_ids``, ``channel`` and ``ts``."""
        if not records:
            return
        with self.write() as conn:
            conn.execute(
                digests.update()
                .where(digests.c.id == bindparam("b_id"), digests.c.status == "claimed")
                .values(
                    status="sent",
                    channel=bindparam("b_channel"),
                    ts=bindparam("b_ts"),
                    finished_at=now,
                    error=None,
                ),
                [
                    {"b_id": r["digest_id"], "b_channel": r["channel"], "b_ts": r["ts"]}
                    for r in records
                ],
            )
            papers = [
                {
                    "team_id": r.get("team_id") or "",
                    "user_id": r["user_id"],
                    "paper_id": p,
                    "digest_id": r["digest_id"],
                    "sent_at": now,
                }
                for r in records
                for p in r["paper_ids"]
            ]
            self._insert_many(conn, sent_papers, papers)

    def record_failed(self, digest_id: str, error: str, now: str) -> None:
        with self.write() as conn:
            conn.execute(
                digests.update()
                .where(digests.c.id == digest_id, digests.c.status == "claimed")
                .values(status="failed", error=error, finished_at=now)
            )

    # -- what digests read -----------------------------------------------------------------

    def sent_papers(self, keys: Iterable[MemberKey] | None = None) -> dict[MemberKey, list[str]]:
        """The ids of every paper sent to each member (all members, or those asked for), by
        ``(team_id, user_id)``."""
        query = select(sent_papers.c.team_id, sent_papers.c.user_id, sent_papers.c.paper_id)
        key = tuple_(sent_papers.c.team_id, sent_papers.c.user_id)
        out: dict[MemberKey, list[str]] = ByMember()
        with self.read() as conn:
            batches = [None] if keys is None else list(_batches(self.resolve_keys(keys)))
            for batch in batches:
                where = query if batch is None else query.where(key.in_(batch))
                for team, user, paper in conn.execute(where):
                    out.setdefault((team, user), []).append(paper)
        return out

    def last_digests(self, keys: Iterable[MemberKey] | None = None) -> dict[MemberKey, str]:
        """When each member's last sent digest was claimed, by ``(team_id, user_id)``."""
        query = (
            select(digests.c.team_id, digests.c.user_id, func.max(digests.c.claimed_at))
            .where(digests.c.status == "sent")
            .group_by(digests.c.team_id, digests.c.user_id)
        )
        key = tuple_(digests.c.team_id, digests.c.user_id)
        out: dict[MemberKey, str] = ByMember()
        with self.read() as conn:
            batches = [None] if keys is None else list(_batches(self.resolve_keys(keys)))
            for batch in batches:
                where = query if batch is None else query.where(key.in_(batch))
                out.update({(team, u): t for team, u, t in conn.execute(where)})
        return out

    # -- the clock's heartbeat -------------------------------------------------------------

    def beat(self, name: str, last_tick: str, tick_seconds: int, worker: str) -> None:
        row = {"last_tick": last_tick, "tick_seconds": int(tick_seconds), "worker": worker}
        with self.write() as conn:
            conn.execute(
                self._insert(clock_heartbeat)
                .values(name=name, **row)
                .on_conflict_do_update(index_elements=["name"], set_=row)
            )

    def heartbeat(self, name: str) -> Heartbeat | None:
        with self.read() as conn:
            row = (
                conn.execute(select(clock_heartbeat).where(clock_heartbeat.c.name == name))
                .mappings()
                .first()
            )
        if row is None:
            return None
        return Heartbeat(row["last_tick"], row["tick_seconds"], row["worker"] or "")

    # -- copying a deployment --------------------------------------------------------------

    def copy_to(self, target: StateStore) -> dict[str, int]:
        """Copy every state row into ``target`` (``paperboy migrate-state``), idempotently.

        Rows are matched by their keys: a second run writes the same rows again, and rows
        the target has that this store lacks are left alone. Counts rows copied per table.
        """
        counts: dict[str, int] = {}
        with self.read() as source, target.write() as conn:
            # OAuth states last ten minutes: an install under way finishes where it began.
            installs = [t for t in WORKSPACE_TABLES if t.name != "slack_oauth_states"]
            for table in (*ALL, *FEEDBACK_TABLES, *TASTE_TABLES, *installs):
                rows = [dict(r) for r in source.execute(select(table)).mappings()]
                counts[table.name] = len(rows)
                if not rows:
                    continue
                keys = [c.name for c in table.primary_key.columns]
                statement = target._insert(table)
                others = {
                    c.name: statement.excluded[c.name] for c in table.columns if c.name not in keys
                }
                if table is topics:
                    # The topic's id may differ between databases; (member, topic) decides.
                    statement = statement.on_conflict_do_nothing()
                else:
                    statement = statement.on_conflict_do_update(index_elements=keys, set_=others)
                for start in range(0, len(rows), 1000):
                    conn.execute(statement, rows[start : start + 1000])
            if target.is_postgres:
                for serial in ("topics", *(t.name for t in installs if "id" in t.c)):
                    conn.execute(
                        text(
                            f"select setval(pg_get_serial_sequence('{serial}', 'id'), "
                            f"coalesce((select max(id) from {serial}), 0) + 1, false)"
                        )
                    )
        return counts

    # -- feedback: 👍/👎 and the reading list (issue 11) -------------------------------------

    def _has_feedback(self) -> bool:
        """Whether the feedback tables exist: always once migrated; a read-only SQLite file
        from before s002 has none (and nothing to read in them)."""
        if not self.read_only:
            return True
        if self._feedback_present is None:
            with self.read() as conn:
                present = set(inspect(conn).get_table_names())
            self._feedback_present = {t.name for t in FEEDBACK_TABLES} <= present
        return self._feedback_present

    def set_feedback(
        self,
        user_id: str,
        paper_id: str,
        kind: str,
        now: str,
        team_id: str | None = None,
        *,
        on: bool | None = None,
    ) -> str | None:
        """Click 👍 (``like``) or 👎 (``dislike``): the member's choice afterwards. The two
        exclude each other (👎 replaces a 👍). ``on``: True gives the paper this ``kind``
        (again, if it had it), False takes it away (only if it had it); None, the same
        click again undoes it."""
        if kind not in ("like", "dislike"):
            raise ValueError(f"not a feedback kind: {kind!r}")
        team_id = self.team_for(user_id, team_id)
        mine = _mine(feedback, team_id, user_id) & (feedback.c.paper_id == paper_id)
        with self.member_transaction(user_id, team_id) as conn:
            before = conn.execute(select(feedback.c.kind).where(mine)).scalar()
            if on is False or (on is None and before == kind):
                if before == kind:
                    conn.execute(feedback.delete().where(mine))
                    return None
                return before
            if before == kind:
                return kind
            row = {"kind": kind, "created_at": now}
            conn.execute(
                self._insert(feedback)
                .values(team_id=team_id, user_id=user_id, paper_id=paper_id, **row)
                .on_conflict_do_update(index_elements=["team_id", "user_id", "paper_id"], set_=row)
            )
            return kind

    def toggle_save(
        self,
        user_id: str,
        paper_id: str,
        now: str,
        team_id: str | None = None,
        *,
        on: bool | None = None,
    ) -> bool:
        """Save the paper to the member's reading list, or remove it: whether it is saved now.
        ``on``: True saves it (a saved paper stays as it was), False removes it; None, the
        one it is not."""
        team_id = self.team_for(user_id, team_id)
        mine = _mine(saves, team_id, user_id) & (saves.c.paper_id == paper_id)
        with self.member_transaction(user_id, team_id) as conn:
            if conn.execute(select(literal(1)).where(mine)).first() is not None:
                if on is True:
                    return True
                conn.execute(saves.delete().where(mine))
                return False
            if on is False:
                return False
            conn.execute(
                self._insert(saves)
                .values(user_id=user_id, paper_id=paper_id, team_id=team_id, saved_at=now)
                .on_conflict_do_nothing()
            )
            return True

    def feedback_on(
        self, user_id: str, paper_ids: Iterable[str], team_id: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """The member's choices on these papers: ``{paper_id: {"kind": like|dislike|None,
        "saved": bool}}`` for each paper they have any choice on."""
        out: dict[str, dict[str, Any]] = {}
        if not self._has_feedback():
            return out
        team_id = self.team_for(user_id, team_id)
        with self.read() as conn:
            for batch in _batches(paper_ids):
                for paper, kind in conn.execute(
                    select(feedback.c.paper_id, feedback.c.kind).where(
                        _mine(feedback, team_id, user_id), feedback.c.paper_id.in_(batch)
                    )
                ):
                    out.setdefault(paper, {"kind": None, "saved": False})["kind"] = kind
                for paper in conn.execute(
                    select(saves.c.paper_id).where(
                        _mine(saves, team_id, user_id), saves.c.paper_id.in_(batch)
                    )
                ).scalars():
                    out.setdefault(paper, {"kind": None, "saved": False})["saved"] = True
        return out

    def feedback_of(self, user_id: str, team_id: str | None = None) -> dict[str, str]:
        """Every 👍/👎 of the member: ``{paper_id: "like" | "dislike"}`` (for the model)."""
        if not self._has_feedback():
            return {}
        team_id = self.team_for(user_id, team_id)
        query = select(feedback.c.paper_id, feedback.c.kind).where(
            _mine(feedback, team_id, user_id)
        )
        with self.read() as conn:
            return {paper: kind for paper, kind in conn.execute(query)}

    def saved_papers(
        self,
        user_id: str,
        *,
        team_id: str | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of the member's reading list, newest first (``paper_id``, ``saved_at``), and
        how many they have saved in all."""
        if not self._has_feedback():
            return [], 0
        team_id = self.team_for(user_id, team_id)
        query = (
            select(saves.c.paper_id, saves.c.saved_at)
            .where(_mine(saves, team_id, user_id))
            .order_by(saves.c.saved_at.desc(), saves.c.paper_id)
            .offset(offset)
        )
        if limit is not None:
            query = query.limit(limit)
        total = select(func.count()).where(_mine(saves, team_id, user_id))
        with self.read() as conn:
            rows = [dict(r) for r in conn.execute(query).mappings()]
            return rows, conn.execute(total).scalar_one()

    def saved_by_others(
        self, user_id: str, paper_ids: Iterable[str], team_id: str | None = None
    ) -> dict[str, int]:
        """How many other members of the member's workspace saved each of these papers
        (counts only: never who); papers nobody else there saved are left out."""
        out: dict[str, int] = {}
        if not self._has_feedback():
            return out
        team_id = self.team_for(user_id, team_id)
        with self.read() as conn:
            for batch in _batches(paper_ids):
                query = (
                    select(saves.c.paper_id, func.count())
                    .where(
                        saves.c.paper_id.in_(batch),
                        saves.c.team_id == team_id,
                        saves.c.user_id != user_id,
                    )
                    .group_by(saves.c.paper_id)
                )
                out.update({paper: count for paper, count in conn.execute(query)})
        return out

    # -- taste: what the per-member model reads, and the teammates-saved line (issue 11) ----

    def _has_taste(self) -> bool:
        """Whether ``member_taste`` exists: always once migrated (see ``_has_feedback``)."""
        if not self.read_only:
            return True
        if self._taste_present is None:
            with self.read() as conn:
                present = set(inspect(conn).get_table_names())
            self._taste_present = {t.name for t in TASTE_TABLES} <= present
        return self._taste_present

    def feedback_by_member(
        self, keys: Iterable[MemberKey] | None = None
    ) -> dict[MemberKey, list[tuple[str, str, str]]]:
        """Every 👍/👎 of these members (default: all) in one query, newest first:
        ``{(team_id, user_id): [(paper_id, kind, created_at), ...]}``; members without any are
        left out."""
        out: dict[MemberKey, list[tuple[str, str, str]]] = ByMember()
        if not self._has_feedback():
            return out
        query = select(
            feedback.c.team_id,
            feedback.c.user_id,
            feedback.c.paper_id,
            feedback.c.kind,
            feedback.c.created_at,
        ).order_by(feedback.c.created_at.desc(), feedback.c.paper_id)
        key = tuple_(feedback.c.team_id, feedback.c.user_id)
        with self.read() as conn:
            if keys is None:
                rows = list(conn.execute(query))
            else:
                rows = []
                for batch in _batches(self.resolve_keys(keys)):
                    rows += conn.execute(query.where(key.in_(batch))).all()
        for team, user, paper, kind, created in rows:
            out.setdefault((team, user), []).append((paper, kind, created or ""))
        for clicks in out.values():
            clicks.sort(key=lambda c: c[2], reverse=True)
        return out

    def savers_of(self, paper_ids: Iterable[str]) -> dict[str, list[tuple[str, str | None]]]:
        """Who saved each of these papers, ``{paper_id: [(user_id, team_id), ...]}``, for
        counting teammates: callers show counts only, never names."""
        out: dict[str, list[tuple[str, str | None]]] = {}
        if not self._has_feedback():
            return out
        with self.read() as conn:
            for batch in _batches(paper_ids):
                query = select(saves.c.paper_id, saves.c.user_id, saves.c.team_id).where(
                    saves.c.paper_id.in_(batch)
                )
                for paper, user, team in conn.execute(query):
                    out.setdefault(paper, []).append((user, team))
        return out

    def team_saves_off(self, keys: Iterable[MemberKey] | None = None) -> set[MemberKey]:
        """The members (of these, default all) who turned the teammates-saved line off, as
        ``(team_id, user_id)``."""
        if not self._has_taste():
            return set()
        query = select(member_taste.c.team_id, member_taste.c.user_id).where(
            member_taste.c.team_saves == 0
        )
        key = tuple_(member_taste.c.team_id, member_taste.c.user_id)
        with self.read() as conn:
            if keys is None:
                return {(t, u) for t, u in conn.execute(query)}
            out: set[MemberKey] = set()
            for batch in _batches(self.resolve_keys(keys)):
                out.update((t, u) for t, u in conn.execute(query.where(key.in_(batch))))
            return out

    def set_team_saves(self, user_id: str, on: bool, now: str, team_id: str | None = None) -> None:
        """Turn the member's "N teammates also saved this" line on or off."""
        row = {"team_saves": int(on), "updated_at": now}
        team_id = self.team_for(user_id, team_id)
        with self.write() as conn:
            conn.execute(
                self._insert(member_taste)
                .values(team_id=team_id, user_id=user_id, **row)
                .on_conflict_do_update(index_elements=["team_id", "user_id"], set_=row)
            )

    # -- workspaces: installs, uninstalls, and their tokens (issue 12) -----------------------

    def _has_workspaces(self) -> bool:
        """Whether the workspace tables exist: always once migrated; a read-only SQLite file
        from before s020 has none (every member's workspace then counts as installed)."""
        if not self.read_only:
            return True
        if self._workspaces_present is None:
            with self.read() as conn:
                present = set(inspect(conn).get_table_names())
            self._workspaces_present = {t.name for t in WORKSPACE_TABLES} <= present
        return self._workspaces_present

    def _uninstalled(self) -> Any:
        """The team ids of the workspaces Paperboy was uninstalled from (a subquery)."""
        return select(workspaces.c.team_id).where(workspaces.c.uninstalled_at.is_not(None))

    def _installed_only(self, query: Any) -> Any:
        """``query`` on members without those of uninstalled workspaces."""
        if not self._has_workspaces():
            return query
        return query.where(
            members.c.team_id.is_(None) | members.c.team_id.not_in(self._uninstalled())
        )

    def workspace_installed(self, team_id: str, team_name: str | None, now: str) -> None:
        """Paperboy was installed (again) in the workspace: its members' digests go on."""
        row = {"team_name": team_name, "installed_at": now, "uninstalled_at": None}
        with self.write() as conn:
            conn.execute(
                self._insert(workspaces)
                .values(team_id=team_id, **row)
                .on_conflict_do_update(index_elements=["team_id"], set_=row)
            )

    def workspace_uninstalled(self, team_id: str, now: str) -> bool:
        """Paperboy was uninstalled from the workspace (or its bot token revoked): its
        members get no digest until it is installed again. False when it already was."""
        with self.write() as conn:
            before = conn.execute(
                select(workspaces.c.uninstalled_at).where(workspaces.c.team_id == team_id)
            ).first()
            if before is not None and before[0] is not None:
                return False
            conn.execute(
                self._insert(workspaces)
                .values(team_id=team_id, uninstalled_at=now)
                .on_conflict_do_update(index_elements=["team_id"], set_={"uninstalled_at": now})
            )
            return True

    def uninstalled_workspaces(self) -> set[str]:
        """The team ids of the workspaces Paperboy was uninstalled from."""
        if not self._has_workspaces():
            return set()
        with self.read() as conn:
            return set(conn.execute(self._uninstalled()).scalars())

    def team_of(self, user_id: str | None = None, channel: str | None = None) -> str | None:
        """The workspace of a member (by user id: the first, when the id is a member of
        several), or of the conversation a member's digest goes to (their channel or their DM
        with the bot); None when unknown."""
        if user_id is not None:
            where = members.c.user_id == user_id
        elif channel is not None:
            where = (members.c.digest_channel == channel) | (members.c.dm_channel == channel)
        else:
            return None
        query = select(members.c.team_id).where(where, members.c.team_id != "")
        with self.read() as conn:
            return conn.execute(query.limit(1)).scalar()

    def installation_store(self, client_id: str) -> SQLAlchemyInstallationStore:
        """slack_sdk's installation store on this database (its tables made by s020): the
        workspaces' installations and bot tokens, for Bolt's OAuth flow and authorize."""
        # Reads (every request's authorize) take no write lock; a save is rare.
        return SQLAlchemyInstallationStore(client_id=client_id, engine=self.engine)

    def oauth_state_store(self, expiration_seconds: int) -> SQLAlchemyOAuthStateStore:
        """slack_sdk's OAuth state store on this database: each ``state`` issued by
        ``/slack/install`` is good once, for ``expiration_seconds``, in any process (on
        SQLite its read-then-delete holds the write lock from the start)."""
        return SQLAlchemyOAuthStateStore(expiration_seconds=expiration_seconds, engine=self._writer)


#: For a SQLite file Alembic has not stamped yet: each revision after s001 and the tables it
#: adds, in order. Corpus migrations may have made a later revision's table (m050 makes
#: ``corpus_papers``) before an earlier one's, so the file is at the last revision of the
#: unbroken run from the start, and Alembic adds the rest (each revision skips what exists).
_REVISION_TABLES = (
    ("s002", {t.name for t in FEEDBACK_TABLES}),
    ("s010_taste", {t.name for t in TASTE_TABLES}),
    ("s030_corpus", {"corpus_papers"}),  # bot/state/shared_corpus.py
    ("s020_workspaces", {t.name for t in WORKSPACE_TABLES}),
)


def _inferred_revision(present: set[str]) -> str:
    revision = "s001"
    for name, tables in _REVISION_TABLES:
        if not tables <= present:
            break
        revision = name
    return revision


def _sqlite_begin(conn: Connection) -> None:
    """SQLite transactions begun by us: ``IMMEDIATE`` for writes (the write lock is taken
    before the first read, so a writer waits in line instead of failing "database is locked")."""
    conn.exec_driver_sql(
        "BEGIN IMMEDIATE" if conn.get_execution_options().get("immediate") else "BEGIN"
    )


def _mine(table: Any, team_id: str, user_id: str) -> Any:
    """The rows of one member: their workspace and their user id, always both."""
    return (table.c.team_id == team_id) & (table.c.user_id == user_id)


def _member_key(user_id: str, team_id: str = "") -> int:
    """The member's advisory lock key in PostgreSQL (fits its int4/bigint)."""
    return zlib.crc32(f"{team_id}:{user_id}".encode()) - 2**31


def _text_array(values: list[str | None]) -> Any:
    """A PostgreSQL ``text[]`` parameter."""
    return bindparam(None, values, type_=pg_dialect.ARRAY(Text))


def _batches(ids: Iterable[Any]) -> Iterator[list[Any]]:
    values = list(ids)
    for start in range(0, len(values), BATCH):
        yield values[start : start + BATCH]


# -- which store a process uses ------------------------------------------------------------

_lock = threading.Lock()
_configured: StateStore | None = None
_by_file: dict[tuple[str, int], StateStore] = {}


def open_state(target: str | Path, *, pool_size: int = 20) -> StateStore:
    """The store for a ``DATABASE_URL`` or a SQLite path, opened (and migrated) once per
    process and then shared."""
    url = database_url(target)
    if url.get_backend_name() == "sqlite":
        return _sqlite_store(Path(str(url.database)), create=True)
    with _lock:
        key = (url.render_as_string(hide_password=False), 0)
        store = _by_file.get(key)
        if store is None:
            store = _by_file[key] = StateStore(url, pool_size=pool_size)
        return store


def _sqlite_store(path: Path, *, create: bool = False) -> StateStore:
    """The state kept in the SQLite file at ``path``: a corpus file, which the engine has
    created, so one gone since (moved, deleted, its disk unmounted) is refused rather than
    recreated empty; or (``create``) a ``DATABASE_URL`` of ``sqlite:///``, made if new."""
    path = path.absolute()
    try:
        inode = path.stat().st_ino  # a file replaced at the same path is a new database
    except OSError:
        if not create:
            raise StateError(
                f"The database at {path} is gone (moved, deleted, or its disk unmounted), so "
                "nothing was looked up or saved."
            ) from None
        inode = 0
    with _lock:
        store = _by_file.get((str(path), inode))
        if store is None:
            store = StateStore(path)
            if inode == 0:
                inode = path.stat().st_ino
            _by_file[(str(path), inode)] = store
        return store


def configure(database_url: str | None, *, pool_size: int = 20) -> StateStore | None:
    """Where this process keeps the shared state: ``DATABASE_URL``'s database, or (None)
    each corpus's own SQLite file. Called once at start by the commands (``open_engine``);
    opening it checks that it answers and migrates it."""
    global _configured
    store = open_state(database_url, pool_size=pool_size) if database_url else None
    with _lock:
        _configured = store
    return store


def configured() -> StateStore | None:
    return _configured


def state_for(corpus_path: str | Path) -> StateStore:
    """The shared state of the deployment whose corpus is at ``corpus_path``: the configured
    ``DATABASE_URL``'s database, else that SQLite file itself."""
    return _configured or _sqlite_store(Path(corpus_path))


def state_of(source: StateStore | Database) -> StateStore:
    """The store itself; for a corpus connection (``Subscriptions(engine.db)``, the way
    callers obtained the state before there was a store), the state of that deployment."""
    if isinstance(source, StateStore):
        return source
    return state_for(db_path(source))
