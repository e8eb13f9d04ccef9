"""Installing Paperboy into many workspaces (issue 12), through the real app over HTTP and the
local Slack stand-in: Bolt's OAuth flow (GET /slack/install -> the state cookie -> Slack's
consent page, here ``FakeSlack.authorize`` -> GET /slack/oauth_redirect -> oauth.v2.access),
each workspace's requests and digests with its own bot token (the stand-in records which
token every call used), uninstalls, and the failure pages."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from click.testing import CliRunner
from slack_sdk import WebClient

from bot.cli import main
from bot.playground.fake_slack import TEAM_ID
from bot.settings import Settings, SettingsError
from bot.slack.client import bot_token
from bot.slack.poster import SlackPoster
from bot.state import StateStore, state_for
from digest.delivery import Dispatcher
from digest.schedule import next_digest
from digest.subscriptions import Subscriptions
from tests.fake_slack import FakeSlack
from tests.slack_harness import SlackHarness, event_callback, free_port, http, slash_command
from tests.test_web_process import copy_db_without_index, due_member, serve, serve_env
from tests.test_workspaces_state import installation

CLIENT_ID, CLIENT_SECRET = "1111.2222", "oauth-client-secret"
OTHER_TEAM = "T2OTHER"


@pytest.fixture
def oauth(tmp_path: Path, seeded_db_template: Path, state_backend: str):
    """The app installed into many workspaces: no bot token, the app's client id and secret;
    installations and states in SQLite, then in PostgreSQL (``state_backend``)."""
    harness = SlackHarness(
        tmp_path,
        template_db=seeded_db_template,
        slack_bot_token=None,
        slack_client_id=CLIENT_ID,
        slack_client_secret=CLIENT_SECRET,
    )
    harness.fake.register_app(CLIENT_ID, CLIENT_SECRET)
    for user in ("U1", "U2"):
        harness.fake.set_user(user, tz="UTC")
    try:
        yield harness
    finally:
        harness.close()


def get(harness: SlackHarness, path: str, cookie: str | None = None) -> tuple[int, dict, str]:
    """GET as a browser does: (status, headers, page)."""
    headers = {"Cookie": cookie} if cookie else {}
    request = urllib.request.Request(harness.url + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def start_install(harness: SlackHarness) -> tuple[str, str]:
    """GET /slack/install: the page's "Add to Slack" link to Slack and the state cookie."""
    status, headers, page = get(harness, "/slack/install")
    assert status == 200 and "Add to Slack" in page
    link = re.search(r'href="(https://slack\.com/oauth/v2/authorize\?[^"]+)"', page)
    assert link, page
    query = parse_qs(urlsplit(link.group(1).replace("&amp;", "&")).query)
    assert query["client_id"] == [CLIENT_ID]
    assert "commands" in query["scope"][0].split(",")
    cookie = headers["Set-Cookie"].split(";")[0]
    assert cookie == f"slack-app-oauth-state={query['state'][0]}"
    return query["state"][0], cookie


def finish_install(harness: SlackHarness, state: str, cookie: str, code: str) -> tuple[int, str]:
    status, _, page = get(
        harness, "/slack/oauth_redirect?" + urlencode({"code": code, "state": state}), cookie
    )
    return status, page


def install(harness: SlackHarness, team: str, name: str) -> str:
    """The whole flow for ``team``; returns the bot token Slack gave it."""
    state, cookie = start_install(harness)
    status, page = finish_install(harness, state, cookie, harness.fake.authorize(team, name))
    assert status == 200 and "Paperboy is installed" in page and name in page
    [exchange] = harness.fake.calls_to("oauth.v2.access")[-1:]
    [bot_token] = {c.token for c in harness.fake.calls_to("auth.test") if c.at >= exchange.at}
    assert harness.fake.team_of_token(bot_token) == team
    return bot_token


def slash(harness: SlackHarness, text: str, user: str, team: str) -> str:
    """A signed slash command from ``user`` of ``team``; returns its response_url."""
    fields, response_url = slash_command(harness.fake, text, user=user, channel="C1")
    fields["team_id"] = team
    status, _ = harness.post(urlencode(fields).encode())
    assert status == 200
    return response_url


def event(harness: SlackHarness, team: str, body: dict[str, Any]) -> int:
    envelope = event_callback(body)
    envelope["team_id"] = team
    envelope["authorizations"] = [{"team_id": team, "user_id": "UBOT", "is_bot": True}]
    status, _ = harness.post(json.dumps(envelope).encode(), content_type="application/json")
    return status


def digest_run(harness: SlackHarness, user: str) -> list:
    """The scheduler's run at the member's next digest time, posting as ``paperboy scheduler``
    does (``SlackPoster.from_settings``: each workspace's installed token)."""
    poster = SlackPoster.from_settings(harness.settings, harness.engine)
    member = Subscriptions(harness.engine.db).member(user)
    slot = next_digest(member, datetime.now(UTC)).astimezone(UTC)
    return Dispatcher(harness.engine, poster, worker="clock").run_due(slot)


def member_of(call) -> str:
    """The member a Web API call is about: its user, or the DM it posts in (``DU1``); "" for
    none (``auth.test``)."""
    params = call.params
    user = params.get("user") or params.get("user_id") or params.get("users")
    return user or str(params.get("channel") or "")[1:]


def test_a_second_workspace_installs_and_uses_its_own_token(oauth: SlackHarness) -> None:
    first = install(oauth, TEAM_ID, "Paperboy Lab")
    second = install(oauth, OTHER_TEAM, "Other Lab")
    assert first != second
    installs = state_for(oauth.engine.db_path).installation_store(CLIENT_ID)
    assert installs.find_bot(enterprise_id=None, team_id=OTHER_TEAM).bot_token == second

    # A slash command from each workspace: its post-ack work uses that workspace's token.
    for user, team in (("U1", TEAM_ID), ("U2", OTHER_TEAM)):
        oauth.reply(slash(oauth, "subscribe graph neural networks", user, team))
        oauth.reply(slash(oauth, "digest days daily", user, team))
    before = len(oauth.fake.calls)
    oauth.reply(slash(oauth, "digest now", "U2", OTHER_TEAM), n=1)
    oauth.fake.wait_for(lambda: oauth.fake.messages_in("DU2"))
    made = oauth.fake.calls[before:]
    assert {c.token for c in made if c.method == "chat.postMessage"} == {second}
    # Each call with the token of the member it is about, U2's (and the command's own,
    # about no member) with the second: U1's Home tab, republished after their last command,
    # may land here, with the first.
    for call in made:
        assert call.token == {"U1": first, "U2": second, "": second}[member_of(call)], call
    assert any(member_of(c) == "U2" for c in made)

    # The scheduler's digests: U1's with the first workspace's token, U2's with the second's.
    before = len(oauth.fake.calls)
    outcomes = {o.user_id: o.status for o in digest_run(oauth, "U1")}
    assert outcomes["U1"] == "sent"
    made = oauth.fake.calls[before:]
    for call in made:
        assert call.token == {"U1": first, "U2": second}[member_of(call)], call
    assert first in {c.token for c in made}
    # App Home: each member's view is published with their workspace's token.
    for user, team, token in (("U1", TEAM_ID, first), ("U2", OTHER_TEAM, second)):
        seen = len(publishes(oauth, user))
        assert event(oauth, team, {"type": "app_home_opened", "user": user, "tab": "home"}) == 200
        oauth.fake.wait_for(lambda u=user, n=seen: len(publishes(oauth, u)) > n)
        assert {c.token for c in publishes(oauth, user)} == {token}


def publishes(harness: SlackHarness, user: str) -> list:
    return [c for c in harness.fake.calls_to("views.publish") if c.params["user_id"] == user]


def test_uninstalling_deletes_the_workspace_and_stops_its_digests(oauth: SlackHarness) -> None:
    first = install(oauth, TEAM_ID, "Paperboy Lab")
    second = install(oauth, OTHER_TEAM, "Other Lab")
    for user, team in (("U1", TEAM_ID), ("U2", OTHER_TEAM)):
        oauth.reply(slash(oauth, "subscribe graph neural networks", user, team))
        oauth.reply(slash(oauth, "digest days daily", user, team))
    for user in ("U1", "U2"):  # each command republishes the Home tab after its reply
        oauth.fake.wait_for(lambda user=user: len(publishes(oauth, user)) == 2)

    oauth.fake.uninstall(OTHER_TEAM)
    assert event(oauth, OTHER_TEAM, {"type": "app_uninstalled"}) == 200
    state = state_for(oauth.engine.db_path)
    installs = state.installation_store(CLIENT_ID)
    oauth.fake.wait_for(lambda: installs.find_bot(enterprise_id=None, team_id=OTHER_TEAM) is None)
    oauth.fake.wait_for(lambda: OTHER_TEAM in state.uninstalled_workspaces())
    assert installs.find_bot(enterprise_id=None, team_id=TEAM_ID).bot_token == first

    before = len(oauth.fake.calls)
    outcomes = digest_run(oauth, "U2")  # U2's time; U1's digest is due then too
    assert [(o.user_id, o.status) for o in outcomes] == [("U1", "sent")]
    made = oauth.fake.calls[before:]
    assert made and {c.token for c in made} == {first}
    assert second not in {c.token for c in oauth.fake.calls[before:]}
    # Their topics are kept: installed again, U2's digests go on, with the new token.
    third = install(oauth, OTHER_TEAM, "Other Lab")
    assert state.uninstalled_workspaces() == set()
    [again] = digest_run(oauth, "U2")
    assert (again.user_id, again.status) == ("U2", "sent")
    assert oauth.fake.calls_to("chat.postMessage")[-1].token == third


def test_tokens_revoked_for_the_bot_deletes_only_that_workspace(oauth: SlackHarness) -> None:
    install(oauth, TEAM_ID, "Paperboy Lab")
    install(oauth, OTHER_TEAM, "Other Lab")
    body = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": ["UBOT" + OTHER_TEAM]}}
    assert event(oauth, OTHER_TEAM, body) == 200
    installs = state_for(oauth.engine.db_path).installation_store(CLIENT_ID)
    oauth.fake.wait_for(lambda: installs.find_bot(enterprise_id=None, team_id=OTHER_TEAM) is None)
    assert installs.find_bot(enterprise_id=None, team_id=TEAM_ID) is not None


def test_a_token_slack_refuses_stops_only_its_own_workspace(oauth: SlackHarness, caplog) -> None:
    """No uninstall event came (or it was lost): the refused token is found when the
    digest is posted; that workspace is noted uninstalled with one log line, the other's
    digest still goes."""
    first = install(oauth, TEAM_ID, "Paperboy Lab")
    install(oauth, OTHER_TEAM, "Other Lab")
    for user, team in (("U1", TEAM_ID), ("U2", OTHER_TEAM)):
        oauth.reply(slash(oauth, "subscribe graph neural networks", user, team))
        oauth.reply(slash(oauth, "digest days daily", user, team))
    oauth.fake.uninstall(OTHER_TEAM)
    outcomes = {o.user_id: o.status for o in digest_run(oauth, "U1")}
    assert outcomes == {"U1": "sent", "U2": "failed"}
    assert oauth.fake.calls_to("chat.postMessage")[-1].token == first
    assert OTHER_TEAM in state_for(oauth.engine.db_path).uninstalled_workspaces()
    said = [r.getMessage() for r in caplog.records if OTHER_TEAM in r.getMessage()]
    assert len([m for m in said if "digests stop" in m]) == 1
    assert [o.user_id for o in digest_run(oauth, "U1")] == []  # U1 done, U2 left out


def test_a_forged_state_or_a_reused_code_gets_a_friendly_failure_page(oauth) -> None:
    state, cookie = start_install(oauth)
    code = oauth.fake.authorize(OTHER_TEAM, "Other Lab")
    status, page = finish_install(oauth, "forged-state", cookie, code)
    assert status == 400 and "Paperboy was not installed" in page
    assert "started in another browser or has expired" in page and "Traceback" not in page
    status, page = finish_install(oauth, "forged-state", "slack-app-oauth-state=forged-state", code)
    assert status == 401 and "expired or was already used" in page

    assert finish_install(oauth, state, cookie, code)[0] == 200
    again_state, again_cookie = start_install(oauth)
    status, page = finish_install(oauth, again_state, again_cookie, code)  # the code again
    assert status == 401 and "Slack did not accept this installation" in page
    assert 'href="/slack/install"' in page
    # The state too is good once.
    status, page = finish_install(oauth, state, cookie, oauth.fake.authorize(OTHER_TEAM))
    assert status == 401 and "expired or was already used" in page


def test_cancelled_at_slack_or_wrong_app_secret_is_one_sentence(oauth: SlackHarness) -> None:
    state, cookie = start_install(oauth)
    status, _, page = get(oauth, "/slack/oauth_redirect?error=access_denied&state=" + state, cookie)
    assert status == 200 and "The installation was cancelled in Slack" in page

    oauth.fake.register_app(CLIENT_ID, "rotated-secret")  # the app's secret changed at Slack
    state, cookie = start_install(oauth)
    code = oauth.fake.authorize(OTHER_TEAM)
    status, page = finish_install(oauth, state, cookie, code)
    assert status == 401 and "Slack did not accept this installation" in page
    assert oauth.fake.calls_to("oauth.v2.access")[-1].method == "oauth.v2.access"


def test_a_single_workspace_deployment_has_no_install_pages(slack: SlackHarness) -> None:
    status, _, _ = get(slack, "/slack/install")
    assert status == 404


def test_oauth_settings_are_checked_in_one_sentence() -> None:
    settings = Settings.from_env(
        {"SLACK_CLIENT_ID": CLIENT_ID, "SLACK_CLIENT_SECRET": "x", "SLACK_SIGNING_SECRET": "y"}
    )
    assert settings.multi_workspace
    settings.check_slack()
    assert "commands" in settings.slack_scopes
    with pytest.raises(SettingsError, match="SLACK_CLIENT_SECRET is missing"):
        Settings.from_env({"SLACK_CLIENT_ID": CLIENT_ID, "SLACK_SIGNING_SECRET": "y"}).check_slack()
    with pytest.raises(SettingsError, match="both set"):
        Settings.from_env(
            {
                "SLACK_CLIENT_ID": CLIENT_ID,
                "SLACK_CLIENT_SECRET": "x",
                "SLACK_SIGNING_SECRET": "y",
                "SLACK_BOT_TOKEN": "xoxb-1",
            }
        ).check_slack()
    with pytest.raises(SettingsError, match="SLACK_REDIRECT_URI must be an https"):
        Settings.from_env({"SLACK_REDIRECT_URI": "http://example.com/slack/oauth_redirect"})
    scoped = Settings.from_env({"SLACK_SCOPES": "commands, chat:write"})
    assert scoped.slack_scopes == ("commands", "chat:write")


def test_the_manifest_has_the_redirect_url_uninstall_events_and_only_used_scopes() -> None:
    root = Path(__file__).parents[1]
    manifest = (root / "bot" / "slack" / "manifest.yml").read_text()
    assert "redirect_urls:\n    - https://YOUR-HOST/slack/oauth_redirect\n" in manifest
    events = re.search(r"bot_events:\n((?:\s+(?:- \S+|#.*)\n)+)", manifest).group(1)
    assert {"app_uninstalled", "tokens_revoked"} <= set(re.findall(r"- (\S+)", events))
    scopes = re.search(r"bot:\n((?:\s+(?:- \S+|#.*)\n)+)", manifest).group(1)
    listed = re.findall(r"- (\S+)", scopes)
    assert tuple(listed) == Settings().slack_scopes  # what an installation asks for
    # Every scope is needed by a Web API method (or event) the code uses.
    code = "\n".join(p.read_text() for p in (root / "bot").rglob("*.py"))
    code += "\n".join(p.read_text() for p in (root / "digest").rglob("*.py"))
    needs = {
        "commands": "@app.command",
        "chat:write": "chat_postMessage(",
        "chat:write.public": "chat_postMessage(",
        "app_mentions:read": '"app_mention"',
        "im:write": "conversations_open(",
        "files:write": "files_upload_v2(",
        "users:read": "users_info(",
        "im:history": "conversations_history(",
        "channels:history": "conversations_history(",
        "groups:history": "conversations_history(",
        "channels:join": "conversations_join(",
    }
    assert set(listed) == set(needs)
    for scope, use in needs.items():
        assert use in code, f"{scope} is in the manifest but nothing uses {use}"


def test_rotating_tokens_are_refreshed_for_requests_and_digests(oauth: SlackHarness) -> None:
    """An app with token rotation: tokens expire (here in ten minutes, so each use is within
    SLACK_TOKEN_REFRESH_MINUTES of it) and are refreshed with their one-use refresh token,
    by Bolt's authorize for a request and by the poster for a digest."""
    oauth.fake.register_app(CLIENT_ID, CLIENT_SECRET, token_rotation=True, token_seconds=600)
    installed = install(oauth, OTHER_TEAM, "Other Lab")
    assert installed.startswith("xoxe.xoxb-")
    refreshes = lambda: [  # noqa: E731
        c for c in oauth.fake.calls_to("oauth.v2.access") if c.params.get("grant_type")
    ]
    oauth.reply(slash(oauth, "subscribe graph neural networks", "U2", OTHER_TEAM))
    assert len(refreshes()) >= 1
    installs = state_for(oauth.engine.db_path).installation_store(CLIENT_ID)
    current = installs.find_bot(enterprise_id=None, team_id=OTHER_TEAM).bot_token
    assert current != installed and oauth.fake.team_of_token(current) == OTHER_TEAM
    oauth.reply(slash(oauth, "digest days daily", "U2", OTHER_TEAM))

    seen = len(refreshes())
    [outcome] = digest_run(oauth, "U2")
    assert outcome.status == "sent" and len(refreshes()) > seen
    post = oauth.fake.calls_to("chat.postMessage")[-1]
    assert post.token not in (installed, current)
    assert post.token == installs.find_bot(enterprise_id=None, team_id=OTHER_TEAM).bot_token


@pytest.mark.parametrize("args", [["scheduler"], ["digest", "send"]])
def test_the_digest_commands_take_oauth_settings_and_refuse_half_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    """The scheduler of a multi-workspace deployment needs the app's id and secret (not the
    signing secret); only one of them is one sentence, exit 2, nothing created."""
    monkeypatch.chdir(tmp_path)
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "PAPERBOY_DB"):
        monkeypatch.delenv(name, raising=False)
    env = {"SLACK_CLIENT_ID": CLIENT_ID}
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 2, result.output
    assert "SLACK_CLIENT_SECRET is missing" in result.stderr
    assert list(tmp_path.iterdir()) == []
    env["SLACK_CLIENT_SECRET"] = CLIENT_SECRET
    assert _digest_settings_ok(env)


def _digest_settings_ok(env: dict[str, str]) -> bool:
    settings = Settings.from_env(env)
    return bot_token(settings) is None and settings.multi_workspace


def test_a_single_workspace_uninstall_stops_its_digests(slack: SlackHarness) -> None:
    """Without OAuth there is no installation to delete, but the digests stop all the same
    (the token is dead) until the workspace installs the app again."""
    slack.reply(slack.slash("subscribe graph neural networks")[1])
    state = state_for(slack.engine.db_path)
    assert state.digests_on()
    assert slack.event({"type": "app_uninstalled"})[0] == 200
    slack.fake.wait_for(lambda: state.uninstalled_workspaces() == {TEAM_ID})
    assert not state.digests_on() and Subscriptions(slack.engine.db).members() == []


def test_serve_with_scheduler_installed_by_oauth_sends_with_the_workspaces_token(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    """``paperboy serve --with-scheduler`` with the app's id and secret and no bot token:
    it starts without one, and the due digest of a member of an installed workspace goes
    with that workspace's token."""
    db = tmp_path / "box.db"
    copy_db_without_index(seeded_db_template, db)
    due_member(db, "U2")
    port = free_port()
    with FakeSlack() as fake:
        fake.register_app(CLIENT_ID, CLIENT_SECRET)
        fake.set_user("U2", tz="UTC")
        code = fake.authorize(OTHER_TEAM, "Other Lab")
        grant = WebClient(base_url=fake.api_url).oauth_v2_access(
            client_id=CLIENT_ID, client_secret=CLIENT_SECRET, code=code
        )
        state = StateStore(db)
        state.add_member("U2", OTHER_TEAM, {})  # known without a team: now the workspace's
        state.installation_store(CLIENT_ID).save(installation(OTHER_TEAM, grant["access_token"]))
        env = serve_env(tmp_path, fake, db, port)
        del env["SLACK_BOT_TOKEN"]
        env.update(SLACK_CLIENT_ID=CLIENT_ID, SLACK_CLIENT_SECRET=CLIENT_SECRET)
        with serve(env, "--with-scheduler") as web:
            web.wait_for_line("listening on")
            (digest,) = fake.wait_for(lambda: fake.messages_in("DU2"), timeout=30)
            assert fake.calls_to("chat.postMessage")[-1].token == grant["access_token"]
            status, _ = http(f"http://127.0.0.1:{port}/slack/install")
            assert status == 200
            assert web.stop() == 0
        assert not any("Traceback" in line for line in web.seen)
