"""The shared corpus: every paper, in the state's database, for hosts that share no disk.

With ``DATABASE_URL`` set, papers live in PostgreSQL too (table ``corpus_papers``, revision
``s030_corpus``), and each process keeps its SQLite corpus file and index as a replica that
follows them (``bot/replica.py``). Every row carries ``seq``, a number from one sequence
that goes up with every change to a row: a replica asks for the rows with ``seq`` above the
highest one it has applied, in ``seq`` order, a page at a time.

Why readers never miss a row: writers take one lock for their whole transaction (PostgreSQL:
an advisory transaction lock; SQLite: its write lock) and number their rows above the
highest ``seq`` committed, so rows become visible in ``seq`` order; a reader that has seen
``seq`` N will never later find a committed row below N. Unchanged papers (same content hash)
keep their ``seq``, so re-publishing a corpus costs a comparison and bumps nothing. The
corpus has no deletions (a changed paper is updated in place), so neither does this table.

An arXiv paper's version travels with it (``arxiv_version``, ``arxiv_updated``: revision
``s050_corpus_arxiv_version``, as ``papers`` keeps them locally since corpus migration m080):
a publish of an older version than the row's (a host that read a v2 dump after v3 was
shared) leaves the row as it is, and a replica's ``Corpus.upsert`` compares the version it
receives with its own in the same way, so a newer version replaces an older everywhere and
an older one nowhere.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    bindparam,
    func,
    select,
    text,
)

from bot.engine.corpus import UpsertCounts, arxiv_version, utcnow
from bot.engine.formats.arxiv_atom import is_older, stored_paper
from bot.engine.paper import Paper

from .store import StateStore

metadata = MetaData()

corpus_papers = Table(
    "corpus_papers",
    metadata,
    Column("id", Text, primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("venue", Text),
    Column("year", Integer),
    Column("title", Text, nullable=False),
    Column("title_derived", Integer),
    Column("abstract", Text),
    Column("authors", Text),  # JSON list, as in the corpus file
    Column("keywords", Text),  # JSON list
    Column("url", Text),
    Column("content_hash", Text),
    Column("added_at", Text),  # when the paper first reached the shared corpus (digests)
    Column("updated_at", Text),
    # The arXiv version the row was published from and its <updated> (revision s050); NULL
    # when not known (not from arXiv, or read without one). Not part of the content hash.
    Column("arxiv_version", Integer),
    Column("arxiv_updated", Text),
    Index("idx_corpus_papers_seq", "seq", unique=True),
)

#: The advisory lock every writer of ``corpus_papers`` holds (PostgreSQL).
PUBLISH_LOCK = 7357030
#: Rows per statement when writing, and per page when reading.
WRITE_BATCH = 1000
PAGE = 2000


@dataclass
class SharedPaper:
    """A row of the shared corpus: the paper, its ``seq`` and when it was first added."""

    paper: Paper
    seq: int
    added_at: str | None


class SharedCorpus:
    """The ``corpus_papers`` table of a state store (SQLite or PostgreSQL alike)."""

    def __init__(self, store: StateStore):
        self.store = store
        self.published_seqs: tuple[int, int] | None = None  # the last publish's (see there)

    def head(self) -> int:
        """The highest ``seq`` committed (0 for an empty shared corpus)."""
        with self.store.read() as conn:
            return int(
                conn.execute(select(func.coalesce(func.max(corpus_papers.c.seq), 0))).scalar()
            )

    def count(self) -> int:
        with self.store.read() as conn:
            return int(conn.execute(select(func.count()).select_from(corpus_papers)).scalar())

    def publish(
        self, papers: Iterable[tuple[Paper, str | None]], *, only_if_empty: bool = False
    ) -> UpsertCounts | None:
        """Upsert ``(paper, added_at)`` pairs by id, in one transaction; a changed paper gets
        a new ``seq``, an unchanged one keeps its row as it is, and so does an older arXiv
        version than the row's (``is_older``; the same paper with a version not known before
        keeps its ``seq`` too, its version noted). The counts are the corpus file's own
        (papers new to the shared corpus, changed ones, unchanged ones).

        ``only_if_empty``: seeding the shared corpus from a host's own papers, which happens
        once: None (and nothing written) when it has papers already, also when another
        process seeded it a moment before (the check is made holding the writers' lock).

        ``published_seqs`` is then ``(head, last)``: the head it found, holding the lock, and
        the last ``seq`` it gave; the rows between are all this publish's.
        """
        counts = UpsertCounts()
        now = utcnow()
        self.published_seqs = None
        with self.store.write() as conn:
            if self.store.is_postgres:
                conn.execute(text("select pg_advisory_xact_lock(:k)"), {"k": PUBLISH_LOCK})
            if only_if_empty and conn.execute(select(corpus_papers.c.id).limit(1)).first():
                return None
            head = conn.execute(select(func.coalesce(func.max(corpus_papers.c.seq), 0))).scalar()
            seq = int(head)
            batch: list[tuple[Paper, str | None]] = []

            def flush() -> None:
                nonlocal seq
                ids = [p.id for p, _ in batch]
                columns = corpus_papers.c
                # id -> (content hash, arXiv version and <updated>, or None when not known)
                known: dict[str, tuple[str, tuple[int, str] | None]] = {
                    i: (digest, (int(v), u or "") if v is not None else None)
                    for i, digest, v, u in conn.execute(
                        select(
                            columns.id,
                            columns.content_hash,
                            columns.arxiv_version,
                            columns.arxiv_updated,
                        ).where(columns.id.in_(ids))
                    ).all()
                }
                rows = []
                versions: dict[str, tuple[int, str]] = {}  # of unchanged rows, newly known
                for paper, added_at in batch:
                    digest = paper.content_hash()
                    version = arxiv_version(paper)
                    stored = known.get(paper.id)
                    if stored is not None and version is not None:
                        kept = stored[1]
                        if kept is not None and is_older(*version, *kept):
                            counts.unchanged += 1  # an older version: the row stays as it is
                            continue
                        if stored[0] == digest and kept != version:
                            versions[paper.id] = version  # same paper: keeps its seq
                            known[paper.id] = (digest, version)
                    if stored is not None and stored[0] == digest:
                        counts.unchanged += 1
                        continue
                    if stored is not None:
                        counts.updated += 1
                    else:
                        counts.added += 1
                    # A duplicate id later in the input is compared with this one.
                    known[paper.id] = (digest, version)
                    versions.pop(paper.id, None)
                    seq += 1
                    rows.append(_row(paper, digest, seq, added_at or now, now, version))
                batch.clear()
                if versions:
                    conn.execute(
                        corpus_papers.update()
                        .where(columns.id == bindparam("paper_id"))
                        .values(
                            arxiv_version=bindparam("version"),
                            arxiv_updated=bindparam("updated"),
                        ),
                        [
                            {"paper_id": i, "version": v, "updated": u or None}
                            for i, (v, u) in versions.items()
                        ],
                    )
                if not rows:
                    return
                statement = self.store._insert(corpus_papers)
                keep = {"id", "added_at"}  # a changed paper keeps its place in digests
                statement = statement.on_conflict_do_update(
                    index_elements=["id"],
                    set_={
                        c.name: statement.excluded[c.name]
                        for c in corpus_papers.columns
                        if c.name not in keep
                    },
                )
                conn.execute(statement, rows)

            for item in papers:
                batch.append(item)
                if len(batch) >= WRITE_BATCH:
                    flush()
            if batch:
                flush()
            self.published_seqs = (int(head), seq)
        return counts

    def changes(self, after: int, upto: int, page: int = PAGE) -> Iterator[SharedPaper]:
        """Rows with ``after < seq <= upto`` in ``seq`` order, read a page at a time (each
        page its own short read: no connection is held between pages)."""
        while after < upto:
            query = (
                select(corpus_papers)
                .where(corpus_papers.c.seq > after, corpus_papers.c.seq <= upto)
                .order_by(corpus_papers.c.seq)
                .limit(page)
            )
            with self.store.read() as conn:
                rows = [dict(r) for r in conn.execute(query).mappings()]
            if not rows:
                return
            for row in rows:
                yield SharedPaper(_paper(row), int(row["seq"]), row["added_at"])
            after = int(rows[-1]["seq"])


def _row(
    paper: Paper,
    digest: str,
    seq: int,
    added_at: str,
    now: str,
    version: tuple[int, str] | None,
) -> dict[str, Any]:
    return {
        "id": paper.id,
        "seq": seq,
        "venue": paper.venue or "",
        "year": paper.year,
        "title": paper.title,
        "title_derived": int(paper.title_derived),
        "abstract": paper.abstract or "",
        "authors": json.dumps(paper.authors, ensure_ascii=False),
        "keywords": json.dumps(paper.keywords, ensure_ascii=False),
        "url": paper.url or "",
        "content_hash": digest,
        "added_at": added_at,
        "updated_at": now,
        "arxiv_version": version[0] if version is not None else None,
        "arxiv_updated": (version[1] or None) if version is not None else None,
    }


def _paper(row: dict[str, Any]) -> Paper:
    """The row's paper; an ``ArxivPaper`` when its arXiv version is known, so the replica's
    ``Corpus.upsert`` compares it with its own and keeps it (``bot/replica.py``)."""
    fields = {
        "id": row["id"],
        "title": row["title"],
        "abstract": row["abstract"] or "",
        "venue": row["venue"] or "",
        "year": row["year"],
        "authors": json.loads(row["authors"] or "[]"),
        "keywords": json.loads(row["keywords"] or "[]"),
        "url": row["url"] or "",
        "title_derived": bool(row["title_derived"]),
    }
    return stored_paper(fields, row["arxiv_version"], row["arxiv_updated"])
