"""Drive the real Slack app over HTTP the way Slack does, against the local Slack stand-in.

    harness = SlackHarness(tmp_path)            # FakeSlack + engine (seed corpus) + waitress
    status, url = harness.slash("diffusion")    # signed form POST to /slack/events
    reply = harness.reply(url)                  # what the app sent to that response_url
    status, url = harness.click("more", reply_button_value, message_ts=...)
    status, ack = harness.submit_view(fake.modals()[-1], {"share_channel": "C42"})

Requests are built from Slack's documentation (form encoding, ``X-Slack-Signature`` v0
HMAC-SHA256 over ``v0:<timestamp>:<body>``, ``X-Slack-Request-Timestamp``), independently of
the playground's own request builder, so the tests check the app against Slack's contract.
Waiting is done with ``FakeSlack.wait_for``, never with sleeps.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import shutil
import socket
import sqlite3
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bot.engine.search import Engine
from bot.playground.fake_slack import APP_ID, TEAM_ID, validate_blocks
from bot.settings import SEED_DIR, Settings
from bot.slack.server import HttpServer, make_wsgi_app, server_options
from tests.fake_slack import FakeSlack

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
BOT_TOKEN = "xoxb-test-paperboy"
#: The deprecated verification token Slack still sends in every payload (Bolt ignores it).
VERIFICATION_TOKEN = "gIkuvaNzQIHg97ATvDxqgjtO"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def signed_headers(
    body: bytes,
    secret: str = SIGNING_SECRET,
    *,
    timestamp: int | None = None,
    content_type: str = "application/x-www-form-urlencoded",
) -> dict[str, str]:
    """The headers Slack sends with a request to /slack/events: timestamp and v0 signature."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": sign(secret, ts, body),
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
    }


def http(
    url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """GET (or POST ``body``) with urllib; returns the status and the body as text, also for
    HTTP errors."""
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def free_port() -> int:
    """A port nothing listens on now, for a server started in another process."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def seeded_engine(db_path: Path, template: Path | None = None) -> Engine:
    """An engine over ``db_path`` filled from ``data/``; copies ``template`` (a seeded db and
    its index) when given, which is faster than reading the seed files again."""
    if template is not None and template.exists():
        # The backup API, not a file copy: the template's latest writes may sit in its WAL.
        with (
            closing(sqlite3.connect(template)) as source,
            closing(sqlite3.connect(db_path)) as copy,
        ):
            source.backup(copy)
        index = Path(str(template) + ".index")
        if index.is_dir():
            shutil.copytree(index, Path(str(db_path) + ".index"))
        return Engine.open(db_path)
    return Engine.open(db_path, seed_dir=SEED_DIR)


class SlackHarness:
    """FakeSlack + the Bolt app behind waitress on a free 127.0.0.1 port + a seeded engine."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        engine: Engine | None = None,
        template_db: Path | None = None,
        fake: FakeSlack | None = None,
        secret: str = SIGNING_SECRET,
        **settings: Any,
    ) -> None:
        """``fake``: a FakeSlack to use (e.g. with a test clock; started here if needed).
        ``settings``: Settings fields to override (e.g. ``digest_grace_seconds=60``)."""
        self.fake = fake or FakeSlack()
        try:
            self.fake.base_url  # noqa: B018 - raises when the fake is not running yet
        except RuntimeError:
            self.fake.start()
        self.secret = secret
        self.engine = engine or seeded_engine(tmp_path / "paperboy.db", template_db)
        fields: dict[str, Any] = {
            "db_path": self.engine.db_path,
            "slack_bot_token": BOT_TOKEN,
            "slack_signing_secret": secret,
            "slack_api_url": self.fake.api_url,
            "port": 0,
            "host": "127.0.0.1",
        }
        self.settings = Settings(**{**fields, **settings})
        # The app's pool for work after ack(); shut down in close() so no lookup outlives a test.
        self.executor = ThreadPoolExecutor(8, thread_name_prefix="harness-work")
        # The app on a background thread, at a free loopback port.
        wsgi = make_wsgi_app(self.settings, self.engine, executor=self.executor)
        self.server = HttpServer(wsgi, port=0, **server_options(self.settings)).start()
        self.url = self.server.url
        self.trigger_ids: list[str] = []  # of the clicks, in order (views.open must use them)

    def close(self) -> None:
        self.server.stop()
        self.executor.shutdown(wait=True)
        self.fake.stop()

    def __enter__(self) -> SlackHarness:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def with_settings(self, **changes: Any) -> Settings:
        return dataclasses.replace(self.settings, **changes)

    # --- HTTP as Slack sends it ---------------------------------------------------------------

    def post(
        self,
        body: bytes,
        *,
        content_type: str = "application/x-www-form-urlencoded",
        timestamp: int | None = None,
        secret: str | None = None,
        signature: str | None = None,
        path: str = "/slack/events",
    ) -> tuple[int, str]:
        headers = signed_headers(
            body, secret or self.secret, timestamp=timestamp, content_type=content_type
        )
        if signature:
            headers["X-Slack-Signature"] = signature
        return self.request(path, body, headers)

    def request(
        self, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, str]:
        return http(self.url + path, body, headers)

    def slash(
        self,
        text: str,
        user: str = "U1",
        channel: str = "C1",
        *,
        command: str = "/papers",
        escape: bool = True,
        **post_options: Any,
    ) -> tuple[int, str]:
        """Send a slash command; returns (HTTP status, the response_url it carried).

        ``text`` is what the user typed; like Slack (``should_escape: true`` in manifest.yml)
        it is sent with ``&``, ``<``, ``>`` as entities unless ``escape=False``.
        """
        form, response_url = slash_form(
            self.fake, text, user=user, channel=channel, command=command, escape=escape
        )
        status, _ = self.post(form, **post_options)
        return status, response_url

    def click(
        self,
        action_id: str,
        value: str,
        *,
        user: str = "U1",
        channel: str = "C1",
        message_ts: str = "1700000000.000100",
        ephemeral: bool = True,
        label: str = "button",
        channel_name: str | None = None,
        block_id: str = "b1",
        style: str | None = None,
        **post_options: Any,
    ) -> tuple[int, str]:
        """Click a button: a signed ``payload=`` block_actions form (see ``block_actions``);
        returns (status, response_url).
        """
        payload, response_url = block_actions(
            self.fake,
            action_id,
            value,
            user=user,
            channel=channel,
            message_ts=message_ts,
            ephemeral=ephemeral,
            label=label,
            channel_name=channel_name,
            block_id=block_id,
            style=style,
        )
        self.trigger_ids.append(payload["trigger_id"])
        body = urlencode({"payload": json.dumps(payload)}).encode()
        status, _ = self.post(body, **post_options)
        return status, response_url

    def press(self, message: dict[str, Any], action_id: str, **options: Any) -> tuple[int, str]:
        """Click the button ``action_id`` of a message only the member sees (an ephemeral
        answer), sending what Slack sends: the button's label, style, value and block id."""
        for block in message.get("blocks") or []:
            for element in block.get("elements") or []:
                if isinstance(element, dict) and element.get("action_id") == action_id:
                    return self.click(
                        action_id,
                        element.get("value") or "",
                        label=element["text"]["text"],
                        style=element.get("style"),
                        block_id=block.get("block_id") or "b1",
                        **options,
                    )
        raise AssertionError(f"no button {action_id} in the message")

    def submit_view(
        self, view: dict[str, Any], answers: dict[str, str | None], *, user: str = "U1"
    ) -> tuple[int, Any]:
        """Press a modal's submit button: a signed ``view_submission`` payload.

        See ``view_submission`` for ``view`` and ``answers``. Returns (HTTP status, the ack's
        JSON body, or ``""`` for an empty ack).
        """
        payload = view_submission(view, answers, user=user)
        status, body = self.post(urlencode({"payload": json.dumps(payload)}).encode())
        return status, (json.loads(body) if body.strip() else "")

    def event(self, event: dict[str, Any], **post_options: Any) -> tuple[int, str]:
        """Deliver an Events API callback (JSON), as Slack does."""
        body = json.dumps(event_callback(event)).encode()
        return self.post(body, content_type="application/json", **post_options)

    # --- what the app sent back ---------------------------------------------------------------

    def replies(self, response_url: str) -> list[dict[str, Any]]:
        token = response_url.rsplit("/", 1)[-1]
        return [r.payload for r in self.fake.responses if r.token == token]

    def reply(self, response_url: str, n: int = 1, timeout: float = 10.0) -> dict[str, Any]:
        """The ``n``-th payload POSTed to ``response_url`` (waits for it); checked like Slack."""
        replies = self.fake.wait_for(
            lambda: len(self.replies(response_url)) >= n and self.replies(response_url), timeout
        )
        payload = replies[n - 1]
        assert_valid(payload)
        return payload


def slash_command(
    fake: FakeSlack,
    text: str,
    *,
    user: str = "U1",
    channel: str = "C1",
    command: str = "/papers",
    escape: bool = True,
    app_id: str = APP_ID,
) -> tuple[dict[str, str], str]:
    """The fields Slack sends for a slash command (as an HTTP form or a Socket Mode payload),
    with a fresh response_url on ``fake``; returns (fields, response_url).

    ``text`` is what the user typed; like Slack (``should_escape: true`` in manifest.yml)
    it is sent with ``&``, ``<``, ``>`` as entities unless ``escape=False``.
    """
    response_url = fake.response_url(channel=channel, user=user)
    if escape:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    fields = {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "team_domain": "paperboy",
        "channel_id": channel,
        "channel_name": "general",
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id(),
    }
    return fields, response_url


def slash_form(fake: FakeSlack, text: str, **options: Any) -> tuple[bytes, str]:
    """``slash_command`` form-encoded, as Slack POSTs it; returns (body, response_url)."""
    fields, response_url = slash_command(fake, text, **options)
    return urlencode(fields).encode(), response_url


def block_actions(
    fake: FakeSlack,
    action_id: str,
    value: str,
    *,
    user: str = "U1",
    channel: str = "C1",
    message_ts: str = "1700000000.000100",
    ephemeral: bool = True,
    label: str = "button",
    channel_name: str | None = None,
    app_id: str = APP_ID,
    block_id: str = "b1",
    style: str | None = None,
) -> tuple[dict[str, Any], str]:
    """The ``block_actions`` payload of a button clicked on a message (an HTTP ``payload=``
    field or a Socket Mode ``interactive`` envelope), with a fresh response_url on ``fake``;
    returns (payload, response_url).

    ``channel_name`` is what Slack calls the conversation: by default "directmessage" for a
    ``D...`` id (as Slack names every DM), else "general"; group DMs are "mpdm-...".
    """
    response_url = fake.response_url(channel=channel, user=user, message_ts=message_ts)
    if channel_name is None:
        channel_name = "directmessage" if channel.startswith("D") else "general"
    payload = {
        "type": "block_actions",
        "user": _user(user),
        "api_app_id": app_id,
        "token": VERIFICATION_TOKEN,
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": ephemeral,
        },
        "trigger_id": trigger_id(),
        "team": {"id": TEAM_ID, "domain": "paperboy"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": channel_name},
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": label},
                "value": value,
                "action_ts": f"{time.time():.6f}",
                **({"style": style} if style else {}),
            }
        ],
    }
    return payload, response_url


def view_submission(
    view: dict[str, Any], answers: dict[str, str | None], *, user: str = "U1", app_id: str = APP_ID
) -> dict[str, Any]:
    """The ``view_submission`` payload of a modal's submit button.

    ``view`` is the modal as FakeSlack recorded it (``fake.modals()``); ``answers`` maps an
    input block's ``block_id`` to what the user chose or typed, and is turned into Slack's
    ``state.values`` by the element's type. Like Slack's client, a required input left empty
    is refused here, before anything is sent.
    """
    values: dict[str, Any] = {}
    for block in view.get("blocks") or []:
        if block.get("type") != "input":
            continue
        element, answer = block["element"], answers.get(block["block_id"])
        if answer is None and not block.get("optional"):
            raise AssertionError(f"Slack would not submit: {block['block_id']} is required")
        kind = element["type"]
        if kind == "conversations_select":
            state = {"type": kind, "selected_conversation": answer}
        elif kind == "plain_text_input":
            state = {"type": kind, "value": answer}
        else:
            raise NotImplementedError(f"submit_view cannot fill a {kind}")
        values[block["block_id"]] = {element["action_id"]: state}
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "paperboy"},
        "user": _user(user),
        "api_app_id": app_id,
        "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id(),
        "view": {**view, "state": {"values": values}},
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def event_callback(event: dict[str, Any], *, app_id: str = APP_ID) -> dict[str, Any]:
    """An Events API ``event_callback`` (POSTed as JSON, or in an ``events_api`` envelope)."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "api_app_id": app_id,
        "event": {"event_ts": f"{time.time():.6f}", **event},
        "type": "event_callback",
        "event_id": f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": TEAM_ID, "user_id": "UBOT", "is_bot": True}],
    }


def trigger_id() -> str:
    """A fresh trigger_id, as Slack sends with every command and click (each works once)."""
    return f"{int(time.time())}.{uuid.uuid4().int % 10**10}.{uuid.uuid4().hex[:24]}"


def assert_valid(message: dict[str, Any]) -> None:
    """The checks Slack applies to a message: fallback text set, blocks within limits."""
    assert message.get("text"), f"no fallback text in {message!r:.200}"
    errors = validate_blocks(message.get("blocks") or [])
    assert not errors, errors


def blocks_text(message: dict[str, Any]) -> str:
    """All the visible text of a message's blocks, joined (for assertions)."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") in ("mrkdwn", "plain_text") and isinstance(node.get("text"), str):
                out.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.get("blocks") or [])
    return "\n".join(out)


def buttons(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every button in the message by action_id."""
    found: dict[str, dict[str, Any]] = {}
    for block in message.get("blocks") or []:
        for element in block.get("elements", []) + [block.get("accessory") or {}]:
            if isinstance(element, dict) and element.get("type") == "button":
                found[element["action_id"]] = element
    return found


def _user(user: str) -> dict[str, str]:
    """The ``user`` object of an interaction payload, as Slack sends it."""
    return {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID}
