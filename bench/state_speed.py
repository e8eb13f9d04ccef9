"""The digest batch with the shared state in SQLite and in PostgreSQL.

::

    python -m bench.state_speed [--members 1000] [--topics 5] [--runs 3] [--seeds] [--workers 4]

Indexes the 87k ``paperlists.jsonl.gz`` from ``../shared/corpus`` once into
``bench/work/digest/paperboy.db`` (shared with ``bench.digest_speed``; ``--seeds`` uses the
small seed corpus instead, when the shared corpus is not there), starts a throwaway PostgreSQL
server (``tests/postgres.py``: Debian's binaries, a cluster in a temp folder), and for each
backend, alternating run by run, on a fresh state each time:

* **subscribe**: ``--members`` members follow ``--topics`` author keywords each (through
  ``Subscriptions``, one transaction per topic, as ``/papers subscribe`` does);
* **select**: ``select_digests`` for everyone at once (reads topics, members, sent papers and
  last digests from the state);
* **batch**: ``Dispatcher.run_due`` at the members' digest time: every member's digest chosen,
  claimed (a hundred per transaction), posted to the local Slack stand-in by ``--workers``
  threads and recorded (a hundred per transaction): what the clock does. The stand-in runs in
  a child process, as Slack's servers are not on this machine's CPU.
  Members' DM channels are known, as from their second digest on (the first day's
  ``conversations.open`` is held to about 50 a minute by Slack, whatever the store).

* **render**: the batch's messages rendered once more, alone (a sample, scaled);

Results go to stdout (markdown); progress to stderr.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import time
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path

from bench.corpora import PAPERS_FILE, WORK_DIR, corpus_file
from bench.digest_speed import keyword_pool, open_engine
from bench.measure import log, markdown_table, median, peak_rss_mb
from bot.engine.search import Engine
from bot.settings import SEED_DIR, Settings
from bot.slack.poster import SlackPoster
from bot.slack.render.digest import digest_message
from bot.state import StateStore, configure
from bot.state.tables import ALL
from digest.delivery import DIGEST_WORKERS, Dispatcher
from digest.selection import select_digests
from digest.subscriptions import SubscriptionError, Subscriptions
from tests.fake_slack import FakeSlack
from tests.postgres import PostgresCluster, find_bin_dir

MONDAY_0900 = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
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


class FakeSlackProcess:
    """``FakeSlack`` served by a child process (``_serve_fake``)."""

    def start(self) -> FakeSlackProcess:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve_fake, args=(child,), daemon=True)
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


def run(engine: Engine, store: StateStore, fake: FakeSlackProcess, args, pool) -> dict[str, float]:
    configure(None)
    clear(store)
    if store.is_postgres:
        configure(store.url.set(drivername="postgresql").render_as_string(False))
    times = {}
    started = time.perf_counter()
    subscribe(store, pool, args.members, args.topics, args.seed)
    times["subscribe"] = time.perf_counter() - started
    for m in range(args.members):  # known from an earlier digest (see the module doc)
        Subscriptions(store).set_dm_channel(f"U{m:05d}", f"DU{m:05d}")
    started = time.perf_counter()
    plans = select_digests(engine)
    times["select"] = time.perf_counter() - started
    settings = Settings(slack_api_url=fake.api_url, slack_bot_token="xoxb-bench")
    poster = SlackPoster.from_settings(settings, engine)
    dispatcher = Dispatcher(engine, poster, worker="bench", tz_refreshes=0, workers=args.workers)
    started = time.perf_counter()
    outcomes = dispatcher.run_due(MONDAY_0900)
    times["batch"] = time.perf_counter() - started
    sent = sum(o.status == "sent" for o in outcomes)
    with_papers = [p for p in plans.values() if p.size]
    if sent != len(with_papers):
        raise SystemExit(f"{store!r}: {sent} digests sent, {len(with_papers)} expected")
    # What rendering the messages alone costs (a sample of RENDER_SAMPLE, scaled to all).
    sample = with_papers[:RENDER_SAMPLE]
    started = time.perf_counter()
    for plan in sample:
        digest_message(engine, plan, "2025-06-02", digest_id="bench")
    times["render"] = (time.perf_counter() - started) * len(with_papers) / max(1, len(sample))
    configure(None)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_speed", description=__doc__)
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--workers", type=int, default=DIGEST_WORKERS, help="digests posted at once"
    )
    parser.add_argument(
        "--backends", default="SQLite,PostgreSQL", help="which of SQLite,PostgreSQL to run"
    )
    parser.add_argument("--seeds", action="store_true", help="the seed corpus, not the 87k")
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
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql).")
    cluster = PostgresCluster(Path(bin_dir), durable=True).start()
    fake = FakeSlackProcess().start()
    opener = SlackPoster.from_settings(
        Settings(slack_api_url=fake.api_url, slack_bot_token="xoxb-bench"), engine
    ).client
    for m in range(args.members):
        opener.conversations_open(users=f"U{m:05d}")
    try:
        stores = {
            "SQLite": StateStore(engine.db_path),
            "PostgreSQL": StateStore(cluster.create_database()),
        }
        stores = {k: v for k, v in stores.items() if k in args.backends.split(",")}
        times: dict[str, dict[str, list[float]]] = {name: {} for name in stores}
        for number in range(args.runs):
            order = list(stores) if number % 2 == 0 else list(reversed(stores))
            for name in order:
                result = run(engine, stores[name], fake, args, pool)
                for step, seconds in result.items():
                    times[name].setdefault(step, []).append(seconds)
                log(
                    f"run {number + 1} {name}: "
                    + ", ".join(f"{k} {v:.2f}s" for k, v in result.items())
                )
    finally:
        fake.stop()
        cluster.destroy()

    print(f"## Shared state: {args.members:,} members x {args.topics} topics\n")
    print(
        f"Corpus: {engine.corpus.count():,} papers ({corpus}); median of {args.runs} runs, "
        f"backends alternating; {os.cpu_count()} CPUs; peak RSS {peak_rss_mb():,.0f} MB. "
        "PostgreSQL 15 on the same machine (TCP on 127.0.0.1, fsync on).\n"
    )
    steps = ("subscribe", "select", "batch", "render")
    rows = [[name, *(median(times[name][step]) for step in steps)] for name in stores]
    headers = ["state in", "subscribe s", "select s", "digest batch s", "of which rendering s"]
    print(markdown_table(headers, rows))
    print(
        f"\nrendering = every digest's message rendered once (``digest_message``), timed on "
        f"{RENDER_SAMPLE} of them after the batch and scaled to all: the batch's floor in "
        f"this process. Workers: {args.workers}; load average {os.getloadavg()[0]:.1f} at end."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
