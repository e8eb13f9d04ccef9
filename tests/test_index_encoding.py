"""Encodings read back exactly: the front-coded vocabulary (terms sharing long prefixes,
more than 255 bytes of them, multi-byte characters, blocks of every fill) and each paper's
own terms and counts (format 14 stores no forward index: they are read from the inverted
lists, a pass a few postings at a time, or from the paper's text checked against them).
"""

import bisect
import random

import numpy as np
import pytest

import bot.engine.index as index_module
from bot.engine.index import Vocabulary
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


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 1000])
def test_many_terms_looked_up_at_once_are_each_one_looked_up_alone(n):
    """``ids_of_terms`` (a paper's terms at once, blocks found by their 8-byte prefixes) gives
    ``id_of``'s answers: heads sharing their first 8 bytes (or more than 255), terms shorter
    than 8 bytes, absent terms before, between and after all others, repeats, any order."""
    terms = _terms(n, seed=n)
    vocab = _vocabulary(terms)
    absent = ["", "a", "graph", "graph neural 5x", "zz", "ÿ", "z" * 301, "x" * 270 + "0", "\x00"]
    queries = [*terms, *absent, *terms[:5]]
    random.Random(n).shuffle(queries)
    found = vocab.ids_of_terms(queries)
    assert found.dtype == np.int64
    assert found.tolist() == [vocab.id_of(t) for t in queries]
    assert vocab.ids_of_terms([]).tolist() == []


def test_shared_prefixes_longer_than_a_byte_are_cut_at_255():
    terms = sorted(["q" * 400 + tail for tail in "abcdefgh"])
    _, shared, _ = index_module._front_code(*index_module._plain_vocabulary(terms), 16)
    assert shared.tolist() == [0] + [255] * 7
    vocab = _vocabulary(terms)
    assert [vocab.term(i) for i in range(len(terms))] == terms


@pytest.mark.parametrize(
    ("chunk", "block"), [(1 << 20, 1 << 16), (50, 1 << 16), (50, 64), (1 << 20, 32)]
)
def test_a_papers_terms_come_back_exactly_as_counted(
    tmp_path, sentences, monkeypatch, chunk, block
):
    """Each paper's (term ids, counts), read from the inverted lists (a pass ``chunk``
    postings at a time: 50 cuts it between lists often; papers in blocks of ``block``: 64
    and 32 make 3 and 5, whose papers share their low bits) and from its text, are the row
    the build counted: the counts matrix ``_count`` gives for the corpus, an independent
    copy."""
    monkeypatch.setattr(index_module, "BLOCK", block)
    papers = make_papers(sentences, "v", 150, seed=12)
    for i, paper in enumerate(papers[::9]):
        paper["abstract"] += f" {paper['abstract'].split()[0]}" * (14 + i)  # escaped counts
    papers.append({"id": "empty", "title": "the of", "abstract": "a an the", "authors": []})
    engine = Engine.open(tmp_path / "v.db")
    engine.ingest([write_jsonl(tmp_path / "v.jsonl", papers)])
    index = engine.index
    (segment,) = index.segments
    counted = index_module._count(engine.corpus.iter_documents(), index_module.MIN_BIGRAM_DF)
    assert counted.vocabulary == [segment.vocab.term(t) for t in range(segment.n_terms)]
    rows = counted.counts.tocsr()
    assert (rows.data > 15).sum() >= 3 and (np.diff(rows.indptr) == 0).sum() == 1
    assert rows.dtype == segment.xt_data.dtype  # counted in the type stored (no float copy)
    rng = np.random.default_rng(chunk)
    assert segment.blocks == -(-segment.n_docs // block)
    picks = [np.arange(segment.n_docs), rng.permutation(segment.n_docs)[:37], np.asarray([3, 3])]
    picks.append(np.asarray([segment.n_docs - 1, 1]))  # in different blocks, unsorted
    for docs in picks:
        lengths, terms, counts = segment.doc_terms(docs, chunk=chunk)
        assert lengths.tolist() == [rows.indptr[d + 1] - rows.indptr[d] for d in docs]
        want = np.concatenate([rows.indices[rows.indptr[d] : rows.indptr[d + 1]] for d in docs])
        assert np.array_equal(terms, want)
        want = np.concatenate([rows.data[rows.indptr[d] : rows.indptr[d + 1]] for d in docs])
        assert np.array_equal(counts, want) and counts.dtype == segment.xt_data.dtype
    from_text = index._terms_from_text(segment, np.arange(segment.n_docs))
    assert len(from_text) == segment.n_docs  # every paper's text gives what the index holds
    for doc, (terms, counts) in from_text.items():
        a, b = rows.indptr[doc], rows.indptr[doc + 1]
        assert np.array_equal(terms, rows.indices[a:b]), doc
        assert np.array_equal(counts, rows.data[a:b]) and counts.dtype == segment.xt_data.dtype


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
