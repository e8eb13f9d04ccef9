"""The clock: the process (or thread) that sends due digests every tick and says it is alive.

``paperboy scheduler`` runs ``Clock.run_forever`` (a ``BlockingScheduler``, the Procfile's
``clock:`` process); ``paperboy serve --with-scheduler`` and the playground run
``Clock.start_background`` (a ``BackgroundScheduler`` beside the web app). Every tick writes a
heartbeat row (``clock_heartbeat``), which ``clock_health`` reads for ``/healthz``: a clock that
died, hangs or cannot write is *stale* after three missed ticks while any member's digest is on.

Faults an operator must fix are not retried: a token Slack refuses at start (``check_token``) or
revokes while running (the poster's ``TokenRefused``, from any call) stops the sending at once
and raises ``ClockError``, whose text is one sentence;
``paperboy scheduler`` exits non-zero with it so the platform restarts the process and alerts.
Transient faults (Slack's 5xx, a dropped connection) are retried with backoff first. A running
clock also checks the token (Slack's ``auth.test``, through the ``Poster``) every ``TOKEN_CHECK`` (five minutes, at the end of a tick), so a
revoked token stops it soon even when no digest is due; a failed check that is not a refusal
is logged and tried again next tick.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.blocking import BlockingScheduler

from bot.state import StateUnavailable, state_of

from . import schedule
from .delivery import Dispatcher, Outcome
from .feeds import run_feeds
from .poster import Poster, PostError, TokenRefused
from .schedule import TICK_SECONDS
from .subscriptions import from_iso, to_iso

log = logging.getLogger(__name__)

HEARTBEAT = "digest-clock"
STALE_TICKS = 3
#: Waits between attempts at ``auth.test`` when Slack is unreachable or answers 5xx.
CHECK_BACKOFF = (1.0, 2.0, 4.0, 8.0)
#: How often a running clock asks ``auth.test`` whether the token still works, so a revoked
#: token stops the process within minutes even on a day with no digest due. ``auth.test`` is
#: cheap (Slack's "special" rate tier); a tick that fails to reach Slack just asks again next tick.
TOKEN_CHECK = timedelta(minutes=5)


class ClockError(Exception):
    """An operator must act (token refused/revoked, Slack unreachable); str() is one sentence."""


def refused(code: str) -> ClockError:
    return ClockError(
        f"Slack refused the bot token ({code}): digests are stopped until SLACK_BOT_TOKEN is "
        "replaced with a valid one from your app's OAuth & Permissions page."
    )


class Clock:
    """The digest tick (and the daily PAPERBOY_FEEDS ingest) on an APScheduler.

    ``on_fatal`` is called (from the scheduler's thread) when the background clock stops for a
    ``ClockError``; ``serve --with-scheduler`` uses it to take the whole process down.
    """

    def __init__(
        self,
        engine: Any,
        settings: Any,
        poster: Poster,
        *,
        tick_seconds: int = TICK_SECONDS,
        scheduler: Any = None,
        on_fatal: Callable[[ClockError], Any] | None = None,
        sleep: Callable[[float], Any] = time.sleep,
    ):
        self.engine = engine
        self.settings = settings
        self.poster = poster
        self.tick_seconds = tick_seconds
        self.scheduler = scheduler
        self.on_fatal = on_fatal
        self.sleep = sleep
        self.dispatcher = Dispatcher.from_settings(engine, poster, settings)
        self.fatal: ClockError | None = None
        self._lock = threading.Lock()
        self._background = False
        self._token_checked: datetime | None = None  # the last auth.test Slack answered

    # -- checks and ticks -------------------------------------------------------------------

    def check_token(self) -> None:
        """The token checked once: a refused token is a ``ClockError`` at once; Slack's 5xx and
        connection errors are retried with backoff, then reported as what they are."""
        cause = ""
        for attempt in range(len(CHECK_BACKOFF) + 1):
            if attempt:
                self.sleep(CHECK_BACKOFF[attempt - 1])
            try:
                self.poster.check_token()
                self._token_checked = datetime.now(UTC)
                return
            except TokenRefused as error:
                raise refused(error.code) from None
            except PostError as error:
                if not error.transient:
                    raise ClockError(
                        f"Slack answered auth.test with {error.cause}: check SLACK_BOT_TOKEN "
                        "and the app's installation."
                    ) from None
                cause = error.cause
            if attempt < len(CHECK_BACKOFF):
                log.warning("auth.test failed (%s); trying again", cause)
        raise ClockError(
            f"Could not reach Slack at {self.poster.where} ({cause}); digests cannot be sent "
            "until it answers."
        )

    def tick(self, now: datetime | None = None) -> list[Outcome]:
        """Send the digests due at ``now`` and write the heartbeat. Raises ``ClockError`` (and
        sends nothing more) when Slack refuses the token."""
        now = (now or datetime.now(UTC)).astimezone(UTC)
        try:
            outcomes = self.dispatcher.run_due(now)
        except TokenRefused as error:
            raise refused(error.code) from None
        self._recheck_token(now)
        write_heartbeat(self.engine.db, now, self.tick_seconds, self.dispatcher.worker)
        return outcomes

    def token_checked(self, when: datetime | None = None) -> None:
        """The token was just checked elsewhere (``serve`` checks it at start): the next
        ``auth.test`` is due ``TOKEN_CHECK`` later."""
        self._token_checked = (when or datetime.now(UTC)).astimezone(UTC)

    def _recheck_token(self, now: datetime) -> None:
        """``auth.test`` every ``TOKEN_CHECK``: a refused token is a ``ClockError`` now, not
        when the next digest falls due; Slack's own trouble is logged and asked again next
        tick (it must not stop the clock)."""
        if self._token_checked is not None and now - self._token_checked < TOKEN_CHECK:
            return
        try:
            self.poster.check_token()
        except TokenRefused as error:
            raise refused(error.code) from None
        except PostError as error:
            log.warning("checking the bot token failed (%s); trying again next tick", error.cause)
            return
        self._token_checked = now

    def ingest(self) -> None:
        """The feed job (its own APScheduler job: a slow or failing feed never holds a tick).
        When a feed failed, the job comes back sooner than tomorrow (``run_feeds`` says when)."""
        again = run_feeds(self.engine, self.settings)
        job = self.scheduler.get_job(schedule.FEEDS_JOB) if again and self.scheduler else None
        if job is not None and job.next_run_time is not None:
            job.modify(next_run_time=min(job.next_run_time, datetime.now(UTC) + again))

    # -- schedulers -------------------------------------------------------------------------

    def _job(self) -> list[Outcome]:
        """The tick APScheduler runs: a refused token stops the clock; the shared database
        not answering (PostgreSQL restarting) is one line, and the next tick tries again (a
        traceback a minute, from APScheduler, said no more; ``/healthz`` reports the outage)."""
        try:
            return self.tick(datetime.now(UTC))
        except ClockError as error:
            self._stop(error)
        except StateUnavailable as error:
            log.error("No digests sent this tick: %s", error)
        return []

    def _stop(self, error: ClockError) -> None:
        with self._lock:
            if self.fatal is not None:
                return
            self.fatal = error
        # Said once: run_forever raises it for the command to print, and an ``on_fatal``
        # owner (``serve --with-scheduler``) reports it as it ends the process.
        if self._background and self.on_fatal is None:
            log.error("%s", error)
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)  # from the job's own thread: do not wait on it
        if self.on_fatal is not None:
            self.on_fatal(error)

    def _build(self, default: Any) -> Any:
        self.scheduler = schedule.build_scheduler(
            self._job,
            self.ingest if self.settings.feeds else None,
            scheduler=self.scheduler or default,
            tick_seconds=self.tick_seconds,
        )
        return self.scheduler

    def start_background(self) -> None:
        """Tick on a background thread (``serve --with-scheduler``, the playground)."""
        self._background = True
        self._build(BackgroundScheduler(timezone=UTC)).start()

    def run_forever(self) -> None:
        """Tick in this thread until SIGTERM or SIGINT, or until the token is refused, which
        raises ``ClockError``.

        The signals stop the scheduler rather than raise in this thread: APScheduler's loop
        catches every exception around a job's submission (``BaseException``: it logs "Error
        submitting job"), so a ``SystemExit`` that landed there was swallowed and the process
        ran on, until the platform killed it."""
        scheduler = self._build(BlockingScheduler(timezone=UTC))
        stoppers: list[threading.Thread] = []

        def stop(signum: int, frame: object) -> None:
            if not stoppers:
                stoppers.append(threading.Thread(target=_stop_when_running, args=(scheduler,)))
                stoppers[0].start()

        try:
            with _signals_call(stop):
                if not stoppers:
                    scheduler.start()  # returns once stopped
        finally:
            for stopper in stoppers:  # (the loop can end before a tick in progress does)
                stopper.join()
            if scheduler.running:
                scheduler.shutdown(wait=True)  # let a tick in progress finish its digest
        if self.fatal is not None:
            raise self.fatal

    def shutdown(self) -> None:
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=True)


@contextlib.contextmanager
def _signals_call(handler: Callable[[int, object], None]) -> Iterator[None]:
    """SIGTERM and SIGINT call ``handler`` inside the block (the main thread only; elsewhere,
    as in tests running a clock on a thread, nothing changes); the old handlers after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def _stop_when_running(scheduler: BlockingScheduler, timeout: float = 30.0) -> None:
    """Shut ``scheduler`` down (a tick in progress finishes its digest first), once it has
    started: a signal can come before ``start`` has set it running."""
    deadline = time.monotonic() + timeout
    while not scheduler.running and time.monotonic() < deadline:
        time.sleep(0.01)
    if scheduler.running:
        scheduler.shutdown(wait=True)


# -- heartbeat ------------------------------------------------------------------------------


def write_heartbeat(state: Any, now: datetime, tick_seconds: int, worker: str = "") -> None:
    """The clock's tick, in the shared state (``state``: a ``StateStore`` or the engine's
    connection, which means the same)."""
    state_of(state).beat(HEARTBEAT, to_iso(now), tick_seconds, worker)


@dataclass
class ClockHealth:
    last_tick: datetime | None
    tick_seconds: int
    digests_on: bool
    stale: bool


def clock_health(state: Any, now: datetime) -> ClockHealth:
    """The clock's last tick; stale when some member's digest is on and no tick was written
    for ``STALE_TICKS`` ticks."""
    store = state_of(state)
    beat = store.heartbeat(HEARTBEAT)
    last_tick, tick_seconds = None, TICK_SECONDS
    if beat is not None:
        last_tick, tick_seconds = from_iso(beat.last_tick), int(beat.tick_seconds or TICK_SECONDS)
    digests_on = store.digests_on()
    stale = digests_on and (
        last_tick is None or now - last_tick > timedelta(seconds=STALE_TICKS * tick_seconds)
    )
    return ClockHealth(last_tick, tick_seconds, digests_on, stale)
