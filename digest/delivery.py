"""Slack's part of the digest: members' time zones, and posting each due digest exactly once.

``Dispatcher.run_due(now)`` is what the scheduler calls every minute: finish digests a stopped
worker left claimed, refresh stale time zones, find whose digest is due (``schedule``), choose
all their papers in one batch (``selection``), then for each member claim, post, record
(``ledger``). ``send_now`` (``/papers digest now``) goes through the same claim/post/record,
under a fresh id each time it has something to send (``Ledger.claim_now``).

Posting: a direct message (``conversations.open`` + ``chat.postMessage``), or the channel the
member named. The client waits out HTTP 429 for as long as Slack's Retry-After says and tries
again (``RATE_LIMIT_RETRIES`` times), so a rate limit delays a digest without losing it. A
member Slack refuses for good (deactivated, bot not in their channel: ``PERMANENT_ERRORS``) is
logged and marked failed for the day, and the others go on; any other error leaves the claim
in place and the digest is retried once the claim is stale (``ledger.STALE_CLAIM``).

Slack scopes this needs: ``chat:write``, ``im:write`` (open the DM), ``users:read`` (time zone),
``channels:join`` (be in a public channel a digest goes to, see ``Dispatcher._join``) and
``im:history`` / ``channels:history`` / ``groups:history`` (find a digest already posted
before a crash).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.engine.search import Engine
from bot.settings import Settings

from .ledger import Claim, Ledger, worker_name
from .message import DIGEST_EVENT, digest_message
from .plan import DigestPlan
from .schedule import due
from .selection import DIGEST_SIZE, select_digests
from .subscriptions import Member, Subscriptions, from_iso

log = logging.getLogger(__name__)

RATE_LIMIT_RETRIES = 3
CONNECTION_RETRIES = 2
TZ_REFRESHES_PER_TICK = 50  # users.info is Tier 4 (100+/minute); leave room for the web app
HISTORY_PAGES = 5
#: Errors that retrying will not fix: the member's digest is marked failed and skipped today.
PERMANENT_ERRORS = frozenset(
    {
        "user_disabled",
        "user_not_found",
        "users_not_found",
        "user_not_visible",
        "cannot_dm_bot",
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "restricted_action",
        "messages_tab_disabled",
        "method_not_supported_for_channel_type",
        "invalid_blocks",
        "invalid_blocks_format",
        "invalid_metadata_format",
        "msg_too_long",
        "no_text",
    }
)
#: Errors that mean the bot token itself is refused (from any method): nothing more can be sent
#: until an operator replaces it, so the run stops at once (``TokenRefused``). ``account_inactive``
#: with a bot token means the workspace or the bot's user was deleted.
AUTH_ERRORS = frozenset({"invalid_auth", "token_revoked", "not_authed", "account_inactive"})
#: A remembered DM channel that Slack no longer knows: forget it and open the DM again.
DM_GONE = frozenset({"channel_not_found", "is_archived"})
Fault = Callable[[str, str], None]  # (step, digest id): tests raise here to simulate a crash


class TokenRefused(Exception):
    """Slack refused the bot token; ``code`` is Slack's error. Never caught per member."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def _check_auth(error: Exception) -> None:
    """Turn a refused-token error into ``TokenRefused`` (raised), so no member is tried after."""
    if isinstance(error, SlackApiError) and _error_code(error) in AUTH_ERRORS:
        raise TokenRefused(_error_code(error)) from error


class RetryAfterHandler(RateLimitErrorRetryHandler):
    """slack_sdk's rate-limit handler, waiting exactly Slack's Retry-After through ``sleep``
    (injectable, so tests check the wait without sleeping)."""

    def __init__(
        self, max_retry_count: int = RATE_LIMIT_RETRIES, sleep: Callable[[float], Any] = time.sleep
    ):
        super().__init__(max_retry_count=max_retry_count)
        self.sleep = sleep

    def prepare_for_next_attempt(self, *, state, request, response=None, error=None) -> None:
        if response is None:
            raise error  # type: ignore[misc]
        state.next_attempt_requested = True
        value: Any = "1"
        for name, header in response.headers.items():
            if name.lower() == "retry-after":
                value = header[0] if isinstance(header, list) else header
        try:
            wait = max(0, int(value))
        except (TypeError, ValueError):
            wait = 1
        log.info("Slack rate limit: waiting %ss as Retry-After asks", wait)
        self.sleep(wait)
        state.increment_current_attempt()


def make_client(
    settings: Settings, *, token: str | None = None, sleep: Callable[[float], Any] = time.sleep
) -> WebClient:
    """The scheduler's Web API client: Slack's base URL from settings, 429s and dropped
    connections retried."""
    return WebClient(
        token=token or settings.slack_bot_token,
        base_url=settings.slack_api_url,
        retry_handlers=[
            ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
            RetryAfterHandler(sleep=sleep),
        ],
    )


def _is_dm(channel: str) -> bool:
    """Whether a conversation id is a direct message (Slack's DM ids start with D)."""
    return channel.startswith("D")


def _error_code(error: Exception) -> str:
    if isinstance(error, SlackApiError) and error.response is not None:
        return str(error.response.get("error") or "slack_error")
    return type(error).__name__


def refresh_time_zone(
    client: WebClient, subscriptions: Subscriptions, user_id: str, now: datetime, *, force=False
) -> Member:
    """The member, with their time zone read from their Slack profile when the cached one is
    older than a day (``subscriptions.TZ_MAX_AGE``). A failed read keeps the old zone."""
    member = subscriptions.ensure_member(user_id, now)
    if not force and not member.tz_is_stale(now):
        return member
    tz = None
    try:
        tz = (client.users_info(user=user_id).get("user") or {}).get("tz")
    except (SlackApiError, SlackClientError, OSError) as error:
        _check_auth(error)
        log.warning(
            "users.info for %s failed (%s); keeping %s", user_id, _error_code(error), member.tz
        )
    return subscriptions.set_tz(user_id, tz, now)


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
    """Sends due digests through ``client``; safe to run in several processes at once."""

    def __init__(
        self,
        engine: Engine,
        client: WebClient,
        *,
        grace: timedelta = timedelta(hours=6),
        limit: int = DIGEST_SIZE,
        worker: str | None = None,
        faults: Fault | None = None,
        tz_refreshes: int = TZ_REFRESHES_PER_TICK,
    ):
        self.engine = engine
        self.client = client
        self.grace = grace
        self.limit = limit
        self.worker = worker or worker_name()
        self.faults = faults
        self.tz_refreshes = tz_refreshes
        self._joined: set[str] = set()  # channels joined by this process (see _join)

    @classmethod
    def from_settings(cls, engine: Engine, settings: Settings, **options: Any) -> Dispatcher:
        options.setdefault("grace", timedelta(seconds=settings.digest_grace_seconds))
        return cls(engine, make_client(settings), **options)

    # The engine's connection is per thread, so these are made per call.
    @property
    def ledger(self) -> Ledger:
        return Ledger(self.engine.db, self.worker)

    @property
    def subscriptions(self) -> Subscriptions:
        return Subscriptions(self.engine.db)

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
            Ledger.scheduled_id(m.user_id, day.isoformat()): (m, day.isoformat())
            for m, day in due(members, now, self.grace)
        }
        for digest_id in self.ledger.existing(candidates):
            del candidates[digest_id]
        if not candidates:
            return outcomes
        plans = select_digests(
            self.engine, [m.user_id for m, _ in candidates.values()], limit=self.limit
        )
        for digest_id, (member, local_date) in candidates.items():
            plan = plans[member.user_id]
            outcomes.append(
                self._guarded(
                    digest_id,
                    member.user_id,
                    self._deliver,
                    member,
                    digest_id,
                    local_date,
                    plan,
                    now,
                )
            )
        sent = sum(o.status == "sent" for o in outcomes)
        log.info("digest tick: %d due, %d sent", len(candidates), sent)
        return outcomes

    def send_now(self, user_id: str, now: datetime) -> Outcome:
        """``/papers digest now``: the member's digest at once, by the same exactly-once path."""
        now = now.astimezone(UTC)
        settled = self._settle(now, user_id)
        member = refresh_time_zone(self.client, self.subscriptions, user_id, now)
        local = now.astimezone(member.zone).strftime("%Y-%m-%dT%H:%M")
        plan = select_digests(self.engine, [user_id], limit=self.limit)[user_id]
        minute = Ledger.scheduled_id(user_id, local)  # the claim adds a counter
        outcome = self._deliver(member, minute, local, plan, now, on_demand=True)
        if outcome.status == "skipped":
            # Settling posted the member's unfinished digest: that is the one they asked for.
            return next((o for o in settled if o.status == "sent"), outcome)
        return outcome

    def _settle(self, now: datetime, user_id: str | None = None) -> list[Outcome]:
        """Finish the claims a stopped worker left (only ``user_id``'s when given) before any
        new digest is planned: each is looked up in Slack by its metadata and recorded, or
        posted, or given up once too late (``_post``). Skipping this on any path that plans a
        digest would send the stale claim's papers again under a new id, and post the stale
        claim as well later. A claim that cannot be settled now stays claimed (and fresh), so
        the member's next digest waits for it."""
        return [
            self._guarded(claim.digest_id, claim.user_id, self._post, claim, now)
            for claim in self.ledger.retake_stale(now, user_id)
        ]

    def preview(self, user_id: str) -> DigestPlan:
        """What the member's digest would hold if sent now (nothing is claimed or recorded)."""
        return select_digests(self.engine, [user_id], limit=self.limit)[user_id]

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
            m.user_id: refresh_time_zone(self.client, self.subscriptions, m.user_id, now)
            for m in stale
        }
        return [fresh.get(m.user_id, m) for m in members]

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
                _, plan = digest_message(
                    self.engine, plan, local_date, digest_id=digest_id, owner=owner
                )
            if on_demand:
                claim, status = self.ledger.claim_now(member.user_id, local_date, plan, now)
                if claim is None:
                    return Outcome(digest_id, member.user_id, status)
            else:
                claim = self.ledger.claim(digest_id, member.user_id, local_date, plan, now)
                if claim is None:
                    row = self.ledger.get(digest_id)
                    nothing = not plan.size or (row is not None and row["status"] == "skipped")
                    status = "skipped" if nothing else "busy"
                    return Outcome(digest_id, member.user_id, status)
            digest_id = claim.digest_id
            self._fault("claimed", digest_id)
            return self._post(claim, now, member)
        except (SlackApiError, SlackClientError, OSError) as error:
            _check_auth(error)
            log.warning("digest %s not sent yet: %s", digest_id, _error_code(error))
            return Outcome(digest_id, member.user_id, "pending", error=_error_code(error))

    def _post(self, claim: Claim, now: datetime, member: Member | None = None) -> Outcome:
        """Post a claimed digest and record it; a retaken claim is first looked up in Slack.

        When Slack refuses the token, nothing was posted by this attempt: the claim is
        released at once (``Ledger.release``), so once the token is replaced the digest goes
        on the next run, not after ``STALE_CLAIM``."""
        try:
            return self._post_claimed(claim, now, member)
        except TokenRefused:
            self.ledger.release(claim, now)
            raise

    def _post_claimed(self, claim: Claim, now: datetime, member: Member | None) -> Outcome:
        ledger = self.ledger
        outcome = Outcome(claim.digest_id, claim.user_id, "pending", papers=claim.plan.size)
        try:
            member = member or self.subscriptions.ensure_member(claim.user_id, now)
            channel = claim.channel or self._open(member)
            if not _is_dm(channel):
                self._join(channel)
            posted_before = claim.retaken and claim.channel is not None
            if not ledger.renew(claim, now, channel):
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
            ledger.record_sent(claim, channel, ts, now)
            self._fault("recorded", claim.digest_id)
            outcome.status, outcome.channel, outcome.ts = "sent", channel, ts
            log.info("digest %s sent: %d papers", claim.digest_id, claim.plan.size)
            return outcome
        except SlackApiError as error:
            _check_auth(error)  # the claim is released (see _post)
            code = _error_code(error)
            outcome.error = code
            if code in PERMANENT_ERRORS:
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
        except (SlackClientError, OSError) as error:
            outcome.error = _error_code(error)
            log.warning(
                "digest %s not sent yet (%s); it will be retried", claim.digest_id, outcome.error
            )
            return outcome

    def _join(self, channel: str) -> None:
        """Be a member of a channel before posting a digest there.

        ``chat:write.public`` lets the bot post into a public channel it is not in, but
        ``conversations.history`` then answers ``not_in_channel``, so after a crash between
        the post and the record the digest could not be found and would be given up (its
        papers sent again). Joining first (``channels:join``; once per channel per process,
        a no-op when already in) keeps the exactly-once guarantee for channel digests. A
        private channel cannot be joined: the bot must be invited, and then history works;
        without the invitation the post itself fails (``not_in_channel``). An app installed
        before ``channels:join`` was added still posts; such a digest is never posted twice
        after a crash, but may be given up (see ``_find_posted``).
        """
        if channel in self._joined:
            return
        try:
            self.client.conversations_join(channel=channel)
        except SlackApiError as error:
            _check_auth(error)
            code = _error_code(error)
            if code == "missing_scope":
                log.warning(
                    "cannot join %s (the app lacks channels:join): after a crash its digest "
                    "cannot be looked up; reinstall the app from manifest.yml",
                    channel,
                )
            elif code != "method_not_supported_for_channel_type":  # private: invited or not
                raise
        self._joined.add(channel)

    def _send(
        self, claim: Claim, member: Member, channel: str, now: datetime
    ) -> tuple[str, str] | None:
        """``chat.postMessage`` the digest; (channel, ts), or None when the claim was lost.

        A remembered DM channel Slack no longer knows (``DM_GONE``) is forgotten and opened
        afresh once; the claim notes the new channel before the post, so a crash after it is
        still looked up in the right conversation.
        """
        message, _ = digest_message(
            self.engine,
            claim.plan,
            claim.local_date,
            digest_id=claim.digest_id,
            owner=None if _is_dm(channel) else claim.user_id,
        )
        try:
            response = self.client.chat_postMessage(
                channel=channel, unfurl_links=False, unfurl_media=False, **message
            )
        except SlackApiError as error:
            if not (_is_dm(channel) and _error_code(error) in DM_GONE):
                raise
            log.info(
                "DM %s of %s is gone (%s); opening it again",
                channel,
                member.user_id,
                _error_code(error),
            )
            self.subscriptions.set_dm_channel(member.user_id, None)
            channel = self._open(member, remembered=False)
            if not self.ledger.renew(claim, now, channel):
                return None
            response = self.client.chat_postMessage(
                channel=channel, unfurl_links=False, unfurl_media=False, **message
            )
        return str(response.get("channel") or channel), str(response["ts"])

    def _open(self, member: Member, remembered: bool = True) -> str:
        """Where the member's digest goes: their channel, or their DM with the bot. The DM's
        id is remembered (``members.dm_channel``), so ``conversations.open`` (Tier 3, about 50
        a minute: a team that all chose 09:00 would hit it) is called once per member, not
        once per digest."""
        if member.digest_channel:
            return member.digest_channel
        if remembered and member.dm_channel:
            return member.dm_channel
        response = self.client.conversations_open(users=member.user_id)
        channel = str(response["channel"]["id"])
        self.subscriptions.set_dm_channel(member.user_id, channel)
        return channel

    def _find_posted(self, claim: Claim, channel: str, now: datetime) -> str | None:
        """The ts of this digest's message if Slack already has it (found by its metadata).

        When the history cannot be read (e.g. the app lacks ``im:history``), posting again
        could send it twice: the digest waits, and once past the grace period it is given up
        (its papers come in the next digest) rather than risk a duplicate.
        """
        try:
            return self._search_history(claim, channel)
        except SlackApiError as error:
            _check_auth(error)
            if self.ledger.expired(claim, now, self.grace):
                code = _error_code(error)
                self.ledger.record_failed(claim, f"unverifiable: {code}", now)
                log.error(
                    "digest %s: cannot tell whether Slack has it (%s); given up",
                    claim.digest_id,
                    code,
                )
            raise

    def _search_history(self, claim: Claim, channel: str) -> str | None:
        first = from_iso(claim.first_claimed_at) or datetime.now(UTC)
        # A day before the claim: generous for clock skew, and a DM holds about one digest a day.
        oldest = str(int(first.timestamp()) - 86_400)
        cursor = None
        for _ in range(HISTORY_PAGES):
            response = self.client.conversations_history(
                channel=channel, oldest=oldest, include_all_metadata=True, limit=200, cursor=cursor
            )
            for message in response.get("messages") or []:
                metadata = message.get("metadata") or {}
                payload = metadata.get("event_payload") or {}
                if (
                    metadata.get("event_type") == DIGEST_EVENT
                    and payload.get("digest_id") == claim.digest_id
                ):
                    return str(message["ts"])
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return None
        return None
