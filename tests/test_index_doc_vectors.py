# ruff: noqa: F811 - the fixture is test_taste_ranking's, imported by name
"""``Index.doc_vectors`` (many papers' vectors read at once, for the digest batch) gives each
paper exactly ``Index.doc_vector``'s numbers, over a main segment, a delta segment and a paper
moved from one to the other (deleted in the main segment)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.engine import index as index_module
from bot.engine.search import Engine
from tests.digest_support import write_corpus
from tests.test_taste_ranking import _generative_papers, generative  # noqa: F401


def _same(index: index_module.Index, docs: np.ndarray) -> None:
    many = index.doc_vectors(docs)
    assert len(many) == len(docs)
    for doc, (terms, values) in zip(docs.tolist(), many, strict=True):
        terms_0, values_0 = index.doc_vector(doc)
        assert terms.dtype == terms_0.dtype and values.dtype == values_0.dtype
        assert terms.tobytes() == terms_0.tobytes(), doc
        assert values.tobytes() == values_0.tobytes(), doc


def test_many_documents_read_at_once_are_each_one_read_alone(
    generative: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(5)
    _same(generative.index, rng.permutation(generative.index.n_docs))
    monkeypatch.setattr(index_module, "MERGE_SHARE", 10.0)  # a delta, however large
    papers = _generative_papers()
    more = [{**p, "id": f"new-{p['id']}", "authors": [f"new{p['authors'][0]}"]} for p in papers]
    changed = {**papers[0], "abstract": papers[0]["abstract"] + " Now with lattice proteins."}
    generative.ingest([write_corpus(tmp_path / "more.jsonl", [*more[:6], changed])])
    index = generative.index
    assert len(index.segments) == 2 and index.n_live < index.n_docs
    docs = rng.permutation(index.n_docs)
    _same(index, docs)
    _same(index, np.concatenate([docs[:3], docs[:3]]))  # the same paper twice
    assert index.doc_vectors(np.zeros(0, np.int64)) == []
