"""Anchor engines: what an engineer would pick instead of writing Paperboy's TF-IDF search.

Each anchor indexes the same text (title, abstract, authors, keywords when present; see
``corpora.index_fields``) with its library's defaults and answers ``search(query, k)`` with
``[(paper_id, score), ...]``, best first, OR semantics (a paper matching any query term may rank):

* ``fts5``    SQLite FTS5, porter + unicode61 tokenizer, ``bm25()`` ranking, one column per field.
* ``tantivy`` tantivy-py, ``en_stem`` analyzer (lowercase + English Snowball stemmer), BM25, one
              field per field, query parsed as a disjunction over all fields.
* ``bm25s``   bm25s over one concatenated text, English stopwords, PyStemmer stemming only when
              PyStemmer is installed (it is not a bench dependency; ``STEMMER`` says which ran).

Defaults are kept on purpose (k1, b, weights, writer sizes): the anchors stand for "what you get
with an afternoon's work", and tuning them on the dev queries would be tuning on the test.

Each engine can live in memory (quality runs) or on disk (speed runs, where a fresh process must
``open`` a built index to measure cold start and serving memory). The module is also a small CLI
used as the per-engine child process by ``bench.search_speed``::

    python -m bench.anchors build  --engine fts5 --corpus FILE.jsonl.gz --index PATH
    python -m bench.anchors search --engine fts5 --index PATH "diffusion models"
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

from bench.corpora import index_fields, index_text, iter_papers
from bench.measure import dir_size_mb, peak_rss_mb, rss_mb

FIELDS = ("title", "abstract", "authors", "keywords")
_WORD = re.compile(r"\w")


def query_terms(query: str) -> list[str]:
    """Whitespace-separated chunks of a user query that contain at least one word character.

    Each chunk is later quoted as one term, so punctuation inside it ("C++", "title:", "(")
    is literal text, never query syntax; a hyphenated chunk becomes a phrase ("contact-rich").
    Pure-punctuation chunks would quote to an empty phrase, so they are dropped here.
    """
    return [chunk for chunk in query.split() if _WORD.search(chunk)]


class Anchor(Protocol):
    """The interface every engine in the benchmark offers."""

    name: str

    def build(self, papers: Iterable[dict]) -> int:
        """Index the papers (consumed once, may be a stream) and return how many were indexed."""
        ...

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """Top ``k`` ``(paper_id, score)`` pairs, higher score = better."""
        ...


class FTS5Engine:
    """SQLite FTS5 with bm25() ranking: the zero-dependency choice for an app already on SQLite."""

    name = "fts5"

    def __init__(self, path: Path | None = None, *, with_keywords: bool = True) -> None:
        self.path = path
        self.with_keywords = with_keywords
        self.conn: sqlite3.Connection | None = None

    @classmethod
    def open(cls, path: Path) -> FTS5Engine:
        """Open an index a previous ``build`` wrote to ``path``."""
        engine = cls(path)
        engine.conn = sqlite3.connect(path)
        return engine

    def build(self, papers: Iterable[dict]) -> int:
        if self.path is not None:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(str(self.path) + suffix).unlink(missing_ok=True)
        conn = sqlite3.connect(self.path or ":memory:")
        conn.execute(
            "CREATE VIRTUAL TABLE papers USING fts5("
            "pid UNINDEXED, title, abstract, authors, keywords, tokenize='porter unicode61')"
        )
        count = 0

        def rows() -> Iterable[tuple[str, ...]]:
            nonlocal count
            for paper in papers:
                count += 1
                f = index_fields(paper, with_keywords=self.with_keywords)
                yield paper["id"], f["title"], f["abstract"], f["authors"], f["keywords"]

        with conn:
            conn.executemany("INSERT INTO papers VALUES (?, ?, ?, ?, ?)", rows())
        # Merging the b-tree segments is the documented last step of a bulk load; skipping it
        # would make FTS5 look slower at query time than a deployed index is.
        with conn:
            conn.execute("INSERT INTO papers(papers) VALUES ('optimize')")
        self.conn = conn
        return count

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        assert self.conn is not None, "build() or open() first"
        terms = query_terms(query)
        if not terms:
            return []
        expr = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        rows = self.conn.execute(
            "SELECT pid, rank FROM papers WHERE papers MATCH ? ORDER BY rank LIMIT ?", (expr, k)
        )
        # FTS5's bm25() is "lower is better"; negate so every engine reports higher = better.
        return [(pid, -score) for pid, score in rows]


class TantivyEngine:
    """tantivy (Rust, Lucene-like) through its Python binding: the "real search library" choice."""

    name = "tantivy"

    def __init__(
        self, path: Path | None = None, *, with_keywords: bool = True, threads: int = 0
    ) -> None:
        """Set up an engine; ``threads`` is the index writer's thread count.

        ``threads=0`` lets tantivy choose (the default an engineer gets, used for speed runs).
        ``threads=1`` writes one segment and so gives run-to-run identical tie order, which
        quality runs need: with several segments, equal-score papers come back in a different
        order on every build and nDCG wobbles in the third decimal.
        """
        self.path = path
        self.with_keywords = with_keywords
        self.threads = threads
        self.index = None
        self.searcher = None

    @staticmethod
    def _schema():  # -> tantivy.Schema
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw")
        for field in FIELDS:
            sb.add_text_field(field, tokenizer_name="en_stem")
        return sb.build()

    @classmethod
    def open(cls, path: Path) -> TantivyEngine:
        """Open an index directory a previous ``build`` wrote."""
        import tantivy

        engine = cls(path)
        engine.index = tantivy.Index.open(str(path))
        engine.searcher = engine.index.searcher()
        return engine

    def build(self, papers: Iterable[dict]) -> int:
        import tantivy

        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path.mkdir(parents=True)
        index = tantivy.Index(self._schema(), path=str(self.path) if self.path else None)
        writer = index.writer(num_threads=self.threads)
        count = 0
        for paper in papers:
            f = index_fields(paper, with_keywords=self.with_keywords)
            writer.add_document(tantivy.Document(id=paper["id"], **f))
            count += 1
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self.index = index
        self.searcher = index.searcher()
        return count

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        assert self.index is not None and self.searcher is not None, "build() or open() first"
        # Quote each term: inside a phrase the parser treats field:, ^, *, (), AND/OR literally.
        # Quotes and backslashes are the only characters that can end or escape a phrase.
        terms = [re.sub(r'["\\]', " ", t) for t in query_terms(query)]
        terms = [t for t in terms if _WORD.search(t)]
        if not terms:
            return []
        parsed = self.index.parse_query(" ".join(f'"{t}"' for t in terms), list(FIELDS))
        hits = self.searcher.search(parsed, k, count=False).hits
        return [(self.searcher.doc(addr)["id"][0], score) for score, addr in hits]


def _pystemmer() -> Callable[[list[str]], list[str]] | None:
    """PyStemmer's English stemmer if installed (bm25s's recommended stemmer), else None."""
    try:
        import Stemmer  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Stemmer.Stemmer("english").stemWord


#: Which stemmer the bm25s anchor runs with, printed in reports so numbers are not misread.
STEMMER = "PyStemmer english" if _pystemmer() is not None else "none (PyStemmer not installed)"


class BM25SEngine:
    """bm25s (pure numpy sparse BM25): the "pip install and go" Python choice."""

    name = "bm25s"

    def __init__(self, path: Path | None = None, *, with_keywords: bool = True) -> None:
        self.path = path
        self.with_keywords = with_keywords
        self.retriever = None
        self.tokenizer = None
        self.ids: list[str] = []

    @staticmethod
    def _tokenizer():  # -> bm25s.tokenization.Tokenizer
        from bm25s.tokenization import Tokenizer

        return Tokenizer(stopwords="en", stemmer=_pystemmer())

    @classmethod
    def open(cls, path: Path) -> BM25SEngine:
        """Load an index directory a previous ``build`` saved (arrays memory-mapped)."""
        import bm25s

        engine = cls(path)
        engine.retriever = bm25s.BM25.load(str(path), mmap=True, show_progress=False)
        engine.tokenizer = cls._tokenizer()
        engine.tokenizer.load_vocab(str(path))
        with open(path / "ids.json", encoding="utf-8") as fh:
            engine.ids = json.load(fh)
        return engine

    def build(self, papers: Iterable[dict]) -> int:
        import bm25s

        ids: list[str] = []

        def texts() -> Iterable[str]:
            for paper in papers:
                ids.append(paper["id"])
                yield index_text(paper, with_keywords=self.with_keywords)

        tokenizer = self._tokenizer()
        tokens = tokenizer.tokenize(texts(), length=0, return_as="tuple", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        del tokens
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            retriever.save(str(self.path), show_progress=False)
            tokenizer.save_vocab(str(self.path))
            with open(self.path / "ids.json", "w", encoding="utf-8") as fh:
                json.dump(ids, fh)
        self.retriever, self.tokenizer, self.ids = retriever, tokenizer, ids
        return len(ids)

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        assert self.retriever is not None and self.tokenizer is not None, "build() or open() first"
        q = self.tokenizer.tokenize(
            [query], update_vocab=False, return_as="ids", show_progress=False
        )
        docs, scores = self.retriever.retrieve(
            q, k=min(k, len(self.ids)), show_progress=False, n_threads=0
        )
        # bm25s scores every document, so top-k is padded with score-0 non-matches when fewer
        # than k papers match; drop them so all engines return only matching papers.
        return [(self.ids[d], float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


ANCHORS: dict[str, type[FTS5Engine] | type[TantivyEngine] | type[BM25SEngine]] = {
    "fts5": FTS5Engine,
    "tantivy": TantivyEngine,
    "bm25s": BM25SEngine,
}


def index_path(engine: str, workdir: Path) -> Path:
    """Where a persisted anchor index lives inside ``workdir`` (a file for fts5, else a dir)."""
    return workdir / ("fts5.db" if engine == "fts5" else f"{engine}.index")


def _cmd_build(args: argparse.Namespace) -> int:
    """Child process: stream the corpus into a persisted index, report time and peak memory."""
    base = rss_mb()
    engine = ANCHORS[args.engine](Path(args.index))
    started = time.perf_counter()
    n = engine.build(iter_papers(Path(args.corpus)))
    elapsed = time.perf_counter() - started
    report = {
        "engine": args.engine,
        "docs": n,
        "build_s": elapsed,
        "base_rss_mb": base,
        "peak_rss_mb": peak_rss_mb(),
        "disk_mb": dir_size_mb(Path(args.index)),
    }
    print(json.dumps(report))
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    """Child process: open a persisted index and answer one query (the cold-start probe)."""
    engine = ANCHORS[args.engine].open(Path(args.index))
    for pid, score in engine.search(args.query, args.k):
        print(f"{score:8.3f}  {pid}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see the module docstring."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.anchors",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build a persisted index from a JSONL(.gz) corpus")
    b.add_argument("--engine", choices=sorted(ANCHORS), required=True)
    b.add_argument("--corpus", required=True)
    b.add_argument("--index", required=True)
    s = sub.add_parser("search", help="open a persisted index and run one query")
    s.add_argument("--engine", choices=sorted(ANCHORS), required=True)
    s.add_argument("--index", required=True)
    s.add_argument("-k", type=int, default=10)
    s.add_argument("query")
    args = parser.parse_args(argv)
    return _cmd_build(args) if args.cmd == "build" else _cmd_search(args)


if __name__ == "__main__":
    sys.exit(main())
