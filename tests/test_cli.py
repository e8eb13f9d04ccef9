"""The command line through its public interface: a real process environment, real files."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "formats"


@pytest.fixture
def run(tmp_path, monkeypatch):
    monkeypatch.setenv("PAPERBOY_DB", str(tmp_path / "cli.db"))
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(main, list(args), input=input, catch_exceptions=False)

    return invoke


def test_search_on_the_embedded_default(run):
    result = run("search", "language agents stepwise", "--limit", "2")
    assert result.exit_code == 0
    assert "QLASS" in result.output and "why:" in result.output


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
    assert run("search", "QLASS", "--db", str(other)).exit_code == 0
    assert other.exists()
