"""The corpus store: papers in SQLite, written through sqlite-utils upserts."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from sqlite_utils import Database

from .formats.arxiv_atom import ArxivPaper, is_older, parse_arxiv_id, stored_paper
from .formats.common import printable
from .paper import Paper
from .schema import migrate, migrations
from .text import author_matches, authors_key, name_tokens


def utcnow() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class UpsertCounts:
    added: int = 0
    updated: int = 0
    unchanged: int = 0

    @property
    def changed(self) -> int:
        return self.added + self.updated

    def __add__(self, other: UpsertCounts) -> UpsertCounts:
        return UpsertCounts(
            self.added + other.added,
            self.updated + other.updated,
            self.unchanged + other.unchanged,
        )


class DatabaseError(Exception):
    """A database Paperboy cannot use as asked; the message is one sentence for the operator."""


class NoDatabase(DatabaseError):
    """Nothing at the path, and the caller asked not to create a database there."""


class StorageError(DatabaseError, click.ClickException):
    """The database cannot take a write (disk full, another writer for too long).

    The message is one sentence for the operator. Also a ``ClickException`` so that every
    ``paperboy`` command prints it as such (``Error: ...``, exit status 1), not a traceback.
    """

    def __init__(self, message: str) -> None:
        click.ClickException.__init__(self, message)


def is_writable(path: str | Path) -> bool:
    """Whether this process may write the database: the file and its folder (WAL keeps its
    ``-wal`` and ``-shm`` files beside it), or, for a new one, the nearest existing folder."""
    path = Path(path).absolute()
    if path.exists():
        return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    return os.access(folder, os.W_OK)


def connect(path: str | Path, *, read_only: bool = False, create: bool = True) -> Database:
    """One connection. Read-only ones go through SQLite's ``mode=ro`` and never write;
    ``create=False`` ones through ``mode=rw``, which never creates the file (a database moved
    away or on a disk since unmounted is not recreated empty: SQLite refuses instead).

    A WAL database whose folder we may not write cannot be opened ``mode=ro`` when its
    ``-shm`` file is gone (SQLite would have to create it); with no ``-wal`` file either,
    there is nothing uncheckpointed, so it is read as ``immutable`` instead.
    """
    if not read_only and create:
        db = Database(path)
    elif not read_only:
        db = Database(sqlite3.connect(Path(path).absolute().as_uri() + "?mode=rw", uri=True))
    else:
        uri = Path(path).absolute().as_uri() + "?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True)
            conn.execute("select count(*) from sqlite_master").fetchone()
        except sqlite3.OperationalError:
            if Path(f"{path}-wal").exists():
                raise
            conn = sqlite3.connect(uri + "&immutable=1", uri=True)
        db = Database(conn)
    db.execute("PRAGMA busy_timeout = 30000")
    return db


def open_database(path: str | Path, *, read_only: bool = False, create: bool = True) -> Database:
    """Open a Paperboy database with the latest schema, creating it if ``create`` allows.

    WAL lets the web process read while the scheduler process ingests; the busy timeout
    makes a writer wait for another instead of failing at once. ``read_only`` opens it
    without writing anything (no WAL switch, no migration), and refuses one that needs
    migrating.
    """
    path = Path(path)
    if path.is_dir():
        raise DatabaseError(
            f"{path} is a folder, not a database file: name the file, like {path / 'paperboy.db'}."
        )
    if not path.exists():
        if not create:
            raise NoDatabase(f"There is no database at {path}.")
        if not path.absolute().parent.is_dir():
            # Not made here: a folder that is missing is often a disk not mounted, where a
            # new database would take the papers and subscriptions, then vanish.
            folder = path.absolute().parent
            raise DatabaseError(
                f"Cannot create a database at {path}: the folder {folder} does not exist "
                f"(is its disk mounted?); create it first (`mkdir -p {folder}`)."
            )
        if read_only:
            raise DatabaseError(f"Cannot create a database at {path}: that folder is read-only.")
    try:
        db = connect(path, read_only=read_only)
        if read_only:
            pending = migrations.pending(db)
            if pending:
                db.close()
                raise DatabaseError(
                    f"The database at {path} needs upgrading to this version of Paperboy, "
                    "which a read-only database cannot be: run any command that writes "
                    "(such as `paperboy serve`) once as a user who may write it."
                )
        else:
            db.enable_wal()
            migrate(db)
    except sqlite3.DatabaseError as error:
        problem = storage_error(error, path)
        raise (problem or DatabaseError(f"Cannot open the database at {path}: {error}.")) from None
    return db


#: How long a writer waits for another to finish before giving up: longer than the largest
#: ingest takes (872k papers: about 6 minutes), so two ingests simply run one after the other.
WRITER_WAIT_SECONDS = 1800


#: Free bytes below which a disk I/O error is taken for a full disk.
NEARLY_FULL = 64 * 1024


def storage_error(error: sqlite3.Error, path: str | Path) -> StorageError | None:
    """The one-sentence error for an operator fault SQLite reported, or None for other errors."""
    code = getattr(error, "sqlite_errorcode", None)
    name = Path(path).name
    # With no byte left at all, SQLite cannot even create its journal and says "disk I/O
    # error" instead of "full": the free space tells which it is.
    io_error = code == sqlite3.SQLITE_IOERR or "disk I/O error" in str(error)
    if (
        code == sqlite3.SQLITE_FULL
        or "disk is full" in str(error)
        or (io_error and _no_space(path))
    ):
        return StorageError(
            f"The disk holding {name} is full, so nothing was saved: free some space and try again."
        )
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "locked" in str(error):
        return StorageError(
            f"Another process has been writing to {name} for too long; try again when it is done."
        )
    return None


def _no_space(path: str | Path) -> bool:
    """True when the filesystem holding ``path`` has (almost) no free space left."""
    try:
        return shutil.disk_usage(Path(path).resolve().parent).free < NEARLY_FULL
    except OSError:
        return False


@contextmanager
def write_transaction(db: Database, wait: float | None = None) -> Iterator[Database]:
    """A transaction that takes the write lock up front (``BEGIN IMMEDIATE``), waiting for it.

    A deferred transaction (sqlite-utils' ``atomic()``) reads first and upgrades to a write
    later; if another writer committed in between, SQLite cannot wait (the snapshot is
    stale) and fails at once with "database is locked". Taking the lock first means a writer
    queues behind another for up to ``wait`` seconds (``WRITER_WAIT_SECONDS``) instead. Inside a transaction already,
    this is a savepoint of it.
    """
    if db.conn.in_transaction:
        with db.atomic():
            yield db
        return
    wait = WRITER_WAIT_SECONDS if wait is None else wait
    (previous,) = db.execute("PRAGMA busy_timeout").fetchone()
    db.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        raise (storage_error(error, db_path(db)) or error) from None
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(previous)}")
    try:
        yield db
    except BaseException:
        db.conn.rollback()
        raise
    db.conn.commit()


@contextmanager
def checkpoint_later(db: Database) -> Iterator[WalCheckpoint]:
    """Commits inside leave the WAL as it is (no automatic checkpoint); at the end, a
    ``WalCheckpoint`` starts copying it into the database file in a thread. A large first
    ingest's commit then does not wait while 170 MB are copied: the copy runs beside the
    index build (sqlite3 lets go of the GIL meanwhile), and the caller ``join``s it. Readers
    see the same rows either way: a committed transaction is in the WAL, fsynced as before,
    and a crash before the copy leaves it there for the next connection to apply."""
    (previous,) = db.conn.execute("PRAGMA wal_autocheckpoint").fetchone()
    db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    checkpoint = WalCheckpoint(db_path(db))
    try:
        yield checkpoint
    finally:
        db.conn.execute(f"PRAGMA wal_autocheckpoint = {int(previous)}")
    checkpoint.start()


class WalCheckpoint:
    """``PRAGMA wal_checkpoint(PASSIVE)`` on its own connection, in a thread: it never
    blocks readers or a writer (frames a reader still needs wait for the next checkpoint)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if Path(self.path).is_file():
            self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                conn.close()
        except sqlite3.Error:
            pass  # the next commit's automatic checkpoint copies what this one did not

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()


def db_path(db: Database) -> str:
    row = db.execute("PRAGMA database_list").fetchone()
    return row[2] if row and row[2] else "the database"


class Corpus:
    """Papers in SQLite. ``rowid`` order is the document order of the TF-IDF index."""

    def __init__(self, db: Database):
        self.db = db
        self.table = db.table("papers")

    @property
    def version(self) -> int:
        # The sqlite3 connection itself: sqlite-utils' ``execute`` wrapper costs more than
        # this query, which every lookup makes.
        row = self.db.conn.execute("select value from meta where key = 'corpus_version'").fetchone()
        return int(row[0]) if row else 0

    def count(self) -> int:
        return self.db.execute("select count(*) from papers").fetchone()[0]

    def has_authors(self) -> bool:
        """Whether any paper lists its authors (the seed corpus has none: an ``author:``
        filter there can only come back empty, and a lookup says why)."""
        query = "select 1 from papers where authors is not null and authors not in ('', '[]')"
        return self.db.execute(query + " limit 1").fetchone() is not None

    def has_at_least(self, n: int) -> bool:
        """Whether ``n`` or more papers are stored, from at most ``n`` index entries (a
        full count of 872k papers right after their ingest read 2 s of pages back from the
        WAL)."""
        query = "select count(*) from (select 1 from papers limit ?)"
        return self.db.execute(query, [n]).fetchone()[0] >= n

    def upsert(
        self,
        papers: Iterable[Paper],
        batch_size: int = 1000,
        added_at: Mapping[str, str | None] | None = None,
        hashed: Callable[[list[Paper], list[str]], None] | None = None,
    ) -> UpsertCounts:
        """Add new papers, update changed ones, leave identical ones alone, and an arXiv
        paper's older version too (v2 read after v3 was stored: see ``arxiv_version``).

        Runs in the caller's transaction when there is one (see ``Engine.ingest``); bumps
        ``corpus_version`` only when something changed so an unchanged re-ingest is free.
        ``added_at`` (by paper id, read when each paper is written): when a paper came from
        another store (the shared corpus), the time it was first added there, so digests on
        every host agree on what is new. ``hashed(papers, digests)``: each batch of papers as
        read, before it is written, with their content hashes (a first ingest's build reader
        takes them rather than hashing every paper again).
        """
        counts = UpsertCounts()
        now = utcnow()
        batch: list[Paper] = []
        # Rows written here belong to the version this upsert ends with (the index adds the
        # papers changed after the version it covers: ``changed_since``).
        stamp = self.version + 1

        def flush() -> None:
            if not batch:
                return
            ids = [p.id for p in batch]
            if written is not None and written.isdisjoint(map(hash, ids)):
                known = {}  # none of them stored (a first ingest: 1.4 s of SQL at 872k)
            else:
                placeholders = ",".join("?" * len(ids))
                known = dict(
                    self.db.conn.execute(
                        f"select id, content_hash from papers where id in ({placeholders})", ids
                    ).fetchall()
                )
            if written is not None:
                written.update(map(hash, ids))
            digests = [paper.content_hash() for paper in batch]
            if hashed is not None:
                hashed(batch, digests)
            rows = []
            # arXiv versions: the incoming papers', and the stored ones' of those read with a
            # version (the only ones compared). A row written carries its paper's version
            # (None: not known, a stored one forgotten); ``record`` has those of unchanged
            # papers whose version is new.
            incoming = [arxiv_version(paper) for paper in batch]
            stored = self._arxiv_versions(
                [
                    p.id
                    for p, v in zip(batch, incoming, strict=True)
                    if v is not None and p.id in known
                ]
            )
            record: dict[str, tuple[int, str]] = {}
            for paper, digest, version in zip(batch, digests, incoming, strict=True):
                if version is not None:
                    kept = stored.get(paper.id)
                    if kept is not None and paper.id in known and is_older(*version, *kept):
                        counts.unchanged += 1  # an older version: the stored one stays
                        continue
                    if kept != version:
                        stored[paper.id] = record[paper.id] = version
                if known.get(paper.id) == digest:
                    counts.unchanged += 1
                    continue
                if paper.id in known:
                    counts.updated += 1
                    if version is None:
                        stored.pop(paper.id, None)
                else:
                    counts.added += 1
                record.pop(paper.id, None)  # its row says it
                known[paper.id] = digest  # a duplicate id later in the same input is unchanged
                added = added_at.get(paper.id) if added_at is not None else None
                rows.append(_values(paper, digest, now, added or now, stamp, version))
            if rows:
                self.db.conn.executemany(_UPSERT, rows)
            if record:
                self._record_arxiv_versions(record)
            batch.clear()

        with write_transaction(self.db):
            # A table empty when this upsert begins holds only the rows it writes: a batch
            # none of whose ids' hashes it has written (a set of ints, not the ids) has
            # nothing stored, without asking SQLite; any other batch asks.
            empty = self.db.conn.execute("select not exists (select 1 from papers)").fetchone()
            written: set[int] | None = set() if empty[0] else None
            for paper in papers:
                batch.append(paper)
                if len(batch) >= batch_size:
                    flush()
            flush()
            if counts.changed:
                self.db.execute(
                    "update meta set value = cast(value as integer) + 1 "
                    "where key = 'corpus_version'"
                )
        return counts

    def _arxiv_versions(self, ids: list[str]) -> dict[str, tuple[int, str]]:
        """The stored arXiv ``(version, updated)`` of those of these papers that have one
        (``papers.arxiv_version``, migration m080)."""
        found = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = self.db.conn.execute(
                "select id, arxiv_version, arxiv_updated from papers "
                f"where arxiv_version is not null and id in ({','.join('?' * len(chunk))})",
                chunk,
            )
            for paper_id, version, updated in rows:
                found[paper_id] = (int(version), updated or "")
        return found

    def _record_arxiv_versions(self, versions: Mapping[str, tuple[int, str]]) -> None:
        """Store the arXiv version of each of these papers, whose rows are as they were
        (the same paper, its version known now)."""
        self.db.conn.executemany(
            "update papers set arxiv_version = ?, arxiv_updated = ? where id = ?",
            [(v[0], v[1] or None, i) for i, v in versions.items()],
        )

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("select value from meta where key = ?", [key]).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            "insert into meta (key, value) values (?, ?) "
            "on conflict (key) do update set value = excluded.value",
            [key, value],
        )

    def papers_changed_since(self, version: int) -> Iterator[tuple[Paper, str | None]]:
        """Papers added or changed after corpus version ``version``, in rowid order, each with
        when it was added (what an ingest publishes to the shared corpus); an ``ArxivPaper``
        when its arXiv version is stored, so the version is published with it."""
        cursor = self.db.execute(
            "select id, title, abstract, venue, year, authors, keywords, url, title_derived, "
            "added_at, arxiv_version, arxiv_updated from papers where changed_at_version > ? "
            "order by rowid",
            [version],
        )
        for row in cursor:
            paper_id, title, abstract, venue, year, authors, keywords, url, derived, *rest = row
            added, arxiv, updated = rest
            fields = {
                "id": paper_id,
                "title": title,
                "abstract": abstract or "",
                "venue": venue or "",
                "year": year,
                "authors": json.loads(authors or "[]"),
                "keywords": json.loads(keywords or "[]"),
                "url": url or "",
                "title_derived": bool(derived),
            }
            yield stored_paper(fields, arxiv, updated), added

    def rowids_by_author(self, name: str) -> list[int]:
        """Papers one of whose authors has every token of ``name`` (case and accents folded).

        SQL narrows to papers holding each token somewhere in their authors; the per-author
        check then drops those whose tokens come from different authors ("Yang Li" is not
        "Yang Lin", nor "Li Wei" with "Yang Zhou").
        """
        tokens = name_tokens(name)
        if not tokens:
            return []
        where = " and ".join(["author_names like ?"] * len(tokens))
        try:
            cursor = self.db.execute(
                f"select rowid, author_names from papers where {where}",
                [f"% {t} %" for t in tokens],
            )
        except sqlite3.OperationalError:  # a database opened read-only before migration m010
            cursor = (
                (rowid, authors_key(json.loads(authors or "[]")))
                for rowid, authors in self.db.execute("select rowid, authors from papers")
            )
        return [rowid for rowid, key in cursor if author_matches(tokens, key)]

    def get(self, paper_id: str) -> dict[str, Any] | None:
        rows = self.get_many([paper_id])
        return rows[0] if rows else None

    def get_many(self, paper_ids: list[str]) -> list[dict[str, Any]]:
        """Papers by id, in the order asked (missing ids are skipped)."""
        if not paper_ids:
            return []
        placeholders = ",".join("?" * len(paper_ids))
        found = {
            row["id"]: row
            for row in self.table.rows_where(f"id in ({placeholders})", list(paper_ids))
        }
        return [_decode(found[i]) for i in paper_ids if i in found]

    def by_rowids(self, rowids: list[int]) -> list[dict[str, Any]]:
        """Papers by rowid (the index's document handle), in the order asked."""
        if not rowids:
            return []
        placeholders = ",".join("?" * len(rowids))
        cursor = self.db.execute(
            f"select rowid as _rowid, * from papers where rowid in ({placeholders})",
            [int(r) for r in rowids],
        )
        names = [d[0] for d in cursor.description]
        found = {row[0]: _decode(dict(zip(names, row, strict=True))) for row in cursor}
        return [found[r] for r in rowids if r in found]

    def ids_for_rowids(self, rowids: list[int]) -> list[str]:
        if not rowids:
            return []
        placeholders = ",".join("?" * len(rowids))
        found = dict(
            self.db.conn.execute(  # every lookup: no sqlite-utils wrapper
                f"select rowid, id from papers where rowid in ({placeholders})", rowids
            ).fetchall()
        )
        return [found[r] for r in rowids if r in found]

    def rowid_of(self, paper_id: str) -> int | None:
        row = self.db.execute("select rowid from papers where id = ?", [paper_id]).fetchone()
        return row[0] if row else None

    def iter_documents(self, since: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """Every paper in rowid order, for building the index; with ``since``, only those
        added or changed after that corpus version (for a delta segment)."""
        if since is None:
            cursor = self.db.execute(f"select {_DOCUMENT_COLUMNS} from papers order by rowid")
        else:
            cursor = self.db.execute(
                f"select {_DOCUMENT_COLUMNS} from papers where changed_at_version > ? "
                "order by rowid",
                [since],
            )
        return _documents(cursor)

    def changed_since(self, version: int) -> int:
        """How many papers were added or changed after corpus version ``version``."""
        return self.db.execute(
            "select count(*) from papers where changed_at_version > ?", [version]
        ).fetchone()[0]

    def documents_of(self, rowids: Iterable[int]) -> Iterator[tuple[int, dict[str, Any]]]:
        """The papers with these rowids, in rowid order (re-counting segments for a merge)."""
        wanted = sorted({int(r) for r in rowids})
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            cursor = self.db.execute(
                f"select {_DOCUMENT_COLUMNS} from papers where rowid in "
                f"({','.join('?' * len(chunk))}) order by rowid",
                chunk,
            )
            yield from _documents(cursor)

    def stats(self) -> dict[str, Any]:
        by_venue = self.db.execute(
            "select venue, year, count(*) from papers group by venue, year "
            "order by year desc, venue"
        ).fetchall()
        return {
            "papers": self.count(),
            "corpus_version": self.version,
            "by_venue_year": [{"venue": v, "year": y, "papers": n} for v, y, n in by_venue],
        }


def arxiv_version(paper: Paper) -> tuple[int, str] | None:
    """An arXiv paper's ``(version, updated)`` as read (see ``is_older``), or None when not
    known: from an Atom entry (``ArxivPaper``), or from a record whose id is "arxiv:<id>" and
    whose url names a version of that id ("https://arxiv.org/abs/2501.01234v2")."""
    if isinstance(paper, ArxivPaper):
        return (paper.version, paper.updated) if paper.version or paper.updated else None
    if paper.id.startswith("arxiv:") and "arxiv.org/abs/" in paper.url:
        parsed = parse_arxiv_id(paper.url)
        if parsed and parsed[1] and paper.id == f"arxiv:{parsed[0]}":
            return parsed[1], ""
    return None


_DOCUMENT_COLUMNS = "rowid, title, abstract, authors, keywords, venue, year, added_at"


def _documents(cursor) -> Iterator[tuple[int, dict[str, Any]]]:
    for rowid, title, abstract, authors, keywords, venue, year, added_at in cursor:
        yield (
            rowid,
            {
                "title": title or "",
                "abstract": abstract or "",
                "authors": json.loads(authors or "[]"),
                "keywords": json.loads(keywords or "[]"),
                "venue": venue or "",
                "year": year,
                "added_at": added_at,
            },
        )


#: The columns ``Corpus.upsert`` writes, in ``_values``' order.
_COLUMNS = (
    "id",
    "venue",
    "year",
    "title",
    "title_derived",
    "abstract",
    "authors",
    "author_names",
    "keywords",
    "url",
    "content_hash",
    "added_at",
    "updated_at",
    "changed_at_version",
    "arxiv_version",
    "arxiv_updated",
)
#: One statement for new and changed papers alike, run with ``executemany`` (sqlite-utils'
#: ``upsert_all`` spent longer building its SQL than SQLite took to run it). A changed paper
#: keeps its ``added_at`` (its place in digests): the update sets every other column.
_UPSERT = (
    f"insert into papers ({', '.join(_COLUMNS)}) values ({', '.join('?' * len(_COLUMNS))}) "
    "on conflict (id) do update set "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c not in ("id", "added_at"))
)


#: ``json.dumps(value, ensure_ascii=False)``, without a new encoder per call.
_json = json.JSONEncoder(ensure_ascii=False).encode


def _json_names(names: list[str]) -> str:
    """``_json(names)`` of a list of strings, joined by hand when no character needs escaping
    (no quote but the separators', no backslash, nothing unprintable: every control character
    is), a quarter of the encoder's time on the two lists of every paper."""
    if not names:
        return "[]"
    try:
        joined = '", "'.join(names)
    except TypeError:
        return _json(names)
    if joined.count('"') != 2 * len(names) - 2 or "\\" in joined or not printable(joined):
        return _json(names)
    return f'["{joined}"]'


def _values(
    paper: Paper, digest: str, now: str, added_at: str, stamp: int, version: tuple[int, str] | None
) -> tuple:
    """A paper's row for ``_UPSERT``, with its arXiv ``version`` (``arxiv_version``; None:
    not known)."""
    authors = paper.authors
    return (
        paper.id,
        paper.venue or "",
        paper.year,
        paper.title,
        int(paper.title_derived),
        paper.abstract or "",
        _json_names(authors),
        authors_key(authors),
        _json_names(paper.keywords),
        paper.url or "",
        digest,
        added_at,
        now,
        stamp,
        version[0] if version is not None else None,
        (version[1] or None) if version is not None else None,
    )


def _decode(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    row["authors"] = json.loads(row.get("authors") or "[]")
    row["keywords"] = json.loads(row.get("keywords") or "[]")
    row["title_derived"] = bool(row.get("title_derived"))
    return row
