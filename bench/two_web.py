"""Two web processes sharing PostgreSQL: ``/papers <query>`` acknowledged and answered.

    .venv/bin/python -m bench.two_web [--requests 200] [--concurrency 20] [--seeds]

What issue 10's deployment looks like, on one machine:

1. **PostgreSQL**: a throwaway server (``tests/postgres.py``: Debian's binaries, a cluster in
   a temp folder, fsync on), one database for the shared state.
2. **two ``paperboy serve``** processes (HTTP mode, waitress), each in its own working
   directory with its own copy of the corpus (the 87k ``bench/work/slack-87k.db``, built once
   with the CLI as ``bench.slack_speed`` does, index folder included; ``--seeds``: the seed
   corpus instead), both with ``DATABASE_URL`` pointing at the one database, and
   ``SLACK_API_URL`` at the Slack stand-in (``bench.serving.TimedFakeSlack``, in this
   process: it notes when each response_url POST arrives).
3. **load**: ``--requests`` signed ``/papers <author keyword>`` slash commands (as Slack signs
   them), ``--concurrency`` client threads in a closed loop, request *i* going to process
   *i mod 2*, each from a different member (``U0000``..). A lookup is answered from the
   process's own corpus copy; PostgreSQL is open in both (pool, migrations checked at start)
   as it is in a real deployment. **ack** = send to HTTP 200; **answer** = send to
   the stand-in receiving the response_url POST. Targets (issue 10): ack p99 < 300 ms,
   answer p99 < 1 s. A disjoint set of queries warms both processes up first.

Results: markdown on stdout and ``bench/work/two_web.md``; the servers' logs in
``bench/work/two_web-web-*.log``; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import paperboy
from bench.corpora import PAPERLISTS_SIZE, WORK_DIR
from bench.measure import log, markdown_table, percentile
from bench.serving import (
    Sample,
    Server,
    TimedFakeSlack,
    free_port,
    serve_env,
    slash,
    start_server,
    stop_children,
)
from bench.slack_speed import (
    ACK_TARGET_MS,
    ANSWER_TARGET_MS,
    WARMUP_QUERIES,
    default_db,
    ensure_db,
    lookup_queries,
    verdict,
)
from bot.settings import SEED_DIR
from tests.postgres import PostgresCluster, find_bin_dir

SEED_QUERIES = ["graph neural networks", "diffusion", "protein", "language model", "robot"]


def corpus_copy(source: Path | None, folder: Path) -> Path:
    """``folder/paperboy.db``: a copy of ``source`` and its index files (None: empty, so
    ``paperboy serve --seeds`` fills it)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    target = folder / "paperboy.db"
    if source is not None:
        for item in source.parent.glob(source.name + "*"):
            copy = folder / item.name.replace(source.name, target.name, 1)
            if item.is_dir():
                shutil.copytree(item, copy)
            else:
                shutil.copy2(item, copy)
    return target


def start_web(
    name: str,
    db: Path,
    database_url: str,
    fake: TimedFakeSlack,
    seeds: bool,
    settings: dict[str, str],
) -> Server:
    """``paperboy serve`` in ``db``'s folder (its own working directory, as on its own host)
    with ``settings`` in its environment, ready once ``GET /healthz`` answers; stopped by
    ``stop_children``."""
    port = free_port()
    seed_dir = {"seed_dir": SEED_DIR} if seeds else {}  # else never seeds the 87k copy
    env = serve_env(db, fake, port, **seed_dir, DATABASE_URL=database_url, **settings)
    log_path = WORK_DIR / f"two_web-{name}.log"
    return start_server(name, [*paperboy.cli(), "serve"], env, port, log_path, cwd=db.parent)


def run(
    servers: list[Server], fake: TimedFakeSlack, queries: list[str], concurrency: int
) -> tuple[list[Sample], float]:
    """Each query as a slash command to ``servers[i % 2]``, ``concurrency`` at a time."""

    def one(i: int) -> Sample:
        port = servers[i % len(servers)].port
        return slash(port, fake, queries[i], f"U{i:04d}", answer=True)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency, thread_name_prefix="bench-client") as pool:
        samples = list(pool.map(one, range(len(queries))))
    return samples, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.two_web", description=__doc__)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", action="store_true", help="the seed corpus, not the 87k")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for both processes, e.g. PAPERBOY_WORK_THREADS=2 (repeatable)",
    )
    args = parser.parse_args(argv)
    settings = dict(item.split("=", 1) for item in args.env)

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql).")
    if args.seeds:
        source, corpus = None, "the seed corpus"
        pool = SEED_QUERIES * ((args.requests + WARMUP_QUERIES) // len(SEED_QUERIES) + 1)
        measured, warmup = pool[: args.requests], pool[args.requests : args.requests + 20]
    else:
        source = default_db(1).resolve()
        ensure_db(source, 1, timeout=3600)
        corpus = f"{PAPERLISTS_SIZE:,} papers (paperlists.jsonl.gz)"
        queries = lookup_queries(args.requests + WARMUP_QUERIES, args.seed)
        measured, warmup = queries[: args.requests], queries[args.requests :]

    load_start = os.getloadavg()[0]
    cluster = PostgresCluster(Path(bin_dir), durable=True).start()
    fake = TimedFakeSlack().start()
    try:
        database_url = cluster.create_database()
        servers = []
        for name in ("a", "b"):
            db = corpus_copy(source, WORK_DIR / "two_web" / name)
            log(f"starting web {name} in {db.parent} ...")
            servers.append(start_web(f"web-{name}", db, database_url, fake, args.seeds, settings))
        log("warming up ...")
        warm, _ = run(servers, fake, warmup, args.concurrency)
        if bad := [s for s in warm if s.error]:
            raise RuntimeError(f"warm-up failed: {bad[0]}")
        log(f"{len(measured)} lookups, {args.concurrency} at a time, over 2 processes ...")
        samples, wall = run(servers, fake, measured, args.concurrency)
    finally:
        stop_children()
        fake.stop()
        cluster.destroy()

    failed = [s for s in samples if s.error]
    acks = [s.ack_ms for s in samples if s.ack_ms is not None]
    answers = [s.answer_ms for s in samples if s.answer_ms is not None]
    rows = [
        [
            name,
            f"{len(values)}/{len(samples)}",
            percentile(values, 50),
            percentile(values, 99),
            max(values, default=float("nan")),
            verdict(percentile(values, 99), target),
        ]
        for name, values, target in (
            ("ack (HTTP 200 from /slack/events)", acks, ACK_TARGET_MS),
            ("answer (response_url POST received)", answers, ANSWER_TARGET_MS),
        )
    ]
    out = [
        "## Two web processes sharing PostgreSQL\n",
        f"{len(samples)} `/papers <author keyword>` slash commands, {args.concurrency} in flight "
        f"(closed loop), alternating between two `paperboy serve` processes (own working "
        f"directories and corpus copies: {corpus}), shared state in one PostgreSQL "
        f"(throwaway server on this machine, fsync on). Settings: "
        f"{' '.join(args.env) or 'the defaults'}. {os.cpu_count()} CPUs, load average "
        f"{load_start:.1f} at start / {os.getloadavg()[0]:.1f} at end; Python "
        f"{platform.python_version()}. {len(samples) / wall:.0f} req/s; "
        f"{len(failed)} failed" + (f" (first: {failed[0].error})" if failed else "") + ".\n",
        markdown_table(["path", "done", "p50 ms", "p99 ms", "max ms", "p99 on target"], rows),
    ]
    text = "\n".join(out)
    print(text)
    (WORK_DIR / "two_web.md").write_text(text)
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
