"""The engine: corpus + index + query language, answering lookups with ranked, explained hits.

This is the one object the CLI, the Slack app and the digest use. It knows nothing about
Slack: results come back as plain data (a snippet is a list of ``(text, matched)`` pieces)
and each front end renders them its own way.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlite_utils import Database

from .corpus import (
    Corpus,
    NoDatabase,
    UpsertCounts,
    checkpoint_later,
    connect,
    is_writable,
    open_database,
    storage_error,
    write_transaction,
)
from .formats import CorpusFileError, open_corpus_file
from .index import (
    BuildStats,
    Index,
    IndexBuildError,
    Segment,
    add_to_index,
    build_index,
    build_lock,
    helpers_started,
    index_dir_for,
    members,
    read_current,
    writer_busy,
)
from .paper import Paper, Rejected
from .query import Query, QueryError, parse_query
from .text import analyze, surface_words, words

#: Input files this large (on disk, gzipped or not) start a first ingest's build helpers
#: beside the SQLite write: about 18,000 papers as JSON Lines.gz (5,700 uncompressed), near
#: the 20,000 papers (``index.PARALLEL_MIN_DOCS``) a helper needs: few start in vain.
PRESTART_MIN_BYTES = 8 << 20

SNIPPET_WORDS = 40
SNIPPET_SCAN_CHARS = 20_000  # a snippet is looked for in this much of the text at most
WHY_TERMS = 3
SIMILAR_TERMS = 40  # a paper's strongest terms stand for it in "similar papers"
BUILD_RETRY = 30.0  # seconds before a failed index build is tried again; doubles each time
BUILD_RETRY_MAX = 900.0
PHRASE_CHECK_LIMIT = 2000  # papers whose text is read to confirm a phrase too rare to index
#: Up to this many papers an exhaustive lookup counts each paper's query terms from the
#: lists it multiplied (a bincount over the corpus: 80 µs at 87k papers, 1.6 ms at 872k);
#: above, only a pool of the best is looked up in the lists (bisection), all if need be.
COUNT_MATCHES_UP_TO = 250_000
SORT_ALL = 256  # up to this many candidates are sorted whole for a page (``Engine._top``)
#: After this many ``rank`` calls, a process (a serving one: a one-off CLI lookup never gets
#: there) reads every paper's id by rowid into memory (``_IdTable``), when the corpus has at
#: most ``ID_TABLE_MAX_PAPERS`` papers (about 35 bytes a paper: 3 MB at 87k, read in 0.1-0.2
#: s): a lookup's ids then need no SQL (10 table pages read: 30-80 µs), only its version.
ID_TABLE_AFTER = 32
ID_TABLE_MAX_PAPERS = 250_000
#: Lookups wanting at most this many results skip the posting lists that cannot change them
#: (MaxScore, ``Index.top_candidates``); more (a digest's every match) are scored exhaustively.
PRUNE_MAX_K = 200
#: Below this many postings over the query's terms the exhaustive product answers. 0: the
#: term-at-a-time pruning is at least as fast at any length (issue 9, seventh pass).
PRUNE_MIN_POSTINGS = 0


@dataclass
class Hit:
    paper: dict[str, Any]
    score: float
    snippet: list[tuple[str, bool]] = field(default_factory=list)
    why: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.paper["id"]


@dataclass
class SearchResult:
    query: str
    hits: list[Hit] = field(default_factory=list)
    total: int = 0
    offset: int = 0
    error: str | None = None
    notices: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    @property
    def has_more(self) -> bool:
        return self.offset + len(self.hits) < self.total


@dataclass
class FileReport:
    """What one file gave: its format, how many papers were read, which records were rejected."""

    path: str
    format: str
    papers: int = 0
    rejected: list[Rejected] = field(default_factory=list)


@dataclass
class IngestReport:
    files: list[FileReport] = field(default_factory=list)
    file_errors: list[str] = field(default_factory=list)
    counts: UpsertCounts = field(default_factory=UpsertCounts)
    index: BuildStats | None = None

    @property
    def rejected(self) -> list[Rejected]:
        return [r for f in self.files for r in f.rejected]

    @property
    def ok(self) -> bool:
        """False when nothing at all could be read (the CLI's exit status)."""
        return any(f.papers for f in self.files)

    def summary(self) -> str:
        c = self.counts
        return (
            f"{c.added:,} added, {c.updated:,} updated, {c.unchanged:,} unchanged, "
            f"{len(self.rejected):,} rejected"
            + (f", {len(self.file_errors)} file(s) unreadable" if self.file_errors else "")
        )


@dataclass
class _Ranked:
    docs: np.ndarray  # document numbers, best first (only the page asked for)
    scores: np.ndarray
    total: int
    term_ids: np.ndarray
    weights: np.ndarray
    index: Index | None = None  # the index these document numbers belong to


def seed_files(seed_dir: str | Path) -> list[Path]:
    """The corpus files in a seed folder (not ``__init__.py``: the folder is also a package)."""
    return sorted(
        p for p in Path(seed_dir).iterdir() if p.is_file() and not p.name.startswith(("_", "."))
    )


log = logging.getLogger(__name__)


def _private_index_dir(db_path: Path) -> Path:
    """Where the index of a database in a read-only folder is built: this user's temp folder."""
    key = hashlib.sha256(str(db_path.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"paperboy-{os.getuid()}" / f"{key}.index"


def _connect_existing(path: Path, *, read_only: bool) -> Database:
    """A connection to the database ``Engine.__init__`` created or found, never creating it
    again: a file moved away, deleted or on a disk since unmounted is not recreated empty
    (SQLite's ``mode=rw``) by the next thread's first lookup; that lookup fails instead."""
    try:
        return connect(path, read_only=read_only, create=False)
    except sqlite3.OperationalError:
        if path.exists():
            raise
        raise NoDatabase(
            f"The database at {path} is gone (moved, deleted, or its disk unmounted), "
            "so nothing was looked up or saved."
        ) from None


def _holds_no_database(path: Path) -> bool:
    """Whether ``path`` is a file with no database in it: empty (0 bytes), or a SQLite file
    with no schema at all. Read without writing anything (``mode=ro``); a file SQLite cannot
    read is left to ``open_database`` to name."""
    try:
        if not path.is_file():
            return False
        if path.stat().st_size == 0 and not Path(f"{path}-wal").exists():
            return True
        conn = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
    except (OSError, sqlite3.Error):
        return False
    try:
        ((tables,),) = conn.execute("select count(*) from sqlite_master").fetchall()
    except sqlite3.Error:
        return False
    finally:
        conn.close()
    return tables == 0


class Engine:
    """Open with ``Engine.open(db_path, seed_dir=...)``; safe to share between threads."""

    def __init__(
        self, db_path: str | Path, seed_dir: str | Path | None = None, *, create: bool = True
    ):
        """Open (and with ``create``, create) the database; raises DatabaseError (NoDatabase).

        A database this process may not write is opened read-only (``read_only``): lookups
        work, writes are refused, and its index, if the one beside it is missing or stale
        and that folder is read-only too, is built in a per-user temporary folder.
        """
        self.db_path = Path(db_path)
        self.seed_dir = Path(seed_dir) if seed_dir else None
        self.index_dir = index_dir_for(self.db_path)
        self._local = threading.local()
        self._index: Index | None = None
        self._index_lock = threading.Lock()
        self._segments: dict[str, Segment] = {}  # opened once per process, shared by generations
        self._failure: tuple[float, float, str] | None = None  # (retry after, delay, message)
        self._lookups = 0  # ``rank`` calls answered (up to ``ID_TABLE_AFTER``)
        self._id_table: _IdTable | None = None
        self._wal_index: _WalIndex | None = None  # (``_version``, a serving process)
        self._known_version: tuple[bytes, int] | None = None  # (WAL index header, version)
        self.clock: Callable[[], float] = time.time  # tests inject their own
        self.read_only = self.db_path.exists() and not is_writable(self.db_path)
        if not create and _holds_no_database(self.db_path):
            # An empty file (``touch``, or a failed copy) is no database either: a command
            # that only reads gives it no schema (it is left byte-identical).
            raise NoDatabase(f"There is no database at {self.db_path}.")
        # Create and migrate once, up front (read-only: only check that no migration is due).
        open_database(self.db_path, read_only=self.read_only, create=create).close()
        if self.read_only and not is_writable(self.index_dir):
            index = Index.load(self.index_dir)
            if index is None or index.corpus_version != self.corpus.version:
                self.index_dir = _private_index_dir(self.db_path)

    @classmethod
    def open(
        cls, db_path: str | Path, seed_dir: str | Path | None = None, *, create: bool = True
    ) -> Engine:
        """The engine for ``db_path``; an empty, writable corpus is first filled from
        ``seed_dir`` (a missing folder is logged and skipped)."""
        engine = cls(db_path, seed_dir, create=create)
        if engine.seed_dir and not engine.read_only and engine.corpus.count() == 0:
            if engine.seed_dir.is_dir():
                engine.ingest(seed_files(engine.seed_dir))
            else:
                log.warning(
                    "The seed folder %s does not exist, so the corpus is empty: "
                    "add papers with `paperboy ingest FILE`.",
                    seed_dir,
                )
        return engine

    @property
    def writable(self) -> bool:
        """False for a database this process may only read (``/healthz`` reports it)."""
        return not self.read_only

    # -- storage ---------------------------------------------------------------------------

    @property
    def db(self) -> Database:
        """This thread's connection (sqlite3 connections must stay on their thread)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = _connect_existing(self.db_path, read_only=self.read_only)
        return db

    @property
    def corpus(self) -> Corpus:
        corpus = getattr(self._local, "corpus", None)
        if corpus is None:
            corpus = self._local.corpus = Corpus(self.db)
        return corpus

    def ingest(
        self,
        paths: Sequence[str | Path],
        progress: Callable[[Iterable[Paper]], Iterable[Paper]] | None = None,
    ) -> IngestReport:
        """Stream every file into the corpus in one transaction, then bring the index up to date.

        Records are parsed and written in batches, so memory stays flat however large the
        file. A file that turns out to be broken part-way (a truncated gzip, say) is rolled
        back on its own (a savepoint) and reported; the other files still go in.
        """
        report = IngestReport()
        corpus = self.corpus
        # The build lock is held from before the papers are written until the index covering
        # them is published: readers meanwhile serve the previous generation instead of
        # building one themselves (a reader that finds the index behind and no writer at work
        # brings it up to date: that writer died).
        with build_lock(self.index_dir), self._first_build_helpers(paths) as reader:
            try:
                # The WAL is copied into the database file beside the index build.
                with checkpoint_later(self.db) as checkpoint:
                    self._ingest_files(paths, corpus, report, progress, reader)
            except sqlite3.OperationalError as error:
                raise (storage_error(error, self.db_path) or error) from None
            try:
                current = read_current(self.index_dir)
                if (
                    report.counts.changed
                    or current is None
                    or current["corpus_version"] != (corpus.version)
                ):
                    try:
                        report.index = self._update_index()
                    except IndexBuildError as error:
                        raise IndexBuildError(
                            f"The papers were saved ({report.summary()}), but "
                            f"{error.message[0].lower()}{error.message[1:]}"
                        ) from None
            finally:
                checkpoint.join()
        self._index = self._open_published(verify=False) or self._index
        return report

    def _first_build_helpers(self, paths: Sequence[str | Path]):
        """With no index yet, this ingest ends in a full build: when the files are large
        enough for it to tokenise in several processes, its helper starts now
        (``helpers_started``, entered as the reader or None) and tokenises the papers beside
        the SQLite write, as this process parses them."""
        size = 0
        for path in paths:
            with contextlib.suppress(OSError):
                size += os.path.getsize(path)
        if size >= PRESTART_MIN_BYTES and read_current(self.index_dir) is None:
            return helpers_started(self.db_path, fed=True)
        return contextlib.nullcontext()

    def replicate(
        self,
        papers: Iterable[Paper],
        added_at: dict[str, str | None],
        record: Callable[[Corpus, int], None],
    ) -> UpsertCounts:
        """Papers from another store (the shared corpus, ``bot/replica.py``), written as an
        ingest writes them, then added to the index as a delta (built once when there is no
        index yet). ``record(corpus, version_before)`` runs in the same transaction, so the
        caller's bookkeeping (how far it has read) is saved with the papers or not at all."""
        with build_lock(self.index_dir):
            corpus = self.corpus
            try:
                with write_transaction(self.db):
                    before = corpus.version
                    counts = corpus.upsert(papers, added_at=added_at)
                    record(corpus, before)
            except sqlite3.OperationalError as error:
                raise (storage_error(error, self.db_path) or error) from None
            current = read_current(self.index_dir)
            if counts.changed or current is None or current["corpus_version"] != corpus.version:
                self._update_index()
        self._index = self._open_published(verify=False) or self._index
        return counts

    def _ingest_files(
        self, paths, corpus: Corpus, report: IngestReport, progress, reader=None
    ) -> None:
        """The files' papers written in one transaction, a savepoint per file; each paper
        also handed to ``reader`` (``index._Reader``), when there is one, with its content
        hash, as ``corpus.upsert`` writes it, and the reader told at the end whether the
        rows are the papers it was fed (``stored_as_fed``)."""
        # The reader gets the rows' batches, hashed once for both.
        handed = {} if reader is None else {"batch_size": reader.batch_size, "hashed": reader.feed}
        with write_transaction(self.db):
            was_empty = reader is not None and not corpus.has_at_least(1)
            for path in paths:
                try:
                    stream = open_corpus_file(path)
                except CorpusFileError as error:
                    report.file_errors.append(str(error))
                    continue
                file_report = FileReport(path=stream.path, format=stream.format)
                papers = _papers_of(stream, file_report)
                try:
                    with self.db.atomic():
                        counts = corpus.upsert(progress(papers) if progress else papers, **handed)
                except CorpusFileError as error:
                    report.file_errors.append(f"{error} Nothing from this file was saved.")
                    continue
                finally:
                    stream.close()
                report.files.append(file_report)
                report.counts = report.counts + counts
            if reader is not None:
                # Each paper fed is a new row of its own (none fed twice, none rolled back):
                # the build can match the reader's papers with the rows by id alone.
                reader.stored_as_fed = was_empty and report.counts.added == reader.papers_fed
                reader.fed_all()  # before the commit: the reader need not wait for it

    # -- the index, kept in step with the corpus --------------------------------------------

    def rebuild_index(self) -> BuildStats:
        """Rebuild the whole index now (one main segment); raises IndexBuildError, one sentence.

        Lookups meanwhile, in this process and others, are answered by the previous generation.
        """
        with build_lock(self.index_dir):
            stats = self._update_index(full=True)
        self._index = self._open_published(verify=False) or self._index
        return stats

    def _update_index(self, full: bool = False) -> BuildStats:
        """Bring the published index up to the corpus, under the build lock: a delta segment
        with what changed, or a full build when there is no (intact) index to add to.
        Failures are remembered for the back-off."""
        try:
            # Checksums too (once per process): a delta is never added to a damaged segment.
            if full or self._open_published(quiet=True) is None:
                stats = build_index(self.corpus, self.index_dir)
            else:
                stats = add_to_index(self.corpus, self.index_dir)
        except IndexBuildError as error:
            previous = self._backoff()
            delay = min(2 * previous[1], BUILD_RETRY_MAX) if previous else BUILD_RETRY
            self._failure = (self.clock() + delay, delay, error.message)
            self._failed_marker().write_failure(self._failure)
            raise
        self._failure = None
        self._failed_marker().clear()
        return stats

    def _open_published(self, verify: bool = True, quiet: bool = False) -> Index | None:
        """The generation published now, reusing the segments this process has open."""
        index = Index.load(self.index_dir, verify=verify, quiet=quiet, segments=self._segments)
        if index is not None:
            self._segments = {segment.name: segment for segment in index.segments}
        return index

    def _failed_marker(self) -> _FailedBuild:
        return _FailedBuild(Path(f"{self.index_dir}.failed"))

    def _backoff(self) -> tuple[float, float, str] | None:
        """The last failed build (retry after, delay, message), from this process or another.

        Other processes (a CLI lookup, the scheduler) learn of it from a small file beside
        the index, so none of them starts a build bound to fail either; on a disk too full
        to write even that, each process backs off on its own.
        """
        return self._failure or self._failed_marker().read()

    @property
    def index(self) -> Index:
        """The newest complete index: reopened when another process published a new one.

        Costs one small SQL query and a few ``stat`` calls per call. A lookup never waits for
        a writer: while one is adding papers (it holds the build lock) the previous
        generation answers. Only when the index is behind the corpus with no writer at work
        (one died mid-way) does a lookup bring it up to date, and only with no index at all
        does it wait for a build. A damaged index is never served (it is rebuilt). When a
        build fails (a full disk), the index there was keeps serving and the build is retried
        only after a back-off (``BUILD_RETRY`` doubling up to ``BUILD_RETRY_MAX`` seconds);
        with no index to fall back on, lookups raise the build's one-sentence IndexBuildError.
        """
        return self._index_for(self._version())

    def _version(self) -> int:
        """``corpus.version``; in a serving process, the one read last while the header of
        SQLite's WAL index is unchanged since (``_WalIndex``: one ``pread``, no SQL)."""
        wal = self._wal_index
        header = wal.header() if wal is not None else None
        if header is None:
            return self.corpus.version
        known = self._known_version
        if known is not None and known[0] == header:
            return known[1]
        version = self.corpus.version  # (read after the header: a commit in between is
        self._known_version = (header, version)  # seen by the next lookup's header)
        return version

    def warm_up(self) -> Index:
        """``index``, the serving process's shortcuts (``_serving``) and scipy's sparse
        product, now, so that no user's lookup pays for them: the ids (0.15 s at 87k papers)
        would come with the ``ID_TABLE_AFTER``-th lookup, scipy (about as long) with the
        first that needs it. The Slack app calls this as it starts."""
        index = self.index
        self._serving(index)
        importlib.import_module("scipy.sparse")  # (imported on first use otherwise: 0.15 s)
        return index

    def _serving(self, index: Index) -> None:
        """A serving process's shortcuts: the ids of ``rank`` from memory (``_IdTable``, a
        corpus of at most ``ID_TABLE_MAX_PAPERS`` papers), the corpus version from the WAL
        index's header when it has not changed (``_WalIndex``)."""
        if self._id_table is None and index.n_docs <= ID_TABLE_MAX_PAPERS:
            self._id_table = _IdTable.read(self.db.conn)
        if self._wal_index is None:
            self._wal_index = _WalIndex.open(self.db_path)

    def _index_for(self, version: int) -> Index:
        """``index`` for the corpus at ``version`` (read by the caller)."""
        index = self._index
        if index is not None and index.intact() and self._serves(index, version):
            return index
        with self._index_lock:
            index = self._index
            if index is None or not index.intact() or not self._serves(index, version):
                index = self._refresh(index, version)
                self._index = index
        return index

    def _serves(self, index: Index, version: int) -> bool:
        """Whether ``index`` may answer: it covers the corpus, or a writer is bringing the
        published index up to date (then the newest complete one answers meanwhile)."""
        return index.corpus_version == version or writer_busy(self.index_dir)

    def _refresh(self, current: Index | None, version: int) -> Index:
        """The newest published index; brought up to date first when no writer is at work."""
        if current is not None and not current.intact():
            current = None  # changed under us: never read it again
        failure = self._backoff()
        if failure and self.clock() < failure[0]:
            newest = self._open_published()
            if newest is not None and newest.corpus_version == version:
                self._failure = None  # another process built it meanwhile
                return newest
            fallback = newest or current
            if fallback is not None:
                return fallback
            raise IndexBuildError(failure[2])
        newest = self._open_published()
        if newest is not None and self._serves(newest, version):
            return newest
        try:
            # With an index to serve, never wait: a writer that just started will publish.
            with build_lock(self.index_dir, wait=newest is None) as held:
                if not held:
                    return newest
                index = self._open_published(quiet=True)
                if index is None or index.corpus_version != self.corpus.version:
                    self._update_index(full=index is None)
                    index = self._open_published(verify=False)
        except IndexBuildError as error:
            fallback = current or newest or Index.load(self.index_dir, quiet=True)
            if fallback is None:
                raise
            retry = self._failure[1] if self._failure else BUILD_RETRY
            log.error("%s Next attempt in %d s at the earliest.", error.message, retry)
            return fallback
        if index is None:
            raise IndexBuildError("The search index could not be opened after it was built.")
        return index

    # -- lookups ---------------------------------------------------------------------------

    def rank(
        self,
        query: str,
        k: int = 10,
        *,
        coordinate: bool = True,
        raise_errors: bool = False,
        prune: bool = True,
    ) -> list[tuple[str, float]]:
        """Ids and scores only: the fast path for batch evaluation, benchmarks and digests.

        ``coordinate=False`` gives the plain TF-IDF cosine scores (digests compare them with
        a fixed threshold); an unusable query gives ``[]`` unless ``raise_errors``. The top
        ``k`` is found with MaxScore (``prune``; the same ids, order and scores as without).
        """
        try:
            parsed = parse_query(query)
            table = self._id_table
            if table is not None:  # the corpus version read first, the ids from memory
                ranked = self._rank(parsed, k, 0, coordinate, prune)
                rowids = ranked.index.rowids[ranked.docs].tolist()
                ids = table.ids(rowids, self.db.conn)
                if ids is None:
                    ids = self.corpus.ids_for_rowids(rowids)
                return list(zip(ids, ranked.scores.tolist(), strict=True))
            index = self._index
            if index is None or not index.intact():
                index = self.index  # (the corpus version read first, as ``search`` does)
            ranked = self._rank(parsed, k, 0, coordinate, prune, index)
            ids, version = self._ids_at_version(ranked)
            if version != index.corpus_version:
                fresh = self._index_for(version)  # (this one while a writer is at work)
                if fresh is not index:  # as if the version had been read first
                    ranked = self._rank(parsed, k, 0, coordinate, prune, fresh)
                    ids = self.corpus.ids_for_rowids(ranked.index.rowids[ranked.docs].tolist())
        except QueryError:
            if raise_errors:
                raise
            return []
        self._lookups += 1
        if self._lookups == ID_TABLE_AFTER:
            self._serving(ranked.index)
        return list(zip(ids, ranked.scores.tolist(), strict=True))

    def _ids_at_version(self, ranked: _Ranked) -> tuple[list[str], int]:
        """The ranked papers' ids and the corpus version, read together (one statement, one
        snapshot): a lookup whose generation turns out to cover that version needed no
        version query of its own before it (``index``'s)."""
        rowids = ranked.index.rowids[ranked.docs].tolist()
        placeholders = ",".join("?" * len(rowids))
        found = dict(
            self.db.conn.execute(
                f"select rowid, id from papers where rowid in ({placeholders}) union all "
                "select null, value from meta where key = 'corpus_version'",
                rowids,
            ).fetchall()
        )
        version = found.pop(None, 0)
        return [found[r] for r in rowids if r in found], int(version)

    def search(
        self, query: str, limit: int = 5, offset: int = 0, snippets: bool = True
    ) -> SearchResult:
        result = SearchResult(query=query, offset=offset)
        try:
            parsed = parse_query(query)
            ranked = self._rank(parsed, limit, offset, prune=True, count=True)
        except QueryError as error:
            result.error = str(error)
            return result
        result.total = ranked.total
        result.hits = self._hits(ranked, parsed, snippets)
        result.notices = self._notices(parsed, ranked.index, found=bool(result.hits))
        if not result.hits and parsed.authors and not self.corpus.has_authors():
            result.notices.append("No paper here lists its authors, so `author:` finds none.")
        if not result.hits:
            result.suggestions = self._suggestions(parsed)
        return result

    def count(self, query: str) -> int:
        """How many papers a query matches (raises QueryError for an unusable query)."""
        return self._rank(parse_query(query), 0, 0, count=True).total

    def unmentioned(self, query: str) -> list[str]:
        """The query's words no paper mentions (raises QueryError for an unusable query): a
        topic naming them matches on its other words until papers with them come."""
        return _unmentioned(parse_query(query), self.index)

    def similar(self, paper_id: str, limit: int = 5, offset: int = 0) -> SearchResult:
        """More like this: the paper's strongest terms, as a query, without the paper itself."""
        result = SearchResult(query=f"similar:{paper_id}", offset=offset)
        if not paper_id.strip():
            result.error = "Give a paper's id: each result shows it (`id ...`)."
            return result
        index = self.index
        rowid = self.corpus.rowid_of(paper_id)
        doc = index.doc_of_rowid(rowid) if rowid is not None else None
        if doc is None:
            result.error = f"There is no paper with id `{paper_id}` in the corpus."
            return result
        terms, values = index.doc_vector(doc)
        top = np.argsort(-values)[:SIMILAR_TERMS]
        term_ids, weights = terms[top].astype(np.int64), values[top]
        weights = weights / np.linalg.norm(weights)
        candidates, scores = index.score(term_ids, weights)
        others = candidates != doc
        ranked = self._top(candidates[others], scores[others], limit, offset, term_ids, weights)
        ranked.index = index
        result.total = ranked.total
        result.hits = self._hits(ranked, None, snippets=True)
        return result

    def paper(self, paper_id: str) -> dict[str, Any] | None:
        return self.corpus.get(paper_id)

    # -- internals -------------------------------------------------------------------------

    def _rank(
        self,
        query: Query,
        limit: int,
        offset: int,
        coordinate: bool = True,
        prune: bool = False,
        index: Index | None = None,
        count: bool = False,
    ) -> _Ranked:
        """The page asked for, from ``index`` (default: ``self.index``). With ``prune``,
        MaxScore skips the posting lists that cannot change the page; exhaustive when
        nothing can be skipped anyway. A pruned page's ``total`` is only the number of
        papers scored, unless ``count``: then the matching papers are counted apart
        (``Index.count_matching``), which costs a fraction of scoring them all."""
        index = self.index if index is None else index
        ranked_terms = analyze(query.ranked_text)
        term_ids, weights = index.vectorize(ranked_terms)
        if not ranked_terms and not query.has_filters:
            if query.excluded and not (query.words or query.phrases):
                raise QueryError(
                    "A query needs at least one word to look for besides exclusions, "
                    "like `diffusion -survey`."
                )
            if query.words or query.phrases:
                raise QueryError(
                    "That query has nothing I can look for: only very common words (like “the” "
                    "or “of”), symbols or overlong strings. Try a specific term, like "
                    '`diffusion` or `"graph neural networks"`.'
                )
            raise QueryError("Type a few keywords to look for, like `diffusion models`.")

        passes = self._passes(index, query)
        want = limit + offset
        if count and not want and len(term_ids):  # how many, and no page (``count``)
            total = index.count_matching(term_ids, passes)
            return _Ranked(
                np.zeros(0, np.int64), np.zeros(0, np.float32), total, term_ids, weights, index
            )
        if (
            prune
            and len(term_ids) >= 1
            and 0 < want <= PRUNE_MAX_K
            and (PRUNE_MIN_POSTINGS <= 0 or index.df[term_ids].sum() >= PRUNE_MIN_POSTINGS)
        ):
            found = index.top_candidates(term_ids, weights, want, passes, coordinate)
            if found is not None:
                total = index.count_matching(term_ids, passes) if count else None
                ranked = self._top(*found, limit, offset, term_ids, weights, total)
                ranked.index = index
                return ranked
        coordinated = coordinate and len(term_ids) > 1 and limit + offset > 0
        matched = None
        if coordinated and index.n_docs <= COUNT_MATCHES_UP_TO:
            # Each paper's number of query terms, counted from the product's own lists.
            candidates, scores, matched = index.score(term_ids, weights, matched=True)
        elif ranked_terms:
            candidates, scores = index.score(term_ids, weights)
        else:  # filters only: every paper that passes them, newest first
            candidates = index.live_docs()
            scores = np.asarray(index.years[candidates], dtype=np.float32) / 10_000
        keep = passes(candidates)
        if not keep.all():
            candidates, scores = candidates[keep], scores[keep]
            matched = matched[keep] if matched is not None else None
        total = len(candidates)
        if coordinated:

            def matched_of(positions: np.ndarray | None, docs=candidates, counts=matched):
                """How many query terms these of the candidates (None: all) have: counted
                already, or (a large corpus) looked up in the lists now (bisection)."""
                if counts is not None:
                    return counts if positions is None else counts[positions]
                return index.matched_terms(term_ids, docs if positions is None else docs[positions])

            candidates, scores = self._coordinate(
                candidates, scores, matched_of, len(term_ids), want
            )
        ranked = self._top(candidates, scores, limit, offset, term_ids, weights, total)
        ranked.index = index
        return ranked

    @staticmethod
    def _coordinate(candidates, scores, matched, n_query: int, want: int):
        """Scale scores by the squared share of the query's terms each paper contains.

        A paper with all the query's terms then outranks one with most of them (Lucene's old
        "coord" factor; dev nDCG@10 0.333 -> 0.339). Scaling only lowers scores, so it is
        enough to scale a pool of the best raw scores, as long as the pool's lowest raw score
        is below the want-th best scaled one; otherwise every candidate is scaled.
        ``matched(positions)``: how many of the query's ``n_query`` terms those of the
        candidates have (None: all of them).
        """
        n_terms = np.float32(n_query)
        want = min(want, len(candidates))
        pool = min(len(candidates), max(4 * want, 64))
        if pool < len(candidates):
            top = _best(scores, pool, candidates)
            share = matched(top) / n_terms
            scaled = scores[top] * share * share
            bar = np.partition(scaled, pool - want)[pool - want]
            if scores[top].min() < bar:
                return candidates[top], scaled
        share = matched(None) / n_terms
        return candidates, scores * share * share

    @staticmethod
    def _top(candidates, scores, limit, offset, term_ids, weights, total=None) -> _Ranked:
        """The page ``[offset, offset + limit)`` of the candidates, best first.

        ``total`` is the number of matches when ``candidates`` is only a pool of the best.
        """
        n = len(candidates)
        total = n if total is None else total
        want = min(limit + offset, n)
        if want <= 0:
            empty = np.zeros(0, np.int64)
            return _Ranked(empty, np.zeros(0, np.float32), total, term_ids, weights)
        # Ties broken by document number so pages never overlap or skip.
        if n > SORT_ALL:  # sort only a pool that holds the page (and every tie at its end)
            if n > 32 * want:  # every score at or above a sample's want-th best
                pool = _sampled_pool(scores, want)
            else:  # every score at or above the want-th best (one partition, no _best)
                pool = np.flatnonzero(scores >= np.partition(scores, n - want)[n - want])
            if len(pool) > SORT_ALL:  # (many ties)
                pool = _best(scores, want, candidates)
            candidates, scores = candidates[pool], scores[pool]
        order = np.lexsort((candidates, -scores))[offset:want]
        return _Ranked(candidates[order], scores[order], total, term_ids, weights)

    def _docs_with_phrase(self, index: Index, phrase: str) -> np.ndarray:
        """Documents containing the phrase's words next to each other.

        Through the bigrams' posting lists when they are all in the vocabulary; a rare bigram
        (in one paper only, so not indexed) falls back to checking the text of the papers
        that contain all the words.
        """
        tokens = words(phrase)
        if not tokens:
            return np.arange(index.n_docs)
        if len(tokens) == 1:
            return index.docs_with_all([index.vocab.id_of(tokens[0])])
        bigrams = [f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False)]
        bigram_ids = [index.vocab.id_of(t) for t in bigrams]
        if min(bigram_ids) >= 0:
            return index.docs_with_all(bigram_ids)
        candidates = index.docs_with_all(index.vocab.id_of(t) for t in tokens)[:PHRASE_CHECK_LIMIT]
        rowids = [int(index.rowids[d]) for d in candidates]
        wanted = " ".join(tokens)
        keep = [
            doc
            for doc, paper in zip(candidates, self.corpus.by_rowids(rowids), strict=True)
            if f" {wanted} "
            in " " + " ".join(words(f"{paper['title']}\n{paper['abstract']}")) + " "
        ]
        return np.asarray(keep, dtype=np.int64)

    def _passes(self, index: Index, query: Query) -> Callable[[np.ndarray], np.ndarray]:
        """Which of some documents pass the query's phrases, exclusions and venue, year and
        author filters: a function (the pruned lookup asks for a few documents at a time),
        whose document sets are looked up once. A venue no paper is from passes none (a
        notice names the venues there are; a topic on it waits for its papers)."""
        if not (query.phrases or query.excluded or query.has_filters):
            return _keep_all
        codes = None
        if query.venues:
            wanted = {v.lower() for v in query.venues}
            codes = [i for i, name in enumerate(index.venues) if name.lower() in wanted]
            if not codes:
                return _keep_none
        sets: list[tuple[np.ndarray, bool]] | None = None

        def doc_sets() -> list[tuple[np.ndarray, bool]]:
            nonlocal sets
            if sets is None:
                sets = [(self._docs_with_phrase(index, p), True) for p in query.phrases]
                sets += [(self._docs_with_phrase(index, e), False) for e in query.excluded]
                sets += [
                    (index.docs_of_rowids(self.corpus.rowids_by_author(a)), True)
                    for a in query.authors
                ]
                # Ascending for ``members`` (they mostly are already: one pass then).
                sets = [(np.sort(docs, kind="stable"), inside) for docs, inside in sets]
            return sets

        def passes(candidates: np.ndarray) -> np.ndarray:
            keep = np.ones(len(candidates), dtype=bool)
            for docs, inside in doc_sets():
                keep &= members(candidates, docs) == inside
            if codes is not None:
                keep &= np.isin(index.venue_codes[candidates], codes)
            if query.year_from is not None or query.year_to is not None:
                years = index.years[candidates]
                if query.year_from is not None:
                    keep &= years >= query.year_from
                if query.year_to is not None:
                    keep &= years <= query.year_to
            return keep

        passes.keeps_all = False
        return passes

    def _hits(self, ranked: _Ranked, query: Query | None, snippets: bool) -> list[Hit]:
        index = ranked.index
        rowids = index.rowids[ranked.docs].tolist()
        papers = self.corpus.by_rowids(rowids)
        marked = set(words(query.ranked_text)) if query else set()
        hits = []
        docs = ranked.docs.tolist()
        contributions = index.contributions(docs, ranked.term_ids, ranked.weights)
        for score, paper, given in zip(ranked.scores, papers, contributions, strict=True):
            why = [term for term, _ in given][:WHY_TERMS]
            terms = marked or {w for t in why for w in t.split()}
            hits.append(
                Hit(
                    paper=paper,
                    score=float(score),
                    snippet=make_snippet(paper["abstract"] or paper["title"], terms)
                    if snippets
                    else [],
                    why=why,
                )
            )
        return hits

    @staticmethod
    def _notices(query: Query, index: Index, found: bool) -> list[str]:
        """What the user should know about how the query was read ("Missing: ...")."""
        notices = []
        for name in dict.fromkeys(query.not_filters):
            notices.append(
                f"`{name}:` is not a filter, so it was looked up as words (filters are "
                "`venue:`, `year:` and `author:`)."
            )
        missing = _unmentioned(query, index)
        quoted = ", ".join(f"“{w}”" for w in missing)
        if missing and found:
            notices.append(f"No paper mentions {quoted}; results match the other words.")
        elif len(missing) > 1:
            notices.append(f"No paper mentions any of {quoted}.")
        elif missing and len(query.words) > 1:  # (the only word: "No papers match" names it)
            notices.append(f"No paper mentions {quoted}.")
        wanted = {v.lower() for v in query.venues}
        if wanted and not any(v.lower() in wanted for v in index.venues):
            known = ", ".join(v for v in index.venues if v) or "none"
            notices.append(
                f"No paper here is from venue `{', '.join(query.venues)}` (yet). "
                f"Venues here: {known}."
            )
        if not found and (query.year_from or query.year_to):
            years = np.asarray(index.years)
            years = years[years > 0]
            if len(years):
                notices.append(f"Papers here are from {years.min()} to {years.max()}.")
            else:
                notices.append("No paper here has a year, so `year:` finds none.")
        return notices

    def _suggestions(self, query: Query) -> list[str]:
        out = []
        if query.has_filters and query.without_filters() and self._finds(query.without_filters()):
            out.append(f"{query.without_filters()}")
        vocab = self.index.vocab
        fixed, changed = [], False
        for word in query.words:
            tokens = words(word)
            token = tokens[0] if len(tokens) == 1 else None
            if token and vocab.id_of(token) < 0 and len(token) > 3:
                close = difflib.get_close_matches(
                    token, vocab.with_prefix(token[:2]), n=1, cutoff=0.75
                )
                if close:
                    fixed.append(close[0])
                    changed = True
                    continue
            fixed.append(word)
        if changed:
            out.append(" ".join(fixed))
        if query.phrases and not query.has_filters:
            unquoted = " ".join(query.words + query.phrases)
            if self._finds(unquoted):
                out.append(unquoted)
        return [s for s in dict.fromkeys(out) if s and s != query.text]

    def _finds(self, query: str) -> bool:
        """Whether a suggestion would find papers (none is offered that leads nowhere)."""
        try:
            return self.count(query) > 0
        except QueryError:
            return False


class _IdTable:
    """Every paper's id by rowid, for ``rank``: read once from the primary key's index (a
    covering scan) and extended by the rows added since. A paper's rowid and id never
    change (papers are updated in place, never deleted: a new row's rowid is above every
    other), so only new rows are ever missing, and they come with the highest rowids."""

    def __init__(self, rowids: np.ndarray, starts: np.ndarray, ends: np.ndarray, blob: bytes):
        #: (rowids ascending, where each one's UTF-8 id starts and ends in the blob, blob,
        #: the first rowid when they are every one from it on (else None), the starts and
        #: ends as memoryviews), one tuple replaced whole, so a thread always reads one
        #: consistent state.
        self._state = self._state_of(rowids, starts, ends, blob)
        self._lock = threading.Lock()

    @staticmethod
    def _state_of(rowids: np.ndarray, starts: np.ndarray, ends: np.ndarray, blob: bytes) -> tuple:
        """The state tuple; rowids without gaps (the usual table: rows are never deleted)
        are found by subtraction, and the memoryviews give Python ints without a numpy call."""
        dense = len(rowids) and int(rowids[-1]) - int(rowids[0]) == len(rowids) - 1
        first = int(rowids[0]) if dense else None
        return (rowids, starts, ends, blob, first, memoryview(starts), memoryview(ends))

    @classmethod
    def read(cls, conn: sqlite3.Connection) -> _IdTable:
        table = cls(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), b"")
        table._add(conn.execute("select rowid, id from papers"))
        return table

    def _extend(self, conn: sqlite3.Connection) -> None:
        """Add the rows added since (above the last rowid known), one thread at a time."""
        with self._lock:
            known = self._state[0]
            last = int(known[-1]) if len(known) else 0
            self._add(conn.execute("select rowid, id from papers where rowid > ?", [last]))

    def _add(self, cursor: sqlite3.Cursor, chunk: int = 8192) -> None:
        """Add these (rowid, id) rows, all above those known, a chunk at a time (no list
        of every row at once). The caller holds the lock, or is the table's only user."""
        rowids, lengths, blobs = [], [], []
        while rows := cursor.fetchmany(chunk):
            rowids.append(np.fromiter((row[0] for row in rows), np.int64, len(rows)))
            encoded = [row[1].encode() for row in rows]
            lengths.append(np.fromiter(map(len, encoded), np.int64, len(rows)))
            blobs.append(b"".join(encoded))
        if not rowids:
            return
        old_rowids, old_starts, old_ends, old_blob = self._state[:4]
        new_rowids = np.concatenate(rowids)
        sizes = np.concatenate(lengths)
        ends = np.cumsum(sizes) + len(old_blob)
        order = np.argsort(new_rowids, kind="stable")  # (the first scan is in id order)
        self._state = self._state_of(
            np.concatenate([old_rowids, new_rowids[order]]),
            np.concatenate([old_starts, (ends - sizes)[order].astype(np.int32)]),
            np.concatenate([old_ends, ends[order].astype(np.int32)]),
            old_blob + b"".join(blobs),
        )

    def ids(self, rowids: list[int], conn: sqlite3.Connection) -> list[str] | None:
        """The ids of these rowids, in this order; the rows added since are read first when
        one is unknown, and None (ask SQL) when one still is."""
        if not rowids:
            return []
        for attempt in range(2):
            known, starts, ends, blob, first, begin, end = self._state
            # Rowids without gaps: a page's few found by subtraction (no numpy call).
            if first is not None and first <= min(rowids) and max(rowids) < first + len(known):
                return [blob[begin[r - first] : end[r - first]].decode() for r in rowids]
            wanted = np.asarray(rowids, dtype=np.int64)
            at = np.minimum(known.searchsorted(wanted), max(len(known) - 1, 0))
            if len(known) and (known[at] == wanted).all():
                return [
                    blob[a:b].decode()
                    for a, b in zip(starts[at].tolist(), ends[at].tolist(), strict=True)
                ]
            if attempt == 0:
                self._extend(conn)
        return None


class _WalIndex:
    """The header of SQLite's WAL index (the database's ``-shm`` file), which every commit
    changes (its change counter and last frame), read with one ``pread``: while it is the
    same, so is the corpus version read after it. SQLite removes or resets that file only
    when no connection has the database open, so this keeps one open (idle: it holds no
    read lock, checkpoints go on)."""

    HEADER = 48  # the first of its two copies (``WalIndexHdr``)

    def __init__(self, pin: sqlite3.Connection, fd: int):
        self._pin, self._fd = pin, fd
        weakref.finalize(self, _close_wal_index, pin, fd)

    @classmethod
    def open(cls, db_path: Path) -> _WalIndex | None:
        """None when the database is not in WAL mode or its index cannot be read."""
        pin = None
        db_path = db_path.resolve()  # (SQLite keeps the -shm beside the file links lead to)
        try:
            uri = db_path.as_uri() + "?mode=ro"
            pin = sqlite3.connect(uri, uri=True, check_same_thread=False)
            ((mode,),) = pin.execute("PRAGMA journal_mode").fetchall()
            pin.execute("select count(*) from sqlite_master").fetchall()  # (maps the index)
            if mode != "wal":
                raise OSError("not in WAL mode")
            fd = os.open(f"{db_path}-shm", os.O_RDONLY | os.O_CLOEXEC)
        except (OSError, sqlite3.Error):
            if pin is not None:
                pin.close()
            return None
        return cls(pin, fd)

    def header(self) -> bytes | None:
        try:
            data = os.pread(self._fd, self.HEADER, 0)
        except OSError:
            return None
        return data if len(data) == self.HEADER else None


def _close_wal_index(pin: sqlite3.Connection, fd: int) -> None:
    with contextlib.suppress(OSError, sqlite3.Error):
        os.close(fd)
        pin.close()


@dataclass
class _FailedBuild:
    """``<index>.failed``: when the last index build failed, so no process retries too soon."""

    path: Path

    def read(self) -> tuple[float, float, str] | None:
        try:
            data = json.loads(self.path.read_text())
            return float(data["retry_after"]), float(data["delay"]), str(data["message"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write_failure(self, failure: tuple[float, float, str]) -> None:
        retry_after, delay, message = failure
        with contextlib.suppress(OSError):  # a disk too full: this process still backs off
            self.path.write_text(
                json.dumps({"retry_after": retry_after, "delay": delay, "message": message})
            )

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)


def _best(scores: np.ndarray, k: int, docs: np.ndarray) -> np.ndarray:
    """Positions of the ``k`` highest scores, in no particular order; among scores tied with
    the k-th best, those of the lowest ``docs`` (the callers order ties by document too, so
    pages of equal scores neither overlap nor skip)."""
    n = len(scores)
    if k >= n:
        return np.arange(n)
    pool = _sampled_pool(scores, k) if n > 64 * k else np.arange(n)
    kth = np.partition(scores[pool], len(pool) - k)[len(pool) - k]
    better = pool[scores[pool] > kth]
    tied = pool[scores[pool] == kth]
    tied = tied[np.argsort(docs[tied], kind="stable")]
    return np.concatenate([better, tied[: k - len(better)]])


def _keep_all(candidates: np.ndarray) -> np.ndarray:
    """``Engine._passes`` of a query without phrases, exclusions or filters."""
    return np.ones(len(candidates), dtype=bool)


def _keep_none(candidates: np.ndarray) -> np.ndarray:
    """``Engine._passes`` of a query on a venue no paper is from."""
    return np.zeros(len(candidates), dtype=bool)


#: Nothing to filter: callers may skip the call (and its array of True).
_keep_all.keeps_all = True


def _sampled_pool(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of every score at or above the k-th best of every 16th score: a bar that at
    least k scores clear, so the best k (and all their ties) are among these few, found
    without a pass over all the scores to partition them. ``len(scores) > 16 * k``."""
    sample = scores[::16]
    bar = np.partition(sample, len(sample) - k)[len(sample) - k]
    return np.flatnonzero(scores >= bar)


def _papers_of(stream, file_report: FileReport) -> Iterable[Paper]:
    """The stream's papers; its rejected records are noted in ``file_report`` on the way."""
    for item in stream.items:
        if isinstance(item, Paper):
            file_report.papers += 1
            yield item
        else:
            file_report.rejected.append(item)


def snippet_words(text: str) -> tuple[list[tuple[int, int, str]], bool]:
    """What ``make_snippet`` reads of ``text`` whatever the terms: the words of its first
    ``SNIPPET_SCAN_CHARS`` (``surface_words``, a half word at the cut dropped), and whether
    it was cut. Most of a snippet's cost: the digest batch reads each abstract once for all
    the terms it is shown with (``scanned=``)."""
    cut = len(text) > SNIPPET_SCAN_CHARS
    spans = surface_words(text[:SNIPPET_SCAN_CHARS])
    if cut and spans:
        spans.pop()  # perhaps half a word
    return spans, cut


def make_snippet(
    text: str,
    terms: set[str],
    max_words: int = SNIPPET_WORDS,
    *,
    scanned: tuple[list[tuple[int, int, str]], bool] | None = None,
) -> list[tuple[str, bool]]:
    """The window of ``text`` richest in query terms, as (piece, matched) pairs.

    Linear in the text: one pass over its words and one sliding window over the matched
    ones; and only the first ``SNIPPET_SCAN_CHARS`` are read, so a paper stored before the
    ingest size limit, with megabytes of "abstract", costs a lookup no more than a long one.
    ``scanned``: ``snippet_words(text)`` when already read (it is not changed here).
    """
    spans, cut = snippet_words(text) if scanned is None else scanned
    if not spans:
        return [(text[:300], False)] if text else []
    hits = [i for i, (_, _, norm) in enumerate(spans) if norm and norm in terms]
    start = 0
    if hits and len(spans) > max_words:
        start = _richest_window(hits, [spans[i][2] for i in hits], max_words)
    end = min(len(spans), start + max_words)
    more = end < len(spans) or cut
    char_start = spans[start][0]
    char_end = spans[end - 1][1] if more else len(text)
    pieces: list[tuple[str, bool]] = []
    if char_start > 0:
        pieces.append(("…", False))
    cursor = char_start
    for i in range(start, end):
        s, e, norm = spans[i]
        if norm and norm in terms:
            if s > cursor:
                pieces.append((text[cursor:s], False))
            pieces.append((text[s:e], True))
            cursor = e
    if char_end > cursor:
        pieces.append((text[cursor:char_end], False))
    if more:
        pieces.append(("…", False))
    return pieces


def _richest_window(hits: list[int], norms: list[str], width: int) -> int:
    """The first word of the window with the most distinct matched terms.

    Windows start 5 words before a matched word; the earliest of the best wins. ``hits`` are
    the matched words' positions (ascending), ``norms`` their terms. Both ends of the window
    only move forward, so this is linear in the number of matches.
    """
    counts: dict[str, int] = {}
    best, best_count = 0, -1
    lo = hi = 0
    for first in hits:
        window_start = max(0, first - 5)
        while hi < len(hits) and hits[hi] < window_start + width:
            counts[norms[hi]] = counts.get(norms[hi], 0) + 1
            hi += 1
        while hits[lo] < window_start:
            counts[norms[lo]] -= 1
            if not counts[norms[lo]]:
                del counts[norms[lo]]
            lo += 1
        if len(counts) > best_count:
            best, best_count = window_start, len(counts)
    return best


def _unmentioned(query: Query, index: Index) -> list[str]:
    """The query's words that are in no paper (not in the index's vocabulary), each once."""
    missing = [w for w in query.words if (t := words(w)) and index.vocab.id_of(t[0]) < 0]
    return list(dict.fromkeys(missing))
