"""The lookup's freshness checks (stop 22) keep their promises with fewer system calls:
``rank`` reads the corpus version with the ids of its answer and still never answers from a
generation behind the corpus when no writer is at work, and the segments' files, watched by
inotify, are still found changed under the mmaps, also after a fork."""

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
    path = os.path.join(index.segments[0].directory, "x_terms.npy")
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
    path = os.path.join(index.segments[0].directory, "x_terms.npy")
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
