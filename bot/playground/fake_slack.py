"""A local stand-in for Slack's Web API: what the app's "local playground" mode talks to.

Pointing ``slack_sdk.WebClient(base_url=fake.api_url)`` (and Bolt's ``respond()`` at
``fake.response_url()``) at a real HTTP server, rather than mocking the client, exercises the
same code paths as production: form/JSON encoding, retry handlers, error mapping. The fake is
as strict as Slack (Block Kit limits, token kinds, ``not_in_channel``, rate limits, one-use
trigger ids), because those errors otherwise only show up in production.

The test-suite drives a subclass (``tests/fake_slack.py``) that also records every call, can be
told to fail, and waits for what the app does; none of that ships in the product.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from zoneinfo import ZoneInfo

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

log = logging.getLogger(__name__)

TEAM_ID, BOT_USER_ID, BOT_ID, APP_ID = "T0PAPERBOY", "UBOT", "BBOT", "APAPERBOY"
DEFAULT_TZ = "America/Los_Angeles"
MAX_MESSAGE_BLOCKS, MAX_VIEW_BLOCKS, MAX_TEXT = 50, 100, 40_000
MAX_VIEW_TITLE, MAX_VIEW_METADATA, MAX_CALLBACK_ID = 24, 3000, 255
BLOCK_TYPES = frozenset(
    {"actions", "call", "context", "divider", "file", "header", "image", "input", "markdown"}
    | {"rich_text", "section", "table", "video"}
)
#: Calls per minute per method before HTTP 429 (Slack's tier for the method).
RATE_LIMITS = {"conversations.open": 50}
_JSON_PARAMS = ("blocks", "metadata", "view", "attachments")
# Methods that take an app-level token (xapp-) and nothing else; every other method refuses one.
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})
# Methods called with the app's client id and secret instead of a token (OAuth v2).
CLIENT_METHODS = frozenset({"oauth.v2.access"})
#: How long an OAuth code from Slack's consent page can be exchanged (Slack: ten minutes), and
#: how long a rotating bot token lives (Slack: twelve hours).
CODE_SECONDS, ROTATING_TOKEN_SECONDS = 600, 12 * 3600


@dataclass(frozen=True)
class Event:
    """One visible change, in order, so the playground page can replay what a user would see."""

    seq: int
    kind: str  # "message" | "ephemeral" | "response" | "update" | "delete" | "view" | "home"
    channel: str | None = None
    user: str | None = None
    ts: str | None = None
    text: str | None = None
    blocks: list[Any] | None = None
    replace_original: bool = False
    delete_original: bool = False
    response_type: str | None = None
    view: dict[str, Any] | None = None  # "view": a modal opened or updated; "home": a Home tab

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Reply:
    status: int
    body: dict[str, Any] | str
    headers: dict[str, str] = field(default_factory=dict)


def _ok(**fields: Any) -> dict[str, Any]:
    return {"ok": True, **fields}


def _error(error: str, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "error": error, **extra}


def _truthy(value: Any) -> bool:
    """Clients send booleans as JSON true, "true" or "1" depending on the encoding."""
    return value is True or str(value).lower() in ("1", "true")


# --- Block Kit validation ----------------------------------------------------------------------


def validate_blocks(blocks: Any, max_blocks: int = MAX_MESSAGE_BLOCKS) -> list[str]:
    """Return Slack-style errors ("<problem> [json-pointer:/blocks/0/text]"); empty means valid.

    Explicit checks cover the limits a bot can plausibly hit; slack_sdk's model validators then
    catch the rest (e.g. an image without alt_text). Stricter than Slack in one way: action_ids
    must be unique in the whole message, not just per block, so element lookups stay unambiguous.
    """
    errors: list[str] = []
    action_ids: set[str] = set()
    block_ids: set[str] = set()

    def err(path: str, problem: str) -> None:
        errors.append(f"{problem} [json-pointer:{path}]")

    def text_obj(obj: Any, path: str, max_len: int, plain_only: bool = False) -> None:
        kinds = ("plain_text",) if plain_only else ("plain_text", "mrkdwn")
        if not isinstance(obj, dict) or obj.get("type") not in kinds:
            err(path, f"must be a text object of type {' or '.join(kinds)}")
        elif not isinstance(obj.get("text"), str) or not obj["text"]:
            err(f"{path}/text", "must be more than 0 characters")
        elif len(obj["text"]) > max_len:
            err(f"{path}/text", f"must be less than {max_len + 1} characters")

    def unique_id(value: Any, seen: set[str], path: str, name: str) -> None:
        if value is None:
            return
        if not isinstance(value, str) or not 0 < len(value) <= 255:
            err(path, f"{name} must be a string of 1 to 255 characters")
        elif value in seen:
            err(path, f"duplicate {name} {value!r}")
        seen.add(str(value))

    def element(el: Any, path: str) -> None:
        if not isinstance(el, dict) or not isinstance(el.get("type"), str):
            err(path, "must be an element object with a type")
            return
        unique_id(el.get("action_id"), action_ids, f"{path}/action_id", "action_id")
        if el["type"] == "button":
            text_obj(el.get("text"), f"{path}/text", 75, plain_only=True)
            if len(str(el.get("value", ""))) > 2000:
                err(f"{path}/value", "must be less than 2001 characters")

    def elements(block: dict[str, Any], path: str, limit: int) -> list[Any]:
        items = block.get("elements")
        if isinstance(items, list) and 1 <= len(items) <= limit:
            return items
        err(f"{path}/elements", f"must have between 1 and {limit} items")
        return []

    if not isinstance(blocks, list):
        return ["must be an array [json-pointer:/blocks]"]
    if len(blocks) > max_blocks:
        err("/blocks", f"no more than {max_blocks} items allowed")
    for i, block in enumerate(blocks):
        path, before = f"/blocks/{i}", len(errors)
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in BLOCK_TYPES:
            err(f"{path}/type", f"unknown block type {kind!r}")
            continue
        unique_id(block.get("block_id"), block_ids, f"{path}/block_id", "block_id")
        if kind == "section":
            if "text" not in block and "fields" not in block:
                err(path, "must have text or fields")
            if "text" in block:
                text_obj(block["text"], f"{path}/text", 3000)
            fields = block.get("fields", [])
            if not isinstance(fields, list) or len(fields) > 10:
                err(f"{path}/fields", "no more than 10 items allowed")
            else:
                for j, item in enumerate(fields):
                    text_obj(item, f"{path}/fields/{j}", 2000)
            if "accessory" in block:
                element(block["accessory"], f"{path}/accessory")
        elif kind == "header":
            text_obj(block.get("text"), f"{path}/text", 150, plain_only=True)
        elif kind == "actions":
            for j, el in enumerate(elements(block, path, 25)):
                element(el, f"{path}/elements/{j}")
        elif kind == "context":
            for j, el in enumerate(elements(block, path, 10)):
                if not (isinstance(el, dict) and el.get("type") == "image"):
                    text_obj(el, f"{path}/elements/{j}", 3000)
        elif kind == "input":
            text_obj(block.get("label"), f"{path}/label", 2000, plain_only=True)
            element(block.get("element"), f"{path}/element")
        if len(errors) == before:
            try:
                parsed = Block.parse(block)  # None for types this slack_sdk version predates
                if parsed is not None:
                    parsed.to_dict()  # runs the validators of the block and its children
            except (SlackObjectFormationError, AttributeError, KeyError, TypeError) as exc:
                err(path, str(exc) or "failed to match all allowed schemas")
    return errors


def _check_message(params: dict[str, Any]) -> dict[str, Any] | None:
    """Slack's error answer for a message's text/blocks/metadata, or None when acceptable."""
    text, blocks, metadata = params.get("text"), params.get("blocks"), params.get("metadata")
    if isinstance(blocks, str) and blocks:  # form field that was not valid JSON
        return _error("invalid_blocks_format")
    if not text and not blocks and not params.get("attachments"):
        return _error("no_text")
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return _error("msg_too_long")
    if blocks and (errors := validate_blocks(blocks)):
        messages = [f"[ERROR] {e}" for e in errors]
        return _error("invalid_blocks", errors=errors, response_metadata={"messages": messages})
    if metadata and not (isinstance(metadata, dict) and "event_type" in metadata):
        return _error("invalid_metadata_format")
    return None


def _check_modal(view: dict[str, Any]) -> list[str]:
    """Slack's checks of a modal's own fields (its blocks are checked by validate_blocks)."""
    errors = []
    for name, required in (("title", True), ("submit", False), ("close", False)):
        obj = view.get(name)
        if obj is None and not required:
            continue
        if not isinstance(obj, dict) or obj.get("type") != "plain_text" or not obj.get("text"):
            errors.append(f"{name} must be a plain_text object [json-pointer:/view/{name}]")
        elif len(obj["text"]) > MAX_VIEW_TITLE:
            errors.append(f"{name} must be less than 25 characters [json-pointer:/view/{name}]")
    inputs = [
        b for b in view.get("blocks") or [] if isinstance(b, dict) and b.get("type") == "input"
    ]
    if inputs and view.get("submit") is None:
        errors.append("a view with input blocks needs submit [json-pointer:/view/submit]")
    if len(str(view.get("private_metadata") or "")) > MAX_VIEW_METADATA:
        errors.append("private_metadata must be less than 3001 characters")
    if len(str(view.get("callback_id") or "")) > MAX_CALLBACK_ID:
        errors.append("callback_id must be less than 256 characters")
    return errors


def _token_problem(method: str, token: str) -> str | None:
    """Slack's answer to the wrong kind of token: app-level tokens (xapp-) only for the
    methods that want them, bot tokens (xoxb-) for everything else."""
    wants_app_token = method in APP_TOKEN_METHODS
    if token.startswith("xapp-"):
        return None if wants_app_token else "not_allowed_token_type"
    if not token.startswith(("xoxb-", "xoxe.xoxb-")):  # the latter: a rotating bot token
        return "invalid_auth"
    return "not_allowed_token_type" if wants_app_token else None


# --- The fake workspace ------------------------------------------------------------------------


class FakeSlack:
    """An in-memory Slack workspace served over HTTP on 127.0.0.1; see the module docstring.

    All state sits behind one re-entrant lock, so the app can post from several threads. Web
    API methods are the ``_api_<method with dots as underscores>`` methods below. ``clock``
    (epoch seconds) dates messages, rate limits, trigger ids and users' UTC offsets.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._server: _Server | None = None
        # Workspaces: every bot token belongs to one. A token the stand-in did not issue is
        # the home workspace's (TEAM_ID: the playground and single-workspace tests use any
        # xoxb- token); oauth.v2.access issues tokens of the workspace that installed.
        self._teams: dict[str, dict[str, str]] = {
            TEAM_ID: {"name": "Paperboy", "bot_user": BOT_USER_ID, "bot_id": BOT_ID}
        }
        self._token_teams: dict[str, str] = {}
        self._token_expiry: dict[str, float] = {}  # rotating tokens: when each one expires
        self._refresh_tokens: dict[str, str] = {}  # refresh token -> its workspace
        self._dead_tokens: set[str] = set()  # of uninstalled workspaces: token_revoked
        self._oauth_app: dict[str, Any] | None = None  # see register_app
        self._codes: dict[str, dict[str, Any]] = {}
        self._token: str | None = None  # the token of the call being answered
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self._events: list[Event] = []
        self._channels: dict[str, list[dict[str, Any]]] = {}
        self._users: dict[str, dict[str, Any]] = {}
        self._home_views: dict[str, dict[str, Any]] = {}
        self._modals: dict[str, dict[str, Any]] = {}
        self._used_triggers: set[str] = set()
        self._response_targets: dict[str, dict[str, str | None]] = {}
        self._last_micros = 0
        # Conversations the bot is a member of (joined or invited; DMs it opened are always
        # its own), and the private ones. Any other C... id is a public channel it is not in.
        self._joined: set[str] = set()
        self._private: set[str] = set()
        # Each rate-limited method's calls in the last minute of the fake's clock (RATE_LIMITS).
        self._recent: dict[str, list[float]] = {}
        # Files upload v2: each file id from files.getUploadURLExternal, its bytes once POSTed
        # to its upload URL, and whether files.completeUploadExternal shared it.
        self._files: dict[str, dict[str, Any]] = {}

    # lifecycle

    def start(self) -> FakeSlack:
        if self._server is not None:
            raise RuntimeError("FakeSlack is already running")
        self._server = _Server(("127.0.0.1", 0), self)
        # A short poll interval keeps stop() fast (the playground's Ctrl-C, a test's teardown).
        poll = {"poll_interval": 0.02}
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs=poll, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeSlack is not running; call start() first")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def api_url(self) -> str:
        """Pass as ``WebClient(base_url=...)``; slack_sdk appends the method name."""
        return f"{self.base_url}/api/"

    # configuration

    def set_user(
        self,
        user_id: str,
        tz: str = "Europe/Berlin",
        real_name: str | None = None,
        deleted: bool = False,
    ) -> None:
        ZoneInfo(tz)  # a typo fails here, in the caller, not inside a request thread
        with self._lock:
            self._users[user_id] = {"tz": tz, "real_name": real_name, "deleted": deleted}

    def register_app(
        self,
        client_id: str,
        client_secret: str,
        *,
        token_rotation: bool = False,
        token_seconds: int = ROTATING_TOKEN_SECONDS,
    ) -> None:
        """The app's credentials (Basic Information), which ``oauth.v2.access`` checks.
        ``token_rotation``: bot tokens expire after ``token_seconds`` and come with a refresh
        token (each good once)."""
        with self._lock:
            self._oauth_app = {
                "client_id": client_id,
                "client_secret": client_secret,
                "rotation": token_rotation,
                "token_seconds": token_seconds,
            }

    def authorize(
        self, team_id: str, team_name: str | None = None, *, user: str = "UINSTALLER"
    ) -> str:
        """What Slack's consent page does when ``user`` clicks Allow for ``team_id``: a code
        for the app's redirect URL, good once and for ten minutes (``CODE_SECONDS``)."""
        with self._lock:
            team = self._teams.setdefault(
                team_id,
                {
                    "name": team_name or team_id,
                    "bot_user": f"UBOT{team_id}",
                    "bot_id": f"BBOT{team_id}",
                },
            )
            if team_name:
                team["name"] = team_name
            code = f"{team_id}.{uuid.uuid4().hex}"
            self._codes[code] = {
                "team": team_id,
                "user": user,
                "expires": self._clock() + CODE_SECONDS,
            }
            return code

    def uninstall(self, team_id: str) -> list[str]:
        """The app is removed from the workspace: its tokens answer ``token_revoked`` from
        now on (the events Slack sends then are the test's to send). Returns them."""
        with self._lock:
            tokens = [t for t, owner in self._token_teams.items() if owner == team_id]
            self._dead_tokens.update(tokens)
            for refresh, owner in list(self._refresh_tokens.items()):
                if owner == team_id:
                    del self._refresh_tokens[refresh]
            return tokens

    def team_of_token(self, token: str) -> str:
        """The workspace a bot token belongs to (see ``__init__``)."""
        with self._lock:
            return self._token_teams.get(token, TEAM_ID)

    def response_url(
        self, channel: str | None = None, user: str | None = None, message_ts: str | None = None
    ) -> str:
        """A fresh response_url. ``channel``/``user`` label the replies in the event feed;
        ``message_ts`` is the message that ``replace_original``/``delete_original`` act on."""
        token = uuid.uuid4().hex
        with self._lock:
            self._response_targets[token] = {"channel": channel, "user": user, "ts": message_ts}
        return f"{self.base_url}/respond/{token}"

    # what the playground page shows

    def events_since(self, seq: int = 0) -> list[Event]:
        with self._lock:
            return [e for e in self._events if e.seq > seq]

    def messages_in(self, channel: str) -> list[dict[str, Any]]:
        """The channel's current messages (updates applied, deletions gone), oldest first."""
        with self._lock:
            return copy.deepcopy(self._channels.get(channel, []))

    def published_home(self, user_id: str) -> dict[str, Any] | None:
        """The App Home view last published for ``user_id`` (what the page's Home tab shows)."""
        with self._lock:
            return copy.deepcopy(self._home_views.get(user_id))

    def modal(self, view_id: str) -> dict[str, Any] | None:
        with self._lock:
            return copy.deepcopy(self._modals.get(view_id))

    # request handling (server threads)

    def _handle_api(
        self, method: str, token: str | None, params: dict[str, Any] | None
    ) -> _Reply | None:
        with self._lock:
            if params is None:
                return _Reply(200, _error("invalid_json"))
            if method in CLIENT_METHODS:
                return _Reply(200, self._api_oauth_v2_access(params))
            if not token:
                return _Reply(200, _error("not_authed"))
            if problem := _token_problem(method, token):
                return _Reply(200, _error(problem))
            if token in self._dead_tokens:
                return _Reply(200, _error("token_revoked"))
            expires = self._token_expiry.get(token)
            if expires is not None and expires <= self._clock():
                return _Reply(200, _error("token_expired"))
            if (limited := self._over_limit(method)) is not None:
                return limited
            handler = getattr(self, "_api_" + method.replace(".", "_"), None)
            self._token = token
            try:
                return _Reply(200, handler(params) if handler else _error("unknown_method"))
            finally:
                self._token = None

    def _over_limit(self, method: str) -> _Reply | None:
        """A 429 when ``method`` already had its minute's worth of calls (callers hold the lock)."""
        limit = RATE_LIMITS.get(method)
        if limit is None:
            return None
        now = self._clock()
        recent = [t for t in self._recent.get(method, []) if t > now - 60]
        if len(recent) >= limit:
            self._recent[method] = recent
            wait = max(1, int(recent[0] + 60 - now + 0.999))
            return _Reply(429, _error("ratelimited"), {"Retry-After": str(wait)})
        self._recent[method] = [*recent, now]
        return None

    def _handle_response(self, token: str, payload: Any) -> _Reply:
        """Answer a response_url POST the way Slack does: 200 "ok", or 4xx with a bare error."""
        with self._lock:
            target = self._response_targets.get(token)
            if target is None:
                return _Reply(404, "no_such_url")
            if not isinstance(payload, dict):
                return _Reply(400, "invalid_payload")
            delete = _truthy(payload.get("delete_original"))
            replace = _truthy(payload.get("replace_original"))
            problem = None if delete else _check_message(payload)
            if problem is not None:
                return _Reply(400, problem["error"])
            channel, ts = target["channel"], target["ts"]
            original = self._find(channel, ts) if delete or replace else None
            if not ((delete or replace) and ts):
                ts = self._next_ts()
            response_type = payload.get("response_type") or "ephemeral"
            if original is not None and delete:
                self._channels[str(channel)].remove(original)
            elif original is not None:  # replace_original on a channel message edits it
                original.pop("blocks", None)
                original.update({k: payload[k] for k in ("text", "blocks") if payload.get(k)})
            elif channel and response_type == "in_channel" and not replace:
                self._store(channel, self._message(ts, payload))
            self._emit(
                "response",
                channel,
                {**payload, "ts": ts},
                user=target["user"],
                response_type=response_type,
                replace_original=replace,
                delete_original=delete,
            )
            return _Reply(200, "ok")

    # state helpers (callers hold the lock)

    def _next_ts(self) -> str:
        micros = max(int(self._clock() * 1_000_000), self._last_micros + 1)
        self._last_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _emit(self, kind: str, channel: str | None, source: dict[str, Any], **extra: Any) -> None:
        content = {k: source.get(k) for k in ("ts", "text", "blocks")}
        event = Event(len(self._events) + 1, kind, channel, **copy.deepcopy({**content, **extra}))
        self._events.append(event)

    def _message(self, ts: str, params: dict[str, Any]) -> dict[str, Any]:
        team_id, team = self._caller()
        author = {"user": team["bot_user"], "bot_id": team["bot_id"], "app_id": APP_ID}
        message = {"type": "message", **author, "team": team_id, "ts": ts}
        message["text"] = params.get("text") or ""
        message.update({k: params[k] for k in ("blocks", "metadata", "thread_ts") if params.get(k)})
        return message

    def _store(self, channel: str, message: dict[str, Any]) -> None:
        self._channels.setdefault(channel, []).append(message)

    def _is_member(self, channel: str) -> bool:
        return channel.startswith("D") or channel in self._joined

    def _find(self, channel: Any, ts: Any) -> dict[str, Any] | None:
        return next((m for m in self._channels.get(str(channel), []) if m["ts"] == ts), None)

    def _caller(self) -> tuple[str, dict[str, str]]:
        """The workspace of the call being answered (its id and bot), from the calling token:
        what Slack stamps on the views and messages a call makes."""
        team_id = self._token_teams.get(self._token or "", TEAM_ID)
        return team_id, self._teams[team_id]

    # Web API methods (called with the lock held)

    def _api_auth_test(self, _: dict[str, Any]) -> dict[str, Any]:
        """Who the calling token is: the bot of the workspace the token belongs to."""
        team_id, team = self._caller()
        return _ok(
            url=f"https://{team_id.lower()}.slack.com/"
            if team_id != TEAM_ID
            else ("https://paperboy.slack.com/"),
            team=team["name"],
            user="paperboy",
            team_id=team_id,
            user_id=team["bot_user"],
            bot_id=team["bot_id"],
            is_enterprise_install=False,
        )

    def _api_oauth_v2_access(self, p: dict[str, Any]) -> dict[str, Any]:
        """Exchange a code from the consent page (``authorize``) for the workspace's bot
        token, or (token rotation) a refresh token for a fresh one. The client id and secret
        come as HTTP Basic auth or form fields, as Slack accepts them."""
        app = self._oauth_app
        if not p.get("client_id"):
            return _error("invalid_client_id")
        if app is None or p["client_id"] != app["client_id"]:
            return _error("invalid_client_id")
        if p.get("client_secret") != app["client_secret"]:
            return _error("bad_client_secret")
        if p.get("grant_type") == "refresh_token":
            team_id = self._refresh_tokens.pop(str(p.get("refresh_token") or ""), None)
            if team_id is None:
                return _error("invalid_refresh_token")
            return self._grant(team_id, None, rotation=True)
        grant = self._codes.pop(str(p.get("code") or ""), None)  # a code is good once
        if grant is None or grant["expires"] <= self._clock():
            return _error("invalid_code")
        return self._grant(grant["team"], grant["user"], rotation=app["rotation"])

    def _grant(self, team_id: str, user: str | None, *, rotation: bool) -> dict[str, Any]:
        team = self._teams[team_id]
        token = ("xoxe.xoxb-" if rotation else "xoxb-") + f"{team_id}-{uuid.uuid4().hex[:12]}"
        self._token_teams[token] = team_id
        extra: dict[str, Any] = {}
        if rotation:
            seconds = (self._oauth_app or {}).get("token_seconds", ROTATING_TOKEN_SECONDS)
            refresh = f"xoxe-1-{uuid.uuid4().hex}"
            self._refresh_tokens[refresh] = team_id
            self._token_expiry[token] = self._clock() + seconds
            extra = {"refresh_token": refresh, "expires_in": seconds}
        return _ok(
            app_id=APP_ID,
            authed_user={"id": user} if user else {},
            scope="commands,chat:write",
            token_type="bot",
            access_token=token,
            bot_user_id=team["bot_user"],
            team={"id": team_id, "name": team["name"]},
            enterprise=None,
            is_enterprise_install=False,
            **extra,
        )

    def _api_apps_connections_open(self, _: dict[str, Any]) -> dict[str, Any]:
        """What Slack answers an app whose Socket Mode is off (the playground runs over HTTP)."""
        return _error("access_denied")

    def _api_chat_postMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = str(p.get("channel") or "")
        if not channel:
            return _error("channel_not_found")
        if channel[0] in "UW":  # posting to a user id lands in the DM with them, as on Slack
            channel = "D" + channel
        elif channel.startswith("D") and channel not in self._channels:
            return _error("channel_not_found")  # a DM nobody opened (or one that is gone)
        if channel in self._private and not self._is_member(channel):
            return _error("not_in_channel")  # chat:write.public covers public channels only
        if problem := _check_message(p):
            return problem
        message = self._message(self._next_ts(), p)
        self._store(channel, message)
        self._emit("message", channel, message)
        return _ok(channel=channel, ts=message["ts"], message=copy.deepcopy(message))

    def _api_chat_postEphemeral(self, p: dict[str, Any]) -> dict[str, Any]:
        if not p.get("channel") or not p.get("user"):
            return _error("invalid_arguments")
        if problem := _check_message(p):
            return problem
        ts = self._next_ts()
        self._emit("ephemeral", p["channel"], {**p, "ts": ts}, user=p["user"])
        return _ok(message_ts=ts)

    def _api_chat_update(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._find(p.get("channel"), p.get("ts"))
        if message is None:
            return _error("message_not_found")
        if problem := _check_message(p):
            return problem
        message.update({k: p[k] for k in ("text", "blocks", "metadata") if k in p})
        message["edited"] = {"user": self._caller()[1]["bot_user"], "ts": self._next_ts()}
        self._emit("update", p["channel"], message)
        return _ok(
            channel=p["channel"],
            ts=message["ts"],
            text=message["text"],
            message=copy.deepcopy(message),
        )

    def _api_chat_delete(self, p: dict[str, Any]) -> dict[str, Any]:
        message = self._find(p.get("channel"), p.get("ts"))
        if message is None:
            return _error("message_not_found")
        self._channels[p["channel"]].remove(message)
        self._emit("delete", p["channel"], {"ts": message["ts"]})
        return _ok(channel=p["channel"], ts=message["ts"])

    def _api_chat_getPermalink(self, p: dict[str, Any]) -> dict[str, Any]:
        channel, ts = p.get("channel"), p.get("message_ts")
        if self._find(channel, ts) is None:
            return _error("message_not_found")
        link = f"https://paperboy.slack.com/archives/{channel}/p{str(ts).replace('.', '')}"
        return _ok(channel=channel, permalink=link)

    def _api_conversations_open(self, p: dict[str, Any]) -> dict[str, Any]:
        if p.get("channel"):
            return _ok(no_op=True, already_open=True, channel={"id": p["channel"]})
        users = [u for u in str(p.get("users") or "").split(",") if u]
        if len(users) != 1:  # group DMs are not something Paperboy opens
            return _error("invalid_arguments")
        if users[0] == self._caller()[1]["bot_user"]:
            return _error("cannot_dm_bot")
        if self._users.get(users[0], {}).get("deleted"):
            return _error("user_disabled")
        channel = "D" + users[0]
        existed = channel in self._channels
        self._channels.setdefault(channel, [])
        return _ok(no_op=existed, already_open=existed, channel={"id": channel})

    def _api_conversations_join(self, p: dict[str, Any]) -> dict[str, Any]:
        """Join a public channel (``channels:join``); DMs and private channels cannot be joined."""
        channel = str(p.get("channel") or "")
        if not channel.startswith("C"):
            return _error(
                "method_not_supported_for_channel_type" if channel else "channel_not_found"
            )
        if channel in self._private:
            return _error("method_not_supported_for_channel_type")
        already = channel in self._joined
        self._joined.add(channel)
        extra = {"warning": "already_in_channel"} if already else {}
        info = {"id": channel, "is_channel": True, "is_private": False, "is_member": True}
        return _ok(channel=info, **extra)

    def _api_conversations_history(self, p: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages newest first, honouring oldest/latest/inclusive/limit/cursor.
        Only for conversations the bot is in (``not_in_channel`` otherwise), as on Slack: a
        message posted with chat:write.public cannot be read back without joining."""
        if not p.get("channel"):
            return _error("channel_not_found")
        if not self._is_member(str(p["channel"])):
            return _error("not_in_channel")
        cursor = str(p.get("cursor") or 0)
        if not cursor.isdigit():
            return _error("invalid_cursor")
        oldest, latest = Decimal(str(p.get("oldest") or 0)), Decimal(str(p.get("latest") or "9e12"))
        inclusive = _truthy(p.get("inclusive"))

        def wanted(m: dict[str, Any]) -> bool:
            ts = Decimal(m["ts"])
            in_range = oldest <= ts <= latest if inclusive else oldest < ts < latest
            return in_range and m.get("thread_ts", m["ts"]) == m["ts"]  # no thread replies

        found = [m for m in reversed(self._channels.get(p["channel"], [])) if wanted(m)]
        start, limit = int(cursor), int(p.get("limit") or 100)
        page = copy.deepcopy(found[start : start + limit])
        if not _truthy(p.get("include_all_metadata")):
            for m in page:
                m.pop("metadata", None)
        more = start + limit < len(found)
        next_cursor = str(start + limit) if more else ""
        return _ok(
            messages=page,
            has_more=more,
            pin_count=0,
            response_metadata={"next_cursor": next_cursor},
        )

    def _api_users_info(self, p: dict[str, Any]) -> dict[str, Any]:
        """A user whose tz_offset is computed for the fake's clock, so DST is real."""
        user_id = str(p.get("user") or "")
        if not user_id:
            return _error("user_not_found")
        info = self._users.get(user_id, {"tz": DEFAULT_TZ, "real_name": None, "deleted": False})
        name = info["real_name"] or f"User {user_id}"
        now = datetime.fromtimestamp(self._clock(), ZoneInfo(info["tz"]))
        offset = now.utcoffset()
        user = {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": user_id.lower(),
            "real_name": name,
            "deleted": info["deleted"],
            "is_bot": user_id == BOT_USER_ID,
            "tz": info["tz"],
            "tz_label": now.tzname(),
            "tz_offset": int(offset.total_seconds()) if offset else 0,
            "profile": {"real_name": name, "display_name": name},
        }
        return _ok(user=user)

    def _api_views_publish(self, p: dict[str, Any]) -> dict[str, Any]:
        view, user_id = p.get("view"), p.get("user_id")
        if not user_id or not isinstance(view, dict) or view.get("type") != "home":
            return _error("invalid_arguments")
        if errors := validate_blocks(view.get("blocks", []), MAX_VIEW_BLOCKS):
            return _error("invalid_blocks", errors=errors)
        team_id, _ = self._caller()
        published = {**view, "id": f"V{len(self._home_views) + 1:08d}", "team_id": team_id}
        self._home_views[user_id] = published
        self._emit("home", None, {}, user=user_id, view=published)
        return _ok(view=copy.deepcopy(published))

    def _api_views_open(self, p: dict[str, Any]) -> dict[str, Any]:
        """Open a modal. A trigger_id works once (Slack also expires it after 3 seconds)."""
        trigger, view = str(p.get("trigger_id") or ""), p.get("view")
        if not trigger:
            return _error("invalid_trigger_id")
        if trigger in self._used_triggers:
            return _error("exchanged_trigger_id")
        issued = trigger.split(".")[0]
        if issued.isdigit() and int(issued) > 10**9 and self._clock() - int(issued) > 3 + 1:
            # Trigger ids made like Slack's test harness makes them lead with the second they
            # were issued (+1: that second is truncated); Slack expires them after 3 seconds.
            return _error("expired_trigger_id")
        if not isinstance(view, dict) or view.get("type") != "modal":
            return _error("invalid_arguments")
        if errors := _check_modal(view):
            return _error("invalid_arguments", response_metadata={"messages": errors})
        if errors := validate_blocks(view.get("blocks", []), MAX_VIEW_BLOCKS):
            return _error("invalid_blocks", errors=errors)
        self._used_triggers.add(trigger)
        view_id = f"VM{len(self._modals) + 1:07d}"
        team_id, team = self._caller()
        opened = {
            **view,
            "id": view_id,
            "team_id": team_id,
            "app_id": APP_ID,
            "bot_id": team["bot_id"],
            "hash": uuid.uuid4().hex[:16],
            "private_metadata": view.get("private_metadata") or "",
            "callback_id": view.get("callback_id") or "",
            "state": {"values": {}},
        }
        self._modals[view_id] = opened
        self._emit("view", None, {}, view=opened)
        return _ok(view=copy.deepcopy(opened))

    def _api_views_update(self, p: dict[str, Any]) -> dict[str, Any]:
        """Replace an open modal's content. A ``hash`` that is not the view's current one is
        refused (``hash_conflict``), as Slack does to keep a stale update from winning."""
        view, current = p.get("view"), self._modals.get(str(p.get("view_id") or ""))
        if current is None:
            return _error("not_found")
        if p.get("hash") and p["hash"] != current["hash"]:
            return _error("hash_conflict")
        if not isinstance(view, dict) or view.get("type") != "modal":
            return _error("invalid_arguments")
        if errors := _check_modal(view):
            return _error("invalid_arguments", response_metadata={"messages": errors})
        if errors := validate_blocks(view.get("blocks", []), MAX_VIEW_BLOCKS):
            return _error("invalid_blocks", errors=errors)
        return _ok(view=self._replaced(current, view))

    def replace_modal(self, view_id: str, view: dict[str, Any]) -> dict[str, Any] | None:
        """What Slack does with a ``view_submission``'s ``response_action: update``: the open
        modal shows ``view`` (checked as views.update checks it; None when refused)."""
        with self._lock:
            current = self._modals.get(view_id)
            if current is None or not isinstance(view, dict) or view.get("type") != "modal":
                return None
            if _check_modal(view) or validate_blocks(view.get("blocks", []), MAX_VIEW_BLOCKS):
                return None
            return self._replaced(current, view)

    def _replaced(self, current: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
        updated = {
            **view,
            **{k: current[k] for k in ("id", "team_id", "app_id", "bot_id")},
            "hash": uuid.uuid4().hex[:16],
            "private_metadata": view.get("private_metadata") or "",
            "callback_id": view.get("callback_id") or "",
            "state": {"values": {}},
        }
        self._modals[current["id"]] = updated
        self._emit("view", None, {}, view=updated)
        return copy.deepcopy(updated)

    # files upload v2 (slack_sdk's files_upload_v2: get a URL, POST the bytes, complete)

    def uploaded_file(self, file_id: str) -> dict[str, Any] | None:
        """A file shared by files.completeUploadExternal: name, title, bytes, channel."""
        with self._lock:
            found = self._files.get(file_id)
            return copy.deepcopy(found) if found and found["completed"] else None

    def _api_files_getUploadURLExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        filename = str(p.get("filename") or "")
        try:
            length = int(str(p.get("length") or ""))
        except ValueError:
            length = 0
        if not filename or length <= 0:
            return _error("invalid_arguments")
        file_id = "F" + uuid.uuid4().hex[:10].upper()
        self._files[file_id] = {
            "id": file_id,
            "name": filename,
            "length": length,
            "data": None,
            "completed": False,
        }
        return _ok(upload_url=f"{self.base_url}/upload/{file_id}", file_id=file_id)

    def _handle_upload(self, file_id: str, body: bytes) -> _Reply:
        """The upload URL: the file's bytes, exactly as many as files.getUploadURLExternal
        was told, once."""
        with self._lock:
            found = self._files.get(file_id)
            if found is None or found["data"] is not None:
                return _Reply(404, "not_found")
            if len(body) != found["length"]:
                return _Reply(400, "length_mismatch")
            found["data"] = body
            return _Reply(200, f"OK - {len(body)}")

    def _api_files_completeUploadExternal(self, p: dict[str, Any]) -> dict[str, Any]:
        try:
            wanted = json.loads(p["files"]) if isinstance(p.get("files"), str) else p.get("files")
        except ValueError:
            wanted = None
        if not isinstance(wanted, list) or not wanted:
            return _error("invalid_arguments")
        files = []
        for item in wanted:
            found = self._files.get(str((item or {}).get("id") or ""))
            if found is None or found["completed"]:
                return _error("file_not_found")
            if found["data"] is None:  # completed before its bytes were uploaded
                return _error("file_upload_not_complete")
            files.append((found, str(item.get("title") or found["name"])))
        channel = str(p.get("channel_id") or "")
        if channel:  # a DM the bot opened, or a channel it is in (files are not public posts)
            if channel.startswith("D") and channel not in self._channels:
                return _error("channel_not_found")
            if not self._is_member(channel):
                return _error("not_in_channel")
        shared = []
        for found, title in files:
            found.update(completed=True, title=title, channel=channel or None)
            shared.append(
                {"id": found["id"], "name": found["name"], "title": title, "size": found["length"]}
            )
        if channel:
            comment = str(p.get("initial_comment") or "")
            message = self._message(self._next_ts(), {"text": comment})
            message["files"] = copy.deepcopy(shared)
            self._store(channel, message)
            self._emit("message", channel, message)
        return _ok(files=shared)


# --- HTTP plumbing -----------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog of 5 drops connections when the app answers many
    # lookups at once (each drop costs the client a 1 s retransmit); Slack's edge would not.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], fake: FakeSlack) -> None:
        super().__init__(address, _Handler)
        self.fake = fake

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up is routine here; anything else is a bug worth a traceback."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            log.exception("FakeSlack failed to answer %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr lines (the playground page shows what happened)."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        url = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            reply = self._dispatch(url.path, url.query, body)
        except Exception:  # a bug in the fake: answer like Slack's 500 rather than hang up
            log.exception("FakeSlack failed on %s", url.path)
            reply = _Reply(500, _error("fatal_error"))
        if reply is None:  # injected disconnect: no status line, the socket just closes
            self.close_connection = True
            return
        is_json = isinstance(reply.body, dict)
        data = (json.dumps(reply.body) if is_json else str(reply.body)).encode()
        self.send_response(reply.status)
        self.send_header(
            "Content-Type", "application/json; charset=utf-8" if is_json else "text/plain"
        )
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self, path: str, query: str, body: bytes) -> _Reply | None:
        fake = self.server.fake
        if path.startswith("/api/"):
            params = self._params(query, body)
            auth = self.headers.get("Authorization", "")
            token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else None
            if params is not None:
                token = str(params.pop("token", "")) or token
                if auth.startswith("Basic "):  # oauth.v2.access: the app's id and secret
                    with contextlib.suppress(ValueError):
                        pair = base64.b64decode(auth.removeprefix("Basic ").strip()).decode()
                        client_id, _, secret = pair.partition(":")
                        params.setdefault("client_id", client_id)
                        params.setdefault("client_secret", secret)
            return fake._handle_api(path.removeprefix("/api/"), token, params)
        if path.startswith("/upload/") and self.command == "POST":
            return fake._handle_upload(path.removeprefix("/upload/"), body)
        if path.startswith("/respond/") and self.command == "POST":
            try:
                payload = json.loads(body or b"null")
            except ValueError:
                payload = None
            return fake._handle_response(path.removeprefix("/respond/"), payload)
        return _Reply(404, "not_found")

    def _params(self, query: str, body: bytes) -> dict[str, Any] | None:
        """Merge query string and form or JSON body, decoding JSON-valued form fields such as
        ``blocks``. None means the JSON body was unreadable."""
        params: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
        if self.headers.get("Content-Type", "").split(";")[0].strip() == "application/json":
            try:
                decoded = json.loads(body or b"{}")
            except ValueError:
                return None
            if not isinstance(decoded, dict):
                return None
            params.update(decoded)
        elif body:
            params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        for key in _JSON_PARAMS:
            if isinstance(params.get(key), str) and params[key]:
                with contextlib.suppress(ValueError):  # kept as text: answered invalid_*_format
                    params[key] = json.loads(params[key])
        return params
