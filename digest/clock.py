"""The clock: the process (or thread) that sends due digests every tick and says it is alive.

``paperboy scheduler`` runs ``Clock.run_forever`` (a ``BlockingScheduler``, the Procfile's
``clock:`` process); ``paperboy serve --with-scheduler`` and the playground run
``Clock.start_background`` (a ``BackgroundScheduler`` beside the web app). Every tick writes a
heartbeat row (``clock_heartbeat``), which ``clock_health`` reads for ``/healthz``: a clock that
died, hangs or cannot write is *stale* after three missed ticks while any member's digest is on.

Faults an operator must fix are not retried: a token Slack refuses at start (``check_token``) or
revokes while running (``invalid_auth``, ``token_revoked``, ``not_authed``, ``account_inactive``
from any call) stops the sending at once and raises ``ClockError``, whose text is one sentence;
``paperboy scheduler`` exits non-zero with it so the platform restarts the process and alerts.
Transient faults (Slack's 5xx, a dropped connection) are retried with backoff first. A running
clock also asks ``auth.test`` every ``TOKEN_CHECK`` (five minutes, at the end of a tick), so a
revoked token stops it soon even when no digest is due; a failed check that is not a refusal
is logged and tried again next tick.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.logs import quiet_slack_sdk
from bot.state import state_of

from . import schedule
from .delivery import AUTH_ERRORS, Dispatcher, Outcome, TokenRefused, make_client
from .schedule import TICK_SECONDS
from .subscriptions import from_iso, to_iso

log = logging.getLogger(__name__)

LOCAL_TOKEN = "xoxb-local-playground"  # the local Slack stand-in accepts any bot-shaped token
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


def bot_token(settings: Any) -> str:
    """The bot token from settings (a stand-in token when Slack is the local fake)."""
    token = settings.slack_bot_token
    local = urlsplit(settings.slack_api_url).hostname in ("127.0.0.1", "localhost", "::1")
    if not token and local:
        token = LOCAL_TOKEN
    if not token or not token.startswith("xoxb-"):
        raise ClockError(
            "SLACK_BOT_TOKEN must be set to the bot token (xoxb-...) from your app's OAuth & "
            "Permissions page: digests are posted to Slack with it."
        )
    return token


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
        *,
        client: WebClient | None = None,
        tick_seconds: int = TICK_SECONDS,
        scheduler: Any = None,
        on_fatal: Callable[[ClockError], Any] | None = None,
        sleep: Callable[[float], Any] = time.sleep,
    ):
        self.engine = engine
        self.settings = settings
        self.client = client or make_client(settings, token=bot_token(settings))
        self.tick_seconds = tick_seconds
        self.scheduler = scheduler
        self.on_fatal = on_fatal
        self.sleep = sleep
        self.dispatcher = Dispatcher(
            engine, self.client, grace=timedelta(seconds=settings.digest_grace_seconds)
        )
        self.fatal: ClockError | None = None
        self._lock = threading.Lock()
        self._background = False
        self._token_checked: datetime | None = None  # the last auth.test Slack answered

    # -- checks and ticks -------------------------------------------------------------------

    def check_token(self) -> None:
        """``auth.test`` once: a refused token is a ``ClockError`` at once; Slack's 5xx and
        connection errors are retried with backoff, then reported as what they are."""
        cause = ""
        for attempt in range(len(CHECK_BACKOFF) + 1):
            if attempt:
                self.sleep(CHECK_BACKOFF[attempt - 1])
            try:
                with quiet_slack_sdk():  # our one warning per attempt, then one sentence
                    self.client.auth_test()
                self._token_checked = datetime.now(UTC)
                return
            except SlackApiError as error:
                response = error.response
                code = str((response.get("error") if response is not None else "") or "")
                status = getattr(response, "status_code", 200) or 200
                if code in AUTH_ERRORS:
                    raise refused(code) from None
                if status < 500 and code not in ("internal_error", "fatal_error", "ratelimited"):
                    raise ClockError(
                        f"Slack answered auth.test with {code or status}: check SLACK_BOT_TOKEN "
                        "and the app's installation."
                    ) from None
                cause = f"HTTP {status}" if status >= 500 else code
            except (SlackClientError, OSError) as error:
                cause = str(getattr(error, "reason", "") or error) or type(error).__name__
            if attempt < len(CHECK_BACKOFF):
                log.warning("auth.test failed (%s); trying again", cause)
        raise ClockError(
            f"Could not reach Slack at {self.client.base_url} ({cause}); digests cannot be sent "
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
            self.client.auth_test()
        except SlackApiError as error:
            code = str((error.response.get("error") if error.response is not None else "") or "")
            if code in AUTH_ERRORS:
                raise refused(code) from None
            log.warning("checking the bot token failed (%s); trying again next tick", code)
            return
        except (SlackClientError, OSError) as error:
            log.warning("checking the bot token failed (%s); trying again next tick", error)
            return
        self._token_checked = now

    def ingest(self) -> None:
        from .feeds import ingest_feeds

        ingest_feeds(self.engine, self.settings.feeds)

    # -- schedulers -------------------------------------------------------------------------

    def _job(self) -> list[Outcome]:
        try:
            return self.tick(datetime.now(UTC))
        except ClockError as error:
            self._stop(error)
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
        from apscheduler.schedulers.background import BackgroundScheduler

        self._background = True
        self._build(BackgroundScheduler(timezone=UTC)).start()

    def run_forever(self) -> None:
        """Tick in this thread until stopped (SIGTERM/SIGINT raise in it) or the token is
        refused, which raises ``ClockError``."""
        from apscheduler.schedulers.blocking import BlockingScheduler

        scheduler = self._build(BlockingScheduler(timezone=UTC))
        try:
            scheduler.start()
        finally:
            if scheduler.running:
                scheduler.shutdown(wait=True)  # let a tick in progress finish its digest
        if self.fatal is not None:
            raise self.fatal

    def shutdown(self) -> None:
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=True)


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
