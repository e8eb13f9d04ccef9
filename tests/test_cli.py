"""The command line through its public interface: a real process environment, real files."""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bot.cli import main
from bot.engine.search import Engine
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


def test_an_ingest_that_reads_nothing_leaves_no_database(invoke, empty_folder):
    """A typo, a folder, an empty file, a PDF, in a fresh folder: each said in one line,
    exit 1, and no empty database left to stop the next lookup answering from the seed
    corpus."""
    (empty_folder / "a-folder").mkdir()
    (empty_folder / "empty.jsonl").write_text("")
    (empty_folder / "paper.pdf").write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
    made = {"a-folder", "empty.jsonl", "paper.pdf"}
    result = invoke("ingest", "missing.jsonl", "a-folder", "empty.jsonl", "paper.pdf")
    assert result.exit_code == 1
    errors = result.stderr.splitlines()
    assert errors[:2] == [
        "missing.jsonl does not exist.",
        "a-folder is a directory, not a corpus file.",
    ]
    assert len(errors) == 4 and "empty.jsonl" in errors[2] and "paper.pdf" in errors[3]
    assert result.stdout == "0 added, 0 updated, 0 unchanged, 0 rejected, 4 file(s) unreadable\n"
    assert {p.name for p in empty_folder.iterdir()} == made
    search = invoke("search", "language agents stepwise", "--limit", "1")
    assert search.exit_code == 0 and "QLASS" in search.stdout
    # A database that was there before is kept, whatever the ingest read.
    (empty_folder / "x.jsonl").write_text('{"title": "Wombats", "abstract": "On wombats."}\n')
    assert invoke("ingest", "x.jsonl").exit_code == 0
    assert invoke("ingest", "missing.jsonl").exit_code == 1
    assert "Wombats" in invoke("search", "wombats").stdout


@pytest.mark.parametrize("command", ["stats", "ingest"])
def test_a_database_path_that_is_a_folder_is_named(invoke, tmp_path, monkeypatch, command):
    """``PAPERBOY_DB`` naming a folder (``--db`` is refused by click's own check)."""
    papers = tmp_path / "x.jsonl"
    papers.write_text('{"title": "T", "abstract": "A paper about wombats."}\n')
    monkeypatch.setenv("PAPERBOY_DB", str(tmp_path))
    result = invoke(command, *([str(papers)] if command == "ingest" else []))
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: {tmp_path} is a folder, not a database file: name the file, like "
        f"{tmp_path / 'paperboy.db'}."
    )


def test_migrate_state_asks_for_its_target_and_every_option_says_what_it_does(
    invoke, tmp_path, monkeypatch
):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    result = invoke("--db", str(tmp_path / "p.db"), "migrate-state")
    assert result.exit_code == 2
    assert "Name the PostgreSQL database: --to postgresql://... (or set DATABASE_URL)." in (
        result.stderr
    )
    assert "[required]" not in invoke("migrate-state", "--help").stdout  # DATABASE_URL will do
    for command in ("stats", "search", "similar", "ingest", "saved"):
        text = invoke(command, "--help").stdout
        lines = [line.strip() for line in text.split("Options:", 1)[1].splitlines()]
        for line, after in zip(lines, [*lines[1:], ""], strict=True):
            if line.startswith("-"):  # its help beside it, or below it (a long option)
                assert "  " in line or (after and not after.startswith("-")), (command, line)


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


def test_a_database_in_a_missing_folder_is_one_sentence_and_no_folder(invoke, tmp_path):
    """A missing folder is often a disk that is not mounted: the database is not made in an
    empty mount point, where it would vanish with everything written to it."""
    papers = tmp_path / "papers.jsonl"
    papers.write_text('{"id": "p1", "title": "Diffusion models", "abstract": "Denoising."}\n')
    command = ["ingest", str(papers)]
    db = tmp_path / "mnt" / "volume" / "paperboy.db"
    result = invoke("--db", str(db), *command)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: Cannot create a database at {db}: the folder {db.parent} does not exist "
        f"(is its disk mounted?); create it first (`mkdir -p {db.parent}`)."
    )
    assert not (tmp_path / "mnt").exists()
    (tmp_path / "mnt" / "volume").mkdir(parents=True)
    assert invoke("--db", str(db), *command).exit_code == 0 and db.exists()


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
    """Lookups over an empty database (a fresh one without seeds) name the command to run,
    never "No papers match". (An ingest that reads nothing leaves no database: see
    ``test_an_ingest_that_reads_nothing_leaves_no_database``.)"""
    db = tmp_path / "empty.db"
    env = {"PAPERBOY_SEED_DIR": str(tmp_path / "missing")}
    Engine.open(db)
    assert db.exists()
    for command in (["search", "diffusion"], ["similar", "x"]):
        result = invoke("--db", str(db), *command, env=env)
        assert result.exit_code == 1, command
        assert result.stderr.strip() == (
            f"Error: Paperboy has no papers in {db} yet: an operator adds them with "
            "`paperboy ingest FILE`."
        )
        assert "No papers match" not in result.stdout
    stats = invoke("--db", str(db), "stats", env=env)
    assert stats.exit_code == 0 and "`paperboy ingest FILE`" in stats.stdout


def test_a_writing_command_says_when_the_seed_folder_is_missing(invoke, tmp_path):
    from tests.fake_slack import FakeSlack

    db = tmp_path / "new.db"
    with FakeSlack() as slack:
        result = invoke(
            "--db", str(db), "digest", "send", "--now",
            env={
                "PAPERBOY_SEED_DIR": "/nonexistent",
                "SLACK_API_URL": slack.api_url,
                "SLACK_BOT_TOKEN": "xoxb-test",
            },
        )  # fmt: skip
    assert result.exit_code == 0, result.output
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
        "search", "--batch", "-", "--limit", "3", input="QLASS\n\nyear:soon\nsmoothness\n"
    ).output
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["query"] for line in lines] == ["QLASS", "year:soon", "smoothness"]
    assert len(lines[0]["results"]) == 1 and set(lines[0]["results"][0]) == {"id", "score"}
    assert "error" not in lines[0]
    assert lines[1]["results"] == [] and "year:soon" in lines[1]["error"]


def test_batch_and_a_typed_query_together_are_refused(run):
    """A query typed beside --batch would be silently ignored: said, exit 2, nothing run."""
    result = run("search", "--batch", "-", "QLASS", input="smoothness\n")
    assert result.exit_code == 2
    assert "not both" in result.output and "'QLASS'" in result.output
    assert "smoothness" not in result.output


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
    text = run("similar", paper_id).stdout  # (the text names the paper they are like)
    assert text.startswith("Papers similar to “QLASS") and f"({paper_id}):" in text.splitlines()[0]
    stats = run("stats").output
    assert "38" in stats and "ICML" in stats


def test_db_option_overrides_the_environment(run, tmp_path):
    other = tmp_path / "other.db"
    seeded_engine(other, None)
    assert run("ingest", str(FIXTURES / "mixed.jsonl"), "--db", str(other)).exit_code == 0
    assert run("stats", "--json", "--db", str(other)).stdout != run("stats", "--json").stdout


def test_the_playground_does_not_invite_lookups_over_no_papers(
    invoke, tmp_path, monkeypatch, caplog
):
    from bot.playground.playground import Playground

    # Start and return at once: `run` then stops it as after Ctrl-C (nothing left running).
    monkeypatch.setattr(Playground, "serve_forever", lambda self: self.server.start())
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "empty.db"
    result = invoke(
        "--db", str(db), "serve", "--port", "0",
        env={"PAPERBOY_SEED_DIR": str(tmp_path / "missing")},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"the corpus in {db} is empty (paperboy ingest FILE)" in result.stderr
    assert "type /papers" not in result.stderr
    assert "missing does not exist, so the corpus is empty: add papers with" in caplog.text


@pytest.mark.parametrize(
    "args, bad",
    [
        (["--limit", "0"], "'--limit' / '-n': 0 is not in the range x>=1"),
        (["-n", "-3"], "'--limit' / '-n': -3 is not in the range x>=1"),
        (["--offset", "-2"], "'--offset': -2 is not in the range x>=0"),
    ],
)
@pytest.mark.parametrize("as_json", [[], ["--json"]], ids=["text", "json"])
def test_limit_and_offset_out_of_range_are_refused(run, args, bad, as_json):
    result = run("search", "diffusion", *args, *as_json)
    assert result.exit_code == 2 and result.stdout == ""
    assert bad in result.stderr


def test_similar_limit_out_of_range_is_refused(run):
    result = run("similar", "x", "--limit", "0")
    assert result.exit_code == 2 and "0 is not in the range x>=1" in result.stderr


@pytest.mark.parametrize("command", [["search", "QLASS"], ["ingest", "/nonexistent.jsonl"]])
def test_no_color_disables_colour_even_on_a_terminal(run, command):
    runner = CliRunner()
    # color=True: the runner behaves as a terminal, where click keeps ANSI colour codes.
    coloured = runner.invoke(main, command, color=True)
    assert "\x1b[" in coloured.output
    for value in ("1", "true", "0"):  # any non-empty value, see no-color.org
        plain = runner.invoke(main, command, color=True, env={"NO_COLOR": value})
        assert "\x1b[" not in plain.output
        assert plain.output == click.unstyle(coloured.output)
    empty = runner.invoke(main, command, color=True, env={"NO_COLOR": ""})
    assert "\x1b[" in empty.output


# --- a database this user may only read (issue 8) -------------------------------------------

DROP_WRITE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def _as_reader(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """``paperboy --db folder/ro.db ARGS`` as a user who may not write there. Tests run as root,
    who writes anything; without the capabilities that let root ignore permissions, root is
    held to the file modes like anyone else."""
    command = [sys.executable, "-m", "bot.cli", "--db", str(folder / "ro.db"), *args]
    if os.geteuid() == 0:
        command = DROP_WRITE + command
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERBOY_", "SLACK_"))}
    env["SLACK_BOT_TOKEN"] = "xoxb-test"  # well-formed, so the database is what is refused
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)


@pytest.fixture
def read_only(tmp_path, seeded_db_template):
    """A seeded database (and its index) in a folder, then file and folder made read-only."""
    folder = tmp_path / "ro"
    folder.mkdir()
    engine = seeded_engine(folder / "ro.db", seeded_db_template)
    engine.db.close()
    del engine

    def lock() -> dict[str, bytes]:
        for path in [folder / "ro.db", *folder.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        folder.chmod(0o555)
        return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}

    if os.geteuid() == 0 and (
        shutil.which("setpriv") is None
        or subprocess.run([*DROP_WRITE, "true"], capture_output=True).returncode != 0
    ):
        pytest.skip("running as root without setpriv: cannot act as a user who may not write")
    yield folder, lock
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_a_read_only_database_answers_lookups_and_refuses_writes(read_only, tmp_path):
    folder, lock = read_only
    before = lock()
    search = _as_reader(folder, "search", "diffusion", "--json")
    assert search.returncode == 0, search.stderr
    assert json.loads(search.stdout)["total"] > 0
    stats = _as_reader(folder, "stats")
    assert stats.returncode == 0, stats.stderr
    assert "(read-only)" in stats.stdout and "38" in stats.stdout

    paper = tmp_path / "p.jsonl"
    paper.write_text('{"id": "w", "title": "Wombats", "abstract": "Wombats dig."}\n')
    for command in (["ingest", str(paper)], ["digest", "send", "--now"]):
        refused = _as_reader(folder, *command)
        assert refused.returncode == 1, command
        assert refused.stderr == (
            f"Error: Cannot write to the database at {folder / 'ro.db'}: this user may not "
            "write it or its folder (run paperboy as the database's owner, or fix the "
            "permissions).\n"
        )
    # Nothing was written: no WAL switch, no journal, no migration, no index rebuilt.
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_a_read_only_database_without_its_index_builds_one_elsewhere(read_only):
    folder, lock = read_only
    shutil.rmtree(folder / "ro.db.index")
    lock()
    search = _as_reader(folder, "search", "QLASS")
    assert search.returncode == 0, search.stderr
    assert "QLASS" in search.stdout
    assert sorted(p.name for p in folder.iterdir()) == ["ro.db"]


def test_a_read_only_database_that_needs_migrating_says_so(read_only):
    folder, lock = read_only
    with sqlite3.connect(folder / "ro.db") as db:
        last = db.execute("select max(rowid) from _sqlite_migrations").fetchone()[0]
        db.execute("delete from _sqlite_migrations where rowid = ?", [last])
    db.close()
    lock()
    for command in (["search", "diffusion"], ["stats"]):
        result = _as_reader(folder, *command)
        assert result.returncode == 1
        assert result.stderr == (
            f"Error: The database at {folder / 'ro.db'} needs upgrading to this version of "
            "Paperboy, which a read-only database cannot be: run any command that writes "
            "(such as `paperboy serve`) once as a user who may write it.\n"
        )


def test_batch_reports_a_line_that_is_not_utf8_and_answers_the_rest(run, tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_bytes(b"\xef\xbb\xbfQLASS\nbad \xff byte\n\nsmoothness\r\n")
    result = run("search", "--batch", str(queries), "--limit", "2")
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(line["line"], line["query"]) for line in lines] == [
        (1, "QLASS"),
        (2, "bad \ufffd byte"),
        (4, "smoothness"),
    ]
    assert lines[0]["results"] and lines[2]["results"] and "error" not in lines[2]
    assert lines[1]["results"] == []
    assert lines[1]["error"] == (
        "Line 2 is not UTF-8 text (byte 0xff at position 5), so it was not searched."
    )


@pytest.mark.parametrize("args", [["scheduler"], ["digest", "send"], ["digest", "send", "--now"]])
@pytest.mark.parametrize("token", [None, "xoxp-user-token"], ids=["missing", "malformed"])
def test_the_digest_commands_check_the_bot_token_before_creating_anything(
    invoke, empty_folder, monkeypatch, args, token
):
    """A fresh folder, no usable SLACK_BOT_TOKEN: one sentence, exit 2, and nothing created
    (no database seeded first, no index built)."""
    for name in ("SLACK_BOT_TOKEN", "SLACK_API_URL", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    if token:
        monkeypatch.setenv("SLACK_BOT_TOKEN", token)
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith("SLACK_BOT_TOKEN must be set")
    assert len(result.stderr.strip().splitlines()) == 1
    assert list(empty_folder.iterdir()) == []


def test_manifest_prints_the_slack_apps_manifest_for_a_host():
    """``paperboy manifest``: the packaged manifest, ``YOUR-HOST`` replaced by ``--host`` (a
    scheme or a trailing slash dropped); a host that is not one is refused in a sentence."""
    shipped = (Path(__file__).parents[1] / "bot" / "slack" / "manifest.yml").read_text()
    runner = CliRunner()
    plain = runner.invoke(main, ["manifest"])
    assert plain.exit_code == 0 and plain.output == shipped
    assert "https://YOUR-HOST" in plain.output
    for host in ("papers.example.org", "https://papers.example.org/"):
        result = runner.invoke(main, ["manifest", "--host", host])
        assert result.exit_code == 0, result.output
        assert result.output == shipped.replace("https://YOUR-HOST", "https://papers.example.org")
        assert "https://papers.example.org/slack/events" in result.output
    for bad in ("", "papers.example.org/slack", "two words"):
        result = runner.invoke(main, ["manifest", "--host", bad])
        assert result.exit_code == 2 and "--host wants a host name" in result.output, bad


def _readme_command_lines() -> list[str]:
    """The ``paperboy ...`` lines of README's "The command line" block, comments dropped."""
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    block = readme.split("## The command line", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line.startswith("paperboy ")]


def test_the_readmes_read_only_commands_answer_on_a_fresh_install(invoke, empty_folder):
    """README's lookups, as written, in an empty folder (the seed corpus answers): each exits 0
    with something to show, never an empty page or "No papers match"."""
    import shlex

    ran = []
    for line in _readme_command_lines():
        args = shlex.split(line)[1:]
        if args[0] not in ("search", "similar", "stats", "manifest"):
            continue  # (ingest reads the user's files; serve and worker run until stopped)
        if "--batch" in args:
            (empty_folder / args[args.index("--batch") + 1]).write_text("diffusion models\n")
        result = invoke(*args)
        assert result.exit_code == 0, (line, result.output)
        assert result.stdout.strip() and "No papers match" not in result.stdout, line
        if "--json" in args:
            assert json.loads(result.stdout)["results"], line
        if "--batch" in args:
            assert json.loads(result.stdout.splitlines()[0])["results"], line
        ran.append(args[0])
    assert {"search", "similar", "stats", "manifest"} <= set(ran), ran


def test_a_reader_that_stops_early_ends_the_command_quietly_with_0(tmp_path: Path) -> None:
    """``paperboy search x | head``: the pipe closes after the first lines; more than a pipe's
    buffer (64 KiB) was still to come, so writing it fails. That is the reader's choice, not
    an error: status 0 and nothing on stderr (click alone exits 1)."""
    papers = tmp_path / "many.jsonl"
    with papers.open("w") as out:
        for n in range(400):
            words = " ".join(f"topic{n}w{k}" for k in range(40))
            out.write(
                json.dumps({"id": f"p{n}", "title": f"Model {n}", "abstract": f"model {words}"})
            )
            out.write("\n")
    db = tmp_path / "many.db"
    assert CliRunner().invoke(main, ["--db", str(db), "ingest", str(papers)]).exit_code == 0
    command = [sys.executable, "-c", "from bot.cli import main; main()", "--db", str(db)]
    process = subprocess.Popen(
        [*command, "search", "model", "--limit", "400"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline()  # the first line, as `head -1` reads it
    process.stdout.close()
    errors = process.stderr.read()
    assert process.wait(timeout=60) == 0 and errors == b""


def test_a_broken_pipe_that_is_not_stdout_is_an_error(monkeypatch) -> None:
    """Only a reader of stdout going away ends a command quietly: the same error from a
    socket or a child's pipe is a failure (a supervisor must see it)."""

    @main.command("fail-pipe")
    def fail_pipe() -> None:
        raise BrokenPipeError("a socket's peer went away")

    try:
        result = CliRunner().invoke(main, ["fail-pipe"])
        assert isinstance(result.exception, BrokenPipeError) and result.exit_code != 0
    finally:
        main.commands.pop("fail-pipe")


def test_ingest_of_a_url_or_an_arxiv_category_says_where_those_go(invoke, tmp_path):
    """``paperboy ingest http://...`` said "http:/host/feed.xml does not exist" (the URL made
    a path): it says ingest reads files, and how a URL or a category gets in."""
    db = tmp_path / "u.db"
    for source in ("http://127.0.0.1:3204/feed.xml", "arxiv:cs.LG"):
        result = invoke("--db", str(db), "ingest", source)
        assert result.exit_code == 2 and f"{source} is not a file" in result.output
        assert "PAPERBOY_FEEDS" in result.output
    assert not db.exists()
