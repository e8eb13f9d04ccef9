"""The exactly-once record of digests: claimed before posting, recorded after (no Slack here).

A member is a user in a workspace (``team_id``, ``user_id``). A scheduled digest's id is
``"<team>:<user>:<local date>"`` (``T1:U1:2024-03-04``; ``U1:2024-03-04`` for a member of a
deployment that never learned its team, and for every digest claimed before revision
s040_member_keys): one a day, so a second scheduler or a restart finds it taken (by the
member and date too, so a claim under an older id is found). An on-demand one
(``/papers digest now``) gets a fresh id each time it has something to send: the local minute
and a counter (``T1:U1:2024-03-04T08:30#1``, then ``#2`` ...), given out by ``claim_now``
inside the claim's transaction; asking with nothing to send writes nothing. Its row in ``digests`` goes::

    (none) --claim--> claimed --post, then record--> sent
                         |                     \\--> failed   (Slack refused for good)
                         \\--> (stale) retaken by the next scheduler run
    (none) --claim with nothing to send--> skipped   (scheduled digests only)

Why each crash is safe (the caller posts between ``claim`` and ``record_sent``):

* before the claim: no row, so the next run claims it (nothing on demand was posted either:
  asking again sends it);
* after the claim, before the post: the claim goes stale (``STALE_CLAIM``) and is retaken; the
  row has no channel yet, so nothing can have been posted, and it is posted;
* after the post, before the record: the retaken claim has a channel, so the caller first looks
  for the digest's id in that channel's history (it is in the message's ``metadata``) and, when
  Slack already has it, only records it;
* after the record: ``sent`` is final; ``sent_papers`` was written in the same transaction, so
  the papers never come again.

Two schedulers running at once, on one host or many: every decision is one transaction in which
nobody else decides for the member (``StateStore.member_transaction``: SQLite's write lock, or
the member's advisory lock in PostgreSQL), the unique id makes one insert win, and a claim that
is still fresh (its lease, ``STALE_CLAIM``) is never retaken. A member has at most one digest in flight, so a scheduled digest and
``/papers digest now`` cannot send the same papers side by side.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlite_utils import Database

from bot.state import StateStore, state_of

from .plan import DigestPlan
from .subscriptions import from_iso, to_iso

#: A claim not renewed for this long belongs to a process that died; another may retake it.
#: Far longer than one post takes, rate-limit waits included (see delivery.RATE_LIMIT_RETRIES).
STALE_CLAIM = timedelta(minutes=10)


def worker_name() -> str:
    """Who holds a claim: host, process and a random part (pids are reused after restarts)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Claim:
    """A digest this worker may post: its content and, once known, the channel it goes to."""

    digest_id: str
    user_id: str
    local_date: str
    plan: DigestPlan
    first_claimed_at: str
    channel: str | None = None
    retaken: bool = False  # a dead worker's claim: it may already be in Slack
    team_id: str = ""  # the member's workspace ("" when the deployment never learned it)


@dataclass
class ClaimRequest:
    """One digest the batch asks to claim (``Ledger.claim_many``)."""

    digest_id: str
    user_id: str
    local_date: str
    plan: DigestPlan
    channel: str | None = None  # where it goes, when already known
    team_id: str = ""  # the member's workspace


@dataclass
class ClaimResult:
    """``claim``: ours to post (None otherwise); ``status``: ``claimed``, ``skipped``
    (nothing to send) or ``busy`` (another worker has it, or it was handled)."""

    request: ClaimRequest
    claim: Claim | None
    status: str


class Ledger:
    """The digests' record in the shared state (``bot.state``), for one worker.

    Made from a ``StateStore`` or, as before the store existed, from the engine's
    connection (``Ledger(engine.db, worker)``), which means the same store.
    """

    def __init__(self, store: StateStore | Database, worker: str | None = None):
        self.store = state_of(store)
        self.worker = worker or worker_name()

    @staticmethod
    def scheduled_id(user_id: str, local_date: str, team_id: str | None = None) -> str:
        """``T1:U1:2024-03-04``, or ``U1:2024-03-04`` for a member without a known team."""
        return f"{team_id}:{user_id}:{local_date}" if team_id else f"{user_id}:{local_date}"

    def get(self, digest_id: str) -> dict[str, Any] | None:
        return self.store.digest(digest_id)

    def taken(self, user_id: str, team_id: str | None = None) -> Callable[[date], bool]:
        """Whether the member's scheduled digest of a local date has a row, whatever its
        status (``Dispatcher.run_due`` then sends none that day): ``next_digest``'s ``taken``.
        The row is found as ``claim`` finds it (by member and date, whatever its id), so the
        two never disagree about a day."""
        team = self.store.team_for(user_id, team_id)

        def taken(day: date) -> bool:
            with self.store.read() as conn:
                found = self.store.scheduled_digest(conn, team, user_id, day.isoformat())
            return found is not None

        return taken

    def latest(self, user_id: str, team_id: str | None = None) -> dict[str, Any] | None:
        """The member's most recent digest (any status), for "last digest" in the App Home."""
        return self.store.latest_digest(user_id, team_id)

    def existing(self, digest_ids: Iterable[str]) -> set[str]:
        """Which of these digests already have a row, whatever its status."""
        return self.store.existing_digests(digest_ids)

    def claim(
        self,
        digest_id: str,
        user_id: str,
        local_date: str,
        plan: DigestPlan,
        now: datetime,
        *,
        team_id: str | None = None,
    ) -> Claim | None:
        """Take the digest for this worker, or None when it is not ours to post.

        None when another worker holds it (or the member has another digest in flight), when
        it was already handled, or when, after leaving out papers sent since the plan was
        made, nothing remains (the row is then recorded as ``skipped``, so the scheduler does
        not ask again that day). A dead worker's stale claim is retaken (``Claim.retaken``),
        with the content it had.
        """
        team = self.store.team_for(user_id, team_id)
        stale_before = to_iso(now - STALE_CLAIM)
        with self.store.member_transaction(user_id, team) as conn:
            # The member's digest of the day may have an id from before s040 (no team).
            row = self.store.digest(digest_id, conn) or self.store.scheduled_digest(
                conn, team, user_id, local_date
            )
            if row is not None:
                if row["status"] == "claimed" and row["claimed_at"] < stale_before:
                    if not self.store.retake(
                        conn, row["id"], self.worker, to_iso(now), stale_before
                    ):
                        return None
                    return self._retaken(row, now)
                return None
            if self.store.in_flight(conn, user_id, stale_before, team):
                return None
            plan = self._unsent(conn, team, user_id, plan)
            if not self._insert(conn, digest_id, team, user_id, local_date, plan, now):
                return None
        if not plan.size:
            return None
        return Claim(digest_id, user_id, local_date, plan, to_iso(now), team_id=team)

    def claim_many(self, requests: list[ClaimRequest], now: datetime) -> list[ClaimResult]:
        """``claim`` for many digests in one transaction (the digest batch), in their order.

        The same decisions as ``claim``, member by member, under all their locks at once
        (``StateStore.members_transaction``): a row that exists is retaken only when its claim
        is stale; a member with a digest in flight (or earlier in this batch) gets none; papers
        sent since the plan was made are left out, and a plan left empty is recorded
        ``skipped``. A request's ``channel``, when known, is written with the claim, so a
        crash after the post finds the digest in that conversation.
        """
        if not requests:
            return []
        stale_before = to_iso(now - STALE_CLAIM)
        stamp = to_iso(now)
        users = {(r.team_id, r.user_id) for r in requests}
        results: list[ClaimResult] = []
        with self.store.members_transaction(users) as conn:
            rows = self.store.digests_among(conn, [r.digest_id for r in requests])
            busy = self.store.in_flight_among(conn, users, stale_before)
            sent = self.store.sent_pairs(
                conn, users, (p for r in requests for p in r.plan.paper_ids)
            )
            inserts: list[dict[str, Any]] = []
            for request in requests:
                row = rows.get(request.digest_id)
                empty = "skipped" if not request.plan.size else "busy"
                if row is not None:
                    stale = row["status"] == "claimed" and row["claimed_at"] < stale_before
                    if stale and self.store.retake(
                        conn, request.digest_id, self.worker, stamp, stale_before
                    ):
                        results.append(ClaimResult(request, self._retaken(row, now), "claimed"))
                    else:
                        status = "skipped" if row["status"] == "skipped" else empty
                        results.append(ClaimResult(request, None, status))
                    continue
                member = (request.team_id, request.user_id)
                if member in busy:
                    results.append(ClaimResult(request, None, empty))
                    continue
                busy.add(member)  # one digest in flight per member
                plan = request.plan.keeping(
                    i for i in request.plan.paper_ids if (*member, i) not in sent
                )
                row = self._row(
                    request.digest_id,
                    request.team_id,
                    request.user_id,
                    request.local_date,
                    plan,
                    now,
                )
                row["channel"] = request.channel if plan.size else None
                inserts.append(row)
                claim = Claim(
                    request.digest_id,
                    request.user_id,
                    request.local_date,
                    plan,
                    stamp,
                    request.channel,
                    team_id=request.team_id,
                )
                results.append(ClaimResult(request, claim, "claimed" if plan.size else "skipped"))
            inserted = self.store.insert_digests(conn, inserts) if inserts else set()
        for result in results:
            if result.claim is None or result.claim.retaken:
                continue
            if result.claim.digest_id not in inserted:
                result.claim, result.status = None, "busy"
            elif result.status == "skipped":
                result.claim = None
        return results

    def claim_now(
        self,
        user_id: str,
        local_minute: str,
        plan: DigestPlan,
        now: datetime,
        *,
        team_id: str | None = None,
    ) -> tuple[Claim | None, str]:
        """Claim an on-demand digest (``/papers digest now``) under a fresh id.

        Returns ``(claim, "claimed")``, or ``(None, "busy")`` when another digest of the member
        is in flight, or ``(None, "skipped")`` when none of the plan's papers is unsent. Only a
        claimed digest writes a row: asking when there is nothing to send uses up no id, and
        every digest that is sent has its own (the minute and a counter, see the module doc),
        however many come in one minute. The claim then goes through the same post, record and
        retake path as a scheduled one.
        """
        team = self.store.team_for(user_id, team_id)
        stale_before = to_iso(now - STALE_CLAIM)
        with self.store.member_transaction(user_id, team) as conn:
            if self.store.in_flight(conn, user_id, stale_before, team):
                return None, "busy"
            plan = self._unsent(conn, team, user_id, plan)
            if not plan.size:
                return None, "skipped"
            # Nobody else decides for this member meanwhile, so counting then inserting
            # cannot race another worker.
            taken = self.store.count_digests_like(conn, user_id, f"{local_minute}#", team)
            local_date = f"{local_minute}#{taken + 1}"
            digest_id = self.scheduled_id(user_id, local_date, team)
            if not self._insert(conn, digest_id, team, user_id, local_date, plan, now):
                return None, "busy"
        claim = Claim(digest_id, user_id, local_date, plan, to_iso(now), team_id=team)
        return claim, "claimed"

    def _unsent(self, conn: Any, team_id: str, user_id: str, plan: DigestPlan) -> DigestPlan:
        """The plan without the papers sent to the member since it was made."""
        ids = plan.paper_ids
        if not ids:
            return plan
        already = self.store.sent_among(conn, user_id, ids, team_id)
        return plan.keeping(i for i in ids if i not in already)

    def _insert(
        self,
        conn: Any,
        digest_id: str,
        team_id: str,
        user_id: str,
        local_date: str,
        plan: DigestPlan,
        now: datetime,
    ) -> bool:
        """The digest's row: ``claimed`` when it has papers, else ``skipped`` (finished)."""
        return self.store.insert_digest(
            conn, **self._row(digest_id, team_id, user_id, local_date, plan, now)
        )

    def _row(
        self,
        digest_id: str,
        team_id: str,
        user_id: str,
        local_date: str,
        plan: DigestPlan,
        now: datetime,
    ) -> dict[str, Any]:
        stamp = to_iso(now)
        return {
            "id": digest_id,
            "team_id": team_id,
            "user_id": user_id,
            "local_date": local_date,
            "status": "claimed" if plan.size else "skipped",
            "claimed_by": self.worker,
            "claimed_at": stamp,
            "paper_ids": json.dumps(plan.paper_ids),
            # The plan's JSON as it is, not parsed and written again: a hundred rows a claim.
            "content": f'{{"first_claimed_at": {json.dumps(stamp)}, "plan": {plan.to_json()}}}',
            "finished_at": None if plan.size else stamp,
        }

    def _retaken(self, row: dict[str, Any], now: datetime) -> Claim:
        user_id = row["user_id"]
        data = json.loads(row["content"] or "{}")
        plan = DigestPlan.from_json(json.dumps(data.get("plan") or {"user_id": user_id}))
        first = data.get("first_claimed_at") or to_iso(now)
        return Claim(
            row["id"],
            user_id,
            row["local_date"],
            plan,
            first,
            row["channel"],
            retaken=True,
            team_id=row.get("team_id") or "",
        )

    def retake_stale(
        self, now: datetime, user_id: str | None = None, team_id: str | None = None
    ) -> list[Claim]:
        """Every claim left behind by a worker that stopped (only the member's when
        ``user_id`` is given), now this worker's."""
        claims = []
        stale = self.store.stale_claims(to_iso(now - STALE_CLAIM), user_id, team_id)
        for row in stale:
            # claim() re-checks inside its transaction: another worker may have been first.
            claim = self.claim(
                row["id"],
                row["user_id"],
                row["local_date"],
                DigestPlan(row["user_id"]),
                now,
                team_id=row["team_id"],
            )
            if claim is not None:
                claims.append(claim)
        return claims

    def renew(self, claim: Claim, now: datetime, channel: str | None = None) -> bool:
        """Keep the claim fresh (and note where it is going) right before posting.

        False when it is no longer ours: then it must not be posted.
        """
        renewed = self.store.renew(claim.digest_id, self.worker, to_iso(now), channel)
        if renewed and channel:
            claim.channel = channel
        return renewed

    def release(self, claim: Claim, now: datetime) -> None:
        """Let the claim go at once, stale as if its worker had died, so the next run (a tick,
        ``digest send --now``) retakes it instead of waiting ``STALE_CLAIM``: for a post Slack
        refused because of the token, which an operator is about to replace. Retaking keeps it
        exactly-once as after a crash; a claim this worker made itself (not retaken) was
        certainly not posted, so it also forgets its channel and is posted without a lookup."""
        stale_at = to_iso(now - STALE_CLAIM - timedelta(seconds=1))
        self.store.release(claim.digest_id, self.worker, stale_at, keep_channel=claim.retaken)

    def record_sent(self, claim: Claim, channel: str, ts: str, now: datetime) -> None:
        """The digest is in Slack: mark it sent and its papers as sent, in one transaction."""
        self.store.record_sent(
            claim.digest_id,
            claim.user_id,
            claim.plan.paper_ids,
            channel,
            ts,
            to_iso(now),
            team_id=claim.team_id,
        )

    def record_sent_many(self, sent: list[tuple[Claim, str, str]], now: datetime) -> None:
        """``record_sent`` for many digests, each ``(claim, channel, ts)``, in one transaction."""
        self.store.record_sent_many(
            [
                {
                    "digest_id": claim.digest_id,
                    "team_id": claim.team_id,
                    "user_id": claim.user_id,
                    "paper_ids": claim.plan.paper_ids,
                    "channel": channel,
                    "ts": ts,
                }
                for claim, channel, ts in sent
            ],
            to_iso(now),
        )

    def record_failed(self, claim: Claim, error: str, now: datetime) -> None:
        """Slack refused it for good (or it is too late): its papers stay unsent."""
        self.store.record_failed(claim.digest_id, error, to_iso(now))

    def expired(self, claim: Claim, now: datetime, grace: timedelta) -> bool:
        """True when a retaken digest is older than the grace period: too late to post."""
        first = from_iso(claim.first_claimed_at)
        return first is not None and now - first > grace
