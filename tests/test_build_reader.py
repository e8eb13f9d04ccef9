"""A first ingest's build helper (``index._Reader``, ``build_helper.tokenise_papers``) is
handed the papers the ingest parses (``_Reader.feed``, ``build_helper.papers_fed``) and
tokenises them in file order while the ingest writes them; the build then tokenises from the last rowid backwards until the two meet
(``index._Claims``) and keeps the reader's papers only while they match the stored rows
(``index._tokenise_beside``). Whatever the reader did, the index files must be byte for
byte a one-process build's."""

import gzip
import marshal
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import bot.engine.build_helper as build_helper
import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.formats.detect import open_corpus_file
from bot.engine.index import read_current
from bot.engine.paper import Paper, paper_values
from bot.engine.search import Engine
from tests.test_index_build import _files
from tests.test_live_index import make_papers, write_jsonl


@pytest.fixture
def papers(sentences) -> list[dict]:
    papers = make_papers(sentences, "p", 240, seed=21)
    for k, paper in enumerate(papers):
        paper["abstract"] += f" kappa{k}word"  # a word of its own: the vocabulary tells
    return papers


@pytest.fixture
def with_reader(monkeypatch):
    """Builds in two processes, the helper started (as a reader) for files of any size."""
    monkeypatch.setattr(index_module, "PARALLEL_MIN_DOCS", 0)
    monkeypatch.setattr(index_module, "BUILD_PROCESSES", 2)
    monkeypatch.setattr(search_module, "PRESTART_MIN_BYTES", 0)


@pytest.fixture
def reader_done(monkeypatch):
    """The build waits for the reader to finish the file (a small file is written before the
    reader has started up: it would find nothing to claim)."""
    real = index_module._tokenise_beside

    def when_read(corpus, reader):
        reader._process.wait()
        return real(corpus, reader)

    monkeypatch.setattr(index_module, "_tokenise_beside", when_read)


def _papers_in(paths: list[str]):
    """The files' papers in order, as an ingest parses them."""
    for path in paths:
        with open_corpus_file(path) as stream:
            yield from (item for item in stream.items if isinstance(item, Paper))


def _hashed_papers_in(paths: list[str]):
    """The files' papers in order with their content hashes, as an ingest feeds its reader."""
    return ((paper, paper.content_hash()) for paper in _papers_in(paths))


def _one_process_files(tmp_path: Path, monkeypatch, sources: list[Path]) -> dict[str, bytes]:
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "BUILD_PROCESSES", 1)
        one = Engine.open(tmp_path / "one.db")
        for source in sources:
            one.ingest([source])
        one.rebuild_index()
        return _files(one.index_dir)


def _differing(a: dict[str, bytes], b: dict[str, bytes]) -> list[str]:
    """The files that differ (pytest's diff of the bytes themselves would take minutes)."""
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


def _spy_prefix(monkeypatch) -> list[tuple[int, int]]:
    """(reader's papers, papers used) of each build's match with the rows."""
    seen = []
    real = index_module._same_prefix

    def spy(read, stored):
        seen.append((len(read), real(read, stored)))
        return seen[-1][1]

    monkeypatch.setattr(index_module, "_same_prefix", spy)
    return seen


def _stored_then_index_lost(engine: Engine, monkeypatch, source: Path) -> None:
    """``source`` ingested in one process, then the index files deleted: the next ingest
    builds anew (with its reader) over rows stored before it."""
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "BUILD_PROCESSES", 1)
        engine.ingest([source])
    for path in engine.index_dir.iterdir():
        if path.is_file():
            path.unlink()


def _cut_gzip(tmp_path: Path, name: str, papers: list[dict]) -> Path:
    """The papers as a gzipped JSONL file cut at two thirds: read part-way, then it fails."""
    whole = gzip.compress(write_jsonl(tmp_path / name, papers).read_bytes())
    cut = tmp_path / f"{name}.gz"
    cut.write_bytes(whole[: len(whole) * 2 // 3])
    return cut


def test_a_first_ingest_uses_the_papers_its_reader_tokenised(
    tmp_path, papers, with_reader, reader_done, monkeypatch
):
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    seen = _spy_prefix(monkeypatch)
    sent = []
    monkeypatch.setattr(index_module._Helper, "send", lambda self, rowids: sent.append(rowids))
    engine = Engine.open(tmp_path / "two.db")
    engine.ingest([source])
    assert seen == [(240, 240)] and not sent
    assert index_module._STARTED == {}
    assert (
        _differing(_files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [source]))
        == []
    )
    assert engine.search("kappa7word").total == 1


class _ReadUpTo:
    """A reader that has tokenised the first ``k`` papers of ``paths`` (in this process)
    and claimed them; the build takes the rest."""

    def __init__(self, paths: list[str], k: int, stored_as_fed: bool = False):
        self.stored_as_fed = stored_as_fed
        own = index_module._Claims()
        own.end_at(k)
        self._result = build_helper.tokenise_papers(_hashed_papers_in(paths), own)
        own.close()
        self.claims = index_module._Claims()
        assert self.claims.take_front(k) == k

    def fed_all(self) -> None:
        pass  # it read its papers itself

    def result(self):
        return self._result

    def discard(self) -> None:
        self.claims.close()


@pytest.mark.parametrize("by_id", [False, True], ids=["by-hash", "by-id"])
@pytest.mark.parametrize("k", [0, 1, 6, 7, 100, 239, 240])
def test_the_build_takes_from_the_back_what_the_reader_did_not(
    tmp_path, papers, monkeypatch, k, by_id
):
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    expected = _one_process_files(tmp_path, monkeypatch, [source])
    monkeypatch.setattr(index_module, "TOKENISE_BATCH", 7)  # many pieces from the back
    monkeypatch.setattr(build_helper, "TOKENISE_BATCH", 7)
    engine = Engine.open(tmp_path / "k.db")
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "BUILD_PROCESSES", 1)
        engine.ingest([source])
    readers = []

    def beside(corpus):
        readers.append(_ReadUpTo([str(source)], k, stored_as_fed=by_id))
        return index_module._tokenise_beside(corpus, readers[-1])

    monkeypatch.setattr(index_module, "_tokenise_corpus", beside)
    seen = _spy_prefix(monkeypatch)
    engine.rebuild_index()
    assert seen == [(k, k)]
    assert _differing(_files(engine.index_dir), expected) == []


def test_a_repeated_id_ends_the_reader_s_papers_where_it_no_longer_matches(
    tmp_path, papers, with_reader, reader_done, monkeypatch
):
    changed = dict(papers[3], abstract="a changed abstract with zetaword in it")
    first = write_jsonl(tmp_path / "a.jsonl", papers[:150])
    second = write_jsonl(tmp_path / "b.jsonl", [changed, *papers[150:]])
    seen = _spy_prefix(monkeypatch)
    engine = Engine.open(tmp_path / "two.db")
    engine.ingest([first, second])
    # Row 3 holds the second file's version (and keeps its rowid): the reader's papers from
    # there on are of no use.
    assert seen == [(241, 3)]
    assert (
        _differing(
            _files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [first, second])
        )
        == []
    )
    assert engine.search("zetaword").total == 1


def test_a_first_ingest_matches_its_reader_s_papers_by_id_without_reading_the_texts_back(
    tmp_path, papers, with_reader, reader_done, monkeypatch
):
    """Into an empty table, with no id fed twice, a row with the fed paper's id holds that
    paper's text: the build reads the ids (from their index), not every row's hash (the
    whole table: 1.7 GB at 872k papers)."""
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    seen = _spy_prefix(monkeypatch)
    hashes_read = []
    real = index_module._ids_and_hashes
    monkeypatch.setattr(
        index_module, "_ids_and_hashes", lambda corpus: hashes_read.append(1) or real(corpus)
    )
    engine = Engine.open(tmp_path / "two.db")
    engine.ingest([source])
    assert seen == [(240, 240)] and hashes_read == []
    assert (
        _differing(_files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [source]))
        == []
    )


@pytest.mark.parametrize(
    "case, as_fed",
    [
        ("one file", True),
        ("two files", True),
        ("a paper revised by the next file", False),
        ("a file rolled back", False),
        ("papers stored before", False),
    ],
)
def test_the_ingest_says_its_rows_are_the_papers_it_fed_only_when_they_are(
    tmp_path, papers, with_reader, monkeypatch, case, as_fed
):
    """Only the ingest sees every paper it fed: the reader tokenised a first part of them
    (the build took the rest), so a repeated id or a rolled-back paper may lie beyond it."""
    files = [write_jsonl(tmp_path / "a.jsonl", papers[:100])]
    if case == "two files":
        files.append(write_jsonl(tmp_path / "b.jsonl", papers[100:]))
    if case == "a paper revised by the next file":
        revised = dict(papers[3], abstract="a revised abstract with zetaword in it")
        files.append(write_jsonl(tmp_path / "b.jsonl", [*papers[100:], revised]))
    if case == "a file rolled back":
        files.append(_cut_gzip(tmp_path, "b.jsonl", papers[100:]))
        monkeypatch.setattr(index_module, "TOKENISE_BATCH", 7)  # its papers are fed
    engine = Engine.open(tmp_path / "two.db")
    if case == "papers stored before":
        before = write_jsonl(tmp_path / "before.jsonl", papers[100:])
        _stored_then_index_lost(engine, monkeypatch, before)
    said = []
    real = index_module._tokenise_beside

    def beside(corpus, reader):
        said.append(reader.stored_as_fed)
        return real(corpus, reader)

    monkeypatch.setattr(index_module, "_tokenise_beside", beside)
    engine.ingest(files)
    assert said == [as_fed]


def test_a_reader_short_of_a_repeated_id_has_its_papers_matched_by_hash(
    tmp_path, papers, monkeypatch
):
    """The reader tokenised 20 papers; the 41st fed revises the 4th, whose row now holds the
    revision: its hash, not its id, says the reader's copy is stale."""
    revised = dict(papers[3], abstract="a revised abstract with zetaword in it")
    sources = [
        write_jsonl(tmp_path / "a.jsonl", papers[:40]),
        write_jsonl(tmp_path / "b.jsonl", [revised]),
    ]
    expected = _one_process_files(tmp_path, monkeypatch, sources)
    engine = Engine.open(tmp_path / "k.db")
    with monkeypatch.context() as patch:
        patch.setattr(index_module, "BUILD_PROCESSES", 1)
        engine.ingest(sources)
    monkeypatch.setattr(
        index_module,
        "_tokenise_corpus",
        lambda corpus: index_module._tokenise_beside(
            corpus, _ReadUpTo([str(s) for s in sources], 20)
        ),
    )
    seen = _spy_prefix(monkeypatch)
    engine.rebuild_index()
    assert seen == [(20, 3)]
    assert _differing(_files(engine.index_dir), expected) == []
    assert engine.search("zetaword").total == 1


def test_rows_stored_before_the_ingest_are_never_matched_by_id_alone(
    tmp_path, papers, with_reader, reader_done, monkeypatch
):
    """The index lost, a newer copy of the same papers in a file that breaks part-way: its
    papers were fed, then rolled back, and the rows keep their older texts under the same
    ids, in the same order. Only their hashes tell them apart."""
    first = write_jsonl(tmp_path / "a.jsonl", papers)
    engine = Engine.open(tmp_path / "two.db")
    _stored_then_index_lost(engine, monkeypatch, first)
    newer = [dict(p, abstract=p["abstract"] + " etaword") for p in papers]
    broken = _cut_gzip(tmp_path, "b.jsonl", newer)
    monkeypatch.setattr(index_module, "TOKENISE_BATCH", 7)  # the broken file's papers are sent
    seen = _spy_prefix(monkeypatch)
    report = engine.ingest([broken])
    assert report.file_errors and report.counts.added == report.counts.updated == 0
    (read, used), *more = seen
    assert read > 0 and used == 0 and more == []
    assert engine.search("etaword").total == 0
    assert (
        _differing(_files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [first]))
        == []
    )


def test_rows_stored_before_the_ingest_are_tokenised_by_the_build(
    tmp_path, papers, with_reader, reader_done, monkeypatch
):
    first = write_jsonl(tmp_path / "a.jsonl", papers[:40])
    second = write_jsonl(tmp_path / "b.jsonl", papers[40:])
    engine = Engine.open(tmp_path / "two.db")
    _stored_then_index_lost(engine, monkeypatch, first)
    seen = _spy_prefix(monkeypatch)
    engine.ingest([second])
    assert seen == [(200, 0)]
    assert (
        _differing(
            _files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [first, second])
        )
        == []
    )


def test_a_reader_that_died_leaves_its_papers_to_the_build(
    tmp_path, papers, with_reader, monkeypatch
):
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    real = index_module._tokenise_beside

    def killed_first(corpus, reader):
        reader._process.kill()
        return real(corpus, reader)

    monkeypatch.setattr(index_module, "_tokenise_beside", killed_first)
    seen = _spy_prefix(monkeypatch)
    engine = Engine.open(tmp_path / "two.db")
    engine.ingest([source])
    assert seen == []  # no answer to match
    assert (
        _differing(_files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [source]))
        == []
    )


def test_a_reader_stops_when_the_building_process_is_gone(tmp_path, papers, monkeypatch):
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    monkeypatch.setattr(build_helper, "TOKENISE_BATCH", 7)
    parents = iter([1000, 1000, 1000])  # its parent, then one batch, then another pid
    monkeypatch.setattr(build_helper.os, "getppid", lambda: next(parents, 1))
    claims = index_module._Claims()
    part, ids, hashes = build_helper.tokenise_papers(_hashed_papers_in([str(source)]), claims)
    assert ids == [p["id"] for p in papers[:14]] and len(hashes) == 14
    claims.close()


def test_the_claims_give_each_paper_to_one_side_only():
    claims = index_module._Claims()
    assert claims.take_front(5) == 5
    assert claims.end_at(12) == 12
    assert claims.take_back(4) == (8, 12)
    assert claims.take_front(5) == 3  # up to the back's claims
    assert claims.take_back(4) is None and claims.take_front(1) == 0
    claims.close()


# A first ingest (its helper a reader) killed while it writes the papers or builds.
KILLED_INGEST = """
import os, signal, sys
import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.search import Engine

index_module.PARALLEL_MIN_DOCS = 0
index_module.BUILD_PROCESSES = 2
search_module.PRESTART_MIN_BYTES = 0
real_reader = index_module._Reader.__init__
def reader(self, *args):
    real_reader(self, *args)
    with open(sys.argv[3], "w") as out:
        out.write(str(self._process.pid))
index_module._Reader.__init__ = reader
real_take = index_module._Claims.take_back
def dying(self, most):
    if sys.argv[4] == "build":
        os.kill(os.getpid(), signal.SIGKILL)
    return real_take(self, most)
index_module._Claims.take_back = dying
def upsert(self, papers, *args, **kwargs):
    def dying_papers():
        for k, paper in enumerate(papers):
            if k == 150 and sys.argv[4] == "write":
                os.kill(os.getpid(), signal.SIGKILL)
            yield paper
    return real_upsert(self, dying_papers(), *args, **kwargs)
real_upsert = index_module.Corpus.upsert
index_module.Corpus.upsert = upsert
Engine.open(sys.argv[1]).ingest([sys.argv[2]])
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


@pytest.mark.parametrize("dies_in", ["write", "build"])
def test_a_first_ingest_killed_leaves_what_it_did_before_and_no_reader_running(
    tmp_path, papers, monkeypatch, dies_in
):
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    db, pid_file = tmp_path / "k.db", tmp_path / "reader.pid"
    run = subprocess.run(
        [sys.executable, "-c", KILLED_INGEST, str(db), str(source), str(pid_file), dies_in],
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr.decode()[-1500:]
    reader = int(pid_file.read_text())
    deadline = time.monotonic() + 60
    while not _gone(reader) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(reader)
    engine = Engine.open(db)
    assert read_current(engine.index_dir) is None  # nothing published
    stored = engine.corpus.count()
    assert stored == (0 if dies_in == "write" else len(papers))  # one transaction
    engine.ingest([source])  # again: the papers stored once, the index built
    assert engine.corpus.count() == len(papers)
    assert (
        _differing(_files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [source]))
        == []
    )
    assert os.path.exists(db)


def test_a_paper_s_values_make_the_same_paper():
    paper = Paper(
        id="x1",
        title="A title",
        abstract="An abstract",
        venue="ICLR",
        year=2024,
        authors=["Ann Lee", "Bo Li"],
        keywords=["graphs"],
        url="https://example.org/x1",
        title_derived=True,
    )
    assert Paper(*paper_values(paper)) == paper


def _record(batch: list[Paper]) -> bytes:
    """What ``_Reader.feed`` writes: the batch's papers' values and content hashes."""
    return marshal.dumps(([paper_values(p) for p in batch], [p.content_hash() for p in batch]), 4)


def _spooled(spool, batches: list[list[Paper]]) -> None:
    """What ``_Reader.feed`` writes: a length, then the batch's record."""
    for batch in batches:
        blob = _record(batch)
        spool.write(struct.pack("<q", len(blob)) + blob)
    spool.flush()


def test_the_papers_fed_are_read_by_whole_records_until_the_pipe_ends(tmp_path, papers):
    fed = list(_papers_in([str(write_jsonl(tmp_path / "p.jsonl", papers[:30]))]))
    with tempfile.TemporaryFile() as spool:
        announced, announce = os.pipe()
        _spooled(spool, [fed[:10], fed[10:25]])
        os.write(announce, b"\0\0")
        blob = _record(fed[25:])
        spool.write(struct.pack("<q", len(blob)) + blob[:-5])  # not written whole
        spool.flush()
        os.close(announce)
        got = list(build_helper.papers_fed(spool.fileno(), announced))
        os.close(announced)
    assert got == [(paper, paper.content_hash()) for paper in fed[:25]]


def test_a_reader_gone_before_it_was_fed_leaves_its_papers_to_the_build(
    tmp_path, papers, with_reader, monkeypatch
):
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    monkeypatch.setattr(index_module, "TOKENISE_BATCH", 7)  # many batches to hand over
    real_init = index_module._Reader.__init__

    def killed(self, *args):
        real_init(self, *args)
        self._process.kill()
        self._process.wait()

    monkeypatch.setattr(index_module._Reader, "__init__", killed)
    seen = _spy_prefix(monkeypatch)
    engine = Engine.open(tmp_path / "two.db")
    report = engine.ingest([source])
    assert report.counts.added == len(papers) and seen == []
    assert (
        _differing(_files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [source]))
        == []
    )


def test_papers_fed_from_a_file_rolled_back_are_not_used(
    tmp_path, papers, with_reader, reader_done, monkeypatch
):
    broken = _cut_gzip(tmp_path, "a.jsonl", papers[:200])
    second = write_jsonl(tmp_path / "b.jsonl", papers[200:])
    monkeypatch.setattr(index_module, "TOKENISE_BATCH", 7)  # the broken file's papers are sent
    seen = _spy_prefix(monkeypatch)
    engine = Engine.open(tmp_path / "two.db")
    report = engine.ingest([broken, second])
    assert report.file_errors and report.counts.added == 40
    (read, used), *more = seen
    assert read > 40 and used == 0 and more == []
    assert (
        _differing(
            _files(engine.index_dir), _one_process_files(tmp_path, monkeypatch, [broken, second])
        )
        == []
    )


def test_a_helper_that_fails_answers_none_and_its_error_is_logged(tmp_path, caplog):
    helper = index_module._Helper(str(tmp_path / "missing.db"))
    helper.send([1, 2, 3])
    with caplog.at_level("WARNING", logger=index_module.log.name):
        assert helper.result() is None
    assert "unable to open database file" in caplog.text  # its own error, from its stderr


def test_the_reader_s_spool_is_beside_the_database_not_in_tmp(tmp_path, papers, with_reader):
    """The spool holds the whole backlog of fed papers (~ the input unpacked, 1 GB at 872k):
    it goes on the database's disk, not in the temporary folder (often memory)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    with index_module.helpers_started(folder / "x.db", fed=True) as reader:
        assert reader is not None
        where = os.readlink(f"/proc/self/fd/{reader._spool.fileno()}")
        assert os.path.dirname(where) == str(folder), where


def test_the_builds_rowids_are_ascending_whatever_order_the_index_read_gives(tmp_path, sentences):
    """A build reads the papers' rowids from a small index (``index._rowids``: no scan of
    the table in rowid order) and sorts them: papers updated since, which that index holds
    in another order, come back in rowid order all the same."""
    papers = make_papers(sentences, "o", 300, seed=11)
    engine = Engine.open(tmp_path / "o.db")
    engine.ingest([write_jsonl(tmp_path / "o.jsonl", papers)])
    changed = [dict(p, title=p["title"] + " again") for p in papers[:50:3]]
    engine.ingest([write_jsonl(tmp_path / "c.jsonl", changed)])
    db = engine.corpus.db
    in_table_order = [r for (r,) in db.execute("select rowid from papers order by rowid")]
    scanned = [r for (r,) in db.execute("select rowid from papers")]
    assert scanned != in_table_order  # the index's order is not the rowids'

    assert index_module._rowids(engine.corpus) == in_table_order
