"""Members, topics and digest preferences (digest/subscriptions.py) with no Slack and no
index; then the same through signed slash commands (bot/slack/listeners/subscriptions.py)."""

from datetime import UTC, datetime, timedelta

import pytest

from bot.engine.corpus import open_database
from bot.engine.query import QueryError
from bot.state import StateStore
from digest.subscriptions import (
    MAX_TOPIC_CHARS,
    MAX_TOPICS,
    Member,
    SubscriptionError,
    Subscriptions,
    describe_days,
    normalize_topic,
    parse_days,
    parse_time,
)
from tests.slack_harness import SlackHarness, assert_valid, blocks_text

NOW = datetime(2024, 3, 4, 10, 0, tzinfo=UTC)

# Every test here runs with the shared state in SQLite and in PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("state_backend")


@pytest.fixture
def subs(tmp_path) -> Subscriptions:
    return Subscriptions(open_database(tmp_path / "s.db"))


# --- what members type ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Graph Neural Networks", "graph neural network"),
        ("graph-neural networks", "graph neural networks"),
        ("diffusion venue:ICLR year:2024", "year:2024 venue:iclr diffusion"),
        ("gnn -survey -review", "gnn -review -survey"),
        ('author:"Jane  Doe" rl', 'rl author:"jane doe"'),
    ],
)
def test_spellings_of_the_same_topic_normalize_alike(a: str, b: str) -> None:
    assert normalize_topic(a) == normalize_topic(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ('"graph neural" networks', "graph neural networks"),  # a phrase is a constraint
        ("neural graph networks", "graph neural networks"),  # word order makes other bigrams
        ("gnn -survey", "gnn survey"),
        ("diffusion venue:ICLR", "diffusion venue:ICML"),
    ],
)
def test_different_topics_stay_different(a: str, b: str) -> None:
    assert normalize_topic(a) != normalize_topic(b)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("08:30", "08:30"),
        ("8:30", "08:30"),
        ("8.30", "08:30"),
        ("17", "17:00"),
        ("8am", "08:00"),
        ("12am", "00:00"),
        ("12pm", "12:00"),
        ("5:15 pm", "17:15"),
        ("23:59", "23:59"),
    ],
)
def test_parse_time(text: str, expected: str) -> None:
    assert parse_time(text) == expected


@pytest.mark.parametrize("text", ["24:00", "9:75", "noon", "13pm", "", "8:3"])
def test_parse_time_refuses_with_an_example(text: str) -> None:
    with pytest.raises(SubscriptionError, match="(HH:MM|1 to 12)"):
        parse_time(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mon-fri", ("mon", "tue", "wed", "thu", "fri")),
        ("Monday-Friday", ("mon", "tue", "wed", "thu", "fri")),
        ("mon,wed,fri", ("mon", "wed", "fri")),
        ("sat sun", ("sat", "sun")),
        ("fri-mon", ("mon", "fri", "sat", "sun")),
        ("daily", ("mon", "tue", "wed", "thu", "fri", "sat", "sun")),
        ("every day", ("mon", "tue", "wed", "thu", "fri", "sat", "sun")),
        ("weekends", ("sat", "sun")),
        ("tue, weekends", ("tue", "sat", "sun")),
        ("Tues, Thurs", ("tue", "thu")),
        ("mondays, fridays", ("mon", "fri")),
    ],
)
def test_parse_days(text: str, expected: tuple[str, ...]) -> None:
    assert parse_days(text) == expected


@pytest.mark.parametrize("text", ["", "someday", "mon-funday", "monkey", "sunny", "thursdayish"])
def test_parse_days_refuses(text: str) -> None:
    with pytest.raises(SubscriptionError):
        parse_days(text)


def test_describe_days() -> None:
    assert describe_days(parse_days("mon-fri")) == "Mon–Fri"
    assert describe_days(parse_days("daily")) == "every day"
    assert describe_days(parse_days("mon,wed")) == "Mon, Wed"


# --- topics ----------------------------------------------------------------------------------


def test_subscribing_twice_is_a_no_op(subs: Subscriptions) -> None:
    first, created = subs.add_topic("U1", "Graph Neural Networks", NOW)
    again, created_again = subs.add_topic("U1", "graph  neural network", NOW)
    assert created and not created_again
    assert again == first
    assert [t.query for t in subs.topics("U1")] == ["Graph Neural Networks"]


def test_the_same_topic_for_two_members_is_two_subscriptions(subs: Subscriptions) -> None:
    subs.add_topic("U1", "diffusion models", NOW)
    subs.add_topic("U2", "diffusion models", NOW)
    by_member = subs.topics_by_member()
    assert set(by_member) == {("", "U1"), ("", "U2")}  # (team, user): no team known


def test_topic_cap_per_member(subs: Subscriptions) -> None:
    for n in range(MAX_TOPICS):
        subs.add_topic("U1", f"topic{n} words", NOW)
    with pytest.raises(SubscriptionError, match=f"already follow {MAX_TOPICS} topics"):
        subs.add_topic("U1", "quantum chemistry", NOW)
    subs.add_topic("U1", "topic3 words", NOW)  # an existing one is still a no-op, not an error
    assert len(subs.topics("U1")) == MAX_TOPICS


def test_topic_length_cap(subs: Subscriptions) -> None:
    with pytest.raises(SubscriptionError, match=f"at most {MAX_TOPIC_CHARS} characters"):
        subs.add_topic("U1", "word " * 60, NOW)


def test_unusable_topics_are_refused(subs: Subscriptions) -> None:
    with pytest.raises(SubscriptionError, match="very common words"):
        subs.add_topic("U1", "the of and", NOW)
    with pytest.raises(QueryError, match="filter"):
        subs.add_topic("U1", "colour:blue gnn", NOW)
    with pytest.raises(SubscriptionError, match="Say what to follow"):
        subs.add_topic("U1", "   ", NOW)
    assert subs.topics("U1") == []


def test_unsubscribe_by_number_or_text(subs: Subscriptions) -> None:
    for text in ("graph neural networks", "diffusion models", "protein design"):
        subs.add_topic("U1", text, NOW)
    assert subs.remove_topic("U1", "2").query == "diffusion models"
    assert subs.remove_topic("U1", "Graph Neural Network").query == "graph neural networks"
    assert [t.query for t in subs.topics("U1")] == ["protein design"]


@pytest.mark.parametrize(
    ("which", "message"),
    [("7", "no topic number 7"), ("quantum", "do not follow “quantum”"), ("", "Say which")],
)
def test_unsubscribe_explains_what_went_wrong(
    subs: Subscriptions, which: str, message: str
) -> None:
    subs.add_topic("U1", "graph neural networks", NOW)
    with pytest.raises(SubscriptionError, match=message):
        subs.remove_topic("U1", which)


def test_unsubscribe_without_topics(subs: Subscriptions) -> None:
    with pytest.raises(SubscriptionError, match="do not follow any topics"):
        subs.remove_topic("U9", "1")


# --- preferences -------------------------------------------------------------------------------


def test_digest_is_on_after_the_first_subscription_with_defaults(subs: Subscriptions) -> None:
    member = subs.ensure_member("U1", NOW, team_id="T1")
    assert not member.enabled and subs.members() == []
    subs.add_topic("U1", "graph neural networks", NOW)
    member = subs.member("U1")
    assert member is not None and member.enabled
    assert (member.digest_time, member.digest_days) == (
        "09:00",
        ("mon", "tue", "wed", "thu", "fri"),
    )
    assert member.team_id == "T1" and member.digest_channel is None
    assert [m.user_id for m in subs.members()] == ["U1"]


def test_digest_off_stays_off_when_subscribing_more(subs: Subscriptions) -> None:
    subs.add_topic("U1", "graph neural networks", NOW)
    subs.set_enabled("U1", False, NOW)
    subs.add_topic("U1", "diffusion models", NOW)
    assert not subs.member("U1").enabled
    subs.set_enabled("U1", True, NOW)
    assert subs.member("U1").enabled


def test_digest_on_without_topics_waits_for_a_topic(subs: Subscriptions) -> None:
    subs.set_enabled("U1", True, NOW)
    assert not subs.member("U1").enabled
    subs.add_topic("U1", "graph neural networks", NOW)
    assert subs.member("U1").enabled


def test_time_days_channel(subs: Subscriptions) -> None:
    subs.set_time("U1", "7:45pm", NOW)
    subs.set_days("U1", "sat-sun", NOW)
    subs.set_channel("U1", "C123", NOW)
    member = subs.member("U1")
    assert (member.digest_time, member.digest_days, member.digest_channel) == (
        "19:45",
        ("sat", "sun"),
        "C123",
    )


def test_time_zone_is_cached_for_a_day(subs: Subscriptions) -> None:
    member = subs.ensure_member("U1", NOW)
    assert member.tz_is_stale(NOW) and member.zone.key == "UTC"
    member = subs.set_tz("U1", "Asia/Tokyo", NOW)
    assert member.zone.key == "Asia/Tokyo"
    assert not member.tz_is_stale(NOW + timedelta(hours=23))
    assert member.tz_is_stale(NOW + timedelta(hours=24))


def test_an_unknown_time_zone_keeps_the_old_one(subs: Subscriptions) -> None:
    subs.set_tz("U1", "Europe/Berlin", NOW)
    later = NOW + timedelta(days=2)
    member = subs.set_tz("U1", "Mars/Olympus_Mons", later)
    assert member.tz == "Europe/Berlin" and not member.tz_is_stale(later)


def test_member_defaults_from_a_sparse_row() -> None:
    member = Member.from_row({"user_id": "U1"}, topic_count=1)
    assert member.enabled and member.local_time.hour == 9 and member.zone.key == "UTC"


# --- through Slack: what arrives escaped is stored as typed --------------------------------


def ask(slack: SlackHarness, text: str, user: str = "U1") -> dict:
    _, url = slack.slash(text, user=user)  # sent escaped, as Slack does (should_escape)
    reply = slack.reply(url)
    assert reply["response_type"] == "ephemeral"
    return reply


@pytest.mark.parametrize(
    ("typed", "stored", "shown"),
    [
        ("R&D robots", "R&D robots", "*R&amp;D robots*"),
        ('"a<b" robots', '"a<b" robots', '*"a&lt;b" robots*'),
        ("<!channel> & diffusion", "<!channel> & diffusion", "*&lt;!channel&gt; &amp; diffusion*"),
    ],
)
def test_slash_command_topics_are_stored_unescaped_and_shown_escaped_once(
    slack: SlackHarness, typed: str, stored: str, shown: str
) -> None:
    reply = ask(slack, f"subscribe {typed}")
    assert [t.query for t in Subscriptions(slack.engine.db).topics("U1")] == [stored]
    text = blocks_text(reply) + reply["text"]
    assert shown in text
    assert "&amp;amp;" not in text and "&amp;lt;" not in text and "<!channel>" not in text
    listed = blocks_text(ask(slack, "topics"))
    assert shown.strip("*") in listed
    removed = ask(slack, f"unsubscribe {typed}")
    assert "Unsubscribed from" in removed["text"]
    assert Subscriptions(slack.engine.db).topics("U1") == []


def test_the_listener_reads_args_not_the_payload_text(slack: SlackHarness) -> None:
    """``handle`` gets the unescaped text as ``args``; the payload's (escaped) text is not read."""
    from bot.slack.client import make_client
    from bot.slack.listeners import subscriptions
    from bot.slack.services import Services

    sent: list[dict] = []
    command = {"user_id": "U2", "team_id": "T1", "text": "subscribe R&amp;D robots"}
    services = Services(slack.engine, slack.settings)
    client = make_client(slack.settings)
    subscriptions.handle(
        command, "subscribe R&D robots", lambda **m: sent.append(m), client, services
    )
    assert [t.query for t in Subscriptions(slack.engine.db).topics("U2")] == ["R&D robots"]
    subscriptions.handle(
        {**command, "text": "subscribe other things"},
        "topics",
        lambda **m: sent.append(m),
        client,
        services,
    )
    assert "1. R&amp;D robots" in blocks_text(sent[-1])


def test_many_long_topics_are_listed_in_full_within_slacks_limits(slack: SlackHarness) -> None:
    subs = Subscriptions(slack.engine.db)
    for n in range(MAX_TOPICS):
        subs.add_topic("U1", f"topic{n} R&D <robots> " + "diffusion " * 17, NOW)
    reply = ask(slack, "topics")
    assert_valid(reply)
    sections = [b["text"]["text"] for b in reply["blocks"] if b["type"] == "section"]
    assert len(sections) > 1 and all(len(s) <= 3000 for s in sections)
    listed = "\n".join(sections)
    for n in range(1, MAX_TOPICS + 1):
        assert f"\n{n}. topic{n - 1} R&amp;D &lt;robots&gt;" in listed
    assert "&lt;number&gt;" in blocks_text(reply)  # the usage hint, not a broken link


def test_mistakes_are_escaped_once(slack: SlackHarness) -> None:
    reply = ask(slack, "digest <b>&")
    assert "`digest &lt;b&gt;&amp;`" in reply["text"]
    assert "&amp;lt;" not in reply["text"] + blocks_text(reply)


def test_an_existing_member_is_read_without_writing(tmp_path) -> None:
    """``ensure_member`` on someone already stored writes nothing: through a read-only
    connection it answers instead of failing "attempt to write a readonly database"."""
    path = tmp_path / "m.db"
    Subscriptions(StateStore(path)).ensure_member("U1", NOW, "T1")  # SQLite on both runs
    reader = Subscriptions(StateStore(path, read_only=True))
    member = reader.ensure_member("U1", NOW + timedelta(days=1), "T1")
    assert (member.user_id, member.team_id) == ("U1", "T1")
    assert reader.ensure_member("U1", NOW).user_id == "U1"
