"""Posting each due digest exactly once, through the poster it is given.

``Dispatcher.run_due(now)`` is what the scheduler calls every minute: finish digests a stopped
worker left claimed, refresh stale time zones, find whose digest is due (``schedule``), choose
all their papers in one batch (``selection``), then claim, post, record (``ledger``): claims
and records ``CLAIM_BATCH`` at a time in one transaction each, posts by ``workers`` threads
at once (``_deliver_batch``). A large batch (``PIPELINE_FROM``) is chosen ``CLAIM_BATCH``
members at a time, mostly by a helper process on another core (``selector``), and each chunk
is claimed, posted and recorded as soon as it is chosen. ``send_now`` (``/papers digest now``) goes through the same
claim/post/record, under a fresh id each time it has something to send (``Ledger.claim_now``).

Posting is the ``Poster``'s (``digest.poster``; Slack's is ``bot.slack.poster.SlackPoster``):
a direct message, or the channel the member named. The poster's client waits out rate limits,
so a rate limit delays a digest without losing it. A member the platform refuses for good
(deactivated, bot not in their channel: ``PostError.permanent``) is logged and marked failed
for the day, and the others go on; any other error leaves the claim in place and the digest
is retried once the claim is stale (``ledger.STALE_CLAIM``). A refused token
(``TokenRefused``) stops the run at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.engine.search import Engine
from bot.english import count
from bot.settings import Settings
from bot.state import state_for

from .ledger import STALE_CLAIM, Claim, ClaimRequest, Ledger, worker_name
from .plan import DigestPlan
from .poster import Poster, PostError, TokenRefused
from .schedule import due
from .selection import DIGEST_SIZE, select_digests, select_digests_apart
from .selector import SelectionHelper, Selections
from .subscriptions import Member, Subscriptions, from_iso

log = logging.getLogger(__name__)

#: Digests posted at once (``PAPERBOY_DIGEST_WORKERS``). Each goes to its own DM, and Slack
#: allows about one message a second per conversation with bursts, more workspace-wide; a 429
#: is waited out (Retry-After) by the client, so more workers only queue there.
DIGEST_WORKERS = 4
#: Digests claimed in one transaction, and recorded in one.
CLAIM_BATCH = 100
#: A batch claim older than this (the posts fell far behind, e.g. long rate limits) is
#: renewed before its digest is posted, so it is never posted on a lease about to run out.
LEASE_MARGIN = STALE_CLAIM.total_seconds() / 2
#: A batch of at least this many digests is chosen chunk by chunk (``CLAIM_BATCH`` members),
#: each chunk delivered as soon as it is chosen, most of them chosen by a helper process
#: (``digest.selector``); smaller ones are chosen at once, here.
PIPELINE_FROM = 2 * CLAIM_BATCH
TZ_REFRESHES_PER_TICK = 50  # Slack's users.info is Tier 4 (100+/minute); leave room for the web app


def spare_core() -> bool:
    """Whether this process may run on two cores or more (its CPU affinity, which container
    limits such as ``--cpuset-cpus`` set): the selection helper only pays off then."""
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except AttributeError:  # not on Linux
        return (os.cpu_count() or 1) >= 2


Fault = Callable[[str, str], None]  # (step, digest id): tests raise here to simulate a crash


def refresh_time_zone(
    poster: Poster,
    subscriptions: Subscriptions,
    user_id: str,
    now: datetime,
    *,
    force=False,
    team_id: str | None = None,
) -> Member:
    """The member, with their time zone read from their profile when the cached one is
    older than a day (``subscriptions.TZ_MAX_AGE``). A failed read keeps the old zone."""
    member = subscriptions.ensure_member(user_id, now, team_id)
    if not force and not member.tz_is_stale(now):
        return member
    tz = None
    try:
        tz = poster.member_time_zone(user_id, team=member.team_id or None)
    except PostError as error:
        log.warning("users.info for %s failed (%s); keeping %s", user_id, error.code, member.tz)
    return subscriptions.set_tz(user_id, tz, now, team_id=member.team_id)


@dataclass
class Outcome:
    """What happened to one digest: ``sent``, ``skipped`` (nothing to send), ``failed`` (Slack
    refused it for good), ``pending`` (will be retried) or ``busy`` (another worker has it,
    or it was already handled)."""

    digest_id: str
    user_id: str
    status: str
    papers: int = 0
    channel: str | None = None
    ts: str | None = None
    error: str | None = None


class Dispatcher:
    """Sends due digests through ``poster``; safe to run in several processes at once."""

    def __init__(
        self,
        engine: Engine,
        poster: Poster,
        *,
        grace: timedelta = timedelta(hours=6),
        limit: int = DIGEST_SIZE,
        worker: str | None = None,
        faults: Fault | None = None,
        tz_refreshes: int = TZ_REFRESHES_PER_TICK,
        workers: int = DIGEST_WORKERS,
        pipeline: bool | None = None,
        select_helper: bool = True,
    ):
        """``pipeline``: large batches are chosen chunk by chunk, each delivered as soon as it
        is chosen; by default when this process may use a second core (``spare_core``), as on
        one core the chunks only add work (otherwise a batch is chosen at once, here).
        ``select_helper``: the chunks are chosen mostly in a helper process (started by the
        first batch, kept until ``close()`` or until this dispatcher is collected)."""
        self.engine = engine
        self.poster = poster
        self.grace = grace
        self.limit = limit
        self.worker = worker or worker_name()
        self.faults = faults
        self.tz_refreshes = tz_refreshes
        self.workers = max(1, workers)
        self._channel_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self.pipeline = spare_core() if pipeline is None else pipeline
        self.select_helper = select_helper
        self._helper: list[SelectionHelper] = []  # the one started, shared with the finalizer
        self._helper_lock = threading.Lock()
        self.close = weakref.finalize(self, _close_helpers, self._helper)

    @classmethod
    def from_settings(
        cls, engine: Engine, poster: Poster, settings: Settings, **options: Any
    ) -> Dispatcher:
        """The one way the app builds it: the grace period from the settings."""
        options.setdefault("grace", timedelta(seconds=settings.digest_grace_seconds))
        options.setdefault("workers", settings.digest_workers)
        return cls(engine, poster, **options)

    # Made per call from the engine's corpus path, not its connection (which is per thread
    # and would be asked for its file each time: a query per digest in the posting threads).
    @property
    def ledger(self) -> Ledger:
        return Ledger(state_for(self.engine.db_path), self.worker)

    @property
    def subscriptions(self) -> Subscriptions:
        return Subscriptions(state_for(self.engine.db_path))

    def _fault(self, step: str, digest_id: str) -> None:
        if self.faults is not None:
            self.faults(step, digest_id)

    # -- entry points -----------------------------------------------------------------------

    def run_due(self, now: datetime) -> list[Outcome]:
        """Send every digest due at ``now`` (a timezone-aware instant) once; see the module doc."""
        now = now.astimezone(UTC)
        outcomes = self._settle(now)
        members = self._refresh_time_zones(self.subscriptions.members(), now)
        candidates = {
            Ledger.scheduled_id(m.user_id, day.isoformat(), m.team_id): (m, day.isoformat())
            for m, day in due(members, now, self.grace)
        }
        for digest_id in self.ledger.existing(candidates):
            del candidates[digest_id]
        if not candidates:
            return outcomes
        if not self.pipeline or len(candidates) < PIPELINE_FROM:
            outcomes += self._deliver_batch(self._chosen_at_once(candidates), now)
        else:
            selections = self._selections(candidates)
            try:
                outcomes += self._deliver_batch(
                    self._jobs_of(candidates, selections), now, stop_choosing=selections.stop
                )
            finally:
                selections.stop()
            if selections.error is not None:
                raise selections.error
        sent = sum(o.status == "sent" for o in outcomes)
        log.info("digest tick: %d due, %d sent", len(candidates), sent)
        return outcomes

    def _chosen_at_once(
        self, candidates: dict[str, tuple[Member, str]]
    ) -> list[list[tuple[str, Member, str, DigestPlan]]]:
        """Every candidate's plan chosen in one ``select_digests``, as ``CLAIM_BATCH`` chunks."""
        plans = select_digests_apart(
            self.engine, [m.key for m, _ in candidates.values()], limit=self.limit
        )
        jobs = [
            (digest_id, member, local_date, plans[member.key])
            for digest_id, (member, local_date) in candidates.items()
            if member.key in plans  # (left out when choosing it failed: select_digests_apart)
        ]
        self.poster.prepare(plan for *_, plan in jobs)
        return [jobs[start : start + CLAIM_BATCH] for start in range(0, len(jobs), CLAIM_BATCH)]

    def _selections(self, candidates: dict[str, tuple[Member, str]]) -> Selections:
        keys = list(dict.fromkeys(m.key for m, _ in candidates.values()))
        helper = self._started_helper if self.select_helper else None
        return Selections(self.engine, keys, self.limit, CLAIM_BATCH, helper)

    def _jobs_of(
        self, candidates: dict[str, tuple[Member, str]], selections: Iterable[dict]
    ) -> Iterator[list[tuple[str, Member, str, DigestPlan]]]:
        """Each chunk of plans as it is chosen, as the jobs of its members' digests (their
        papers read at once: ``Poster.prepare``)."""
        by_member: dict[Any, list[tuple[str, Member, str]]] = {}
        for digest_id, (member, local_date) in candidates.items():
            by_member.setdefault(member.key, []).append((digest_id, member, local_date))
        for plans in selections:
            jobs = [
                (digest_id, member, local_date, plan)
                for key, plan in plans.items()
                for digest_id, member, local_date in by_member.get(key, ())
            ]
            if jobs:
                self.poster.prepare(plan for *_, plan in jobs)
                yield jobs

    def start_helper(self) -> None:
        """Start the selection helper now and wait until it answers (the clock at start, and
        the benchmark: otherwise the first large batch starts it, choosing here meanwhile)."""
        if self.pipeline and self.select_helper:
            self._started_helper().ready()

    def _started_helper(self) -> SelectionHelper:
        """The selection helper, started now unless it is already running."""
        with self._helper_lock:
            if self._helper and not self._helper[0].alive:
                self._helper.pop().close()
            if not self._helper:
                self._helper.append(SelectionHelper(self.engine.db_path))
            return self._helper[0]

    def send_now(self, user_id: str, now: datetime, *, team_id: str | None = None) -> Outcome:
        """``/papers digest now``: the member's digest at once, by the same exactly-once path."""
        now = now.astimezone(UTC)
        settled = self._settle(now, user_id, team_id)
        member = refresh_time_zone(self.poster, self.subscriptions, user_id, now, team_id=team_id)
        local = now.astimezone(member.zone).strftime("%Y-%m-%dT%H:%M")
        plan = select_digests(self.engine, [member.key], limit=self.limit)[member.key]
        minute = Ledger.scheduled_id(user_id, local, member.team_id)  # the claim adds a counter
        outcome = self._deliver(member, minute, local, plan, now, on_demand=True)
        if outcome.status == "skipped":
            # Settling posted the member's unfinished digest: that is the one they asked for.
            return next((o for o in settled if o.status == "sent"), outcome)
        return outcome

    def _settle(
        self, now: datetime, user_id: str | None = None, team_id: str | None = None
    ) -> list[Outcome]:
        """Finish the claims a stopped worker left (only ``user_id``'s when given) before any
        new digest is planned: each is looked up in Slack by its metadata and recorded, or
        posted, or given up once too late (``_post``). Skipping this on any path that plans a
        digest would send the stale claim's papers again under a new id, and post the stale
        claim as well later. A claim that cannot be settled now stays claimed (and fresh), so
        the member's next digest waits for it."""
        return [
            self._guarded(claim.digest_id, claim.user_id, self._post, claim, now)
            for claim in self.ledger.retake_stale(now, user_id, team_id)
        ]

    def preview(self, user_id: str, team_id: str | None = None) -> DigestPlan:
        """What the member's digest would hold if sent now (nothing is claimed or recorded)."""
        key = (self.subscriptions.store.team_for(user_id, team_id), user_id)
        return select_digests(self.engine, [key], limit=self.limit)[key]

    # -- the batch --------------------------------------------------------------------------

    def _deliver_batch(
        self,
        chunks: Iterable[list[tuple[str, Member, str, DigestPlan]]],
        now: datetime,
        stop_choosing: Callable[[], None] | None = None,
    ) -> list[Outcome]:
        """Claim, post and record many digests, given as chunks (of at most ``CLAIM_BATCH``,
        read one by one as they are needed: ``Selections`` may still be choosing the later
        ones, and ``stop_choosing`` stops it on the way out): claims a chunk at a time in one
        transaction each, posts through ``workers`` threads (which hold no database
        connection while Slack answers), records the sent ones ``CLAIM_BATCH`` at a time.

        The first digest is posted alone, so a token Slack refuses stops the run before any
        other member is tried. A crash anywhere leaves claims that are retaken after their
        lease, as one by one: claimed but not posted (posted then, the history looked up
        first when the claim has a channel), posted but not recorded (found in the history,
        recorded). When Slack refuses the token, the claims no worker started are released
        (nothing was posted for them), so the next run sends them at once.
        """
        outcomes: list[Outcome] = []
        posted: list[tuple[Claim, str, str]] = []
        pending: dict[Future[Outcome], Claim] = {}
        waiting: list[tuple[Claim, Member]] = []  # claimed, not yet handed to a worker
        chunks = iter(chunks)
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="digest-post")
        # One thread fits (renders) the next chunk while this one claims, posts and records
        # the current: fitting touches no database and claims nothing, so the claims stay
        # here, in order, one transaction a chunk.
        fitter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="digest-fit")
        fitting = fitter.submit(self._fit_next, chunks)
        first = True
        try:
            while (fitted_chunk := fitting.result()) is not None:
                fitted, failed = fitted_chunk
                outcomes += failed
                fitting = fitter.submit(self._fit_next, chunks)
                while len(pending) >= CLAIM_BATCH:  # claim no further ahead of the posting
                    self._collect(pending, outcomes, posted, FIRST_COMPLETED)
                if len(posted) >= CLAIM_BATCH:
                    self._record(posted, now)
                waiting = self._claim_fitted(fitted, now, outcomes)
                while waiting:
                    claim, member = waiting.pop(0)
                    self._fault("claimed", claim.digest_id)
                    future = pool.submit(self._post_one, claim, member, now, time.monotonic())
                    pending[future] = claim
                    if first:
                        first = False
                        self._collect(pending, outcomes, posted, ALL_COMPLETED)
            while pending:
                self._collect(pending, outcomes, posted, FIRST_COMPLETED)
            self._record(posted, now)
        except TokenRefused:
            unstarted = [claim for future, claim in pending.items() if future.cancel()]
            pool.shutdown(wait=True)
            for claim in unstarted + [claim for claim, _ in waiting]:
                self.ledger.release(claim, now)
            self._record_finished(pending, posted, now)
            raise
        finally:
            if stop_choosing is not None:
                stop_choosing()  # a fit waiting for the next chunk gets none
            fitter.shutdown(wait=True, cancel_futures=True)
            pool.shutdown(wait=True, cancel_futures=True)
        return outcomes

    def _record_finished(
        self,
        pending: dict[Future[Outcome], Claim],
        posted: list[tuple[Claim, str, str]],
        now: datetime,
    ) -> None:
        """Before leaving on a refused token: record the digests the other workers did post."""
        for future, claim in pending.items():
            if future.done() and not future.cancelled() and future.exception() is None:
                outcome = future.result()
                if outcome.status == "posted":
                    posted.append((claim, outcome.channel or "", outcome.ts or ""))
        self._record(posted, now)

    def _fit_next(
        self, chunks: Iterator[list[tuple[str, Member, str, DigestPlan]]]
    ) -> tuple[list[tuple[ClaimRequest, Member]], list[Outcome]] | None:
        """``_fit_batch`` of the next chunk; None when there is none."""
        jobs = next(chunks, None)
        return None if jobs is None else self._fit_batch(jobs)

    def _fit_batch(
        self, jobs: list[tuple[str, Member, str, DigestPlan]]
    ) -> tuple[list[tuple[ClaimRequest, Member]], list[Outcome]]:
        """Each plan cut to what one message holds, as the request to claim it; and an
        outcome for each member whose fitting failed. Touches no database (see
        ``_deliver_batch``: it runs a chunk ahead of the claims)."""
        fitted, failed = [], []
        for digest_id, member, local_date, plan in jobs:
            try:
                if plan.size:
                    # Claim only what fits in one message; the rest comes next time.
                    owner = member.user_id if member.digest_channel else None
                    plan = self.poster.fit(plan, local_date, owner=owner)
            except Exception as error:  # one member's bug must not hold up the others
                log.exception("digest %s failed unexpectedly", digest_id)
                failed.append(
                    Outcome(digest_id, member.user_id, "pending", error=type(error).__name__)
                )
                continue
            channel = member.digest_channel or member.dm_channel
            request = ClaimRequest(
                digest_id, member.user_id, local_date, plan, channel, member.team_id
            )
            fitted.append((request, member))
        return fitted, failed

    def _claim_fitted(
        self, fitted: list[tuple[ClaimRequest, Member]], now: datetime, outcomes: list
    ) -> list[tuple[Claim, Member]]:
        """Claim the fitted requests in one transaction (``Ledger.claim_many``)."""
        members = {request.digest_id: member for request, member in fitted}
        claims = []
        for result in self.ledger.claim_many([request for request, _ in fitted], now):
            request = result.request
            if result.claim is None:
                outcomes.append(Outcome(request.digest_id, request.user_id, result.status))
            else:
                claims.append((result.claim, members[request.digest_id]))
        return claims

    def _post_one(self, claim: Claim, member: Member, now: datetime, leased: float) -> Outcome:
        """A worker's part: post one claimed digest; a sent one comes back ``posted``, to be
        recorded with others (``_record``)."""
        lease = time.monotonic() - leased
        return self._guarded(
            claim.digest_id, claim.user_id, self._post, claim, now, member, lease < LEASE_MARGIN
        )

    def _collect(
        self,
        pending: dict[Future[Outcome], Claim],
        outcomes: list[Outcome],
        posted: list[tuple[Claim, str, str]],
        when: str,
    ) -> None:
        done, _ = wait(list(pending), return_when=when)
        for future in done:
            claim = pending.pop(future)
            outcome = future.result()  # a worker's crash or refused token is raised here
            if outcome.status == "posted":
                posted.append((claim, outcome.channel or "", outcome.ts or ""))
                outcome.status = "sent"
            outcomes.append(outcome)

    def _record(self, posted: list[tuple[Claim, str, str]], now: datetime) -> None:
        """Record the posted digests as sent, in one transaction."""
        if not posted:
            return
        batch = posted[:]
        posted.clear()
        self.ledger.record_sent_many(batch, now)
        for claim, _, _ in batch:
            self._fault("recorded", claim.digest_id)
            log.info("digest %s sent: %s", claim.digest_id, count(claim.plan.size, "paper"))

    # -- one digest -------------------------------------------------------------------------

    @staticmethod
    def _guarded(digest_id: str, user_id: str, step: Callable[..., Outcome], *args: Any) -> Outcome:
        """One member's bug must not hold up everyone else's digest: log it and go on (the
        claim, if any, is retried once stale)."""
        try:
            return step(*args)
        except TokenRefused:
            raise
        except Exception as error:
            log.exception("digest %s failed unexpectedly", digest_id)
            return Outcome(digest_id, user_id, "pending", error=type(error).__name__)

    def _refresh_time_zones(self, members: list[Member], now: datetime) -> list[Member]:
        stale = [m for m in members if m.tz_is_stale(now)][: self.tz_refreshes]
        if not stale:
            return members
        fresh = {
            m.key: refresh_time_zone(
                self.poster, self.subscriptions, m.user_id, now, team_id=m.team_id
            )
            for m in stale
        }
        return [fresh.get(m.key, m) for m in members]

    def _deliver(
        self,
        member: Member,
        digest_id: str,
        local_date: str,
        plan: DigestPlan,
        now: datetime,
        on_demand: bool = False,
    ) -> Outcome:
        """Claim, post, record. ``on_demand``: ``digest_id`` and ``local_date`` name the minute
        only; the claim gets the digest its own id (``Ledger.claim_now``)."""
        try:
            if plan.size:
                # Claim only what fits in one message; the rest comes next time.
                owner = member.user_id if member.digest_channel else None
                plan = self.poster.fit(plan, local_date, owner=owner)
            if on_demand:
                claim, status = self.ledger.claim_now(
                    member.user_id, local_date, plan, now, team_id=member.team_id
                )
                if claim is None:
                    return Outcome(digest_id, member.user_id, status)
            else:
                claim = self.ledger.claim(
                    digest_id, member.user_id, local_date, plan, now, team_id=member.team_id
                )
                if claim is None:
                    row = self.ledger.get(digest_id)
                    nothing = not plan.size or (row is not None and row["status"] == "skipped")
                    status = "skipped" if nothing else "busy"
                    return Outcome(digest_id, member.user_id, status)
            digest_id = claim.digest_id
            self._fault("claimed", digest_id)
            return self._post(claim, now, member)
        except (PostError, OSError) as error:
            code = _code(error)
            log.warning("digest %s not sent yet: %s", digest_id, code)
            return Outcome(digest_id, member.user_id, "pending", error=code)

    def _post(
        self, claim: Claim, now: datetime, member: Member | None = None, leased: bool = False
    ) -> Outcome:
        """Post a claimed digest and record it; a retaken claim is first looked up in Slack.

        When Slack refuses the token, nothing was posted by this attempt: the claim is
        released at once (``Ledger.release``), so once the token is replaced the digest goes
        on the next run, not after ``STALE_CLAIM``."""
        try:
            return self._post_claimed(claim, now, member, leased)
        except TokenRefused:
            self.ledger.release(claim, now)
            raise

    def _post_claimed(
        self, claim: Claim, now: datetime, member: Member | None, leased: bool = False
    ) -> Outcome:
        """``leased``: the batch claimed it moments ago, with its channel, and records it
        itself: no renewal before the post, and a sent digest comes back ``posted``."""
        ledger = self.ledger
        outcome = Outcome(claim.digest_id, claim.user_id, "pending", papers=claim.plan.size)
        try:
            member = member or self.subscriptions.ensure_member(claim.user_id, now, claim.team_id)
            channel = claim.channel or self._open(member)
            if not self.poster.is_direct(channel):
                with self._channel_lock(channel):  # joined once, whoever posts there first
                    self.poster.join(channel, team=claim.team_id or None)
            posted_before = claim.retaken and claim.channel is not None
            fresh = leased and not claim.retaken and claim.channel == channel
            if not fresh and not ledger.renew(claim, now, channel):
                outcome.status = "busy"
                return outcome
            self._fault("opened", claim.digest_id)
            ts = self._find_posted(claim, channel, now) if posted_before else None
            if ts is None and claim.retaken and ledger.expired(claim, now, self.grace):
                ledger.record_failed(claim, "expired: not delivered within the grace period", now)
                outcome.status, outcome.error = "failed", "expired"
                return outcome
            if ts is None:
                sent = self._send(claim, member, channel, now)
                if sent is None:
                    outcome.status = "busy"
                    return outcome
                channel, ts = sent
                self._fault("posted", claim.digest_id)
            else:
                log.info(
                    "digest %s was already in Slack (ts %s); recording it", claim.digest_id, ts
                )
            if leased:
                outcome.status, outcome.channel, outcome.ts = "posted", channel, ts
                return outcome
            ledger.record_sent(claim, channel, ts, now)
            self._fault("recorded", claim.digest_id)
            outcome.status, outcome.channel, outcome.ts = "sent", channel, ts
            log.info("digest %s sent: %s", claim.digest_id, count(claim.plan.size, "paper"))
            return outcome
        except PostError as error:
            if error.unreachable:
                outcome.error = error.code
                log.warning(
                    "digest %s not sent yet (%s); it will be retried", claim.digest_id, error.code
                )
                return outcome
            code = outcome.error = error.code
            if error.permanent:
                log.warning(
                    "digest %s for %s failed for good: %s", claim.digest_id, claim.user_id, code
                )
                ledger.record_failed(claim, code, now)
                outcome.status = "failed"
            elif (ledger.get(claim.digest_id) or {}).get("status") == "failed":
                outcome.status = "failed"  # given up on (see _find_posted)
            else:
                log.warning(
                    "digest %s not sent yet (%s); it will be retried", claim.digest_id, code
                )
            return outcome
        except OSError as error:
            outcome.error = _code(error)
            log.warning(
                "digest %s not sent yet (%s); it will be retried", claim.digest_id, outcome.error
            )
            return outcome

    def _send(
        self, claim: Claim, member: Member, channel: str, now: datetime
    ) -> tuple[str, str] | None:
        """Post the digest; (channel, ts), or None when the claim was lost.

        A remembered DM the platform no longer knows (``PostError.gone``) is forgotten and
        opened afresh once; the claim notes the new channel before the post, so a crash after
        it is still looked up in the right conversation.
        """

        def post(channel: str) -> tuple[str, str]:
            direct = self.poster.is_direct(channel)
            # Digests for one channel go one at a time (Slack: about one message a second
            # per conversation); DMs are each their own conversation.
            with nullcontext() if direct else self._channel_lock(channel):
                return self.poster.post_digest(
                    channel,
                    claim.plan,
                    claim.local_date,
                    digest_id=claim.digest_id,
                    owner=None if direct else claim.user_id,
                    team=claim.team_id or None,
                )

        try:
            return post(channel)
        except PostError as error:
            if not (self.poster.is_direct(channel) and error.gone):
                raise
            log.info(
                "DM %s of %s is gone (%s); opening it again", channel, member.user_id, error.code
            )
            self.subscriptions.set_dm_channel(member.user_id, None, team_id=member.team_id)
            channel = self._open(member, remembered=False)
            if not self.ledger.renew(claim, now, channel):
                return None
            return post(channel)

    def _channel_lock(self, channel: str) -> threading.Lock:
        with self._locks_lock:
            return self._channel_locks.setdefault(channel, threading.Lock())

    def _open(self, member: Member, remembered: bool = True) -> str:
        """Where the member's digest goes: their channel, or their DM with the bot. The DM's
        id is remembered (``members.dm_channel``), so ``conversations.open`` (Tier 3, about 50
        a minute: a team that all chose 09:00 would hit it) is called once per member, not
        once per digest."""
        if member.digest_channel:
            return member.digest_channel
        if remembered and member.dm_channel:
            return member.dm_channel
        channel = self.poster.open_dm(member.user_id, team=member.team_id or None)
        self.subscriptions.set_dm_channel(member.user_id, channel, team_id=member.team_id)
        return channel

    def _find_posted(self, claim: Claim, channel: str, now: datetime) -> str | None:
        """The ts of this digest's message if the platform already has it (found by its id).

        When the history cannot be read (e.g. the app lacks ``im:history``), posting again
        could send it twice: the digest waits, and once past the grace period it is given up
        (its papers come in the next digest) rather than risk a duplicate.
        """
        first = from_iso(claim.first_claimed_at) or datetime.now(UTC)
        # A day before the claim: generous for clock skew, and a DM holds about one digest a day.
        since = first - timedelta(days=1)
        try:
            return self.poster.find_digest(
                channel, claim.digest_id, since, team=claim.team_id or None
            )
        except PostError as error:
            if not error.unreachable and self.ledger.expired(claim, now, self.grace):
                self.ledger.record_failed(claim, f"unverifiable: {error.code}", now)
                log.error(
                    "digest %s: cannot tell whether Slack has it (%s); given up",
                    claim.digest_id,
                    error.code,
                )
            raise


def _close_helpers(helpers: list[SelectionHelper]) -> None:
    """Stop the dispatcher's selection helper (``Dispatcher.close``, or when it is collected)."""
    while helpers:
        helpers.pop().close()


def _code(error: Exception) -> str:
    """What an outcome records as the error: the platform's code, else the exception's kind."""
    return error.code if isinstance(error, PostError) else type(error).__name__
