"""Issue 8, engine side: inputs and faults that must not give wrong answers or take Paperboy down.

Everything runs through public interfaces: the ``Engine`` API on real SQLite files, the
``paperboy`` CLI (click's runner or a real subprocess), and the digest's topic matching.
"""

import contextlib
import json
import os
from pathlib import Path

import pytest

from bot.engine.search import Engine
from digest.matching import match_topics


def write_jsonl(path: Path, papers: list[dict]) -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
    return path


def paper(pid: str, authors: list[str], **extra) -> dict:
    return {
        "id": pid,
        "title": f"Graph neural networks for molecules, part {pid}",
        "abstract": "We study message passing graph neural networks on molecular property data.",
        "authors": authors,
        "venue": "ICLR",
        "year": 2024,
        **extra,
    }


AUTHOR_PAPERS = [
    paper("li", ["Yang Li", "Ada Lovelace"]),
    paper("lin", ["Yang Lin"]),
    paper("split", ["Li Wei", "Yang Zhou"]),  # both tokens, but in two different authors
    paper("jose", ["José García-Pérez"]),
    paper("pct", ["Grace Hopper"]),
]


@pytest.fixture
def authors_engine(tmp_path):
    engine = Engine.open(tmp_path / "a.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", AUTHOR_PAPERS)])
    return engine


def found(engine: Engine, query: str) -> set[str]:
    result = engine.search(query, limit=50)
    assert result.error is None, result.error
    return {hit.id for hit in result.hits}


# -- author: -------------------------------------------------------------------------------


def test_author_matches_whole_tokens_of_one_author(authors_engine):
    assert found(authors_engine, 'author:"Yang Li"') == {"li"}
    assert found(authors_engine, 'author:"li yang" graph') == {"li"}  # order and case free
    assert found(authors_engine, "author:Yang") == {"li", "lin", "split"}
    assert found(authors_engine, "author:Lin") == {"lin"}


def test_author_is_accent_insensitive_both_ways(authors_engine):
    assert found(authors_engine, 'author:"jose garcia"') == {"jose"}
    assert found(authors_engine, 'author:"GARCÍA-PÉREZ"') == {"jose"}
    assert found(authors_engine, "author:perez") == {"jose"}


@pytest.mark.parametrize("query", ["author:%", "author:_", 'author:"%%"', "author:*"])
def test_author_wildcards_match_nothing_and_say_so(authors_engine, query):
    result = authors_engine.search(query)
    assert not result.hits
    assert result.error and "names nobody" in result.error


def test_author_wildcard_inside_a_name_is_just_a_separator(authors_engine):
    assert found(authors_engine, "author:Yang%Li") == {"li"}
    assert found(authors_engine, "author:Gr_ce") == set()


def test_author_topics_in_digests_match_per_author(authors_engine):
    docs_of = {}
    index = authors_engine.index
    for pid in ("li", "lin", "split"):
        docs_of[index.doc_of_rowid(authors_engine.corpus.rowid_of(pid))] = pid
    yang_li, percent = match_topics(authors_engine, ['author:"Yang Li"', "author:%"])
    assert {docs_of.get(int(d)) for d in yang_li.docs} == {"li"}
    assert percent.error and not len(percent.docs)


def test_author_filter_works_on_a_database_from_before_the_author_column(tmp_path):
    """Migration m010 fills the folded names in for papers ingested before it existed."""
    import sqlite3

    engine = Engine.open(tmp_path / "old.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", AUTHOR_PAPERS)])
    with sqlite3.connect(tmp_path / "old.db") as conn:
        conn.execute("update papers set author_names = null")
        conn.execute("delete from _sqlite_migrations where name = 'm010_author_names'")
        conn.execute("alter table papers drop column author_names")
    reopened = Engine.open(tmp_path / "old.db")
    assert found(reopened, 'author:"Yang Li"') == {"li"}


# -- loose query parsing ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("year:0000", "`year:0000` is not a year I understand"),
        ("graph year:0000", "`year:0000` is not a year I understand"),
        ("venue:,", "`venue:,` names no venue"),
        ("graph venue:|", "`venue:|` names no venue"),
        ("-diffusion", "at least one word to look for besides exclusions"),
        ('-"graph neural"', "at least one word to look for besides exclusions"),
    ],
)
def test_loose_filters_and_bare_exclusions_are_named_not_dropped(authors_engine, query, says):
    result = authors_engine.search(query)
    assert not result.hits
    assert result.error and says in result.error
    assert "keywords" not in result.error and "very common words" not in result.error


def test_an_exclusion_with_a_filter_still_works(authors_engine):
    assert found(authors_engine, "-lovelace year:2024") == {"lin", "split", "jose", "pct"}


# -- writers that wait -----------------------------------------------------------------------


def many_papers(prefix: str, n: int) -> list[dict]:
    words = [
        "diffusion",
        "graph",
        "protein",
        "language",
        "policy",
        "kernel",
        "sampling",
        "attention",
    ]
    return [
        {
            "id": f"{prefix}{i}",
            "title": f"{words[i % 8]} {words[(i // 8) % 8]} study {prefix} {i}",
            "abstract": " ".join(words[(i + j) % 8] for j in range(150)),
            "authors": [f"Author {i % 97}"],
            "year": 2020 + i % 5,
        }
        for i in range(n)
    ]


def test_two_ingests_at_once_both_go_in(tmp_path):
    """Two real ``paperboy ingest`` processes on one database: the second waits for the first."""
    import subprocess
    import sys

    db = tmp_path / "both.db"
    Engine.open(db)  # an existing database, as in production
    files = [
        write_jsonl(tmp_path / f"{name}.jsonl", many_papers(name, 6000)) for name in ("a", "b")
    ]
    command = [sys.executable, "-c", "from bot.cli import main; main()", "--db", str(db), "ingest"]
    runs = [
        subprocess.Popen([*command, str(f)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for f in files
    ]
    outcomes = [(run.wait(timeout=300), *run.communicate()) for run in runs]

    for status, out, err in outcomes:
        assert status == 0, err.decode()[-2000:]
        assert b"Traceback" not in err and b"locked" not in err
        assert out.decode().startswith("6,000 added")
    engine = Engine.open(db)
    assert engine.corpus.count() == 12_000
    assert engine.index.n_docs == 12_000  # and the index has them all
    assert engine.search("diffusion").total == 12_000


def test_a_writer_that_waits_too_long_gets_one_sentence(tmp_path, monkeypatch):
    import sqlite3

    from bot.engine import corpus

    db = tmp_path / "held.db"
    engine = Engine.open(db)
    holder = sqlite3.connect(db)
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write
    monkeypatch.setattr(corpus, "WRITER_WAIT_SECONDS", 0.2)
    try:
        with pytest.raises(corpus.StorageError) as caught:
            engine.ingest([write_jsonl(tmp_path / "a.jsonl", AUTHOR_PAPERS)])
    finally:
        holder.rollback()
    assert str(caught.value.message) == (
        "Another process has been writing to held.db for too long; try again when it is done."
    )
    engine.ingest([tmp_path / "a.jsonl"])  # and once it is done, the same ingest goes in
    assert engine.corpus.count() == len(AUTHOR_PAPERS)


# -- huge papers -----------------------------------------------------------------------------


def cli(*args):
    from click.testing import CliRunner

    from bot.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_oversized_records_are_rejected_at_ingest_with_file_and_line(tmp_path):
    from bot.engine.formats import LONGEST_ABSTRACT, LONGEST_TITLE

    huge = paper("huge", ["A B"], abstract="graph " * (LONGEST_ABSTRACT // 6 + 1))
    long_title = paper("long", ["A B"], title="Graph " * (LONGEST_TITLE // 6 + 1))
    path = write_jsonl(tmp_path / "big.jsonl", [paper("ok", ["A B"]), huge, long_title])
    seed = tmp_path / "big-seed.txt"
    seed.write_text("ICML 2025 Papers\n\n" + "We propose a graph model. " * 5000 + "\n")
    db = tmp_path / "big.db"

    result = cli("--db", str(db), "ingest", str(path), str(seed))

    assert result.exit_code == 0
    assert f"{path}, line 2: abstract is " in result.output
    assert (
        f"{path}, line 3: title is " in result.output and "over the limit of 1,000" in result.output
    )
    assert f"{seed}, line 3: abstract is " in result.output
    assert Engine.open(db).corpus.count() == 1


def test_a_huge_abstract_already_stored_does_not_stall_lookups(tmp_path):
    """A paper stored before the limit: its snippet comes from the start, marked as cut."""
    engine = Engine.open(tmp_path / "old-huge.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", [paper("big", ["A B"])])])
    # 2.3 MB; its best window for the query, far past the first 20 kB, is not looked for.
    abstract = (
        "Graph networks for molecules. " + "padding words here " * 120_000 + "graph diffusion"
    )
    engine.db.execute("update papers set abstract = ? where id = 'big'", [abstract])
    engine.db.conn.commit()

    (hit,) = engine.search("graph diffusion").hits
    text = "".join(piece for piece, _ in hit.snippet)
    assert text.startswith("Graph networks") and text.endswith("…")
    assert ("Graph", True) in hit.snippet
    assert len(text) < 400


def test_snippet_window_is_the_same_as_the_quadratic_search_it_replaces():
    import random

    from bot.engine.search import SNIPPET_WORDS, make_snippet
    from bot.engine.text import surface_words

    def reference(text, terms, max_words=SNIPPET_WORDS):  # the code before issue 8
        spans = surface_words(text)
        hits = [i for i, (_, _, norm) in enumerate(spans) if norm and norm in terms]
        best, best_count = 0, -1
        for first in hits:
            ws = max(0, first - 5)
            distinct = {spans[i][2] for i in hits if ws <= i < ws + max_words}
            if len(distinct) > best_count:
                best, best_count = ws, len(distinct)
        return spans[best][0] if hits and len(spans) > max_words else 0

    rng = random.Random(8)
    vocab = ["graph", "model", "the", "diffusion", "of", "protein", "data", "kernel", "noise"]
    for _ in range(300):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 200)))
        terms = set(rng.sample(["graph", "model", "diffusion", "protein", "kernel"], 3))
        pieces = make_snippet(text, terms)
        shown = "".join(p for p, _ in pieces).lstrip("…")
        assert text[reference(text, terms) :].startswith(shown.removesuffix("…")), text


# -- control characters ----------------------------------------------------------------------


HOSTILE = "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 \x1b[2J\x1b[31mred\x1b[0m \u202eevil\u202c \x9b1m"


def test_control_sequences_and_bidi_overrides_are_stripped_at_ingest(tmp_path):
    record = paper(
        "hostile",
        [f"Ada {HOSTILE} Lovelace"],
        title=f"Graph networks {HOSTILE}",
        abstract=f"We study graph networks. {HOSTILE} \x00\x08\x7f\x85end",
        keywords=[f"graphs{HOSTILE}"],
        venue="ICLR\x1b[1m",
        url=f"https://example.org/{HOSTILE}",
    )
    path = write_jsonl(tmp_path / "hostile.jsonl", [record])
    atom = tmp_path / "feed.xml"
    atom.write_text(
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry>'
        "<id>http://arxiv.org/abs/2501.01234v1</id><title>Graph \u202enetworks\u2069</title>"
        "<summary>Graph \u0085networks \u009b2Jfor molecules</summary>"
        '<author><name>Yang\u2066 Li</name></author><category term="cs.LG\u202e"/>'
        "<published>2025-01-02T00:00:00Z</published></entry></feed>",
        encoding="utf-8",
    )
    db = tmp_path / "hostile.db"
    assert cli("--db", str(db), "ingest", str(path), str(atom)).exit_code == 0

    out = cli("--db", str(db), "search", "graph networks", "--json").output
    plain = cli("--db", str(db), "search", "graph networks").output
    stored = json.dumps(Engine.open(db).corpus.get_many(["hostile", "arxiv:2501.01234"]))
    for text in (out, plain, stored):
        for bad in ("\x1b", "\\u001b", "\x07", "\\u0007", "\u202e", "\\u202e", "\x9b", "\\u009b"):
            assert bad not in text
        assert "\u2066" not in text and "\\u2066" not in text and "\\u0000" not in text
    got = Engine.open(db).paper("hostile")
    assert got["title"] == "Graph networks click red evil"
    assert got["authors"] == ["Ada click red evil Lovelace"]
    assert got["venue"] == "ICLR"
    assert got["abstract"].endswith("click red evil end")
    assert Engine.open(db).paper("arxiv:2501.01234")["keywords"] == ["cs.LG"]


# -- a full disk -----------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


def test_a_full_disk_during_the_index_build_leaves_the_previous_index_serving(
    tmp_path, monkeypatch, caplog
):
    """ENOSPC injected at the index's write call: papers committed, one sentence, no temp files,
    lookups answered from the previous index, and the build retried only after a back-off."""
    import errno

    from bot.engine import index as index_module
    from bot.engine.index import IndexBuildError

    db = tmp_path / "full.db"
    first = write_jsonl(tmp_path / "first.jsonl", [paper("old", ["A B"])])
    more = write_jsonl(tmp_path / "more.jsonl", [paper("new", ["C D"], title="Protein folding")])
    dead_builder = tmp_path / "full.db.index.tmp-99999999"  # left by a builder that died
    dead_builder.mkdir()
    engine = Engine.open(db)
    engine.clock = clock = Clock()
    engine.ingest([first])
    assert not dead_builder.exists()

    attempts = []

    def no_space(self, data):
        attempts.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(index_module._ChecksumWriter, "write", no_space)
    with pytest.raises(IndexBuildError) as caught:
        engine.ingest([more])
    message = caught.value.message
    assert message.startswith("The papers were saved (1 added, 0 updated, 0 unchanged, 0 rejected)")
    assert "the disk holding" in message and "is full" in message and "\n" not in message
    assert engine.corpus.count() == 2
    assert not list(tmp_path.glob("*.tmp-*"))

    # Lookups keep working on the previous index, without a build on every one.
    builds = len(attempts)
    for _ in range(3):
        assert [h.id for h in engine.search("graph molecules").hits] == ["old"]
    assert len(attempts) == builds
    # Another process (a CLI lookup) sees the back-off too and answers at once.
    monkeypatch.setattr("time.time", clock)
    out = cli("--db", str(db), "search", "graph molecules", "--json")
    assert out.exit_code == 0 and json.loads(out.output)["results"][0]["id"] == "old"
    assert len(attempts) == builds

    clock.now += 31  # after the back-off: one more attempt, still serving the old index
    assert [h.id for h in engine.search("graph molecules").hits] == ["old"]
    assert len(attempts) == builds + 1
    assert [h.id for h in engine.search("graph molecules").hits] == ["old"]
    assert len(attempts) == builds + 1  # and the next back-off is longer
    clock.now += 31
    engine.search("graph")
    assert len(attempts) == builds + 1
    assert not list(tmp_path.glob("*.tmp-*"))

    monkeypatch.undo()  # space again: another process builds it, and this one, still
    Engine.open(db).rebuild_index()  # backing off, picks that index up at once
    assert {h.id for h in engine.search("graph molecules protein").hits} == {"old", "new"}
    assert not (tmp_path / "full.db.index.failed").exists()
    assert len(attempts) == builds + 1
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors and all("is full" in e for e in errors)


def test_with_no_index_to_fall_back_on_a_lookup_gets_the_sentence(tmp_path, monkeypatch):
    import errno

    from bot.engine import index as index_module

    db = tmp_path / "none.db"
    engine = Engine.open(db)
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", AUTHOR_PAPERS)])
    for leftover in tmp_path.glob("none.db.index*"):
        if leftover.is_dir():
            import shutil

            shutil.rmtree(leftover)

    def no_space(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(index_module._ChecksumWriter, "write", no_space)
    result = cli("--db", str(db), "search", "graph")
    assert result.exit_code == 1
    assert result.output.startswith("Error: The search index could not be written because")
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert not list(tmp_path.glob("*.tmp-*"))


def test_sqlite_disk_full_during_ingest_is_one_sentence(tmp_path):
    from bot.engine.corpus import StorageError

    engine = Engine.open(tmp_path / "small.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", AUTHOR_PAPERS)])
    (pages,) = engine.db.execute("PRAGMA page_count").fetchone()
    engine.db.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite's own SQLITE_FULL
    with pytest.raises(StorageError) as caught:
        engine.ingest([write_jsonl(tmp_path / "b.jsonl", many_papers("b", 2000))])
    assert caught.value.message == (
        "The disk holding small.db is full, so nothing was saved: free some space and try again."
    )
    assert engine.corpus.count() == len(AUTHOR_PAPERS)


# -- a damaged index -------------------------------------------------------------------------

TRUNCATE_SCRIPT = """
import json, os, sys
from bot.engine.search import Engine
engine = Engine.open(sys.argv[1])
before = [(h.id, round(h.score, 5)) for h in engine.search("graph molecules", limit=50).hits]
path = os.path.join(engine.index.segments[0].directory, "xt_indices.npy")
with open(path, "r+b") as handle:  # an outside actor truncates the mmapped file
    handle.truncate(200)
after = [(h.id, round(h.score, 5)) for h in engine.search("graph molecules", limit=50).hits]
print(json.dumps({"before": before, "after": after}))
"""


def test_a_truncated_index_under_a_running_process_is_rebuilt_not_a_sigbus(tmp_path):
    import subprocess
    import sys

    db = tmp_path / "cut.db"
    Engine.open(db).ingest([write_jsonl(tmp_path / "a.jsonl", many_papers("x", 1000))])
    run = subprocess.run(
        [sys.executable, "-c", TRUNCATE_SCRIPT, str(db)], capture_output=True, timeout=300
    )
    assert run.returncode == 0, (run.returncode, run.stderr.decode()[-1500:])
    answer = json.loads(run.stdout)
    assert answer["after"] == answer["before"] and len(answer["before"]) == 50
    log_lines = [line for line in run.stderr.decode().splitlines() if "damaged" in line]
    assert len(log_lines) == 1 and "xt_indices.npy is" in log_lines[0]


def test_a_same_size_corruption_is_caught_by_the_checksum_and_rebuilt(tmp_path, caplog):
    import os

    db = tmp_path / "flip.db"
    engine = Engine.open(db)
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", many_papers("x", 500))])
    before = [(h.id, h.score) for h in engine.search("graph kernel", limit=20).hits]
    data = engine.index.segments[0].directory / "xt_data.npy"
    stat = data.stat()

    def corrupt():
        with open(data, "r+b") as handle:  # same size, the scores zeroed
            handle.seek(128)
            handle.write(bytes(stat.st_size - 128))
        os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even the mtime put back

    corrupt()
    fresh = Engine.open(db)  # a process opening it: checksums compared, index rebuilt
    assert [(h.id, h.score) for h in fresh.search("graph kernel", limit=20).hits] == before
    damaged = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert damaged == [
        f"The search index at {data.parent.parent} is damaged ({data.parent.name}/xt_data.npy "
        "does not match its checksum); rebuilding it."
    ]

    # A process that already has it open notices the rewrite by the new inode and mtime.
    caplog.clear()
    data = fresh.index.segments[0].directory / "xt_data.npy"  # the rebuilt segment
    with open(data, "r+b") as handle:
        handle.seek(128)
        handle.write(bytes(64))
    assert [(h.id, h.score) for h in fresh.search("graph kernel", limit=20).hits] == before
    assert len([r for r in caplog.records if "damaged" in r.getMessage()]) == 1


def random_papers(prefix: str, n: int, seed: int) -> list[dict]:
    """Papers of random words from a large vocabulary: an index about twice the database."""
    import random

    rng = random.Random(seed)
    vocab = [f"w{i:04d}x" for i in range(4000)]
    return [
        {
            "id": f"{prefix}{i}",
            "title": " ".join(rng.choices(vocab, k=8)),
            "abstract": " ".join(rng.choices(vocab, k=150)),
            "authors": ["A B"],
            "year": 2024,
        }
        for i in range(n)
    ]


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 4 MB filesystem (tmpfs), or a skip where mounting is not allowed."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True
        )
    except FileNotFoundError:
        pytest.skip("no mount command here: the ENOSPC-injection tests cover this")
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({mounted.stderr.decode().strip()})")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_real_full_disk_one_sentence_each_and_lookups_keep_working(tmp_path, tiny_disk):
    import subprocess
    import sys

    db = tiny_disk / "t.db"

    def paperboy(*args):
        run = subprocess.run(
            [sys.executable, "-c", "from bot.cli import main; main()", "--db", str(db), *args],
            capture_output=True,
            timeout=300,
        )
        err = run.stderr.decode()
        assert "Traceback" not in err
        errors = [line for line in err.splitlines() if line.startswith("Error:")]
        return run.returncode, run.stdout.decode(), errors

    small = write_jsonl(tmp_path / "small.jsonl", random_papers("s", 30, 1))
    assert paperboy("ingest", str(small))[0] == 0
    # 1,900 papers fit in the database; their index (about 3 MB) does not.
    more = write_jsonl(tmp_path / "more.jsonl", random_papers("m", 1900, 2))
    status, _, errors = paperboy("ingest", str(more))
    assert status == 1
    assert errors == [
        "Error: The papers were saved (1,900 added, 0 updated, 0 unchanged, 0 rejected), but the "
        f"search index could not be written because the disk holding {tiny_disk} is full; "
        "lookups use the previous index, if there is one, until there is space again."
    ]
    assert not [p.name for p in tiny_disk.iterdir() if ".tmp-" in p.name]
    status, out, errors = paperboy("search", "w0001x", "--json")
    assert status == 0 and not errors and json.loads(out)["results"]  # the previous index
    # 3,000 more do not fit in the database itself: SQLite's own "database or disk is full".
    most = write_jsonl(tmp_path / "most.jsonl", random_papers("x", 3000, 3))
    status, _, errors = paperboy("ingest", str(most))
    assert status == 1
    assert errors == [
        "Error: The disk holding t.db is full, so nothing was saved: free some space and try again."
    ]
    status, out, _ = paperboy("stats", "--json")
    assert status == 0 and json.loads(out)["papers"] == 1930


@pytest.mark.parametrize("existing", [False, True], ids=["new database", "existing database"])
def test_a_disk_with_no_byte_left_is_named_when_the_database_is_opened(
    tmp_path, tiny_disk, existing
):
    """With nothing free SQLite cannot create its journal and says "disk I/O error"; the
    operator is told the disk is full, as when it fills during an ingest."""
    import subprocess
    import sys

    papers = write_jsonl(tmp_path / "p.jsonl", random_papers("s", 3, 1))
    first = write_jsonl(tmp_path / "first.jsonl", random_papers("f", 3, 2))
    db = tiny_disk / "c.db"
    if existing:  # a database that was fine until the disk filled up
        subprocess.run(
            [sys.executable, "-c", "from bot.cli import main; main()"]
            + ["--db", str(db), "ingest", str(first)],
            check=True,
            capture_output=True,
            timeout=120,
        )
    fd = os.open(tiny_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # take every last byte: big writes, then single bytes
        for size in (65536, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    run = subprocess.run(
        [sys.executable, "-c", "from bot.cli import main; main()"]
        + ["--db", str(db), "ingest", str(papers)],
        capture_output=True,
        timeout=120,
    )
    err = run.stderr.decode()
    assert run.returncode == 1 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("Error:")] == [
        "Error: The disk holding c.db is full, so nothing was saved: free some space and try again."
    ]
