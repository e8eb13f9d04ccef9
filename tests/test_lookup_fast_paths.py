"""The lookup's shortcuts (stop 21) change nothing but time: the parser's plain-words path
reads a query as the full grammar does, and the freshness check on the segments' open files
still notices a file changed under the mmaps."""

import gc
import os

import pytest

from bot.engine.query import Query, _read_tokens, parse_query
from bot.engine.search import Engine
from tests.test_engine_hardening import many_papers, write_jsonl

PLAIN = [
    "diffusion models",
    "  Compute-Optimal In-Context Learning ",
    "3D from 2D",
    "graph\tneural\u00a0networks\u2003now",  # tabs and Unicode spaces split words too
    "a - b",  # a lone dash is no exclusion
    "x-",
    "café naïve résumé",
    "",
]
NOT_PLAIN = ["-survey diffusion", "diffusion -survey", 'a "b c"', "venue:ICLR x", "QLASS: x"]


@pytest.mark.parametrize("text", PLAIN + NOT_PLAIN)
def test_plain_words_are_read_as_the_grammar_reads_them(text):
    stripped = text.strip()
    full = Query(text=stripped)
    _read_tokens(full, stripped)
    assert parse_query(text) == full


@pytest.fixture
def engine(tmp_path) -> Engine:
    engine = Engine.open(tmp_path / "fresh.db")
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", many_papers("x", 300))])
    return engine


def test_a_segment_file_touched_or_cut_under_the_mmap_is_noticed(engine):
    index = engine.index
    assert index.intact()
    path = os.path.join(index.segments[0].directory, "doc_sizes.npy")
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert not index.intact()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert index.intact()
    with open(path, "r+b") as handle:  # not a file the lookups below read
        handle.truncate(st.st_size - 1)
    assert not index.intact()
    assert engine.rank("graph diffusion")  # reopened (rebuilt), answering


def test_a_dropped_segment_closes_its_files(engine):
    index = engine.index
    fds = list(index.segments[0]._fds)
    assert fds and all(os.fstat(fd) for fd in fds)
    del index
    engine._index = None
    engine._segments = {}
    gc.collect()
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_members_is_isin_for_a_sorted_set():
    import numpy as np

    from bot.engine.index import members

    rng = np.random.default_rng(5)
    for n_values, n_set in [(40, 0), (40, 1), (0, 10), (40, 10), (40, 1000), (200, 50)]:
        values = rng.integers(0, 60, size=n_values)
        ascending = np.sort(rng.integers(0, 60, size=n_set))  # duplicates too
        assert (members(values, ascending) == np.isin(values, ascending)).all()
