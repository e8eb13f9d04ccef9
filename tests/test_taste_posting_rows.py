# ruff: noqa: F811 - the fixture is test_taste_ranking's, imported by name
"""``matching._posting_rows`` (the topics' rows of the index matrix, built from their posting
lists alone, so that a restarted process's first digest does not assemble the whole matrix)
gives exactly ``Index.matrix_xt``'s rows: over one segment, with deleted papers, and over a
main and a delta segment."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.engine import index as index_module
from bot.engine.search import Engine
from digest.matching import _posting_rows
from tests.digest_support import write_corpus
from tests.test_taste_ranking import _generative_papers, generative  # noqa: F401


def _same(index: index_module.Index, terms: np.ndarray) -> None:
    got = _posting_rows(index, terms)
    want = index.matrix_xt()[terms]
    assert got.shape == want.shape
    assert got.indptr.tolist() == want.indptr.tolist()
    assert got.indices.tolist() == want.indices.tolist()
    assert got.data.dtype == want.data.dtype == np.float32
    assert got.data.tobytes() == want.data.tobytes()


def test_posting_rows_are_the_index_matrix_rows(
    generative: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = generative.index
    assert len(index.segments) == 1
    rng = np.random.default_rng(3)
    every = np.arange(index.n_terms, dtype=np.int64)
    _same(index, every)
    _same(index, np.sort(rng.choice(every, 40, replace=False)))
    # Deleted papers (inverse pivot 0) are left out, as the matrix leaves them out.
    index.inverse_pivot[rng.choice(index.n_docs, 5, replace=False)] = 0
    index._matrix_xt = None
    _same(index, every)
    monkeypatch.setattr(index_module, "MERGE_SHARE", 10.0)  # a delta, however large
    papers = _generative_papers()
    more = [{**p, "id": f"new-{p['id']}", "authors": [f"new{p['authors'][0]}"]} for p in papers]
    generative.ingest([write_corpus(tmp_path / "more.jsonl", more[:6])])
    index = generative.index
    assert len(index.segments) == 2
    _same(index, np.arange(index.n_terms, dtype=np.int64))
