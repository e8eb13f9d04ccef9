"""The workspace a request is from (``services.request_team``), which keys a member's data:
the same as Bolt's ``context.team_id`` for every payload shape Slack sends, so a choice stored
by one listener is found by the others."""

from __future__ import annotations

import pytest
from slack_bolt.request import BoltRequest

from bot.slack.services import request_team

SHAPES = {
    "slash command": {"command": "/papers", "team_id": "T1", "user_id": "U1", "text": "gnn"},
    "button": {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": "U1", "team_id": "T1"},
    },
    # A modal opened in another workspace over Slack Connect: the installing workspace's.
    "modal over Slack Connect": {
        "type": "view_submission",
        "team": {"id": "T_USER"},
        "user": {"id": "U1", "team_id": "T_USER"},
        "view": {"id": "V1", "team_id": "T_USER", "app_installed_team_id": "T_INSTALL"},
    },
    # An event in a shared channel: the workspace the app is installed in, not the sender's.
    "shared channel event": {
        "type": "event_callback",
        "team_id": "T_OTHER",
        "authorizations": [{"team_id": "T_INSTALL", "user_id": "UBOT", "is_bot": True}],
        "event": {"type": "app_home_opened", "user": "U1"},
    },
    "org-wide install": {
        "type": "block_actions",
        "team": None,
        "user": {"id": "U1", "team_id": "T_GRID"},
    },
}


@pytest.mark.parametrize("name", SHAPES)
def test_the_workspace_is_the_one_bolt_gives_the_listeners(name: str) -> None:
    body = SHAPES[name]
    assert request_team(body) == BoltRequest(body=body, mode="socket_mode").context.team_id
    assert request_team(body) in {"T1", "T_INSTALL", "T_GRID"}


def test_no_workspace_is_an_empty_string() -> None:
    assert request_team({"type": "block_actions", "user": {"id": "U1"}}) == ""
