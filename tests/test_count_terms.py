"""``count_terms`` (sorted bigram codes, chunk by chunk) against a plain dictionary count."""

import itertools
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from bot.engine import index as index_module
from bot.engine.index import _Field, count_terms


def _reference(texts, weights, min_df):
    """Weighted unigram and bigram counts per document, bigrams kept in ``min_df`` documents."""
    docs = []
    for fields in texts:
        counts: Counter = Counter()
        for words, weight in zip(fields, weights, strict=True):
            for word in words:
                counts[word] += weight
            for a, b in zip(words, words[1:], strict=False):
                counts[f"{a} {b}"] += weight
        docs.append(counts)
    df = Counter(term for counts in docs for term in counts if " " in term)
    return [{t: c for t, c in counts.items() if " " not in t or df[t] >= min_df} for counts in docs]


def test_counts_match_a_dictionary_count_whatever_the_chunk(monkeypatch):
    rng = np.random.default_rng(7)
    words = [f"w{k}" for k in range(12)]
    weights = (2.0, 3.0, 1.0)
    texts = [[list(rng.choice(words, size=rng.integers(0, 9))) for _ in weights] for _ in range(61)]
    for chunk in (1, 7, 1000):
        monkeypatch.setattr(index_module, "CHUNK_DOCS", chunk)
        for min_df in (1, 3):
            vocabulary: dict[str, int] = {}
            fields = [_Field(w) for w in weights]
            for doc in texts:
                for text_field, doc_words in zip(fields, doc, strict=True):
                    text_field.add(" ".join(doc_words), vocabulary)
            matrix, terms = count_terms(fields, len(texts), list(vocabulary), min_df)
            assert terms == sorted(terms)
            got = [
                {terms[j]: float(v) for j, v in zip(row.indices, row.data, strict=True)}
                for row in matrix
            ]
            assert got == _reference(texts, weights, min_df), (chunk, min_df)


def test_chunks_counted_in_threads_give_the_same_matrix(monkeypatch):
    """Two threads count the chunks (``COUNT_THREADS``); the matrix and vocabulary are the
    single thread's, bit for bit, whichever chunk finishes first."""
    import threading

    rng = np.random.default_rng(11)
    words = [f"w{k}" for k in range(30)]
    texts = [
        [list(rng.choice(words, size=rng.integers(0, 20))) for _ in range(3)] for _ in range(97)
    ]
    monkeypatch.setattr(index_module, "CHUNK_DOCS", 7)
    threads = set()
    codes = index_module._bigram_codes

    def spying(*args):
        threads.add(threading.current_thread().name)
        return codes(*args)

    monkeypatch.setattr(index_module, "_bigram_codes", spying)
    results = []
    for n_threads in (1, 2):
        monkeypatch.setattr(index_module, "COUNT_THREADS", n_threads)
        vocabulary: dict[str, int] = {}
        fields = [_Field(w) for w in (2.0, 3.0, 1.0)]
        for doc in texts:
            for text_field, doc_words in zip(fields, doc, strict=True):
                text_field.add(" ".join(doc_words), vocabulary)
        results.append(count_terms(fields, len(texts), list(vocabulary), 2))
    (one, one_terms), (two, two_terms) = results
    assert any(name.startswith("count") for name in threads)
    assert one_terms == two_terms
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(one, name), getattr(two, name)), name
    got = [{two_terms[j]: float(v) for j, v in zip(r.indices, r.data, strict=True)} for r in two]
    assert got == _reference(texts, (2.0, 3.0, 1.0), 2)


def test_terms_are_ordered_as_sorted_orders_their_strings():
    """``_sorted_terms`` sorts integer ranks, not strings: the vocabulary must still come out
    as ``sorted`` puts it, prefixes, digits and accents included ("a b" before "ab", "a")."""
    unigrams = ["ab", "a", "b", "a1", "é", "z", "abc", "ß", "10", "1", "ab1", "x2y"]
    n = len(unigrams)
    rng = np.random.default_rng(3)
    keys = np.unique(rng.integers(0, n * n, size=90))
    terms = unigrams + [f"{unigrams[k // n]} {unigrams[k % n]}" for k in keys.tolist()]
    order = index_module._sorted_terms(unigrams, keys)
    assert [terms[i] for i in order] == sorted(terms)
    assert len(index_module._sorted_terms([], np.zeros(0, np.int64))) == 0


def test_plain_vocabulary_offsets_are_each_terms_start():
    blob, offsets = index_module._plain_vocabulary(["a", "é b", "ßx"])
    assert blob == "a\né b\nßx\n".encode()
    assert offsets.tolist() == [0, 2, 7, 11]
    assert index_module._plain_vocabulary([])[1].tolist() == [0]


def test_pairs_not_kept_between_the_passes_are_found_again(monkeypatch):
    """The first pass keeps each chunk's (bigram, paper) pairs for the second only up to
    ``KEPT_PAIRS_BYTES``; the chunks beyond are sorted again: none, some or all kept, in one
    thread or two, the same matrix, bit for bit, and the dictionary count's values."""
    rng = np.random.default_rng(5)
    words = [f"w{k}" for k in range(15)]
    weights = (2.0, 3.0, 1.0)
    texts = [
        [list(rng.choice(words, size=rng.integers(0, 12))) for _ in weights] for _ in range(83)
    ]
    monkeypatch.setattr(index_module, "CHUNK_DOCS", 10)
    sorted_again = []
    real_codes = index_module._bigram_codes

    def codes(*args):
        sorted_again.append(True)  # a chunk's bigrams found (and sorted)
        return real_codes(*args)

    monkeypatch.setattr(index_module, "_bigram_codes", codes)
    results = []
    for room, threads in ((0, 1), (3000, 2), (3000, 1), (1 << 30, 2)):
        monkeypatch.setattr(index_module, "KEPT_PAIRS_BYTES", room)
        monkeypatch.setattr(index_module, "COUNT_THREADS", threads)
        vocabulary: dict[str, int] = {}
        fields = [_Field(w) for w in weights]
        for doc in texts:
            for text_field, doc_words in zip(fields, doc, strict=True):
                text_field.add(" ".join(doc_words), vocabulary)
        sorted_again.clear()
        matrix, terms = count_terms(fields, len(texts), list(vocabulary), 2)
        chunks = -(-len(texts) // index_module._chunk_docs(len(vocabulary), 3))
        bigram_sorts = sum(sorted_again)
        if room == 0:
            assert bigram_sorts == 2 * chunks
        elif room == 1 << 30:
            assert bigram_sorts == chunks
        else:
            assert chunks < bigram_sorts < 2 * chunks
        results.append((matrix, terms))
        got = [
            {terms[j]: float(v) for j, v in zip(row.indices, row.data, strict=True)}
            for row in matrix
        ]
        assert got == _reference(texts, weights, 2), room
    for matrix, terms in results[1:]:
        assert terms == results[0][1]
        for name in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(matrix, name), getattr(results[0][0], name)), name


def test_work_beside_runs_in_a_thread_of_its_own_and_raises_where_it_is_read():
    """``_beside`` (the vocabulary's front coding beside the matrix's transpose): the result
    comes from another thread, and what it raised is raised by ``result()``, not lost."""
    import threading

    import pytest

    assert index_module._beside(lambda: threading.current_thread().name).result() == "beside"
    assert index_module._beside(divmod, 7, 2).result() == (3, 1)
    with pytest.raises(ZeroDivisionError):
        index_module._beside(divmod, 1, 0).result()


def test_a_failed_front_coding_fails_the_segment_write(tmp_path, monkeypatch):
    """The front coding runs beside the matrix's transpose: when it fails, the segment is
    not written (no folder, not even a temporary one) and the error reaches the caller."""
    import pytest

    vocabulary: dict[str, int] = {}
    fields = [_Field(1.0)]
    for text in ("a b c", "b c d", "a b"):
        fields[0].add(text, vocabulary)
    counts, terms = count_terms(fields, 3, list(vocabulary), 1)
    counted = index_module._Counted(
        np.arange(1, 4, dtype=np.int64), np.zeros(3, np.int32), ["", "", ""], counts, terms
    )

    def broken(*args):
        raise RuntimeError("front coding failed")

    monkeypatch.setattr(index_module, "_front_code", broken)
    with pytest.raises(RuntimeError, match="front coding failed"):
        index_module._write_segment(tmp_path, counted)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("high", [1_000, 1 << 61])  # keys packed with their counts, or too large
def test_the_chunks_keys_merge_into_their_summed_counts(high):
    rng = np.random.default_rng(5)
    runs, expected = [], Counter()
    for _ in range(7):
        keys = np.unique(rng.integers(0, high, 300, dtype=np.int64))
        counts = rng.integers(1, 5_000, len(keys), dtype=np.int64)
        runs.append((keys, counts))
        expected.update(dict(zip(keys.tolist(), counts.tolist(), strict=True)))
    keys, counts = index_module._merged_counts(runs)
    assert keys.tolist() == sorted(expected)
    assert counts.tolist() == [expected[k] for k in sorted(expected)]
    empty = np.zeros(0, np.int64)
    assert [a.tolist() for a in index_module._merged_counts([(empty, empty)] * 2)] == [[], []]
    assert [a.tolist() for a in index_module._merged_counts([])] == [[], []]


def test_the_vocabulary_is_built_from_the_words_bytes_in_the_order_given():
    """``_sorted_vocabulary`` (the build's vocabulary, no string per term) is the plain
    vocabulary of the terms themselves, in the order given, multi-byte words included; and
    ``_terms_of`` reads the terms back, a newline inside one included."""
    unigrams = ["ab", "é", "a", "ß1", "z"]
    n = len(unigrams)
    keys = np.asarray([1 * n + 0, 0 * n + 4, 3 * n + 3, 2 * n + 1], dtype=np.int64)
    terms = unigrams + [f"{unigrams[k // n]} {unigrams[k % n]}" for k in keys.tolist()]
    for order in (index_module._sorted_terms(unigrams, keys), np.arange(len(terms))[::-1]):
        blob, offsets = index_module._sorted_vocabulary(unigrams, keys, order)
        expected = index_module._plain_vocabulary([terms[i] for i in order])
        assert blob == expected[0]
        assert offsets.tolist() == expected[1].tolist()
        assert index_module._terms_of(blob, offsets) == [terms[i] for i in order]
    words_only = index_module._sorted_vocabulary(unigrams, keys[:0], np.asarray([2, 0, 4, 1, 3]))
    assert words_only[0] == "a\nab\nz\né\nß1\n".encode()
    assert index_module._terms_of(*index_module._plain_vocabulary(["a\nb", "c"])) == ["a\nb", "c"]
    assert index_module._terms_of(*index_module._plain_vocabulary([])) == []


@pytest.mark.parametrize("step", [1 << 22, 7])
def test_two_blocks_sizes_are_each_lists_papers_before_the_boundary(step):
    """At two blocks (87k papers) each list's size in block 0 is its papers before the
    boundary, empty lists included: ``_block_sizes`` from the lists, and
    ``_paper_block_sizes`` (what a build uses) from the matrix by paper, ``step`` postings
    at a time."""
    rng = np.random.default_rng(17)
    block = 50
    lists = [np.sort(rng.choice(2 * block, rng.integers(0, 40), replace=False)) for _ in range(60)]
    lists[3:6] = [np.zeros(0, np.int64), np.arange(3), np.asarray([block - 1, block])]
    indices = np.concatenate(lists).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum([len(docs) for docs in lists])])
    sizes = index_module._block_sizes(indices, indptr, 2, block)
    assert sizes.dtype == np.uint32
    assert sizes.tolist() == [int((docs < block).sum()) for docs in lists]
    by_list = sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(lists), 2 * block))
    first = index_module._paper_block_sizes(by_list.T.tocsr(), block, 1, step)[0]
    assert first.dtype == np.uint32
    assert first.tolist() == sizes.tolist()
    layout = index_module._block_layout(indices, indptr, 2, block, by_list.T.tocsr())
    assert layout["xt_blocks"].tolist() == sizes.tolist()


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_the_chunks_keys_cut_into_ranges_merge_as_all_of_them(n):
    """``_key_ranges`` (pass 1's merge, a range of keys a thread): each range's keys below
    the next's, so the ranges merged one after another are the merge of all the chunks."""
    rng = np.random.default_rng(23)
    runs = []
    for size in (0, 500, 3000, 1, 800):
        keys = np.unique(rng.integers(0, 5000, size))
        runs.append((keys, rng.integers(1, 9, len(keys))))
    whole = index_module._merged_counts(runs)
    ranges = index_module._key_ranges(runs, n)
    assert len(ranges) == n
    merged = [index_module._merged_counts(part) for part in ranges]
    assert all(len(keys) for keys, _ in merged)
    for (low, _), (high, _) in itertools.pairwise(merged):
        assert low[-1] < high[0]
    for k in range(2):
        assert np.concatenate([part[k] for part in merged]).tolist() == whole[k].tolist()
    assert index_module._key_ranges([], n) == [[]]


@pytest.mark.parametrize("blocks", [1, 2, 3, 14, 65])
def test_block_layout_counted_by_paper_is_the_lists_one(monkeypatch, blocks):
    """A build counts the lists' block sizes from the matrix by paper (beside its transpose
    into the lists): the same arrays as counted from the lists, dense or sparse, with empty
    lists, sizes over a byte, a short last block, several runs of lists; and each block's
    sizes counted ``step`` postings at a time are the lists' own."""
    rng = np.random.default_rng(blocks)
    block = 300
    n_docs = max(blocks * block - 7, 1)
    lists = [np.unique(rng.integers(0, n_docs, rng.integers(0, 40))) for _ in range(70)]
    lists[5:8] = [np.zeros(0, np.int64), np.arange(n_docs), np.asarray([n_docs - 1])]
    indices = np.concatenate(lists).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum([len(docs) for docs in lists])])
    by_paper = sp.csr_matrix(
        (np.ones(len(indices), np.float32), indices, indptr), shape=(len(lists), n_docs)
    ).T.tocsr()
    monkeypatch.setattr(index_module, "_LAYOUT_TERMS", 16)
    want = index_module._block_layout(indices, indptr, blocks, block)
    lists_too = None if index_module._by_paper(blocks) else (indices, indptr)
    got = index_module._block_layout(*(lists_too or (None, None)), blocks, block, by_paper)
    assert want.keys() == got.keys()
    for key, values in want.items():
        assert values.dtype == got[key].dtype and np.array_equal(values, got[key]), key
    assert len(want["xt_wide_blocks"]) == blocks - 1  # the full list's, but its last
    dense = np.zeros((len(lists), blocks), dtype=np.int64)
    for term, docs in enumerate(lists):
        dense[term] = np.bincount(docs // block, minlength=blocks)
    for step in (1 << 22, 7):
        sizes = index_module._paper_block_sizes(by_paper, block, blocks, step)
        assert sizes.dtype == np.uint32 and np.array_equal(sizes.T, dense), step


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_a_postings_paper_within_its_block(dtype):
    """``_within_blocks``: the cast a 2**16-paper block takes is the remainder too."""
    docs = np.asarray([0, 1, 65535, 65536, 65537, 200_000, (1 << 31) - 1], dtype=dtype)
    for block in (1 << 16, 300, 1 << 12):
        got = index_module._within_blocks(docs, block)
        assert got.dtype == np.uint16 and got.tolist() == (docs % block).tolist(), block
