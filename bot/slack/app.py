"""The Slack app: one factory that wires a Bolt ``App`` to the engine (listeners live in
``bot/slack/listeners/``, one module per Slack surface, as in Bolt's starter template)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qsl

from slack_bolt import Ack, App, BoltContext, BoltResponse, Respond
from slack_bolt.error import BoltError, BoltUnhandledRequestError
from slack_bolt.logger.messages import error_auth_test_failure
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.engine.search import Engine
from bot.settings import Settings
from bot.state import state_for

from . import listeners
from .client import is_local_api, make_client, retry_handlers
from .oauth import install_flow, workspace_authorize
from .render import apology_message
from .replies import EPHEMERAL_BELOW
from .services import Services

log = logging.getLogger(__name__)
#: One line per Slack request (team, user, what was asked, ack latency); with
#: PAPERBOY_LOG_FORMAT=json its fields are the JSON object's keys.
request_log = logging.getLogger("paperboy.requests")

# Bolt runs every listener's ack part on this pool; it stays free of slow work (see Services).
ACK_THREADS = 16


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
    after ``ack()``) defaults to a private pool of ``settings.work_threads`` threads.
    ``verify_token``: ``auth.test`` at construction (default: against Slack itself, not the
    local stand-in); ``paperboy serve`` turns it off because it has just checked the token,
    with retries.

    With ``settings.multi_workspace`` there is no one token: Bolt's OAuth flow
    (``bot.slack.oauth``) installs workspaces, and its authorize gives every request (and
    so every listener's ``client``, ``respond`` and post-ack work) the token of the
    workspace it came from.
    """
    work = executor or ThreadPoolExecutor(settings.work_threads, thread_name_prefix="paperboy")
    services = Services(engine, settings, executor=work)
    if settings.multi_workspace:
        verify_token = False  # each workspace's token is checked as it installs
        # Our client (SLACK_API_URL, retries) for the flow's oauth.v2.access, for each
        # request's client, and for refreshing rotating tokens.
        client = client or make_client(settings, token=None)
        flow = install_flow(settings, state_for(engine.db_path), client)
        credentials: dict[str, Any] = {
            "client": client,
            "oauth_flow": flow,
            "authorize": workspace_authorize(flow, client),
            "installation_store_bot_only": True,
        }
    else:
        # Bolt takes the token (and, when none is given, reads SLACK_BOT_TOKEN itself) and
        # builds its client from it; handed a client as well, it warns that the token goes
        # unused. So it gets the token, and its client is then pointed at SLACK_API_URL.
        # (Its own auth.test would run before that, against slack.com: ours runs after.)
        credentials = {"client": client} if client else {"token": settings.slack_bot_token or ""}
    if verify_token is None:
        # The stand-in has no real tokens; against Slack, a bad token fails at startup.
        verify_token = not is_local_api(settings.slack_api_url)
    app = App(
        **credentials,
        signing_secret=settings.slack_signing_secret or "",  # Socket Mode needs none
        process_before_response=False,
        token_verification_enabled=False,
        # To tell_user_of_failure, for one log line instead of Bolt's multi-line suggestion.
        raise_error_for_unhandled_request=True,
        listener_executor=ThreadPoolExecutor(ACK_THREADS, thread_name_prefix="paperboy-ack"),
        name="paperboy",
    )
    if client is None:
        # Bolt's client, pointed at SLACK_API_URL with the retries every client has.
        app.client.base_url = settings.slack_api_url
        app.client.retry_handlers = retry_handlers()
    if verify_token:
        verify(app.client)
    app.middleware(log_request)
    app.error(tell_user_of_failure)
    listeners.register(app, services)
    return app


def verify(client: WebClient) -> None:
    """Bolt's check of the token at start (``token_verification_enabled``), with the same
    error, made once the client points at the right Slack."""
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
        "%s (%s) from %s in %s: acked in %.1f ms",
        what or fields.get("event") or fields.get("type"),
        fields.get("surface"),
        fields.get("user"),
        fields.get("team"),
        fields["latency_ms"],
        extra=fields,
    )


def surface(body: dict[str, Any]) -> str | None:
    """Where in Slack the request came from: ``slash_command``, ``home`` (the App Home tab),
    ``modal``, ``message`` (a button on a message), ``global_shortcut``, ``message_shortcut``,
    ``mention``, ``dm``, or the event's type."""
    kind = body.get("type")
    if "command" in body:
        return "slash_command"
    if kind == "shortcut":
        return "global_shortcut"
    if kind == "message_action":
        return "message_shortcut"
    if kind == "view_submission" or kind == "view_closed":
        return "modal"
    view = body.get("view")
    if kind == "block_actions":
        if isinstance(view, dict):
            return "home" if view.get("type") == "home" else "modal"
        return "message"
    event = body.get("event")
    if isinstance(event, dict):
        if event.get("type") == "app_home_opened":
            return "home"
        if event.get("type") == "app_mention":
            return "mention"
        if event.get("type") == "message" and event.get("channel_type") == "im":
            return "dm"
        return event.get("type")
    return kind


def tell_user_of_failure(
    error: Exception,
    body: dict[str, Any],
    context: BoltContext,
    response: BoltResponse | None,
    respond: Respond | None = None,
    client: WebClient | None = None,
) -> BoltResponse | None:
    """Bolt's global error handler: a listener that raised is logged with its traceback, the
    member gets a short private apology (in the conversation, or in a direct message when
    the request came from a modal or the Home tab), and Slack gets a 200, so no one ever sees
    ``dispatch_failed``. That holds for a listener that raises before its ``ack()``; after it,
    Bolt resets the acknowledgement (see ``services.open_modal``), so listeners hand all work
    after ``ack()`` to ``Services.submit``/``later`` or ``open_modal``, which never raise.

    A request no listener takes is one log line: an event (a DM edited, a message from
    another bot) is acknowledged with 200, which is what Slack wants of every event it
    delivers (anything else is retried, and an app that keeps failing has its events turned
    off); anything else (a command or button of another app's) gets 404."""
    fields = request_fields(context, body)
    if isinstance(error, BoltUnhandledRequestError):
        if body.get("type") == "event_callback":
            log.debug("an event no listener takes, acknowledged: %s", fields)
            return BoltResponse(status=200, body="")
        log.warning("a request no listener takes: %s", fields)
        return BoltResponse(status=404, body="")
    log.error("a listener failed: %s", fields, exc_info=error)
    message = apology_message()
    user = context.user_id
    channel = context.channel_id
    try:
        if respond is not None and respond.response_url:
            respond(**message, **EPHEMERAL_BELOW)
        elif client is not None and user and channel:
            client.chat_postEphemeral(channel=channel, user=user, **message)
        elif client is not None and user:
            client.chat_postMessage(channel=user, **message)
    except Exception:
        log.exception("could not send the apology either")
    if response is not None:
        return BoltResponse(status=200, body="")
    return None


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
        "surface": surface(body),
    }
    if body.get("command"):
        fields["command"] = body["command"]
    actions = body.get("actions") or []
    if actions and isinstance(actions[0], dict):
        fields["action_id"] = actions[0].get("action_id")
    view = body.get("view")
    if isinstance(view, dict) and view.get("callback_id"):
        fields["callback_id"] = view["callback_id"]
    elif isinstance(body.get("callback_id"), str):  # a shortcut
        fields["callback_id"] = body["callback_id"]
    event = body.get("event")
    if isinstance(event, dict) and event.get("type"):
        fields["event"] = event["type"]
    return fields
