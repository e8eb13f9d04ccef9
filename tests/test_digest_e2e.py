"""Subscriptions and digests end to end: signed slash commands into the real app, the scheduler's
tick and the CLI, all against the local Slack stand-in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from bot import cli as commands
from bot.engine.search import Engine, Hit
from bot.english import day_and_time
from bot.playground.fake_slack import TEAM_ID
from bot.settings import Settings
from bot.slack import render
from bot.slack.client import make_client
from bot.slack.poster import SlackPoster
from bot.slack.render.digest import DIGEST_EVENT, digest_message
from digest.delivery import Dispatcher
from digest.matching import check_topic
from digest.plan import DigestItem, DigestPlan, DigestSection
from digest.schedule import next_digest
from digest.subscriptions import Subscriptions
from tests.digest_support import synthetic_papers, write_corpus
from tests.slack_harness import SlackHarness, assert_valid, blocks_text, buttons
from tests.test_app_home import next_digest_text, open_home
from tests.test_digest_delivery import killed_after_posting


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = Engine.open(tmp_path / "paperboy.db")
    engine.ingest([write_corpus(tmp_path / "papers.jsonl")])
    engine.db.execute("update papers set added_at = '2024-01-01T00:00:00+00:00'")
    return engine


@pytest.fixture
def slack(tmp_path: Path, engine: Engine):
    harness = SlackHarness(tmp_path, engine=engine)
    harness.fake.set_user("U1", tz="Europe/Berlin")
    try:
        yield harness
    finally:
        harness.close()


def ask(slack: SlackHarness, text: str, user: str = "U1") -> dict[str, Any]:
    status, url = slack.slash(text, user=user)
    assert status == 200
    reply = slack.reply(url)
    assert reply.get("response_type", "ephemeral") == "ephemeral"  # private, always
    return reply


def scheduler(slack: SlackHarness) -> Dispatcher:
    settings = Settings(slack_api_url=slack.fake.api_url, slack_bot_token="xoxb-test")
    poster = SlackPoster(make_client(settings), slack.engine)
    return Dispatcher(slack.engine, poster, worker="clock")


def test_subscribe_shows_the_match_count_and_best_three_and_starts_the_digest(slack) -> None:
    reply = ask(slack, 'subscribe "graph neural" networks -survey')
    text = blocks_text(reply)
    assert "Subscribed to" in text and "(topic 1 of 1)" in text
    assert "matches *8* papers" in text  # 9 graph papers, the survey left out
    assert text.count("Graph Neural Networks with") == 3
    assert "Mon–Fri at 09:00 (Europe/Berlin), by a direct message" in text
    member = Subscriptions(slack.engine.db).member("U1")
    assert member.enabled and member.tz == "Europe/Berlin"

    again = blocks_text(ask(slack, 'subscribe "Graph Neural" network -survey'))
    assert "already follow" in again and "nothing changed" in again
    assert len(Subscriptions(slack.engine.db).topics("U1")) == 1


def test_subscribe_reports_topics_that_are_too_broad_or_match_nothing(slack) -> None:
    broad = blocks_text(ask(slack, "subscribe venue:ICLR"))
    assert "of the corpus" in broad and "Narrow it" in broad
    narrow = blocks_text(ask(slack, "subscribe quantum chemistry"))
    assert "matches *0* papers" in narrow and "No paper in the corpus matches it yet" in narrow
    # A word no paper has: the topic matches on the others, and says so.
    partly = blocks_text(ask(slack, "subscribe graph neural networks chromodynamics"))
    assert ":warning: No paper mentions “chromodynamics”" in partly, partly
    # Fewer matches than a lookup counts: the reply says why.
    graphs = blocks_text(ask(slack, "subscribe graph learning"))
    matches = check_topic(slack.engine, "graph learning").matches
    mentions = slack.engine.count("graph learning")
    assert 0 < matches < mentions
    assert (
        f"matches *{matches}* papers in the corpus now (mainly about it: {mentions} mention"
        in graphs
    )
    assert "which is what a lookup counts" in graphs


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("subscribe colour:blue gnn", "I don't know the filter `colour:`"),
        ("subscribe", "Say what to follow"),
        ("subscribe " + "word " * 60, "at most 200 characters"),
        ("unsubscribe 3", "do not follow any topics"),
        ("digest time 25:00", "not a time of day"),
        ("digest days someday", "not a list of days"),
        ("digest days monkey", "not a list of days"),
        ("digest days sat-sunny", "not a list of days"),
        ("digest sideways", "I don't know `digest sideways`"),
        ("digest channel general", "Name the channel as a link"),
    ],
)
def test_mistakes_get_a_message_saying_what_to_type(slack, text: str, expected: str) -> None:
    reply = ask(slack, text)
    assert_valid(reply)
    assert expected in reply["text"], reply["text"]


def test_topics_are_numbered_with_their_counts_and_unsubscribe_takes_either(slack) -> None:
    for topic in ("graph neural networks", "diffusion models", "quantum chemistry"):
        ask(slack, f"subscribe {topic}")
    text = blocks_text(ask(slack, "topics"))
    assert "1. graph neural networks · 9 papers" in text
    assert "2. diffusion models · 9 papers" in text
    assert "3. quantum chemistry · 0 papers" in text
    assert blocks_text(ask(slack, "topic")) == text  # as a member might type it
    assert "Unsubscribed from *diffusion models*" in ask(slack, "unsubscribe 2")["text"]
    assert (
        "Unsubscribed from *quantum chemistry*"
        in ask(slack, "unsubscribe Quantum Chemistry")["text"]
    )
    assert "1. graph neural networks" in blocks_text(ask(slack, "topics"))


def test_digest_settings(slack) -> None:
    ask(slack, "subscribe graph neural networks")
    assert "at 08:30 (Europe/Berlin)" in ask(slack, "digest time 8:30")["text"]
    assert "Mon, Wed, Fri at 08:30" in ask(slack, "digest days mon,wed,fri")["text"]
    assert "digest is *off*" in ask(slack, "digest off")["text"]
    assert not Subscriptions(slack.engine.db).member("U1").enabled
    assert "Mon, Wed, Fri" in ask(slack, "digest on")["text"]
    assert "<#CPAPERS>" in ask(slack, "digest channel <#CPAPERS|papers>")["text"]
    assert "by a direct message" in ask(slack, "digest channel dm")["text"]
    # A setting named without a value shows it and how to change it, and changes nothing.
    ask(slack, "digest channel <#CPAPERS|papers>")
    shown = ask(slack, "digest channel")["text"]
    assert "<#CPAPERS>" in shown and "To change it: `/papers digest channel #papers`" in shown
    assert Subscriptions(slack.engine.db).member("U1").digest_channel == "CPAPERS"
    assert "To change it: `/papers digest time 08:30`" in ask(slack, "digest time")["text"]
    assert "Mon, Wed, Fri at 08:30" in ask(slack, "digest days")["text"]


def test_preview_is_private_and_sends_nothing_now_sends_once(slack) -> None:
    ask(slack, "subscribe graph neural networks")
    preview = ask(slack, "digest preview")
    assert "Preview of your next digest" in blocks_text(preview)
    assert "similar:1" in buttons(preview)
    assert slack.fake.calls_to("chat.postMessage") == []

    sent = ask(slack, "digest now")
    assert "Sent: 9 papers" in sent["text"]
    [message] = slack.fake.messages_in("DU1")
    assert_valid(message)
    assert message["metadata"]["event_type"] == DIGEST_EVENT
    digest_id = message["metadata"]["event_payload"]["digest_id"]
    assert digest_id.startswith(f"{TEAM_ID}:U1:")  # the member's workspace, then user
    assert "graph neural networks" in blocks_text(message)

    again = ask(slack, "digest now")
    assert "Nothing to send" in again["text"]
    assert len(slack.fake.messages_in("DU1")) == 1


ONE_PAPER = {
    "id": "chem-1",
    "title": "Quantum Chemistry Meets Message Passing",
    "abstract": "Quantum chemistry calculations of molecular energies, made fast.",
    "authors": ["Solo Author"],
    "venue": "ICML",
    "year": 2024,
}


def test_one_paper_is_one_paper_everywhere(slack, tmp_path, cli_env) -> None:
    slack.engine.ingest([write_corpus(tmp_path / "one.jsonl", [ONE_PAPER])])
    assert "matches *1* paper in" in blocks_text(ask(slack, "subscribe quantum chemistry"))
    assert "1. quantum chemistry · 1 paper" in blocks_text(ask(slack, "topics"))
    preview = CliRunner().invoke(commands.digest, ["preview", "--user", "U1"], env=cli_env)
    assert "1 paper for U1" in preview.output
    sent = ask(slack, "digest now")
    assert "Sent: 1 paper, in your direct messages." in sent["text"]
    [message] = slack.fake.messages_in("DU1")
    text = blocks_text(message)
    assert "1 paper on 1 of your topics" in text and "quantum chemistry* · 1 paper" in text
    assert "1 papers" not in text + sent["text"] + preview.output
    ask(slack, "subscribe graph neural networks")
    assert "You follow 1 topic." in ask(slack, "unsubscribe 1")["text"]


def test_digest_now_after_nothing_to_send_sends_a_new_topic_at_once(slack) -> None:
    """`digest now` (nothing), `subscribe`, `digest now`, in one minute: the papers come."""
    ask(slack, "subscribe quantum chemistry")
    assert "Nothing to send" in ask(slack, "digest now")["text"]
    ask(slack, "subscribe protein design")
    assert "Sent: 9 papers" in ask(slack, "digest now")["text"]
    [message] = slack.fake.messages_in("DU1")
    assert "protein design" in blocks_text(message)


def test_digest_now_right_after_a_digest_sends_the_new_topic(slack) -> None:
    """A digest, `subscribe graph`, `digest now`, in one minute: not "already on its way"."""
    ask(slack, "subscribe protein design")
    assert "Sent: 9 papers" in ask(slack, "digest now")["text"]
    ask(slack, "subscribe graph neural networks")
    again = ask(slack, "digest now")["text"]
    assert "Sent: 9 papers" in again and "already on its way" not in again
    first, second = slack.fake.messages_in("DU1")
    ids = [m["metadata"]["event_payload"]["digest_id"] for m in (first, second)]
    assert ids[0] != ids[1] and "graph neural networks" in blocks_text(second)


def test_the_digests_buttons_are_the_lookups_buttons(slack) -> None:
    ask(slack, "subscribe graph neural networks")
    ask(slack, "digest now")
    [message] = slack.fake.messages_in("DU1")
    similar = buttons(message)["similar:1"]
    assert buttons(message)["share:1"]["value"] == similar["value"]
    _, url = slack.click("similar:1", similar["value"], channel="DU1", message_ts=message["ts"])
    reply = slack.reply(url)
    assert "Papers similar to" in blocks_text(reply)


def test_next_is_tomorrow_once_todays_digest_went_out(slack) -> None:
    """Today's digest sent, the time moved later today: "Next:" says tomorrow (one scheduled
    digest a day), not a time today at which nothing comes (found by an operator's trial)."""
    now = datetime.now(UTC)
    # A zone where it is about noon now, so that -10 and +30 minutes stay on the same day.
    zone = ZoneInfo(f"Etc/GMT{now.hour - 12:+d}")  # (Etc/GMT-2 is UTC+2)
    slack.fake.set_user("U2", tz=zone.key)
    local = now.astimezone(zone)
    # A member since long ago (a slot before they joined is never due).
    Subscriptions(slack.engine.db).add_topic("U2", "graph neural networks", now - timedelta(7))
    ask(slack, "digest days daily", user="U2")
    later = f"{local + timedelta(minutes=30):%H:%M}"
    before = ask(slack, f"digest time {later}", user="U2")["text"]
    assert f"Next: {day_and_time(local)[:-6]} {later}." in before  # today: not sent yet

    ask(slack, f"digest time {local - timedelta(minutes=10):%H:%M}", user="U2")
    [sent] = scheduler(slack).run_due(now)
    assert (sent.user_id, sent.status) == ("U2", "sent")
    after = ask(slack, f"digest time {later}", user="U2")["text"]
    assert f"Next: {day_and_time(local + timedelta(days=1))[:-6]} {later}." in after, after
    assert (
        f"Next: {day_and_time(local + timedelta(days=1))[:-6]} {later}."
        in ask(slack, "digest", user="U2")["text"]
    )
    home = next_digest_text(open_home(slack, "U2"))  # the App Home says the same
    assert f"*{day_and_time(local + timedelta(days=1))[:-6]} {later}*" in home, home


def test_the_scheduler_sends_new_papers_first_at_the_members_time(slack, tmp_path) -> None:
    ask(slack, "subscribe graph neural networks")
    ask(slack, "digest days daily")
    clock = scheduler(slack)
    member = Subscriptions(slack.engine.db).member("U1")
    first_slot = next_digest(member, datetime.now(UTC)).astimezone(UTC)
    [first] = clock.run_due(first_slot)
    assert first.status == "sent" and first.papers == 9
    assert clock.run_due(first_slot + timedelta(minutes=1)) == []

    late = {
        "id": "graph-late",
        "title": "Graph Neural Networks for Late Arrivals",
        "abstract": "Graph neural networks, message passing and node classification, again.",
        "authors": ["Late Comer"],
        "venue": "ICLR",
        "year": 2025,
    }
    slack.engine.ingest([write_corpus(tmp_path / "late.jsonl", [late])])
    second_slot = next_digest(member, first_slot).astimezone(UTC)
    # Added between the two digests (the clock here runs ahead of the wall clock).
    added = (first_slot + timedelta(hours=1)).isoformat(timespec="seconds")
    slack.engine.db.execute("update papers set added_at = ? where id = 'graph-late'", [added])
    [second] = clock.run_due(second_slot)
    assert second.status == "sent" and second.papers == 1
    messages = slack.fake.messages_in("DU1")
    assert len(messages) == 2 and "Late Arrivals" in blocks_text(messages[-1])
    assert "1 new since your last digest" in blocks_text(messages[-1])


# --- the CLI ---------------------------------------------------------------------------------


@pytest.fixture
def cli_env(slack) -> dict[str, str]:
    return {
        "PAPERBOY_DB": str(slack.engine.db_path),
        "SLACK_API_URL": slack.fake.api_url,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "secret",
        "SLACK_APP_TOKEN": "",
        "PAPERBOY_FEEDS": "",
    }


def test_cli_preview_and_send_now(slack, cli_env) -> None:
    runner = CliRunner()
    missing = runner.invoke(commands.digest, ["preview", "--user", "U1"], env=cli_env)
    assert missing.exit_code == 1 and "has no subscriptions" in missing.output
    assert "/papers subscribe TOPIC" in missing.output  # (how to get some)
    Subscriptions(slack.engine.db).add_topic("U1", "diffusion models", datetime.now(UTC))

    preview = runner.invoke(commands.digest, ["preview", "--user", "U1"], env=cli_env)
    assert preview.exit_code == 0, preview.output
    assert "9 papers for U1" in preview.output and "diffusion models" in preview.output
    assert slack.fake.calls_to("chat.postMessage") == []

    sent = runner.invoke(commands.digest, ["send", "--now"], env=cli_env)
    assert sent.exit_code == 0, sent.output
    assert ": sent, 9 papers" in sent.output and "1 sent" in sent.output
    assert len(slack.fake.messages_in("DU1")) == 1

    due = runner.invoke(commands.digest, ["send"], env=cli_env)
    assert due.exit_code == 0 and due.output.strip().endswith("nothing due")


def test_cli_scheduler_wires_the_tick_and_the_feed_ingest(slack, cli_env, monkeypatch) -> None:
    Subscriptions(slack.engine.db).add_topic(
        "U1", "diffusion models", datetime(2024, 1, 1, tzinfo=UTC)
    )
    Subscriptions(slack.engine.db).set_days("U1", "daily", datetime(2024, 1, 1, tzinfo=UTC))
    # Due now: U1's digest time (Berlin, as Slack reports U1's zone) was ten minutes ago.
    ten_minutes_ago = datetime.now(ZoneInfo("Europe/Berlin")) - timedelta(minutes=10)
    Subscriptions(slack.engine.db).set_time(
        "U1", ten_minutes_ago.strftime("%H:%M"), datetime(2024, 1, 1, tzinfo=UTC)
    )
    ran: dict[str, Any] = {}

    class OneShot:
        running = False

        def start(self) -> None:
            ran["tick"] = ran["jobs"]["tick"]()
            ran["ingest"] = ran["jobs"]["ingest"]

    def fake_build(tick, ingest=None, **options):
        ran["jobs"] = {"tick": tick, "ingest": ingest, **options}
        return OneShot()

    monkeypatch.setattr("digest.schedule.build_scheduler", fake_build)
    feed = write_corpus(Path(cli_env["PAPERBOY_DB"]).with_name("feed.jsonl"), [])
    result = CliRunner().invoke(
        commands.scheduler, ["--tick", "30"], env={**cli_env, "PAPERBOY_FEEDS": str(feed)}
    )
    assert result.exit_code == 0, result.output
    assert ran["jobs"]["tick_seconds"] == 30 and ran["ingest"] is not None
    [outcome] = ran["tick"]  # the tick the scheduler runs sends the digest due now
    assert (outcome.user_id, outcome.status, outcome.papers) == ("U1", "sent", 9)
    assert len(slack.fake.messages_in("DU1")) == 1


# --- the digest message ------------------------------------------------------------------------


def mrkdwn_objects(message: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message["blocks"])
    return found


def big_plan(engine: Engine) -> DigestPlan:
    """Every synthetic paper, in five topics whose names try to ping and to break markup."""
    ids = [p["id"] for p in synthetic_papers()]
    themes = ["graph", "diffusion", "rl", "federated", "protein"]
    sections = [
        DigestSection(
            n,
            f"<!channel> {theme} & <@U999> " + "x" * 300,
            [DigestItem(i, 0.5, [theme], new=True) for i in ids if i.startswith(theme)],
        )
        for n, theme in enumerate(themes, 1)
    ]
    return DigestPlan("U1", sections)


@pytest.mark.parametrize("preview", [False, True])
def test_a_big_digest_fits_slacks_limits_and_claims_only_what_it_shows(
    engine: Engine, preview: bool
) -> None:
    plan = big_plan(engine)
    assert plan.size == 45
    message, kept = digest_message(engine, plan, "2024-03-04", digest_id="U1:x", preview=preview)
    assert_valid(message)
    assert len(message["blocks"]) <= 50 and len(message["text"]) <= 3000
    ids = [b["action_id"] for b in buttons(message).values()]
    shown = [b["value"] for a, b in buttons(message).items() if a.startswith("similar:")]
    assert sorted(ids) == sorted({*ids})  # unique action ids across topics
    assert shown == kept.paper_ids and 0 < kept.size < plan.size
    numbers = [int(a.split(":")[1]) for a in buttons(message) if a.startswith("share:")]
    assert numbers == list(range(1, kept.size + 1))  # numbered across the whole message
    # Every mrkdwn is verbatim and escaped: no topic can ping or mention.
    objects = mrkdwn_objects(message)
    assert objects and all(o.get("verbatim") is True for o in objects)
    text = json.dumps(message)
    for dangerous in ("<!channel>", "<@U999>"):
        assert dangerous not in text
    assert all(len(o["text"]) <= 3000 for o in objects)


def test_digest_papers_are_rendered_like_lookups(engine: Engine) -> None:
    plan = DigestPlan(
        "U1", [DigestSection(1, "graph", [DigestItem("graph-1", 0.5, ["graph"], True)])]
    )
    message, _ = digest_message(engine, plan, "2024-03-04")
    hit = Hit(paper=engine.paper("graph-1"), score=0.5, why=["graph"])
    lookup = [b.to_dict() for b in render.paper_blocks(hit, index=1)]
    digest_blocks = message["blocks"]
    start = next(i for i, b in enumerate(digest_blocks) if b.get("type") == "actions") - 2
    assert (
        digest_blocks[start]["text"]["text"].split("\n")[0]
        == lookup[0]["text"]["text"].split("\n")[0]
    )
    assert digest_blocks[start + 2] == lookup[2]  # the same Similar / Share buttons


def test_share_from_a_digest_dm_opens_the_picker_and_posts_where_chosen(slack) -> None:
    ask(slack, "subscribe graph neural networks")
    ask(slack, "digest now")
    [message] = slack.fake.messages_in("DU1")
    share = buttons(message)["share:2"]
    status, _ = slack.click("share:2", share["value"], channel="DU1", message_ts=message["ts"])
    assert status == 200
    [modal] = slack.fake.wait_for(lambda: slack.fake.modals())
    _, ack = slack.submit_view(
        modal,
        {render.SHARE_CHANNEL_BLOCK: "CREADING", render.SHARE_COMMENT_BLOCK: "For Thursday"},
    )
    assert ack["response_action"] == "update"
    [shared] = slack.fake.messages_in("CREADING")
    assert_valid(shared)
    assert "<@U1> shared a paper" in blocks_text(shared) and "> For Thursday" in blocks_text(shared)
    assert buttons(shared)["similar:1"]["value"] == share["value"]
    assert len(slack.fake.messages_in("DU1")) == 1  # nothing posted back into the DM


def test_a_digest_in_a_channel_says_whose_it_is_and_shares_elsewhere(slack) -> None:
    ask(slack, "subscribe graph neural networks")
    ask(slack, "digest channel <#CPAPERS|papers>")
    assert "in <#CPAPERS>" in ask(slack, "digest now")["text"]
    [message] = slack.fake.messages_in("CPAPERS")
    assert_valid(message)
    first = message["blocks"][0]
    assert first["type"] == "section" and first["text"]["text"].startswith(
        "*Paper digest for <@U1>"
    )
    assert message["text"].startswith("Paper digest for <@U1> · ")
    text = blocks_text(message)
    assert "Your paper digest" not in text and "of your topics" not in text
    assert "9 papers on 1 of their topics" in text and "Want your own digest?" in text
    assert "share:1" not in buttons(message)
    share = buttons(message)["share_elsewhere:1"]
    assert share["text"]["text"] == "Share elsewhere"
    # Someone else in the channel passes the paper on to another channel.
    status, _ = slack.click(
        "share_elsewhere:1",
        share["value"],
        user="U2",
        channel="CPAPERS",
        ephemeral=False,
        message_ts=message["ts"],
    )
    assert status == 200
    [modal] = slack.fake.wait_for(lambda: slack.fake.modals())
    slack.submit_view(modal, {render.SHARE_CHANNEL_BLOCK: "CREADING"}, user="U2")
    [shared] = slack.fake.messages_in("CREADING")
    assert "<@U2> shared a paper" in blocks_text(shared)
    assert len(slack.fake.messages_in("CPAPERS")) == 1  # never repeated where it already is


# --- exactly once on the on-demand path ------------------------------------------------------


class Crash(BaseException):
    """A process dying: not an Exception, so nothing on the way catches it."""


def crash_after(step: str):
    def fault(current: str, digest_id: str) -> None:
        if current == step:
            raise Crash(f"killed after {step} of {digest_id}")

    return fault


def digest_paper_ids(slack: SlackHarness, channel: str) -> list[str]:
    return [
        element["value"]
        for message in slack.fake.messages_in(channel)
        for action_id, element in buttons(message).items()
        if action_id.startswith("similar:")
    ]


@pytest.mark.parametrize("step", ["claimed", "posted"])
@pytest.mark.parametrize("path", ["digest send --now", "/papers digest now"])
def test_digest_now_after_a_crash_and_an_expired_lease_sends_no_paper_twice(
    slack, cli_env, step, path
) -> None:
    """Killed after the claim (nothing in Slack) or after Slack took the post (not recorded);
    the lease runs out; then the member's digest is asked for again: the old claim is settled
    first (posted, or found in Slack and recorded), and nothing goes out twice."""
    from digest.ledger import STALE_CLAIM

    now = datetime.now(UTC)
    Subscriptions(slack.engine.db).add_topic("U1", "diffusion models", now - timedelta(days=1))
    crashed_at = now - STALE_CLAIM - timedelta(minutes=1)
    settings = Settings(slack_api_url=slack.fake.api_url, slack_bot_token="xoxb-test")
    doomed = Dispatcher(
        slack.engine,
        SlackPoster(make_client(settings), slack.engine),
        worker="doomed",
        faults=crash_after(step),
    )
    with pytest.raises(Crash):
        doomed.send_now("U1", crashed_at)
    assert len(slack.fake.messages_in("DU1")) == (1 if step == "posted" else 0)

    if path == "digest send --now":
        result = CliRunner().invoke(commands.digest, ["send", "--now"], env=cli_env)
        assert result.exit_code == 0, result.output
        assert ": sent, 9 papers" in result.output
    else:
        assert "Sent: 9 papers" in ask(slack, "digest now")["text"]
    ids = digest_paper_ids(slack, "DU1")
    assert len(ids) == len(set(ids)) == 9
    assert len(slack.fake.messages_in("DU1")) == 1
    assert len(slack.fake.calls_to("chat.postMessage")) == 1
    rows = slack.engine.db.execute("select status from digests where user_id = 'U1'").fetchall()
    assert [r[0] for r in rows] == ["sent"]  # the old claim, settled; no new one was needed

    # The next scheduled tick finds nothing left over to post.
    later = scheduler(slack).run_due(now + STALE_CLAIM + timedelta(minutes=1))
    assert all(o.status != "sent" for o in later)
    assert len(slack.fake.messages_in("DU1")) == 1


# --- writers that wait -----------------------------------------------------------------------


def test_thirty_members_subscribing_at_once_all_succeed(slack) -> None:
    """Thirty signed /papers subscribe at the same moment: every write takes SQLite's write
    lock up front and waits its turn, so none gets "something went wrong" and no topic is
    lost."""
    from concurrent.futures import ThreadPoolExecutor

    users = [f"U{n:02d}" for n in range(30)]
    topics = ["graph neural networks", "diffusion models", "federated learning"]
    with ThreadPoolExecutor(30) as pool:
        sent = list(
            pool.map(lambda n: slack.slash(f"subscribe {topics[n % 3]}", user=users[n]), range(30))
        )
    assert [status for status, _ in sent] == [200] * 30
    replies = [slack.reply(url, timeout=60) for _, url in sent]
    assert all("Subscribed to" in blocks_text(r) for r in replies), [
        r["text"] for r in replies if "Subscribed to" not in blocks_text(r)
    ]
    subs = Subscriptions(slack.engine.db)
    assert {u: len(subs.topics(u)) for u in users} == {u: 1 for u in users}


def test_a_revoked_token_still_lets_members_manage_topics_and_says_why_no_digest(slack) -> None:
    """Revoked while the app runs (Bolt checked the token at its first request)."""
    ask(slack, "topics")
    slack.fake.revoke_token()
    assert "Subscribed to" in blocks_text(ask(slack, "subscribe graph neural networks"))
    reply = ask(slack, "digest now")
    assert "Slack refused Paperboy's token" in reply["text"]
    assert slack.fake.calls_to("chat.postMessage") == []


def test_a_killed_digest_now_into_a_channel_is_found_not_resent(slack, cli_env) -> None:
    """A real process posts an on-demand digest into a public channel and dies (os._exit)
    before recording it; once its lease ran out, `paperboy digest send --now` finds it in the
    channel's history (the bot joined the channel before posting) and sends nothing twice."""
    from digest.ledger import STALE_CLAIM

    now = datetime.now(UTC)
    subs = Subscriptions(slack.engine.db)
    subs.add_topic("U1", "diffusion models", now - timedelta(days=1))
    subs.set_channel("U1", "CREADING", now - timedelta(days=1))
    crashed_at = now - STALE_CLAIM - timedelta(minutes=1)
    done = killed_after_posting(
        slack.engine.db_path,
        slack.fake.api_url,
        f"send_now('U1', datetime.fromisoformat({crashed_at.isoformat()!r}))",
    )
    assert done.returncode == 17, done.stderr.decode()[-2000:]
    assert len(slack.fake.messages_in("CREADING")) == 1

    result = CliRunner().invoke(commands.digest, ["send", "--now"], env=cli_env)
    assert result.exit_code == 0, result.output
    assert ": sent, 9 papers" in result.output
    [message] = slack.fake.messages_in("CREADING")
    assert len(slack.fake.calls_to("chat.postMessage")) == 1
    assert len(set(digest_paper_ids(slack, "CREADING"))) == 9
    rows = slack.engine.db.execute("select status, ts from digests where user_id = 'U1'")
    assert rows.fetchall() == [("sent", message["ts"])]
