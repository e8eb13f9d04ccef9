"""The digest's poster on Slack: ``digest.poster.Poster`` over the Web API.

``digest.delivery.Dispatcher`` decides whose digest goes when, and calls this to open direct
messages, read time zones, post (the message is ``bot.slack.render.digest``) and find a
digest already posted before a crash. Slack's errors are turned into the digest's two
kinds: ``TokenRefused`` (the bot token is refused: nothing more can be sent) and
``PostError`` with what the dispatcher needs to know about the failure.

Slack scopes this needs: ``chat:write``, ``im:write`` (open the DM), ``users:read`` (time zone),
``channels:join`` (be in a public channel a digest goes to, see :meth:`SlackPoster.join`) and
``im:history`` / ``channels:history`` / ``groups:history`` (find a digest already posted
before a crash).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from datetime import datetime

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.engine.search import Engine
from bot.logs import quiet_slack_sdk
from bot.settings import Settings
from digest.plan import DigestPlan
from digest.poster import PostError, TokenRefused

from .client import TOKEN_REFUSED, bot_token, error_code, make_client
from .render.digest import DIGEST_EVENT, digest_message

log = logging.getLogger(__name__)

HISTORY_PAGES = 5
#: Messages ``fit`` keeps for ``post_digest`` (a digest batch claims 100 at a time).
FITTED_KEPT = 1000
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
#: A remembered DM channel that Slack no longer knows: forget it and open the DM again.
DM_GONE = frozenset({"channel_not_found", "is_archived"})
#: Slack's own trouble, worth asking again soon.
SLACK_TROUBLE = frozenset({"internal_error", "fatal_error", "ratelimited"})


def post_error(error: Exception) -> Exception:
    """The digest's exception for a Slack failure: ``TokenRefused`` or ``PostError``."""
    if isinstance(error, SlackApiError):
        response = error.response
        code = error_code(error) or "slack_error"
        if code in TOKEN_REFUSED:  # the run stops at once: nothing more can be sent
            return TokenRefused(code)
        status = getattr(response, "status_code", 200) or 200
        return PostError(
            code,
            cause=f"HTTP {status}" if status >= 500 else code,
            permanent=code in PERMANENT_ERRORS,
            gone=code in DM_GONE,
            transient=status >= 500 or code in SLACK_TROUBLE,
        )
    cause = str(getattr(error, "reason", "") or error) or type(error).__name__
    return PostError(type(error).__name__, cause=cause, unreachable=True)


class SlackPoster:
    """Posts digests through ``client`` (``bot.slack.client.make_client``: 429s waited out,
    dropped connections retried); ``engine`` gives the papers the message shows."""

    def __init__(self, client: WebClient, engine: Engine):
        self.client = client
        self.engine = engine
        self.where = client.base_url
        self._joined: set[str] = set()  # channels joined by this process (see join)
        # Messages rendered by fit(), reused by post_digest() for the same plan (see fit).
        self._fitted: OrderedDict[tuple[str, str, str | None], dict] = OrderedDict()
        self._fitted_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, engine: Engine) -> SlackPoster:
        """The poster every process uses: the bot token (checked, see ``bot_token``) at
        ``SLACK_API_URL``."""
        return cls(make_client(settings, token=bot_token(settings)), engine)

    def check_token(self) -> None:
        """``auth.test`` once (slack_sdk's per-attempt log lines quieted: the clock says one
        warning per attempt, then one sentence)."""
        try:
            with quiet_slack_sdk():
                self.client.auth_test()
        except (SlackApiError, SlackClientError, OSError) as error:
            raise post_error(error) from None

    def member_time_zone(self, user_id: str) -> str | None:
        try:
            return (self.client.users_info(user=user_id).get("user") or {}).get("tz")
        except (SlackApiError, SlackClientError, OSError) as error:
            raise post_error(error) from error

    def open_dm(self, user_id: str) -> str:
        """``conversations.open`` (Tier 3, about 50 a minute: the dispatcher remembers the
        id, so this is once per member, not once per digest)."""
        try:
            response = self.client.conversations_open(users=user_id)
        except (SlackApiError, SlackClientError, OSError) as error:
            raise post_error(error) from error
        return str(response["channel"]["id"])

    @staticmethod
    def is_direct(channel: str) -> bool:
        """Slack's direct-message ids start with D."""
        return channel.startswith("D")

    def join(self, channel: str) -> None:
        """Be a member of a channel before posting a digest there.

        ``chat:write.public`` lets the bot post into a public channel it is not in, but
        ``conversations.history`` then answers ``not_in_channel``, so after a crash between
        the post and the record the digest could not be found and would be given up (its
        papers sent again). Joining first (``channels:join``; once per channel per process,
        a no-op when already in) keeps the exactly-once guarantee for channel digests. A
        private channel cannot be joined: the bot must be invited, and then history works;
        without the invitation the post itself fails (``not_in_channel``). An app installed
        before ``channels:join`` was added still posts; such a digest is never posted twice
        after a crash, but may be given up (see ``Dispatcher._find_posted``).
        """
        if channel in self._joined:
            return
        try:
            self.client.conversations_join(channel=channel)
        except SlackApiError as error:
            failure = post_error(error)
            code = getattr(failure, "code", "")
            if code == "missing_scope":
                log.warning(
                    "cannot join %s (the app lacks channels:join): after a crash its digest "
                    "cannot be looked up; reinstall the app from manifest.yml",
                    channel,
                )
            elif isinstance(failure, TokenRefused) or code != (
                "method_not_supported_for_channel_type"  # private: invited or not
            ):
                raise failure from error
        except (SlackClientError, OSError) as error:
            raise post_error(error) from error
        self._joined.add(channel)

    def fit(self, plan: DigestPlan, local_date: str, *, owner: str | None) -> DigestPlan:
        """The plan cut to Slack's 50 blocks (the same in a DM and a channel).

        Rendering is most of a digest's cost (snippets, Block Kit), so the message made here
        is kept (the last ``FITTED_KEPT``) and posted as it is when ``post_digest`` gets the
        plan cut to it (which renders the same message), only its metadata naming the digest."""
        message, kept = digest_message(self.engine, plan, local_date, digest_id="fit", owner=owner)
        with self._fitted_lock:
            self._fitted[(kept.to_json(), local_date, owner)] = message
            while len(self._fitted) > FITTED_KEPT:
                self._fitted.popitem(last=False)
        return kept

    def _rendered(
        self, plan: DigestPlan, local_date: str, digest_id: str, owner: str | None
    ) -> dict:
        with self._fitted_lock:
            fitted = self._fitted.pop((plan.to_json(), local_date, owner), None)
        if fitted is None or "metadata" not in fitted:
            message, _ = digest_message(
                self.engine, plan, local_date, digest_id=digest_id, owner=owner
            )
            return message
        metadata = fitted["metadata"]
        payload = {**metadata["event_payload"], "digest_id": digest_id}
        return {**fitted, "metadata": {**metadata, "event_payload": payload}}

    def post_digest(
        self, channel: str, plan: DigestPlan, local_date: str, *, digest_id: str, owner: str | None
    ) -> tuple[str, str]:
        message = self._rendered(plan, local_date, digest_id, owner)
        try:
            response = self.client.chat_postMessage(
                channel=channel, unfurl_links=False, unfurl_media=False, **message
            )
        except (SlackApiError, SlackClientError, OSError) as error:
            raise post_error(error) from error
        return str(response.get("channel") or channel), str(response["ts"])

    def find_digest(self, channel: str, digest_id: str, since: datetime) -> str | None:
        """Looked up by the message metadata (``DIGEST_EVENT``), newest pages first."""
        oldest = str(int(since.timestamp()))
        cursor = None
        try:
            for _ in range(HISTORY_PAGES):
                response = self.client.conversations_history(
                    channel=channel,
                    oldest=oldest,
                    include_all_metadata=True,
                    limit=200,
                    cursor=cursor,
                )
                for message in response.get("messages") or []:
                    metadata = message.get("metadata") or {}
                    payload = metadata.get("event_payload") or {}
                    if (
                        metadata.get("event_type") == DIGEST_EVENT
                        and payload.get("digest_id") == digest_id
                    ):
                        return str(message["ts"])
                cursor = (response.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    return None
        except (SlackApiError, SlackClientError, OSError) as error:
            raise post_error(error) from error
        return None
