"""The one Web API client every part of Paperboy uses (the app, the digest poster, the CLI).

slack_sdk's own retry handlers, so a busy workspace delays a message instead of losing it:
``RateLimitErrorRetryHandler`` waits out HTTP 429 for as long as Slack's Retry-After says,
``ConnectionErrorRetryHandler`` retries a dropped connection. Server errors (5xx) are not
retried here: a ``chat.postMessage`` that failed with a 500 may have been posted, and the
digest's exactly-once path (claim, look it up, then post) decides about those. Only the
start-up ``auth.test`` retries them (``bot.slack.server.check_slack_token``).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.settings import Settings, SettingsError

RATE_LIMIT_RETRIES = 3  # each waits Slack's Retry-After first
CONNECTION_RETRIES = 2
#: Slack's errors (from any method) that mean the token itself is refused: nothing more can be
#: done with it until an operator replaces it. ``account_inactive`` with a bot token means the
#: workspace or the bot's user was deleted.
TOKEN_REFUSED = frozenset(
    {"invalid_auth", "token_revoked", "not_authed", "account_inactive", "token_expired"}
)
LOCAL_TOKEN = "xoxb-local-playground"  # the local Slack stand-in accepts any bot-shaped token


def make_client(settings: Settings, *, token: str | None = None) -> WebClient:
    """A client for the bot token (or ``token``) at ``SLACK_API_URL``, retrying 429s and
    dropped connections (see the module doc)."""
    return WebClient(
        token=token or settings.slack_bot_token,
        base_url=settings.slack_api_url,
        retry_handlers=retry_handlers(),
    )


def retry_handlers() -> list:
    """The retries every Paperboy client has (also given to Bolt's own client)."""
    return [
        ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
        RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
    ]


def error_code(error: SlackApiError) -> str | None:
    """Slack's name for why it refused a call (``not_in_channel``, ``ratelimited`` ...), or
    None when the answer carried none (an HTTP error page, say)."""
    response = error.response
    data = getattr(response, "data", None) if response is not None else None
    code = data.get("error") if isinstance(data, dict) else None
    return str(code) if code else None


def is_local_api(api_url: str) -> bool:
    """True for the local stand-in (playground, tests): no real token to verify there."""
    return urlsplit(api_url).hostname in ("127.0.0.1", "localhost", "::1")


def bot_token(settings: Settings) -> str | None:
    """The bot token from settings (a stand-in token when Slack is the local fake); a
    missing or malformed one is a ``SettingsError``. None when Paperboy is installed into
    many workspaces (``Settings.multi_workspace``): each has its own, from its installation."""
    if settings.slack_client_id or settings.slack_client_secret:
        settings.check_oauth(serving=False)  # complete and consistent, or one sentence
        return None
    token = settings.slack_bot_token
    if not token and is_local_api(settings.slack_api_url):
        token = LOCAL_TOKEN
    if not token or not token.startswith("xoxb-"):
        raise SettingsError(
            "SLACK_BOT_TOKEN must be set to the bot token (xoxb-...) from your app's OAuth & "
            "Permissions page: digests are posted to Slack with it."
        )
    return token
