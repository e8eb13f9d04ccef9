"""The lookup's shortcuts (stop 22) keep their promises with fewer system calls: ``rank``
reads the corpus version with the ids of its answer and still never answers from a
generation behind the corpus when no writer is at work; the segments' files, watched by
inotify, are still found changed under the mmaps, also after a fork; and a serving
process's ids from memory are those SQL gives, papers added since included."""

import os

import pytest

from bot.engine.index import build_lock, read_current
from bot.engine.search import Engine
from tests.test_engine_hardening import many_papers, write_jsonl

PAPER = {
    "id": "q1",
    "title": "Marsupial locomotion",
    "abstract": "Quokkaold hopping on an island.",
    "authors": ["A B"],
    "year": 2024,
}


@pytest.fixture
def served(tmp_path) -> Engine:
    """An engine whose generation is open and has answered (``rank``'s fast path ready)."""
    engine = Engine.open(tmp_path / "fresh.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", [PAPER, *many_papers("x", 200)])])
    assert [paper_id for paper_id, _ in engine.rank("quokkaold")] == ["q1"]
    return engine


def update_without_index(engine: Engine, tmp_path) -> None:
    """Another writer changes the paper's text and dies before indexing it (nothing
    published, the build lock released)."""
    writer = Engine(engine.db_path)
    writer._update_index = lambda full=False: None
    new = {**PAPER, "abstract": "Wombatnew digging in a burrow."}
    writer.ingest([write_jsonl(tmp_path / "b.jsonl", [new])])


def test_rank_never_answers_from_a_generation_behind_the_corpus(served, tmp_path):
    before = read_current(served.index_dir)
    update_without_index(served, tmp_path)
    assert read_current(served.index_dir) == before  # the same generation, still intact
    assert served._index.intact()
    assert served.rank("quokkaold") == []  # the paper's old text is not found
    assert [paper_id for paper_id, _ in served.rank("wombatnew")] == ["q1"]
    assert served._index.corpus_version == served.corpus.version


def test_while_a_writer_is_at_work_rank_answers_from_the_published_generation(served, tmp_path):
    update_without_index(served, tmp_path)
    with build_lock(served.index_dir):  # a writer bringing the index up to date
        assert [paper_id for paper_id, _ in served.rank("quokkaold")] == ["q1"]
        assert served._index.corpus_version != served.corpus.version
    assert served.rank("quokkaold") == []  # no writer left: brought up to date


def watched(engine: Engine):
    index = engine.index
    if index._segment_watch() is None:
        pytest.skip("no inotify watch here (not Linux, or not a local filesystem)")
    assert index.intact()
    return index


def test_a_file_changed_under_the_watch_is_noticed_each_time_until_put_back(served):
    index = watched(served)
    path = os.path.join(index.segments[0].directory, "doc_sizes.npy")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert not index.intact()
    assert not index.intact()  # no new event: still changed
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert index.intact()
    assert index.intact()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_its_parents_events_alone(served):
    index = watched(served)
    path = os.path.join(index.segments[0].directory, "doc_sizes.npy")
    pid = os.fork()
    if pid == 0:  # the child cuts a file and checks: it must not take the parent's event
        try:
            with open(path, "r+b") as handle:
                handle.truncate(os.stat(path).st_size - 1)
            os._exit(0 if not index.intact() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not index.intact()


# -- the ids of a serving process's lookups, from memory -------------------------------------


def test_a_serving_process_ranks_with_ids_from_memory_as_with_sql(tmp_path, monkeypatch):
    import bot.engine.search as search_module

    papers = [PAPER, *many_papers("x", 300)]
    sql = Engine.open(tmp_path / "ids.db")
    sql.ingest([write_jsonl(tmp_path / "a.jsonl", papers)])
    monkeypatch.setattr(search_module, "ID_TABLE_AFTER", 1)
    memory = Engine(sql.db_path)
    queries = ["graph molecules", "quokkaold", "neural", "graph kernel methods", "zzz"]
    memory.rank(queries[0])
    assert memory._id_table is not None and sql._id_table is None
    for query in queries:
        assert memory.rank(query, k=50) == sql.rank(query, k=50)

    # Papers another process adds (new rowids) and updates (same rowids) after the table
    # was read: found by their ids, the table extended by the new rows only.
    new = {**PAPER, "id": "q2", "abstract": "Numbatnew termites."}
    updated = {**PAPER, "abstract": "Wombatnew digging in a burrow."}
    Engine(sql.db_path).ingest([write_jsonl(tmp_path / "b.jsonl", [new, updated])])
    assert [i for i, _ in memory.rank("numbatnew")] == ["q2"]
    assert [i for i, _ in memory.rank("wombatnew")] == ["q1"]
    assert memory.rank("quokkaold") == []
    known = memory._id_table._state[0]
    assert len(known) == len(papers) + 1 and (known[1:] > known[:-1]).all()
    for query in queries:
        assert memory.rank(query, k=50) == sql.rank(query, k=50)


def test_threads_check_the_watched_files_at_the_same_time(served):
    import threading

    index = watched(served)
    failures = []

    def check():
        try:
            for _ in range(20_000):
                assert index.intact()
        except BaseException as error:  # (a poll object polled by two threads at once)
            failures.append(error)

    threads = [threading.Thread(target=check) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
