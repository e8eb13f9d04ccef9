"""Slack speed: how fast ``/papers <query>`` is acknowledged and answered by the real app over HTTP.

    .venv/bin/python -m bench.slack_speed [--scale 1] [--requests 200] [--concurrency 20] [--db PATH]

1. **database**: builds ``bench/work/slack-87k.db`` (``slack-872k.db`` at ``--scale 10``) once
   with the CLI, ``paperboy --db DB ingest paperlists.jsonl.gz``, and reuses it while it holds
   the expected number of papers.
2. **servers**, each its own process so the load generator never holds their GIL:
   ``paperboy serve`` in HTTP mode (``SLACK_BOT_TOKEN``, ``SLACK_SIGNING_SECRET``,
   ``SLACK_API_URL`` pointing at a :class:`~bot.playground.fake_slack.FakeSlack` running in this
   process, ``PAPERBOY_DB``, ``PORT``; ready once ``GET /healthz`` answers 200), and the **ack
   floor**: a WSGI app that only answers 200, behind the same waitress server class and thread
   count (``bot.slack.server.HttpServer``). Both listen on 127.0.0.1 only.
3. **load**: ``--requests`` signed slash commands (form body, ``X-Slack-Signature`` v0
   HMAC-SHA256 over ``v0:{ts}:{body}``, a fresh ``response_url`` from the FakeSlack each),
   ``--concurrency`` at a time: that many client threads, each sending one request over a new
   ``http.client`` connection, waiting for its acknowledgement and then for its answer before
   taking the next (a closed loop, at most ``--concurrency`` lookups in flight). Per request:
   **ack** = send start to HTTP 200 read; **answer** = send start to the FakeSlack receiving the
   first POST to that request's response_url. Each answer's fallback text is checked against
   what the in-process engine renders for the same query, so a fast wrong answer cannot pass.
   The FakeSlack listens with a backlog of 128 (socketserver's default of 5 drops connections
   under this load), so its dropped connections do not pass for the app's delays.
4. **answer floor**: the same queries through ``Engine.search(query, limit=5)`` in this process,
   one at a time (pure lookup latency) and from ``--concurrency`` threads (lookup latency when
   as many lookups share the 2 cores and the GIL as the app sees).

Queries are distinct author keywords sampled with a fixed seed from paperlists
(``corpora.sample_keyword_queries``), minus ones the app treats as subcommands; a disjoint set
warms every path up first. The machine is shared and noisy, so the work is split into
``--rounds`` rounds, each running every path on its own slice of the queries (the two HTTP
paths in ABBA order), and the report gives ratios to the floors measured in the same run.
The whole run is bounded by ``--max-seconds`` (a watchdog ends it, children included).

Results: markdown on stdout and in ``bench/work/slack_speed.md``, raw latencies in
``bench/work/slack_speed.json``, the servers' logs in ``bench/work/slack_speed-*.log``;
progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench import paperboy
from bench.corpora import PAPERLISTS_SIZE, WORK_DIR, corpus_for_scale, sample_keyword_queries
from bench.measure import log, markdown_table, median, percentile, run_child
from bench.serving import (
    CHILDREN,
    Sample,
    Server,
    TimedFakeSlack,
    free_port,
    serve_env,
    slash,
    start_server,
    stop_children,
)
from tests.fake_slack import FakeSlack

ACK_TARGET_MS = 300.0
ANSWER_TARGET_MS = 1000.0
WARMUP_QUERIES = 20


# --- the servers ---------------------------------------------------------------------------


def own_cpu_s() -> float:
    """User + system CPU seconds of this process (clients and FakeSlack) so far."""
    times = os.times()
    return times.user + times.system


def trivial_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """The ack floor: read the body (as Bolt does) and answer 200 with an empty body."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length:
        environ["wsgi.input"].read(length)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "0")])
    return [b""]


def serve_trivial(port: int) -> None:
    """Child-process entry: the trivial app behind the server ``paperboy serve`` uses."""
    from bot.slack.server import HttpServer

    HttpServer(trivial_app, host="127.0.0.1", port=port).serve_forever()


def start_paperboy(db: Path, fake: FakeSlack) -> Server:
    port = free_port()
    env = serve_env(db, fake, port)  # never seeds the benchmark db from data/
    log_path = WORK_DIR / "slack_speed-paperboy.log"
    return start_server("paperboy", [*paperboy.cli(), "serve"], env, port, log_path)


def start_trivial() -> Server:
    port = free_port()
    cmd = [sys.executable, "-m", "bench.slack_speed", "--trivial-server", str(port)]
    log_path = WORK_DIR / "slack_speed-trivial.log"
    return start_server("trivial", cmd, dict(os.environ), port, log_path)


# --- the database --------------------------------------------------------------------------


def ensure_db(db: Path, scale: int, timeout: float) -> int:
    """Reuse ``db`` when it holds the whole corpus; otherwise build it with the CLI."""
    expected = PAPERLISTS_SIZE * scale
    if db.exists():
        count = paperboy.open_engine(db).corpus.count()
        if count == expected:
            log(f"reusing {db} ({count:,} papers)")
            return count
        log(f"{db} holds {count:,} papers, not {expected:,}: rebuilding")
    corpus = corpus_for_scale(scale)
    db.parent.mkdir(parents=True, exist_ok=True)
    paperboy.reset_db(db)
    log(f"paperboy --db {db} ingest {corpus} ...")
    child = run_child(paperboy.ingest_cmd(db, corpus), env=paperboy.engine_env(), timeout=timeout)
    child.check("paperboy ingest")
    count = paperboy.open_engine(db).corpus.count()
    log(f"  {count:,} papers in {child.wall_s:.0f}s (peak {child.peak_rss_mb:,.0f} MB)")
    return count


def lookup_queries(n: int, seed: int) -> list[str]:
    """``n`` distinct author keywords that ``/papers`` treats as lookups (not subcommands)."""
    from bot.slack.listeners.commands import (
        HELP_WORDS,
        SUBSCRIPTION_ALONE,
        SUBSCRIPTION_WORDS,
    )

    def is_lookup(q: str) -> bool:
        words = q.split(maxsplit=1)
        first = words[0].lower() if words else ""
        alone = len(words) < 2
        special = first in SUBSCRIPTION_WORDS or (
            alone and first in HELP_WORDS | SUBSCRIPTION_ALONE
        )
        return bool(q.strip()) and not special

    pool = [q for q in sample_keyword_queries(n + 50, seed=seed) if is_lookup(q)]
    if len(pool) < n:
        raise RuntimeError(f"only {len(pool)} usable keyword queries, wanted {n}")
    return pool[:n]


# --- load ----------------------------------------------------------------------------------


@dataclass
class Measured:
    """One path: its samples over all rounds and the wall time spent running them."""

    name: str
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    server_cpu_s: float | None = None
    client_cpu_s: float = 0.0

    def values(self, attr: str) -> list[float]:
        return [v for s in self.samples if (v := getattr(s, attr)) is not None]


def run_http(
    server: Server,
    fake: TimedFakeSlack,
    queries: Sequence[str],
    concurrency: int,
    *,
    answers: bool,
    deadline: float,
) -> tuple[list[Sample], float]:
    """Send ``queries`` as slash commands, ``concurrency`` at a time; with ``answers``, also
    wait for each answer and keep its fallback text (the real app)."""

    def one(i: int) -> Sample:
        if time.monotonic() > deadline:
            return Sample(queries[i], error="not sent: run deadline")
        return slash(server.port, fake, queries[i], f"U{i % concurrency:04d}", answer=answers)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency, thread_name_prefix="bench-client") as pool:
        samples = list(pool.map(one, range(len(queries))))
    return samples, time.perf_counter() - started


def run_engine(
    engine: Any, queries: Sequence[str], threads: int, deadline: float
) -> tuple[list[Sample], float]:
    """``Engine.search(q, limit=5)`` per query, from ``threads`` threads (1 = sequential)."""

    def one(query: str) -> Sample:
        sample = Sample(query)
        if time.monotonic() > deadline:
            sample.error = "not run: run deadline"
            return sample
        started = time.perf_counter()
        engine.search(query, limit=5)
        sample.answer_ms = (time.perf_counter() - started) * 1000
        return sample

    started = time.perf_counter()
    if threads == 1:
        samples = [one(q) for q in queries]
    else:
        with ThreadPoolExecutor(threads, thread_name_prefix="bench-engine") as pool:
            samples = list(pool.map(one, queries))
    return samples, time.perf_counter() - started


def check_answers(samples: Sequence[Sample], engine: Any) -> None:
    """Mark answers whose fallback text differs from what the app renders for that query
    (after the run, so this lookup cannot warm the engine floor's caches)."""
    from bot.slack import render

    for sample in samples:
        if sample.answer_ms is not None:
            result = engine.search(sample.query, limit=render.PAGE_SIZE)
            sample.wrong = sample.text != render.search_message(result, query=sample.query)["text"]


# --- report --------------------------------------------------------------------------------


def stats(values: Sequence[float]) -> tuple[float, float, float]:
    return percentile(values, 50), percentile(values, 99), max(values, default=float("nan"))


def verdict(p99: float, target: float) -> str:
    if p99 != p99:
        return "-"
    return f"{'yes' if p99 < target else 'NO'} (< {target:,.0f} ms)"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b and a == a and b == b else "-"


def report(args: argparse.Namespace, paths: dict[str, Measured], meta: dict[str, Any]) -> str:
    app, trivial = paths["app"], paths["trivial"]
    seq, par = paths["engine"], paths["engine_par"]
    n = args.requests
    failed = [s for s in app.samples if s.error]
    wrong = sum(s.wrong for s in app.samples)

    def row(label: str, path: Measured, attr: str, target: float | None) -> list[object]:
        values = path.values(attr)
        p50, p99, worst = stats(values)
        rate = len(values) / path.wall_s if path.wall_s else float("nan")
        cpu = "-" if path.server_cpu_s is None else f"{path.server_cpu_s * 1000 / n:.1f}"
        return [
            label,
            f"{len(values)}/{n}",
            p50,
            p99,
            worst,
            f"{rate:.0f}",
            cpu,
            verdict(p99, target) if target else "-",
        ]

    c = args.concurrency
    headers = [
        "path",
        "done",
        "p50 ms",
        "p99 ms",
        "max ms",
        "req/s",
        "server CPU ms/req",
        "p99 on target",
    ]
    rows = [
        row("Paperboy: ack (HTTP 200 from /slack/events)", app, "ack_ms", ACK_TARGET_MS),
        row("Paperboy: answer (response_url POST received)", app, "answer_ms", ANSWER_TARGET_MS),
        row("ack floor: trivial WSGI 200, same waitress", trivial, "ack_ms", None),
        row("answer floor: Engine.search(q, limit=5), 1 thread", seq, "answer_ms", None),
        row(f"answer floor: Engine.search(q, limit=5), {c} threads", par, "answer_ms", None),
    ]
    ack = stats(app.values("ack_ms"))
    ans = stats(app.values("answer_ms"))
    floor_ack = stats(trivial.values("ack_ms"))
    floor_seq = stats(seq.values("answer_ms"))
    floor_par = stats(par.values("answer_ms"))
    ratios = markdown_table(
        ["ratio", "p50", "p99"],
        [
            [
                "Paperboy ack ÷ trivial ack",
                ratio(ack[0], floor_ack[0]),
                ratio(ack[1], floor_ack[1]),
            ],
            [
                "Paperboy answer ÷ Engine.search (1 thread)",
                ratio(ans[0], floor_seq[0]),
                ratio(ans[1], floor_seq[1]),
            ],
            [
                f"Paperboy answer ÷ Engine.search ({c} threads)",
                ratio(ans[0], floor_par[0]),
                ratio(ans[1], floor_par[1]),
            ],
        ],
    )
    problems = f"{len(failed)} failed"
    if failed:
        kinds: dict[str, int] = {}
        for s in failed:
            kinds[s.error or "?"] = kinds.get(s.error or "?", 0) + 1
        problems += " (" + "; ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) + ")"
    lines = [
        f"### Slack speed, scale {args.scale}x ({meta['papers']:,} papers)",
        "",
        f"{n} `/papers <author keyword>` slash commands, {c} in flight (closed loop: {c} "
        f"clients, each waits for its answer before sending again), in {args.rounds} rounds "
        "alternating the paths; signed form POSTs over a new 127.0.0.1 connection each. "
        "`paperboy serve` (HTTP mode, waitress) and the trivial app each run in their own "
        "process; FakeSlack and the clients share this one. ack = send to HTTP 200; answer = "
        "send to FakeSlack receiving the response_url POST. "
        f"{meta['cpus']} CPUs, load average {meta['load_start']:.1f} at start / "
        f"{meta['load_end']:.1f} at end; Python {meta['python']}, {meta['versions']}.",
        "",
        markdown_table(headers, rows),
        "",
        ratios,
        "",
        f"req/s = requests ÷ wall time of their passes; server CPU = the server process's "
        "user+sys CPU over its passes ÷ requests (the answer work included). In a closed loop "
        "answer latency ≈ in-flight ÷ req/s, so it tracks CPU per request on this 2-core box. "
        "FakeSlack listens with a backlog of 128 (socketserver's 5 drops SYNs under this "
        "load, costing 1 s retransmits that real Slack would not cause). "
        f"This process (clients + FakeSlack) used {app.client_cpu_s * 1000 / n:.1f} ms CPU "
        f"per Paperboy request and {trivial.client_cpu_s * 1000 / n:.1f} per trivial one. "
        f"Answers checked against the in-process rendering: {wrong} wrong, {problems}. "
        f"Server peak RSS: paperboy {meta['rss_paperboy']}, trivial {meta['rss_trivial']}. "
        f"Wall time of the run: {meta['wall_s']:.0f} s.",
    ]
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------


def default_db(scale: int) -> Path:
    return WORK_DIR / f"slack-{PAPERLISTS_SIZE * scale // 1000}k.db"


def start_watchdog(seconds: float) -> None:
    """Hard stop: past ``seconds`` the run ends, servers included, whatever it is doing."""

    def expire() -> None:
        log(f"watchdog: run exceeded {seconds:.0f}s, stopping")
        for server in CHILDREN:
            if server.proc.poll() is None:
                server.proc.kill()
        os._exit(3)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def measure(args: argparse.Namespace, started: float, deadline: float) -> str:
    load_start = os.getloadavg()[0]
    db = (args.db or default_db(args.scale)).resolve()
    papers = ensure_db(db, args.scale, timeout=max(deadline - time.monotonic() - 60, 30))

    log("sampling queries ...")
    queries = lookup_queries(args.requests + WARMUP_QUERIES, args.seed)
    measured, warmup = queries[: args.requests], queries[args.requests :]

    # Two engines, so the threaded floor does not find the sequential one's caches warm.
    engines = {key: paperboy.open_engine(db) for key in ("engine", "engine_par")}
    for engine in engines.values():
        for q in warmup:
            engine.search(q, limit=5)

    fake = TimedFakeSlack().start()
    try:
        log("starting paperboy serve and the trivial app ...")
        app_server = start_paperboy(db, fake)
        trivial_server = start_trivial()
        log(f"  paperboy on :{app_server.port}, trivial on :{trivial_server.port}")
        servers = {"app": app_server, "trivial": trivial_server}

        c = args.concurrency
        warm = run_http(app_server, fake, warmup, c, answers=True, deadline=deadline)[0]
        warm += run_http(trivial_server, fake, warmup, c, answers=False, deadline=deadline)[0]
        if bad := [s for s in warm if s.error]:
            raise RuntimeError(f"warm-up failed: {bad[0]}")

        paths = {k: Measured(k) for k in ("app", "trivial", "engine", "engine_par")}

        def add(key: str, result: tuple[list[Sample], float], cpu_s: float | None = None) -> None:
            paths[key].samples += result[0]
            paths[key].wall_s += result[1]
            if cpu_s is not None:
                paths[key].server_cpu_s = (paths[key].server_cpu_s or 0.0) + cpu_s

        rounds = max(1, min(args.rounds, len(measured)))
        for r in range(rounds):
            part = measured[r * len(measured) // rounds : (r + 1) * len(measured) // rounds]
            for key in ("app", "trivial") if r % 2 == 0 else ("trivial", "app"):
                cpu, own = servers[key].cpu_s(), own_cpu_s()
                result = run_http(
                    servers[key], fake, part, c, answers=key == "app", deadline=deadline
                )
                add(key, result, servers[key].cpu_s() - cpu)
                paths[key].client_cpu_s += own_cpu_s() - own
            add("engine", run_engine(engines["engine"], part, 1, deadline))
            add("engine_par", run_engine(engines["engine_par"], part, c, deadline))
            app = paths["app"]
            log(
                f"round {r + 1}/{rounds}: {len(app.samples)} requests, "
                f"ack p50 {median(app.values('ack_ms')):.1f} ms, "
                f"answer p50 {median(app.values('answer_ms')):.1f} ms"
            )

        def rss(server: Server) -> str:
            value = server.peak_rss_mb()
            return f"{value:,.0f} MB" if value else "-"

        meta = {
            "papers": papers,
            "cpus": os.cpu_count(),
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "python": platform.python_version(),
            "versions": ", ".join(
                f"{p} {version(p)}" for p in ("slack-bolt", "slack-sdk", "waitress")
            ),
            "rss_paperboy": rss(app_server),
            "rss_trivial": rss(trivial_server),
            "wall_s": time.monotonic() - started,
        }
    finally:
        stop_children()
        fake.stop()

    check_answers(paths["app"].samples, engines["engine"])
    table = report(args, paths, meta)
    raw = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "meta": meta,
        "paths": {
            k: {"wall_s": p.wall_s, "samples": [vars(s) for s in p.samples]}
            for k, p in paths.items()
        },
    }
    (WORK_DIR / "slack_speed.json").write_text(json.dumps(raw, indent=1), encoding="utf-8")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slack_speed", description=__doc__)
    parser.add_argument("--scale", type=int, default=1, help="corpus replication (default 1)")
    parser.add_argument("--requests", type=int, default=200, help="measured slash commands")
    parser.add_argument("--concurrency", type=int, default=20, help="requests in flight")
    parser.add_argument("--db", type=Path, default=None, help="database (default bench/work/)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument("--seed", type=int, default=7, help="query sample seed")
    parser.add_argument(
        "--max-seconds", type=float, default=570, help="hard limit for the whole run (default 570)"
    )
    parser.add_argument("--trivial-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.trivial_server is not None:
        serve_trivial(args.trivial_server)
        return 0

    started = time.monotonic()
    start_watchdog(args.max_seconds)
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    try:
        table = measure(
            args, started, deadline=started + max(args.max_seconds - 30, args.max_seconds * 0.8)
        )
    finally:
        stop_children()
    print(table)
    out = WORK_DIR / "slack_speed.md"
    out.write_text(table + "\n", encoding="utf-8")
    log(f"wrote {out} and {WORK_DIR / 'slack_speed.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
