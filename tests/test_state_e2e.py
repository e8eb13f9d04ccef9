"""Two real ``paperboy scheduler`` processes, each in its own working directory with its own
corpus file (nothing shared but PostgreSQL), send every member's digest once, while they are
killed (SIGKILL, at random moments) and restarted. Slack is the local stand-in."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.settings import Settings
from bot.slack.poster import SlackPoster
from bot.state import StateStore, configure
from digest.delivery import Dispatcher
from digest.ledger import STALE_CLAIM
from digest.subscriptions import Subscriptions
from tests.fake_slack import FakeSlack
from tests.slack_harness import seeded_engine

REPO = Path(__file__).resolve().parents[1]
MEMBERS = [f"U{n:02d}" for n in range(24)]
TOPICS = ("graph neural networks", "diffusion models", "reinforcement learning")


def scheduler(folder: Path, fake: FakeSlack, database_url: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERBOY_"))}
    env.update(
        PYTHONPATH=str(REPO),
        DATABASE_URL=database_url,
        PAPERBOY_DB=str(folder / "paperboy.db"),
        SLACK_BOT_TOKEN="xoxb-e2e",
        SLACK_API_URL=fake.api_url,
        PAPERBOY_DIGEST_GRACE_SECONDS="86400",  # a digest at 00:00 is still due all day
    )
    with open(folder / "scheduler.log", "ab") as log:  # every run's lines, to read on failure
        return subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "scheduler", "--tick", "1"],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=log,
        )


def test_two_clocks_on_two_hosts_killed_at_random_send_every_digest_once(
    tmp_path: Path, seeded_db_template: Path, postgres_url: str
) -> None:
    today = datetime.now(UTC)
    if today.hour == 23 and today.minute >= 50:
        today += timedelta(minutes=15)  # the run must not straddle midnight's new digests
    state = StateStore(postgres_url)
    subs = Subscriptions(state)
    hosts = []
    for name in ("host-a", "host-b"):
        folder = tmp_path / name
        folder.mkdir()
        seeded_engine(folder / "paperboy.db", seeded_db_template)
        hosts.append(folder)
    with FakeSlack() as fake:
        joined = today - timedelta(days=1)  # before today's 00:00 slot, so it counts
        for n, user in enumerate(MEMBERS):
            fake.set_user(user, tz="UTC")
            subs.add_topic(user, TOPICS[n % len(TOPICS)], joined)
            subs.set_days(user, "daily", joined)
            subs.set_time(user, "00:00", joined)
            subs.set_tz(user, "UTC", today)

        rng = random.Random(int(os.environ.get("PAPERBOY_E2E_SEED", "7")))
        running = {folder: scheduler(folder, fake, postgres_url) for folder in hosts}
        kills = 0
        try:
            deadline = time.monotonic() + 90
            while kills < 6 and time.monotonic() < deadline:
                time.sleep(rng.uniform(0.3, 2.5))  # a random moment: start-up, mid-batch, idle
                victim = rng.choice(hosts)
                running[victim].send_signal(signal.SIGKILL)
                running[victim].wait(10)
                kills += 1
                running[victim] = scheduler(victim, fake, postgres_url)
            # Then let them run until every digest is claimed and nothing moves for 3 s: sent,
            # or left claimed by a killed clock until its lease ends.
            settled, last = time.monotonic(), None
            while time.monotonic() < deadline and time.monotonic() - settled < 3:
                rows = [state.digest(f"{user}:{today.date().isoformat()}") for user in MEMBERS]
                now = [row and row["status"] for row in rows]
                if None in now or now != last:
                    settled, last = time.monotonic(), now
                time.sleep(0.2)
        finally:
            for process in running.values():
                process.send_signal(signal.SIGTERM)
            for process in running.values():
                process.wait(30)
        # A clock killed between claim and record leaves its claim until the lease ends;
        # the next tick after that finishes it (here: one tick, by the test's clock).
        configure(postgres_url)
        try:
            engine = seeded_engine(tmp_path / "finisher.db", seeded_db_template)
            settings = Settings(slack_api_url=fake.api_url, slack_bot_token="xoxb-e2e")
            poster = SlackPoster.from_settings(settings, engine)
            finisher = Dispatcher(engine, poster, grace=timedelta(days=1), worker="finisher")
            finisher.run_due(datetime.now(UTC) + STALE_CLAIM + timedelta(minutes=1))
        finally:
            configure(None)

        logs = "\n".join((h / "scheduler.log").read_text()[-3000:] for h in hosts)
        for user in MEMBERS:
            messages = fake.messages_in(f"D{user}")
            assert len(messages) == 1, (user, len(messages), logs)
            digest_id = messages[0]["metadata"]["event_payload"]["digest_id"]
            assert digest_id == f"{user}:{today.date().isoformat()}"
        assert len(fake.calls_to("chat.postMessage")) >= len(MEMBERS)
        assert kills == 6
