"""A first ingest overlaps its build's set-up with the SQLite write: the build's helper
processes start before the papers are written (``index.helpers_started``), and the WAL is
copied into the database file beside the build (``corpus.checkpoint_later``). Neither may
change what is stored or indexed."""

import sqlite3

import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.corpus import checkpoint_later, open_database
from bot.engine.index import read_current
from bot.engine.search import Engine
from tests.test_index_build import _files
from tests.test_live_index import make_papers, write_jsonl


def _database_bytes(db) -> int:
    """The database's size as its connections see it (the WAL's pages included)."""
    return (
        db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    )


def test_a_commit_inside_leaves_the_wal_and_the_checkpoint_copies_it_after(tmp_path):
    path = tmp_path / "c.db"
    db = open_database(path)
    (autocheckpoint,) = db.execute("PRAGMA wal_autocheckpoint").fetchone()
    with checkpoint_later(db) as checkpoint:
        with db.conn:
            db.conn.execute("create table t (x)")
            db.conn.executemany("insert into t values (?)", [(k,) * 1 for k in range(20000)])
        assert db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        # Committed (another connection reads it), not yet copied into the database file.
        assert sqlite3.connect(path).execute("select count(*) from t").fetchone() == (20000,)
        assert path.stat().st_size < _database_bytes(db)
    checkpoint.join()
    assert db.execute("PRAGMA wal_autocheckpoint").fetchone() == (autocheckpoint,)
    assert path.stat().st_size == _database_bytes(db)
    assert db.execute("select count(*) from t").fetchone() == (20000,)


def test_an_ingest_with_helpers_started_early_indexes_as_a_one_process_build(
    tmp_path, sentences, monkeypatch
):
    papers = make_papers(sentences, "p", 240, seed=8)
    for k, paper in enumerate(papers[120:]):
        paper["abstract"] += f" kappa{k % 5}word"
    source = write_jsonl(tmp_path / "p.jsonl", papers)
    monkeypatch.setattr(index_module, "PARALLEL_MIN_DOCS", 0)
    monkeypatch.setattr(index_module, "BUILD_PROCESSES", 2)
    monkeypatch.setattr(search_module, "PRESTART_MIN_BYTES", 0)
    started, fed, sent, used = [], [], [], []
    real_init, real_send = index_module._Reader.__init__, index_module._Helper.send
    real_beside, real_feed = index_module._tokenise_beside, index_module._Reader.feed

    def init(self, *args):
        started.append(read_current(tmp_path / "two.db.index"))
        real_init(self, *args)

    def feed(self, papers, digests):
        assert digests == [paper.content_hash() for paper in papers]
        fed.extend(paper.id for paper in papers)
        real_feed(self, papers, digests)

    def send(self, rowids):
        sent.append(len(rowids))
        real_send(self, rowids)

    def beside(corpus, reader):
        used.append(reader)
        return real_beside(corpus, reader)

    monkeypatch.setattr(index_module._Reader, "__init__", init)
    monkeypatch.setattr(index_module._Reader, "feed", feed)
    monkeypatch.setattr(index_module._Helper, "send", send)
    monkeypatch.setattr(index_module, "_tokenise_beside", beside)
    two = Engine.open(tmp_path / "two.db")
    two.ingest([source])
    # The helper started early (a reader, before anything was indexed), was handed the
    # file's papers and did the work; no helper was sent rowids.
    assert started == [None] and len(used) == 1 and sent == []
    assert fed == [paper["id"] for paper in papers]
    assert index_module._STARTED == {}
    monkeypatch.setattr(index_module, "BUILD_PROCESSES", 1)
    one = Engine.open(tmp_path / "one.db")
    one.ingest([source])
    assert len(started) == 1
    a, b = _files(two.index_dir), _files(one.index_dir)
    assert a.keys() == b.keys() and all(a[name] == b[name] for name in a)
    assert two.search("kappa3word").total == one.search("kappa3word").total > 0


def test_helpers_started_for_a_build_that_does_not_come_are_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(index_module, "BUILD_PROCESSES", 2)
    helpers = []
    real_init = index_module._Helper.__init__

    def init(self, db_path):
        helpers.append(self)
        real_init(self, db_path)

    monkeypatch.setattr(index_module._Helper, "__init__", init)
    path = tmp_path / "x.db"
    open_database(path).close()
    with index_module.helpers_started(path):
        assert len(index_module._STARTED[str(path.resolve())]) == 1
    assert index_module._STARTED == {}
    assert len(helpers) == 1 and helpers[0]._process.returncode is not None
