"""Posting digests exactly once (digest/delivery.py, digest/ledger.py) against the local Slack
stand-in: crashes at every step, two schedulers, rate limits, members Slack refuses."""

import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from slack_sdk.http_retry import builtin_handlers
from sqlalchemy import select

from bot.engine.search import Engine
from bot.settings import Settings
from bot.slack.client import make_client
from bot.slack.poster import SlackPoster
from bot.slack.render.digest import DIGEST_EVENT
from bot.state import state_for
from bot.state.tables import digests
from digest.delivery import Dispatcher
from digest.ledger import STALE_CLAIM, Ledger
from digest.subscriptions import Subscriptions
from tests.digest_support import ManualClock, write_corpus
from tests.fake_slack import FakeSlack
from tests.postgres import state_env

REPO = Path(__file__).resolve().parents[1]
MONDAY_0700 = datetime(2024, 3, 4, 7, 0, tzinfo=UTC)
BERLIN_0900 = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)  # CET
STEPS = ("claimed", "opened", "posted", "recorded")
GNN = 9  # papers matching "graph neural networks" in the test corpus

# Every test here runs with the shared state in SQLite and in PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("state_backend")


class Crash(BaseException):
    """A process dying: not an Exception, so nothing on the way catches it."""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(MONDAY_0700)


@pytest.fixture
def fake(clock: ManualClock):
    with FakeSlack(clock=clock.timestamp) as running:
        yield running


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = Engine.open(tmp_path / "d.db")
    engine.ingest([write_corpus(tmp_path / "papers.jsonl")])
    return engine


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The rate-limit waits of slack_sdk's ``RateLimitErrorRetryHandler``, recorded instead
    of slept (and without its up-to-a-second jitter)."""
    recorded: list[float] = []
    monkeypatch.setattr(builtin_handlers, "time", SimpleNamespace(sleep=recorded.append))
    monkeypatch.setattr(builtin_handlers, "random", SimpleNamespace(random=lambda: 0.0))
    return recorded


def dispatcher(engine: Engine, fake: FakeSlack, waits: list[float], **options) -> Dispatcher:
    settings = Settings(slack_api_url=fake.api_url, slack_bot_token="xoxb-test")
    options.setdefault("worker", "worker-1")
    return Dispatcher(engine, SlackPoster(make_client(settings), engine), **options)


def killed_after_posting(db_path: Path, api_url: str, call: str) -> subprocess.CompletedProcess:
    """Run ``Dispatcher(...).<call>`` in a real process that dies (``os._exit(17)``) once Slack
    has the digest and before it is recorded."""
    child = (
        "import os, sys\n"
        "from datetime import datetime\n"
        "from bot.engine.search import Engine\n"
        "from bot.settings import Settings\n"
        "from bot.slack.client import make_client\n"
        "from bot.slack.poster import SlackPoster\n"
        "from bot.state import configure\n"
        "from digest.delivery import Dispatcher\n"
        "configure(os.environ.get('DATABASE_URL'))  # the parent's state, when in PostgreSQL\n"
        "db, api = sys.argv[1:3]\n"
        "def fault(step, digest_id):\n"
        "    if step == 'posted':\n"
        "        os._exit(17)\n"
        "client = make_client(Settings(slack_api_url=api, slack_bot_token='xoxb-test'))\n"
        "engine = Engine.open(db)\n"
        "dispatcher = Dispatcher(engine, SlackPoster(client, engine), worker='doomed', faults=fault)\n"
        f"dispatcher.{call}\n"
    )
    return subprocess.run(
        [sys.executable, "-c", child, str(db_path), api_url],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **state_env()},
        capture_output=True,
        timeout=120,
    )


def join(
    engine: Engine,
    fake: FakeSlack,
    user: str,
    *topics: str,
    tz: str = "Europe/Berlin",
    at: datetime = MONDAY_0700,
) -> None:
    fake.set_user(user, tz=tz)
    subs = Subscriptions(engine.db)
    for topic in topics or ("graph neural networks",):
        subs.add_topic(user, topic, at)


def crash_at(step: str):
    def fault(current: str, digest_id: str) -> None:
        if current == step:
            raise Crash(f"killed after {step} of {digest_id}")

    return fault


def digest_row(engine: Engine, digest_id: str) -> dict:
    row = Ledger(engine.db).get(digest_id)
    assert row is not None, digest_id
    return row


def digests_of(engine: Engine, user: str) -> list[dict]:
    """Every digest row of the member (through the state store: SQLite or PostgreSQL)."""
    store = state_for(engine.db_path)
    with store.read() as conn:
        rows = conn.execute(select(digests).where(digests.c.user_id == user)).mappings()
        return [dict(r) for r in rows]


def sent_papers(engine: Engine, user: str) -> list[str]:
    return sorted(state_for(engine.db_path).sent_papers([user]).get(user, []))


# --- the happy path ----------------------------------------------------------------------------


def test_a_due_digest_goes_by_dm_once_with_its_id_in_the_metadata(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    send = dispatcher(engine, fake, waits)
    assert send.run_due(BERLIN_0900 - timedelta(minutes=1)) == []  # 08:59 in Berlin
    [outcome] = send.run_due(BERLIN_0900)
    assert (outcome.status, outcome.digest_id, outcome.channel) == ("sent", "U1:2024-03-04", "DU1")
    [message] = fake.messages_in("DU1")
    assert message["metadata"] == {
        "event_type": DIGEST_EVENT,
        "event_payload": {"digest_id": "U1:2024-03-04", "papers": outcome.papers},
    }
    assert "Your paper digest" in message["text"]
    actions = [
        element["action_id"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    ]
    assert actions[:5] == ["similar:1", "share:1", "like:1", "dislike:1", "save:1"]
    assert len(actions) == 5 * outcome.papers
    row = digest_row(engine, "U1:2024-03-04")
    assert (row["status"], row["channel"], row["ts"]) == ("sent", "DU1", message["ts"])
    assert len(sent_papers(engine, "U1")) == outcome.papers == GNN

    assert send.run_due(BERLIN_0900 + timedelta(minutes=1)) == []  # the next tick: nothing
    assert send.run_due(BERLIN_0900 + timedelta(hours=5)) == []
    assert len(fake.calls_to("chat.postMessage")) == 1


def test_nothing_to_send_means_no_message(engine, fake, waits) -> None:
    join(engine, fake, "U1", "quantum chemistry")
    [outcome] = dispatcher(engine, fake, waits).run_due(BERLIN_0900)
    assert outcome.status == "skipped"
    assert fake.calls_to("chat.postMessage") == []
    assert digest_row(engine, "U1:2024-03-04")["status"] == "skipped"


def test_the_digest_goes_to_the_channel_the_member_named(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    Subscriptions(engine.db).set_channel("U1", "CPAPERS", MONDAY_0700)
    [outcome] = dispatcher(engine, fake, waits).run_due(BERLIN_0900)
    assert outcome.status == "sent" and len(fake.messages_in("CPAPERS")) == 1
    assert fake.calls_to("conversations.open") == []


def test_each_member_at_nine_in_their_own_zone(engine, fake, waits) -> None:
    join(engine, fake, "UBER", tz="Europe/Berlin")
    join(engine, fake, "UNYC", tz="America/New_York")
    send = dispatcher(engine, fake, waits)
    assert [o.user_id for o in send.run_due(BERLIN_0900)] == ["UBER"]
    assert send.run_due(datetime(2024, 3, 4, 13, 59, tzinfo=UTC)) == []
    assert [o.user_id for o in send.run_due(datetime(2024, 3, 4, 14, 0, tzinfo=UTC))] == ["UNYC"]
    # Time zones came from users.info, once each, and are cached for a day.
    assert sorted(c.params["user"] for c in fake.calls_to("users.info")) == ["UBER", "UNYC"]
    fake.set_user("UBER", tz="Asia/Tokyo")  # moved to Tokyo
    send.run_due(datetime(2024, 3, 5, 8, 0, tzinfo=UTC))  # refreshed: 09:00 Tokyo has passed
    assert Subscriptions(engine.db).member("UBER").tz == "Asia/Tokyo"
    assert len(fake.calls_to("users.info")) == 4


def test_dm_channels_are_remembered_so_a_team_at_nine_needs_no_conversations_open(
    engine, fake, waits, clock
) -> None:
    """conversations.open is Tier 3 (about 50 a minute; the fake enforces it): 60 members who
    all chose 09:00 get their first digests as the limit allows, and from then on every DM is
    reused, so the second day needs no conversations.open at all."""
    members = [f"U{n:02d}" for n in range(60)]
    for user in members:
        join(engine, fake, user)
    send = dispatcher(engine, fake, waits)
    clock.now = BERLIN_0900
    first = send.run_due(BERLIN_0900)
    assert sum(o.status == "sent" for o in first) == 50  # the rest wait for the limit
    clock.now = BERLIN_0900 + STALE_CLAIM + timedelta(minutes=1)
    retried = send.run_due(clock.now)
    assert sum(o.status == "sent" for o in retried) == 10
    assert len(fake.calls_to("chat.postMessage")) == 60

    opened = len(fake.calls_to("conversations.open"))
    clock.now = BERLIN_0900 + timedelta(days=1)
    tuesday = dispatcher(engine, fake, waits, worker="worker-2").run_due(clock.now)
    assert [o.status for o in tuesday] == ["skipped"] * 60  # nothing new; now with new papers:
    engine.ingest([write_corpus(engine.db_path.with_name("more.jsonl"), more_gnn_papers())])
    clock.now = BERLIN_0900 + timedelta(days=2)
    wednesday = dispatcher(engine, fake, waits, worker="worker-3").run_due(clock.now)
    assert [o.status for o in wednesday] == ["sent"] * 60
    assert len(fake.calls_to("conversations.open")) == opened  # not one more
    assert all(len(fake.messages_in(f"D{user}")) == 2 for user in members)


def test_a_remembered_dm_that_is_gone_is_opened_again(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    Subscriptions(engine.db).set_dm_channel("U1", "DGONE")  # e.g. the workspace was migrated
    [outcome] = dispatcher(engine, fake, waits).run_due(BERLIN_0900)
    assert (outcome.status, outcome.channel) == ("sent", "DU1")
    assert [c.params["channel"] for c in fake.calls_to("chat.postMessage")] == ["DGONE", "DU1"]
    assert Subscriptions(engine.db).member("U1").dm_channel == "DU1"
    assert digest_row(engine, "U1:2024-03-04")["channel"] == "DU1"


def more_gnn_papers() -> list[dict]:
    return [
        {
            "id": f"gnn-new-{n}",
            "title": f"Graph Neural Networks Revisited ({n})",
            "abstract": "We study graph neural networks and message passing on new graphs.",
            "authors": ["New Author"],
            "venue": "ICLR",
            "year": 2024,
        }
        for n in range(3)
    ]


# --- exactly once --------------------------------------------------------------------------------


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_neither_loses_nor_doubles_the_digest(
    engine, fake, waits, step
) -> None:
    join(engine, fake, "U1")
    with pytest.raises(Crash):
        dispatcher(engine, fake, waits, faults=crash_at(step)).run_due(BERLIN_0900)
    posted_before = len(fake.messages_in("DU1"))
    assert posted_before == (1 if step in ("posted", "recorded") else 0)

    restarted = dispatcher(engine, fake, waits, worker="worker-2")
    soon = restarted.run_due(BERLIN_0900 + timedelta(minutes=2))  # the claim is still fresh
    assert all(o.status != "sent" for o in soon)
    later = restarted.run_due(BERLIN_0900 + STALE_CLAIM + timedelta(minutes=1))
    assert [o.status for o in later] == ([] if step == "recorded" else ["sent"])

    assert len(fake.messages_in("DU1")) == 1
    assert len(fake.calls_to("chat.postMessage")) == 1  # a retake found it instead of reposting
    row = digest_row(engine, "U1:2024-03-04")
    assert row["status"] == "sent" and row["ts"] == fake.messages_in("DU1")[0]["ts"]
    assert len(sent_papers(engine, "U1")) == GNN


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("path", ["scheduled", "digest now"])
def test_a_channel_digest_survives_a_crash_at_any_step(engine, fake, waits, step, path) -> None:
    """Posted with chat:write.public into a public channel: the bot joins it first, so after
    a crash the retaken digest is found in the channel's history instead of sent again."""
    join(engine, fake, "U1")
    Subscriptions(engine.db).set_channel("U1", "CPAPERS", MONDAY_0700)
    start = BERLIN_0900 if path == "scheduled" else MONDAY_0700
    crashing = dispatcher(engine, fake, waits, faults=crash_at(step))
    with pytest.raises(Crash):
        crashing.run_due(start) if path == "scheduled" else crashing.send_now("U1", start)
    assert len(fake.messages_in("CPAPERS")) == (1 if step in ("posted", "recorded") else 0)

    restarted = dispatcher(engine, fake, waits, worker="worker-2")
    later = start + STALE_CLAIM + timedelta(minutes=1)
    if path == "scheduled":
        restarted.run_due(later)
    else:
        restarted.send_now("U1", later)
    restarted.run_due(later + timedelta(minutes=1))
    [message] = fake.messages_in("CPAPERS")
    assert len(fake.calls_to("chat.postMessage")) == 1
    [digest] = digests_of(engine, "U1")
    assert (digest["status"], digest["ts"]) == ("sent", message["ts"])
    assert len(sent_papers(engine, "U1")) == GNN
    assert fake.is_member("CPAPERS")


def test_a_channel_digest_joins_once_and_a_private_channel_needs_an_invitation(
    engine, fake, waits
) -> None:
    for user in ("U1", "U2"):
        join(engine, fake, user)
        Subscriptions(engine.db).set_channel(user, "CPAPERS", MONDAY_0700)
    join(engine, fake, "U3")
    fake.add_channel("GHIDDEN", private=True)
    Subscriptions(engine.db).set_channel("U3", "GHIDDEN", MONDAY_0700)
    outcomes = {o.user_id: o for o in dispatcher(engine, fake, waits).run_due(BERLIN_0900)}
    assert [outcomes[u].status for u in ("U1", "U2")] == ["sent", "sent"]
    # Posted side by side (Dispatcher.workers): once per channel, in whichever order.
    assert sorted(c.params["channel"] for c in fake.calls_to("conversations.join")) == [
        "CPAPERS",
        "GHIDDEN",
    ]
    assert (outcomes["U3"].status, outcomes["U3"].error) == ("failed", "not_in_channel")


def test_when_slack_history_cannot_be_read_a_retaken_digest_is_never_posted_twice(
    engine, fake, waits
) -> None:
    join(engine, fake, "U1")
    with pytest.raises(Crash):
        dispatcher(engine, fake, waits, faults=crash_at("posted")).run_due(BERLIN_0900)
    fake.fail_next("conversations.history", times=10, error="missing_scope")
    back = dispatcher(engine, fake, waits, worker="worker-2")
    [retry] = back.run_due(BERLIN_0900 + STALE_CLAIM + timedelta(minutes=1))
    assert (retry.status, retry.error) == ("pending", "missing_scope")
    [given_up] = back.run_due(BERLIN_0900 + timedelta(hours=7))
    assert given_up.status == "failed"
    assert digest_row(engine, "U1:2024-03-04")["error"] == "unverifiable: missing_scope"
    assert digest_row(engine, "U1:2024-03-04")["status"] == "failed"
    assert len(fake.messages_in("DU1")) == 1


def test_a_claim_retaken_too_late_is_dropped_and_its_papers_come_next_time(
    engine, fake, waits
) -> None:
    join(engine, fake, "U1")
    with pytest.raises(Crash):
        dispatcher(engine, fake, waits, faults=crash_at("claimed")).run_due(BERLIN_0900)
    back = dispatcher(engine, fake, waits, worker="worker-2")
    [late] = back.run_due(BERLIN_0900 + timedelta(hours=7))
    assert (late.status, late.error) == ("failed", "expired")
    assert fake.messages_in("DU1") == [] and sent_papers(engine, "U1") == []
    [tuesday] = back.run_due(BERLIN_0900 + timedelta(days=1))
    assert tuesday.status == "sent" and tuesday.papers == GNN


def test_a_killed_process_between_post_and_record_is_finished_by_the_next(
    engine, fake, waits, tmp_path
) -> None:
    """A real process dies (os._exit) after Slack has the message but before it is recorded."""
    join(engine, fake, "U1")
    Subscriptions(engine.db).set_tz("U1", "Europe/Berlin", MONDAY_0700)
    done = killed_after_posting(
        engine.db_path,
        fake.api_url,
        f"run_due(datetime.fromisoformat({BERLIN_0900.isoformat()!r}))",
    )
    assert done.returncode == 17, done.stderr.decode()[-2000:]
    assert len(fake.messages_in("DU1")) == 1
    assert digest_row(engine, "U1:2024-03-04")["status"] == "claimed"

    [outcome] = dispatcher(engine, fake, waits, worker="restarted").run_due(
        BERLIN_0900 + STALE_CLAIM + timedelta(minutes=1)
    )
    assert outcome.status == "sent"
    assert len(fake.messages_in("DU1")) == 1
    assert len(fake.calls_to("chat.postMessage")) == 1
    assert len(fake.calls_to("conversations.history")) == 1
    assert len(sent_papers(engine, "U1")) == GNN


def test_two_schedulers_at_once_send_each_digest_once(engine, fake, waits, monkeypatch) -> None:
    # Both see every digest as not yet handled, as when they look at the same instant: only
    # the claim can decide.
    monkeypatch.setattr(Ledger, "existing", lambda self, ids: set())
    members = [f"U{n}" for n in range(6)]
    for user in members:
        join(engine, fake, user)
    start = threading.Barrier(2)
    results: dict[str, list] = {}

    def scheduler(name: str) -> None:
        send = dispatcher(engine, fake, waits, worker=name)
        start.wait()
        results[name] = send.run_due(BERLIN_0900)

    threads = [threading.Thread(target=scheduler, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    sent = [o.user_id for name in results for o in results[name] if o.status == "sent"]
    assert sorted(sent) == members
    for user in members:
        assert len(fake.messages_in(f"D{user}")) == 1, user


def test_a_claim_is_one_workers_until_it_goes_stale(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    plan = dispatcher(engine, fake, waits).preview("U1")
    first, second = Ledger(engine.db, "a"), Ledger(engine.db, "b")
    claim = first.claim("U1:2024-03-04", "U1", "2024-03-04", plan, BERLIN_0900)
    assert claim is not None and not claim.retaken
    assert second.claim("U1:2024-03-04", "U1", "2024-03-04", plan, BERLIN_0900) is None
    assert second.retake_stale(BERLIN_0900 + STALE_CLAIM - timedelta(seconds=1)) == []
    assert first.renew(claim, BERLIN_0900 + timedelta(minutes=1), "DU1")
    [taken] = second.retake_stale(BERLIN_0900 + timedelta(minutes=2) + STALE_CLAIM)
    assert taken.retaken and taken.channel == "DU1" and taken.plan == claim.plan
    assert not first.renew(claim, BERLIN_0900 + timedelta(minutes=13))  # it must not post now
    second.record_sent(taken, "DU1", "1.0", BERLIN_0900 + timedelta(minutes=13))
    first.record_sent(claim, "DU1", "2.0", BERLIN_0900 + timedelta(minutes=14))  # too late
    assert digest_row(engine, "U1:2024-03-04")["ts"] == "1.0"


def test_digest_now_and_the_scheduled_digest_never_send_the_same_paper(engine, fake, waits) -> None:
    join(engine, fake, "U1", "graph neural networks", "diffusion models")
    send = dispatcher(engine, fake, waits, limit=6)
    now = send.send_now("U1", MONDAY_0700 + timedelta(minutes=30))
    assert (now.status, now.digest_id) == ("sent", "U1:2024-03-04T08:30#1")
    [scheduled] = send.run_due(BERLIN_0900)
    assert scheduled.status == "sent"
    ids = sent_papers(engine, "U1")
    assert len(ids) == len(set(ids)) == 12
    assert len(fake.messages_in("DU1")) == 2


def test_digest_now_with_nothing_new_sends_nothing(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    send = dispatcher(engine, fake, waits)
    assert send.send_now("U1", MONDAY_0700).status == "sent"
    assert send.send_now("U1", MONDAY_0700 + timedelta(minutes=1)).status == "skipped"
    assert len(fake.messages_in("DU1")) == 1


def test_digest_now_with_nothing_to_send_uses_up_no_id(engine, fake, waits) -> None:
    """`digest now` (nothing), `subscribe protein`, `digest now`, all in one minute: sent."""
    join(engine, fake, "U1", "quantum chemistry")
    send = dispatcher(engine, fake, waits)
    at = MONDAY_0700 + timedelta(seconds=5)
    assert send.send_now("U1", at).status == "skipped"
    assert digests_of(engine, "U1") == []
    Subscriptions(engine.db).add_topic("U1", "protein design", at)
    assert send.preview("U1").size
    outcome = send.send_now("U1", at + timedelta(seconds=20))
    assert (outcome.status, outcome.digest_id) == ("sent", "U1:2024-03-04T08:00#1")
    [message] = fake.messages_in("DU1")
    assert message["metadata"]["event_payload"]["digest_id"] == outcome.digest_id
    assert "Protein Design" in str(message["blocks"])


def test_each_digest_now_with_something_to_send_gets_its_own_id(engine, fake, waits) -> None:
    """A digest sent, `subscribe graph`, `digest now` in the same minute: the second goes too."""
    join(engine, fake, "U1", "protein design")
    send = dispatcher(engine, fake, waits)
    at = MONDAY_0700 + timedelta(seconds=1)
    first = send.send_now("U1", at)
    Subscriptions(engine.db).add_topic("U1", "graph neural networks", at)
    second = send.send_now("U1", at + timedelta(seconds=30))
    assert (first.status, second.status) == ("sent", "sent")
    assert (first.digest_id, second.digest_id) == ("U1:2024-03-04T08:00#1", "U1:2024-03-04T08:00#2")
    assert second.papers == GNN
    assert [m["metadata"]["event_payload"]["digest_id"] for m in fake.messages_in("DU1")] == [
        first.digest_id,
        second.digest_id,
    ]
    assert send.send_now("U1", at + timedelta(seconds=40)).status == "skipped"
    ids = sent_papers(engine, "U1")
    assert len(ids) == len(set(ids)) == first.papers + second.papers


def test_digest_now_waits_for_a_digest_in_flight(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    plan = dispatcher(engine, fake, waits).preview("U1")
    Ledger(engine.db, "scheduler").claim("U1:2024-03-04", "U1", "2024-03-04", plan, BERLIN_0900)
    outcome = dispatcher(engine, fake, waits).send_now("U1", BERLIN_0900)
    assert outcome.status == "busy"
    assert fake.calls_to("chat.postMessage") == []


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_during_digest_now_neither_loses_nor_doubles_it(engine, fake, waits, step) -> None:
    join(engine, fake, "U1")
    crashing = dispatcher(engine, fake, waits, faults=crash_at(step))
    with pytest.raises(Crash):
        crashing.send_now("U1", MONDAY_0700)
    assert dispatcher(engine, fake, waits).send_now("U1", MONDAY_0700).status == (
        "skipped" if step == "recorded" else "busy"
    )
    restarted = dispatcher(engine, fake, waits, worker="worker-2")
    later = restarted.run_due(MONDAY_0700 + STALE_CLAIM + timedelta(minutes=1))
    assert [o.status for o in later] == ([] if step == "recorded" else ["sent"])
    [message] = fake.messages_in("DU1")
    row = digest_row(engine, "U1:2024-03-04T08:00#1")
    assert row["status"] == "sent" and row["ts"] == message["ts"]
    assert len(sent_papers(engine, "U1")) == GNN


# --- Slack saying no ---------------------------------------------------------------------------


def test_a_rate_limit_is_waited_out_and_the_digest_still_goes(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    fake.fail_next("chat.postMessage", retry_after=7)
    [outcome] = dispatcher(engine, fake, waits).run_due(BERLIN_0900)
    assert outcome.status == "sent"
    assert waits == [7]  # exactly what Retry-After asked for
    assert len(fake.calls_to("chat.postMessage")) == 2
    assert len(fake.messages_in("DU1")) == 1


def test_a_long_rate_limit_is_retried_later_still_once(engine, fake, waits) -> None:
    join(engine, fake, "U1")
    fake.fail_next("chat.postMessage", times=4, retry_after=2)  # more than the client retries
    send = dispatcher(engine, fake, waits)
    [first] = send.run_due(BERLIN_0900)
    assert (first.status, first.error) == ("pending", "ratelimited")
    assert waits == [2, 2, 2]
    assert send.run_due(BERLIN_0900 + timedelta(minutes=1)) == []  # the claim is still fresh
    [retry] = send.run_due(BERLIN_0900 + STALE_CLAIM + timedelta(minutes=1))
    assert retry.status == "sent"
    assert len(fake.messages_in("DU1")) == 1


def test_one_failing_member_is_logged_and_skipped_the_others_get_theirs(
    engine, fake, waits, caplog
) -> None:
    members = ["U1", "U2", "U3", "U4"]
    for user in members:
        join(engine, fake, user)
    fake.set_user("U2", tz="Europe/Berlin", deleted=True)  # deactivated
    Subscriptions(engine.db).set_channel("U4", "CSECRET", MONDAY_0700)
    fake.fail_next("chat.postMessage", error="not_in_channel", channel="CSECRET")
    send = dispatcher(engine, fake, waits)
    outcomes = {o.user_id: o for o in send.run_due(BERLIN_0900)}
    assert {u: o.status for u, o in outcomes.items()} == {
        "U1": "sent",
        "U2": "failed",
        "U3": "sent",
        "U4": "failed",
    }
    assert (outcomes["U2"].error, outcomes["U4"].error) == ("user_disabled", "not_in_channel")
    assert "failed for good: user_disabled" in caplog.text
    assert digest_row(engine, "U2:2024-03-04")["error"] == "user_disabled"
    assert sent_papers(engine, "U2") == []
    # Not retried every minute for the rest of the day.
    assert send.run_due(BERLIN_0900 + timedelta(minutes=30)) == []


def test_a_bug_for_one_member_does_not_stop_the_others(engine, fake, waits, monkeypatch) -> None:
    for user in ("U1", "U2"):
        join(engine, fake, user)
    send = dispatcher(engine, fake, waits)
    original = send._post

    def flaky(claim, now, *rest):
        if claim.user_id == "U1":
            raise RuntimeError("boom")
        return original(claim, now, *rest)

    monkeypatch.setattr(send, "_post", flaky)
    outcomes = {o.user_id: o.status for o in send.run_due(BERLIN_0900)}
    assert outcomes == {"U1": "pending", "U2": "sent"}


# --- the message -------------------------------------------------------------------------------


def test_a_big_digest_is_cut_to_50_blocks_and_the_rest_comes_next_time(engine, fake, waits) -> None:
    topics = [
        "graph neural networks",
        "diffusion models",
        "reinforcement learning",
        "federated learning",
        "protein design",
    ]
    join(engine, fake, "U1", *topics)
    send = dispatcher(engine, fake, waits, limit=40)
    [first] = send.run_due(BERLIN_0900)
    [message] = fake.messages_in("DU1")
    assert len(message["blocks"]) <= 50
    assert first.papers == len(sent_papers(engine, "U1")) < 40
    [second] = send.run_due(BERLIN_0900 + timedelta(days=1))
    assert second.status == "sent"
    assert len(set(sent_papers(engine, "U1"))) == first.papers + second.papers
