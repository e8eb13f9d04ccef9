"""When digests are due, in each member's own time zone, and the jobs that check (APScheduler).

Due-ness is a pure function of the member and the current instant, so tests drive it with any
clock: a member's digest for local date D is due from D at their digest time (on their days,
in their zone) until ``grace`` later, unless the ledger already has that digest. The time is
wall-clock time in the zone (``datetime.combine(D, 09:00, zone)``), so a daylight-saving change
moves nothing: 09:00 stays 09:00 local. A time that does not exist that day (02:30 when clocks
jump from 02:00 to 03:00) falls an hour later; a time that happens twice falls on the first.

The scheduler runs one job, every ``TICK_SECONDS``, that asks "who is due now?" (``digest-tick``),
and a daily feed ingest (``feeds-ingest``). Nothing is kept in APScheduler's job store: after
the scheduler was down, the first tick finds every digest whose time passed less than ``grace``
ago (settings.digest_grace_seconds, default 6 hours) and not yet in the ledger, and sends it
once. A digest more than ``grace`` late is not sent that day: a digest at 15:00 for a 09:00
slot is more noise than news. Its papers are not lost: they lead the next digest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from .subscriptions import WEEKDAYS, Member, from_iso

log = logging.getLogger(__name__)

TICK_SECONDS = 60
TICK_JOB = "digest-tick"
FEEDS_JOB = "feeds-ingest"
#: Feeds are ingested daily at this UTC hour (and once when the scheduler starts), before
#: the morning digests of Europe and the Americas.
FEEDS_HOUR_UTC = 4


def slot(member: Member, local_date: date) -> datetime:
    """The instant (UTC) of the member's digest on ``local_date``, in their zone."""
    local = datetime.combine(local_date, member.local_time, tzinfo=member.zone)
    return local.astimezone(UTC)


def due_date(member: Member, now: datetime, grace: timedelta) -> date | None:
    """The local date whose digest is due at ``now``, or None.

    Only the most recent slot counts, so a long outage never sends two digests at once; slots
    before the member joined do not count (subscribing at 10:00 does not send the 09:00 one).
    """
    if not member.enabled or not member.digest_days:
        return None
    joined = from_iso(member.created_at)
    today = now.astimezone(member.zone).date()
    for back in range(grace.days + 2):
        day = today - timedelta(days=back)
        if WEEKDAYS[day.weekday()] not in member.digest_days:
            continue
        at = slot(member, day)
        if at > now:
            continue
        if now - at < grace and (joined is None or at >= joined):
            return day
        return None
    return None


def due(members: Iterable[Member], now: datetime, grace: timedelta) -> list[tuple[Member, date]]:
    """Every member whose digest is due at ``now``, with its local date."""
    out = []
    for member in members:
        day = due_date(member, now, grace)
        if day is not None:
            out.append((member, day))
    return out


def next_digest(
    member: Member, now: datetime, taken: Callable[[date], bool] | None = None
) -> datetime | None:
    """When the member's next digest is scheduled, in their zone (for messages).

    ``taken(day)``: whether the ledger has that local date's digest already. A member gets
    one scheduled digest a day, so after today's was sent, a time moved later today means
    the next one is on their next day, not in an hour.
    """
    if not member.digest_days:
        return None
    today = now.astimezone(member.zone).date()
    for ahead in range(8):
        day = today + timedelta(days=ahead)
        if WEEKDAYS[day.weekday()] not in member.digest_days or slot(member, day) <= now:
            continue
        if ahead == 0 and taken is not None and taken(day):
            continue
        return slot(member, day).astimezone(member.zone)
    return None


def build_scheduler(
    tick: Callable[[], Any],
    ingest: Callable[[], Any] | None = None,
    *,
    scheduler: Any = None,
    tick_seconds: int = TICK_SECONDS,
) -> Any:
    """APScheduler with the digest tick and (when there are feeds) the daily ingest.

    ``scheduler`` defaults to a ``BlockingScheduler`` (``paperboy scheduler`` runs it in its
    own process, the Procfile's ``clock:`` line); tests pass a ``BackgroundScheduler``. Job
    ids are fixed and ``replace_existing`` is set, so adding them again never doubles them;
    ``max_instances=1`` and ``coalesce`` mean a slow tick is never run twice at once nor
    caught up several times.
    """
    scheduler = scheduler or BlockingScheduler(timezone=UTC)
    now = datetime.now(UTC)
    scheduler.add_job(
        tick,
        IntervalTrigger(seconds=tick_seconds, timezone=UTC),
        id=TICK_JOB,
        name="send the digests that are due",
        replace_existing=True,
        coalesce=True,
        max_instances=1,
        misfire_grace_time=tick_seconds,
        next_run_time=now + timedelta(seconds=5 if ingest else 0),
    )
    if ingest is not None:
        scheduler.add_job(
            ingest,
            CronTrigger(hour=FEEDS_HOUR_UTC, minute=0, timezone=UTC),
            id=FEEDS_JOB,
            name="ingest PAPERBOY_FEEDS",
            replace_existing=True,
            coalesce=True,
            max_instances=1,
            misfire_grace_time=6 * 3600,
            next_run_time=now,  # also at start-up, so a restart never waits a day for papers
        )
    return scheduler
