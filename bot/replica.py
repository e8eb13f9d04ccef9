"""The corpus on every host: each process's corpus file and index follow the shared corpus.

With ``DATABASE_URL`` set, papers live in the state's database too (``bot/state/
shared_corpus.py``). Every ingest (``paperboy ingest`` anywhere, the clock's feeds) writes
its papers to the local corpus as always and then **publishes** them to the shared corpus;
every process that searches keeps its local SQLite corpus and index as a **replica**: a
daemon thread pulls the rows above its high-water mark every ``PAPERBOY_CORPUS_SYNC_SECONDS``
and applies them through the engine's delta path (``Engine.replicate``), so a day's feed
costs a delta segment, not a rebuild. A fresh host (empty disk) loads the whole shared
corpus once, builds the index once, then follows. Without ``DATABASE_URL`` nothing here
does anything: the corpus file is the corpus.

Two numbers live in the corpus file's ``meta`` table, written in the same transaction as
the papers they describe: ``shared_corpus_seq`` (the highest shared ``seq`` applied here)
and ``shared_corpus_published`` (the local corpus version whose changes are all in the
shared corpus, so a publish that failed is retried by the next one).

A layer of its own between ``digest`` and the engine and state store: it knows papers and
stores, nothing of members or Slack.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.engine.corpus import Corpus, UpsertCounts, write_transaction
from bot.engine.paper import Paper
from bot.engine.search import Engine
from bot.state import configured
from bot.state.shared_corpus import PAGE, SharedCorpus

log = logging.getLogger(__name__)

#: The corpus file's ``meta`` keys (see the module docstring).
POSITION = "shared_corpus_seq"
PUBLISHED = "shared_corpus_published"
#: The default interval between two pulls (``PAPERBOY_CORPUS_SYNC_SECONDS``).
SYNC_SECONDS = 15


def shared_corpus() -> SharedCorpus | None:
    """The shared corpus of this process's ``DATABASE_URL``; None when the state (and so the
    corpus) is the local SQLite file."""
    store = configured()
    return SharedCorpus(store) if store is not None else None


def open_engine(db_path: str | Path, seed_dir: str | Path | None, *, create: bool = True) -> Engine:
    """``Engine.open`` for a process that may share its corpus: a new local corpus is filled
    from ``seed_dir`` only while the shared corpus is empty (otherwise it is loaded from
    there), and an empty shared corpus is seeded from this host's papers, once."""
    shared = shared_corpus()
    if shared is None:
        return Engine.open(db_path, seed_dir=seed_dir, create=create)
    empty = shared.head() == 0
    engine = Engine.open(db_path, seed_dir=seed_dir if empty else None, create=create)
    if empty and seed_dir and not engine.read_only and engine.corpus.count():
        seed_shared(engine, shared)
    return engine


def seed_shared(engine: Engine, shared: SharedCorpus) -> UpsertCounts | None:
    """Publish this host's papers when the shared corpus has none (None when it has some:
    another process seeded it first; both may try at once, one wins)."""
    corpus = engine.corpus
    version = corpus.version
    done = shared.publish(corpus.papers_changed_since(-1), only_if_empty=True)
    if done is not None:
        _mark_published(engine, version, shared.published_seqs)
        log.info("shared corpus: seeded with this host's %s papers", f"{done.added:,}")
    return done


def publish(engine: Engine, shared: SharedCorpus | None = None) -> UpsertCounts | None:
    """Share what this host's corpus has that the shared corpus may not (after an ingest):
    the papers changed since the last publish. None without a shared corpus; raises the
    state's ``StateUnavailable`` when it does not answer (the next publish retries)."""
    shared = shared or shared_corpus()
    if shared is None or engine.read_only:
        return None
    corpus = engine.corpus
    version = corpus.version
    since = int(corpus.get_meta(PUBLISHED) or 0)
    if version <= since:
        return UpsertCounts()
    done = shared.publish(corpus.papers_changed_since(since))
    _mark_published(engine, version, shared.published_seqs)
    return done


def _mark_published(engine: Engine, version: int, seqs: tuple[int, int] | None) -> None:
    """Note the local corpus version now in the shared corpus; and, when this host had
    applied every shared row before its own (``seqs``: the head the publish found, and its
    last row), that it has the new rows too: they are its own papers, so ``stats`` on the
    host that ingested does not call it behind."""
    with write_transaction(engine.db):
        corpus = engine.corpus
        if int(corpus.get_meta(PUBLISHED) or 0) < version:
            corpus.set_meta(PUBLISHED, str(version))
        if seqs is not None and int(corpus.get_meta(POSITION) or 0) == seqs[0] < seqs[1]:
            corpus.set_meta(POSITION, str(seqs[1]))


class Replica:
    """This process's corpus file following the shared corpus: ``sync`` once, or ``start``
    a daemon thread that syncs every ``interval`` seconds. ``status`` is for health."""

    def __init__(
        self, engine: Engine, shared: SharedCorpus, *, interval: float = SYNC_SECONDS
    ) -> None:
        self.engine = engine
        self.shared = shared
        self.interval = interval
        self.page = PAGE
        self.shared_head: int | None = None  # the shared corpus's seq when last asked
        self.searchable: int | None = None  # the position whose papers lookups find here
        self.applied = 0  # rows applied by the sync running now (progress while catching up)
        self.synced_once = False
        self.last_sync: str | None = None
        self.error: str | None = None
        self._sync_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def position(self) -> int:
        """The highest shared ``seq`` this host has applied."""
        return int(self.engine.corpus.get_meta(POSITION) or 0)

    def sync(self) -> UpsertCounts | None:
        """Apply every shared row above this host's position (in pages; one local
        transaction; one delta segment, or the first build); None when there was nothing."""
        with self._sync_lock:
            head = self.shared.head()
            self.shared_head = head
            after = self.position()
            if head <= after:
                self.searchable = after
                self._synced()
                return None
            added_at: dict[str, str | None] = {}
            self.applied = 0
            started = time.perf_counter()

            def papers() -> Iterator[Paper]:
                for row in self.shared.changes(after, head, self.page):
                    added_at[row.paper.id] = row.added_at
                    self.applied += 1
                    yield row.paper

            def record(corpus: Corpus, before: int) -> None:
                corpus.set_meta(POSITION, str(head))
                # Papers that came from the shared corpus need no publishing back, unless
                # this host had unpublished changes of its own before them.
                if int(corpus.get_meta(PUBLISHED) or 0) >= before:
                    corpus.set_meta(PUBLISHED, str(corpus.version))

            counts = self.engine.replicate(papers(), added_at, record)
            self.searchable = head  # saved, and in the index that lookups now read
            self._synced()
            if counts.changed:
                log.info(
                    "shared corpus: %s added, %s updated (now at %s) in %.1f s",
                    f"{counts.added:,}",
                    f"{counts.updated:,}",
                    head,
                    time.perf_counter() - started,
                )
            return counts

    def _synced(self) -> None:
        self.synced_once = True
        self.error = None
        self.last_sync = datetime.now(UTC).isoformat(timespec="seconds")

    def catch_up(self) -> None:
        """The first sync, at start: its failure is logged (the thread retries), so a host
        whose corpus is behind still serves what it has."""
        try:
            self.sync()
        except Exception as error:  # noqa: BLE001 - any failure: one line, retried later
            self._failed(error)

    def start(self) -> Replica:
        """Sync every ``interval`` seconds on a daemon thread until ``stop``."""
        global _current
        _current = self
        self._thread = threading.Thread(target=self._run, name="corpus-sync", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as error:  # noqa: BLE001 - the database down, a full disk: retried
                self._failed(error)

    def _failed(self, error: Exception) -> None:
        message = str(getattr(error, "message", None) or error).strip().splitlines()[0]
        if message != self.error:  # once per distinct failure, not every interval
            log.error(
                "shared corpus: could not sync (%s); trying again in %d s", message, self.interval
            )
        self.error = message

    @property
    def catching_up(self) -> bool:
        """True until the first sync has landed (a fresh host loading the shared corpus)."""
        return not self.synced_once

    def status(self) -> dict[str, Any]:
        """How far behind the shared corpus this host is (``/healthz``, ``paperboy stats``)."""
        # Papers are committed a moment before the index holding them is published: until
        # then they are not searchable here, and the position does not claim them.
        position = self.searchable if self.searchable is not None else self.position()
        head = self.shared_head if self.shared_head is not None else position
        body: dict[str, Any] = {
            "position": position,
            "shared": head,
            "behind": max(head - position, 0),
            "last_sync": self.last_sync,
        }
        if self.catching_up:
            body["loaded"] = self.applied
        if self.error:
            body["error"] = self.error
        return body


_current: Replica | None = None


def current() -> Replica | None:
    """This process's replica, once ``follow`` has made one (None without DATABASE_URL)."""
    return _current


def follow(engine: Engine, interval: float = SYNC_SECONDS) -> Replica | None:
    """Catch up with the shared corpus now (blocking), then keep following it on a daemon
    thread. None (and nothing started) without a shared corpus."""
    global _current
    shared = shared_corpus()
    if shared is None or engine.read_only:
        return None
    replica = Replica(engine, shared, interval=interval)
    _current = replica  # /healthz shows the catch-up while it runs
    replica.catch_up()
    return replica.start()


def catch_up(engine: Engine) -> Replica | None:
    """One sync now, no thread (``paperboy digest send``: one tick on an up-to-date corpus)."""
    shared = shared_corpus()
    if shared is None or engine.read_only:
        return None
    replica = Replica(engine, shared)
    replica.catch_up()
    return replica


def lag(engine: Engine) -> dict[str, int] | None:
    """This host's position against the shared corpus's head, asked now (``paperboy stats``);
    None without a shared corpus."""
    shared = shared_corpus()
    if shared is None:
        return None
    position = int(engine.corpus.get_meta(POSITION) or 0)
    head = shared.head()
    return {"position": position, "shared": head, "behind": max(head - position, 0)}
