"""Format 12: the inverted lists' counts in four bits (the larger ones escaped beside), each
list's blocks as uint16 posting counts. Every way a reader gets a count or a term frequency
must give what the plain array of counts gave, to the bit.
"""

import numpy as np
import pytest

import bot.engine.index as index_module
from bot.engine.index import (
    _block_sizes,
    _Counts,
    _pack_block_sizes,
    _pack_counts,
    _stored_sizes,
    sublinear,
)
from bot.engine.search import Engine
from tests.test_live_index import make_papers, queries_from, write_jsonl


def _counts(values: np.ndarray) -> _Counts:
    packed = _pack_counts(values)
    return _Counts(packed["xt_data"], packed["xt_escaped"], values.dtype).sized(len(values))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_four_bit_counts_read_back_as_the_plain_array(dtype):
    rng = np.random.default_rng(12)
    top = 255 if dtype == np.uint8 else 3000
    values = rng.integers(1, 6, 2001).astype(dtype)  # odd length: a half-used last byte
    wide = rng.choice(len(values), 60, replace=False)
    values[wide] = rng.integers(16, top, 60)  # over four bits: escaped
    values[[0, 1, 2000]] = [16, 15, top]  # escapes at both ends, 15 the largest kept
    counts = _counts(values)
    assert len(counts) == len(values) and counts.dtype == values.dtype
    assert np.array_equal(np.asarray(counts), values)
    tf = sublinear(values)
    for start in range(0, 40):
        for end in (start, start + 1, start + 2, start + 7, 2001):
            assert np.array_equal(counts[start:end], values[start:end]), (start, end)
            assert np.array_equal(counts.tf_span(start, end), tf[start:end])
            assert counts.tf_span(start, end).dtype == np.float32
    positions = np.sort(rng.choice(len(values), 300, replace=False))
    positions = np.concatenate([positions, wide[:5], [0, 1, 2000]])
    assert np.array_equal(counts.at(positions), values[positions])
    assert np.array_equal(counts[positions], values[positions])
    assert np.array_equal(counts.tf_at(positions), tf[positions])
    assert counts[2000] == top and counts[-1] == top and counts[1] == 15
    assert np.array_equal(counts[::7], values[::7])
    with pytest.raises(IndexError):
        counts[2001]


def test_no_counts_and_no_escapes():
    empty = _counts(np.zeros(0, np.uint8))
    assert len(empty) == 0 and len(np.asarray(empty)) == 0 and len(empty.tf_span(0, 0)) == 0
    small = np.asarray([1, 2, 3, 15, 1], dtype=np.uint8)
    packed = _pack_counts(small)
    assert len(packed["xt_data"]) == 3 and len(packed["xt_escaped"]) == 0
    assert np.array_equal(np.asarray(_counts(small)), small)


def test_block_sizes_take_a_byte_and_the_larger_ones_are_kept_beside(tmp_path):
    block, blocks = 1 << 16, 3
    everywhere = np.arange(block + 10, dtype=np.int32)  # every paper of block 0, then 10
    rare = np.asarray([3, block + 4], dtype=np.int32)
    some = np.arange(0, 2 * block, 256, dtype=np.int32)  # 256 in each block: one too many
    indices = np.concatenate([everywhere, rare, some])
    indptr = np.asarray([0, len(everywhere), len(everywhere) + 2, len(indices)])
    sizes = _block_sizes(indices, indptr, blocks, block)
    assert sizes.tolist() == [block, 10, 1, 1, 256, 256]
    packed = _pack_block_sizes(sizes)
    assert packed["xt_blocks"].dtype == np.uint8
    assert packed["xt_blocks"].tolist() == [255, 10, 1, 1, 255, 255]
    assert len(packed["xt_wide_blocks"]) == 3


@pytest.mark.parametrize(("n_papers", "blocks"), [(500, 2), (700, 3)])
def test_lists_with_long_blocks_decode_and_bisect(
    tmp_path, sentences, monkeypatch, n_papers, blocks
):
    """Blocks of 300 papers and a word in all of them: sizes over a byte, read from beside
    (two blocks, as at 87k papers, take a shorter path)."""
    monkeypatch.setattr(index_module, "BLOCK", 300)
    papers = make_papers(sentences, "w", n_papers, seed=61)
    for paper in papers:
        paper["abstract"] += " Ubiquitous."
    engine = Engine.open(tmp_path / "w.db")
    engine.ingest([write_jsonl(tmp_path / "w.jsonl", papers)])
    segment = engine.index.segments[0]
    wide = np.flatnonzero(np.asarray(segment.xt_blocks) == 255)
    assert segment.blocks == blocks and len(wide) >= blocks - 1
    lengths, terms, _ = segment.doc_terms(np.arange(segment.n_docs))
    docs = np.repeat(np.arange(segment.n_docs), lengths)
    order = np.lexsort((docs, terms))
    assert np.array_equal(segment.docs(0, segment.n_terms), docs[order])
    if segment._sparse:  # format 13 at three blocks: the owner of each stored size
        stored = np.cumsum(_stored_sizes(segment.xt_block_masks))
        owners = np.searchsorted(stored, wide, side="right")
    else:
        owners = wide // max(segment.blocks - 1, 1)
    picked = np.unique(np.concatenate([owners, [0, 1]]))
    assert np.array_equal(
        segment.gathered_docs(picked),
        np.concatenate([segment.docs(t, t + 1) for t in picked.tolist()]),
    )
    for term in picked.tolist():
        hit, positions = segment.find(term, np.arange(segment.n_docs))
        assert np.array_equal(np.flatnonzero(hit), docs[order][terms[order] == term])
        a, b = int(segment.list_ptr[term]), int(segment.list_ptr[term + 1])
        assert np.array_equal(positions[hit], np.arange(a, b))


@pytest.mark.parametrize("block", [64, 1 << 16])
def test_the_inverted_lists_hold_the_papers_counts(tmp_path, sentences, block, monkeypatch):
    """Both directions of a built index agree on every count (words repeated past 15 times
    in some papers), and every lookup path reads the same term frequencies."""
    monkeypatch.setattr(index_module, "BLOCK", block)
    papers = make_papers(sentences, "c", 300, seed=51)
    for i, paper in enumerate(papers[::7]):
        word = paper["abstract"].split()[0]
        paper["abstract"] += f" {word}" * (10 + i)  # with the title: counts up to 30 and more
    engine = Engine.open(tmp_path / "c.db")
    engine.ingest([write_jsonl(tmp_path / "c.jsonl", papers)])
    segment = engine.index.segments[0]
    assert len(segment.xt_data._wide) > 0  # escapes were exercised
    lengths, terms, counts = segment.doc_terms(np.arange(segment.n_docs))
    docs = np.repeat(np.arange(segment.n_docs), lengths)
    order = np.lexsort((docs, terms))
    assert np.array_equal(segment.docs(0, segment.n_terms), docs[order])
    assert np.array_equal(np.asarray(segment.xt_data), counts[order])
    assert np.array_equal(segment.tf(0, len(segment.xt_data)), sublinear(counts[order]))
    for term in np.random.default_rng(5).choice(segment.n_terms, 40).tolist():
        a, b = int(segment.list_ptr[term]), int(segment.list_ptr[term + 1])
        hit, positions = segment.find(term, np.arange(segment.n_docs))
        assert np.array_equal(np.flatnonzero(hit), segment.docs(term, term + 1))
        assert np.array_equal(positions[hit], np.arange(a, b))
        assert np.array_equal(segment.tf_at(positions[hit]), segment.tf(a, b))
    for query in queries_from(papers, 20, seed=52):
        assert engine.rank(query, prune=True) == engine.rank(query, prune=False), query
