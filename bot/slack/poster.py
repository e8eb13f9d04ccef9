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

Installed into many workspaces (OAuth), each call goes with the bot token of the workspace
of the member it is for (``bot.slack.oauth.WorkspaceTokens``): the member's team, or the
team of the conversation their digest goes to. There a refused token stops only its own
workspace: the workspace is noted as uninstalled (one log line; its digests stop until it
installs again) and its members' calls fail for good, while the others' go on.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.engine.search import Engine
from bot.logs import quiet_slack_sdk
from bot.settings import Settings
from bot.state import state_for
from digest.plan import DigestPlan
from digest.poster import PostError, TokenRefused

from .client import TOKEN_REFUSED, bot_token, error_code, make_client
from .oauth import WorkspaceTokens
from .render.digest import DIGEST_EVENT, DigestRenderer

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


def _fitted_key(plan: DigestPlan, local_date: str, owner: str | None) -> tuple[Any, ...]:
    """Where ``fit`` keeps a plan's message: its member and papers (the plan itself is
    compared when it is taken)."""
    return (plan.user_id, tuple(plan.paper_ids), local_date, owner)


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
    dropped connections retried); ``engine`` gives the papers the message shows.
    ``workspaces``: installed through OAuth, each workspace's token instead of ``client``'s
    (see the module doc)."""

    def __init__(
        self, client: WebClient, engine: Engine, *, workspaces: WorkspaceTokens | None = None
    ):
        self.client = client
        self.engine = engine
        self.where = client.base_url
        self.workspaces = workspaces
        self._joined: set[tuple[str | None, str]] = set()  # (team, channel) joined (see join)
        self._dm_teams: dict[str, str] = {}  # DMs opened by this process: their workspace
        self._lock = threading.Lock()
        # Digests share most of their blocks: made once, reused (see DigestRenderer).
        self.renderer = DigestRenderer(engine)
        # Messages rendered by fit(), reused by post_digest() for the same plan (see fit).
        self._fitted: OrderedDict[tuple[Any, ...], tuple[DigestPlan, dict]] = OrderedDict()
        self._fitted_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, engine: Engine) -> SlackPoster:
        """The poster every process uses: the bot token (checked, see ``bot_token``) at
        ``SLACK_API_URL``, or each workspace's installed one (``multi_workspace``)."""
        if settings.multi_workspace:
            workspaces = WorkspaceTokens(settings, state_for(engine.db_path))
            return cls(make_client(settings, token=None), engine, workspaces=workspaces)
        return cls(make_client(settings, token=bot_token(settings) or None), engine)

    # -- which workspace's token -------------------------------------------------------------

    def _team(self, *, user: str | None = None, channel: str | None = None) -> str | None:
        if channel is not None:
            with self._lock:
                if channel in self._dm_teams:
                    return self._dm_teams[channel]
        return state_for(self.engine.db_path).team_of(user_id=user, channel=channel)

    def _client(
        self, *, user: str | None = None, channel: str | None = None, team: str | None = None
    ) -> tuple[WebClient, str | None]:
        """The client for the workspace ``team`` (the member's, as the dispatcher knows it),
        else of the member (or conversation), and that workspace; a workspace without an
        installation is a ``PostError`` (``not_installed``) for good."""
        if self.workspaces is None:
            return self.client, None
        team = team or self._team(user=user, channel=channel)
        client = self.workspaces.client_for(team) if team else None
        if client is None:
            if team:
                self._gone(team, "not_installed")
            raise PostError("not_installed", permanent=True)
        return client, team

    def _failure(self, error: Exception, team: str | None) -> Exception:
        """``post_error``, except that with many workspaces a refused token is that
        workspace's trouble alone (see the module doc)."""
        failure = post_error(error)
        if team is not None and isinstance(failure, TokenRefused):
            self._gone(team, failure.code)
            return PostError(failure.code, permanent=True)
        return failure

    def _gone(self, team: str, why: str) -> None:
        """Note the workspace uninstalled, with one log line the first time."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        if state_for(self.engine.db_path).workspace_uninstalled(team, now):
            log.warning(
                "workspace %s: Slack refused its bot token (%s); its digests stop until "
                "Paperboy is installed there again",
                team,
                why,
            )

    # -- the Poster ----------------------------------------------------------------------------

    def check_token(self) -> None:
        """``auth.test`` once (slack_sdk's per-attempt log lines quieted: the clock says one
        warning per attempt, then one sentence). With many workspaces, each installed one's
        token: a refused one stops that workspace's digests, not the run."""
        if self.workspaces is not None:
            self._check_workspaces()
            return
        try:
            with quiet_slack_sdk():
                self.client.auth_test()
        except (SlackApiError, SlackClientError, OSError) as error:
            raise post_error(error) from None

    def _check_workspaces(self) -> None:
        assert self.workspaces is not None
        for team in self.workspaces.teams():
            client = self.workspaces.client_for(team)
            if client is None:
                continue
            try:
                with quiet_slack_sdk():
                    client.auth_test()
            except (SlackApiError, SlackClientError, OSError) as error:
                failure = self._failure(error, team)
                if isinstance(failure, PostError) and failure.unreachable:
                    raise failure from None

    def member_time_zone(self, user_id: str, *, team: str | None = None) -> str | None:
        client, team = self._client(user=user_id, team=team)
        try:
            return (client.users_info(user=user_id).get("user") or {}).get("tz")
        except (SlackApiError, SlackClientError, OSError) as error:
            raise self._failure(error, team) from error

    def open_dm(self, user_id: str, *, team: str | None = None) -> str:
        """``conversations.open`` (Tier 3, about 50 a minute: the dispatcher remembers the
        id, so this is once per member, not once per digest)."""
        client, team = self._client(user=user_id, team=team)
        try:
            response = client.conversations_open(users=user_id)
        except (SlackApiError, SlackClientError, OSError) as error:
            raise self._failure(error, team) from error
        channel = str(response["channel"]["id"])
        if team is not None:
            with self._lock:
                self._dm_teams[channel] = team
        return channel

    @staticmethod
    def is_direct(channel: str) -> bool:
        """Slack's direct-message ids start with D."""
        return channel.startswith("D")

    def join(self, channel: str, *, team: str | None = None) -> None:
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
        client, team = self._client(channel=channel, team=team)
        if (team, channel) in self._joined:
            return
        try:
            client.conversations_join(channel=channel)
        except SlackApiError as error:
            failure = self._failure(error, team)
            code = getattr(failure, "code", "")
            if code == "missing_scope":
                log.warning(
                    "cannot join %s (the app lacks channels:join): after a crash its digest "
                    "cannot be looked up; reinstall the app from its manifest (paperboy manifest)",
                    channel,
                )
            elif isinstance(failure, TokenRefused) or code != (
                "method_not_supported_for_channel_type"  # private: invited or not
            ):
                raise failure from error
        except (SlackClientError, OSError) as error:
            raise post_error(error) from error
        self._joined.add((team, channel))

    def prepare(self, plans: Iterable[DigestPlan]) -> None:
        """The batch's papers read in a few queries (``DigestRenderer.prepare``)."""
        self.renderer.prepare(plans)

    def fit(self, plan: DigestPlan, local_date: str, *, owner: str | None) -> DigestPlan:
        """The plan cut to Slack's 50 blocks (the same in a DM and a channel).

        Rendering is most of a digest's cost (snippets, Block Kit), so the message made here
        is kept (the last ``FITTED_KEPT``) and posted as it is when ``post_digest`` gets the
        plan cut to it (which renders the same message), only its metadata naming the digest."""
        message, kept = self.renderer.message(plan, local_date, digest_id="fit", owner=owner)
        with self._fitted_lock:
            self._fitted[_fitted_key(kept, local_date, owner)] = (kept, message)
            while len(self._fitted) > FITTED_KEPT:
                self._fitted.popitem(last=False)
        return kept

    def _rendered(
        self, plan: DigestPlan, local_date: str, digest_id: str, owner: str | None
    ) -> dict:
        with self._fitted_lock:
            kept, fitted = self._fitted.pop(_fitted_key(plan, local_date, owner), (None, None))
        # The same plan, field by field (cheaper than comparing their JSON, as this did).
        if fitted is None or kept != plan or "metadata" not in fitted:
            message, _ = self.renderer.message(plan, local_date, digest_id=digest_id, owner=owner)
            return message
        metadata = fitted["metadata"]
        payload = {**metadata["event_payload"], "digest_id": digest_id}
        return {**fitted, "metadata": {**metadata, "event_payload": payload}}

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
        message = self._rendered(plan, local_date, digest_id, owner)
        client, team = self._client(channel=channel, team=team)
        try:
            response = client.chat_postMessage(
                channel=channel, unfurl_links=False, unfurl_media=False, **message
            )
        except (SlackApiError, SlackClientError, OSError) as error:
            raise self._failure(error, team) from error
        return str(response.get("channel") or channel), str(response["ts"])

    def find_digest(
        self, channel: str, digest_id: str, since: datetime, *, team: str | None = None
    ) -> str | None:
        """Looked up by the message metadata (``DIGEST_EVENT``), newest pages first."""
        oldest = str(int(since.timestamp()))
        cursor = None
        client, team = self._client(channel=channel, team=team)
        try:
            for _ in range(HISTORY_PAGES):
                response = client.conversations_history(
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
            raise self._failure(error, team) from error
        return None
