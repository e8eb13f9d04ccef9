"""The benchmark corpora: the shared paper files, a 10x replica for scale runs, and query sets.

The shared files live beside the checkout (``<repo>/../shared/corpus``), never inside it, so the
location is computed from this file and can be overridden with ``PAPERBOY_SHARED`` (CI mounts
them elsewhere). Only ``bench/`` reads them; the app and the tests never do.

Run ``python -m bench.corpora --scale 10`` to write the replicated corpus once; later runs reuse
``bench/work/paperlists-x10.jsonl.gz``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]
WORK_DIR = REPO_DIR / "bench" / "work"

PAPERS_FILE = "paperlists.jsonl.gz"
EVAL_FILE = "eval-corpus.jsonl.gz"
QRELS_FILE = "qrels-dev.json"

#: Papers in ``paperlists.jsonl.gz``; used to sanity-check files and to print progress.
PAPERLISTS_SIZE = 87_256


def shared_dir() -> Path:
    """Where the shared data lives: ``$PAPERBOY_SHARED`` or ``shared/`` next to the repo."""
    env = os.environ.get("PAPERBOY_SHARED")
    return Path(env).expanduser().resolve() if env else REPO_DIR.parent / "shared"


def corpus_file(name: str) -> Path:
    """Path of one file in ``shared/corpus``, failing loudly if the data is not mounted."""
    path = shared_dir() / "corpus" / name
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found; set PAPERBOY_SHARED to the directory holding corpus/{name}"
        )
    return path


def iter_papers(path: Path) -> Iterator[dict]:
    """Stream papers from a JSONL or JSONL.gz file without holding the file in memory."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_papers(path: Path | None = None) -> list[dict]:
    """All papers of a file (default: the 87k paperlists) as a list."""
    return list(iter_papers(path or corpus_file(PAPERS_FILE)))


def load_eval_corpus() -> list[dict]:
    """The 7,877 quality-evaluation papers (their keywords are emptied on purpose)."""
    return load_papers(corpus_file(EVAL_FILE))


def load_qrels(path: Path | None = None) -> dict[str, list[str]]:
    """``{query: [relevant paper ids]}`` for the dev queries."""
    with open(path or corpus_file(QRELS_FILE), encoding="utf-8") as fh:
        return json.load(fh)


def replicate(papers: Iterable[dict] | Path, times: int = 10) -> Iterator[dict]:
    """Yield ``times`` copies of the corpus, each paper with a fresh id ``{id}~r{k}``.

    Copies are emitted copy-major (all of copy 0, then all of copy 1, ...) so the replica looks
    like a corpus that grew over time rather than ten identical neighbours, which would flatter
    engines whose posting lists compress runs of adjacent ids. Passing a ``Path`` re-reads the
    file for each copy, so memory stays constant however large ``times`` is; a one-shot iterator
    is materialised first because it cannot be replayed.
    """
    if times < 1:
        raise ValueError("times must be >= 1")
    if not isinstance(papers, Path) and iter(papers) is papers:
        papers = list(papers)
    for k in range(times):
        source = iter_papers(papers) if isinstance(papers, Path) else papers
        for paper in source:
            copy = dict(paper)
            copy["id"] = f"{paper['id']}~r{k}"
            yield copy


def write_jsonl_gz(papers: Iterable[dict], path: Path, *, progress_every: int = 0) -> int:
    """Write papers to ``path`` atomically (temp file + rename) and return how many were written.

    Compression level 1: the file is scratch, and level 6 triples the write time for a 10x
    corpus while saving little.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    started = time.perf_counter()
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as fh:
        for paper in papers:
            fh.write(json.dumps(paper, ensure_ascii=False))
            fh.write("\n")
            n += 1
            if progress_every and n % progress_every == 0:
                elapsed = time.perf_counter() - started
                print(f"  wrote {n:,} papers ({elapsed:.0f}s)", file=sys.stderr, flush=True)
    tmp.replace(path)
    return n


def replicated_file(times: int = 10) -> Path:
    """Path of the ``times``-x replica in ``bench/work``, writing it on first use."""
    path = WORK_DIR / f"paperlists-x{times}.jsonl.gz"
    if not path.exists():
        print(f"writing {path} (one-off) ...", file=sys.stderr, flush=True)
        source = corpus_file(PAPERS_FILE)
        write_jsonl_gz(replicate(source, times), path, progress_every=100_000)
    return path


def corpus_for_scale(scale: int) -> Path:
    """The JSONL.gz for a benchmark scale: 1 = shared paperlists, N > 1 = the N-x replica."""
    return corpus_file(PAPERS_FILE) if scale == 1 else replicated_file(scale)


def index_fields(paper: dict, *, with_keywords: bool = True) -> dict[str, str]:
    """The searchable text of a paper, per field, the same for every engine.

    Authors and keywords are joined into one string each; the quality corpus has empty keywords,
    so keeping them here costs nothing there and matches what Paperboy indexes at scale.
    """
    fields = {
        "title": paper.get("title") or "",
        "abstract": paper.get("abstract") or "",
        "authors": ", ".join(paper.get("authors") or []),
        "keywords": "; ".join(paper.get("keywords") or []) if with_keywords else "",
    }
    return fields


def index_text(paper: dict, *, with_keywords: bool = True) -> str:
    """All searchable fields as one string, for engines that index a single text per doc."""
    return "\n".join(v for v in index_fields(paper, with_keywords=with_keywords).values() if v)


def sample_keyword_queries(n: int, *, seed: int = 0, exclude: Iterable[str] = ()) -> list[str]:
    """A deterministic sample of ``n`` distinct author keywords from paperlists.

    Author keywords are what people type into a paper search ("diffusion models", "RLHF"), so
    they make a realistic, reproducible query mix. Keywords are de-duplicated case-insensitively
    and sorted before sampling so the sample depends on the seed only, not on file order.
    """
    skip = {q.casefold() for q in exclude}
    distinct: dict[str, str] = {}
    for paper in iter_papers(corpus_file(PAPERS_FILE)):
        for kw in paper.get("keywords") or []:
            kw = " ".join(kw.split())
            key = kw.casefold()
            if kw and key not in skip and key not in distinct:
                distinct[key] = kw
    pool = [distinct[k] for k in sorted(distinct)]
    return random.Random(seed).sample(pool, min(n, len(pool)))


def speed_queries(n: int = 500, *, seed: int = 0) -> tuple[list[str], list[str]]:
    """(measured queries, warm-up queries) for latency runs.

    Measured = the dev qrels queries + ``n`` sampled keywords. Warm-up queries are a disjoint
    sample, so warming a process never pre-computes an answer it is later timed on (an engine
    with a result cache would otherwise look faster than it is).
    """
    dev = list(load_qrels())
    sampled = sample_keyword_queries(n + 50, seed=seed, exclude=dev)
    return dev + sampled[:n], sampled[n:]


def main(argv: list[str] | None = None) -> int:
    """Write (or find) the replicated corpus for ``--scale`` and print its path and size."""
    parser = argparse.ArgumentParser(prog="python -m bench.corpora", description=__doc__)
    parser.add_argument("--scale", type=int, default=10, help="replication factor (default 10)")
    parser.add_argument("--count", action="store_true", help="count the papers in the file")
    args = parser.parse_args(argv)
    path = corpus_for_scale(args.scale)
    print(path)
    if args.count:
        print(f"{sum(1 for _ in iter_papers(path)):,} papers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
