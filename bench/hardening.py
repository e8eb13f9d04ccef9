"""What the issue-8 safeguards cost: index validation on open and per lookup, and snippets.

    .venv/bin/python -m bench.hardening --scale 1     # 87k papers (builds its database once)
    .venv/bin/python -m bench.hardening --scale 10    # 872k papers (~6 min and ~5 GB to build)
    .venv/bin/python -m bench.hardening --snippets-only

Index: opening with checksums (the first open in a process) and without (sizes only), and the
``stat`` check made before every lookup. Snippets: ``make_snippet`` on abstracts of 100 kB,
1 MB and 50 MB (linear, and reading at most ``SNIPPET_SCAN_CHARS``), next to the quadratic
window search it replaced on the sizes where that finishes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from bench.corpora import WORK_DIR, corpus_for_scale
from bot.engine.index import Index
from bot.engine.search import SNIPPET_WORDS, Engine, make_snippet
from bot.engine.text import surface_words


def _median_ms(fn, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def index_costs(scale: int) -> list[str]:
    db = WORK_DIR / f"hardening-x{scale}.db"
    WORK_DIR.mkdir(parents=True, exist_ok=True)  # (Paperboy never makes a database's folder)
    engine = Engine.open(db)
    if engine.corpus.count() == 0:
        print(f"building {db} (once) ...", file=sys.stderr)
        engine.ingest([corpus_for_scale(scale)])
    index = engine.index
    size = sum(f.stat().st_size for f in Path(index.directory).iterdir())
    verified = _median_ms(lambda: Index(index.directory, verify=True))
    sizes_only = _median_ms(lambda: Index(index.directory, verify=False))
    calls = 20_000
    started = time.perf_counter()
    for _ in range(calls):
        index.intact()
    per_lookup_us = (time.perf_counter() - started) / calls * 1e6
    lookup = _median_ms(lambda: engine.search("diffusion models for protein design"), runs=50)
    return [
        f"| {index.n_docs:,} papers | {size / 1e6:,.0f} MB | {verified:,.0f} ms | "
        f"{sizes_only:,.1f} ms | {per_lookup_us:,.1f} µs | {lookup:,.2f} ms |"
    ]


def _quadratic_start(text: str, terms: set[str], max_words: int = SNIPPET_WORDS) -> int:
    """The window search before issue 8 (for comparison only)."""
    spans = surface_words(text)
    hits = [i for i, (_, _, norm) in enumerate(spans) if norm and norm in terms]
    best, best_count = 0, -1
    for first in hits:
        ws = max(0, first - 5)
        distinct = {spans[i][2] for i in hits if ws <= i < ws + max_words}
        if len(distinct) > best_count:
            best, best_count = ws, len(distinct)
    return best


def snippet_costs() -> list[str]:
    rng = random.Random(0)
    vocab = ["model", "data", "graph", "neural", "the", "of", "diffusion", "learning", "protein"]
    block = " ".join(rng.choice(vocab) for _ in range(50_000)) + " "
    terms = {"model", "graph", "diffusion"}
    rows = []
    for size in (100_000, 1_000_000, 50_000_000):
        text = (block * (size // len(block) + 1))[:size]
        new = _median_ms(lambda t=text: make_snippet(t, terms), runs=3)
        old = (
            f"{_median_ms(lambda t=text: _quadratic_start(t, terms), runs=1):,.0f} ms"
            if size <= 100_000
            else "(minutes or more)"
        )
        rows.append(f"| {size / 1e6:g} MB | {new:,.1f} ms | {old} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=1, choices=(1, 10))
    parser.add_argument("--snippets-only", action="store_true")
    args = parser.parse_args(argv)
    out = []
    if not args.snippets_only:
        out += [
            "| corpus | index on disk | open + checksums | open, sizes only | check per lookup "
            "| search() p50 |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            *index_costs(args.scale),
            "",
        ]
    out += [
        "| abstract | make_snippet | quadratic window search (before) |",
        "| --- | ---: | ---: |",
        *snippet_costs(),
    ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
