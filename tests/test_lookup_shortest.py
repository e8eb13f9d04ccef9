"""``Index._from_shortest``: a short query's top k from the papers of its shortest list alone,
only when no other paper could reach it, gives the exhaustive answer (ids and scores) on the
main + deltas corpus of tests/test_pruning.py (deleted papers, filters, phrases, exclusions);
and ``Segment.find_all``, the exact scores' bisections, is ``find`` for each term.
"""

import numpy as np
import pytest

import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.index import Index
from tests.test_index_blocks import pair  # noqa: F401  (64-paper and whole blocks)
from tests.test_pruning import engine, lookups  # noqa: F401  (the module's engine fixture)


def _with(monkeypatch, **constants) -> None:
    """The index module's shortcut constants set for a test; every lookup pruned (no
    ``PRUNE_MIN_POSTINGS``), and no long query's rule (``SHORTEST_FEW``) unless given."""
    constants = {"SHORTEST_TERMS": 10**9, "SHORTEST_FEW": 10**9, **constants}
    for name, value in constants.items():
        monkeypatch.setattr(index_module, name, value)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)


# Declined: MaxScore from the papers scored and their bar (ALL_LISTS 0), or every list read.
# SHORTEST_MAX 40: the rarer half's commonest lists left out until they have 40 postings.
@pytest.mark.parametrize(("all_lists", "most"), [(0, 10**9), (10**9, 10**9), (0, 40)])
def test_the_shortest_list_gives_the_exhaustive_top_k(engine, monkeypatch, all_lists, most):  # noqa: F811
    # Tried for every query (its rarer half of terms, whatever their lists' lengths), but
    # with every list read anyway (all_lists 10**9) not where that is less work.
    _with(monkeypatch, ALL_LISTS=all_lists, SHORTEST_SHARE=1, SHORTEST_MAX=most)
    outcomes = {"settled": 0, "declined": 0}
    real = Index._from_shortest

    def from_shortest(self, *args):
        found = real(self, *args)
        outcomes["settled" if found is not None and found[2] else "declined"] += 1
        return found

    monkeypatch.setattr(Index, "_from_shortest", from_shortest)
    queries = lookups(engine.papers)[:160]
    queries += [" ".join(q.split()[:2]) for q in queries]  # short ones: 2-3 terms
    for query in queries:
        for k in (3, 10):
            want = engine.rank(query, k=k, prune=False)
            assert engine.rank(query, k=k, prune=True) == want, (query, k)
    # Both ways taken many times (so the comparison above covers the shortcut).
    assert outcomes["settled"] > 20 and outcomes["declined"] > 20, outcomes


# Past SHORTEST_MAX: a rarer half that trimming would leave with fewer papers than the top
# asks for (SHORTEST_MOST), a single list (SHORTEST_ONE), or a trimmed one that did not
# settle it, tried again whole (SHORTEST_AGAIN).
@pytest.mark.parametrize(("most", "one", "again"), [(10**9, 4, 4), (4, 10**9, 4), (4, 4, 10**9)])
def test_a_rarer_half_past_the_most_is_tried_whole(engine, monkeypatch, most, one, again):  # noqa: F811
    """A rarer half kept whole (more than ``SHORTEST_MAX`` postings): the same top k."""
    _with(
        monkeypatch,
        ALL_LISTS=0,
        SHORTEST_SHARE=1,
        SHORTEST_MAX=8,
        SHORTEST_MOST=most,
        SHORTEST_ONE=one,
        SHORTEST_AGAIN=again,
    )
    kept = []
    real = Index._from_shortest

    def from_shortest(self, term_ids, own, weights, lengths, want, passes):
        found = real(self, term_ids, own, weights, lengths, want, passes)
        if found is not None and sum(lengths[j] for j in found[3]) > 8:
            kept.append(found[2])  # (more than SHORTEST_MAX postings: kept whole)
        return found

    monkeypatch.setattr(Index, "_from_shortest", from_shortest)
    queries = lookups(engine.papers)[:320]
    queries += [" ".join(q.split()[:2]) for q in queries]
    for query in queries:
        for k in (3, 10):
            want = engine.rank(query, k=k, prune=False)
            assert engine.rank(query, k=k, prune=True) == want, (query, k)
    # Taken (settled, or not: then MaxScore starts from those papers).
    assert len(kept) >= 8, kept


# A long query (more terms than SHORTEST_FEW) takes the shortcut only when its lists are not
# all short (ALL_LISTS), its rare lists hold more than SHORTEST_PAPERS papers per top place,
# and scoring them is not much work (postings x terms at most SHORTEST_WORK).
@pytest.mark.parametrize("work", [10**9, 600])
def test_a_long_query_tries_it_only_when_it_pays(engine, monkeypatch, work):  # noqa: F811
    _with(
        monkeypatch,
        ALL_LISTS=400,
        SHORTEST_SHARE=1,
        SHORTEST_MAX=10**9,
        SHORTEST_FEW=2,
        SHORTEST_WORK=work,
    )
    tried = []
    real = Index._from_shortest

    def from_shortest(self, term_ids, own, weights, lengths, want, passes):
        found = real(self, term_ids, own, weights, lengths, want, passes)
        if found is not None and len(lengths) > 2:
            postings = sum(lengths[j] for j in found[3])
            tried.append((sum(lengths), postings, len(lengths), want))
        return found

    monkeypatch.setattr(Index, "_from_shortest", from_shortest)
    queries = lookups(engine.papers)[:320]
    for query in queries:
        for k in (3, 10):
            want = engine.rank(query, k=k, prune=False)
            assert engine.rank(query, k=k, prune=True) == want, (query, k)
    assert len(tried) >= 8, tried
    for total, postings, n_query, want in tried:
        assert total > 400 and postings > 4 * want and postings * n_query <= work, tried


# When every list is read anyway (ALL_LISTS), the shortcut is taken only when scoring the
# rarer half's papers (their postings x the query's terms) is less work than those lists:
# with any share, or with the default share (8) and a rarer half trimmed past SHORTEST_MAX
# (where, with the default constants, the rule declines what the share alone would not).
@pytest.mark.parametrize(("share", "most"), [(1, 10**9), (8, 40)])
def test_with_every_list_short_it_is_tried_only_when_less_work(engine, monkeypatch, share, most):  # noqa: F811
    _with(
        monkeypatch,
        ALL_LISTS=10**9,
        SHORTEST_SHARE=share,
        SHORTEST_MAX=most,
        SHORTEST_ONE=most,
        SHORTEST_MOST=most,
    )
    seen = {"tried": [], "declined": 0}
    real = Index._from_shortest

    def from_shortest(self, term_ids, own, weights, lengths, want, passes):
        found = real(self, term_ids, own, weights, lengths, want, passes)
        half = sorted(lengths)[: len(lengths) // 2]
        if found is None:
            seen["declined"] += sum(half) * len(lengths) > sum(lengths)
        else:
            seen["tried"].append((sum(half), len(lengths), sum(lengths)))
        return found

    monkeypatch.setattr(Index, "_from_shortest", from_shortest)
    queries = lookups(engine.papers)[:160]
    queries += [" ".join(q.split()[:2]) for q in queries]
    for query in queries:
        want = engine.rank(query, k=10, prune=False)
        assert engine.rank(query, k=10, prune=True) == want, query
    assert len(seen["tried"]) >= 20 and seen["declined"] >= 10, seen
    for postings, n_query, total in seen["tried"]:
        assert postings * n_query <= total, seen["tried"]


def test_a_lookup_without_coordination_never_takes_it(engine, monkeypatch):  # noqa: F811
    """Its bound counts on coordination's (m / n) ** 2 for a paper without the rare term."""
    monkeypatch.setattr(index_module, "ALL_LISTS", 10**9)
    monkeypatch.setattr(index_module, "SHORTEST_SHARE", 1)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    calls = []
    real = Index._from_shortest
    monkeypatch.setattr(
        Index, "_from_shortest", lambda self, *args: calls.append(1) or real(self, *args)
    )
    for query in lookups(engine.papers)[:40]:
        want = engine.rank(query, k=10, coordinate=False, prune=False)
        assert engine.rank(query, k=10, coordinate=False, prune=True) == want, query
    assert not calls


def test_kept_list_bounds_are_the_lists_bounds(pair, monkeypatch):  # noqa: F811
    """``Segment._list_bounds`` keeps each list's bounds (a few thousand lists at most, then
    drops them): kept or read again, they are the segment's (64-paper and whole blocks)."""
    small, whole, _ = pair
    monkeypatch.setattr(index_module.Segment, "BOUNDS_KEPT", 8)  # dropped many times
    rng = np.random.default_rng(11)
    for segment in [*small.index.segments, *whole.index.segments]:
        segment.__dict__.pop("_bounds_kept", None)
        terms = rng.choice(segment.n_terms, 60).tolist()
        for term in terms + terms[::-1] + [np.int64(t) for t in terms]:
            assert segment._list_bounds(term) == segment._read_bounds(term), term
        assert len(segment._bounds_kept) <= 8
