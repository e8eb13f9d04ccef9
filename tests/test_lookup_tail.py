"""The lookup's cheaper paths give the same bits as the numpy steps they replace:
``_rows_summed`` (one reduction for ``total += row`` row by row, ``_exact_scores``),
``_rest_bounds`` (the terms' remaining bounds in Python floats, ``top_candidates``), and
``Segment.find_all``'s two ways (its places joined, or placed term by term past
``FIND_ALL_WIDE`` papers) are ``find``'s for each term, and the lookups' answers with either
are the exhaustive ones."""

import numpy as np
import pytest

import bot.engine.index as index_module
import bot.engine.search as search_module
from bot.engine.index import _rest_bounds, _rows_summed
from tests.test_index_blocks import pair  # noqa: F401  (64-paper and whole blocks)
from tests.test_pruning import engine, lookups  # noqa: F401  (the module's engine fixture)


@pytest.mark.parametrize("n_rows", [1, 2, 5, 8, 9, 17, 40])
@pytest.mark.parametrize("n_columns", [0, 1, 2, 3, 7, 8, 9, 64, 129, 1000])
def test_rows_summed_is_the_loop_to_the_bit(n_rows, n_columns):
    rng = np.random.default_rng(n_rows * 1000 + n_columns)
    for _ in range(5):
        scale = rng.choice([1e-4, 1.0, 1e4], size=(n_rows, 1))
        terms = (rng.random((n_rows, n_columns)) * scale).astype(np.float32)
        terms[rng.random(terms.shape) < 0.4] = 0  # (lists lacking a paper)
        want = np.zeros(n_columns, dtype=np.float32)
        for row in terms:
            want += row
        got = _rows_summed(terms)
        assert got.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_rows_summed_of_a_strided_matrix_is_the_loop():
    terms = np.random.default_rng(3).random((12, 40)).astype(np.float32)[:, ::2]
    want = np.zeros(20, dtype=np.float32)
    for row in terms:
        want += row
    assert np.array_equal(_rows_summed(terms).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("n", [0, 1, 2, 5, 20])
def test_rest_bounds_are_numpys_to_the_bit(n):
    rng = np.random.default_rng(n)
    bound = rng.random(n) * rng.choice([1e-3, 1.0, 30.0], size=n)
    want = (np.append(np.cumsum(bound[::-1])[::-1], 0.0) * (1 + 1e-4) + 1e-12).tolist()
    assert _rest_bounds(bound.tolist()) == want


@pytest.mark.parametrize("wide", [0, 10**9])  # every call placed term by term, or joined
def test_both_ways_of_find_all_are_find_for_each_term(pair, monkeypatch, wide):  # noqa: F811
    """Several terms' bisections at once (``_exact_scores``'), in 64-paper blocks (numbers
    not wrapping at 16 bits) and in one block, none or every paper: each row is ``find``'s
    (its own steps, block by block, at any number of blocks: ``FIND_BLOCKS``)."""
    monkeypatch.setattr(index_module, "FIND_ALL_WIDE", wide)
    monkeypatch.setattr(index_module, "FIND_BLOCKS", 10**9)
    small, whole, _ = pair
    rng = np.random.default_rng(17)
    for segment in [*small.index.segments, *whole.index.segments]:
        for size in (0, 1, 5, 33, 60, segment.n_docs):
            docs = np.sort(rng.choice(segment.n_docs, min(size, segment.n_docs), replace=False))
            terms = [-1, *rng.choice(segment.n_terms, 9).tolist(), -1]
            hits, places = segment.find_all(terms, docs)
            assert hits.shape == places.shape == (len(terms), len(docs))
            for row, term in enumerate(terms):
                if term < 0:
                    assert not hits[row].any()
                    continue
                hit, at = segment.find(term, docs)
                assert np.array_equal(hits[row], hit), (term, size)
                assert np.array_equal(places[row][hit], at[hit])


@pytest.mark.parametrize("wide", [0, 10**9])
def test_lookups_with_either_way_are_exhaustive(engine, monkeypatch, wide):  # noqa: F811
    monkeypatch.setattr(index_module, "FIND_ALL_WIDE", wide)
    monkeypatch.setattr(search_module, "PRUNE_MIN_POSTINGS", 0)
    for query in lookups(engine.papers)[:80]:
        for k in (3, 10):
            want = engine.rank(query, k=k, prune=False)
            assert engine.rank(query, k=k, prune=True) == want, (query, k)
