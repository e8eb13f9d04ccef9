"""The Slack app: one factory that wires a Bolt ``App`` to the engine (listeners live in
``bot/slack/listeners/``, one module per Slack surface, as in Bolt's starter template)."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from slack_bolt import Ack, App, BoltContext
from slack_sdk import WebClient
from slack_sdk.http_retry import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.engine.search import Engine
from bot.settings import Settings

log = logging.getLogger(__name__)
#: One line per Slack request (team, user, what was asked, ack latency); with
#: PAPERBOY_LOG_FORMAT=json its fields are the JSON object's keys.
request_log = logging.getLogger("paperboy.requests")

RATE_LIMIT_RETRIES = 3  # each waits Slack's Retry-After first
CONNECTION_RETRIES = 2
# Bolt runs every listener's ack part on this pool; it stays free of slow work (see Services).
ACK_THREADS = 16
WORK_THREADS = 8


@dataclass
class Services:
    """What listeners need besides the Slack payload: the engine and settings, and a pool
    for the work that follows ``ack()``.

    Listeners acknowledge at once and hand lookups to :meth:`later`, a pool of their own, so
    a burst of slow lookups can never hold up the acknowledgement of the next request (Slack
    gives up after 3 seconds and shows the user ``dispatch_failed``).
    """

    engine: Engine
    settings: Settings
    executor: Executor = field(
        default_factory=lambda: ThreadPoolExecutor(WORK_THREADS, thread_name_prefix="paperboy")
    )

    def later(
        self, respond: Callable[..., Any] | None, work: Callable[..., Any], *args: Any
    ) -> None:
        """Run ``work(*args)`` on the pool; if it fails, log it and apologise via ``respond``.

        A request that carries no response_url (``respond`` cannot answer) is only logged:
        there is nothing to answer through, and the work's reply would fail."""
        if respond is not None and getattr(respond, "response_url", "") is None:
            log.warning(
                "%s not done: the request has no response_url to answer through",
                getattr(work, "__name__", work),
            )
            return
        self.executor.submit(self._guarded, respond, work, args)

    @staticmethod
    def _guarded(respond: Callable[..., Any] | None, work: Callable[..., Any], args: tuple) -> None:
        """The one place a listener's failure is told: a write refused because the database
        is read-only says so (the operator's fault, not the member's); anything else is
        logged with its traceback and apologised for."""
        from .render import apology_message, read_only_message

        name = getattr(work, "__name__", work)
        try:
            work(*args)
            return
        except Exception as error:
            if is_read_only_error(error):
                log.warning("%s: nothing saved, the database is read-only (%s)", name, error)
                message = read_only_message()
            else:
                log.exception("%s failed", name)
                message = apology_message()
        if respond is not None:
            try:
                respond(**message, response_type="ephemeral", replace_original=False)
            except Exception:
                log.exception("could not send the apology either")


def is_read_only_error(error: BaseException) -> bool:
    """Whether SQLite refused a write because the database (or its folder) is read-only."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == sqlite3.SQLITE_READONLY
    return "readonly database" in str(error)


def is_json_body(body: str, content_type: str | None) -> bool:
    """Whether Bolt reads ``body`` as JSON (an event) rather than as a form."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind == "application/json" or body.startswith("{")


def body_problem(body: str, content_type: str | None) -> str | None:
    """Why a (signed) body is not a payload Bolt can take, or None when it is one.

    Decided the way Bolt parses it (``slack_bolt.request.internals.parse_body``): JSON when
    sent as JSON or starting with ``{``, else a form whose ``payload`` field, if any, is
    JSON. Whatever is JSON must be an object; Bolt fails with a traceback on anything else.
    """
    if not body:
        return None
    if is_json_body(body, content_type):
        raw, what = body, "the JSON body"
    elif "payload" in body:
        raw = dict(parse_qsl(body, keep_blank_values=True)).get("payload")
        if raw is None:
            return None
        raw, what = raw, "the form's payload"
    else:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return f"{what} is not valid JSON"
    if not isinstance(data, dict):
        return f"{what} is not a JSON object"
    return None


def is_local_api(api_url: str) -> bool:
    """True for the local stand-in (playground, tests): no real token to verify there."""
    return urlsplit(api_url).hostname in ("127.0.0.1", "localhost", "::1")


def make_client(settings: Settings) -> WebClient:
    """A Web API client for the bot token at ``SLACK_API_URL`` (see :func:`configure_client`)."""
    return configure_client(WebClient(token=settings.slack_bot_token), settings)


def configure_client(client: WebClient, settings: Settings) -> WebClient:
    """Point ``client`` at ``SLACK_API_URL``; let it wait out rate limits (HTTP 429,
    Retry-After) and retry dropped connections, so a busy workspace delays a message instead
    of losing it."""
    client.base_url = settings.slack_api_url
    handlers = [h for h in client.retry_handlers if not isinstance(h, ConnectionErrorRetryHandler)]
    client.retry_handlers = [
        *handlers,
        ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
        RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
    ]
    return client


def build_app(
    settings: Settings,
    engine: Engine,
    *,
    client: WebClient | None = None,
    executor: Executor | None = None,
    verify_token: bool | None = None,
) -> App:
    """The Bolt app with every Paperboy listener registered.

    ``client``: one to use instead of Bolt's own (tests); ``executor`` (the pool for work
    after ``ack()``) defaults to a private thread pool. ``verify_token``: ``auth.test`` at
    construction (default: against Slack itself, not the local stand-in); ``paperboy serve``
    turns it off because it has just checked the token, with retries.
    """
    from . import listeners

    services = Services(engine, settings, **({"executor": executor} if executor else {}))
    if verify_token is None:
        # The stand-in has no real tokens; against Slack, a bad token fails at startup.
        verify_token = not is_local_api(settings.slack_api_url)
    app = App(
        # Bolt takes the token (and, when none is given, reads SLACK_BOT_TOKEN itself) and
        # builds its client from it; handed a client as well, it warns that the token goes
        # unused. So it gets the token, and its client is then pointed at SLACK_API_URL.
        # (Its own auth.test would run before that, against slack.com: ours runs after.)
        **({"client": client} if client else {"token": settings.slack_bot_token or ""}),
        signing_secret=settings.slack_signing_secret or "",  # Socket Mode needs none
        process_before_response=False,
        token_verification_enabled=False,
        listener_executor=ThreadPoolExecutor(ACK_THREADS, thread_name_prefix="paperboy-ack"),
        name="paperboy",
    )
    if client is None:
        configure_client(app.client, settings)
    if verify_token:
        verify(app.client)
    app.middleware(log_request)
    listeners.register(app, services)
    return app


def verify(client: WebClient) -> None:
    """Bolt's check of the token at start (``token_verification_enabled``), with the same
    error, made once the client points at the right Slack."""
    from slack_bolt.error import BoltError
    from slack_bolt.logger.messages import error_auth_test_failure
    from slack_sdk.errors import SlackApiError

    try:
        client.auth_test()
    except SlackApiError as error:
        raise BoltError(error_auth_test_failure(error.response)) from None


def log_request(context: BoltContext, body: dict[str, Any], next: Callable[[], None]) -> None:
    """Global middleware (HTTP and Socket Mode alike): log each request when it is acked.

    Bolt's middleware cannot wrap the listener, so the request's ``ack`` is swapped for one
    that logs as it acknowledges: the latency is what Slack waits for.
    """
    context["ack"] = _LoggedAck(request_fields(context, body))
    next()


class _LoggedAck(Ack):
    def __init__(self, fields: dict[str, Any]):
        super().__init__()
        self.fields = fields
        self.started = time.perf_counter()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        answer = super().__call__(*args, **kwargs)
        log_acked(self.fields, self.started)
        return answer


def log_acked(fields: dict[str, Any], started: float) -> None:
    """The one ``paperboy.requests`` line for a request acknowledged now (``started``: its
    ``time.perf_counter()`` on arrival)."""
    fields = {**fields, "latency_ms": round((time.perf_counter() - started) * 1000, 1)}
    what = fields.get("command") or fields.get("action_id") or fields.get("callback_id")
    request_log.info(
        "%s from %s in %s: acked in %.1f ms",
        what or fields.get("type"),
        fields.get("user"),
        fields.get("team"),
        fields["latency_ms"],
        extra=fields,
    )


def raw_request_fields(body: dict[str, Any]) -> dict[str, Any]:
    """:func:`request_fields` from the parsed body alone (before Bolt, while warming up)."""
    team = body.get("team")
    user = body.get("user")
    event = body.get("event")
    context = BoltContext(
        team_id=(team.get("id") if isinstance(team, dict) else None) or body.get("team_id"),
        user_id=(user.get("id") if isinstance(user, dict) else None)
        or body.get("user_id")
        or (event.get("user") if isinstance(event, dict) else None),
    )
    return request_fields(context, body)


def request_fields(context: BoltContext, body: dict[str, Any]) -> dict[str, Any]:
    """Who asked for what: team, user, and the command, button (action_id) or modal
    (callback_id); never the text typed (it may be private)."""
    fields: dict[str, Any] = {
        "team": context.team_id,
        "user": context.user_id,
        "type": body.get("type") or ("slash_command" if "command" in body else None),
    }
    if body.get("command"):
        fields["command"] = body["command"]
    actions = body.get("actions") or []
    if actions and isinstance(actions[0], dict):
        fields["action_id"] = actions[0].get("action_id")
    view = body.get("view")
    if isinstance(view, dict) and view.get("callback_id"):
        fields["callback_id"] = view["callback_id"]
    event = body.get("event")
    if isinstance(event, dict) and event.get("type"):
        fields["event"] = event["type"]
    return fields
