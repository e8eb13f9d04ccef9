"""Digest selection speed, batch against one query per topic, and the match threshold.

Speed (default)::

    python -m bench.digest_speed [--members 1000] [--topics 5] [--runs 3] [--rebuild]

Indexes the 87k ``paperlists.jsonl.gz`` once into ``bench/work/digest/paperboy.db`` (again with
``--rebuild``, e.g. after the engine's scoring changed), subscribes ``--members`` members to
``--topics`` topics each, and times, in the same process and alternating run by run:

* **batch**: ``select_digests(engine)`` for everyone at once (identical topics grouped, one
  sparse product per chunk of topics, one SQL query per kind of data), what the scheduler does;
* **naive**: for each member, ``select_digests(engine, [member], matcher=match_topics_one_by_one)``
  (one ``Engine.rank`` per topic, asking again with a larger k until scores fall below the
  threshold, and the per-member SQL).

Both must choose the same papers; the script checks and reports any difference. Topics are
author keywords drawn with a fixed seed, each from a random paper's keywords (so popular
keywords come up more often, as they would in a real team); ``--filtered`` of the members add
``venue:`` to their first topic, exercising the constrained-topic path.

Threshold (``--threshold``): runs author keywords as topics against the 7,877-paper
evaluation corpus, whose keywords are emptied so a paper's own tags cannot make it match, and
counts a paper as on-topic when its authors tagged it with the keyword. Prints precision,
recall and F1 per threshold and per topic length (1, 2, 3+ words), and how many papers a
topic matches on the 87k corpus at each threshold. ``digest/matching.py`` documents the pick.

Results go to stdout (markdown); progress to stderr.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.corpora import EVAL_FILE, PAPERS_FILE, WORK_DIR, corpus_file, iter_papers
from bench.measure import log, markdown_table, median, peak_rss_mb

DIGEST_DIR = WORK_DIR / "digest"
THRESHOLDS = (0.04, 0.06, 0.07, 0.08, 0.09, 0.10, 0.11, 0.12, 0.14, 0.16, 0.20)
NOW = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)


def open_engine(db: Path, corpus: Path, rebuild: bool):
    from bot.engine.search import Engine

    if rebuild and db.exists():
        for extra in db.parent.glob(db.name + "*"):
            shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    engine = Engine.open(db)
    if engine.corpus.count() == 0:
        log(f"indexing {corpus.name} into {db} (one-off) ...")
        started = time.perf_counter()
        report = engine.ingest([corpus])
        log(f"  {report.summary()} in {time.perf_counter() - started:.0f}s")
    return engine


def keyword_pool() -> list[list[str]]:
    """Each paper's author keywords (whitespace tidied), papers without any left out."""
    out = []
    for paper in iter_papers(corpus_file(PAPERS_FILE)):
        keywords = [" ".join(k.split()) for k in paper.get("keywords") or [] if k.strip()]
        if keywords:
            out.append(keywords)
    return out


def subscribe_members(engine, members: int, topics: int, filtered: float, seed: int) -> int:
    """Replace all members by ``members`` members with ``topics`` topics each."""
    from digest.subscriptions import SubscriptionError, Subscriptions

    db = engine.db
    for table in ("sent_papers", "digests", "topics", "members"):
        db.execute(f"delete from {table}")
    pool = keyword_pool()
    rng = random.Random(seed)
    venues = [v for v in engine.index.venues if v]
    subs = Subscriptions(db)
    with db.atomic():
        for m in range(members):
            user = f"U{m:05d}"
            added = 0
            while added < topics:
                topic = rng.choice(rng.choice(pool))
                if added == 0 and rng.random() < filtered:
                    topic += f" venue:{rng.choice(venues)}"
                try:
                    _, created = subs.add_topic(user, topic, NOW)
                except (SubscriptionError, ValueError):
                    continue
                added += created
    return db.execute("select count(distinct normalized) from topics").fetchone()[0]


def speed(args: argparse.Namespace) -> None:
    from digest.selection import select_digests
    from tests.matching_reference import match_topics_one_by_one

    engine = open_engine(DIGEST_DIR / "paperboy.db", corpus_file(PAPERS_FILE), args.rebuild)
    index = engine.index
    log(f"corpus: {index.n_docs:,} papers, {index.n_terms:,} terms")
    distinct = subscribe_members(engine, args.members, args.topics, args.filtered, args.seed)
    users = [f"U{m:05d}" for m in range(args.members)]
    log(f"{args.members:,} members x {args.topics} topics ({distinct:,} distinct topics)")

    def batch():
        return select_digests(engine)

    def naive():
        return {u: select_digests(engine, [u], matcher=match_topics_one_by_one)[u] for u in users}

    batch()  # warm the page cache and the vocabulary cache alike for both
    times: dict[str, list[float]] = {"batch": [], "naive": []}
    results = {}
    for run in range(args.runs):
        for name, job in (("batch", batch), ("naive", naive))[:: 1 if run % 2 == 0 else -1]:
            started = time.perf_counter()
            results[name] = job()
            times[name].append(time.perf_counter() - started)
            log(f"run {run + 1}: {name} {times[name][-1]:.2f}s")

    differ = [u for u in users if results["batch"][u].paper_ids != results["naive"][u].paper_ids]
    papers = [results["batch"][u].size for u in users]
    rows = [
        [name, median(t), min(t), max(t), f"{args.members / median(t):,.0f}"]
        for name, t in times.items()
    ]
    print(f"## Digest selection: {args.members:,} members x {args.topics} topics\n")
    print(
        f"Corpus {index.n_docs:,} papers ({index.n_terms:,} terms); {distinct:,} distinct "
        f"topics; {args.runs} runs each, alternating; {os.cpu_count()} CPUs; "
        f"peak RSS {peak_rss_mb():,.0f} MB.\n"
    )
    print(markdown_table(["method", "median s", "min s", "max s", "members/s"], rows))
    speedup = median(times["naive"]) / median(times["batch"])
    print(
        f"\nBatch is {speedup:.1f}x the naive loop. Papers per digest: median "
        f"{median(papers):.0f}, {sum(p == 0 for p in papers)} members with nothing to send. "
        f"Members whose digests differ between the two: {len(differ)}"
        + (f" (e.g. {differ[:3]})" if differ else "")
        + "."
    )


def threshold(args: argparse.Namespace) -> None:
    from bot.engine.text import words
    from digest.matching import match_topics

    tags: dict[str, set[str]] = collections.defaultdict(set)
    for paper in iter_papers(corpus_file(PAPERS_FILE)):
        for keyword in paper.get("keywords") or []:
            tags[" ".join(keyword.lower().split())].add(paper["id"])
    evaluation = open_engine(DIGEST_DIR / "eval.db", corpus_file(EVAL_FILE), args.rebuild)
    full = open_engine(DIGEST_DIR / "paperboy.db", corpus_file(PAPERS_FILE), args.rebuild)
    known = dict(evaluation.db.execute("select id, rowid from papers").fetchall())
    eval_index = evaluation.index
    pool = sorted(k for k, ids in tags.items() if sum(i in known for i in ids) >= 5)
    random.Random(args.seed).shuffle(pool)
    by_length: dict[int, list[str]] = collections.defaultdict(list)
    for keyword in pool:
        n = min(len(words(keyword)), 3)
        if n and len(by_length[n]) < args.per_length:
            by_length[n].append(keyword)
    loose = min(THRESHOLDS)
    print("## Match threshold\n")
    print(
        f"Evaluation corpus: {eval_index.n_docs:,} papers, keywords emptied; topics: "
        f"{args.per_length} author keywords per length; on-topic = tagged by its authors.\n"
    )
    best_rows = []
    for n, keywords in sorted(by_length.items()):
        matches = match_topics(evaluation, keywords, threshold=loose)
        rows = []
        for th in THRESHOLDS:
            precision, recall, sizes = [], [], []
            for keyword, match in zip(keywords, matches, strict=True):
                relevant = {known[i] for i in tags[keyword] if i in known}
                docs = match.docs[match.scores >= th]
                hit = np.isin(eval_index.rowids[docs], list(relevant)).sum()
                if len(docs):
                    precision.append(hit / len(docs))
                recall.append(hit / len(relevant))
                sizes.append(len(docs))
            p = float(np.mean(precision)) if precision else 0.0
            r = float(np.mean(recall))
            f1 = 2 * p * r / (p + r) if p + r else 0.0
            rows.append(
                [f"{th:.2f}", p, r, f1, median(sizes), float(np.mean(np.array(sizes) == 0))]
            )
        best = max(rows, key=lambda row: row[3])
        best_rows.append([f"{n}{'+' if n == 3 else ''}", best[0], best[3]])
        print(f"### topics of {n}{'+' if n == 3 else ''} word(s)\n")
        print(markdown_table(["threshold", "P", "R", "F1", "median matches", "no match"], rows))
        print()
    print(markdown_table(["words", "best threshold", "F1"], best_rows))
    sample = [k for ks in by_length.values() for k in ks]
    matches = match_topics(full, sample, threshold=loose)
    rows = []
    for th in THRESHOLDS:
        sizes = [int((m.scores >= th).sum()) for m in matches]
        rows.append(
            [
                f"{th:.2f}",
                median(sizes),
                float(np.percentile(sizes, 90)),
                float(np.mean(np.array(sizes) == 0)),
                float(np.mean(np.array(sizes) > 0.02 * full.index.n_docs)),
            ]
        )
    print(f"\n### The same topics on the {full.index.n_docs:,}-paper corpus\n")
    print(
        markdown_table(["threshold", "median matches", "p90", "no match", "> 2% of corpus"], rows)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.digest_speed", description=__doc__)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--filtered", type=float, default=0.05, help="share with a venue: filter")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rebuild", action="store_true", help="index the corpora again")
    parser.add_argument("--threshold", action="store_true", help="measure the match threshold")
    parser.add_argument("--per-length", type=int, default=200, help="topics per length")
    args = parser.parse_args(argv)
    DIGEST_DIR.mkdir(parents=True, exist_ok=True)
    if args.threshold:
        threshold(args)
    else:
        speed(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
