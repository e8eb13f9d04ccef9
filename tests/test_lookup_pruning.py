"""Term-at-a-time MaxScore (``Index.top_candidates``) down every one of its paths gives the
exhaustive top 10, and its per-thread accumulators never carry one lookup into the next.

The corpus (tests/test_pruning.py's: a main segment + 2 deltas with deleted papers) is small,
so the list-length thresholds are lowered here to send lookups down each branch: bars raised
from exact scores, remaining lists looked up for the candidates, the whole pool looked up,
the hand-over to the exhaustive product.
"""

import numpy as np
import pytest

import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.index import Index, _accumulators
from tests.test_pruning import engine, lookups  # noqa: F401  (the module's engine fixture)

#: (ALL_LISTS, SHORT_LIST, LONG_LIST, FULL_POOL, EXACT_AT) and the branch each setting must
#: reach (exact scores always come from the lists: there are no stored paper vectors).
SETTINGS = {
    "bar then lookups": ((0, 0, 10**9, 0, 0), "_add_found"),
    "whole pool looked up": ((0, 0, 10**9, 10**6, 0), "_add_found"),
    "hand over to the product": ((0, 0, 0, 0, 0), "exhaustive"),
    "exact scores from the lists": ((0, 0, 10**9, 0, 10**6), "by_lists"),
    "every list whole": ((10**9, 0, 0, 0, 0), "all_lists"),
    "defaults of MaxScore": ((0, 2048, 8192, 1024, 64), None),
    "defaults": (None, None),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_every_path_gives_the_exhaustive_top_10(engine, monkeypatch, name):  # noqa: F811
    values, branch = SETTINGS[name]
    names = ("ALL_LISTS", "SHORT_LIST", "LONG_LIST", "FULL_POOL", "EXACT_AT")
    for constant, value in zip(names, values or (), strict=False):  # None: as shipped
        monkeypatch.setattr(index_module, constant, value)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    reached = {"_add_found": 0, "exhaustive": 0, "by_lists": 0, "all_lists": 0}
    real_add, real_top = Index._add_found, Index.top_candidates
    real_exact = Index._exact_scores
    real_all = Index._all_lists

    def all_lists(self, *args):
        reached["all_lists"] += 1
        return real_all(self, *args)

    def exact_scores(self, docs, *args):
        reached["by_lists"] += 1
        return real_exact(self, docs, *args)

    def add_found(self, *args):
        reached["_add_found"] += 1
        return real_add(self, *args)

    def top_candidates(self, *args, **kwargs):
        found = real_top(self, *args, **kwargs)
        reached["exhaustive"] += found is None
        return found

    monkeypatch.setattr(Index, "_add_found", add_found)
    monkeypatch.setattr(Index, "_exact_scores", exact_scores)
    monkeypatch.setattr(Index, "top_candidates", top_candidates)
    monkeypatch.setattr(Index, "_all_lists", all_lists)
    for query in lookups(engine.papers)[:120]:
        for coordinate in (True, False):
            want = engine.rank(query, k=10, coordinate=coordinate, prune=False)
            assert engine.rank(query, k=10, coordinate=coordinate, prune=True) == want, query
    if branch:
        assert reached[branch] > 10, reached


def test_accumulators_are_left_zeroed(engine, monkeypatch):  # noqa: F811
    monkeypatch.setattr(index_module, "ALL_LISTS", 0)
    monkeypatch.setattr(index_module, "SHORT_LIST", 0)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    for query in lookups(engine.papers)[:40]:
        engine.rank(query, k=10)
    sums, counts = _accumulators(engine.index.n_docs)
    assert not sums.any() and not counts.any()


def test_a_lookup_failing_half_way_does_not_spoil_the_next(engine, monkeypatch):  # noqa: F811
    """An error after some lists were added (here: in a filter) drops this thread's
    accumulators, so the next lookup starts from zero."""
    monkeypatch.setattr(index_module, "ALL_LISTS", 0)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    queries = [q for q in lookups(engine.papers) if len(q.split()) >= 3][:30]
    want = {q: engine.rank(q, k=10, prune=False) for q in queries}
    real = search_module.Engine._passes
    failed = 0
    for query in queries:

        def failing(self, index, parsed):
            passes = real(self, index, parsed)
            calls = []

            def passes_once(docs: np.ndarray) -> np.ndarray:
                calls.append(len(docs))
                if len(calls) > 1:
                    raise RuntimeError("a filter failed")
                return passes(docs)

            return passes_once

        monkeypatch.setattr(search_module.Engine, "_passes", failing)
        try:
            engine.rank(query, k=10)
        except RuntimeError:
            failed += 1
        monkeypatch.setattr(search_module.Engine, "_passes", real)
        assert engine.rank(query, k=10) == want[query], query
    assert failed >= 10  # not vacuous: most of them failed after adding a list


def test_exhaustive_lookups_count_matches_either_way(engine, monkeypatch):  # noqa: F811
    """Coordination counts each paper's query terms from the product's lists (a corpus up to
    ``COUNT_MATCHES_UP_TO`` papers) or by bisection for a pool (larger): the same answers."""
    queries = lookups(engine.papers)[:150]
    counted = [engine.rank(q, k=10, prune=False) for q in queries]
    monkeypatch.setattr(search_module, "COUNT_MATCHES_UP_TO", 0)
    assert [engine.rank(q, k=10, prune=False) for q in queries] == counted


def test_docs_with_all_is_the_intersection_of_the_lists(engine):  # noqa: F811
    """Phrases and filters narrow by ``docs_with_all``: the papers every list has."""
    index = engine.index
    rng = np.random.default_rng(3)
    terms = [t for t in rng.choice(index.n_terms, 400, replace=False).tolist() if index.df[t] > 0]
    common = np.argsort(-index.df)[:20].tolist()
    for first, second, third in zip(terms, common, reversed(common), strict=False):
        wanted = [first, second, third]
        lists = [index.postings(t)[0] for t in wanted]
        expected = np.intersect1d(np.intersect1d(lists[0], lists[1]), lists[2])
        assert index.docs_with_all(wanted).tolist() == expected.tolist()
        pair = np.intersect1d(lists[1], lists[2])
        assert index.docs_with_all([second, third]).tolist() == pair.tolist()
        assert len(pair)  # not vacuous: common terms share papers


@pytest.mark.parametrize("long_list", [30, 100])
def test_rounds_of_exact_scores_before_a_long_list(engine, monkeypatch, long_list):  # noqa: F811
    """Before a long list MaxScore raises its bar with the exact scores of more and more of
    the likeliest papers (``MAX_PICK``, ``PICK_ROUNDS``): the same answers, and the rounds
    are reached (more exact scoring than with one round)."""
    for constant, value in (("ALL_LISTS", 0), ("SHORT_LIST", 0), ("FULL_POOL", 0)):
        monkeypatch.setattr(index_module, constant, value)
    monkeypatch.setattr(index_module, "LONG_LIST", long_list)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    calls = []
    real_exact = Index._exact_scores

    def exact_scores(self, docs, *args):
        calls.append(len(docs))
        return real_exact(self, docs, *args)

    monkeypatch.setattr(Index, "_exact_scores", exact_scores)
    queries = lookups(engine.papers)[:200]
    exact = {}
    for max_pick in (0, 10**6):
        monkeypatch.setattr(index_module, "MAX_PICK", max_pick)
        calls.clear()
        for query in queries:
            for coordinate in (True, False):
                want = engine.rank(query, k=10, coordinate=coordinate, prune=False)
                assert engine.rank(query, k=10, coordinate=coordinate) == want, query
        exact[max_pick] = len(calls)
    assert exact[10**6] > exact[0] + 10, exact  # not vacuous: rounds taken
