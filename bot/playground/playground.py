"""The local playground: try Paperboy in a browser, with no Slack workspace at all.

``paperboy serve`` without Slack credentials starts a :class:`FakeSlack` on a free loopback
port and the very same Bolt app as in production (signing secret generated here, Web API
pointed at the stand-in), and serves a page at ``http://127.0.0.1:$PORT/`` that looks like a
Slack channel. What the page does goes through the real path:

    page  --POST /playground/command-->  playground  --signed form POST-->  /slack/events (Bolt)
    Bolt  --respond() / chat.postMessage-->  FakeSlack  --GET /playground/events-->  page

so a slash command is form-encoded and signed exactly as Slack sends it, with a response_url
from the stand-in, a button click is a signed ``block_actions`` payload, and a modal the app
opens (``views.open``) is drawn by the page, whose Submit is a signed ``view_submission``.
The page also has the App Home tab (``app_home_opened``; its controls are ``block_actions``
on the published view), the shortcuts (``shortcut``, ``message_action``), and messages typed
in the Paperboy DM or mentioning @Paperboy (``message.im``, ``app_mention`` events).

The playground also runs the digest scheduler in-process (a ``BackgroundScheduler`` posting
through the stand-in), so digests arrive in the page's Paperboy DM at their time. In
production that is the Procfile's ``clock:`` process, or ``paperboy serve --with-scheduler``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlencode

from slack_sdk.signature import SignatureVerifier

from bot.engine.search import Engine
from bot.logs import say
from bot.playground.fake_slack import APP_ID, BOT_USER_ID, TEAM_ID, FakeSlack
from bot.settings import Settings
from bot.slack.app import build_app
from bot.slack.poster import SlackPoster
from bot.slack.server import HttpServer, make_wsgi_app, plain, playground_host
from digest import schedule
from digest.clock import Clock
from digest.schedule import TICK_SECONDS

log = logging.getLogger(__name__)

USER_ID, USER_NAME = "U0PLAYER", "you"
CHANNELS = {"C0GENERAL": "general", "C0READING": "reading-group"}
COMMAND = "/papers"
# "@Paperboy" typed in the page (Slack's client turns a picked mention into <@U...>).
MENTION = re.compile(r"(?<![\w<])@paperboy\b", re.IGNORECASE)
MAX_BODY = 64 * 1024


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature (``v0=`` HMAC-SHA256 of ``v0:<timestamp>:<body>``), made by
    slack_sdk's own ``SignatureVerifier``, the one the app checks it with."""
    return SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)


def slack_escape(text: str) -> str:
    """The command text as Slack sends it with ``should_escape: true`` (see manifest.yml):
    ``&``, ``<``, ``>`` as entities, ``@channel``/``@here``/``@everyone`` as ``<!channel>``...,
    and a channel typed as ``#name`` as ``<#ID|name>``."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"(?<![\w@])@(channel|here|everyone)\b", r"<!\1>", text)
    names = {name: channel_id for channel_id, name in CHANNELS.items()}

    def channel_link(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"<#{names[name]}|{name}>" if name in names else match.group(0)

    return re.sub(r"(?<![\w&])#([a-z0-9_-]+)", channel_link, text)


class Playground:
    """FakeSlack + the Bolt app + the page, on ``host:port`` (loopback by default), and the
    digest scheduler (every ``tick_seconds``; ``None`` runs no scheduler). ``slack`` is the
    stand-in to post to (a fresh one by default; the tests pass one that records calls)."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tick_seconds: int | None = schedule.TICK_SECONDS,
        slack: FakeSlack | None = None,
    ) -> None:
        self.fake = (slack or FakeSlack()).start()
        self.signing_secret = secrets.token_hex(16)
        self.settings = dataclasses.replace(
            settings,
            slack_bot_token="xoxb-playground-" + secrets.token_hex(8),
            slack_signing_secret=self.signing_secret,
            slack_app_token=None,
            slack_api_url=self.fake.api_url,
        )
        self.engine = engine
        self.executor = ThreadPoolExecutor(8, thread_name_prefix="playground")
        self.app = build_app(self.settings, engine, executor=self.executor)
        routes = {
            "/": self._page,
            "/playground/command": self._json_post(self.command),
            "/playground/action": self._json_post(self.action),
            "/playground/view": self._json_post(self.submit_view),
            "/playground/hello": self._json_post(self.hello),
            "/playground/home": self._json_post(self.open_home),
            "/playground/shortcut": self._json_post(self.shortcut),
            "/playground/message": self._json_post(self.message),
            "/playground/events": self._events,
        }
        wsgi = make_wsgi_app(self.settings, engine, app=self.app, routes=routes)
        self.server = HttpServer(wsgi, host=host, port=port)
        self.tick_seconds = tick_seconds
        poster = SlackPoster.from_settings(self.settings, engine)
        self.clock = Clock(engine, self.settings, poster, tick_seconds=tick_seconds or TICK_SECONDS)
        self.scheduler: Any = None

    @property
    def url(self) -> str:
        return self.server.url + "/"

    def start(self) -> Playground:
        self.server.start()
        self.start_scheduler()
        return self

    def serve_forever(self) -> None:
        self.start_scheduler()
        self.server.serve_forever()

    def stop(self) -> None:
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=True)  # let a tick in progress finish its digest
        self.server.stop()
        self.executor.shutdown(wait=True, cancel_futures=True)
        self.fake.stop()

    def start_scheduler(self) -> None:
        """The digest tick (and the daily PAPERBOY_FEEDS ingest, when set) on a background
        thread, as ``paperboy scheduler`` runs them in production."""
        if self.tick_seconds is None or self.scheduler is not None:
            return
        self.clock.start_background()
        self.scheduler = self.clock.scheduler

    def __enter__(self) -> Playground:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # --- what the page asks for ---------------------------------------------------------------

    def command(self, data: dict[str, Any]) -> dict[str, Any]:
        """Send ``/papers <text>`` from the page's user in ``channel``, as Slack would."""
        channel = self._channel(data.get("channel"))
        text = slack_escape(str(data.get("text") or ""))
        form = {
            "token": "playground",
            "team_id": TEAM_ID,
            "team_domain": "paperboy",
            "channel_id": channel,
            "channel_name": CHANNELS.get(channel, "directmessage"),
            "user_id": USER_ID,
            "user_name": USER_NAME,
            "command": COMMAND,
            "text": text,
            "api_app_id": APP_ID,
            "is_enterprise_install": "false",
            "response_url": self.fake.response_url(channel=channel, user=USER_ID),
            "trigger_id": f"{int(time.time())}.playground.{secrets.token_hex(8)}",
        }
        return self._forward(urlencode(form).encode())

    def action(self, data: dict[str, Any]) -> dict[str, Any]:
        """Click a button: a signed ``block_actions`` payload about the message it sits on
        (or, with ``view_id`` or ``home``, about the open modal or the Home tab, with what the
        control picked: ``selected_time``, ``selected_options``, ``selected_conversation``)."""
        if data.get("view_id") or data.get("home"):
            return self.view_action(data)
        channel = self._channel(data.get("channel"))
        message_ts = str(data.get("message_ts") or "")
        ephemeral = bool(data.get("ephemeral"))
        action = {
            "type": "button",
            "action_id": str(data.get("action_id") or ""),
            "block_id": str(data.get("block_id") or ""),
            "text": {"type": "plain_text", "text": str(data.get("label") or "button")},
            "value": str(data.get("value") or ""),
            "action_ts": f"{time.time():.6f}",
            **_style(data),
        }
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": USER_ID, "username": USER_NAME, "name": USER_NAME, "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "playground",
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": ephemeral,
            },
            "trigger_id": f"{int(time.time())}.playground.{secrets.token_hex(8)}",
            "team": {"id": TEAM_ID, "domain": "paperboy"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": CHANNELS.get(channel, "directmessage")},
            "state": {"values": {}},
            "response_url": self.fake.response_url(
                channel=channel, user=USER_ID, message_ts=message_ts or None
            ),
            "actions": [action],
        }
        if not ephemeral:  # Slack includes the message itself, except for ephemeral ones
            stored = [m for m in self.fake.messages_in(channel) if m["ts"] == message_ts]
            if stored:
                payload["message"] = stored[0]
        return self._forward(urlencode({"payload": json.dumps(payload)}).encode())

    def submit_view(self, data: dict[str, Any]) -> dict[str, Any]:
        """Press Submit on a modal: a signed ``view_submission`` with what the page's inputs
        hold (``values``: block_id -> the picked channel or the typed text).

        The answer's ``body`` is the app's acknowledgement: empty (close the modal) or JSON
        with a ``response_action`` (``errors`` to show under the inputs, ``update`` to show).
        """
        view = self.fake.modal(str(data.get("view_id") or ""))
        if view is None:
            return {"status": 404, "ok": False, "body": "no such view"}
        answers = data.get("values") if isinstance(data.get("values"), dict) else {}
        values: dict[str, Any] = {}
        for block in view.get("blocks") or []:
            element = block.get("element") or {}
            if block.get("type") != "input" or "block_id" not in block:
                continue
            answer = answers.get(block["block_id"])
            answer = str(answer) if answer not in (None, "") else None
            kind = element.get("type")
            if kind == "conversations_select" and answer and self._channel(answer) != answer:
                # Slack's picker only offers conversations that exist.
                return {"status": 400, "ok": False, "body": f"no such channel: {answer}"}
            key = "selected_conversation" if kind == "conversations_select" else "value"
            values[block["block_id"]] = {element.get("action_id"): {"type": kind, key: answer}}
        payload = {
            "type": "view_submission",
            "team": {"id": TEAM_ID, "domain": "paperboy"},
            "user": {"id": USER_ID, "username": USER_NAME, "name": USER_NAME, "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "playground",
            "trigger_id": f"{int(time.time())}.playground.{secrets.token_hex(8)}",
            "view": {**view, "state": {"values": values}},
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }
        answer = self._forward(urlencode({"payload": json.dumps(payload)}).encode(), whole=True)
        try:
            ack = json.loads(answer["body"]) if answer["ok"] and answer["body"] else {}
        except ValueError:
            ack = {}
        if isinstance(ack, dict) and ack.get("response_action") == "update":
            # Slack shows the ack's view in the open modal, as views.update would: later
            # clicks in it carry that view.
            shown = self.fake.replace_modal(view["id"], ack.get("view") or {})
            if shown is not None:
                answer["body"] = json.dumps({**ack, "view": shown})
        return answer

    def view_action(self, data: dict[str, Any]) -> dict[str, Any]:
        """A control used in a modal or on the Home tab: ``block_actions`` with the view."""
        if data.get("home"):
            view = self.fake.published_home(USER_ID)
        else:
            view = self.fake.modal(str(data.get("view_id") or ""))
        if view is None:
            return {"status": 404, "ok": False, "body": "no such view"}
        action: dict[str, Any] = {
            "type": str(data.get("type") or "button"),
            "action_id": str(data.get("action_id") or ""),
            "block_id": str(data.get("block_id") or ""),
            "action_ts": f"{time.time():.6f}",
        }
        if action["type"] == "button":  # with its label and style, as Slack sends a button
            action["value"] = str(data.get("value") or "")
            action["text"] = {"type": "plain_text", "text": str(data.get("label") or "button")}
            action.update(_style(data))
        for picked in ("selected_time", "selected_conversation"):
            if data.get(picked):
                action[picked] = str(data[picked])
        if action["type"] == "checkboxes":
            chosen = [str(v) for v in data.get("selected_options") or []]
            action["selected_options"] = [{"value": v} for v in chosen]
        payload = {
            **self._interaction("block_actions"),
            "container": {"type": "view", "view_id": view.get("id")},
            "view": view,
            "actions": [action],
        }
        return self._forward(urlencode({"payload": json.dumps(payload)}).encode())

    def open_home(self, data: dict[str, Any]) -> dict[str, Any]:
        """Open the Home tab: the ``app_home_opened`` event Slack sends."""
        event = {"type": "app_home_opened", "user": USER_ID, "channel": "D" + USER_ID}
        return self._event({**event, "tab": "home"})

    def shortcut(self, data: dict[str, Any]) -> dict[str, Any]:
        """The global shortcut (⚡ Search papers), or, with ``text`` and ``channel``, the
        message shortcut on the message saying ``text``."""
        callback_id = str(data.get("callback_id") or "")
        if "text" not in data:
            payload = {**self._interaction("shortcut"), "callback_id": callback_id}
            return self._forward(urlencode({"payload": json.dumps(payload)}).encode())
        channel = self._channel(data.get("channel"))
        ts = str(data.get("ts") or "") or f"{time.time():.6f}"
        message = {"type": "message", "user": USER_ID, "text": str(data["text"]), "ts": ts}
        payload = {
            **self._interaction("message_action"),
            "callback_id": callback_id,
            "channel": {"id": channel, "name": CHANNELS.get(channel, "directmessage")},
            "message_ts": ts,
            "message": message,
            "response_url": self.fake.response_url(channel=channel, user=USER_ID),
        }
        return self._forward(urlencode({"payload": json.dumps(payload)}).encode())

    def message(self, data: dict[str, Any]) -> dict[str, Any]:
        """A message typed in the page: in the Paperboy DM, a ``message.im`` event; in a
        channel, an ``app_mention`` when it names @Paperboy (else Paperboy never sees it)."""
        channel = self._channel(data.get("channel"))
        text = slack_escape(str(data.get("text") or ""))
        event = {"user": USER_ID, "channel": channel, "ts": f"{time.time():.6f}"}
        if channel.startswith("D"):
            # On Slack the DM exists once the member writes in it.
            self.app.client.conversations_open(users=USER_ID)
            return self._event({**event, "type": "message", "channel_type": "im", "text": text})
        if not MENTION.search(text):
            return {"status": 200, "ok": True, "body": "", "unheard": True}
        mention = MENTION.sub(f"<@{BOT_USER_ID}>", text)
        return self._event({**event, "type": "app_mention", "text": mention})

    def hello(self, data: dict[str, Any]) -> dict[str, Any]:
        """The page says hello with the browser's time zone, which becomes the user's tz."""
        tz = str(data.get("tz") or "")
        if tz:
            try:
                self.fake.set_user(USER_ID, tz=tz, real_name="You")
            except Exception:  # an odd browser time zone name: keep the stand-in's default
                log.info("ignoring the browser's time zone %r", tz)
        return {
            "user": USER_ID,
            "channels": CHANNELS,
            "dm": "D" + USER_ID,
            "seq": self._last_seq(),
        }

    def _last_seq(self) -> int:
        events = self.fake.events_since(0)
        return events[-1].seq if events else 0

    # --- plumbing -------------------------------------------------------------------------------

    @staticmethod
    def _channel(value: Any) -> str:
        channel = str(value or "")
        if channel in CHANNELS or channel == "D" + USER_ID:
            return channel
        return next(iter(CHANNELS))

    def _interaction(self, kind: str) -> dict[str, Any]:
        """The fields every interaction payload from the page's user has."""
        return {
            "type": kind,
            "user": {"id": USER_ID, "username": USER_NAME, "name": USER_NAME, "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "playground",
            "trigger_id": f"{int(time.time())}.playground.{secrets.token_hex(8)}",
            "team": {"id": TEAM_ID, "domain": "paperboy"},
            "enterprise": None,
            "is_enterprise_install": False,
        }

    def _event(self, event: dict[str, Any]) -> dict[str, Any]:
        """An Events API callback, POSTed as JSON like Slack does."""
        callback = {
            "token": "playground",
            "team_id": TEAM_ID,
            "api_app_id": APP_ID,
            "event": {"event_ts": f"{time.time():.6f}", **event},
            "type": "event_callback",
            "event_id": "Ev" + secrets.token_hex(5).upper(),
            "event_time": int(time.time()),
        }
        return self._forward(json.dumps(callback).encode(), "application/json")

    def _forward(
        self,
        body: bytes,
        content_type: str = "application/x-www-form-urlencoded",
        *,
        whole: bool = False,
    ) -> dict[str, Any]:
        """POST to our own /slack/events, signed with the signing secret, like Slack does
        (``whole``: the app's answer in full, e.g. a modal's ``response_action: update``)."""
        timestamp = str(int(time.time()))
        request = urllib.request.Request(
            self.server.url + "/slack/events",
            data=body,
            headers={
                "Content-Type": content_type,
                "X-Slack-Request-Timestamp": timestamp,
                "X-Slack-Signature": signature(self.signing_secret, timestamp, body),
                "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots) [paperboy playground]",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                status, text = answer.status, answer.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode("utf-8", "replace")
        # A body in the ack would be shown by Slack too; Paperboy acks empty and responds later.
        return {"status": status, "ok": status == 200, "body": text if whole else text[:2000]}

    def _page(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        page = resources.files("bot.playground").joinpath("page.html").read_bytes()
        return plain(start_response, "200 OK", page, "text/html; charset=utf-8")

    def _events(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING") or "")
        since = query.get("since", ["0"])[0]
        seq = int(since) if since.isdigit() else 0
        events = [e.to_dict() for e in self.fake.events_since(seq)]
        return plain(start_response, "200 OK", json.dumps({"events": events}), "application/json")

    @staticmethod
    def _json_post(
        handler: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> Callable[..., Iterable[bytes]]:
        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("REQUEST_METHOD") != "POST":
                return plain(start_response, "405 Method Not Allowed", "POST only")
            # Only the page itself may drive the playground (no cross-site form posts).
            if "application/json" not in (environ.get("CONTENT_TYPE") or ""):
                return plain(start_response, "415 Unsupported Media Type", "JSON only")
            length = int(environ.get("CONTENT_LENGTH") or 0)
            if length > MAX_BODY:
                return plain(start_response, "413 Payload Too Large", "too large")
            try:
                data = json.loads(environ["wsgi.input"].read(length) or b"{}")
            except ValueError:
                return plain(start_response, "400 Bad Request", "invalid JSON")
            if not isinstance(data, dict):
                return plain(start_response, "400 Bad Request", "expected a JSON object")
            body = json.dumps(handler(data))
            return plain(start_response, "200 OK", body, "application/json")

        return app


def run(settings: Settings, engine: Engine) -> None:
    """``paperboy serve`` with no Slack credentials: the playground, until Ctrl-C."""
    host = playground_host(settings)
    if settings.log_level != "DEBUG":  # a line per scheduler tick, every minute, is noise
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
    playground = Playground(settings, engine, host=host, port=settings.port)
    papers = engine.corpus.count()
    first = (
        "type /papers diffusion models"
        if papers
        else f"first add papers: the corpus in {engine.db_path} is empty (paperboy ingest FILE)"
    )
    say(
        settings,
        "No Slack credentials set, so Paperboy runs as a local playground:\n"
        f"    open {playground.url} and {first}\n"
        "Digests are sent on schedule to the page's Paperboy direct messages "
        "(or at once: /papers digest now).\n"
        "To connect a real workspace, create the app from its manifest "
        "(paperboy manifest --host YOUR-HOST prints it) and set "
        "SLACK_BOT_TOKEN and SLACK_SIGNING_SECRET (or SLACK_APP_TOKEN for Socket Mode).",
    )
    try:
        playground.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        playground.stop()


def _style(data: dict[str, Any]) -> dict[str, str]:
    """A button's ``style`` as Slack sends it in the action: only when it has one."""
    style = str(data.get("style") or "")
    return {"style": style} if style in ("primary", "danger") else {}
