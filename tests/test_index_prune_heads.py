"""The long lists' heads (champion lists, ``Index.best_heads``): each generation's writer
stores them, and a lookup whose lists are all common (``Index._from_heads``) gives exactly
the exhaustive top 10 from them: the same ids, order and scores to the bit, over a main
segment plus deltas with deleted (updated) papers, with filters, phrases and exclusions.

The corpus is small, so the heads are made short (``HEAD_MIN``, ``HEAD``) for the lists
to have heads and tails at all, and the lookups are sent to the heads (``LONG_LIST``).
"""

import json

import numpy as np
import pytest

import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.index import GENERATION_FILES, Index, _write_file, read_current
from bot.engine.search import Engine
from tests.test_pruning import lookups, main_and_deltas

HEAD_MIN, HEAD = 40, 12


@pytest.fixture(scope="module")
def engine(tmp_path_factory, sentences) -> Engine:
    folder = tmp_path_factory.mktemp("heads")
    return main_and_deltas(folder, sentences, "h", seed=31, HEAD_MIN=HEAD_MIN, HEAD=HEAD)


def common_queries(index: Index, n: int = 60) -> list[str]:
    """Queries of 1-4 of the corpus's commonest words: every list has a head (the slow
    lookups of the 872k benchmark, like ``large language models``)."""
    common = [t for t in np.argsort(-index.df)[:40].tolist() if " " not in index.vocab.term(t)]
    words = [index.vocab.term(t) for t in common]
    rng = np.random.default_rng(32)
    return [" ".join(rng.choice(words, rng.integers(1, 5), replace=False)) for _ in range(n)]


def test_heads_are_the_lists_best_documents_and_their_tails_bound_the_rest(engine):
    index = engine.index
    current = read_current(engine.index_dir)
    assert all(key in current for key in GENERATION_FILES)
    lengths = np.zeros(index.n_terms, dtype=np.int64)
    for term in range(index.n_terms):
        lengths[term] = index._total_length(index._own_terms(np.asarray([term])), 0)
    assert index._head_terms.tolist() == np.flatnonzero(lengths > HEAD_MIN).tolist()
    assert len(index._head_terms) > 20
    for term in index._head_terms.tolist():
        docs, weights = index.postings(term)  # live documents only
        impact = weights / index.idf[term]
        head_docs, head_tf, tail = index._head(term)
        assert len(head_docs) == min(HEAD, len(docs))
        assert np.all(np.diff(head_docs) > 0)
        inside = np.isin(docs, head_docs)
        assert inside.sum() == len(head_docs)  # live documents of this term, nothing else
        rest = impact[~inside]
        assert tail == pytest.approx(rest.max() if len(rest) else 0.0, rel=1e-5)
        assert impact[inside].min() >= tail * (1 - 1e-5)
        tf = index.postings(term)[1][inside] / index.idf[term] / index.inverse_pivot[docs[inside]]
        assert np.allclose(head_tf, tf, rtol=1e-5)


#: How lookups reach the heads: every list long (MaxScore hands the query over at once),
#: or heads tried before MaxScore (which takes over when they do not settle it).
ROUTES = {"all lists long": ("LONG_LIST", 0), "heads first": ("HEADS_FIRST", 0)}


@pytest.mark.parametrize("route", list(ROUTES))
@pytest.mark.parametrize("coordinate", [True, False])
def test_heads_give_the_exhaustive_top_10(engine, monkeypatch, coordinate, route):
    monkeypatch.setattr(index_module, "ALL_LISTS", 0)
    monkeypatch.setattr(index_module, *ROUTES[route])
    monkeypatch.setattr(index_module, "HEAD_MIN", HEAD_MIN)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    settled = []
    real = Index._from_heads

    def from_heads(self, *args):
        found = real(self, *args)
        settled.append(found is not None)
        return found

    monkeypatch.setattr(Index, "_from_heads", from_heads)
    common = common_queries(engine.index)
    answered = {"common": 0, "other": 0}
    for query in common + lookups(engine.papers):
        for k in (10, 3):
            want = engine.rank(query, k=k, coordinate=coordinate, prune=False)
            settled.clear()
            got = engine.rank(query, k=k, coordinate=coordinate, prune=True)
            assert [(i, float(s).hex()) for i, s in got] == [
                (i, float(s).hex()) for i, s in want
            ], query
            answered["common" if query in common else "other"] += settled == [True]
    # Not vacuous: the heads settled many lookups, common ones and others.
    assert answered["common"] >= 30 and answered["other"] >= 200, answered


# The papers the heads leave in doubt, looked up in every long list at once (few pairs:
# ``_look_up_all``) or a list at a time, dropping those that fall below the bar between.
@pytest.mark.parametrize("pairs", [0, 10**9])
def test_the_pools_long_lists_looked_up_at_once_or_one_by_one(engine, monkeypatch, pairs):
    monkeypatch.setattr(index_module, "ALL_LISTS", 0)
    monkeypatch.setattr(index_module, "LONG_LIST", 0)
    monkeypatch.setattr(index_module, "HEAD_MIN", HEAD_MIN)
    monkeypatch.setattr(index_module, "POOL_PAIRS", pairs)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    at_once, one_by_one = [], []  # per pool: calls of each way (a list at a time: ``_found``)
    real_pool, real_all, real_found = Index._scores_of_pool, Index._look_up_all, Index._found

    inside = []  # (``_found`` is MaxScore's too, outside any pool)

    def scores_of_pool(self, *args):
        at_once.append(0)
        one_by_one.append(0)
        inside.append(True)
        try:
            return real_pool(self, *args)
        finally:
            inside.pop()

    def look_up_all(self, *args):
        at_once[-1] += 1
        return real_all(self, *args)

    def found(self, *args):
        if inside:
            one_by_one[-1] += 1
        return real_found(self, *args)

    monkeypatch.setattr(Index, "_scores_of_pool", scores_of_pool)
    monkeypatch.setattr(Index, "_look_up_all", look_up_all)
    monkeypatch.setattr(Index, "_found", found)
    for query in common_queries(engine.index) + lookups(engine.papers)[:100]:
        for k in (10, 3):
            want = engine.rank(query, k=k, prune=False)
            got = engine.rank(query, k=k, prune=True)
            assert [(i, float(s).hex()) for i, s in got] == [
                (i, float(s).hex()) for i, s in want
            ], query
    if pairs:  # every pool with two lists or more to look up: at once
        assert sum(at_once) >= 30 and max(one_by_one) <= 1, (sum(at_once), max(one_by_one))
    else:
        assert not sum(at_once) and sum(n >= 2 for n in one_by_one) >= 30


def test_a_generation_without_heads_still_answers(engine, monkeypatch):
    """An index written before the heads (or a list without one) goes to the product."""
    monkeypatch.setattr(index_module, "LONG_LIST", 0)
    monkeypatch.setattr(index_module, "HEAD_MIN", HEAD_MIN)
    index = engine.index
    queries = common_queries(index, 30)
    want = [engine.rank(q, k=10, prune=False) for q in queries]
    monkeypatch.setattr(index, "heads", None)
    monkeypatch.setattr(index, "_head_terms", None)
    assert [engine.rank(q, k=10) for q in queries] == want


def test_a_heads_file_of_another_layout_is_damage(engine, tmp_path):
    """Heads that are not one record of columns (``heads_type``): the index is reported
    damaged (and rebuilt by the engine), never read wrongly or crashing a lookup."""
    import shutil

    copy = tmp_path / "index"
    shutil.copytree(engine.index_dir, copy)
    current = read_current(copy)
    row = [("term", "<i4"), ("tail", "<f4"), ("docs", "<i4", (4,)), ("counts", "<u2", (4,))]
    rows = np.zeros(0, dtype=row)  # a row per term, and no rows
    current["heads"] = {
        "file": current["heads"]["file"],
        **_write_file(copy / current["heads"]["file"], rows),
    }
    (copy / "CURRENT").write_text(json.dumps(current))
    assert Index.load(copy, quiet=True) is None
