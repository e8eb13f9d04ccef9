"""The clock (digest/clock.py): the token checked at start, a token revoked while running stops
the sending at once, and the heartbeat that ``/healthz`` reads."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from slack_sdk import WebClient

from bot import cli as commands
from bot.engine.search import Engine
from bot.settings import Settings
from bot.slack.client import make_client
from bot.slack.poster import SlackPoster
from bot.state import configure
from digest.clock import Clock, ClockError, clock_health
from digest.subscriptions import Subscriptions
from tests.digest_support import write_corpus
from tests.fake_slack import FakeSlack

BERLIN_0900 = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)  # a Monday, CET


@pytest.fixture
def fake():
    with FakeSlack() as running:
        yield running


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = Engine.open(tmp_path / "clock.db")
    engine.ingest([write_corpus(tmp_path / "papers.jsonl")])
    return engine


def settings(fake: FakeSlack) -> Settings:
    return Settings(slack_api_url=fake.api_url, slack_bot_token="xoxb-test")


def clock(engine: Engine, fake: FakeSlack, sleeps: list[float] | None = None, **options) -> Clock:
    sleeps = [] if sleeps is None else sleeps
    poster = SlackPoster(make_client(settings(fake)), engine)
    return Clock(engine, settings(fake), poster, sleep=sleeps.append, **options)


def members(engine: Engine, fake: FakeSlack, *users: str, at: datetime) -> None:
    subs = Subscriptions(engine.db)
    for user in users:
        fake.set_user(user, tz="Europe/Berlin")
        subs.add_topic(user, "graph neural networks", at)
        subs.set_tz(user, "Europe/Berlin", at)


def cli_env(engine: Engine, fake: FakeSlack) -> dict[str, str]:
    return {
        "PAPERBOY_DB": str(engine.db_path),
        "SLACK_API_URL": fake.api_url,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "secret",
        "SLACK_APP_TOKEN": "",
        "PAPERBOY_FEEDS": "",
    }


# --- the token -----------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["scheduler"], ["digest", "send"], ["digest", "send", "--now"]])
def test_a_refused_token_at_start_is_one_sentence_and_exit_1(engine, fake, args) -> None:
    members(engine, fake, "U1", at=datetime.now(UTC) - timedelta(days=1))
    fake.revoke_token()
    command = commands.scheduler if args[0] == "scheduler" else commands.digest
    result = CliRunner().invoke(command, args[1:], env=cli_env(engine, fake))
    assert result.exit_code == 1, result.output
    assert "Slack refused the bot token (token_revoked)" in result.output
    assert "Traceback" not in result.output and result.exception is not None
    assert [c.method for c in fake.calls] == ["auth.test"]  # nothing else was tried


@pytest.mark.parametrize(
    "code", ["token_revoked", "invalid_auth", "not_authed", "account_inactive"]
)
def test_a_token_revoked_while_running_stops_the_tick_at_once(engine, fake, code) -> None:
    members(engine, fake, "U1", "U2", "U3", at=BERLIN_0900 - timedelta(days=1))
    fake.fail_next("conversations.open", times=1, error=code)
    running = clock(engine, fake)
    with pytest.raises(ClockError, match=rf"Slack refused the bot token \({code}\)"):
        running.tick(BERLIN_0900)
    assert len(fake.calls_to("conversations.open")) == 1  # no other member was attempted
    assert fake.calls_to("chat.postMessage") == []
    # The claim stays: once the token is replaced, every digest goes, once.
    later = clock(engine, fake).tick(BERLIN_0900 + timedelta(minutes=11))
    assert sorted((o.user_id, o.status) for o in later) == [
        ("U1", "sent"),
        ("U2", "sent"),
        ("U3", "sent"),
    ]
    assert len(fake.calls_to("chat.postMessage")) == 3


def test_the_scheduler_exits_1_when_the_token_is_revoked_while_running(engine, fake) -> None:
    """The real BlockingScheduler: auth.test passes, the first tick meets a revoked token and
    the process ends with exit 1 (a platform restarts it and alerts) instead of retrying."""
    now = datetime.now(UTC)
    members(engine, fake, "U1", "U2", at=now - timedelta(days=2))
    subs = Subscriptions(engine.db)
    for user in ("U1", "U2"):
        subs.set_days(user, "daily", now)
        subs.set_time(
            user,
            (now - timedelta(minutes=2)).astimezone(subs.member(user).zone).strftime("%H:%M"),
            now,
        )
    fake.fail_next("conversations.open", times=100, error="token_revoked")
    result = CliRunner().invoke(commands.scheduler, ["--tick", "3600"], env=cli_env(engine, fake))
    assert result.exit_code == 1, result.output
    assert "Slack refused the bot token (token_revoked)" in result.output
    assert len(fake.calls_to("conversations.open")) == 1
    assert fake.calls_to("chat.postMessage") == []


def test_digest_send_stops_at_the_first_refusal(engine, fake) -> None:
    members(engine, fake, "U1", "U2", "U3", at=datetime.now(UTC) - timedelta(days=1))
    fake.fail_next("conversations.open", times=100, error="invalid_auth")
    result = CliRunner().invoke(commands.digest, ["send", "--now"], env=cli_env(engine, fake))
    assert result.exit_code == 1, result.output
    assert "Slack refused the bot token (invalid_auth)" in result.output
    assert len(fake.calls_to("conversations.open")) == 1


def test_slack_down_at_start_is_retried_then_named(engine, fake) -> None:
    sleeps: list[float] = []
    fake.fail_next("auth.test", times=2, status=500)
    clock(engine, fake, sleeps).check_token()  # two 500s, then it answers
    assert len(fake.calls_to("auth.test")) == 3 and sleeps == [1.0, 2.0]

    fake.fail_next("auth.test", times=100, status=503)
    with pytest.raises(ClockError, match=r"Could not reach Slack at .*HTTP 503"):
        clock(engine, fake).check_token()


def test_unreachable_slack_is_named_not_blamed_on_the_token(engine, fake) -> None:
    url = fake.api_url
    fake.stop()
    broken = Settings(slack_api_url=url, slack_bot_token="xoxb-test")
    client = WebClient(token="xoxb-test", base_url=url, retry_handlers=[])  # the clock retries
    unreachable = Clock(engine, broken, SlackPoster(client, engine), sleep=lambda _: None)
    with pytest.raises(ClockError) as raised:
        unreachable.check_token()
    assert str(raised.value).startswith(f"Could not reach Slack at {url}")
    assert "token" not in str(raised.value)


# --- the heartbeat -------------------------------------------------------------------------------


def test_each_tick_writes_the_heartbeat_and_health_goes_stale_after_three(engine, fake) -> None:
    assert clock_health(engine.db, BERLIN_0900) == clock_health(engine.db, BERLIN_0900)
    quiet = clock_health(engine.db, BERLIN_0900)
    assert (quiet.last_tick, quiet.digests_on, quiet.stale) == (None, False, False)

    members(engine, fake, "U1", at=BERLIN_0900 - timedelta(days=1))
    assert clock_health(engine.db, BERLIN_0900).stale  # digests on, no clock has ever ticked

    clock(engine, fake, tick_seconds=60).tick(BERLIN_0900)
    health = clock_health(engine.db, BERLIN_0900 + timedelta(seconds=180))
    assert health.last_tick == BERLIN_0900 and health.tick_seconds == 60
    assert health.digests_on and not health.stale
    assert clock_health(engine.db, BERLIN_0900 + timedelta(seconds=181)).stale

    Subscriptions(engine.db).set_enabled("U1", False, BERLIN_0900)
    assert not clock_health(engine.db, BERLIN_0900 + timedelta(days=1)).stale


def test_a_tick_while_postgresql_is_down_is_one_line_and_the_next_one_sends(
    engine, fake, postgres_cluster, postgres_url, caplog
) -> None:
    """With DATABASE_URL, PostgreSQL restarting: the tick APScheduler runs says so in one line
    (not a traceback every minute), the clock goes on, and the next tick sends the digest."""
    configure(postgres_url)
    try:
        members(engine, fake, "U1", at=BERLIN_0900 - timedelta(days=1))
        ticking = clock(engine, fake)
        postgres_cluster.stop()
        try:
            with caplog.at_level("INFO"):
                assert ticking._job() == []
            [said] = [r for r in caplog.records if r.levelname == "ERROR"]
            assert said.getMessage().startswith("No digests sent this tick: The database ")
            assert not [r for r in caplog.records if r.exc_info], caplog.text
            assert ticking.fatal is None
        finally:
            postgres_cluster.start()
        [sent] = ticking.tick(BERLIN_0900)
        assert (sent.user_id, sent.status) == ("U1", "sent")
    finally:
        configure(None)


def test_a_refused_tick_writes_no_heartbeat(engine, fake) -> None:
    members(engine, fake, "U1", at=BERLIN_0900 - timedelta(days=1))
    fake.revoke_token()
    with pytest.raises(ClockError):
        clock(engine, fake).tick(BERLIN_0900)
    assert clock_health(engine.db, BERLIN_0900).last_tick is None


def test_the_background_clock_stops_and_reports_a_revoked_token(engine, fake) -> None:
    from apscheduler.schedulers.background import BackgroundScheduler

    fatal: list[ClockError] = []
    stopped = threading.Event()
    members(engine, fake, "U1", at=datetime.now(UTC) - timedelta(days=1))
    Subscriptions(engine.db).set_tz("U1", "Europe/Berlin", datetime.now(UTC) - timedelta(days=2))
    fake.revoke_token()  # the tick's first call (users.info for the stale zone) is refused
    background = clock(
        engine,
        fake,
        scheduler=BackgroundScheduler(timezone=UTC),
        on_fatal=lambda error: (fatal.append(error), stopped.set()),
    )
    background.start_background()
    try:
        assert stopped.wait(30)
    finally:
        background.shutdown()
    assert "token_revoked" in str(fatal[0]) and background.fatal is fatal[0]
    assert not background.scheduler.running


def test_a_real_scheduler_process_says_it_once_and_exits_1(engine, fake, tmp_path) -> None:
    """As a platform sees it: exit status 1, the sentence once on stderr, no traceback."""
    import os
    import subprocess
    import sys

    now = datetime.now(UTC)
    members(engine, fake, "U1", at=now - timedelta(days=2))
    subs = Subscriptions(engine.db)
    subs.set_days("U1", "daily", now)
    subs.set_tz("U1", "UTC", now)
    subs.set_time("U1", (now - timedelta(minutes=2)).strftime("%H:%M"), now)
    fake.fail_next("conversations.open", times=5, error="token_revoked")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERBOY_", "SLACK_"))}
    env |= cli_env(engine, fake) | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "scheduler"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("Slack refused the bot token (token_revoked)") == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert fake.calls_to("chat.postMessage") == []


def test_a_digest_refused_for_the_token_goes_on_the_next_tick_once_it_is_replaced(
    engine, fake
) -> None:
    """Nothing was posted, so the claim is let go at once: no ten-minute wait for it to
    go stale once the operator has put a valid token back; and it is still sent once."""
    members(engine, fake, "U1", at=BERLIN_0900 - timedelta(days=1))
    Subscriptions(engine.db).set_tz("U1", "Europe/Berlin", BERLIN_0900)  # no users.info first
    fake.revoke_token()
    with pytest.raises(ClockError):
        clock(engine, fake).tick(BERLIN_0900)
    assert [c.method for c in fake.calls] == ["conversations.open"]  # claimed, then refused
    fake.restore_token()
    (outcome,) = clock(engine, fake).tick(BERLIN_0900 + timedelta(minutes=1))
    assert outcome.status == "sent"
    assert len(fake.calls_to("chat.postMessage")) == 1
    assert clock(engine, fake).tick(BERLIN_0900 + timedelta(minutes=2)) == []


def test_digest_send_now_goes_at_once_after_a_post_refused_for_the_token(engine, fake) -> None:
    members(engine, fake, "U1", at=datetime.now(UTC) - timedelta(days=1))
    fake.fail_next("chat.postMessage", error="token_revoked")  # refused: nothing posted
    refused = CliRunner().invoke(commands.digest, ["send", "--now"], env=cli_env(engine, fake))
    assert refused.exit_code == 1 and "token_revoked" in refused.output
    again = CliRunner().invoke(commands.digest, ["send", "--now"], env=cli_env(engine, fake))
    assert again.exit_code == 0, again.output
    assert ": sent, " in again.output
    assert fake.calls_to("conversations.history") == []  # certainly not posted: no lookup
    assert len(fake.messages_in("DU1")) == 1


def test_a_token_revoked_on_a_quiet_day_stops_the_clock_within_five_minutes(engine, fake) -> None:
    """No digest due at all: the clock still asks auth.test every TOKEN_CHECK, so a revoked
    token is noticed within minutes, not when the next digest falls due."""
    running = clock(engine, fake)
    start = BERLIN_0900
    assert running.tick(start) == [] and len(fake.calls_to("auth.test")) == 1
    running.tick(start + timedelta(minutes=1))
    assert len(fake.calls_to("auth.test")) == 1  # not every tick
    fake.revoke_token()
    running.tick(start + timedelta(minutes=4))
    with pytest.raises(ClockError, match=r"Slack refused the bot token \(token_revoked\)"):
        running.tick(start + timedelta(minutes=5))
    assert clock_health(engine.db, start).last_tick == start + timedelta(minutes=4)


def test_slack_failing_the_token_check_does_not_stop_the_clock(engine, fake) -> None:
    running = clock(engine, fake)
    fake.fail_next("auth.test", status=500)
    running.tick(BERLIN_0900)  # logged, not raised; the heartbeat is written
    assert clock_health(engine.db, BERLIN_0900).last_tick == BERLIN_0900
    running.tick(BERLIN_0900 + timedelta(minutes=1))  # asked again at once, and answered
    assert len(fake.calls_to("auth.test")) == 2
    running.tick(BERLIN_0900 + timedelta(minutes=2))
    assert len(fake.calls_to("auth.test")) == 2


def test_unreachable_slack_at_start_is_one_warning_per_attempt(engine, fake, caplog) -> None:
    """Not slack_sdk's ERROR and INFO lines for every attempt: ours, one per retry."""
    import logging

    url = fake.api_url
    fake.stop()
    broken = Settings(slack_api_url=url, slack_bot_token="xoxb-test")
    client = WebClient(token="xoxb-test", base_url=url, retry_handlers=[])
    caplog.set_level(logging.INFO)
    with pytest.raises(ClockError):
        Clock(engine, broken, SlackPoster(client, engine), sleep=lambda _: None).check_token()
    assert [r.name for r in caplog.records] == ["digest.clock"] * 4


def test_sigterm_while_a_tick_is_submitted_stops_the_scheduler(engine, fake, monkeypatch) -> None:
    """APScheduler catches every exception around a job's submission, a ``SystemExit`` from
    the SIGTERM handler too (found as a ``clock:`` process that ran on after SIGTERM, about
    one start in three): the signal must stop the scheduler instead. Here SIGTERM arrives
    exactly there, on the main thread, as it does in the process."""
    import os
    import signal

    from apscheduler.executors.pool import ThreadPoolExecutor as JobExecutor

    from bot.stopping import sigterm_exits

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    real_submit = JobExecutor.submit_job

    def submit_then_sigterm(self, job, run_times):
        os.kill(os.getpid(), signal.SIGTERM)  # handled on return to the interpreter loop
        return real_submit(self, job, run_times)

    monkeypatch.setattr(JobExecutor, "submit_job", submit_then_sigterm)
    running = clock(engine, fake)
    hung: list[bool] = []

    def watchdog() -> None:  # a scheduler that swallowed the signal would run forever
        if running.scheduler is not None and running.scheduler.running:
            hung.append(True)
            running.scheduler.shutdown(wait=False)

    timer = threading.Timer(20, watchdog)
    timer.start()
    before = signal.getsignal(signal.SIGTERM)
    try:
        with sigterm_exits():  # as ``paperboy scheduler`` runs it (``stops_on_sigterm``)
            running.run_forever()
    finally:
        timer.cancel()
    assert not hung
    assert signal.getsignal(signal.SIGTERM) == before  # the handlers it replaced are back
