# ruff: noqa: F811 - the fixture is test_taste_ranking's, imported by name
"""``Index.doc_vectors`` (many papers' vectors read at once, for the digest batch) gives each
paper exactly ``Index.doc_vector``'s numbers, over a main segment, a delta segment and a paper
moved from one to the other (deleted in the main segment)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from bot.engine import index as index_module
from bot.engine.search import Engine
from tests.digest_support import write_corpus
from tests.test_pruning import main_and_deltas
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


@pytest.mark.parametrize("from_text", [True, False])
def test_every_papers_vector_is_its_column_of_the_inverted_index(
    tmp_path: Path, sentences, monkeypatch: pytest.MonkeyPatch, from_text: bool
) -> None:
    """Format 14 keeps no forward index: a paper's vector is read from its text (checked
    against the lists) or from the lists alone. Over a main segment, two deltas and 40
    updated papers (deleted in the main segment), and two papers whose text changed in the
    corpus before the index heard of it (their vectors stay what the index serves), each
    paper's vector is, to the bit, its column of ``matrix_xt`` (the inverted lists with
    their final weights)."""
    engine = main_and_deltas(tmp_path, sentences, "d", seed=4)
    index = engine.index
    monkeypatch.setattr(index_module, "TEXT_POSTINGS", 1 if from_text else 10**12)
    stale = [int(index.rowids[d]) for d in np.flatnonzero(index.live)[[0, 7]]]
    engine.corpus.db.execute(
        "update papers set title = 'Rewritten', abstract = 'Short now.' where rowid in (?, ?)",
        stale,
    )
    engine.corpus.db.conn.commit()
    from_texts: set[int] = set()  # rowids of the papers read from their text
    real = index_module.Index._terms_from_text

    def counted(self, segment, local):
        found = real(self, segment, local)
        from_texts.update(int(segment.rowids[doc]) for doc in found)
        return found

    monkeypatch.setattr(index_module.Index, "_terms_from_text", counted)
    columns = index.matrix_xt().tocsc()
    for doc in range(index.n_docs):
        terms, values = index.doc_vector(doc)
        a, b = columns.indptr[doc], columns.indptr[doc + 1]
        assert terms.tolist() == columns.indices[a:b].tolist(), doc
        assert values.tobytes() == columns.data[a:b].tobytes(), doc
    # Every live paper but the two changed ones came from its text (a deleted copy too
    # when its paper's new text still holds all its terms: the index's counts, checked).
    live = {int(r) for r in index.rowids[index.live]}
    assert from_texts >= live - set(stale) if from_text else not from_texts
    assert from_texts.isdisjoint(stale)
    _same(index, np.arange(index.n_docs))


def test_papers_read_from_text_use_one_connection_per_thread_that_sees_later_changes(
    tmp_path: Path, sentences, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The corpus connection ``_terms_from_text`` keeps is opened once per thread (not once
    per paper), and it reads the corpus as it is now: a paper whose text changes after the
    connection was opened is no longer read from its text (its vector stays the index's)."""
    engine = main_and_deltas(tmp_path, sentences, "k", seed=6)
    index = engine.index
    monkeypatch.setattr(index_module, "TEXT_POSTINGS", 1)
    opened: list[str] = []
    real_connect = index_module.connect

    def counting_connect(path, **kwargs):
        opened.append(str(path))
        return real_connect(path, **kwargs)

    monkeypatch.setattr(index_module, "connect", counting_connect)
    from_texts: list[int] = []  # docs read from their text, in order
    real = index_module.Index._terms_from_text

    def counted(self, segment, local):
        found = real(self, segment, local)
        from_texts.extend(
            int(self._to_docs(self.segments.index(segment), np.asarray([d]))[0]) for d in found
        )
        return found

    monkeypatch.setattr(index_module.Index, "_terms_from_text", counted)
    columns = index.matrix_xt().tocsc()

    def check(doc: int) -> None:
        terms, values = index.doc_vector(doc)
        a, b = columns.indptr[doc], columns.indptr[doc + 1]
        assert terms.tolist() == columns.indices[a:b].tolist(), doc
        assert values.tobytes() == columns.data[a:b].tobytes(), doc

    live = np.flatnonzero(index.live)[:12].tolist()
    for doc in live[:6]:
        check(doc)
    assert from_texts == live[:6] and len(opened) == 1
    changed = live[6]
    engine.corpus.db.execute(
        "update papers set abstract = 'Nothing of what the index holds.' where rowid = ?",
        [int(index.rowids[changed])],
    )
    engine.corpus.db.conn.commit()
    for doc in live[6:]:
        check(doc)
    assert from_texts == live[:6] + live[7:] and len(opened) == 1
    other = []
    thread = threading.Thread(target=lambda: other.append(index.doc_vector(live[0])))
    thread.start()
    thread.join()
    assert other and len(opened) == 2  # a thread of its own gets a connection of its own
