"""The lookup's cheaper paths give the same bits as the numpy steps they replace:
``_rows_summed`` (one reduction for ``total += row`` row by row, ``_exact_scores``) and
``_rest_bounds`` (the terms' remaining bounds in Python floats, ``top_candidates``)."""

import numpy as np
import pytest

from bot.engine.index import _rest_bounds, _rows_summed


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
