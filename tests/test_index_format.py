"""The index's on-disk format: no forward index (a paper's terms are read from its text or
from the inverted lists: tests/test_index_doc_vectors.py), the inverted lists' counts in four bits (tests/test_index_format12.py), their paper
numbers as 16-bit halves in blocks (tests/test_index_blocks.py), the vocabulary front-coded
(tests/test_index_encoding.py); an index of the previous format is rebuilt once, and nothing
a lookup, "similar", "why" or the taste model reads changes with the encoding.
"""

import json
import random

import numpy as np
import pytest

from bot.engine import index as index_module
from bot.engine.index import FORMAT_VERSION, read_current, sublinear
from bot.engine.search import Engine
from bot.engine.text import analyze
from tests.test_live_index import make_papers, published, queries_from, write_jsonl
from tests.test_pruning import main_and_deltas


@pytest.mark.parametrize("old_format", [11, 12, 13])
def test_an_index_of_an_older_format_is_rebuilt_once_in_the_new_format(
    tmp_path, sentences, old_format
):
    papers = make_papers(sentences, "f", 80, seed=31)
    db = tmp_path / "f.db"
    engine = Engine.open(db)
    engine.ingest([write_jsonl(tmp_path / "a.jsonl", papers)])
    query = queries_from(papers, 1, seed=32)[0]
    want = engine.rank(query)
    # What an older format published: the same CURRENT and segment manifests, its format.
    current = read_current(engine.index_dir)
    old_segment = current["segments"][0]["name"]
    for path in (engine.index_dir / "CURRENT", engine.index_dir / old_segment / "meta.json"):
        path.write_text(json.dumps({**json.loads(path.read_text()), "format": old_format}))
    assert read_current(engine.index_dir) is None

    upgraded = Engine.open(db)
    assert upgraded.rank(query) == want
    current = read_current(upgraded.index_dir)
    assert current["format"] == FORMAT_VERSION == 14
    assert current["segments"][0]["name"] != old_segment
    assert {p.name for p in upgraded.index_dir.iterdir()} == published(upgraded)
    segment = upgraded.index.segments[0]
    assert segment.xt_data.dtype == np.uint8 and segment.doc_sizes.dtype == np.uint8
    assert segment.xt_indices.dtype == np.uint16
    files = {p.name for p in segment.directory.iterdir()}
    assert {"vocab_shared.npy", "vocab_heads.npy", "doc_sizes.npy"} <= files
    assert {"xt_blocks.npy", "xt_escaped.npy"} <= files  # format 12's
    assert {"xt_block_masks.npy", "xt_block_starts.npy"} <= files  # format 13's
    assert len(np.load(segment.directory / "xt_data.npy")) == -(-len(segment.xt_indices) // 2)
    assert files.isdisjoint(
        {"term_hashes.npy", "hash_order.npy"}  # computed when a delta needs them
        | {"vocab_offsets.npy", "x_gaps.npy", "x_counts.npy", "x_wide.npy"}  # format 10's
        | {"x_terms.npy", "x_codes.npy", "x_indptr.npy", "x_bytes.npy"}  # format 13's
    )
    generation = current["generation"]
    assert Engine.open(db).rank(query) == want  # once: the next process just opens it
    assert read_current(upgraded.index_dir)["generation"] == generation


def test_term_frequencies_have_the_same_bits_wherever_they_are_computed():
    """A lookup computes ``1 + ln(count)`` over its own lists; the writer over whole
    segments: every count must give the same float32 either way."""
    counts = np.arange(1, 1 << 16, dtype=np.uint16)
    whole = sublinear(counts)
    rng = np.random.default_rng(5)
    for _ in range(20):
        start = int(rng.integers(0, len(counts) - 1))
        end = int(rng.integers(start + 1, min(start + 40, len(counts)) + 1))
        assert np.array_equal(sublinear(counts[start:end]), whole[start:end])
    picked = rng.choice(len(counts), 500)
    assert np.array_equal(sublinear(counts[picked]), whole[picked])
    assert np.array_equal(sublinear(counts[:255].astype(np.uint8)), whole[:255])
    singles = np.asarray([sublinear(counts[i : i + 1])[0] for i in range(0, 300)])
    assert np.array_equal(singles, whole[:300])


@pytest.mark.parametrize("from_text", [True, False])
def test_a_papers_terms_come_back_exactly(tmp_path, monkeypatch, from_text):
    """Term ids far apart, counts over 15 (escaped in the lists) and papers with no indexed
    words, read from the papers' text or from the lists alone."""
    monkeypatch.setattr(index_module, "TEXT_POSTINGS", 1 if from_text else 10**12)
    vocabulary = [f"w{n:06d}x" for n in range(70_000)]
    rng = random.Random(7)
    papers, block = [], 0
    for i in range(160):
        if i % 10 == 0:
            chosen = ["aaaa", "zzzz"]  # the first term and the last: a gap of over 70,000
        else:
            chosen = vocabulary[block * 500 : (block + 1) * 500] or rng.sample(vocabulary, 500)
            block += 1
        rng.shuffle(chosen)
        papers.append(
            {"id": f"g{i}", "title": f"t{i}", "abstract": " ".join(chosen), "authors": []}
        )
    papers.append({"id": "empty", "title": "the of", "abstract": "a an the", "authors": []})
    repeated = " ".join(["zzzz"] * 17 + ["aaaa"] * 4 + ["w000001x"] * 3)
    papers.append({"id": "counts", "title": "zzzz aaaa", "abstract": repeated, "authors": []})
    engine = Engine.open(tmp_path / "g.db")
    engine.ingest([write_jsonl(tmp_path / "g.jsonl", papers)])
    index = engine.index
    assert index.vocab.size > 70_000
    for paper in papers:
        doc = index.doc_of_rowid(engine.corpus.rowid_of(paper["id"]))
        terms, values = index.doc_vector(doc)
        expected = {index.vocab.id_of(t) for t in analyze(paper["title"])}
        expected |= {index.vocab.id_of(t) for t in analyze(paper["abstract"])}
        assert terms.tolist() == sorted(expected - {-1}), paper["id"]
        assert np.all(values > 0)
    doc = index.doc_of_rowid(engine.corpus.rowid_of("counts"))
    _, terms, counts = index._doc_terms(0, np.asarray([doc]))
    by_term = dict(zip([index.vocab.term(t) for t in terms.tolist()], counts.tolist(), strict=True))
    # Title words count twice: 2 + 17 (over four bits: escaped), 2 + 4, and 3.
    assert (by_term["zzzz"], by_term["aaaa"], by_term["w000001x"]) == (19, 6, 3)
    several = [index.doc_of_rowid(engine.corpus.rowid_of(p["id"])) for p in papers[-25:]]
    lengths, terms, many_counts = index.segments[0].doc_terms(np.asarray(several))
    one_by_one = [index.segments[0].doc_terms(np.asarray([d]))[1] for d in several]
    assert lengths.tolist() == [len(t) for t in one_by_one]
    assert np.array_equal(terms, np.concatenate(one_by_one))
    counts_one_by_one = [index.segments[0].doc_terms(np.asarray([d]))[2] for d in several]
    assert np.array_equal(many_counts, np.concatenate(counts_one_by_one))


def test_deleted_papers_document_frequencies_are_stored_with_their_generation(
    tmp_path, sentences, monkeypatch
):
    """The writer finds the deleted papers' terms (a pass over the lists) and stores their
    document frequencies with the generation: a reader opening it makes no such pass, and
    every term's df is the number of live papers that have it."""
    engine = main_and_deltas(tmp_path, sentences, "z", seed=8)
    current = read_current(engine.index_dir)
    assert current["segments"][0]["deleted"] and current["deleted_df"]

    def no_pass(*args, **kwargs):
        raise AssertionError("a reader passed over the lists")

    monkeypatch.setattr(index_module.Segment, "doc_terms", no_pass)
    index = index_module.Index(engine.index_dir)
    assert index.deleted_df.shape[0] == 2 and index.deleted_df.shape[1] > 100
    live_df = np.diff((index.matrix_xt() != 0).tocsr().indptr)
    assert np.array_equal(index.df, live_df)
