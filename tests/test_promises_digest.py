"""README promises of the daily digest, through ``paperboy digest send``, ``paperboy scheduler``
(a real process) and the local Slack stand-in. Each test was checked against a deliberate
break (tests/README.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from click.testing import CliRunner

from bot.cli import main
from bot.engine.search import Engine
from bot.settings import Settings
from bot.slack.client import make_client
from bot.slack.poster import SlackPoster
from digest.delivery import Dispatcher
from digest.schedule import FEEDS_JOB, TICK_JOB, build_scheduler, due_date, next_digest
from digest.subscriptions import Member, Subscriptions
from tests.fake_slack import FakeSlack
from tests.slack_harness import BOT_TOKEN

LONG_AGO = datetime(2024, 1, 1, tzinfo=UTC)


def slack_poster(engine: Engine, settings: Settings) -> SlackPoster:
    return SlackPoster(make_client(settings), engine)


QUASARS = 25  # papers matching the member's topic: more than one digest holds


def corpus() -> list[dict[str, Any]]:
    papers = [
        {
            "id": f"quasar-{n}",
            "title": f"Quasar Spectra in Survey Field {n}",
            "abstract": f"We measure quasar spectra and quasar variability in field {n}.",
            "authors": ["Vera Rubin"],
            "venue": "ApJ",
            "year": 2024,
        }
        for n in range(QUASARS)
    ]
    papers += [
        {
            "id": f"other-{n}",
            "title": f"Optimiser Schedules, Part {n}",
            "abstract": f"Learning rate schedules for optimisers, part {n}.",
            "authors": ["Ada Lovelace"],
            "venue": "ICLR",
            "year": 2023,
        }
        for n in range(15)
    ]
    return papers


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    fake.start()
    fake.set_user("U1", tz="UTC")
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database with :func:`corpus` and member U1 (UTC, daily, subscribed to "quasar" long
    ago, digest time ten minutes ago)."""
    path = tmp_path / "digest.db"
    source = tmp_path / "papers.jsonl"
    source.write_text("\n".join(json.dumps(p) for p in corpus()) + "\n")
    engine = Engine.open(path)
    engine.ingest([source])
    members = Subscriptions(engine.db)
    members.add_topic("U1", "quasar", LONG_AGO)
    members.set_days("U1", "daily", LONG_AGO)
    members.set_tz("U1", "UTC", LONG_AGO)
    members.set_time("U1", minutes_ago(10), LONG_AGO)
    return path


def minutes_ago(minutes: int) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%H:%M")


def env(fake: FakeSlack, db: Path, **extra: str) -> dict[str, str]:
    return {
        "PAPERBOY_DB": str(db),
        "SLACK_API_URL": fake.api_url,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_SIGNING_SECRET": "",
        "SLACK_APP_TOKEN": "",
        "PAPERBOY_FEEDS": "",
        **extra,
    }


def paperboy(fake: FakeSlack, db: Path, *args: str, **extra: str):
    return CliRunner().invoke(main, list(args), env=env(fake, db, **extra))


def digest_papers(message: dict[str, Any]) -> list[str]:
    """The paper ids a digest message shows (each paper's buttons carry its id)."""
    ids: list[str] = []
    for block in message.get("blocks") or []:
        for element in block.get("elements", []) + [block.get("accessory") or {}]:
            value = element.get("value") if isinstance(element, dict) else None
            if value and value.startswith("quasar-") and value not in ids:
                ids.append(value)
    return ids


def test_a_digest_holds_at_most_ten_papers_and_the_rest_lead_the_next(fake, db) -> None:
    first = paperboy(fake, db, "digest", "send", "--now")
    assert first.exit_code == 0, first.output
    assert ": sent, 10 papers" in first.output
    second = paperboy(fake, db, "digest", "send", "--now")
    assert ": sent, 10 papers" in second.output
    one, two = (digest_papers(m) for m in fake.messages_in("DU1"))
    assert len(one) == len(two) == 10
    assert not set(one) & set(two)  # no paper twice


def test_the_grace_period_setting_decides_how_late_a_digest_may_go(fake, db) -> None:
    """U1's digest time was ten minutes ago: too late with a five-minute grace period, on time
    with an hour's."""
    late = paperboy(fake, db, "digest", "send", PAPERBOY_DIGEST_GRACE_SECONDS="300")
    assert late.exit_code == 0, late.output
    assert late.output.strip().endswith("nothing due")
    assert fake.messages_in("DU1") == []
    on_time = paperboy(fake, db, "digest", "send", PAPERBOY_DIGEST_GRACE_SECONDS="3600")
    assert on_time.exit_code == 0, on_time.output
    assert "1 sent" in on_time.output
    assert len(fake.messages_in("DU1")) == 1


def test_the_scheduler_process_sends_a_due_digest_once_and_stops_on_sigterm(fake, db) -> None:
    """``paperboy scheduler`` (the Procfile's clock), as its own process, ticking every second:
    the digest due since ten minutes goes out once, however many ticks see it, and SIGTERM
    stops it with exit 0."""
    code = "from bot.cli import main; main(['scheduler', '--tick', '1'], prog_name='paperboy')"
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, **env(fake, db, PAPERBOY_LOG_LEVEL="DEBUG")},
        stderr=subprocess.PIPE,
        text=True,
    )
    ticks = TickCounter(process)
    try:
        fake.wait_for(lambda: fake.messages_in("DU1"), timeout=60)
        seen = ticks.count
        assert ticks.wait_for(seen + 3, timeout=30), ticks.tail()  # three more ticks look again
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, ticks.tail()
    finally:
        process.kill()
        process.wait()
    assert len(fake.messages_in("DU1")) == 1


class TickCounter:
    """Counts the digest ticks a scheduler process reports on stderr (APScheduler, at DEBUG)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.count = 0
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(process,), daemon=True).start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            with self._cond:
                self.lines.append(line)
                if "send the digests that are due" in line and "executed successfully" in line:
                    self.count += 1
                self._cond.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.count >= count, timeout)

    def tail(self) -> str:
        with self._cond:
            return "".join(self.lines[-30:])


def test_ticks_every_ten_minutes_across_dst_and_downtime_send_each_days_digest_once(
    fake, db
) -> None:
    """The exactly-once promise with the real ledger (tests/test_digest_schedule.py checks
    due-ness alone): a Berlin member's 09:00 weekday digest, ticked every ten minutes from
    Friday 29 March 2024 over the night clocks go forward to Tuesday, the scheduler down on
    Monday from 07:00 to 12:00 local. Friday's and Tuesday's go at 09:00 local, Monday's when
    the scheduler is back, each once, however many ticks see it due."""
    fake.set_user("U1", tz="Europe/Berlin")
    engine = Engine.open(db)
    members = Subscriptions(engine.db)
    members.set_tz("U1", "Europe/Berlin", LONG_AGO)
    members.set_time("U1", "09:00", LONG_AGO)
    members.set_days("U1", "weekdays", LONG_AGO)
    settings = Settings(
        db_path=db, slack_api_url=fake.api_url, slack_bot_token=BOT_TOKEN, slack_signing_secret=""
    )
    clock = Dispatcher.from_settings(engine, slack_poster(engine, settings), settings)
    down = (datetime(2024, 4, 1, 5, 0, tzinfo=UTC), datetime(2024, 4, 1, 10, 0, tzinfo=UTC))
    sent: list[tuple[datetime, str]] = []
    now = datetime(2024, 3, 29, tzinfo=UTC)
    while now < datetime(2024, 4, 3, tzinfo=UTC):
        if not down[0] <= now < down[1]:
            sent += [(now, o.digest_id) for o in clock.run_due(now) if o.status == "sent"]
        now += timedelta(minutes=10)
    assert sent == [
        (datetime(2024, 3, 29, 8, 0, tzinfo=UTC), "U1:2024-03-29"),  # 09:00 CET
        (datetime(2024, 4, 1, 10, 0, tzinfo=UTC), "U1:2024-04-01"),  # back at 12:00 CEST
        (datetime(2024, 4, 2, 7, 0, tzinfo=UTC), "U1:2024-04-02"),  # 09:00 CEST
    ]
    assert len(fake.messages_in("DU1")) == 3


def test_the_jobs_run_in_utc_and_the_feeds_ingest_also_at_start_up() -> None:
    """Feeds come in daily at 04:00 UTC and once at start-up (a restart never waits a day for
    papers); the tick starts at once, or 5 s later when the ingest goes first."""
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    try:
        before = datetime.now(UTC)
        build_scheduler(lambda: None, lambda: None, scheduler=scheduler)
        after = datetime.now(UTC)
        jobs = {job.id: job for job in scheduler.get_jobs()}
    finally:
        scheduler.shutdown(wait=False)
    feeds, tick = jobs[FEEDS_JOB], jobs[TICK_JOB]
    assert str(feeds.trigger.timezone) == "UTC" and str(tick.trigger.timezone) == "UTC"
    fields = {field.name: str(field) for field in feeds.trigger.fields}
    assert (fields["hour"], fields["minute"]) == ("4", "0")
    assert feeds.misfire_grace_time == 6 * 3600
    assert feeds.next_run_time is not None and before <= feeds.next_run_time <= after
    five = timedelta(seconds=5)
    assert before + five <= tick.next_run_time <= after + five
    assert (feeds.name, tick.name) == ("ingest PAPERBOY_FEEDS", "send the digests that are due")


def test_without_feeds_the_first_tick_is_at_start_up() -> None:
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    try:
        before = datetime.now(UTC)
        build_scheduler(lambda: None, None, scheduler=scheduler)
        after = datetime.now(UTC)
        (tick,) = scheduler.get_jobs()
    finally:
        scheduler.shutdown(wait=False)
    assert before <= tick.next_run_time <= after


def test_the_next_digest_is_told_in_the_members_own_clock() -> None:
    """Aware datetimes compare equal across zones, so the zone itself is checked: the message
    says 09:00 for a Tokyo member, not 00:00 (UTC)."""
    tokyo = Member(
        user_id="U9",
        tz="Asia/Tokyo",
        digest_time="09:00",
        digest_days=("mon", "tue", "wed", "thu", "fri"),
        created_at="2024-01-01T00:00:00+00:00",
        topic_count=1,
    )
    upcoming = next_digest(tokyo, datetime(2024, 1, 12, 1, 0, tzinfo=UTC))  # Fri 10:00 JST
    assert upcoming is not None
    assert (upcoming.date().isoformat(), upcoming.hour, upcoming.minute) == ("2024-01-15", 9, 0)
    assert str(upcoming.tzinfo) == "Asia/Tokyo"


def test_a_scheduled_digest_waits_while_digest_now_is_in_flight(fake, db) -> None:
    """One digest in flight per member: while a ``digest now`` is claimed but not yet posted
    (its worker died right after the claim), the scheduled digest due at the same time is
    "busy", not a second message with the same papers. Once the claim is stale it is posted,
    and the scheduled digest follows with the papers it did not hold."""
    engine = Engine.open(db)
    settings = Settings(
        db_path=db, slack_api_url=fake.api_url, slack_bot_token=BOT_TOKEN, slack_signing_secret=""
    )

    def die_after_the_claim(step: str, digest_id: str) -> None:
        if step == "claimed":
            raise RuntimeError("the worker died")

    now = datetime.now(UTC)
    poster = slack_poster(engine, settings)
    doomed = Dispatcher.from_settings(engine, poster, settings, faults=die_after_the_claim)
    with pytest.raises(RuntimeError):
        doomed.send_now("U1", now)
    clock = Dispatcher.from_settings(engine, slack_poster(engine, settings), settings)
    [scheduled] = clock.run_due(now + timedelta(minutes=1))
    assert scheduled.status == "busy"
    assert fake.messages_in("DU1") == []
    later = [o.status for o in clock.run_due(now + timedelta(minutes=12))]
    assert later == ["sent", "sent"]  # the retaken digest now, then the scheduled one
    first, second = (digest_papers(m) for m in fake.messages_in("DU1"))
    assert len(first) == 10 and second and not set(first) & set(second)


def late_member(days: tuple[str, ...]) -> Member:
    return Member(
        user_id="U8",
        tz="Europe/Berlin",
        digest_time="23:00",
        digest_days=days,
        created_at="2024-01-01T00:00:00+00:00",
        topic_count=1,
    )


def test_a_late_evening_digest_missed_before_midnight_is_still_due_after_it() -> None:
    """A 23:00 digest with the scheduler back at 01:30 (local) is yesterday's, still within
    the grace period: whether today is one of the member's days or not."""
    grace = timedelta(hours=6)
    daily = late_member(("mon", "tue", "wed", "thu", "fri", "sat", "sun"))
    tuesday_0130 = datetime(2024, 1, 9, 0, 30, tzinfo=UTC)  # 01:30 CET
    assert due_date(daily, tuesday_0130, grace) == date(2024, 1, 8)
    weekdays = late_member(("mon", "tue", "wed", "thu", "fri"))
    saturday_0130 = datetime(2024, 1, 13, 0, 30, tzinfo=UTC)  # Saturday 01:30 CET
    assert due_date(weekdays, saturday_0130, grace) == date(2024, 1, 12)
    assert due_date(weekdays, saturday_0130 + timedelta(hours=5), grace) is None  # 6 h late
