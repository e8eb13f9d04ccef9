"""The shared state store (bot/state): the same behaviour on SQLite and on a real PostgreSQL
server (tests/postgres.py), existing SQLite deployments adopted, exactly-once claims between
processes that share nothing but the database, PostgreSQL restarts, ``migrate-state``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import inspect, select, text

import bot.state as bot_state
from bot.cli import main
from bot.settings import Settings
from bot.slack.server import health_report
from bot.state import StateStore, StateUnavailable, configure, open_state
from bot.state.store import HEAD, database_url
from bot.state.tables import ALL, TASTE_TABLES
from digest.clock import clock_health, write_heartbeat
from digest.ledger import STALE_CLAIM, Ledger
from digest.plan import DigestItem, DigestPlan, DigestSection
from digest.subscriptions import MAX_TOPICS, SubscriptionError, Subscriptions
from tests.slack_harness import http

NOW = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)
#: A SQLite file written by the code before the state store (main at 1d7ce52): members U1
#: (two topics, Berlin, DM DU1) and U2 (one topic, 07:30 Mon/Wed in CPAPERS), U1's digest of
#: 2024-03-04 sent (papers p1, p2), U2's left claimed by a worker that died, a heartbeat.
BEFORE_STORE = Path(__file__).parent / "fixtures" / "state" / "main-1d7ce52.db"


def plan(user: str, *papers: str) -> DigestPlan:
    items = [DigestItem(p, 0.5, ["why"], True) for p in papers]
    return DigestPlan(user, [DigestSection(1, "topic", items)])


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StateStore:
    if request.param == "sqlite":
        return StateStore(tmp_path / "state.db")
    return StateStore(request.getfixturevalue("postgres_url"))


def rows(store: StateStore) -> dict[str, list[dict]]:
    """Every state row, table by table, in key order (to compare two databases)."""
    out = {}
    with store.read() as conn:
        for table in ALL:
            keys = list(table.primary_key.columns)
            found = conn.execute(select(table).order_by(*keys)).mappings()
            out[table.name] = [dict(r) for r in found]
    return out


# --- members, topics, the ledger: one behaviour on both backends -------------------------------


def test_members_and_topics_round_trip(store: StateStore) -> None:
    subs = Subscriptions(store)
    topic, new = subs.add_topic("U1", "Graph Neural Networks", NOW, team_id="T1")
    assert new and topic.query == "Graph Neural Networks"
    assert subs.add_topic("U1", "graph neural network", NOW) == (topic, False)
    subs.set_time("U1", "7:45", NOW)
    subs.set_days("U1", "mon,wed", NOW)
    member = subs.member("U1")
    assert (member.team_id, member.digest_time, member.digest_days) == (
        "T1",
        "07:45",
        ("mon", "wed"),
    )
    assert member.topic_count == 1 and member.enabled
    subs.remove_topic("U1", "1")
    assert subs.topics("U1") == [] and not subs.member("U1").enabled


def test_the_topic_limit_holds_when_members_subscribe_from_many_processes_at_once(
    store: StateStore,
) -> None:
    """Thirty subscriptions at once from separate pools (as from many web processes) for a
    member one short of the limit: exactly one gets in."""
    subs = Subscriptions(store)
    for n in range(MAX_TOPICS - 1):
        subs.add_topic("U1", f"topic number{n}", NOW)
    others = [StateStore(store.url, pool_size=2) for _ in range(3)]
    outcomes: list[str] = []
    start = threading.Barrier(30)

    def subscribe(n: int) -> None:
        start.wait()
        try:
            Subscriptions(others[n % 3]).add_topic("U1", f"rival topic{n}", NOW)
            outcomes.append("added")
        except SubscriptionError:
            outcomes.append("full")

    threads = [threading.Thread(target=subscribe, args=(n,)) for n in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["added"] + ["full"] * 29
    assert len(subs.topics("U1")) == MAX_TOPICS
    for other in others:
        other.close()


def test_a_digest_is_claimed_sent_and_its_papers_never_come_again(store: StateStore) -> None:
    ledger = Ledger(store, "a")
    claim = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1", "p2"), NOW)
    assert claim is not None and claim.plan.paper_ids == ["p1", "p2"]
    assert ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), NOW) is None
    assert ledger.renew(claim, NOW, channel="DU1")
    ledger.record_sent(claim, "DU1", "1.0001", NOW)
    row = ledger.get("U1:2024-03-04")
    assert (row["status"], row["channel"], row["ts"]) == ("sent", "DU1", "1.0001")
    assert ledger.existing(["U1:2024-03-04", "U1:2024-03-05"]) == {"U1:2024-03-04"}
    # By member: (team, user); this one's workspace was never recorded ("").
    assert store.sent_papers([("", "U1")]) == {("", "U1"): ["p1", "p2"]}
    assert store.last_digests([("", "U1")]) == {("", "U1"): "2024-03-04T08:00:00+00:00"}
    # The next day's plan holds p2 again: only p3 is claimed; all sent already: skipped.
    later = NOW + timedelta(days=1)
    again = ledger.claim("U1:2024-03-05", "U1", "2024-03-05", plan("U1", "p2", "p3"), later)
    assert again.plan.paper_ids == ["p3"]
    ledger.record_failed(again, "user_disabled", later)
    assert ledger.get("U1:2024-03-05")["status"] == "failed"
    assert ledger.claim("U1:2024-03-06", "U1", "2024-03-06", plan("U1", "p1"), later) is None
    assert ledger.get("U1:2024-03-06")["status"] == "skipped"


def test_a_stale_claim_is_retaken_with_its_content_and_a_fresh_one_is_not(
    store: StateStore,
) -> None:
    dead, alive = Ledger(store, "dead"), Ledger(store, "alive")
    claim = dead.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), NOW)
    dead.renew(claim, NOW, channel="DU1")
    assert alive.retake_stale(NOW + STALE_CLAIM - timedelta(seconds=1)) == []
    [retaken] = alive.retake_stale(NOW + STALE_CLAIM + timedelta(seconds=1))
    assert (retaken.retaken, retaken.channel, retaken.plan.paper_ids) == (True, "DU1", ["p1"])
    assert not dead.renew(claim, NOW + STALE_CLAIM)  # no longer the dead worker's to post
    alive.release(retaken, NOW + STALE_CLAIM)
    [again] = Ledger(store, "third").retake_stale(NOW + STALE_CLAIM + timedelta(seconds=2))
    assert again.channel == "DU1"  # a retaken claim may be in Slack: its channel is kept


def test_on_demand_digests_get_their_own_ids_one_at_a_time(store: StateStore) -> None:
    ledger = Ledger(store, "a")
    first, status = ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p1"), NOW)
    assert (first.digest_id, status) == ("U1:2024-03-04T08:00#1", "claimed")
    assert ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p2"), NOW) == (None, "busy")
    ledger.record_sent(first, "DU1", "1.1", NOW)
    assert ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p1"), NOW) == (None, "skipped")
    second, _ = ledger.claim_now("U1", "2024-03-04T08:00", plan("U1", "p2"), NOW)
    assert second.digest_id == "U1:2024-03-04T08:00#2"


def test_one_digest_claimed_by_many_processes_at_once_goes_to_exactly_one(
    store: StateStore,
) -> None:
    """Eight workers with their own connection pools (nothing shared but the database, as
    clocks on different hosts) race for the same digests: each has one owner."""
    workers = [Ledger(StateStore(store.url, pool_size=2), f"w{n}") for n in range(8)]
    won: dict[str, list[str]] = {}
    start = threading.Barrier(len(workers))

    def race(ledger: Ledger) -> None:
        start.wait()
        for user in range(40):
            digest_id = f"U{user}:2024-03-04"
            if ledger.claim(digest_id, f"U{user}", "2024-03-04", plan(f"U{user}", "p1"), NOW):
                won.setdefault(digest_id, []).append(ledger.worker)

    threads = [threading.Thread(target=race, args=(ledger,)) for ledger in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(won) == sorted(f"U{user}:2024-03-04" for user in range(40))
    assert all(len(owners) == 1 for owners in won.values()), won
    for ledger in workers:
        ledger.store.close()


def test_a_member_has_one_digest_in_flight_whoever_claims_at_the_same_moment(
    store: StateStore,
) -> None:
    """Eight workers (own pools) each claim a *different* digest of the same members at the
    same moment (a scheduled one here, ``digest now`` there): one per member gets it, so
    the same papers never go out twice side by side."""
    workers = [Ledger(StateStore(store.url, pool_size=2), f"w{n}") for n in range(8)]
    won: dict[str, list[str]] = {}
    lock = threading.Lock()
    start = threading.Barrier(len(workers))

    def race(n: int, ledger: Ledger) -> None:
        for user in range(30):
            start.wait()  # every worker at the same member at the same moment
            day = f"2024-03-{n + 4:02d}"
            if ledger.claim(f"U{user}:{day}", f"U{user}", day, plan(f"U{user}", "p1"), NOW):
                with lock:
                    won.setdefault(f"U{user}", []).append(day)

    threads = [threading.Thread(target=race, args=pair) for pair in enumerate(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(won) == 30
    assert all(len(days) == 1 for days in won.values()), won
    for ledger in workers:
        ledger.store.close()


def test_the_heartbeat_and_clock_health(store: StateStore) -> None:
    assert clock_health(store, NOW).last_tick is None
    Subscriptions(store).add_topic("U1", "graph neural networks", NOW)
    assert clock_health(store, NOW).stale  # digests on, no clock has ticked
    write_heartbeat(store, NOW, 60, "clock-1")
    write_heartbeat(store, NOW + timedelta(seconds=60), 60, "clock-2")  # one row, replaced
    health = clock_health(store, NOW + timedelta(seconds=240))
    assert health.last_tick == NOW + timedelta(seconds=60) and not health.stale
    assert clock_health(store, NOW + timedelta(seconds=241)).stale


# --- existing SQLite deployments -----------------------------------------------------------


def test_a_sqlite_file_from_before_the_store_is_adopted_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "paperboy.db"
    shutil.copy(BEFORE_STORE, path)
    store = StateStore(path)
    # Adopted, and brought up to date by the corpus migrations (m029 adds the feedback tables).
    assert store.revision() == HEAD == "s050_corpus_arxiv_version"
    subs = Subscriptions(store)
    u1, u2 = subs.members(enabled_only=False)
    assert (u1.tz, u1.dm_channel, u1.team_id, u1.topic_count) == ("Europe/Berlin", "DU1", "T1", 2)
    assert (u2.digest_time, u2.digest_days, u2.digest_channel) == (
        "07:30",
        ("mon", "wed"),
        "CPAPERS",
    )
    assert [t.query for t in subs.topics("U1")] == ["graph neural networks", "diffusion models"]
    assert store.sent_papers() == {("T1", "U1"): ["p1", "p2"]}  # their team, from members
    ledger = Ledger(store, "new-worker")
    [retaken] = ledger.retake_stale(NOW + STALE_CLAIM)
    assert (retaken.digest_id, retaken.plan.paper_ids) == ("U2:2024-03-04", ["p3"])
    topic, new = subs.add_topic("U2", "graph neural networks", NOW)
    assert new and topic.id == 4  # the file's own id sequence goes on
    assert clock_health(store, NOW).last_tick == NOW


def test_a_read_only_file_from_before_the_store_is_read_without_writing(tmp_path: Path) -> None:
    path = tmp_path / "paperboy.db"
    shutil.copy(BEFORE_STORE, path)
    before = path.read_bytes()
    store = StateStore(path, read_only=True)
    assert len(Subscriptions(store).members()) == 2
    assert path.read_bytes() == before and store.revision() == "s001"


# --- PostgreSQL: restarts, timeouts, health, migrate-state ---------------------------------


def test_a_call_during_a_restart_is_one_sentence_and_the_next_one_works(
    postgres_cluster, postgres_url
) -> None:
    store = StateStore(postgres_url, pool_size=2)
    subs = Subscriptions(store)
    subs.add_topic("U1", "graph neural networks", NOW)
    postgres_cluster.stop()
    try:
        with pytest.raises(StateUnavailable) as stopped:
            subs.topics("U1")
        message = str(stopped.value)
        assert message.startswith("The database postgresql://postgres@127.0.0.1:")
        assert message.endswith("try again in a moment.") and "\n" not in message
    finally:
        postgres_cluster.start()
    # The pool's connections died with the server: pre-ping replaces them, no error.
    assert [t.query for t in subs.topics("U1")] == ["graph neural networks"]
    store.close()


def test_a_statement_that_runs_too_long_is_stopped(postgres_url, monkeypatch) -> None:
    monkeypatch.setattr("bot.state.store.STATEMENT_TIMEOUT_MS", 300)
    store = StateStore(postgres_url, pool_size=1)
    with pytest.raises(StateUnavailable, match="statement timeout"), store.read() as conn:
        conn.execute(text("select pg_sleep(5)"))
    store.check()
    store.close()


def test_health_is_unhealthy_in_one_sentence_while_postgresql_is_down(
    postgres_cluster, postgres_url, tmp_path: Path
) -> None:
    corpus = tmp_path / "paperboy.db"
    StateStore(corpus).close()  # a corpus file (its own migrations)
    configure(postgres_url)
    try:
        assert health_report(corpus)["status"] == "ok"
        postgres_cluster.stop()
        try:
            report = health_report(corpus)
        finally:
            postgres_cluster.start()
        assert report["status"] == "unhealthy"
        assert report["database"].startswith("The database postgresql://")
        assert health_report(corpus)["status"] == "ok"
    finally:
        configure(None)


def test_migrate_state_copies_a_sqlite_deployment_into_postgresql_idempotently(
    tmp_path: Path, postgres_url
) -> None:
    path = tmp_path / "paperboy.db"
    shutil.copy(BEFORE_STORE, path)
    runner = CliRunner()
    first = runner.invoke(main, ["--db", str(path), "migrate-state", "--to", postgres_url])
    assert first.exit_code == 0, first.output
    assert "2 members, 3 topics, 2 digests, 2 sent papers, 1 clock heartbeat" in first.output
    assert "0 taste settings" in first.output
    assert first.output.endswith("Now set DATABASE_URL to it for every Paperboy process.\n")
    target = open_state(postgres_url)
    copied = rows(target)
    assert copied == rows(StateStore(path))
    second = runner.invoke(
        main, ["--db", str(path), "migrate-state"], env={"DATABASE_URL": postgres_url}
    )
    assert second.exit_code == 0, second.output
    assert second.output.endswith(
        "DATABASE_URL names it already: restart every Paperboy process to use it.\n"
    )
    assert rows(target) == copied
    # The copy is a working deployment: the next topic gets the next id, the stale claim
    # is retaken there.
    topic, new = Subscriptions(target).add_topic("U2", "graph neural networks", NOW)
    assert new and topic.id == 4
    assert [c.digest_id for c in Ledger(target, "w").retake_stale(NOW + STALE_CLAIM)] == [
        "U2:2024-03-04"
    ]


def test_migrate_state_says_what_is_wrong_in_one_sentence(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(
        main, ["--db", str(tmp_path / "none.db"), "migrate-state", "--to", "postgresql://x/y"]
    )
    assert missing.exit_code == 1
    assert (
        missing.output
        == f"Error: There is no database at {tmp_path / 'none.db'} to copy the state from.\n"
    )
    path = tmp_path / "paperboy.db"
    shutil.copy(BEFORE_STORE, path)
    port = 1  # nothing listens there
    down = runner.invoke(
        main, ["--db", str(path), "migrate-state", "--to", f"postgresql://u@127.0.0.1:{port}/db"]
    )
    assert down.exit_code == 1
    assert down.output.startswith(
        "Error: The database postgresql://u@127.0.0.1:1/db is not answering"
    )
    assert down.output.count("\n") == 1


def test_a_slash_command_during_a_postgresql_restart_gets_an_apology_and_the_next_works(
    slack, postgres_cluster, postgres_url, caplog
) -> None:
    """Through Slack's HTTP requests, with ``DATABASE_URL``: subscribe, PostgreSQL goes down
    (a restart), ``topics`` is acknowledged and apologised for, then works once it is back."""
    configure(postgres_url)
    try:
        _, url = slack.slash("subscribe diffusion models")
        assert "diffusion models" in slack.reply(url)["text"]
        assert [t.query for t in Subscriptions(open_state(postgres_url)).topics("U1")] == [
            "diffusion models"
        ]
        postgres_cluster.stop()
        try:
            with caplog.at_level("INFO"):
                status, url = slack.slash("topics")
                assert status == 200  # acknowledged: nothing waits on the database before that
                assert slack.reply(url)["text"].startswith("Sorry, something went wrong")
                # Unhealthy to alerts, ready to a platform's check: restarting the web
                # process would not mend PostgreSQL, and lookups still answer.
                assert http(slack.url + "/healthz")[0] == 503
                assert http(slack.url + "/readyz") == (200, '{"status": "ready"}')
            # The operator's log: the outage in one line, no traceback.
            assert not [r for r in caplog.records if r.exc_info], caplog.text
        finally:
            postgres_cluster.start()
        _, url = slack.slash("topics")
        assert "1. diffusion models" in slack.reply(url)["text"]
    finally:
        configure(None)


def test_a_clock_whose_database_does_not_answer_exits_1_in_one_sentence(tmp_path: Path) -> None:
    """A real ``paperboy scheduler`` (the Procfile's clock) with DATABASE_URL on a port where
    nothing listens: the platform sees exit 1 and one sentence, no traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "PAPERBOY_"))}
    env.update(
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
        DATABASE_URL="postgresql://paperboy:secret@127.0.0.1:1/paperboy",
        PAPERBOY_DB=str(tmp_path / "paperboy.db"),
        SLACK_BOT_TOKEN="xoxb-test",
    )
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "scheduler"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "secret" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: The database postgresql://paperboy:***@127.0.0.1:1/paperboy ")
    assert "is not answering (" in last and last.endswith("; try again in a moment.")


def test_a_database_url_that_is_not_postgresql_is_refused_in_one_sentence(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "p.db"), "stats"], env={"DATABASE_URL": "mysql://x/y"}
    )
    assert result.exit_code == 2
    assert result.stderr == (
        "DATABASE_URL must be a postgresql:// URL (or unset, to keep the state in the SQLite "
        "database), not one starting 'mysql'.\n"
    )


def test_an_at_sign_left_in_a_password_is_named_and_never_echoed(tmp_path: Path) -> None:
    url = "postgresql://paperboy:p@sswordsecret@127.0.0.1:1/paperboy"
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "p.db"), "stats"], env={"DATABASE_URL": url}
    )
    assert result.exit_code == 2
    assert result.stderr == "DATABASE_URL has an @ in its password: write it %40 there.\n"
    # Where no setting checks it (``migrate-state --to``): refused, no part of it shown.
    path = tmp_path / "paperboy.db"
    shutil.copy(BEFORE_STORE, path)
    moved = CliRunner().invoke(main, ["--db", str(path), "migrate-state", "--to", url])
    assert moved.exit_code == 1 and "secret" not in moved.output
    assert moved.output == "Error: The database URL has an @ in its password: write it %40 there.\n"
    for fine in (  # an @ in the user name alone (Azure's user@server), or after the host
        "postgresql://user@server:p%40ss@server.postgres.database.azure.com/db",
        "postgresql://db.internal/db?user=a@b",
        "postgresql:///db?host=/var/run/postgresql",
    ):
        assert Settings.from_env({"DATABASE_URL": fine}).database_url == fine
        assert "@" not in (database_url(fine).host or "")


@pytest.mark.parametrize("wrong", ["database", "user"])
def test_a_database_url_the_server_refuses_says_to_check_it(
    postgres_cluster, tmp_path: Path, wrong: str
) -> None:
    """A database or user that does not exist is not "try again in a moment": no retry mends
    it, so the sentence points at DATABASE_URL (exit 1, one line)."""
    url = postgres_cluster.url("nosuchdb")
    if wrong == "user":
        url = url.replace("postgresql://postgres@", "postgresql://nobodyhere@").replace(
            "/nosuchdb", "/postgres"
        )
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "p.db"), "stats"], env={"DATABASE_URL": url}
    )
    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith(f"Error: The database {url} refused the connection (")
    assert "does not exist" in line
    assert line.endswith("check the database name, user and password in DATABASE_URL.")


@pytest.mark.parametrize(
    ("answer", "refused"),
    [
        ('FATAL:  password authentication failed for user "pb"', True),
        ("fe_sendauth: no password supplied", True),
        ('FATAL:  no pg_hba.conf entry for host "10.0.0.7", user "pb", database "pb"', True),
        ('FATAL:  permission denied for database "pb"', True),
        ("FATAL:  the database system is starting up", False),
        ("FATAL:  sorry, too many clients already", False),
        (
            'connection to server on socket "/run/postgresql/.s.PGSQL.5432" failed: '
            "Permission denied",
            False,
        ),
        ('connection to server at "127.0.0.1", port 1 failed: Connection refused', False),
    ],
)
def test_what_no_retry_mends_is_told_apart_from_an_outage(
    tmp_path: Path, answer: str, refused: bool
) -> None:
    """libpq's own words (psycopg gives no SQLSTATE at connection): a refusal says to check
    DATABASE_URL, an outage to try again."""
    message = str(
        StateStore(tmp_path / "p.db")._unavailable(Exception(f"connection failed: {answer}"))
    )
    assert ("check the database name, user and password" in message) == refused, message
    assert ("try again in a moment" in message) != refused


def test_the_head_the_store_knows_is_the_latest_migration(store: StateStore) -> None:
    """``HEAD`` spares every start Alembic's import; a new migration must move it too."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(Path(bot_state.__file__).parent / "migrations"))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD == store.revision()


def test_the_latest_digest_is_the_last_one_finished(store: StateStore) -> None:
    """What the App Home shows as the member's last digest."""
    ledger = Ledger(store, "a")
    assert ledger.latest("U1") is None
    first = ledger.claim("U1:2024-03-04", "U1", "2024-03-04", plan("U1", "p1"), NOW)
    ledger.record_sent(first, "DU1", "1.1", NOW)
    later = NOW + timedelta(days=1)
    second = ledger.claim("U1:2024-03-05", "U1", "2024-03-05", plan("U1", "p2"), later)
    assert ledger.latest("U1")["id"] == "U1:2024-03-05"  # claimed, in flight
    ledger.record_failed(second, "user_disabled", later)
    assert (ledger.latest("U1")["id"], ledger.latest("U1")["status"]) == ("U1:2024-03-05", "failed")


def test_a_new_sqlite_file_has_every_revisions_tables_whatever_order_they_came_in(tmp_path):
    """The corpus migrations make some state tables (m050: ``corpus_papers``) and Alembic the
    others (s010_taste: ``member_taste``): a new file must end with all of them, at HEAD."""
    store = StateStore(tmp_path / "new.db")
    with store.read() as conn:
        present = set(inspect(conn).get_table_names())
        stamped = conn.execute(text("select version_num from alembic_version")).scalar()
    assert {t.name for t in TASTE_TABLES} | {"corpus_papers"} <= present
    assert store.revision() == stamped == HEAD
