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
