"""The digest batch with the shared state in SQLite and in PostgreSQL.

::

    python -m bench.state_speed [--members 1000] [--topics 5] [--clicks 0] [--runs 3] [--seeds]
                                [--workers 4]

Indexes the 87k ``paperlists.jsonl.gz`` from ``../shared/corpus`` once into
``bench/work/digest/paperboy.db`` (shared with ``bench.digest_speed``; ``--seeds`` uses the
small seed corpus instead, when the shared corpus is not there), starts a throwaway PostgreSQL
server (``tests/postgres.py``: Debian's binaries, a cluster in a temp folder), and for each
backend, alternating run by run, on a fresh state each time:

* **subscribe**: ``--members`` members follow ``--topics`` author keywords each (through
  ``Subscriptions``, one transaction per topic, as ``/papers subscribe`` does), in each
  backend's first run; later runs keep them and forget only the digests (claims, sent papers);
  then every member's clicks are replaced by ``--clicks`` 👍/👎 each (``give_clicks`` of
  ``bench.feedback_digests``: random papers among their topics' best matches; 0: none), so
  the digests carry each member's recommendations as issue 11's target has them. With clicks,
  ``digest.taste.forget()`` runs before the select and before each batch: every model is
  trained again, as after a restart (the first batch of a scheduler just started);
* **select**: ``select_digests`` for everyone at once (reads topics, members, sent papers and
  last digests from the state);
* **batch**: ``Dispatcher.run_due`` at the members' digest time: every member's digest chosen,
  claimed (a hundred per transaction), rendered (``DigestRenderer``), posted by ``--workers``
  threads and recorded (a hundred per transaction): what the clock does. Twice, the digests
  forgotten in between: posting to ``FakeSlack``, which checks every block with slack_sdk's
  models as strictly as Slack (about 14 ms of CPU a digest), and to a stand-in that answers
  at once (``_InstantSlack``: what posting costs Paperboy itself). Both run in a child
  process, as Slack's servers are not this machine's CPU, though here they share its 2 cores.
  Members' DM channels are known, as from their second digest on (the first day's
  ``conversations.open`` is held to about 50 a minute by Slack, whatever the store). Each
  batch's dispatcher starts its selection helper process (``digest.selector``) before the
  batch is timed, as a scheduler that has run a large batch before has it (its imports take
  seconds); the helper is new each batch, so its caches are as cold as after a restart.
* **render**: the batch's messages rendered once more, alone, by a fresh ``DigestRenderer``
  (what the batch does: their papers read at once by ``prepare``, then each message), and a
  sample one by one by ``digest_message`` (scaled to all);

Results go to stdout (markdown); progress to stderr.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import os
import random
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from sqlalchemy import distinct, func, select

from bench.corpora import PAPERS_FILE, WORK_DIR, corpus_file
from bench.digest_speed import keyword_pool, open_engine
from bench.feedback_digests import give_clicks
from bench.measure import log, markdown_table, median, peak_rss_mb
from bot.engine.search import Engine
from bot.settings import SEED_DIR, Settings
from bot.slack.poster import SlackPoster
from bot.slack.render.digest import DigestRenderer, digest_message
from bot.state import StateStore, configure
from bot.state.tables import ALL, digests, sent_papers, topics
from digest import taste
from digest.delivery import DIGEST_WORKERS, Dispatcher
from digest.selection import select_digests
from digest.subscriptions import SubscriptionError, Subscriptions
from tests.fake_slack import FakeSlack
from tests.postgres import PostgresCluster, find_bin_dir

MONDAY_0900 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
SLACKS = ("strict", "instant")  # the Slack stand-ins (see FakeSlackProcess)
RENDER_SAMPLE = 200


def _serve_fake(conn: Connection) -> None:
    """The Slack stand-in in its own process, as Slack's servers are not this one's CPU.
    Its clock steps 2 s a call, so opening every member's DM once (Slack's limit on
    conversations.open is per minute) leaves the timed batches only posting."""
    ticks = [time.time()]

    def stepping_clock() -> float:
        ticks[0] += 2.0
        return ticks[0]

    fake = FakeSlack(clock=stepping_clock).start()
    conn.send(fake.api_url)
    conn.recv()  # until told to stop
    fake.stop()


class _InstantSlack(BaseHTTPRequestHandler):
    """Slack's Web API answered at once: ``ok``, a DM per user, a ``ts`` per message and the
    message echoed back as Slack does, nothing checked or kept. What posting costs Paperboy
    itself; ``FakeSlack`` checks every block with slack_sdk's models, about 14 ms a digest of
    this machine's CPU (the test-suite keeps that strictness)."""

    protocol_version = "HTTP/1.1"
    sent = itertools.count(1)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        params = dict(parse_qsl(urlsplit(self.path).query))
        if self.headers.get("Content-Type", "").startswith("application/json"):
            params.update(json.loads(body or b"{}"))
        else:
            params.update(parse_qsl(body.decode()))
        method = urlsplit(self.path).path.rsplit("/", 1)[-1]
        answer: dict = {"ok": True}
        if method == "conversations.open":
            answer["channel"] = {"id": f"D{params.get('users', '')}"}
        elif method == "users.info":
            answer["user"] = {"id": params.get("user"), "tz": "UTC"}
        elif method == "chat.postMessage":
            ts = f"1700000000.{next(self.sent):06d}"
            message = {k: params[k] for k in ("text", "blocks", "metadata") if k in params}
            answer.update(channel=params.get("channel"), ts=ts, message={**message, "ts": ts})
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def _serve_instant(conn: Connection) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _InstantSlack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    conn.send(f"http://127.0.0.1:{server.server_address[1]}/api/")
    conn.recv()  # until told to stop
    server.shutdown()


class FakeSlackProcess:
    """A Slack stand-in served by a child process: ``FakeSlack`` (``_serve_fake``), or with
    ``instant`` one that answers at once (``_InstantSlack``)."""

    def __init__(self, instant: bool = False):
        self.instant = instant

    def start(self) -> FakeSlackProcess:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        serve = _serve_instant if self.instant else _serve_fake
        self._process = context.Process(target=serve, args=(child,), daemon=True)
        self._process.start()
        self.api_url = self._conn.recv()
        return self

    def stop(self) -> None:
        self._conn.send("stop")
        self._process.join(10)


def clear(store: StateStore) -> None:
    with store.write() as conn:
        for table in reversed(ALL):
            conn.execute(table.delete())


def subscribe(store: StateStore, pool: list[list[str]], members: int, topics: int, seed: int):
    rng = random.Random(seed)
    subs = Subscriptions(store)
    for m in range(members):
        user = f"U{m:05d}"
        subs.set_tz(user, "UTC", MONDAY_0900)
        subs.set_time(user, "09:00", MONDAY_0900)
        added = 0
        while added < topics:
            try:
                _, created = subs.add_topic(user, rng.choice(rng.choice(pool)), MONDAY_0900)
            except (SubscriptionError, ValueError):
                continue
            added += created


def clear_ledger(store: StateStore) -> None:
    """Every digest forgotten (claims, sent papers); members and topics stay."""
    with store.write() as conn:
        for table in (sent_papers, digests):
            conn.execute(table.delete())


def subscribed(store: StateStore, args) -> bool:
    """Whether ``store`` holds the members and topics this run would subscribe."""
    with store.read() as conn:
        counts = conn.execute(
            select(func.count(distinct(topics.c.user_id)), func.count()).select_from(topics)
        ).one()
    return tuple(counts) == (args.members, args.members * args.topics)


def run(
    engine: Engine,
    store: StateStore,
    fakes: dict[str, FakeSlackProcess],
    args,
    pool,
    first: bool,
) -> dict[str, float]:
    """One run on one backend: the batch against each Slack stand-in in ``fakes`` (the
    digests forgotten in between), then rendering alone."""
    configure(None)
    reuse = first and args.reuse_subscriptions and subscribed(args.source, args)
    if first and not reuse:
        clear(store)
    else:
        clear_ledger(store)
    if reuse and store is not args.source:
        clear(store)
        clear_ledger(args.source)
        args.source.copy_to(store)
    if store.is_postgres:
        configure(store.url.set(drivername="postgresql").render_as_string(False))
    times = {}
    if first and not reuse:
        started = time.perf_counter()
        subscribe(store, pool, args.members, args.topics, args.seed)
        times["subscribe"] = time.perf_counter() - started
        for m in range(args.members):  # known from an earlier digest (see the module doc)
            Subscriptions(store).set_dm_channel(f"U{m:05d}", f"DU{m:05d}")
    if first:
        users = [f"U{m:05d}" for m in range(args.members)]
        give_clicks(engine, store, users, args.clicks, args.seed)
    if args.clicks:
        taste.forget()  # every model trained again, as after a restart
    started = time.perf_counter()
    plans = select_digests(engine)
    times["select"] = time.perf_counter() - started
    with_papers = [p for p in plans.values() if p.size]
    for n, (kind, fake) in enumerate(fakes.items()):
        if n:
            clear_ledger(store)
        if args.clicks:
            taste.forget()
        settings = Settings(slack_api_url=fake.api_url, slack_bot_token="xoxb-bench")
        poster = SlackPoster.from_settings(settings, engine)
        dispatcher = Dispatcher(
            engine,
            poster,
            worker="bench",
            tz_refreshes=0,
            workers=args.workers,
            pipeline=not args.at_once,
        )
        dispatcher.start_helper()  # up before the batch, as in a scheduler running already
        started = time.perf_counter()
        outcomes = dispatcher.run_due(MONDAY_0900)
        times[f"batch {kind}"] = time.perf_counter() - started
        dispatcher.close()  # its selection helper: the next batch's starts afresh (a restart)
        sent = sum(o.status == "sent" for o in outcomes)
        if sent != len(with_papers):
            raise SystemExit(f"{store!r}: {sent} digests sent, {len(with_papers)} expected")
    # What rendering the messages alone costs: all of them by a fresh renderer, as a batch
    # renders them; and a sample one by one (digest_message, every block built), scaled.
    started = time.perf_counter()
    renderer = DigestRenderer(engine)
    renderer.prepare(with_papers)
    for plan in with_papers:
        renderer.message(plan, "2025-06-02", digest_id="bench")
    times["render"] = time.perf_counter() - started
    sample = with_papers[:RENDER_SAMPLE]
    started = time.perf_counter()
    for plan in sample:
        digest_message(engine, plan, "2025-06-02", digest_id="bench")
    times["render1"] = (time.perf_counter() - started) * len(with_papers) / max(1, len(sample))
    configure(None)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_speed", description=__doc__)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=5)
    parser.add_argument(
        "--clicks",
        type=int,
        default=0,
        help="👍/👎 clicks a member (every model trained again before each batch)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers", type=int, default=DIGEST_WORKERS, help="digests posted at once"
    )
    parser.add_argument(
        "--backends", default="SQLite,PostgreSQL", help="which of SQLite,PostgreSQL to run"
    )
    parser.add_argument("--seeds", action="store_true", help="the seed corpus, not the 87k")
    parser.add_argument(
        "--at-once",
        action="store_true",
        help="choose each batch at once in the benchmark's process (as on one core), "
        "not chunk by chunk with a helper process",
    )
    parser.add_argument(
        "--reuse-subscriptions",
        action="store_true",
        help="keep the members a run with the same --members/--topics left in the SQLite "
        "state (PostgreSQL gets a copy): no subscribe step (1,000 members take minutes)",
    )
    args = parser.parse_args(argv)

    if args.seeds:
        db = WORK_DIR / "state" / "seeds.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        engine = Engine.open(db, seed_dir=SEED_DIR)
        pool = [[w] for w in ("graph", "diffusion", "protein", "language model", "robot")]
        corpus = "the seed corpus"
    else:
        engine = open_engine(WORK_DIR / "digest" / "paperboy.db", corpus_file(PAPERS_FILE), False)
        pool = keyword_pool()
        corpus = PAPERS_FILE
    engine.index  # noqa: B018 - built before anything is timed
    log(f"corpus: {engine.corpus.count():,} papers ({corpus})")
    load_at_start = os.getloadavg()[0]
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql).")
    cluster = PostgresCluster(Path(bin_dir), durable=True).start()
    fakes = {kind: FakeSlackProcess(kind == "instant").start() for kind in SLACKS}
    opener = SlackPoster.from_settings(
        Settings(slack_api_url=fakes["strict"].api_url, slack_bot_token="xoxb-bench"), engine
    ).client
    for m in range(args.members):
        opener.conversations_open(users=f"U{m:05d}")
    try:
        stores = {
            "SQLite": StateStore(engine.db_path),
            "PostgreSQL": StateStore(cluster.create_database()),
        }
        args.source = stores["SQLite"]
        stores = {k: v for k, v in stores.items() if k in args.backends.split(",")}
        times: dict[str, dict[str, list[float]]] = {name: {} for name in stores}
        for number in range(args.runs):
            order = list(stores) if number % 2 == 0 else list(reversed(stores))
            for name in order:
                result = run(engine, stores[name], fakes, args, pool, first=number == 0)
                log(
                    f"run {number + 1} {name}: "
                    + ", ".join(f"{k} {v:.2f}s" for k, v in result.items())
                    + f", load {os.getloadavg()[0]:.1f}"
                )
                result["load"] = os.getloadavg()[0]
                for step, seconds in result.items():
                    times[name].setdefault(step, []).append(seconds)
    finally:
        for fake in fakes.values():
            fake.stop()
        cluster.destroy()

    clicks = (
        f", {args.clicks} clicks each (every model trained again before the select and each "
        "batch, as after a restart)"
        if args.clicks
        else ", no clicks"
    )
    print(f"## Shared state: {args.members:,} members x {args.topics} topics{clicks}\n")
    print(
        f"Corpus: {engine.corpus.count():,} papers ({corpus}); median of {args.runs} runs, "
        f"backends alternating; {os.cpu_count()} CPUs; peak RSS {peak_rss_mb():,.0f} MB. "
        "PostgreSQL 15 on the same machine (TCP on 127.0.0.1, fsync on).\n"
    )
    steps = ("subscribe", "select", "batch strict", "batch instant", "render", "render1")
    rows = [
        [name, *(median(times[name][step]) if step in times[name] else "reused" for step in steps)]
        for name in stores
    ]
    headers = [
        "state in",
        "subscribe s",
        "select s",
        "digest batch s (FakeSlack)",
        "digest batch s (instant Slack)",
        "rendering s",
        "rendering one by one s",
    ]
    print(markdown_table(headers, rows))
    loads = [v for name in stores for v in times[name]["load"]]
    print(
        "\nsubscribe: in each backend's first run only. Digest batch: `Dispatcher.run_due`, "
        "posting to `FakeSlack` (every block checked with slack_sdk's models, in a child "
        "process on this machine's CPU) and to a stand-in that answers at once (Paperboy's "
        "own cost). rendering = every digest's message rendered once by a fresh "
        "``DigestRenderer`` (as the batch does), after the batch; one by one = "
        f"``digest_message`` for each (every block built), timed on {RENDER_SAMPLE} of them "
        f"and scaled to all. Workers: {args.workers}; load average {load_at_start:.1f} at "
        f"start, {min(loads):.1f}-{max(loads):.1f} after each run."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
