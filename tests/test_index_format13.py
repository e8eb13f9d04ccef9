"""Format 13: at three blocks or more (872k papers: 14), an inverted list records only its
non-empty blocks (a bit each in ``xt_block_masks``) and the sizes of those but its last
(``xt_blocks``, ``xt_block_starts`` every ``_MASK_GROUP``-th list's first). Every reader of
the blocks must see the sizes the dense layout (format 12's ``_block_sizes``) gave.
"""

import io
import zlib

import numpy as np
import pytest

import bot.engine.index as index_module
from bot.engine.index import (
    _MASK_GROUP,
    WRITE_CHUNK,
    Segment,
    _block_sizes,
    _ChecksumWriter,
    _mask_type,
    _sparse_block_sizes,
    _split_keys,
    _write_file,
)
from bot.engine.search import Engine
from tests.test_live_index import make_papers, queries_from, write_jsonl


def _lists(blocks: int, block: int, n_terms: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inverted lists of every shape: empty, one posting, one block, a few blocks, every
    block, and blocks of over 255 postings (kept beside the byte sizes)."""
    rng = np.random.default_rng(seed)
    n_docs = blocks * block
    lists = []
    for term in range(n_terms):
        kind = term % 7
        if kind == 0:
            docs = np.zeros(0, np.int64)
        elif kind == 1:
            docs = rng.integers(0, n_docs, 1)
        elif kind == 2:  # one block, anywhere
            b = int(rng.integers(0, blocks))
            docs = b * block + rng.integers(0, block, int(rng.integers(1, 40)))
        elif kind == 3:  # a few blocks
            chosen = rng.choice(blocks, int(rng.integers(2, min(4, blocks) + 1)), replace=False)
            docs = np.concatenate([b * block + rng.integers(0, block, 3) for b in chosen])
        elif kind == 4:  # every paper: sizes over a byte
            docs = np.arange(n_docs)
        else:
            docs = rng.integers(0, n_docs, int(rng.integers(1, 3 * blocks)))
        lists.append(np.unique(docs))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum([len(d) for d in lists], out=indptr[1:])
    return np.concatenate(lists).astype(np.int32), indptr


def _reader(indices, indptr, blocks: int, block: int) -> Segment:
    """A segment reading these lists' sparse layout (only what ``_sizes`` and
    ``_list_bounds`` use)."""
    arrays = _sparse_block_sizes(indices, indptr, blocks, block)
    segment = object.__new__(Segment)
    segment.blocks, segment.block, segment.n_terms = blocks, block, len(indptr) - 1
    segment.xt_indptr = indptr.astype(np.uint32)
    segment.xt_blocks = arrays["xt_blocks"]
    segment.xt_block_masks, segment.xt_block_starts = (
        arrays["xt_block_masks"],
        arrays["xt_block_starts"],
    )
    segment._wide_block_at, segment._wide_blocks = _split_keys(arrays["xt_wide_blocks"], np.int64)
    segment._sparse = True
    return segment


@pytest.mark.parametrize(("blocks", "block"), [(3, 300), (14, 300), (17, 256), (40, 260)])
def test_sparse_block_sizes_read_back_as_the_dense_ones(blocks, block):
    indices, indptr = _lists(blocks, block, n_terms=3 * _MASK_GROUP + 5, seed=blocks)
    n_terms = len(indptr) - 1
    dense = _block_sizes(indices, indptr, blocks, block).reshape(n_terms, blocks - 1)
    last = np.diff(indptr) - dense.sum(axis=1)
    want = np.concatenate([dense, last[:, None]], axis=1)
    segment = _reader(indices, indptr, blocks, block)
    assert segment.xt_block_masks.dtype == _mask_type(blocks)
    assert len(segment._wide_blocks) > 0  # sizes over a byte were exercised
    # Only non-empty blocks are stored, and not a list's last one.
    assert len(segment.xt_blocks) == int(np.maximum((want > 0).sum(axis=1) - 1, 0).sum())
    every = np.arange(n_terms)
    assert np.array_equal(segment._sizes(every), want)  # one pass over the span
    rng = np.random.default_rng(7)
    picked = np.sort(rng.choice(n_terms, 4, replace=False))  # far apart: by windows
    assert np.array_equal(segment._sizes(picked), want[picked])
    shuffled = rng.permutation(n_terms)[:40]
    assert np.array_equal(segment._sizes(shuffled), want[shuffled])
    for term in range(n_terms):
        bounds = segment._list_bounds(term)
        starts = int(indptr[term]) + np.concatenate([[0], np.cumsum(want[term])])
        assert bounds == starts.tolist(), term


def test_a_segment_past_64_blocks_keeps_the_dense_layout():
    assert _mask_type(2) is None and _mask_type(65) is None
    assert _mask_type(3) == np.uint8 and _mask_type(9) == np.uint16 and _mask_type(64) == np.uint64


@pytest.mark.parametrize("block", [20, 64])
def test_a_built_index_with_sparse_blocks_answers_as_with_one_block(tmp_path, sentences, block):
    """35 and 11 blocks of papers (uint64 and uint16 masks): every reader of the lists gives
    what one block gives."""
    papers = make_papers(sentences, "s", 700, seed=71)
    engines = []
    for size in (block, 1 << 16):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(index_module, "BLOCK", size)
            engine = Engine.open(tmp_path / f"s{size}.db")
            engine.ingest([write_jsonl(tmp_path / f"s{size}.jsonl", papers)])
        engines.append(engine)
    small, whole = (e.index.segments[0] for e in engines)
    assert small.blocks == -(-700 // block) and small._sparse and not whole._sparse
    assert np.array_equal(small.docs(0, small.n_terms), whole.docs(0, whole.n_terms))
    terms = np.random.default_rng(8).choice(small.n_terms, 60)
    assert np.array_equal(small.gathered_docs(terms), whole.gathered_docs(terms))
    wanted = np.arange(small.n_docs)
    for term in terms.tolist():
        assert np.array_equal(small.docs(term, term + 1), whole.docs(term, term + 1))
        hit_a, pos_a = small.find(term, wanted)
        hit_b, pos_b = whole.find(term, wanted)
        assert np.array_equal(hit_a, hit_b) and np.array_equal(pos_a[hit_a], pos_b[hit_b])
    assert (small.rows(terms) != whole.rows(terms)).nnz == 0
    for query in queries_from(papers, 15, seed=72):
        assert engines[0].rank(query) == engines[1].rank(query), query


def test_index_files_are_written_in_small_pieces(tmp_path):
    """The page cache keeps a file in folios as large as the writes that made it, and a
    reader maps a whole folio when it touches a byte of it: no write may exceed
    ``WRITE_CHUNK`` (the file, its size and checksum as one write would give)."""
    writes = []

    class Recorder(io.BytesIO):
        def write(self, data):
            writes.append(len(memoryview(data).cast("B")))
            return super().write(data)

    values = np.arange(300_000, dtype=np.int32)  # 1.2 MB: numpy hands over 16 MB at once
    handle = Recorder()
    writer = _ChecksumWriter(handle)
    np.lib.format.write_array(writer, values, allow_pickle=False)
    assert max(writes) == WRITE_CHUNK and len(writes) > 10
    assert writer.size == len(handle.getvalue()) and writer.crc == zlib.crc32(handle.getvalue())
    handle.seek(0)
    assert np.array_equal(np.load(handle), values)
    entry = _write_file(tmp_path / "v.npy", values)
    assert entry == {"size": writer.size, "crc32": writer.crc}
