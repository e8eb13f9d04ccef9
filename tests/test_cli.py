"""The command line through its public interface: a real process environment, real files."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main
from tests.slack_harness import seeded_engine

FIXTURES = Path(__file__).parent / "fixtures" / "formats"


@pytest.fixture
def invoke():
    runner = CliRunner()

    def invoke(*args, input=None, env=None):
        return runner.invoke(main, list(args), input=input, env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def run(tmp_path, monkeypatch, seeded_db_template, invoke):
    """``paperboy`` over a database holding the seed corpus (``$PAPERBOY_DB``)."""
    seeded_engine(tmp_path / "cli.db", seeded_db_template)
    monkeypatch.setenv("PAPERBOY_DB", str(tmp_path / "cli.db"))
    return invoke


@pytest.fixture
def empty_folder(tmp_path, monkeypatch):
    """A fresh install's situation: an empty working folder, no PAPERBOY_* settings."""
    folder = tmp_path / "empty"
    folder.mkdir()
    monkeypatch.chdir(folder)
    for name in ("PAPERBOY_DB", "PAPERBOY_SEED_DIR"):
        monkeypatch.delenv(name, raising=False)
    return folder


def test_search_on_the_embedded_default(invoke, empty_folder):
    """No database yet: a lookup answers from the seed corpus and creates nothing."""
    result = invoke("search", "language agents stepwise", "--limit", "2")
    assert result.exit_code == 0
    assert "QLASS" in result.stdout and "why:" in result.stdout
    assert "seed papers" in result.stderr
    assert list(empty_folder.iterdir()) == []
    stats = invoke("stats")
    assert stats.exit_code == 0 and "38" in stats.stdout and "seed corpus" in stats.stdout
    assert list(empty_folder.iterdir()) == []


@pytest.mark.parametrize("command", [["stats"], ["search", "diffusion"], ["similar", "x"]])
def test_read_only_commands_never_create_a_database(invoke, tmp_path, command):
    typo = tmp_path / "typo.db"
    result = invoke("--db", str(typo), *command)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: There is no database at {typo}: check the path, or create one with "
        "`paperboy ingest FILE` (or `paperboy serve`, which starts it from the seed corpus)."
    )
    assert not typo.exists() and list(tmp_path.iterdir()) == []


def test_digest_preview_never_creates_a_database(invoke, tmp_path):
    typo = tmp_path / "typo.db"
    result = invoke("digest", "preview", "--user", "U1", "--db", str(typo))
    assert result.exit_code == 1 and "There is no database at" in result.stderr
    assert not typo.exists()


def test_a_missing_seed_folder_is_one_sentence(invoke, empty_folder):
    result = invoke("search", "diffusion", env={"PAPERBOY_SEED_DIR": "/nonexistent"})
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: There is no database at paperboy.db and no seed folder at /nonexistent: "
        "add papers with `paperboy ingest FILE`."
    )
    assert list(empty_folder.iterdir()) == []


def test_an_empty_corpus_says_what_to_run(invoke, tmp_path):
    """A writing command with a missing seed folder makes an empty database, and says so;
    lookups over it name the command to run, never "No papers match"."""
    db = tmp_path / "empty.db"
    nothing = tmp_path / "nothing.csv"
    nothing.write_text("")
    env = {"PAPERBOY_SEED_DIR": str(tmp_path / "missing")}
    assert invoke("--db", str(db), "ingest", str(nothing), env=env).exit_code == 1
    assert db.exists()
    for command in (["search", "diffusion"], ["similar", "x"]):
        result = invoke("--db", str(db), *command, env=env)
        assert result.exit_code == 1, command
        assert result.stderr.strip() == (
            f"Error: The corpus in {db} has no papers yet: add some with `paperboy ingest FILE`."
        )
        assert "No papers match" not in result.stdout
    stats = invoke("--db", str(db), "stats", env=env)
    assert stats.exit_code == 0 and "`paperboy ingest FILE`" in stats.stdout


def test_a_writing_command_says_when_the_seed_folder_is_missing(invoke, tmp_path):
    db = tmp_path / "new.db"
    result = invoke(
        "--db", str(db), "digest", "send", "--now",
        env={"PAPERBOY_SEED_DIR": "/nonexistent", "SLACK_API_URL": "http://127.0.0.1:9/"},
    )  # fmt: skip
    assert (
        "The seed folder /nonexistent does not exist, so the new database starts empty: "
        "add papers with `paperboy ingest FILE`."
    ) in result.stderr
    assert db.exists()


def test_search_json(run):
    data = json.loads(run("search", "QLASS", "--json").output)
    assert data["results"][0]["title"].startswith("QLASS")
    assert "qlass" in data["results"][0]["why"]


def test_batch_prints_one_json_line_per_query(run):
    out = run(
        "search", "--batch", "-", "--limit", "3", input="QLASS\n\nfoo:bar\nsmoothness\n"
    ).output
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["query"] for line in lines] == ["QLASS", "foo:bar", "smoothness"]
    assert len(lines[0]["results"]) == 1 and set(lines[0]["results"][0]) == {"id", "score"}
    assert "error" not in lines[0]
    assert lines[1]["results"] == [] and "foo:" in lines[1]["error"]


def test_a_bad_query_exits_2_with_one_sentence(run):
    result = run("search", "year:soon")
    assert result.exit_code == 2 and "year:soon" in result.output


def test_ingest_reports_rejections_and_summary(run, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"id": "a", "title": "Fresh Paper On Wombats", "abstract": "Wombats."}\n[1]\n')
    result = run("ingest", str(path))
    assert result.exit_code == 0
    assert "line 2" in result.output
    assert "1 added, 0 updated, 0 unchanged, 1 rejected" in result.output
    again = run("ingest", str(path))
    assert "0 added, 0 updated, 1 unchanged" in again.output
    assert "Wombats" in run("search", "wombats").output


def test_ingest_of_nothing_usable_exits_1(run, tmp_path):
    path = tmp_path / "empty.csv"
    path.write_text("")
    result = run("ingest", str(path), str(tmp_path / "missing.json"))
    assert result.exit_code == 1
    assert "empty.csv is empty" in result.output and "missing.json does not exist" in result.output
    assert "2 file(s) unreadable" in result.output


def test_similar_and_stats(run):
    paper_id = json.loads(run("search", "QLASS", "--json").output)["results"][0]["id"]
    similar = json.loads(run("similar", paper_id, "--json").output)
    assert similar["results"] and paper_id not in [r["id"] for r in similar["results"]]
    stats = run("stats").output
    assert "38" in stats and "ICML" in stats


def test_db_option_overrides_the_environment(run, tmp_path):
    other = tmp_path / "other.db"
    seeded_engine(other, None)
    assert run("ingest", str(FIXTURES / "mixed.jsonl"), "--db", str(other)).exit_code == 0
    assert run("stats", "--json", "--db", str(other)).stdout != run("stats", "--json").stdout
