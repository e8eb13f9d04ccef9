"""Paperboy never creates a database where it only reads: a served database file that
disappears is not recreated empty by the next lookup, and ``paperboy stats`` leaves an empty
file as it found it."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.engine.corpus import DatabaseError
from bot.engine.search import Engine
from tests.slack_harness import SlackHarness, blocks_text, seeded_engine
from tests.slack_harness import http as get


def on_new_thread(work):
    """``work()`` on a thread of its own (the engine's connections are per thread):
    ``(result, error)``."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["result"] = work()
        except Exception as error:  # noqa: BLE001 - handed back to the test
            out["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return out.get("result"), out.get("error")


def test_a_lookup_after_the_file_moved_away_creates_nothing(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    path = tmp_path / "hz.db"
    engine = seeded_engine(path, seeded_db_template)
    assert engine.search("diffusion").total > 0  # this thread's connection is open
    path.rename(tmp_path / "hz.moved")

    result, error = on_new_thread(lambda: engine.search("diffusion"))
    assert result is None
    assert isinstance(error, DatabaseError)
    assert str(error) == (
        f"The database at {path} is gone (moved, deleted, or its disk unmounted), "
        "so nothing was looked up or saved."
    )
    assert not path.exists()  # not recreated empty (the operator's trial: a 0-byte file)
    _, error = on_new_thread(lambda: engine.corpus.count())
    assert isinstance(error, DatabaseError) and not path.exists()

    # Back where it was, the next thread's lookups work again.
    (tmp_path / "hz.moved").rename(path)
    result, error = on_new_thread(lambda: engine.search("diffusion").total)
    assert error is None and result and result > 0


def test_a_slash_command_after_the_file_moved_away_apologises_and_creates_nothing(
    slack: SlackHarness,
) -> None:
    path = slack.engine.db_path
    path.rename(path.with_name("hz.moved"))
    status, body = get(slack.url + "/healthz")
    assert status == 503 and json.loads(body)["status"] == "unhealthy"

    status, url = slack.slash("diffusion")  # answered on the app's pool: a new thread
    assert status == 200
    assert "Sorry, something went wrong on Paperboy's side" in blocks_text(slack.reply(url))
    assert not path.exists()
    assert get(slack.url + "/healthz")[0] == 503  # still: nothing was made in its place
    assert not path.exists()


def test_ingest_and_serve_still_create_a_new_database(tmp_path: Path) -> None:
    """The engine's own connections need the file to exist, so creating one still works
    where a command writes (``Engine.open`` with ``create``, as ingest and serve do)."""
    fresh = tmp_path / "folder" / "new.db"
    fresh.parent.mkdir()
    engine = Engine.open(fresh)
    assert fresh.is_file() and engine.corpus.count() == 0
    result, error = on_new_thread(lambda: engine.corpus.count())
    assert (result, error) == (0, None)


@pytest.fixture
def invoke(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PAPERBOY_DB", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(main, list(args), catch_exceptions=False)


NO_DATABASE = (
    "Error: There is no database at {path}: check the path, or create one with "
    "`paperboy ingest FILE` (or `paperboy serve`, which starts it from the seed corpus).\n"
)


@pytest.mark.parametrize("as_json", [False, True])
def test_stats_on_an_empty_file_says_there_is_no_database_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, invoke, as_json: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("zero.db").touch()
    result = invoke("--db", "zero.db", "stats", *(["--json"] if as_json else []))
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr == NO_DATABASE.format(path="zero.db")
    assert Path("zero.db").stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["zero.db"]  # no -wal, no index


def test_stats_on_a_sqlite_file_with_no_schema_writes_nothing(tmp_path: Path, invoke) -> None:
    path = tmp_path / "blank.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 7")  # a header, no tables
    before = path.read_bytes()
    result = invoke("--db", str(path), "stats")
    assert result.exit_code == 1
    assert result.stderr == NO_DATABASE.format(path=path)
    assert path.read_bytes() == before


def test_stats_on_a_database_reads_it_without_writing(
    tmp_path: Path, seeded_db_template: Path, invoke
) -> None:
    path = tmp_path / "cli.db"
    seeded_engine(path, seeded_db_template).db.conn.close()
    before = path.read_bytes()
    result = invoke("--db", str(path), "stats")
    assert result.exit_code == 0, result.output
    assert "papers    38" in result.stdout
    assert path.read_bytes() == before


def test_a_members_change_after_the_file_moved_away_creates_nothing(
    tmp_path: Path, seeded_db_template: Path
) -> None:
    """The members' state lives in the same file (SQLite): a subscription saved through a
    new connection after the file is gone fails, and leaves no empty file behind."""
    from bot.state import StateError, state_for
    from digest.subscriptions import Subscriptions

    NOW = datetime(2024, 3, 4, 8, 0, tzinfo=UTC)  # noqa: N806

    path = tmp_path / "st.db"
    engine = seeded_engine(path, seeded_db_template)
    subscriptions = Subscriptions(engine.db)
    subscriptions.add_topic("U1", "diffusion models", NOW)
    path.rename(tmp_path / "st.moved")
    with pytest.raises(StateError, match="is gone"):
        Subscriptions(state_for(path)).add_topic("U1", "graph neural networks", NOW)
    assert not path.exists()
