"""Installing Paperboy into many workspaces: Bolt's OAuth v2 flow on the shared state.

With ``SLACK_CLIENT_ID`` and ``SLACK_CLIENT_SECRET`` set (``Settings.multi_workspace``),
``GET /slack/install`` shows an "Add to Slack" page whose link carries a one-use ``state``
(also set as a cookie, so the browser that started is the one that finishes), and Slack
sends the installer back to ``GET /slack/oauth_redirect`` with a code, which Bolt exchanges
(``oauth.v2.access``) for the workspace's bot token. Installations and states are kept by
slack_sdk's own SQLAlchemy stores in the state database (revision ``s020_workspaces``), so
every process, on any host, serves every workspace. Bolt's authorize then gives each request
its workspace's token; :class:`WorkspaceTokens` does the same for the digest's poster.
"""

from __future__ import annotations

import html
import logging
import sqlite3
from datetime import UTC, datetime

from slack_bolt.authorization.authorize import InstallationStoreAuthorize
from slack_bolt.error import BoltError
from slack_bolt.oauth import OAuthFlow
from slack_bolt.oauth.callback_options import CallbackOptions, FailureArgs, SuccessArgs
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_bolt.request import BoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError, SlackTokenRotationError
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.token_rotation import TokenRotator
from sqlalchemy import distinct, select
from sqlalchemy.exc import SQLAlchemyError

from bot.settings import Settings
from bot.state import StateError, StateStore

from .client import make_client

log = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
#: How long an install link (its ``state``) stays good: ten minutes, as Slack's codes.
STATE_SECONDS = 600
DATABASE_ERRORS = (SQLAlchemyError, StateError, sqlite3.Error)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Installations(SQLAlchemyInstallationStore):
    """slack_sdk's installation store on the shared state; saving an installation also
    notes the workspace installed (``StateStore.workspace_installed``: a workspace that had
    uninstalled Paperboy gets its members' digests again). A database that fails the save is
    a ``BoltError``, which Bolt shows as the failure page (``storage_error``)."""

    def __init__(self, state: StateStore, client_id: str):
        super().__init__(client_id=client_id, engine=state.engine)
        self.state = state

    def save(self, installation: Installation) -> None:
        try:
            super().save(installation)
            if installation.team_id:
                self.state.workspace_installed(
                    installation.team_id, installation.team_name, now_iso()
                )
        except DATABASE_ERRORS as error:
            log.error("could not save the installation of %s: %s", installation.team_id, error)
            raise BoltError("the installation could not be saved") from None

    def forget(self, team_id: str, enterprise_id: str | None = None) -> None:
        """Delete the workspace's installation and bot tokens (``app_uninstalled``,
        ``tokens_revoked``); other workspaces are untouched."""
        self.delete_all(enterprise_id=enterprise_id, team_id=team_id)

    def teams(self) -> list[str]:
        """The workspaces with a bot token for this app."""
        query = select(distinct(self.bots.c.team_id)).where(
            self.bots.c.client_id == self.client_id, self.bots.c.team_id.is_not(None)
        )
        with self.engine.connect() as conn:
            return sorted(conn.execute(query).scalars())


class InstallFlow(OAuthFlow):
    """Bolt's OAuth flow with Paperboy's own install page."""

    def build_install_page_html(self, url: str, request: BoltRequest) -> str:
        return page(
            "Add Paperboy to Slack",
            "Paperboy finds research papers in your team's corpus, follows the topics you "
            "subscribe to and sends a daily digest. Install it into your workspace:",
            f'<a class="button" href="{html.escape(url)}">Add to Slack</a>',
        )


def page(title: str, message: str, extra: str = "") -> str:
    """A small self-contained HTML page (the install, success and failure pages)."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<style>body{font-family:system-ui,sans-serif;max-width:36em;margin:4em auto;"
        "padding:0 1em;color:#1d1c1d}a.button{display:inline-block;padding:.7em 1.4em;"
        "background:#4a154b;color:#fff;border-radius:6px;text-decoration:none;"
        "font-weight:600}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>{html.escape(message)}</p>{extra}</body></html>"
    )


def html_response(status: int, body: str) -> BoltResponse:
    return BoltResponse(
        status=status, body=body, headers={"Content-Type": "text/html; charset=utf-8"}
    )


def installed_page(args: SuccessArgs) -> BoltResponse:
    """After a successful install: where to go next."""
    installation = args.installation
    team = installation.team_name or installation.team_id or "your workspace"
    log.info("installed in %s (%s)", installation.team_id, installation.team_name)
    link = f"slack://app?team={installation.team_id}&id={installation.app_id}"
    return html_response(
        200,
        page(
            "Paperboy is installed",
            f"Paperboy is now in {team}. In Slack, type /papers help, or open Paperboy's "
            "Home tab to subscribe to topics.",
            f'<a class="button" href="{html.escape(link)}">Open Slack</a>',
        ),
    )


#: The failure page's sentence for each of Bolt's reasons; anything else gets the last one.
FAILURES = {
    "access_denied": "The installation was cancelled in Slack, so nothing was installed.",
    "invalid_browser": "This install link was started in another browser or has expired.",
    "invalid_state": "This install link has expired or was already used.",
    "missing_code": "Slack's answer carried no authorization code.",
    "invalid_code": "Slack did not accept this installation (its code expired or was used).",
    "storage_error": "Paperboy could not save the installation (its database did not answer).",
}
OTHER_FAILURE = "The installation did not complete."


def failed_page(args: FailureArgs) -> BoltResponse:
    """A failed install: one sentence of why, and a link to start again (no traceback)."""
    log.warning("an installation failed: %s", args.reason)
    sentence = FAILURES.get(args.reason, OTHER_FAILURE)
    status = args.suggested_status_code if args.suggested_status_code >= 400 else 200
    again = f'<a class="button" href="{INSTALL_PATH}">Start again</a>'
    return html_response(
        status, page("Paperboy was not installed", f"{sentence} Please start again.", again)
    )


def install_flow(settings: Settings, state: StateStore, client: WebClient) -> InstallFlow:
    """Bolt's OAuth flow for ``settings`` (``multi_workspace``) on the shared state;
    ``client`` (at ``SLACK_API_URL``) exchanges the codes."""
    installations = Installations(state, settings.slack_client_id or "")
    return InstallFlow(
        client=client,
        settings=OAuthSettings(
            client_id=settings.slack_client_id,
            client_secret=settings.slack_client_secret,
            scopes=list(settings.slack_scopes),
            redirect_uri=settings.slack_redirect_uri,
            install_path=INSTALL_PATH,
            redirect_uri_path=REDIRECT_PATH,
            installation_store=installations,
            installation_store_bot_only=True,
            state_store=state.oauth_state_store(STATE_SECONDS),
            state_expiration_seconds=STATE_SECONDS,
            callback_options=CallbackOptions(success=installed_page, failure=failed_page),
            token_rotation_expiration_minutes=settings.slack_token_refresh_minutes,
        ),
    )


def workspace_authorize(flow: OAuthFlow, client: WebClient) -> InstallationStoreAuthorize:
    """Bolt's authorize for the flow's installations (each request gets its workspace's
    bot token), refreshing rotating tokens through ``client`` (Bolt's own would call
    slack.com whatever ``SLACK_API_URL`` says)."""
    settings = flow.settings
    return InstallationStoreAuthorize(
        logger=flow.logger,
        client_id=settings.client_id,
        client_secret=settings.client_secret,
        token_rotation_expiration_minutes=settings.token_rotation_expiration_minutes,
        installation_store=settings.installation_store,
        bot_only=True,
        client=client,
    )


class WorkspaceTokens:
    """Each workspace's bot token for the digest's poster, from the installation store;
    a rotating token is refreshed ``slack_token_refresh_minutes`` before it expires."""

    def __init__(self, settings: Settings, state: StateStore):
        self.settings = settings
        self.state = state
        self.installations = Installations(state, settings.slack_client_id or "")
        self.rotator = TokenRotator(
            client_id=settings.slack_client_id or "",
            client_secret=settings.slack_client_secret or "",
            client=make_client(settings, token=None),
        )
        self._clients: dict[str, WebClient] = {}

    def teams(self) -> list[str]:
        return self.installations.teams()

    def client_for(self, team_id: str) -> WebClient | None:
        """A client with the workspace's bot token, or None when it has no installation."""
        bot = self.installations.find_bot(enterprise_id=None, team_id=team_id)
        if bot is None or not bot.bot_token:
            return None
        bot = self._fresh(bot)
        client = self._clients.get(bot.bot_token)
        if client is None:
            client = self._clients[bot.bot_token] = make_client(self.settings, token=bot.bot_token)
        return client

    def _fresh(self, bot: Bot) -> Bot:
        """The bot with a token that is not about to expire (token rotation)."""
        if not bot.bot_refresh_token:
            return bot
        try:
            refreshed = self.rotator.perform_bot_token_rotation(
                bot=bot, minutes_before_expiration=self.settings.slack_token_refresh_minutes
            )
        except (SlackTokenRotationError, SlackApiError, SlackClientError, OSError) as error:
            log.warning("could not refresh the bot token of %s: %s", bot.team_id, error)
            return bot
        if refreshed is None:
            return bot
        self.installations.save_bot(refreshed)
        return refreshed
