"""What an operator trial found: each case answers with one sentence, not a traceback."""

import json

import pytest
from click.testing import CliRunner

from bot.cli import main


@pytest.fixture
def invoke():
    runner = CliRunner()

    def invoke(*args, env=None):
        return runner.invoke(main, list(args), env=env)

    return invoke


@pytest.mark.parametrize("tick", ["0", "-5"])
def test_scheduler_tick_must_be_positive(invoke, tick):
    result = invoke("scheduler", "--tick", tick)
    assert result.exit_code == 2, result.output
    assert "--tick" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_serve_port_must_be_a_port(invoke, port):
    result = invoke("serve", "--port", port)
    assert result.exit_code == 2, result.output
    assert "--port" in result.output


def test_ingest_errors_name_the_file_as_given(invoke, tmp_path, monkeypatch):
    """Two years' papers.jsonl in their own folders: each message says which one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "2024").mkdir()
    (tmp_path / "2025").mkdir()
    (tmp_path / "2024" / "papers.xml").write_text("<feed><entry>\n")
    (tmp_path / "2025" / "papers.jsonl").write_text(
        '{"title": "A paper on things", "abstract": "An abstract long enough to be read."}\n'
        "not json\n"
    )
    result = invoke("--db", "x.db", "ingest", "2024/papers.xml", "2025/papers.jsonl")
    assert "2024/papers.xml is not well-formed XML" in result.stderr
    assert "rejected: 2025/papers.jsonl, line 2" in result.stderr


def test_search_paged_past_the_end_says_how_many_match(invoke, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the seed corpus: "diffusion" matches 3 papers
    monkeypatch.delenv("PAPERBOY_DB", raising=False)
    monkeypatch.delenv("PAPERBOY_SEED_DIR", raising=False)
    result = invoke("search", "--offset", "5", "diffusion")
    assert result.exit_code == 0
    assert "3 papers match “diffusion”; none after the first 3." in result.stdout
    assert "No papers match" not in result.stdout


@pytest.fixture
def seed_only(tmp_path, monkeypatch):
    """No database: lookups answer from the seed corpus."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PAPERBOY_DB", raising=False)
    monkeypatch.delenv("PAPERBOY_SEED_DIR", raising=False)


def test_a_query_may_start_with_an_exclusion(invoke, seed_only):
    result = invoke("search", "-diffusion")
    assert result.exit_code == 2
    assert "A query needs at least one word" in result.stderr
    assert "No such option" not in result.output


def test_search_options_still_work_beside_exclusions(invoke, seed_only):
    result = invoke("search", "--json", "-n", "1", "diffusion", "-survey", "--offset=1")
    answer = json.loads(result.stdout)
    assert answer["query"] == "diffusion -survey"
    assert answer["offset"] == 1 and len(answer["results"]) == 1
    assert invoke("search", "-n1", "diffusion").stdout.startswith("3 papers match; showing 1-1")
    assert "requires an argument" in invoke("search", "--limit").output


def test_a_refused_app_token_says_one_sentence_with_the_commands_prefix(
    tmp_path, seeded_db_template, capsys, caplog
):
    from bot.settings import Settings
    from bot.slack.socket_mode import run_socket_mode
    from tests.fake_slack import FakeSlack
    from tests.slack_harness import BOT_TOKEN, seeded_engine

    engine = seeded_engine(tmp_path / "r.db", seeded_db_template)
    with FakeSlack() as fake:
        fake.fail_next("apps.connections.open", error="invalid_auth")
        settings = Settings(
            db_path=engine.db_path,
            slack_bot_token=BOT_TOKEN,
            slack_app_token="xapp-1-A0PAPERBOY-1-0123456789abcdef",
            slack_api_url=fake.api_url,
        )
        with pytest.raises(SystemExit) as exit_info:
            run_socket_mode(settings, engine)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert not [r for r in caplog.records if r.name.startswith("slack")]  # Bolt said nothing
    assert err.strip().splitlines()[-1].startswith("paperboy worker: Slack did not accept")


def test_a_negative_grace_says_it_cannot_be_negative():
    from bot.settings import Settings, SettingsError

    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"PAPERBOY_DIGEST_GRACE_SECONDS": "-5"})
    assert "can't be negative" in str(caught.value)


def test_similar_options_have_help(invoke):
    help_text = invoke("similar", "--help").output
    assert "How many." in help_text and "Print JSON instead of text." in help_text


def test_digest_send_to_an_unknown_member_says_so_as_preview_does(invoke, tmp_path):
    from tests.fake_slack import FakeSlack

    db = tmp_path / "d.db"
    with FakeSlack() as slack:
        env = {"SLACK_API_URL": slack.api_url, "SLACK_BOT_TOKEN": "xoxb-test"}
        result = invoke("--db", str(db), "digest", "send", "--user", "NOBODY", "--now", env=env)
    assert result.exit_code == 1, result.output
    assert "NOBODY has no subscriptions" in result.output
    assert "nothing due" not in result.output


def test_digest_preview_of_an_empty_user_is_one_sentence(invoke, tmp_path):
    result = invoke("--db", str(tmp_path / "d.db"), "digest", "preview", "--user", "")
    assert result.exit_code == 2 and "user id" in result.output


def test_an_unknown_archive_after_arxiv_is_named():
    from bot.settings import Settings, SettingsError

    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"PAPERBOY_FEEDS": "arxiv:foo.bar"})
    assert "foo.bar, which is not an arXiv category" in str(caught.value)
    assert "no category after it" not in str(caught.value)


def test_arxiv_max_pages_is_capped():
    from bot.settings import Settings, SettingsError

    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"PAPERBOY_ARXIV_MAX_PAGES": "100000"})
    assert "PAPERBOY_ARXIV_MAX_PAGES must be at most 100" in str(caught.value)
    assert Settings.from_env({"PAPERBOY_ARXIV_MAX_PAGES": "100"}).arxiv_max_pages == 100


def test_similar_with_no_similar_paper_names_the_paper_not_an_internal_query(invoke, tmp_path):
    """`paperboy similar ID` of a paper that shares no word with any other: one sentence
    about that paper (as Slack's "Similar papers" says), not "No papers match “similar:ID”"."""
    papers = tmp_path / "p.jsonl"
    papers.write_text(
        '{"id": "fish", "title": "Zebrafish neurons", "abstract": "Zebrafish neurons imaged."}\n'
        '{"id": "axo", "title": "Axolotl regeneration", "abstract": "Axolotl limbs regrow."}\n'
    )
    db = str(tmp_path / "p.db")
    assert invoke("--db", db, "ingest", str(papers)).exit_code == 0
    result = invoke("--db", db, "similar", "axo")
    assert result.exit_code == 0, result.output
    assert "similar:" not in result.stdout
    assert result.stdout.strip() == "No papers are similar to axo."


def test_an_ingest_that_adds_a_delta_says_how_many_papers_are_searchable(invoke, tmp_path):
    """The live index adds a small delta segment: its size is not the index's, so the ingest
    says how many papers the index holds now beside the papers it just added."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(
        "".join(
            f'{{"id": "a{i}", "title": "Paper {i} on graph learning", '
            f'"abstract": "Graph neural networks number {i} for molecules."}}\n'
            for i in range(40)
        )
    )
    second.write_text('{"id": "b1", "title": "Zebrafish", "abstract": "Zebrafish neurons."}\n')
    db = str(tmp_path / "p.db")
    assert "index: 40 papers" in invoke("--db", db, "ingest", str(first)).stderr
    result = invoke("--db", db, "ingest", str(second))
    assert result.exit_code == 0, result.output
    index_line = next(line for line in result.stderr.splitlines() if line.startswith("index:"))
    assert "1 paper indexed" in index_line and "41 papers searchable" in index_line


def test_an_unterminated_string_is_said_without_at_at(invoke, tmp_path):
    """json's own message ends in "starting at"; the line's column follows it once."""
    papers = tmp_path / "p.jsonl"
    papers.write_text(
        '{"id": "g1", "title": "Good", "abstract": "A good abstract."}\n{"id": "x", "title": "broken\n'
    )
    document = tmp_path / "d.json"
    document.write_text('[{"id": "x", "title": "broken\n]')
    result = invoke("--db", str(tmp_path / "p.db"), "ingest", str(papers), str(document))
    assert "line 2: not valid JSON (Unterminated string starting at column 22)" in result.stderr
    assert "is not valid JSON: Unterminated string starting at line 1, column 23." in result.stderr
    assert "at at" not in result.stderr
