"""The generation writer's passes over every posting read each list's papers as a lookup
does: ``Segment.run_docs`` (one slice of stored block sizes, the masks' bits) gives the
same document numbers as ``Segment.docs`` for every run of lists, in every block layout
(dense, sparse, block sizes over a byte)."""

import numpy as np
import pytest

import bot.engine.index as index_module
from bot.engine.search import Engine
from tests.test_live_index import make_papers, write_jsonl


@pytest.mark.parametrize("block", [1 << 16, 128, 400, 37])
def test_run_docs_are_the_lists_docs(tmp_path, sentences, monkeypatch, block):
    monkeypatch.setattr(index_module, "BLOCK", block)
    papers = make_papers(sentences, "r", 1300, seed=3)
    engine = Engine.open(tmp_path / "r.db")
    engine.ingest([write_jsonl(tmp_path / "r.jsonl", papers)])
    (segment,) = engine.index.segments
    assert segment.blocks == -(-segment.n_docs // block)
    if block == 400:  # some list holds more than 255 papers in one block
        assert len(segment._wide_blocks) > 0 and segment._sparse
    indptr = np.asarray(segment.list_ptr, dtype=np.int64)
    for chunk in (1, 50, 3000, 1 << 20):
        for term, end, _, _ in index_module._posting_chunks(indptr, segment.n_terms, chunk):
            assert np.array_equal(segment.run_docs(term, end), segment.docs(term, end))
    assert np.array_equal(segment.run_docs(0, segment.n_terms), segment.docs(0, segment.n_terms))


@pytest.mark.parametrize("block", [1 << 16, 128])
def test_the_writers_passes_on_two_threads_give_one_threads_bits(
    tmp_path, sentences, monkeypatch, block
):
    """The generation writer's passes over every posting (``_row_norms``, ``best_impacts``/
    ``best_heads``) run a chunk a thread (``_in_order``) and combine the chunks in order:
    the same norms, impacts and heads to the bit as one thread, main segment and delta (with
    an updated paper's tombstone) alike, whatever the chunk size."""
    monkeypatch.setattr(index_module, "BLOCK", block)
    monkeypatch.setattr(index_module, "HEAD_MIN", 40)
    monkeypatch.setattr(index_module, "HEAD", 8)
    papers = make_papers(sentences, "r", 1300, seed=5)
    engine = Engine.open(tmp_path / "r.db")
    engine.ingest([write_jsonl(tmp_path / "r.jsonl", papers)])
    changed = [dict(p, title=p["title"] + " revised") for p in papers[:20]]
    more = make_papers(sentences, "d", 150, seed=6) + changed
    engine.ingest([write_jsonl(tmp_path / "d.jsonl", more)])
    directory = engine.index.directory
    assert len(engine.index.segments) == 2 and engine.index.n_live < engine.index.n_docs

    def passes(threads: int, chunk: int):
        monkeypatch.setattr(index_module, "BUILD_PROCESSES", threads)
        index = index_module.Index(directory, verify=False)
        norms = [
            index_module._row_norms(segment, idf, chunk)
            for segment, idf in zip(index.segments, index._idf_local, strict=True)
        ]
        impacts, heads = index._impacts_and_heads(chunk)
        assert len(heads["term"][0]) > 0
        return [*norms, impacts, heads.tobytes()]

    for chunk in (64, 3000, 1 << 20):
        one, two = passes(1, chunk), passes(2, chunk)
        for a, b in zip(one, two, strict=True):
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_in_order_gives_every_result_in_order_and_raises_what_a_chunk_raised(monkeypatch):
    """``_in_order``: the results of ``map`` in order, from threads, at most ``ahead``
    waiting; a chunk's error comes out of the loop."""
    monkeypatch.setattr(index_module, "BUILD_PROCESSES", 2)
    started = []

    def slow_square(n):
        started.append(n)
        return n * n

    out = []
    for n, result in enumerate(index_module._in_order(slow_square, iter(range(50)), ahead=3)):
        assert max(started) <= n + 3  # never more than ``ahead`` submitted past the one taken
        out.append(result)
    assert out == [n * n for n in range(50)]
    assert list(index_module._in_order(slow_square, [7])) == [49]
    assert list(index_module._in_order(slow_square, [])) == []

    def fails(n):
        if n == 5:
            raise ValueError("chunk 5")
        return n

    with pytest.raises(ValueError, match="chunk 5"):
        list(index_module._in_order(fails, range(20)))
