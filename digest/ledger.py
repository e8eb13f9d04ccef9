"""The exactly-once record of digests: claimed before posting, recorded after (no Slack here).

A scheduled digest's id is ``"<user>:<local date>"`` (``U1:2024-03-04``): one a day, so a
second scheduler or a restart finds it taken. An on-demand one (``/papers digest now``) gets a
fresh id each time it has something to send: the local minute and a counter
(``U1:2024-03-04T08:30#1``, then ``#2`` ...), given out by ``claim_now`` inside the claim's
transaction; asking with nothing to send writes nothing. Its row in ``digests`` goes::

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

Two schedulers running at once: every decision is one ``BEGIN IMMEDIATE`` transaction (SQLite
lets one writer in at a time), the unique id makes one insert win, and a claim that is still
fresh is never retaken. A member has at most one digest in flight, so a scheduled digest and
``/papers digest now`` cannot send the same papers side by side.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlite_utils import Database

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


@contextmanager
def _write(db: Database) -> Iterator[None]:
    """One write transaction that takes SQLite's write lock at once (no upgrade races)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if db.conn.in_transaction:
            db.execute("ROLLBACK")
        raise
    else:
        db.execute("COMMIT")


class Ledger:
    def __init__(self, db: Database, worker: str | None = None):
        self.db = db
        self.worker = worker or worker_name()

    @staticmethod
    def scheduled_id(user_id: str, local_date: str) -> str:
        return f"{user_id}:{local_date}"

    def get(self, digest_id: str) -> dict[str, Any] | None:
        cursor = self.db.execute("select * from digests where id = ?", [digest_id])
        row = cursor.fetchone()
        return dict(zip([d[0] for d in cursor.description], row, strict=True)) if row else None

    def existing(self, digest_ids: Iterable[str]) -> set[str]:
        """Which of these digests already have a row, whatever its status."""
        ids = list(digest_ids)
        found: set[str] = set()
        for start in range(0, len(ids), 5000):
            batch = ids[start : start + 5000]
            rows = self.db.execute(
                f"select id from digests where id in ({','.join('?' * len(batch))})", batch
            )
            found.update(r[0] for r in rows)
        return found

    def claim(
        self, digest_id: str, user_id: str, local_date: str, plan: DigestPlan, now: datetime
    ) -> Claim | None:
        """Take the digest for this worker, or None when it is not ours to post.

        None when another worker holds it (or the member has another digest in flight), when
        it was already handled, or when, after leaving out papers sent since the plan was
        made, nothing remains (the row is then recorded as ``skipped``, so the scheduler does
        not ask again that day). A dead worker's stale claim is retaken (``Claim.retaken``),
        with the content it had.
        """
        stale_before = to_iso(now - STALE_CLAIM)
        with _write(self.db):
            row = self.db.execute(
                "select status, claimed_at, content, channel from digests where id = ?",
                [digest_id],
            ).fetchone()
            if row is not None:
                status, claimed_at, content, channel = row
                if status == "claimed" and claimed_at < stale_before:
                    return self._retake(digest_id, user_id, local_date, content, channel, now)
                return None
            if self._in_flight(user_id, stale_before):
                return None
            plan = self._unsent(user_id, plan)
            self._insert(digest_id, user_id, local_date, plan, now)
        if not plan.size:
            return None
        return Claim(digest_id, user_id, local_date, plan, to_iso(now))

    def claim_now(
        self, user_id: str, local_minute: str, plan: DigestPlan, now: datetime
    ) -> tuple[Claim | None, str]:
        """Claim an on-demand digest (``/papers digest now``) under a fresh id.

        Returns ``(claim, "claimed")``, or ``(None, "busy")`` when another digest of the member
        is in flight, or ``(None, "skipped")`` when none of the plan's papers is unsent. Only a
        claimed digest writes a row: asking when there is nothing to send uses up no id, and
        every digest that is sent has its own (the minute and a counter, see the module doc),
        however many come in one minute. The claim then goes through the same post, record and
        retake path as a scheduled one.
        """
        stale_before = to_iso(now - STALE_CLAIM)
        with _write(self.db):
            if self._in_flight(user_id, stale_before):
                return None, "busy"
            plan = self._unsent(user_id, plan)
            if not plan.size:
                return None, "skipped"
            # The write lock is held, so counting then inserting cannot race another worker.
            taken = self.db.execute(
                "select count(*) from digests where user_id = ? and local_date like ?",
                [user_id, f"{local_minute}#%"],
            ).fetchone()[0]
            local_date = f"{local_minute}#{taken + 1}"
            digest_id = self.scheduled_id(user_id, local_date)
            self._insert(digest_id, user_id, local_date, plan, now)
        return Claim(digest_id, user_id, local_date, plan, to_iso(now)), "claimed"

    def _in_flight(self, user_id: str, stale_before: str) -> bool:
        """Whether the member has a digest claimed by a live worker: one at a time, so a
        scheduled digest and ``digest now`` never send the same papers side by side."""
        return (
            self.db.execute(
                "select 1 from digests where user_id = ? and status = 'claimed' "
                "and claimed_at >= ? limit 1",
                [user_id, stale_before],
            ).fetchone()
            is not None
        )

    def _unsent(self, user_id: str, plan: DigestPlan) -> DigestPlan:
        """The plan without the papers sent to the member since it was made."""
        ids = plan.paper_ids
        if not ids:
            return plan
        already = {
            r[0]
            for r in self.db.execute(
                "select paper_id from sent_papers where user_id = ? and paper_id in "
                f"({','.join('?' * len(ids))})",
                [user_id, *ids],
            )
        }
        return plan.keeping(i for i in ids if i not in already)

    def _insert(
        self, digest_id: str, user_id: str, local_date: str, plan: DigestPlan, now: datetime
    ) -> None:
        """The digest's row: ``claimed`` when it has papers, else ``skipped`` (finished)."""
        stamp = to_iso(now)
        self.db.execute(
            "insert into digests (id, user_id, local_date, status, claimed_by, claimed_at, "
            "paper_ids, content, finished_at) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                digest_id,
                user_id,
                local_date,
                "claimed" if plan.size else "skipped",
                self.worker,
                stamp,
                json.dumps(plan.paper_ids),
                json.dumps({"first_claimed_at": stamp, "plan": json.loads(plan.to_json())}),
                None if plan.size else stamp,
            ],
        )

    def _retake(
        self,
        digest_id: str,
        user_id: str,
        local_date: str,
        content: str | None,
        channel: str | None,
        now: datetime,
    ) -> Claim:
        self.db.execute(
            "update digests set claimed_by = ?, claimed_at = ? where id = ?",
            [self.worker, to_iso(now), digest_id],
        )
        data = json.loads(content or "{}")
        plan = DigestPlan.from_json(json.dumps(data.get("plan") or {"user_id": user_id}))
        first = data.get("first_claimed_at") or to_iso(now)
        return Claim(digest_id, user_id, local_date, plan, first, channel, retaken=True)

    def retake_stale(self, now: datetime, user_id: str | None = None) -> list[Claim]:
        """Every claim left behind by a worker that stopped (only ``user_id``'s when given),
        now this worker's."""
        sql = "select id, user_id, local_date from digests where status = 'claimed' and claimed_at < ?"
        params = [to_iso(now - STALE_CLAIM)]
        if user_id is not None:
            sql += " and user_id = ?"
            params.append(user_id)
        stale = self.db.execute(sql + " order by claimed_at", params).fetchall()
        claims = []
        for digest_id, user_id, local_date in stale:
            # claim() re-checks inside its transaction: another worker may have been first.
            claim = self.claim(digest_id, user_id, local_date, DigestPlan(user_id), now)
            if claim is not None:
                claims.append(claim)
        return claims

    def renew(self, claim: Claim, now: datetime, channel: str | None = None) -> bool:
        """Keep the claim fresh (and note where it is going) right before posting.

        False when it is no longer ours: then it must not be posted.
        """
        cursor = self.db.execute(
            "update digests set claimed_at = ?, channel = coalesce(?, channel) "
            "where id = ? and status = 'claimed' and claimed_by = ?",
            [to_iso(now), channel, claim.digest_id, self.worker],
        )
        if cursor.rowcount == 1 and channel:
            claim.channel = channel
        return cursor.rowcount == 1

    def release(self, claim: Claim, now: datetime) -> None:
        """Let the claim go at once, stale as if its worker had died, so the next run (a tick,
        ``digest send --now``) retakes it instead of waiting ``STALE_CLAIM``: for a post Slack
        refused because of the token, which an operator is about to replace. Retaking keeps it
        exactly-once as after a crash; a claim this worker made itself (not retaken) was
        certainly not posted, so it also forgets its channel and is posted without a lookup."""
        self.db.execute(
            "update digests set claimed_at = ?, channel = case when ? then channel end "
            "where id = ? and status = 'claimed' and claimed_by = ?",
            [
                to_iso(now - STALE_CLAIM - timedelta(seconds=1)),
                int(claim.retaken),
                claim.digest_id,
                self.worker,
            ],
        )
        if self.db.conn.in_transaction:
            self.db.conn.commit()

    def record_sent(self, claim: Claim, channel: str, ts: str, now: datetime) -> None:
        """The digest is in Slack: mark it sent and its papers as sent, in one transaction."""
        stamp = to_iso(now)
        with _write(self.db):
            self.db.execute(
                "update digests set status = 'sent', channel = ?, ts = ?, finished_at = ?, "
                "error = null where id = ? and status = 'claimed'",
                [channel, ts, stamp, claim.digest_id],
            )
            self.db.conn.executemany(
                "insert or ignore into sent_papers (user_id, paper_id, digest_id, sent_at) "
                "values (?, ?, ?, ?)",
                [(claim.user_id, p, claim.digest_id, stamp) for p in claim.plan.paper_ids],
            )

    def record_failed(self, claim: Claim, error: str, now: datetime) -> None:
        """Slack refused it for good (or it is too late): its papers stay unsent."""
        self.db.execute(
            "update digests set status = 'failed', error = ?, finished_at = ? "
            "where id = ? and status = 'claimed'",
            [error, to_iso(now), claim.digest_id],
        )

    def expired(self, claim: Claim, now: datetime, grace: timedelta) -> bool:
        """True when a retaken digest is older than the grace period: too late to post."""
        first = from_iso(claim.first_claimed_at)
        return first is not None and now - first > grace
