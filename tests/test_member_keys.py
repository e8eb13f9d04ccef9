"""Member data keyed by workspace as well as user (issue 12, revision s040_member_keys).

The same user id in two workspaces (Enterprise Grid spans an org's workspaces with one id; two
installs may meet the same id) is two members: their topics, digests, 👍/👎, saved papers and
choices are their own. Through the real app over HTTP, signed requests from each workspace
and the local Slack stand-in (which records which workspace's token each call used); the
migration on a PostgreSQL database whose tables predate the key.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from click.testing import CliRunner
from sqlalchemy import text

from bot.cli import main
from bot.playground.fake_slack import TEAM_ID
from bot.slack.poster import SlackPoster
from bot.state import StateStore, configured, state_for
from bot.state.store import HEAD
from digest.delivery import Dispatcher
from digest.ledger import STALE_CLAIM, Ledger
from digest.schedule import next_digest
from digest.subscriptions import Subscriptions
from tests.slack_harness import SlackHarness, block_actions, blocks_text, buttons
from tests.test_oauth import OTHER_TEAM, event, install, oauth, slash  # noqa: F401

NOW = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)


def posted(harness: SlackHarness, token: str, since: int = 0) -> list[dict[str, Any]]:
    """The digests posted with ``token`` (one workspace's bot), as messages."""
    out = []
    for call in harness.fake.calls[since:]:
        if call.method == "chat.postMessage" and call.token == token:
            params = dict(call.params)
            if isinstance(params.get("blocks"), str):
                params["blocks"] = json.loads(params["blocks"])
            out.append(params)
    return out


def digest_run(harness: SlackHarness, team: str, user: str, days: int = 0) -> list:
    """The scheduler's run at the member's next digest time (``days`` later), each
    workspace's digests posted with its installed token (as ``paperboy scheduler`` does)."""
    member = Subscriptions(harness.engine.db).member(user, team)
    slot = next_digest(member, datetime.now(UTC) + timedelta(days=days)).astimezone(UTC)
    poster = SlackPoster.from_settings(harness.settings, harness.engine)
    return Dispatcher(harness.engine, poster, worker="clock").run_due(slot)


def click(harness: SlackHarness, team: str, user: str, message: dict, action_id: str) -> str:
    """A signed click from ``user`` of ``team`` on a button of ``message``."""
    value = buttons(message)[action_id]["value"]
    payload, url = block_actions(harness.fake, action_id, value, user=user, channel="D" + user)
    payload["team"]["id"] = team
    payload["user"]["team_id"] = team
    payload["message"] = {**message, "ts": "1700000000.000100"}
    status, _ = harness.post(urlencode({"payload": json.dumps(payload)}).encode())
    assert status == 200
    return url


def test_one_user_id_in_two_workspaces_is_two_members(oauth: SlackHarness) -> None:  # noqa: F811
    first = install(oauth, TEAM_ID, "Paperboy Lab")
    second = install(oauth, OTHER_TEAM, "Other Lab")
    for team, topic in ((TEAM_ID, "graph neural networks"), (OTHER_TEAM, "diffusion models")):
        oauth.reply(slash(oauth, f"subscribe {topic}", "U1", team))
        oauth.reply(slash(oauth, "digest days daily", "U1", team))
    subs = Subscriptions(oauth.engine.db)
    members = subs.members(enabled_only=False)
    assert sorted(m.key for m in members) == sorted([(TEAM_ID, "U1"), (OTHER_TEAM, "U1")])

    # Each workspace's /papers topics lists its own member's topics only.
    mine = blocks_text(oauth.reply(slash(oauth, "topics", "U1", TEAM_ID)))
    theirs = blocks_text(oauth.reply(slash(oauth, "topics", "U1", OTHER_TEAM)))
    assert "graph neural networks" in mine and "diffusion models" not in mine
    assert "diffusion models" in theirs and "graph neural networks" not in theirs

    # One digest each, with its own workspace's token and its own topic.
    before = len(oauth.fake.calls)
    outcomes = digest_run(oauth, TEAM_ID, "U1")
    ids = sorted(o.digest_id for o in outcomes if o.status == "sent")
    day = ids[0].rsplit(":", 1)[1]
    assert ids == sorted([f"{TEAM_ID}:U1:{day}", f"{OTHER_TEAM}:U1:{day}"])
    [to_first] = posted(oauth, first, before)
    [to_second] = posted(oauth, second, before)
    assert "graph neural networks" in blocks_text(to_first)
    assert "diffusion models" in blocks_text(to_second)
    assert "graph neural networks" not in blocks_text(to_second)

    # Saving a paper from one workspace's digest saves it for that member only.
    save = next(a for a in buttons(to_first) if a.startswith("save"))
    oauth.reply(click(oauth, TEAM_ID, "U1", to_first, save))
    store = state_for(oauth.engine.db_path)
    paper = buttons(to_first)[save]["value"]
    assert store.saved_papers("U1", team_id=TEAM_ID)[1] == 1
    assert store.saved_papers("U1", team_id=OTHER_TEAM) == ([], 0)
    saved_here = blocks_text(oauth.reply(slash(oauth, "saved", "U1", TEAM_ID)))
    saved_there = blocks_text(oauth.reply(slash(oauth, "saved", "U1", OTHER_TEAM)))
    assert "*1* saved paper" in saved_here and paper in saved_here
    assert paper not in saved_there and "saved paper" not in saved_there
    like = next(a for a in buttons(to_second) if a.startswith("like"))
    oauth.reply(click(oauth, OTHER_TEAM, "U1", to_second, like))
    liked = buttons(to_second)[like]["value"]
    assert store.feedback_of("U1", OTHER_TEAM) == {liked: "like"}
    assert store.feedback_of("U1", TEAM_ID) == {}

    # The CLI names the member's workspace when the id is in two.
    runner = CliRunner()
    env = {"PAPERBOY_DB": str(oauth.engine.db_path)}
    if configured() is not None:  # the state in PostgreSQL (``state_backend``)
        url = configured().url.render_as_string(hide_password=False)
        env["DATABASE_URL"] = url.replace("+psycopg", "")
    ambiguous = runner.invoke(main, ["saved", "--user", "U1"], env=env)
    assert ambiguous.exit_code == 1 and "say which with --team" in ambiguous.output, (
        ambiguous.output
    )
    assert TEAM_ID in ambiguous.output and OTHER_TEAM in ambiguous.output
    named = runner.invoke(main, ["saved", "--user", "U1", "--team", TEAM_ID], env=env)
    assert named.exit_code == 0 and "1 saved paper for U1" in named.output
    preview = ["digest", "preview", "--user", "U1", "--json"]
    assert "say which with --team" in runner.invoke(main, preview, env=env).output
    # Only the second workspace's member gave a 👍: only their preview recommends.
    theirs = runner.invoke(main, [*preview, "--team", OTHER_TEAM], env=env)
    mine = runner.invoke(main, [*preview, "--team", TEAM_ID], env=env)
    assert theirs.exit_code == 0 == mine.exit_code, (theirs.output, mine.output)
    assert "Recommended for you" in theirs.output and "Recommended for you" not in mine.output

    # Uninstalled from the second workspace: the first member's digests go on, and the
    # second's data is kept for the day it comes back.
    oauth.fake.uninstall(OTHER_TEAM)
    assert event(oauth, OTHER_TEAM, {"type": "app_uninstalled"}) == 200
    oauth.fake.wait_for(lambda: OTHER_TEAM in store.uninstalled_workspaces())
    assert [m.key for m in subs.members()] == [(TEAM_ID, "U1")]
    assert [t.query for t in subs.topics("U1", OTHER_TEAM)] == ["diffusion models"]
    assert store.feedback_of("U1", OTHER_TEAM) == {liked: "like"}
    before = len(oauth.fake.calls)
    sent = digest_run(oauth, TEAM_ID, "U1", days=1)
    # (sent, or skipped when nothing new is left for it: either way only the first's)
    assert [o.digest_id.split(":")[0] for o in sent] == [TEAM_ID]
    assert second not in {c.token for c in oauth.fake.calls[before:]}


# --- the migration -------------------------------------------------------------------------

#: The member tables as they were before s040 (and the workspaces table of s020), on
#: PostgreSQL: keyed by user id alone.
OLD_SHAPE = """
drop schema public cascade;
create schema public;
create table members (user_id text primary key, team_id text, tz text, tz_checked_at text,
  digest_enabled integer, digest_time text, digest_days text, digest_channel text,
  created_at text, dm_channel text);
create table topics (id serial primary key, user_id text references members (user_id),
  query text, normalized text, created_at text);
create unique index idx_topics_user_id_normalized on topics (user_id, normalized);
create table digests (id text primary key, user_id text, local_date text, status text,
  claimed_by text, claimed_at text, channel text, ts text, paper_ids text, error text,
  finished_at text, content text);
create unique index idx_digests_user_id_local_date on digests (user_id, local_date);
create index idx_digests_status_claimed_at on digests (status, claimed_at);
create table sent_papers (user_id text, paper_id text, digest_id text, sent_at text,
  primary key (user_id, paper_id));
create table feedback (user_id text, paper_id text, team_id text, kind text not null,
  created_at text, primary key (user_id, paper_id));
create index idx_feedback_paper_id on feedback (paper_id);
create table saves (user_id text, paper_id text, team_id text, saved_at text,
  primary key (user_id, paper_id));
create index idx_saves_user_id_saved_at on saves (user_id, saved_at);
create index idx_saves_paper_id on saves (paper_id);
create table member_taste (user_id text primary key, team_id text, team_saves integer,
  updated_at text);
create table workspaces (team_id text primary key, team_name text, installed_at text,
  uninstalled_at text);
create table alembic_version (version_num varchar(32) primary key);
insert into alembic_version values ('s020_workspaces');
insert into workspaces values ('TONLY', 'The lab', '2024-01-01T00:00:00+00:00', null);
insert into members (user_id, team_id, created_at) values ('U1', 'T1', '2024-01-01'),
  ('U2', null, '2024-01-01');
insert into topics (user_id, query, normalized, created_at) values
  ('U1', 'graph neural networks', 'graph neural network', '2024-01-01'),
  ('U2', 'diffusion models', 'diffusion model', '2024-01-01');
insert into digests (id, user_id, local_date, status, claimed_by, claimed_at, paper_ids,
  content) values ('U1:2024-03-04', 'U1', '2024-03-04', 'claimed', 'gone',
  '2024-03-04T07:00:00+00:00', '["p3"]',
  '{"first_claimed_at": "2024-03-04T07:00:00+00:00", "plan": {"user_id": "U1", "sections":
  [{"topic_id": 1, "query": "graph neural networks", "items": [{"paper_id": "p3",
  "score": 1.0, "why": [], "new": true}]}]}}');
insert into sent_papers values ('U1', 'p1', 'U1:2024-03-03', '2024-03-03T08:00:00+00:00');
insert into feedback values ('U1', 'p1', null, 'like', '2024-03-03T09:00:00+00:00'),
  ('U3', 'p2', 'T3', 'dislike', '2024-03-03T09:00:00+00:00');
insert into saves values ('U2', 'p1', null, '2024-03-03T09:00:00+00:00');
insert into member_taste values ('U2', null, 0, '2024-03-03T09:00:00+00:00');
"""


def test_a_postgresql_state_from_before_the_member_keys_is_migrated(postgres_url) -> None:
    """Every row gets its team: the member's, else its own, else the one installed workspace;
    an old digest claim is still found and retaken; topic ids go on."""
    old = StateStore(postgres_url, migrate=False)
    with old.write() as conn:
        for statement in OLD_SHAPE.split(";"):
            if statement.strip():
                conn.execute(text(statement))
    old.close()
    store = StateStore(postgres_url)
    assert store.revision() == HEAD
    subs = Subscriptions(store)
    assert [m.key for m in subs.members(enabled_only=False)] == [("T1", "U1"), ("TONLY", "U2")]
    assert [t.query for t in subs.topics("U2", "TONLY")] == ["diffusion models"]
    assert store.sent_papers() == {("T1", "U1"): ["p1"]}
    assert store.feedback_of("U1", "T1") == {"p1": "like"}
    assert store.feedback_of("U3", "T3") == {"p2": "dislike"}  # no member: its own team
    assert store.saved_papers("U2", team_id="TONLY")[1] == 1
    assert store.team_saves_off() == {("TONLY", "U2")}
    # The claim made before the upgrade (an id without team) is found under its member.
    ledger = Ledger(store, "new-worker")
    [retaken] = ledger.retake_stale(NOW + STALE_CLAIM)
    assert (retaken.digest_id, retaken.team_id, retaken.plan.paper_ids) == (
        "U1:2024-03-04",
        "T1",
        ["p3"],
    )
    again = ledger.claim("T1:U1:2024-03-04", "U1", "2024-03-04", retaken.plan, NOW, team_id="T1")
    assert again is None  # the same member's digest of that day: the old row, already held
    topic, new = subs.add_topic("U1", "diffusion models", NOW, "T1")
    assert new and topic.id == 3
    # The same user id in another workspace is a member of its own.
    subs.add_topic("U1", "diffusion models", NOW, "T9")
    assert len(subs.topics("U1", "T9")) == 1 and len(subs.topics("U1", "T1")) == 2
    store.close()


def test_a_new_sqlite_file_has_the_member_keys(tmp_path: Path) -> None:
    """New files get the shape of ``bot/state/tables.py`` (the corpus migrations make the old
    tables, s040 rebuilds them before anything is in them)."""
    store = StateStore(tmp_path / "new.db")
    with store.read() as conn:
        pk = conn.execute(text("select sql from sqlite_master where name = 'members'")).scalar()
    assert "PRIMARY KEY (team_id, user_id)" in pk
    subs = Subscriptions(store)
    subs.add_topic("U1", "graph neural networks", NOW, "T1")
    subs.add_topic("U1", "graph neural networks", NOW, "T2")
    assert sorted(subs.topics_by_member()) == [("T1", "U1"), ("T2", "U1")]


def test_a_member_without_a_team_becomes_their_workspaces(
    slack: SlackHarness, state_backend: str
) -> None:
    """A single-workspace deployment's member known without a team (made by the CLI, or
    before Slack's team was recorded: ``""`` after the upgrade) becomes the workspace's
    member, topics and all, the first time a request from it names the team."""
    subs = Subscriptions(slack.engine.db)
    subs.add_topic("U1", "graph neural networks", NOW, "")
    assert [m.key for m in subs.members(enabled_only=False)] == [("", "U1")]
    _, url = slack.slash("topics")
    assert "graph neural networks" in blocks_text(slack.reply(url))
    assert [m.key for m in subs.members(enabled_only=False)] == [(TEAM_ID, "U1")]
    assert [t.query for t in subs.topics("U1", TEAM_ID)] == ["graph neural networks"]
