"""The corpus on every host (issue 10): how soon a paper ingested on one host is found on
another, and how long a fresh host takes to catch up, with the 87k corpus in PostgreSQL.

::

    python -m bench.replica [--runs 5] [--batch 2000] [--sync 15] [--seeds]

Starts a throwaway PostgreSQL server (``tests/postgres.py``, fsync on), then, each step in
its own empty folder under ``bench/work/replica`` (hosts that share nothing but PostgreSQL):

* **share**: ``paperboy ingest paperlists.jsonl.gz`` on a "laptop" with ``DATABASE_URL``
  (87k papers into its own corpus file and index, then published to PostgreSQL);
* **catch-up**: ``paperboy serve`` on a fresh host (empty disk): seconds until its port
  answers, and until ``/healthz`` says 200 (the shared corpus loaded, the index built);
* **propagation**, ``--runs`` times: ``paperboy ingest`` of ``--batch`` new papers (a day's
  feed; each run's titles carry a word of their own) from a third folder, then signed
  ``/papers WORD`` slash commands to the web process every 0.25 s: the time from the ingest
  command's end to the first answer that returns the new papers (the sync interval,
  ``--sync`` seconds, is the production default, 15).

``--phases`` then splits a fresh host's catch-up in this process: reading every shared row
from PostgreSQL, the whole sync into an empty corpus file (read, write, one build), and a full
build on its own. ``--seeds`` uses the 38 seed papers instead of the shared corpus (a smoke
run). Results go to stdout (markdown); progress to stderr.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.corpora import PAPERS_FILE, WORK_DIR, corpus_file, iter_papers
from bench.measure import log, markdown_table, median
from bench.serving import TimedFakeSlack, free_port, health, serve_env, slash
from bot import replica
from bot.settings import SEED_DIR
from bot.state import configure
from bot.state.shared_corpus import SharedCorpus
from tests.postgres import PostgresCluster, find_bin_dir

ROOT = WORK_DIR / "replica"


def env_for(
    folder: Path, database_url: str, sync: int, fake: TimedFakeSlack, port: int = 0
) -> dict:
    return serve_env(
        folder / "paperboy.db",
        fake,
        port,
        seed_dir=SEED_DIR,
        DATABASE_URL=database_url,
        PAPERBOY_CORPUS_SYNC_SECONDS=str(sync),
    )


def ingest(folder: Path, path: Path, env: dict) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "ingest", str(path)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ingest failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - started


def found(port: int, fake: TimedFakeSlack, word: str, want: int) -> bool:
    """Whether ``/papers WORD`` through the web process says ``want`` papers match."""
    sample = slash(port, fake, word, "U0BENCH", answer=True)
    if sample.error or sample.token is None:
        return False
    reply = fake.first_payload(sample.token)
    return f"*{want:,}* papers match" in json.dumps(reply, ensure_ascii=False)


def new_papers(source: list[dict], run: int, batch: int, rng: random.Random) -> tuple[str, list]:
    """``batch`` papers with new ids whose titles carry a word no other paper has."""
    word = f"zorbulat{run}"
    papers = []
    for n, paper in enumerate(rng.sample(source, batch)):
        papers.append(
            {**paper, "id": f"bench-replica-{run}-{n}", "title": f"{paper['title']} ({word})"}
        )
    return word, papers


def phases(url: str) -> list[list]:
    """A fresh host's catch-up, step by step, in this process."""
    store = configure(url)
    try:
        shared = SharedCorpus(store)
        head = shared.head()
        started = time.perf_counter()
        rows = sum(1 for _ in shared.changes(0, head))
        read = time.perf_counter() - started
        log(f"phases: read {rows:,} rows in {read:.1f} s")
        fresh = ROOT / "phases"
        fresh.mkdir()
        engine = replica.open_engine(fresh / "paperboy.db", None)
        started = time.perf_counter()
        replica.Replica(engine, shared).sync()
        whole = time.perf_counter() - started
        started = time.perf_counter()
        engine.rebuild_index()
        build = time.perf_counter() - started
    finally:
        configure(None)
    return [
        [f"phases: read the {rows:,} shared rows from PostgreSQL", read],
        ["phases: sync into an empty corpus file (read, write, one build)", whole],
        ["phases: a full build of that corpus on its own", build],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replica", description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--sync", type=int, default=15)
    parser.add_argument("--seeds", action="store_true")
    parser.add_argument("--phases", action="store_true")
    args = parser.parse_args(argv)
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql).")
    shutil.rmtree(ROOT, ignore_errors=True)
    ROOT.mkdir(parents=True)
    corpus = None if args.seeds else corpus_file(PAPERS_FILE)
    cluster = PostgresCluster(bin_dir, durable=True).start()
    rows = []
    web = None
    try:
        url = cluster.create_database()
        with TimedFakeSlack() as fake:
            laptop = ROOT / "laptop"
            laptop.mkdir()
            source_papers: list[dict] = []
            if corpus is not None:
                log(f"share: ingesting {corpus.name} on the laptop, with DATABASE_URL")
                seconds = ingest(laptop, corpus, env_for(laptop, url, args.sync, fake))
                rows.append(["share: `paperboy ingest` of the corpus, published", seconds])
                source_papers = list(iter_papers(corpus))
            else:
                source_papers = [
                    {"title": f"Seed-like paper {n}", "abstract": "A study of bench replicas."}
                    for n in range(200)
                ]
            host = ROOT / "web"
            host.mkdir()
            port = free_port()
            log("catch-up: paperboy serve on a fresh host")
            started = time.perf_counter()
            with open(host / "serve.log", "ab") as out:
                web = subprocess.Popen(
                    [sys.executable, "-m", "bot.cli", "serve"],
                    cwd=host,
                    env=env_for(host, url, args.sync, fake, port),
                    stdout=out,
                    stderr=out,
                )
            bound = None
            while True:
                status, body = health(port)
                if status and bound is None:
                    bound = time.perf_counter() - started
                if status == 200:
                    break
                if web.poll() is not None:
                    raise RuntimeError((host / "serve.log").read_text()[-3000:])
                time.sleep(0.1)
            ready = time.perf_counter() - started
            rows.append(["fresh host: port answers", bound])
            rows.append([f"fresh host: caught up ({body['papers']:,} papers), /healthz 200", ready])
            log(f"caught up in {ready:.1f} s: {body.get('replica')}")

            rng = random.Random(7)
            feeder = ROOT / "feeder"
            feeder.mkdir()
            latencies = []
            for run in range(args.runs):
                word, papers = new_papers(source_papers, run, args.batch, rng)
                path = feeder / f"feed-{run}.jsonl.gz"
                with gzip.open(path, "wt", encoding="utf-8") as fh:
                    fh.writelines(json.dumps(p) + "\n" for p in papers)
                ingest(feeder, path, env_for(feeder, url, args.sync, fake))
                ended = time.perf_counter()
                while not found(port, fake, word, len(papers)):
                    time.sleep(0.25)
                latencies.append(time.perf_counter() - ended)
                log(f"run {run}: {len(papers):,} papers found {latencies[-1]:.1f} s after ingest")
            rows.append(
                [
                    f"ingest end -> found on the other host ({args.batch:,} papers), median "
                    f"of {args.runs} (min / max {min(latencies):.1f} / {max(latencies):.1f})",
                    median(latencies),
                ]
            )
        if web is not None and web.poll() is None:
            web.send_signal(signal.SIGTERM)
            web.wait(30)
        if args.phases:
            rows += phases(url)
    finally:
        if web is not None and web.poll() is None:
            web.send_signal(signal.SIGTERM)
            web.wait(30)
        cluster.destroy()
    print(f"\nsync interval {args.sync} s, PostgreSQL (fsync on) on the same 2-core machine\n")
    print(markdown_table(["step", "seconds"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
