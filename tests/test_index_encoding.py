"""Format 11's encodings, read back exactly: the front-coded vocabulary (terms sharing long
prefixes, more than 255 bytes of them, multi-byte characters, blocks of every fill) and each
paper's own vector (varint gaps of one to four bytes, counts of two bits with the larger ones
kept after the gaps, papers with no terms, the writer working a few postings at a time).
"""

import bisect
import random

import numpy as np
import pytest

import bot.engine.index as index_module
from bot.engine.index import Segment, Vocabulary
from bot.engine.search import Engine
from tests.test_live_index import make_papers, write_jsonl


def _vocabulary(terms: list[str], block: int = index_module.VOCAB_BLOCK) -> Vocabulary:
    blob, offsets = index_module._plain_vocabulary(terms)
    suffixes, shared, heads = index_module._front_code(blob, offsets, block)
    return Vocabulary(suffixes, shared, heads, block)


def _terms(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    stems = ["graph", "graph neural", "neural", "naïve", "ß", "a", "z" * 300, "x" * 270]
    out = set()
    while len(out) < n:
        out.add(rng.choice(stems) + rng.choice(["", " ", "s", "é"]) + str(rng.randint(0, 999)))
    return sorted(out)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000])
def test_the_front_coded_vocabulary_finds_every_term_and_nothing_else(n):
    terms = _terms(n, seed=n)
    vocab = _vocabulary(terms)
    assert vocab.size == len(terms)
    assert [vocab.term(i) for i in range(len(terms))] == terms
    assert [vocab.id_of(t) for t in terms] == list(range(len(terms)))
    keys = [t.encode() for t in terms]
    for absent in ["", "a", "graph", "graph neural 5x", "zz", "ÿ", "z" * 301, "x" * 270 + "0"]:
        if absent not in terms:
            assert vocab.id_of(absent) == -1, absent
        assert vocab._lower_bound(absent.encode()) == bisect.bisect_left(keys, absent.encode())
    for prefix in ["", "graph n", "na", "z" * 300, "q"]:
        assert (
            vocab.with_prefix(prefix, limit=50) == [t for t in terms if t.startswith(prefix)][:50]
        )
    blob, offsets = vocab.plain()
    assert (blob, offsets.tolist()) == (
        index_module._plain_vocabulary(terms)[0],
        index_module._plain_vocabulary(terms)[1].tolist(),
    )


def test_shared_prefixes_longer_than_a_byte_are_cut_at_255():
    terms = sorted(["q" * 400 + tail for tail in "abcdefgh"])
    _, shared, _ = index_module._front_code(*index_module._plain_vocabulary(terms), 16)
    assert shared.tolist() == [0] + [255] * 7
    vocab = _vocabulary(terms)
    assert [vocab.term(i) for i in range(len(terms))] == terms


def _papers_x(seed: int, n_docs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random sorted term ids per paper (gaps up to 2**27) and counts from 1 to 5,000."""
    rng = np.random.default_rng(seed)
    indices, counts, indptr = [], [], [0]
    for doc in range(n_docs):
        size = 0 if doc % 7 == 3 else int(rng.integers(1, 60))
        top = [2**7, 2**14, 2**21, 2**27][doc % 4]
        ids = np.unique(rng.integers(0, top, size))
        indices.append(ids)
        counts.append(rng.choice([1, 1, 1, 2, 3, 4, 17, 255, 256, 5000], len(ids)))
        indptr.append(indptr[-1] + len(ids))
    return np.concatenate(indices), np.asarray(indptr), np.concatenate(counts).astype(np.uint16)


class _X:
    """The ``x`` arrays of a segment, as ``Segment.doc_terms`` reads them."""

    def __init__(self, arrays: dict, counts_dtype) -> None:
        self.x_terms, self.x_codes = arrays["x_terms"], arrays["x_codes"]
        self.x_indptr, self.x_bytes = arrays["x_indptr"], arrays["x_bytes"]
        self.xt_data = np.zeros(0, counts_dtype)


@pytest.mark.parametrize("chunk", [1 << 22, 50])
def test_a_papers_vector_comes_back_exactly(monkeypatch, chunk):
    monkeypatch.setattr(index_module, "_X_CHUNK", chunk)  # 50: the writer's chunks meet
    indices, indptr, counts = _papers_x(seed=chunk, n_docs=300)
    arrays = index_module._encode_x(indices, indptr, counts)
    x = _X(arrays, counts.dtype)
    assert arrays["x_terms"].max() >= 0x80 and (counts > 3).sum() > 100
    rng = np.random.default_rng(1)
    for doc in range(300):
        lengths, ids, got = Segment.doc_terms(x, np.asarray([doc]))
        a, b = indptr[doc], indptr[doc + 1]
        assert lengths.tolist() == [b - a]
        assert np.array_equal(ids, indices[a:b]) and np.array_equal(got, counts[a:b]), doc
        assert got.dtype == counts.dtype
    for _ in range(30):
        docs = rng.choice(300, int(rng.integers(2, 40)))
        lengths, ids, got = Segment.doc_terms(x, docs)
        assert lengths.tolist() == [indptr[d + 1] - indptr[d] for d in docs]
        assert np.array_equal(
            ids, np.concatenate([indices[indptr[d] : indptr[d + 1]] for d in docs])
        )
        assert np.array_equal(
            got, np.concatenate([counts[indptr[d] : indptr[d + 1]] for d in docs])
        )


def test_an_index_reads_its_papers_vectors_and_vocabulary_back(tmp_path, sentences):
    """Through the engine: every paper's vector as counted, every term found by its text."""
    papers = make_papers(sentences, "e", 120, seed=5)
    engine = Engine.open(tmp_path / "e.db")
    engine.ingest([write_jsonl(tmp_path / "e.jsonl", papers)])
    index = engine.index
    (segment,) = index.segments
    assert segment.vocab.size > 3 * index_module.VOCAB_BLOCK
    for term_id in range(0, segment.n_terms, 7):
        assert segment.vocab.id_of(segment.vocab.term(term_id)) == term_id
    docs = np.arange(segment.n_docs)
    lengths, terms, counts = segment.doc_terms(docs)
    owner = np.repeat(docs, lengths)
    # The same postings as the inverted lists hold, term by term.
    for term in range(0, segment.n_terms, 11):
        listed = segment.docs(term, term + 1)
        a, b = int(segment.list_ptr[term]), int(segment.list_ptr[term + 1])
        assert np.array_equal(np.sort(owner[terms == term]), listed)
        order = np.argsort(owner[terms == term], kind="stable")
        assert np.array_equal(counts[terms == term][order], segment.xt_data[a:b])


def test_best_impacts_are_stored_in_half_precision_never_below_the_truth(tmp_path, sentences):
    """MaxScore skips a list only when its bound is below the bar: a bound rounded down
    could skip a paper that belongs in the top 10."""
    rng = np.random.default_rng(2)
    values = np.concatenate([rng.random(5000, np.float32) * 20, np.float32([0, 1e-9, 3.1416])])
    half = index_module.rounded_up(values)
    assert half.dtype == np.float16
    assert np.all(half.astype(np.float32) >= values)
    assert np.all(half.astype(np.float32) <= values * (1 + 2**-10) + 2**-24)
    papers = make_papers(sentences, "i", 80, seed=9)
    engine = Engine.open(tmp_path / "i.db")
    engine.ingest([write_jsonl(tmp_path / "i.jsonl", papers)])
    stored = engine.index.impacts
    assert stored.dtype == np.float16
    assert np.all(stored.astype(np.float32) >= engine.index.best_impacts())
