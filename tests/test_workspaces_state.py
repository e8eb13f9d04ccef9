"""Workspaces in the shared state (revision s020): slack_sdk's own installation and OAuth
state stores on our database, and an uninstalled workspace's members left out of the digest
run, the same on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from slack_sdk.oauth.installation_store import Installation

from bot.state import StateStore
from digest.subscriptions import Subscriptions

NOW = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if request.param == "sqlite":
        return StateStore(tmp_path / "state.db")
    return StateStore(request.getfixturevalue("postgres_url"))


def installation(team: str, token: str) -> Installation:
    return Installation(
        app_id="APAPERBOY",
        team_id=team,
        team_name=f"Team {team}",
        bot_token=token,
        bot_id="B" + team,
        bot_user_id="U" + team,
        bot_scopes="commands,chat:write",
        user_id="UINSTALLER",
    )


def test_installations_are_kept_per_workspace_and_deleted_per_workspace(store: StateStore):
    installs = store.installation_store("123.456")
    installs.save(installation("T1", "xoxb-one"))
    installs.save(installation("T2", "xoxb-two"))
    assert installs.find_bot(enterprise_id=None, team_id="T1").bot_token == "xoxb-one"
    assert installs.find_bot(enterprise_id=None, team_id="T2").bot_token == "xoxb-two"
    # Another app's client id sees none of them.
    assert store.installation_store("999.999").find_bot(enterprise_id=None, team_id="T1") is None
    installs.delete_all(enterprise_id=None, team_id="T2")
    assert installs.find_bot(enterprise_id=None, team_id="T2") is None
    assert installs.find_installation(enterprise_id=None, team_id="T2") is None
    assert installs.find_bot(enterprise_id=None, team_id="T1").bot_token == "xoxb-one"


def test_an_oauth_state_is_good_once_and_only_until_it_expires(store: StateStore):
    states = store.oauth_state_store(600)
    state = states.issue()
    assert states.consume(state) and not states.consume(state)
    assert not states.consume("forged")
    expired = store.oauth_state_store(-1).issue()
    assert not states.consume(expired)


def test_an_uninstalled_workspace_gets_no_digest_until_installed_again(store: StateStore):
    subs = Subscriptions(store)
    subs.add_topic("U1", "graph neural networks", NOW, team_id="T1")
    subs.add_topic("U2", "diffusion models", NOW, team_id="T2")
    assert [m.user_id for m in subs.members()] == ["U1", "U2"]
    assert store.workspace_uninstalled("T2", "2024-03-04T08:00:00+00:00")
    assert not store.workspace_uninstalled("T2", "2024-03-04T09:00:00+00:00")  # once
    assert store.uninstalled_workspaces() == {"T2"}
    assert [m.user_id for m in subs.members()] == ["U1"]
    assert subs.member("U2").topic_count == 1  # asked for by id: kept, data and all
    store.workspace_uninstalled("T1", "2024-03-04T08:00:00+00:00")
    assert not store.digests_on()
    store.workspace_installed("T2", "Team T2", "2024-03-05T08:00:00+00:00")
    assert [m.user_id for m in subs.members()] == ["U2"] and store.digests_on()


def test_a_member_or_their_conversation_names_their_workspace(store: StateStore):
    subs = Subscriptions(store)
    subs.add_topic("U1", "graph neural networks", NOW, team_id="T1")
    subs.set_dm_channel("U1", "DU1")
    subs.add_topic("U2", "diffusion models", NOW, team_id="T2")
    subs.set_channel("U2", "CPAPERS", NOW)
    assert store.team_of(user_id="U1") == "T1" and store.team_of(user_id="U2") == "T2"
    assert store.team_of(channel="DU1") == "T1" and store.team_of(channel="CPAPERS") == "T2"
    assert store.team_of(user_id="UNOBODY") is None and store.team_of(channel="C0") is None
