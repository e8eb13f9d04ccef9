"""The live index: lookups while papers are added, how soon they show, what a delta costs.

At ``--scale 1`` (the 87k paperlists), in one run:

1. **full build** of the corpus minus ``--new`` papers held back (a ``paperboy ingest`` child:
   wall time, peak RSS, index bytes per paper), and tantivy's build of the same papers;
2. **lookups during an ingest**: a reader child opens the index and answers the speed queries
   in a loop, timing each lookup, and every ``PROBE_EVERY_S`` looks up the title of one
   held-back paper (the probe, timed apart: one long query repeated is not the lookups'
   mix); meanwhile a ``paperboy ingest`` child adds the ``--new`` papers (a delta segment).
   Reported: the speed queries' p50/p99/max while the ingest runs (and before it), the
   probe's, the slowest lookup around the switch to the new generation, the ingest's wall
   time and peak RSS, and the time from the end of the ingest command to the reader's first
   lookup that returns the new paper (negative: it was visible before the command exited);
3. **quality**: dev nDCG@10 with the eval corpus split 80/20 into a main segment and a delta
   (the merge policy off) against the same corpus built at once (bench/quality.py's metric).

Run with ``nice -n 10 python -m bench.live_index``; results go to stdout and
``bench/work/live-x{N}.md`` (raw numbers in ``.json``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import bot.engine.index as index_module
from bench import paperboy
from bench.anchors import index_path
from bench.corpora import (
    WORK_DIR,
    corpus_for_scale,
    iter_papers,
    load_eval_corpus,
    load_qrels,
    speed_queries,
)
from bench.measure import (
    dir_size_mb,
    log,
    markdown_table,
    percentile,
    python_cmd,
    run_child,
)
from bench.quality import evaluate


def write_gz(papers: list[dict], path: Path) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for paper in papers:
            out.write(json.dumps(paper) + "\n")
    return path


# -- the reader child ------------------------------------------------------------------------


#: How often the reader looks the held-back paper up (between two lookups of the loop) until
#: it is found: often enough to time its arrival to a few tens of ms, seldom enough that its
#: long title query (about 3 ms at 87k, twice tantivy's speed on titles) is not half of the
#: lookups timed.
PROBE_EVERY_S = 0.05


def reader(db: Path, queries: list[str], probe: str, probe_id: str, stop: Path, ready: Path):
    """Answer lookups in a loop until ``stop`` exists; every lookup's start time, latency and
    kind (0: one of the speed queries, 1: the probe), and when the probe paper was first
    returned."""
    engine = paperboy.open_engine(db)
    for q in queries[:50]:
        engine.rank(q)
    ready.write_text("ready")
    samples: list[tuple[float, float, int]] = []
    seen_at = None
    probed = 0.0
    i = 0
    while not stop.exists():
        query = queries[i % len(queries)]
        i += 1
        started_wall, started = time.time(), time.perf_counter()
        engine.rank(query, k=10)
        samples.append((started_wall, (time.perf_counter() - started) * 1000, 0))
        if seen_at is None and time.perf_counter() - probed >= PROBE_EVERY_S:
            probe_wall, probed = time.time(), time.perf_counter()
            found = [pid for pid, _ in engine.rank(probe, k=10)]
            samples.append((probe_wall, (time.perf_counter() - probed) * 1000, 1))
            if probe_id in found:
                seen_at = time.time()
    print(json.dumps({"samples": samples, "seen_at": seen_at}))


# -- the run ---------------------------------------------------------------------------------


def live_phase(args, workdir: Path, results: dict) -> None:
    papers = list(iter_papers(corpus_for_scale(args.scale)))
    base, new = papers[: -args.new], papers[-args.new :]
    del papers
    base_file = write_gz(base, workdir / "base.jsonl.gz")
    new_file = write_gz(new, workdir / "new.jsonl.gz")
    probe_paper = new[len(new) // 2]
    results["papers"] = {"base": len(base), "new": len(new)}
    del base, new
    db = workdir / "live.db"
    paperboy.reset_db(db)
    log(f"paperboy: full build of {results['papers']['base']:,} papers ...")
    child = run_child(paperboy.ingest_cmd(db, base_file), env=paperboy.engine_env()).check("build")
    index_dir = Path(f"{db}.index")
    results["build"] = {
        "wall_s": child.wall_s,
        "peak_rss_mb": child.peak_rss_mb,
        "index_mb": dir_size_mb(index_dir),
    }
    current = json.loads((index_dir / "CURRENT").read_text())
    main_dir = index_dir / current["segments"][0]["name"]
    results["build"]["files_mb"] = {
        f.name: f.stat().st_size / 2**20 for f in sorted(main_dir.iterdir())
    }
    if not args.skip_tantivy:
        log("tantivy: build ...")
        tantivy = index_path("tantivy", workdir)
        run = run_child(
            python_cmd(
                "bench.anchors",
                "build",
                "--engine",
                "tantivy",
                "--corpus",
                str(base_file),
                "--index",
                str(tantivy),
            )
        ).check("tantivy build")
        results["tantivy_build"] = {
            "wall_s": run.wall_s,
            "peak_rss_mb": run.peak_rss_mb,
            "index_mb": dir_size_mb(tantivy),
        }
    queries, _ = speed_queries()
    queries_file = workdir / "queries.json"
    queries_file.write_text(json.dumps(queries))
    stop, ready = workdir / "stop", workdir / "ready"
    stop.unlink(missing_ok=True)
    ready.unlink(missing_ok=True)
    out = open(workdir / "reader.out", "w")  # noqa: SIM115 - the child writes until stopped
    reader_proc = subprocess.Popen(
        python_cmd(
            "bench.live_index",
            "--reader",
            str(db),
            "--queries-file",
            str(queries_file),
            "--probe",
            probe_paper["title"],
            "--probe-id",
            probe_paper["id"],
            "--stop",
            str(stop),
            "--ready",
            str(ready),
        ),
        stdout=out,
        env=paperboy.engine_env(),
    )
    while not ready.exists():
        time.sleep(0.1)
    time.sleep(2)  # a stretch of lookups before the ingest, for comparison
    log(f"paperboy: ingest {results['papers']['new']:,} papers while the reader looks up ...")
    ingest_start = time.time()
    child = run_child(paperboy.ingest_cmd(db, new_file), env=paperboy.engine_env()).check("ingest")
    ingest_end = time.time()
    deadline = time.time() + 60
    time.sleep(3)
    while time.time() < deadline:
        time.sleep(0.2)
        out.flush()
        if reader_proc.poll() is not None:
            break
        if time.time() > ingest_end + 5:
            break
    stop.write_text("stop")
    reader_proc.wait(120)
    out.close()
    data = json.loads((workdir / "reader.out").read_text().strip().splitlines()[-1])
    samples = data["samples"]
    during = [ms for at, ms, kind in samples if ingest_start <= at <= ingest_end and kind == 0]
    before = [ms for at, ms, kind in samples if at < ingest_start and kind == 0]
    probes = [ms for at, ms, kind in samples if kind == 1]
    # The new generation is opened by the first lookup after the writer publishes it, which
    # may come after the command ended: the slowest lookup up to 3 s after.
    around = [ms for at, ms, _ in samples if ingest_start <= at <= ingest_end + 3]
    results["ingest"] = {
        "wall_s": child.wall_s,
        "peak_rss_mb": child.peak_rss_mb,
        "lookups_during": len(during),
        "p50_during_ms": percentile(during, 50) if during else None,
        "p99_during_ms": percentile(during, 99) if during else None,
        "max_during_ms": max(during) if during else None,
        "p50_before_ms": percentile(before, 50) if before else None,
        "p99_before_ms": percentile(before, 99) if before else None,
        "probes": len(probes),
        "p50_probe_ms": percentile(probes, 50) if probes else None,
        "p99_probe_ms": percentile(probes, 99) if probes else None,
        "slowest_around_ms": max(around) if around else None,
        "visible_after_s": None if data["seen_at"] is None else data["seen_at"] - ingest_end,
        "index_mb_after": dir_size_mb(index_dir),
        "segments": len(json.loads((index_dir / "CURRENT").read_text())["segments"]),
        "started_at": ingest_start,
        "ended_at": ingest_end,
    }


def quality_phase(workdir: Path, results: dict) -> None:
    """Dev nDCG@10: the eval corpus 80% main + 20% delta, against built at once."""
    papers = load_eval_corpus()
    qrels = load_qrels()
    main = [p for i, p in enumerate(papers) if i % 5]
    delta = [p for i, p in enumerate(papers) if not i % 5]
    all_file = write_gz(papers, workdir / "eval-all.jsonl.gz")
    main_file = write_gz(main, workdir / "eval-main.jsonl.gz")
    delta_file = write_gz(delta, workdir / "eval-delta.jsonl.gz")
    once_db, split_db = workdir / "eval-once.db", workdir / "eval-split.db"
    for db in (once_db, split_db):
        paperboy.reset_db(db)
    once = paperboy.open_engine(once_db)
    once.ingest([all_file])
    index_module.MERGE_SHARE = 10.0  # keep the delta: it is what is measured
    split = paperboy.open_engine(split_db)
    split.ingest([main_file])
    split.ingest([delta_file])
    segments = len(split.index.segments)
    scores = {}
    for name, engine in (("built at once", once), ("80% main + 20% delta", split)):
        run = {q: [pid for pid, _ in engine.rank(q, k=100)] for q in qrels}
        scores[name] = evaluate(run, qrels)["ndcg@10"]
    results["quality"] = {"ndcg@10": scores, "segments": segments}


def render(results: dict) -> str:
    b, i, p = results["build"], results["ingest"], results["papers"]
    rows = [
        [
            "full build (paperboy)",
            f"{b['wall_s']:.1f} s",
            f"{b['peak_rss_mb']:.0f} MB",
            f"{b['index_mb']:.0f} MB",
            f"{b['index_mb'] * 2**20 / p['base']:.0f}",
        ],
    ]
    if "tantivy_build" in results:
        t = results["tantivy_build"]
        rows.append(
            [
                "full build (tantivy)",
                f"{t['wall_s']:.1f} s",
                f"{t['peak_rss_mb']:.0f} MB",
                f"{t['index_mb']:.0f} MB",
                f"{t['index_mb'] * 2**20 / p['base']:.0f}",
            ]
        )
    rows.append(
        [
            f"add {p['new']:,} papers (delta)",
            f"{i['wall_s']:.1f} s",
            f"{i['peak_rss_mb']:.0f} MB",
            f"{i['index_mb_after']:.0f} MB",
            "",
        ]
    )
    lines = [
        f"### Live index, {p['base']:,} + {p['new']:,} papers",
        "",
        markdown_table(["step", "wall", "peak RSS", "index on disk", "bytes/paper"], rows),
        "",
        markdown_table(
            ["lookups (another process)", "n", "p50 ms", "p99 ms", "max ms"],
            [
                [
                    "speed queries, before the ingest",
                    "",
                    f"{i['p50_before_ms']:.2f}",
                    f"{i['p99_before_ms']:.2f}",
                    "",
                ],
                [
                    "speed queries, during the ingest",
                    i["lookups_during"],
                    f"{i['p50_during_ms']:.2f}",
                    f"{i['p99_during_ms']:.2f}",
                    f"{i['max_during_ms']:.1f}",
                ],
                [
                    f"the probe (a title, every {PROBE_EVERY_S * 1000:.0f} ms until found)",
                    i["probes"],
                    f"{i['p50_probe_ms']:.2f}",
                    f"{i['p99_probe_ms']:.2f}",
                    "",
                ],
            ],
        ),
        "",
        f"Slowest lookup from the start of the ingest to 3 s after it: "
        f"{i['slowest_around_ms']:.1f} ms (the one that opens the new generation).",
        "",
        "New papers returned "
        + (
            "never (within the wait)"
            if i["visible_after_s"] is None
            else f"{i['visible_after_s']:+.2f} s after the ingest command ended"
        )
        + f"; {i['segments']} segments after the ingest.",
    ]
    files = sorted(b["files_mb"].items(), key=lambda item: -item[1])
    lines += [
        "",
        "Where the main segment's bytes go: "
        + ", ".join(f"{name} {mb:.1f} MB" for name, mb in files if mb >= 0.1)
        + ".",
    ]
    if "quality" in results:
        q = results["quality"]["ndcg@10"]
        lines += [
            "",
            markdown_table(["dev nDCG@10", "value"], [[k, f"{v:.4f}"] for k, v in q.items()]),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live_index", description=__doc__)
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--new", type=int, default=2000)
    parser.add_argument("--skip-tantivy", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--reader")
    parser.add_argument("--queries-file")
    parser.add_argument("--probe")
    parser.add_argument("--probe-id")
    parser.add_argument("--stop")
    parser.add_argument("--ready")
    args = parser.parse_args(argv)
    if args.reader:
        queries = json.loads(Path(args.queries_file).read_text())
        reader(
            Path(args.reader), queries, args.probe, args.probe_id, Path(args.stop), Path(args.ready)
        )
        return 0
    workdir = WORK_DIR / f"live-x{args.scale}"
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict = {}
    if not args.skip_quality:
        log("quality: eval corpus 80/20 ...")
        quality_phase(workdir, results)
        log(f"quality: {results['quality']}")
    live_phase(args, workdir, results)
    report = render(results)
    print(report)
    (WORK_DIR / f"live-x{args.scale}.md").write_text(report)
    (WORK_DIR / f"live-x{args.scale}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
