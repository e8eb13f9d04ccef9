"""A delta's writer finds its terms in the main segment's front-coded vocabulary without
decoding or hashing all of it (``Vocabulary.ids_of``): every term where ``id_of`` finds it,
absent ones -1, whatever block (first, last, partial), byte (multi-byte, longer than the
blocks' first terms) or order they come in."""

import random

import numpy as np
import pytest

import bot.engine.index as index_module
from tests.test_index_encoding import _terms, _vocabulary


@pytest.mark.parametrize(("n", "block"), [(0, 16), (1, 16), (17, 16), (1000, 16), (300, 3)])
def test_ids_of_finds_what_id_of_finds(n, block):
    terms = _terms(n, seed=n)
    vocab = _vocabulary(terms, block)
    rng = random.Random(n)
    absent = ["", "a", "graph", "graph neural 5x", "zz", "ÿ", "z" * 301, "x" * 270 + "0", "0"]
    absent += [t[:-1] for t in terms[::7]] + [t + "0" for t in terms[::5]]
    wanted = sorted({t for t in terms if rng.random() < 0.3} | set(absent) - {""})
    got = vocab.ids_of(*index_module._plain_vocabulary(wanted))
    assert got.dtype == np.int64
    assert got.tolist() == [vocab.id_of(t) for t in wanted]
    assert (got >= 0).sum() >= min(n, 1)  # not vacuous: some are there
    everything = vocab.ids_of(*vocab.plain())
    assert everything.tolist() == list(range(len(terms)))
    shuffled = list(wanted)
    rng.shuffle(shuffled)
    assert vocab.ids_of(*index_module._plain_vocabulary(shuffled)).tolist() == [
        vocab.id_of(t) for t in shuffled
    ]


def test_a_term_longer_than_the_blocks_first_and_the_wanted_ones_is_not_cut():
    """Terms compare at the widest decoded term's width: "bbbbb" is not "b" * 40 cut short."""
    vocab = _vocabulary(["a", "b" * 40, "c"])
    wanted = ["b" * 5, "c"]
    assert vocab.ids_of(*index_module._plain_vocabulary(wanted)).tolist() == [-1, 2]
