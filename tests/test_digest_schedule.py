"""Whose digest is due when (digest/schedule.py), driven by an injected clock: time zones, DST,
downtime and the grace period, and the APScheduler jobs."""

import threading
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from digest.schedule import (
    FEEDS_JOB,
    TICK_JOB,
    build_scheduler,
    due,
    due_date,
    next_digest,
    slot,
)
from digest.subscriptions import WEEKDAYS, Member

GRACE = timedelta(hours=6)
WEEKDAYS_ONLY = WEEKDAYS[:5]


def member(
    user: str, tz: str, at: str = "09:00", days=WEEKDAYS_ONLY, joined="2024-01-01"
) -> Member:
    return Member(
        user_id=user,
        tz=tz,
        digest_time=at,
        digest_days=tuple(days),
        created_at=f"{joined}T00:00:00+00:00",
        topic_count=1,
    )


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def run_ticks(
    members: list[Member],
    start: datetime,
    end: datetime,
    every: timedelta = timedelta(minutes=10),
    down: tuple[datetime, datetime] | None = None,
) -> dict[str, list[tuple[date, datetime]]]:
    """A scheduler ticking from ``start`` to ``end`` (not during ``down``), remembering what it
    sent as the ledger would: each (member, local date) once. This stands in for the ledger, so
    these tests check due-ness only; "once" with the real ledger and the Slack stand-in is
    checked in tests/test_promises_digest.py (``test_ticks_every_ten_minutes_across_dst...``)."""
    sent: dict[str, list[tuple[date, datetime]]] = {m.user_id: [] for m in members}
    done: set[tuple[str, date]] = set()
    now = start
    while now < end:
        if not (down and down[0] <= now < down[1]):
            for m, day in due(members, now, GRACE):
                if (m.user_id, day) not in done:
                    done.add((m.user_id, day))
                    sent[m.user_id].append((day, now))
        now += every
    return sent


# --- due-ness -----------------------------------------------------------------------------------


def test_due_from_the_local_time_until_the_grace_period_ends() -> None:
    berlin = member("U1", "Europe/Berlin")  # CET, UTC+1, in January
    monday = date(2024, 1, 8)
    assert due_date(berlin, utc(2024, 1, 8, 7, 59), GRACE) is None
    assert due_date(berlin, utc(2024, 1, 8, 8, 0), GRACE) == monday
    assert due_date(berlin, utc(2024, 1, 8, 13, 59), GRACE) == monday
    assert due_date(berlin, utc(2024, 1, 8, 14, 0), GRACE) is None


def test_only_on_the_members_days() -> None:
    weekdays = member("U1", "UTC")
    saturday = utc(2024, 1, 13, 9, 30)
    assert due_date(weekdays, saturday, GRACE) is None
    assert due_date(member("U2", "UTC", days=["sat"]), saturday, GRACE) == date(2024, 1, 13)


def test_a_member_who_joined_after_todays_time_starts_tomorrow() -> None:
    late = Member(**{**member("U1", "UTC").__dict__, "created_at": "2024-01-08T10:00:00+00:00"})
    assert due_date(late, utc(2024, 1, 8, 10, 5), GRACE) is None
    assert due_date(late, utc(2024, 1, 9, 9, 0), GRACE) == date(2024, 1, 9)


def test_disabled_or_topicless_members_are_never_due() -> None:
    off = Member(**{**member("U1", "UTC").__dict__, "digest_enabled": False})
    empty = Member(**{**member("U2", "UTC").__dict__, "topic_count": 0})
    assert due([off, empty], utc(2024, 1, 8, 9, 0), GRACE) == []


def test_the_local_date_is_the_members_not_utcs() -> None:
    tokyo = member("U1", "Asia/Tokyo", at="07:00")  # 07:00 JST Tuesday = 22:00 UTC Monday
    assert due_date(tokyo, utc(2024, 1, 8, 22, 0), GRACE) == date(2024, 1, 9)
    honolulu = member("U2", "Pacific/Honolulu", at="20:00")  # 20:00 HST Mon = 06:00 UTC Tue
    assert due_date(honolulu, utc(2024, 1, 9, 6, 0), GRACE) == date(2024, 1, 8)


# --- DST: 09:00 stays 09:00 local ------------------------------------------------------------


ZONES = ["America/New_York", "Europe/Berlin", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata"]


def test_members_around_the_world_across_dst_changes_get_one_digest_a_day_at_0900_local() -> None:
    # March 10 (US) and March 31 (EU) clocks go forward; April 7 Sydney's go back.
    members = [member(f"U{n}", tz, joined="2024-03-06") for n, tz in enumerate(ZONES)]
    members.append(member("UD", "America/New_York", days=WEEKDAYS, joined="2024-03-06"))
    start, end = utc(2024, 3, 6), utc(2024, 4, 10)
    sent = run_ticks(members, start, end)
    for m in members:
        zone = ZoneInfo(m.tz)
        days = [d for d, _ in sent[m.user_id]]
        every_day = [date(2024, 3, 5) + timedelta(days=n) for n in range(40)]
        expected = [
            d
            for d in every_day
            if WEEKDAYS[d.weekday()] in m.digest_days and start <= slot(m, d) < end
        ]
        assert days == expected, m.tz  # every day once, none skipped
        for day, at in sent[m.user_id]:
            local = at.astimezone(zone)
            assert local.date() == day and local.hour == 9 and local.minute < 10, (m.tz, at)
    new_york = dict(sent["U0"])
    assert new_york[date(2024, 3, 8)] == utc(2024, 3, 8, 14, 0)  # EST, UTC-5
    assert new_york[date(2024, 3, 11)] == utc(2024, 3, 11, 13, 0)  # EDT, UTC-4
    sydney = dict(sent["U3"])
    assert sydney[date(2024, 4, 5)] == utc(2024, 4, 4, 22, 0)  # AEDT, UTC+11
    assert sydney[date(2024, 4, 8)] == utc(2024, 4, 7, 23, 0)  # AEST, UTC+10


def test_a_time_that_does_not_exist_that_day_falls_an_hour_later_once() -> None:
    night = member("U1", "Europe/Berlin", at="02:30", days=WEEKDAYS)
    sent = run_ticks([night], utc(2024, 3, 30), utc(2024, 4, 2), every=timedelta(minutes=5))
    assert dict(sent["U1"])[date(2024, 3, 31)] == utc(2024, 3, 31, 1, 30)  # 03:30 CEST


def test_a_time_that_happens_twice_is_sent_once_at_the_first() -> None:
    night = member("U1", "Europe/Berlin", at="02:30", days=WEEKDAYS)
    sent = run_ticks([night], utc(2024, 10, 26), utc(2024, 10, 29), every=timedelta(minutes=5))
    days = [d for d, _ in sent["U1"]]
    assert days == [date(2024, 10, 26), date(2024, 10, 27), date(2024, 10, 28)]
    assert dict(sent["U1"])[date(2024, 10, 27)] == utc(2024, 10, 27, 0, 30)  # 02:30 CEST


# --- downtime ----------------------------------------------------------------------------------


def test_a_digest_due_while_the_scheduler_was_down_goes_when_it_returns_once() -> None:
    berlin = member("U1", "Europe/Berlin")
    down = (utc(2024, 1, 8, 6, 0), utc(2024, 1, 8, 11, 0))  # 07:00 to 12:00 CET
    sent = run_ticks([berlin], utc(2024, 1, 8), utc(2024, 1, 10), down=down)
    assert sent["U1"] == [
        (date(2024, 1, 8), utc(2024, 1, 8, 11, 0)),
        (date(2024, 1, 9), utc(2024, 1, 9, 8, 0)),
    ]


def test_down_past_the_grace_period_that_days_digest_is_not_sent() -> None:
    berlin = member("U1", "Europe/Berlin")
    down = (utc(2024, 1, 8, 6, 0), utc(2024, 1, 8, 15, 0))  # back at 16:00 CET: 7 h late
    sent = run_ticks([berlin], utc(2024, 1, 8), utc(2024, 1, 10), down=down)
    assert [d for d, _ in sent["U1"]] == [date(2024, 1, 9)]


def test_down_for_days_sends_only_the_latest_digest() -> None:
    daily = member("U1", "UTC", days=WEEKDAYS)
    assert due_date(daily, utc(2024, 1, 10, 9, 30), timedelta(days=3)) == date(2024, 1, 10)


def test_next_digest_is_shown_in_the_members_zone() -> None:
    berlin = member("U1", "Europe/Berlin")
    upcoming = next_digest(berlin, utc(2024, 1, 12, 9, 0))  # Friday 10:00 CET
    assert upcoming == datetime(2024, 1, 15, 9, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert next_digest(member("U2", "UTC", days=[]), utc(2024, 1, 12)) is None


def test_next_digest_skips_today_when_the_ledger_has_todays() -> None:
    wednesdays = member("U1", "UTC", days=["wed"])
    before = utc(2024, 1, 10, 8, 0)  # Wednesday 08:00, the slot at 09:00
    assert next_digest(wednesdays, before, taken=lambda day: False) == utc(2024, 1, 10, 9, 0)
    sent_today = next_digest(wednesdays, before, taken=lambda day: day == date(2024, 1, 10))
    assert sent_today == utc(2024, 1, 17, 9, 0)  # one scheduled digest a day: next week's


# --- APScheduler -------------------------------------------------------------------------------


@pytest.fixture
def paused() -> BackgroundScheduler:
    scheduler = BackgroundScheduler(timezone=UTC)
    scheduler.start(paused=True)
    yield scheduler
    scheduler.shutdown(wait=False)


def test_jobs_have_fixed_ids_and_adding_them_again_never_doubles_them(paused) -> None:
    def tick() -> None: ...

    def ingest() -> None: ...

    build_scheduler(tick, ingest, scheduler=paused)
    build_scheduler(tick, ingest, scheduler=paused)  # e.g. a restart that re-adds them
    jobs = {job.id: job for job in paused.get_jobs()}
    assert set(jobs) == {TICK_JOB, FEEDS_JOB}
    ticking = jobs[TICK_JOB]
    assert isinstance(ticking.trigger, IntervalTrigger)
    assert ticking.trigger.interval == timedelta(seconds=60)
    assert (ticking.coalesce, ticking.max_instances, ticking.misfire_grace_time) == (True, 1, 60)
    feeds = jobs[FEEDS_JOB]
    assert isinstance(feeds.trigger, CronTrigger)
    assert str(feeds.trigger.fields[5]) == "4"  # hour (UTC)
    assert feeds.func is ingest and ticking.func is tick


def test_without_feeds_there_is_only_the_tick(paused) -> None:
    build_scheduler(lambda: None, None, scheduler=paused, tick_seconds=30)
    assert [job.id for job in paused.get_jobs()] == [TICK_JOB]


def test_the_tick_runs_on_a_real_scheduler() -> None:
    ran = threading.Event()
    scheduler = build_scheduler(ran.set, None, scheduler=BackgroundScheduler(timezone=UTC))
    scheduler.start()
    try:
        assert ran.wait(5), "the digest tick did not run"
    finally:
        scheduler.shutdown(wait=False)


# --- the daily feed ingest ---------------------------------------------------------------------


def test_feeds_from_files_and_urls_are_ingested_and_a_bad_one_is_skipped(tmp_path, caplog) -> None:
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from bot.engine.search import Engine
    from digest.feeds import ingest_feeds
    from tests.digest_support import synthetic_papers, write_corpus

    papers = synthetic_papers(per_theme=2)
    local = write_corpus(tmp_path / "local.jsonl", papers[:5])
    served = tmp_path / "www"
    served.mkdir()
    write_corpus(served / "remote.jsonl", papers[5:])
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        engine = Engine.open(tmp_path / "f.db")
        feeds = [str(local), f"{base}/remote.jsonl", f"{base}/missing.jsonl", "/no/such/file"]
        report = ingest_feeds(engine, feeds)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert report is not None and report.counts.added == len(papers)
    assert engine.corpus.count() == len(papers)
    assert "missing.jsonl could not be fetched" in caplog.text
    assert "/no/such/file: no such file" in caplog.text
    assert ingest_feeds(engine, []) is None
    again = ingest_feeds(engine, [str(local)])
    assert again.counts.unchanged == 5 and again.counts.added == 0  # daily re-ingest is free
