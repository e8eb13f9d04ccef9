"""What the digest needs from a chat platform, and how the platform says no.

The digest package decides what to send and when; a ``Poster`` it is given does the sending.
Everything here is plain data (ids, a ``DigestPlan``, strings), so ``digest`` imports no
Slack code: ``bot.slack.poster.SlackPoster`` is the implementation (Block Kit, Web API).

A poster raises only the two exceptions below. ``TokenRefused`` stops a whole run (no member
is tried after it); ``PostError`` is one call failing, and its flags tell the dispatcher
what to do about it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from .plan import DigestPlan


class TokenRefused(Exception):
    """The platform refused the bot token; ``code`` is its error. Never caught per member."""

    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


class PostError(Exception):
    """One call failed. ``code``: the platform's name for it (logged, kept on the outcome);
    ``cause``: the same for an operator sentence.

    ``permanent``: retrying will not help this member (record the digest failed);
    ``gone``: the conversation no longer exists (a remembered direct message to open again);
    ``unreachable``: the platform did not answer at all (a dropped connection);
    ``transient``: it answered, but with its own trouble (5xx, rate limit): try again soon.
    """

    def __init__(
        self,
        code: str,
        *,
        cause: str | None = None,
        permanent: bool = False,
        gone: bool = False,
        unreachable: bool = False,
        transient: bool = False,
    ):
        super().__init__(code)
        self.code = code
        self.cause = cause or code
        self.permanent = permanent
        self.gone = gone
        self.unreachable = unreachable
        self.transient = transient or unreachable


class Poster(Protocol):
    """Posts digests for the dispatcher; see ``bot.slack.poster.SlackPoster``."""

    #: Where the platform is (for an operator sentence: "Could not reach Slack at ...").
    where: str

    def check_token(self) -> None:
        """One check that the bot token works (no retry)."""

    # ``team``: the member's workspace (whose token to use when there are many), as the
    # dispatcher knows it; None or "" when the deployment has one.

    def member_time_zone(self, user_id: str, *, team: str | None = None) -> str | None:
        """The member's IANA time zone from their profile, None when it has none."""

    def open_dm(self, user_id: str, *, team: str | None = None) -> str:
        """The id of the member's direct-message conversation with the bot (opened if new)."""

    def is_direct(self, channel: str) -> bool:
        """Whether ``channel`` is a direct message (else a channel others read)."""

    def join(self, channel: str, *, team: str | None = None) -> None:
        """Be in ``channel`` before posting there, so a posted digest can be found again."""

    def prepare(self, plans: Iterable[DigestPlan]) -> None:
        """Many digests are about to be fitted and posted (a batch): read what they show at
        once."""

    def fit(self, plan: DigestPlan, local_date: str, *, owner: str | None) -> DigestPlan:
        """``plan`` cut to the papers one message holds (the rest waits for the next one)."""

    def post_digest(
        self,
        channel: str,
        plan: DigestPlan,
        local_date: str,
        *,
        digest_id: str,
        owner: str | None,
        team: str | None = None,
    ) -> tuple[str, str]:
        """Post the digest, ``digest_id`` in its metadata; (channel, message id).
        ``owner``: the member whose digest it is when it goes to a channel, not their DM."""

    def find_digest(
        self, channel: str, digest_id: str, since: datetime, *, team: str | None = None
    ) -> str | None:
        """The message id of the digest ``digest_id`` posted in ``channel`` after ``since``."""
