"""Payloads of the surfaces beyond slash commands and message buttons, as Slack sends them
(https://docs.slack.dev/reference/interaction-payloads): a control used on the Home tab or
in a modal (``block_actions`` with a ``view`` container), a global shortcut, a message
shortcut. Each is POSTed signed by the harness, as a ``payload=`` form."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

from bot.playground.fake_slack import APP_ID, TEAM_ID
from tests.slack_harness import VERIFICATION_TOKEN, SlackHarness, _user, trigger_id


def post_payload(slack: SlackHarness, payload: dict[str, Any]) -> tuple[int, str]:
    return slack.post(urlencode({"payload": json.dumps(payload)}).encode())


def view_action(
    view: dict[str, Any], action: dict[str, Any], *, user: str = "U1"
) -> dict[str, Any]:
    """``block_actions`` for ``action`` (``action_id`` plus what the element sends, e.g.
    ``selected_time``) used in ``view`` (a published Home tab or an open modal)."""
    return {
        "type": "block_actions",
        "user": _user(user),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "container": {"type": "view", "view_id": view.get("id")},
        "trigger_id": trigger_id(),
        "team": {"id": TEAM_ID, "domain": "paperboy"},
        "enterprise": None,
        "is_enterprise_install": False,
        "view": view,
        "actions": [{"block_id": "b", "action_ts": f"{time.time():.6f}", **action}],
    }


def global_shortcut(callback_id: str, *, user: str = "U1") -> dict[str, Any]:
    return {
        "type": "shortcut",
        "token": VERIFICATION_TOKEN,
        "action_ts": f"{time.time():.6f}",
        "team": {"id": TEAM_ID, "domain": "paperboy"},
        "user": _user(user),
        "callback_id": callback_id,
        "trigger_id": trigger_id(),
        "is_enterprise_install": False,
        "enterprise": None,
    }


def message_shortcut(
    slack: SlackHarness,
    callback_id: str,
    text: str,
    *,
    user: str = "U1",
    channel: str = "C1",
    ts: str = "1700000000.000200",
    thread_ts: str | None = None,
) -> tuple[dict[str, Any], str]:
    """A message shortcut on a message saying ``text``; returns (payload, response_url)."""
    response_url = slack.fake.response_url(channel=channel, user=user)
    message = {"type": "message", "user": "U999", "text": text, "ts": ts}
    if thread_ts:
        message["thread_ts"] = thread_ts
    payload = {
        "type": "message_action",
        "token": VERIFICATION_TOKEN,
        "action_ts": f"{time.time():.6f}",
        "team": {"id": TEAM_ID, "domain": "paperboy"},
        "user": _user(user),
        "channel": {"id": channel, "name": "general"},
        "callback_id": callback_id,
        "trigger_id": trigger_id(),
        "message_ts": ts,
        "message": message,
        "response_url": response_url,
        "is_enterprise_install": False,
        "enterprise": None,
    }
    return payload, response_url


def element(view: dict[str, Any], action_id: str) -> dict[str, Any]:
    """The element with ``action_id`` in ``view`` (accessories, actions and inputs)."""
    for block in view.get("blocks") or []:
        for el in [*block.get("elements", []), block.get("accessory"), block.get("element")]:
            if isinstance(el, dict) and el.get("action_id") == action_id:
                return el
    raise AssertionError(f"no element {action_id!r} in the view")
