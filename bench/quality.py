"""Retrieval quality on the dev judgments: nDCG@10, P@10, Recall@100 and MRR per engine.

Every engine indexes ``eval-corpus.jsonl.gz`` (title + abstract + authors; its keywords are
emptied, so nothing can match on the very labels the judgments come from) and answers each dev
query with its top 100. The judgments are incomplete (an untagged on-topic paper counts as not
relevant), so only compare engines measured on the same files in the same run.

For tuning from Python::

    from bench.quality import evaluate
    from bench.corpora import load_qrels
    metrics = evaluate({query: [ids best first], ...}, load_qrels())

Run ``python -m bench.quality`` for the markdown table (also written to
``bench/work/quality.md``, with per-query numbers in ``bench/work/quality-per-query.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench import paperboy
from bench.anchors import ANCHORS, STEMMER
from bench.corpora import EVAL_FILE, WORK_DIR, corpus_file, iter_papers, load_qrels
from bench.measure import log, markdown_table, run_child

CUTOFF = 10
RECALL_DEPTH = 100
METRICS = ("ndcg@10", "p@10", "recall@100", "mrr")


def _dedupe(ids: Sequence[str]) -> list[str]:
    """Keep each id's first (best) position: a duplicate must not earn a second gain."""
    return list(dict.fromkeys(ids))


def query_metrics(ranked: Sequence[str], relevant: set[str]) -> dict[str, float]:
    """Metrics of one ranked list against one query's relevant ids (binary relevance).

    * nDCG@10: DCG = sum of 1/log2(rank+1) over relevant hits in the top 10, divided by the DCG
      of a perfect list, which has min(|relevant|, 10) relevant papers on top.
    * P@10: relevant hits in the top 10 / 10 (a short list is not rewarded for being short).
    * Recall@100: relevant hits in the top 100 / |relevant|.
    * MRR: 1/rank of the first relevant paper within the list (0 if none is returned).
    """
    ranked = _dedupe(ranked)
    if not relevant:
        raise ValueError("a judged query needs at least one relevant id")
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:CUTOFF]) if d in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), CUTOFF)))
    first = next((i for i, d in enumerate(ranked) if d in relevant), None)
    return {
        "ndcg@10": dcg / idcg,
        "p@10": sum(d in relevant for d in ranked[:CUTOFF]) / CUTOFF,
        "recall@100": sum(d in relevant for d in ranked[:RECALL_DEPTH]) / len(relevant),
        "mrr": 0.0 if first is None else 1 / (first + 1),
    }


def per_query(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """Metrics for every judged query; a query missing from the run scores zero everywhere."""
    return {q: query_metrics(run.get(q, []), set(rel)) for q, rel in qrels.items()}


def evaluate(
    run: Mapping[str, Sequence[str]], qrels: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """Mean nDCG@10, P@10, Recall@100 and MRR of ``run`` ({query: ids best first}) over qrels.

    Averaged over the *judged* queries, so dropping a hard query from the run costs its zero
    rather than flattering the mean. Also returns ``queries`` (how many were averaged).
    """
    rows = per_query(run, qrels)
    n = len(rows)
    out = {m: (sum(r[m] for r in rows.values()) / n if n else 0.0) for m in METRICS}
    out["queries"] = n
    return out


def paired_p_value(
    a: Sequence[float], b: Sequence[float], *, rounds: int = 10_000, seed: int = 0
) -> float:
    """Two-sided paired randomisation test on the mean difference of per-query scores.

    With 60 queries a 0.01 nDCG gap is often noise; this says how often randomly swapping
    each query's two scores gives a gap at least as large (Smucker et al., CIKM 2007).
    """
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    observed = abs(sum(diffs))
    if observed == 0:
        return 1.0
    rng = random.Random(seed)
    hits = 0
    for _ in range(rounds):
        total = sum(d if rng.random() < 0.5 else -d for d in diffs)
        if abs(total) >= observed - 1e-12:
            hits += 1
    return (hits + 1) / (rounds + 1)


def run_anchor(name: str, papers: list[dict], queries: Sequence[str], depth: int) -> dict:
    """Build one anchor in memory over the eval corpus (no keywords) and answer every query."""
    # One writer thread for tantivy: deterministic tie order, so reruns give identical numbers.
    engine = ANCHORS[name](with_keywords=False, **({"threads": 1} if name == "tantivy" else {}))
    started = time.perf_counter()
    engine.build(papers)
    built = time.perf_counter() - started
    run = {q: [pid for pid, _ in engine.search(q, depth)] for q in queries}
    searched = time.perf_counter() - started - built
    return {"run": run, "build_s": built, "search_s": searched}


def run_paperboy_cli(corpus: Path, queries: Sequence[str], depth: int, workdir: Path) -> dict:
    """Ingest the eval corpus with ``paperboy ingest`` and rank with ``search --batch --json``.

    Goes through the CLI on purpose: it is the interface the lead asked to be evaluated, and it
    catches regressions in the batch path that an in-process call would skip.
    """
    db = workdir / "paperboy.db"
    paperboy.reset_db(db)
    env = paperboy.engine_env()
    ingest = run_child(paperboy.ingest_cmd(db, corpus), env=env).check("paperboy ingest")
    queries_file = workdir / "queries.txt"
    queries_file.write_text("".join(q + "\n" for q in queries), encoding="utf-8")
    search = run_child(paperboy.batch_search_cmd(db, queries_file, depth), env=env).check(
        "paperboy search --batch"
    )
    run = paperboy.parse_batch_output(search.stdout)
    missing = [q for q in queries if q not in run]
    if missing:
        log(f"paperboy: {len(missing)} queries missing from batch output, e.g. {missing[:3]}")
    return {"run": run, "build_s": ingest.wall_s, "search_s": search.wall_s}


def run_paperboy_api(corpus: Path, queries: Sequence[str], depth: int, workdir: Path) -> dict:
    """Same as ``run_paperboy_cli`` in-process through ``Engine``: quicker for tuning loops."""
    db = workdir / "paperboy-api.db"
    paperboy.reset_db(db)
    started = time.perf_counter()
    engine = paperboy.open_engine(db)
    engine.ingest([corpus])
    built = time.perf_counter() - started
    run = {q: [pid for pid, _ in engine.rank(q, k=depth)] for q in queries}
    return {"run": run, "build_s": built, "search_s": time.perf_counter() - started - built}


def main(argv: list[str] | None = None) -> int:
    """Evaluate the chosen engines and print one markdown table (plus significance vs Paperboy)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.quality",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--engines",
        default="fts5,tantivy,bm25s,paperboy",
        help="comma-separated subset of fts5,tantivy,bm25s,paperboy",
    )
    parser.add_argument(
        "--queries",
        type=int,
        default=0,
        help="only the first N dev queries (0 = all; for quick smoke runs)",
    )
    parser.add_argument(
        "--qrels",
        type=Path,
        default=None,
        help="judgments file (default: shared corpus/qrels-dev.json)",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="papers to index (default: shared corpus/eval-corpus.jsonl.gz)",
    )
    parser.add_argument(
        "--paperboy-via",
        choices=("cli", "api"),
        default="cli",
        help="run Paperboy through its CLI (default) or in-process Engine",
    )
    parser.add_argument("--out", type=Path, default=WORK_DIR / "quality.md")
    args = parser.parse_args(argv)

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = set(engines) - set(ANCHORS) - {"paperboy"}
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    qrels = load_qrels(args.qrels)
    if args.queries:
        qrels = dict(list(qrels.items())[: args.queries])
    queries = list(qrels)
    corpus = args.corpus or corpus_file(EVAL_FILE)
    papers = list(iter_papers(corpus))
    workdir = WORK_DIR / "quality"
    workdir.mkdir(parents=True, exist_ok=True)

    results: dict[str, dict] = {}
    for name in engines:
        log(f"{name}: indexing {len(papers):,} papers, {len(queries)} queries")
        if name == "paperboy":
            runner = run_paperboy_cli if args.paperboy_via == "cli" else run_paperboy_api
            try:
                results[name] = runner(corpus, queries, RECALL_DEPTH, workdir)
            except (RuntimeError, ImportError, OSError) as error:
                log(f"paperboy skipped: {error}")
                continue
        else:
            results[name] = run_anchor(name, papers, queries, RECALL_DEPTH)
        results[name]["per_query"] = per_query(results[name]["run"], qrels)
        results[name]["metrics"] = evaluate(results[name]["run"], qrels)

    report = render(results, qrels, corpus, len(papers))
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report + "\n", encoding="utf-8")
    per_query_path = args.out.with_name(args.out.stem + "-per-query.json")
    per_query_path.write_text(
        json.dumps({n: r["per_query"] for n, r in results.items()}, indent=1), encoding="utf-8"
    )
    log(f"wrote {args.out} and {per_query_path}")
    return 0


def render(
    results: dict[str, dict], qrels: Mapping[str, Sequence[str]], corpus: Path, n_papers: int
) -> str:
    """The markdown report: metrics table, then nDCG@10 deltas against Paperboy if it ran."""
    rows = [
        [name, *(r["metrics"][m] for m in METRICS), r["build_s"], r["search_s"]]
        for name, r in results.items()
    ]
    lines = [
        f"### Retrieval quality ({len(qrels)} dev queries, {n_papers:,} papers in "
        f"`{corpus.name}`, title+abstract+authors)",
        "",
        markdown_table(["engine", "nDCG@10", "P@10", "R@100", "MRR", "index s", "queries s"], rows),
        "",
        f"bm25s stemmer: {STEMMER}. Index/query seconds are indicative only (quality run, not "
        "the speed benchmark; Paperboy's include process start-up)."
        + (f" Paperboy source {paperboy.code_fingerprint()}." if "paperboy" in results else ""),
    ]
    if "paperboy" in results and len(results) > 1:
        base = results["paperboy"]["per_query"]
        pb = [base[q]["ndcg@10"] for q in qrels]
        delta_rows = []
        for name, r in results.items():
            if name == "paperboy":
                continue
            other = [r["per_query"][q]["ndcg@10"] for q in qrels]
            wins = sum(x > y for x, y in zip(pb, other, strict=True))
            losses = sum(x < y for x, y in zip(pb, other, strict=True))
            delta_rows.append(
                [
                    f"paperboy vs {name}",
                    (sum(pb) - sum(other)) / len(pb),
                    f"{wins}/{losses}/{len(pb) - wins - losses}",
                    paired_p_value(pb, other),
                ]
            )
        lines += [
            "",
            markdown_table(
                ["comparison", "Δ nDCG@10", "wins/losses/ties", "p (paired)"], delta_rows
            ),
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
