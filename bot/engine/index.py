"""The TF-IDF index: immutable segments beside the database, one published generation at a time.

An index is a folder of *segments* and a small ``CURRENT`` file naming the generation that
serves: which segments, which of their documents are deleted, and the corpus version it
covers. A build or a merge writes new segment folders beside the serving ones and then
replaces ``CURRENT`` in one ``os.replace``, so a reader, in any process, sees either the
old generation or the new one, never half of one; a builder killed mid-way leaves the old
generation serving, and its temporary folder is removed by the next writer. Old segments
are deleted once no generation names them: a process still reading them keeps its mmaps
(POSIX keeps an unlinked file's pages) and notices the change on its next lookup.

Each segment holds, for its documents (papers, in ``rowid`` order):

* ``xt`` (terms x documents): an inverted index, so a query only touches the posting lists
  of its own terms; each document number's low 16 bits (uint16), every list cut into blocks
  of ``BLOCK`` documents whose posting counts ``xt_blocks`` records (at three blocks or
  more only a list's non-empty blocks: ``_sparse_block_sizes``; a lookup gathers its
  lists in one vectorised copy and adds each block's start: no running sum; MaxScore
  bisects within a block); each posting's count in four bits, the rare larger one beside
  (``_pack_counts``);
* no forward index (documents x terms: it took as many bytes as the inverted lists): a
  paper's own vector, for "similar papers", the taste model and digests' "why", is read
  from its text in the corpus (tokenised as the build does, each term's count looked up in
  its list, checked against ``doc_sizes``, each paper's number of terms), or, for many
  papers at once, by one pass over the lists (``Index._doc_terms``); deleted papers'
  document frequencies are found so by the generation's writer and stored with it;
* its own sorted vocabulary, front-coded in blocks of ``VOCAB_BLOCK`` terms (each term as
  the bytes it shares with the previous one and the rest), searched by bisection over the
  blocks' first terms; a delta also stores where each of its terms is in the main segment's
  vocabulary (``main_terms``, found by its writer: ``Vocabulary.ids_of``), so readers never
  decode the main vocabulary.

Segments store each term's *weighted count* in a paper (a whole number, in the narrowest
unsigned type: uint8 at 87k, four bits in ``xt``), not a final weight: its sublinear term frequency
``1 + ln(count)`` is computed when a lookup reads them, the idf and the pivoted length
normalization from document frequencies summed over all segments (minus deleted
documents), so a paper scores the same whichever segment holds it. The norms (a pass over
every posting) are computed once, by the writer,
and stored with the generation (``gen-NNNNNN.norms.npy``, named in CURRENT): a reader that
notices a new generation only maps it, so no lookup stalls on the statistics. Small batches of papers go into small
*delta* segments (the parse-and-count cost of the batch only); a paper that changed is
added again in the delta and deleted (a tombstone) in the older segment. Deltas are merged
when they grow (``MAX_DELTAS``, ``MERGE_SHARE``).

All arrays are plain ``.npy`` files opened with ``mmap_mode="r"``: opening costs little
whatever the corpus size, and processes share the pages. Every segment's ``meta.json`` is a
manifest of its files' sizes and CRC-32s, checked when a process first opens the segment
(a file shorter than it should be would kill the process with SIGBUS when a lookup touched
the missing pages) and, by size, inode and mtime, before every lookup; a segment that fails
is rebuilt instead of being served.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import fcntl
import importlib
import itertools
import json
import logging
import marshal
import mmap
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
import zlib
from array import array
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlite_utils import Database

from .corpus import Corpus, StorageError, connect
from .paper import Paper, paper_values
from .text import analyze, joined_tokens, norm_token, words
from .watch import FileWatch


class _Lazy:
    """A module imported on first use: scipy.sparse (0.15-0.2 s of a cold start, most of it
    scipy's array-API layer) is needed by builds and the exhaustive product, not by a
    one-off lookup that MaxScore answers."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attribute: str):
        module = importlib.import_module(self._name)
        self.__dict__.update(vars(module))  # (later lookups: no __getattr__ call at all)
        return getattr(module, attribute)


sp = _Lazy("scipy.sparse")

#: A title word counts this many times as much as the same word in the abstract.
TITLE_WEIGHT = 2
#: Author-given keywords summarise the paper: weighted like the title.
KEYWORD_WEIGHT = 3
# Bump whenever analysis, weighting or the files change: an index built the old way is then
# rebuilt once. 3: meta.json lists every file's size and CRC-32. 4: segments and CURRENT.
# 5: each generation stores its papers' pivoted norms. 6: and each term's best impact.
# 7: a paper's own vector (``x``) is stored as integer counts (uint8 mostly), not floats.
# 9: the inverted lists too (``xt_data``), and ``x``'s term ids as uint16 gaps (8 was a
# compressed format tried on a branch and not taken: skipped, so its indexes are rebuilt).
# 10: the inverted lists' paper numbers as uint16 low halves, ``xt_indptr`` marking where
# each list's 65,536-paper blocks start; term hashes computed when a delta needs them.
# 11: the vocabulary front-coded in blocks of ``VOCAB_BLOCK`` terms, ``x`` as varint gaps
# and two-bit counts (``_encode_x``), each term's best impact in float16 rounded up.
# 12: the inverted lists' counts in four bits (``_pack_counts``), ``xt_indptr`` each list's
# start only and ``xt_blocks`` the postings in each of its blocks but the last (uint16),
# years and venue codes in their narrowest integer types.
# 13 (size): at three blocks or more, only each list's non-empty blocks are recorded
# (``_sparse_block_sizes``).
# 14: no forward index (``x``, 437 bytes a paper at 872k): a paper's vector is read from its
# text, checked against the inverted lists and ``doc_sizes``, or from the lists alone; each
# generation with deleted papers stores their terms' document frequencies (``deleted_df``).
FORMAT_VERSION = 14
#: Papers per block of an inverted list: a posting stores its paper number's low 16 bits,
#: the block (the high bits) is known from where the posting sits (``xt_indptr``).
BLOCK = 1 << 16
#: Terms per block of the front-coded vocabulary: each block's first term is stored whole,
#: the others as (bytes shared with the previous term, the rest). A lookup bisects the
#: blocks' first terms, then reads one block.
VOCAB_BLOCK = 16
#: Pivoted length normalization (Singhal et al., 1996): a document's vector is divided by
#: ``(1 - slope) * mean_norm + slope * norm`` instead of its own L2 norm, so long abstracts are
#: penalised a little less than by plain cosine. 0.6 measured best on the dev queries
#: (nDCG@10 0.333 against 0.323 for plain cosine; bench/README.md).
PIVOT_SLOPE = 0.6
#: More delta segments than this are merged into one (re-counted from the database).
MAX_DELTAS = 6
#: When the deltas (or the deleted documents) reach this share of the main segment, the whole
#: index is rebuilt into one main segment (in the writer, beside the serving generation).
MERGE_SHARE = 0.15
#: The file naming the serving generation.
CURRENT = "CURRENT"
_ARRAYS = (
    "xt_data",
    "xt_escaped",
    "xt_indices",
    "xt_indptr",
    "xt_blocks",
    "xt_wide_blocks",
    "xt_block_masks",
    "xt_block_starts",
    "doc_sizes",
    "rowids",
    "years",
    "venue_codes",
    "vocab_shared",
    "vocab_heads",
)
_FILES = (*(f"{name}.npy" for name in _ARRAYS), "vocab.bin")
#: Files a reader loads into memory instead of mapping them (a few kilobytes).
_READ_WHOLE = ("xt_escaped.npy", "xt_wide_blocks.npy")
_SEGMENT = re.compile(r"^seg-(\d{6})$")

log = logging.getLogger(__name__)


class IndexBuildError(StorageError):
    """The index could not be written (disk full, folder not writable); one sentence."""


class IndexDamaged(ValueError):
    """An index on disk that does not match its manifest; the message says how."""


#: Bytes read at a time when checksumming a file. Small on purpose: a 16 MB buffer, freed,
#: raises glibc's mmap threshold, so later arrays came from the heap and stayed in the
#: process (16 MB more private memory in every reader, measured; the speed is the same).
CHECKSUM_CHUNK = 1 << 20


def file_checksum(path: Path, chunk: int = CHECKSUM_CHUNK) -> int:
    """CRC-32 of a file: 3 GB/s here, so ~0.1 s for the 87k-paper index (see bench/hardening.py).

    Read without readahead (``POSIX_FADV_RANDOM``, this descriptor only): on a cold page
    cache, readahead brings an index file back in folios of up to 2 MB, and a lookup that
    then touches one byte of the file's mmap maps the whole folio. A serving process of the
    872k index peaked at 624 MB after a cold open against 412 MB warm; with this, 412 MB."""
    crc = 0
    with open(path, "rb", buffering=0) as handle:
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        buffer = bytearray(chunk)
        view = memoryview(buffer)
        while True:
            n = handle.readinto(buffer)
            if not n:
                return crc
            crc = zlib.crc32(view[:n], crc)


def index_dir_for(db_path: str | Path) -> Path:
    return Path(f"{db_path}.index")


@dataclass
class BuildStats:
    documents: int
    terms: int
    seconds: float


#: A bigram must occur in this many papers to enter the vocabulary: hapax bigrams are most of
#: the vocabulary, carry almost no ranking signal, and would double the index and its build time.
MIN_BIGRAM_DF = 3
#: Documents counted at a time while building: bounds the temporary arrays at any corpus size
#: (10,000: the build's peak memory below 20,000's, measured at 87k, for the same CPU).
CHUNK_DOCS = 10_000
#: A full build tokenises its papers in this many processes (tokenising, in Python, is about
#: two thirds of a build); the counts and files are the same, byte for byte, as with one.
BUILD_PROCESSES = min(2, os.cpu_count() or 1)
#: Fewer papers than this are tokenised in the building process alone (a new process costs
#: about half a second to start: deltas and small corpora would not gain).
PARALLEL_MIN_DOCS = 20_000


#: ``_Field.add_many``'s ids of a raw token that is not indexed, of the separator, and of a
#: token not seen before.
_DROPPED = -1
_SEPARATED = -2
_NEW = -3
#: Raw tokens whose unigram id ``_Field.add_many`` remembers (the rest are looked up again).
_KNOWN_TOKENS = 2_000_000
#: Papers tokenised at a time (``_Field.add_many``): about a megabyte of text, and its
#: tokens (500 or 2,000 cost the same CPU at 87k; fewer keeps a delta's memory down).
TOKENISE_BATCH = 1_000


@dataclass
class _Field:
    """One text field of every document, as a flat array of unigram ids plus offsets."""

    weight: float
    ids: array = field(default_factory=lambda: array("i"))
    offsets: array = field(default_factory=lambda: array("q", [0]))

    def add(self, text: str, vocabulary: dict[str, int]) -> None:
        terms = words(text)
        ids = list(map(vocabulary.get, terms))  # known words, in C; new ones numbered below
        if None in ids:
            for k, term_id in enumerate(ids):
                if term_id is None:
                    term_id = vocabulary.get(terms[k])
                    if term_id is None:
                        term_id = vocabulary[terms[k]] = len(vocabulary)
                    ids[k] = term_id
        self.ids.extend(ids)
        self.offsets.append(len(self.ids))

    def add_many(self, texts: list[str], vocabulary: dict[str, int], known: _KnownTokens) -> None:
        """``add`` of every text, from one ``joined_tokens`` pass over them all: its tokens
        found and looked up in ``known`` (each raw token's unigram id, ``_DROPPED`` when not
        indexed) by numpy, a Python object made only for a token not known yet (a bytes
        object and a dict lookup a token were most of a build's tokenising); the texts' ends
        found with numpy too."""
        data = joined_tokens(texts) if texts else None
        if data is None:
            for text in texts:
                self.add(text, vocabulary)
            return
        starts, ends, keys = _token_keys(data)
        values = known.ids(keys)
        long = ends - starts > _KEY_BYTES
        values[long] = _NEW  # (its key is its first bytes only: never in ``known``)
        unseen = np.flatnonzero(values == _NEW)
        if len(unseen):
            places = unseen.tolist()
            spans = zip(starts[unseen].tolist(), ends[unseen].tolist(), strict=True)
            new = [data[start:end] for start, end in spans]  # made for these tokens only
            fresh = {}
            for token in dict.fromkeys(new):  # numbered in order of first use
                norm = norm_token(token.decode())
                fresh[token] = vocabulary.setdefault(norm, len(vocabulary)) if norm else _DROPPED
            values[unseen] = list(map(fresh.__getitem__, new))
            if known.size < _KNOWN_TOKENS:  # bounded like text's own cache of token forms
                where = dict(zip(new, places, strict=True))  # a place of each, in fresh's order
                rows = np.fromiter(where.values(), dtype=np.intp, count=len(where))
                ids = np.fromiter(fresh.values(), dtype=np.int32, count=len(fresh))
                short = ~long[rows]
                known.add(keys[:, rows[short]], ids[short])
        kept = values >= 0
        ends = np.cumsum(kept)[np.flatnonzero(values == _SEPARATED)]
        base = len(self.ids)
        self.ids.frombytes(values[kept].tobytes())
        self.offsets.frombytes((ends + base).astype(np.int64).tobytes())
        self.offsets.append(len(self.ids))


#: ``_KnownTokens`` holds raw tokens of up to this many bytes (all but 3 in 10,000 at 87k
#: papers); a longer one is looked up again each time it comes.
_KEY_BYTES = 16
#: ``_LOW_BYTES[k]``: the low ``k`` bytes of a 64-bit integer (``k`` from 0 to 8).
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)


def _token_keys(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each token of ``joined_tokens``' bytes starts and ends, and its key: its first
    ``_KEY_BYTES`` bytes as two little-endian 64-bit integers (zero past its end; a 2 x n
    array). Exact: no token holds a zero byte but the separator (one byte, key (0, 0))."""
    word = np.zeros(len(data) + 2, dtype=bool)
    np.not_equal(np.frombuffer(data, dtype=np.uint8), ord(" "), out=word[1:-1])
    edges = np.flatnonzero(word[1:] != word[:-1])
    starts, ends = edges[0::2], edges[1::2]
    sizes = ends - starts
    padded = data + bytes(_KEY_BYTES)
    # The 8 bytes from every offset (an unaligned view): a token's 16 in two gathers.
    eights = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    keys = np.empty((2, len(starts)), dtype=np.uint64)
    np.bitwise_and(eights[starts], _LOW_BYTES.take(np.minimum(sizes, 8)), out=keys[0])
    np.bitwise_and(eights[starts + 8], _LOW_BYTES.take(np.clip(sizes - 8, 0, 8)), out=keys[1])
    return starts, ends, keys


def unique(values: np.ndarray, kind: str | None = None) -> np.ndarray:
    """The sorted distinct values of an integer array: ``np.unique`` by a sort (``kind``:
    numpy's sort algorithm).

    numpy 2.4's ``np.unique`` (no ``return_*``) takes a hash-table path that is 10-60x slower
    on int64 here (8.8 µs against 394 µs for 1,000 document numbers; 0.12 s against 6.7 s
    for the 3.8 M bigram keys of a build chunk), in lookups and builds alike.
    """
    values = np.sort(np.asarray(values).ravel(), kind=kind)
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _unigram_pieces(fields: list[_Field], start: int, end: int):
    """For documents [start, end): each unigram's document (local to the chunk), id and
    field weight."""
    docs, ids, weights = [], [], []
    for text_field in fields:
        offsets = np.frombuffer(text_field.offsets, dtype=np.int64)[start : end + 1]
        docs.append(np.repeat(np.arange(end - start, dtype=np.int32), np.diff(offsets)))
        ids.append(np.frombuffer(text_field.ids, dtype=np.int32)[offsets[0] : offsets[-1]])
        weights.append(np.full(len(ids[-1]), text_field.weight, dtype=np.float32))
    if not fields:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32)
    return np.concatenate(docs), np.concatenate(ids), np.concatenate(weights)


def _bigram_codes(fields: list[_Field], start: int, end: int, n_uni: int) -> np.ndarray:
    """For documents [start, end): each bigram's code ``(key * (end - start) + document) *
    len(fields) + field`` (int64, unsorted), its key ``first * n_uni + second``, its document
    local to the chunk, its field the index in ``fields``; bigrams never span two fields or
    two documents. Built field by field in place: no array of documents, keys or fields
    for the whole chunk."""
    n_docs, n_fields = end - start, len(fields)
    codes = [np.zeros(0, np.int64)]
    for number, text_field in enumerate(fields):
        offsets = np.frombuffer(text_field.offsets, dtype=np.int64)[start : end + 1]
        ids = np.frombuffer(text_field.ids, dtype=np.int32)[offsets[0] : offsets[-1]]
        doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(offsets))
        same_doc = doc_of[1:] == doc_of[:-1]
        code = ids[:-1][same_doc].astype(np.int64)
        code *= n_uni
        code += ids[1:][same_doc]
        code *= n_docs
        code += doc_of[1:][same_doc]
        code *= n_fields
        code += number
        codes.append(code)
    return np.concatenate(codes)


def _starts(values: np.ndarray) -> np.ndarray:
    """Where each run of equal values starts, in a sorted array."""
    first = np.ones(len(values), dtype=bool)
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return np.flatnonzero(first)


def _chunk_docs(n_uni: int, n_fields: int) -> int:
    """Documents counted at a time: ``CHUNK_DOCS`` over the threads counting at once (the
    same memory in flight), fewer when a (bigram, document, field) code would not fit in
    63 bits (a vocabulary of millions of words)."""
    step = CHUNK_DOCS // max(COUNT_THREADS, 1)
    return max(1, min(step, (1 << 62) // ((n_uni * n_uni + 1) * max(n_fields, 1))))


#: ``count_terms`` keeps the first pass's (bigram, paper) pairs for the second up to this
#: many bytes (12 a pair: all of them at 87k papers, about 100 MB); beyond, a chunk's pairs
#: are found again (sorted a second time) instead, so a larger corpus's build peak grows by
#: no more than this.
KEPT_PAIRS_BYTES = 384 << 20
#: Threads counting a full build's chunks at once: numpy's sorts and searches and scipy's
#: sparse conversions release the GIL, so two chunks are counted on two cores.
COUNT_THREADS = BUILD_PROCESSES


@contextmanager
def _chunk_pool(n_chunks: int):
    """``map`` over the chunks: in ``COUNT_THREADS`` threads when there are several chunks,
    else in this thread. Results come back in chunk order either way."""
    if COUNT_THREADS < 2 or n_chunks < 2:
        yield _SERIAL
        return
    with ThreadPoolExecutor(COUNT_THREADS, thread_name_prefix="count") as pool:
        yield pool


class _SerialPool:
    """``ThreadPoolExecutor.map``'s interface, run in the calling thread."""

    @staticmethod
    def map(function, items):
        return map(function, items)


_SERIAL = _SerialPool()


def count_terms(
    fields: list[_Field], n_docs: int, unigrams: list[str], min_bigram_df: int = MIN_BIGRAM_DF
):
    """Weighted unigram and bigram counts (documents x terms) and the sorted vocabulary
    (``_term_counts``, its terms as strings)."""
    counts, plain = _term_counts(fields, n_docs, unigrams, min_bigram_df)
    return counts, _terms_of(*plain)


def _terms_of(blob: bytes, offsets: np.ndarray) -> list[str]:
    """The terms of a plain vocabulary (each followed by a newline)."""
    n = len(offsets) - 1
    terms = blob.decode().split("\n") if n else [""]
    if len(terms) == n + 1:  # no term holds a newline: split in C
        return terms[:n]
    bounds = np.asarray(offsets).tolist()
    return [blob[a : b - 1].decode() for a, b in itertools.pairwise(bounds)]


def _term_counts(
    fields: list[_Field], n_docs: int, unigrams: list[str], min_bigram_df: int
) -> tuple[sp.csr_matrix, tuple[bytes, np.ndarray]]:
    """Weighted unigram and bigram counts (documents x terms, in the narrowest unsigned type
    that holds them: ``_counts_type``) and the sorted vocabulary as a plain blob and offsets
    (``_plain_vocabulary``; built from the words' bytes by ``_sorted_vocabulary``, no string
    per term).

    Equivalent to scikit-learn's ``CountVectorizer(analyzer=analyze)`` applied per field and
    summed with the field weights, plus a ``min_df`` for bigrams only; done with numpy on
    integer ids, a chunk of documents at a time, because the vectorizer's per-token Python
    loop and its dict of every bigram took 66 s and 2 GB for the 87k-paper corpus. Bigrams
    are handled as one sorted array of codes per chunk, bigram-major (``(key * docs + doc) *
    fields + field``), sorted once: the first pass sums each (bigram, paper) pair's weighted
    count and each bigram's papers (its document frequency), and keeps the pairs (12 bytes
    each: about 100 MB at 87k papers) until the second pass looks them up among the kept
    bigrams, in order, and frees them chunk by chunk (up to ``KEPT_PAIRS_BYTES``: the pairs
    of the chunks beyond are found again).
    """
    n_uni = len(unigrams)
    n_fields = len(fields)
    ranks = _beside(_word_ranks, unigrams)  # (a Python sort) while pass 1 is in numpy
    step = _chunk_docs(n_uni, n_fields)
    chunks = [(a, min(a + step, n_docs)) for a in range(0, n_docs, step)]
    weights = np.asarray([f.weight for f in fields], dtype=np.float32)
    pairs_of: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(chunks)
    room = [KEPT_PAIRS_BYTES]
    room_lock = threading.Lock()

    def pairs_in(number: int) -> tuple[np.ndarray, np.ndarray]:
        """The chunk's (bigram, paper) pairs, sorted, and their weighted counts."""
        a, b = chunks[number]
        # (bigram, paper, field) codes sorted: each distinct one's occurrences times its
        # field's weight, summed over the fields of a (bigram, paper) pair.
        codes = _bigram_codes(fields, a, b, n_uni)
        codes.sort()
        firsts = _starts(codes)
        counts = np.diff(firsts, append=len(codes)).astype(np.float32)
        codes = codes[firsts]
        pairs = codes // n_fields
        counts *= weights[codes - pairs * n_fields]
        del codes
        firsts = _starts(pairs)
        pair_counts = np.add.reduceat(counts, firsts) if len(firsts) else counts
        return pairs[firsts], pair_counts

    def pass_one(number: int) -> tuple[np.ndarray, np.ndarray]:
        a, b = chunks[number]
        pairs, pair_counts = pairs_in(number)
        with room_lock:  # kept for pass 2 while they fit
            if pairs.nbytes + pair_counts.nbytes <= room[0]:
                room[0] -= pairs.nbytes + pair_counts.nbytes
                pairs_of[number] = (pairs, pair_counts)
        pair_keys = pairs // (b - a)  # each (bigram, paper) once, by bigram
        firsts = _starts(pair_keys)
        return pair_keys[firsts], np.diff(firsts, append=len(pair_keys))

    with _chunk_pool(len(chunks)) as pool:
        # Pass 1: each bigram's document frequency, merged over the chunks (in chunk order),
        # a range of keys a thread.
        ranges = _key_ranges(list(pool.map(pass_one, range(len(chunks)))), COUNT_THREADS)

        def kept_in(runs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
            keys, df = _merged_counts(runs)
            return keys[df >= min_bigram_df]

        kept = np.concatenate([np.zeros(0, np.int64), *pool.map(kept_in, ranges)])
        del ranges
        # Column ids in sorted-term order, so the vocabulary can be searched by bisection;
        # known before pass 2, so each chunk's columns come out sorted (no remapping).
        order = _sorted_terms(unigrams, kept, ranks.result())
        width = n_uni + len(kept)
        rank = np.empty(width, dtype=np.int32)
        rank[order] = np.arange(width, dtype=np.int32)

        def pass_two(number: int) -> sp.csr_matrix:
            a, b = chunks[number]
            u_docs, u_ids, u_vals = _unigram_pieces(fields, a, b)
            kept_pairs, pairs_of[number] = pairs_of[number], None
            pairs, pair_counts = kept_pairs if kept_pairs is not None else pairs_in(number)
            pair_keys = pairs // (b - a)
            # Each distinct bigram of the chunk searched once (at 872k papers, 55 M
            # searches instead of 87 M), in sorted order: each search starts where the
            # previous one ended (numpy's bisection keeps its bounds), several times faster
            # than random ones.
            firsts = _starts(pair_keys)
            runs = np.diff(firsts, append=len(pair_keys))
            pos = np.searchsorted(kept, pair_keys[firsts])
            known = pos < len(kept)
            known[known] = kept[pos[known]] == pair_keys[firsts[known]]
            pos, known = np.repeat(pos, runs), np.repeat(known, runs)
            del firsts, runs
            rows = np.concatenate(
                [u_docs, (pairs[known] - pair_keys[known] * (b - a)).astype(np.int32)]
            )
            cols = rank[np.concatenate([u_ids, (n_uni + pos[known]).astype(np.int32)])]
            vals = np.concatenate([u_vals, pair_counts[known]])
            part = sp.csr_matrix((vals, (rows, cols)), shape=(b - a, width), dtype=np.float32)
            part.sum_duplicates()
            return part

        # Pass 2: the counts, chunk by chunk (unigram columns, then the kept bigrams', by
        # rank), stacked in chunk order; the vocabulary meanwhile (numpy, mostly).
        parts = pool.map(pass_two, range(len(chunks)))
        plain = _sorted_vocabulary(unigrams, kept, order)
        parts = list(parts)
    if parts:
        # Stacked in the type the segment stores them in (``_narrowest_counts``), each part
        # cast in turn: at 872k papers a float32 stack is 1.3 GB of new pages (2.7 s), this
        # one 0.8 GB (0.7 s with the casts).
        kind = _counts_type(max((float(part.data.max()) for part in parts if part.nnz), default=0))
        for k, part in enumerate(parts):
            parts[k] = sp.csr_matrix(
                (part.data.astype(kind), part.indices, part.indptr), part.shape
            )
        counts = sp.vstack(parts, format="csr", dtype=kind)
    else:
        counts = sp.csr_matrix((n_docs, width), dtype=np.float32)
    del parts
    counts.sort_indices()  # sorted already, chunk by chunk; this only checks the flag
    return counts, plain


def _merged_counts(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct keys with summed counts, from one (keys, counts) pair per chunk.

    Each key and its count packed in one integer (key high, count low) and sorted by
    numpy's default sort (its AVX2 quicksort; equal integers need no stable sort): no
    gathers after it as an ``argsort`` needs (at 872k papers, 56 M keys: 3.7-4.9 s by
    ``argsort``; a range of 28 M: 0.9 s by a stable sort merging the chunks' sorted runs,
    0.5 s by the default one). A key's pairs come out together (by count: they are
    summed, in any order). The ``argsort`` when a key and a count do not fit in 63 bits."""
    if not runs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = np.concatenate([k for k, _ in runs])
    counts = np.concatenate([c for _, c in runs])
    if not len(keys):
        return keys, counts
    shift = int(counts.max()).bit_length()
    if int(keys.max()) < 1 << (63 - shift):  # packed, sorted and unpacked in place
        keys <<= shift
        keys |= counts
        keys.sort()
        counts = keys & ((1 << shift) - 1)
        keys >>= shift
    else:
        order = np.argsort(keys)
        keys, counts = keys[order], counts[order]
        del order
    firsts = _starts(keys)
    return keys[firsts], np.add.reduceat(counts, firsts)


def _word_ranks(unigrams: list[str]) -> np.ndarray:
    """Each word's place in ``sorted(unigrams)`` (int64)."""
    n_uni = len(unigrams)
    rank = np.empty(n_uni, dtype=np.int64)
    rank[np.asarray(sorted(range(n_uni), key=unigrams.__getitem__), dtype=np.int64)] = np.arange(
        n_uni, dtype=np.int64
    )
    return rank


#: ``_key_ranges`` cuts the keys at quantiles of every this-many-th key of each chunk.
_KEY_SAMPLE = 64


def _key_ranges(runs: list[tuple[np.ndarray, np.ndarray]], n: int) -> list[list[tuple]]:
    """The chunks' (sorted keys, counts) cut into ``n`` ranges of keys of about equal size
    (every key of a range below the next range's), each a list of the chunks' pieces: merged
    a range a thread, one after the other they are the merge of all."""
    sample = np.concatenate([np.zeros(0, np.int64), *(keys[::_KEY_SAMPLE] for keys, _ in runs)])
    if n < 2 or not len(sample):
        return [runs]
    sample.sort()
    pivots = sample[[len(sample) * i // n for i in range(1, n)]]
    ranges: list[list[tuple]] = [[] for _ in range(n)]
    for keys, counts in runs:
        cuts = [0, *np.searchsorted(keys, pivots).tolist(), len(keys)]
        for i, (a, b) in enumerate(itertools.pairwise(cuts)):
            ranges[i].append((keys[a:b], counts[a:b]))
    return ranges


def _sorted_terms(
    unigrams: list[str], bigrams: np.ndarray, rank: np.ndarray | None = None
) -> np.ndarray:
    """The order of ``unigrams`` followed by the ``bigrams`` (keys ``first * n + second``,
    as terms ``"first second"``) that ``sorted`` would give the terms, from a sort of the
    unigrams only (``rank``: ``_word_ranks``, when known). A word never holds a space nor a
    character below it, so ``"a b"`` sorts exactly as the pair (a, b) does, and after
    ``"a"`` itself: the order is by the first word's rank, then the second's (a unigram
    first), one integer a term (``first * (n + 1) + second``, all distinct), sorted."""
    n_uni = len(unigrams)
    rank = _word_ranks(unigrams) if rank is None else rank
    first, second = np.divmod(np.asarray(bigrams, dtype=np.int64), max(n_uni, 1))
    keys = np.empty(n_uni + len(first), dtype=np.int64)
    np.multiply(rank, n_uni + 1, out=keys[:n_uni])
    np.multiply(rank[first], n_uni + 1, out=keys[n_uni:])
    keys[n_uni:] += rank[second]
    keys[n_uni:] += 1
    return np.argsort(keys)


def _sorted_vocabulary(
    unigrams: list[str], bigrams: np.ndarray, order: np.ndarray
) -> tuple[bytes, np.ndarray]:
    """The terms (``unigrams``, then the ``bigrams``: keys ``first * n + second``) in the
    ``order`` given, as a plain vocabulary (``_plain_vocabulary``), built with numpy from
    the words' bytes: each word with its newline; each bigram as its first word, a space,
    and its second word with its newline (no Python string per term)."""
    blob, offsets = _plain_vocabulary(unigrams)
    n_uni, n = len(unigrams), len(order)
    if not n:
        return blob, offsets
    order = np.asarray(order, dtype=np.int64)
    lengths = np.diff(offsets)  # with the newline
    word_at = np.flatnonzero(order < n_uni)
    bigram_at = np.flatnonzero(order >= n_uni)
    word = order[word_at]
    first, second = np.divmod(np.asarray(bigrams, dtype=np.int64)[order[bigram_at] - n_uni], n_uni)
    # The byte ranges copied, in term order: a word's is one; a bigram's three.
    pieces = np.ones(n, dtype=np.int64)
    pieces[bigram_at] = 3
    at = np.zeros(n, dtype=np.int64)
    np.cumsum(pieces[:-1], out=at[1:])
    starts = np.empty(int(at[-1] + pieces[-1]), dtype=np.int64)
    sizes = np.empty(len(starts), dtype=np.int64)
    starts[at[word_at]], sizes[at[word_at]] = offsets[word], lengths[word]
    b_at = at[bigram_at]
    starts[b_at], sizes[b_at] = offsets[first], lengths[first] - 1
    starts[b_at + 1], sizes[b_at + 1] = len(blob), 1  # the space, after the words' bytes
    starts[b_at + 2], sizes[b_at + 2] = offsets[second], lengths[second]
    data = np.frombuffer(blob + b" ", dtype=np.uint8)
    ends = np.cumsum(sizes)
    # Each byte's source: int32 while the words' bytes allow (half the temporary memory).
    position = np.int32 if len(data) < 1 << 31 and ends[-1] < 1 << 31 else np.int64
    source = np.arange(int(ends[-1]), dtype=position)
    source += np.repeat((starts - (ends - sizes)).astype(position), sizes)
    term_offsets = np.zeros(n + 1, dtype=np.int64)
    term_offsets[1:] = ends[at + pieces - 1]
    return data[source].tobytes(), term_offsets


def _beside(function, *arguments) -> Future:
    """``function(*arguments)`` in a thread of its own, started now: for work that can run
    while this thread is in numpy (which lets the GIL go). Its ``result()`` re-raises what
    it raised."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(function(*arguments))
        except BaseException as error:
            future.set_exception(error)

    threading.Thread(target=run, name="beside", daemon=True).start()
    return future


@dataclass
class _Counted:
    """A batch of papers counted: per-document data and weighted term counts."""

    rowids: np.ndarray
    years: np.ndarray
    venues: list[str]
    counts: sp.csr_matrix
    #: The vocabulary as strings; None when ``plain`` holds it (made on first use).
    terms: list[str] | None
    #: The vocabulary as a plain blob and offsets (``_plain_vocabulary``), when known.
    plain: tuple[bytes, np.ndarray] | None = None

    @property
    def vocabulary(self) -> list[str]:
        """The terms as strings: made from ``plain`` when first asked (a full build writes
        the blob and never needs them: 750k strings at 87k papers)."""
        if self.terms is None:
            self.terms = _terms_of(*self.plain)
        return self.terms


@dataclass
class _Tokens:
    """Papers tokenised: per-document data and each field's unigram ids (first seen, first
    numbered)."""

    rowids: array = field(default_factory=lambda: array("q"))
    years: array = field(default_factory=lambda: array("i"))
    venues: list[str] = field(default_factory=list)
    fields: list[_Field] = field(
        default_factory=lambda: [_Field(TITLE_WEIGHT), _Field(KEYWORD_WEIGHT), _Field(1.0)]
    )
    unigram_ids: dict[str, int] = field(default_factory=dict)


class _KnownTokens:
    """Raw tokens' unigram ids (``_Field.add_many``), keyed by their bytes (``_token_keys``):
    a hash table in numpy arrays (open addressing, linear probing, at most half full), so a
    batch's 60,000 tokens are looked up by a few vectorised gathers, not one dict lookup
    (and one bytes object) a token."""

    _EMPTY = np.uint64((1 << 64) - 1)  # a key no token has: UTF-8 holds no byte 0xFF
    _MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F))
    FIRST_SLOTS = 1 << 16  # doubled as it fills (87k papers: 175,000 tokens, 2 ** 19 slots)

    def __init__(self) -> None:
        self._empty(self.FIRST_SLOTS)
        self.add(np.zeros((2, 1), dtype=np.uint64), np.array([_SEPARATED], dtype=np.int32))

    def _empty(self, slots: int) -> None:
        """No key held, in ``slots`` slots (a power of two)."""
        self.size = 0
        self._keys = np.full((2, slots), self._EMPTY, dtype=np.uint64)
        self._ids = np.zeros(slots, dtype=np.int32)
        self._mask = slots - 1
        self._shift = np.uint64(64 - (slots.bit_length() - 1))

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        """Each key's first slot: its two halves mixed by multiplication, the top bits."""
        mixed = (keys[0] * self._MIX[0]) ^ (keys[1] * self._MIX[1])
        return (mixed >> self._shift).astype(np.intp)

    def ids(self, keys: np.ndarray) -> np.ndarray:
        """Each key's id, ``_NEW`` for a key not held. Gathers by ``take`` (fancy indexing
        is twice as slow); nearly every key is found in its first slot."""
        slots = self._slots(keys)
        out = self._ids.take(slots)
        held = self._keys[0].take(slots)
        rows = np.flatnonzero((held != keys[0]) | (self._keys[1].take(slots) != keys[1]))
        out[rows] = _NEW
        rows = rows[held.take(rows) != self._EMPTY]  # the slot holds another key: look further
        slots = slots.take(rows)
        while len(rows):
            slots = (slots + 1) & self._mask
            held = self._keys[0].take(slots)
            hit = (held == keys[0].take(rows)) & (self._keys[1].take(slots) == keys[1].take(rows))
            out[rows[hit]] = self._ids.take(slots[hit])
            on = ~hit & (held != self._EMPTY)
            rows, slots = rows[on], slots[on]
        return out

    def add(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Hold these keys (distinct, none held yet) with these ids."""
        if 2 * (self.size + keys.shape[1]) > len(self._ids):
            self._grow(2 * (self.size + keys.shape[1]))
        rows, slots = np.arange(keys.shape[1]), self._slots(keys)
        while len(rows):  # each round, one key takes each free slot; the rest look further
            free = np.flatnonzero(self._keys[0].take(slots) == self._EMPTY)
            taken, first = np.unique(slots[free], return_index=True)
            placed = rows[free[first]]
            self._keys[:, taken] = keys[:, placed]
            self._ids[taken] = ids[placed]
            left = np.ones(len(rows), dtype=bool)
            left[free[first]] = False
            rows, slots = rows[left], (slots[left] + 1) & self._mask
        self.size += keys.shape[1]

    def _grow(self, wanted: int) -> None:
        """Every key again in at least ``wanted`` slots."""
        held = np.flatnonzero(self._keys[0] != self._EMPTY)
        keys, ids = self._keys[:, held], self._ids[held]
        self._empty(1 << (wanted - 1).bit_length())
        self.add(keys, ids)


def _known_tokens() -> _KnownTokens:
    """A new cache of raw tokens' unigram ids for ``_Field.add_many``."""
    return _KnownTokens()


def _tokenise(
    documents: Iterable[tuple[int, dict]],
    unigram_ids: dict[str, int] | None = None,
    known: _KnownTokens | None = None,
) -> _Tokens:
    """The documents tokenised. Pieces tokenised one after another may share ``unigram_ids``
    (then numbered alike: ``_concatenated`` without renumbering) and ``known`` (the raw tokens'
    cache)."""
    documents = iter(documents)
    # One pass over the papers, ``TOKENISE_BATCH`` at a time, keeping only integer arrays:
    # the texts are never all in memory.
    batches = iter(lambda: list(itertools.islice(documents, TOKENISE_BATCH)), [])
    return _tokenise_columns(map(_document_columns, batches), unigram_ids, known)


def _document_columns(batch: list[tuple[int, dict]]) -> tuple:
    """A batch of ``(rowid, document)`` as ``_tokenise_columns`` takes it."""
    docs = [doc for _, doc in batch]
    return (
        [rowid for rowid, _ in batch],
        [doc["year"] for doc in docs],
        [doc["venue"] for doc in docs],
        [doc["title"] for doc in docs],
        [doc["keywords"] for doc in docs],
        [doc["abstract"] for doc in docs],
        [doc["authors"] for doc in docs],
    )


def _tokenise_columns(
    batches: Iterable[tuple],
    unigram_ids: dict[str, int] | None = None,
    known: _KnownTokens | None = None,
) -> _Tokens:
    """``_tokenise`` of batches of papers given as columns: their rowids, years, venues,
    titles, keywords, abstracts and authors (a reader makes them from its papers' fields,
    no dict a paper)."""
    tokens = _Tokens() if unigram_ids is None else _Tokens(unigram_ids=unigram_ids)
    title, keywords, body = tokens.fields
    unigram_ids = tokens.unigram_ids
    known = _known_tokens() if known is None else known
    venues: dict[str, str] = {}  # one string a venue (a few hundred), not one a paper
    for rowids, years, venue_names, titles, keyword_lists, abstracts, author_lists in batches:
        tokens.rowids.extend(rowids)
        tokens.years.extend([year or 0 for year in years])
        tokens.venues.extend([venues.setdefault(v or "", v or "") for v in venue_names])
        texts = list(map(field_texts, titles, keyword_lists, abstracts, author_lists))
        for k, piece in enumerate(tokens.fields):
            piece.add_many([text[k] for text in texts], unigram_ids, known)
    return tokens


def field_texts(title, keywords, abstract, authors) -> tuple[str, str, str]:
    """A paper's three indexed fields' texts: the title, the keywords, and the abstract with
    the authors (they join the text so that a name typed as plain words finds the paper)."""
    return title or "", " ; ".join(keywords), f"{abstract or ''}\n{' ; '.join(authors)}"


def _paper_terms(document: dict) -> set[str]:
    """A paper's distinct terms as the build counts them (each field's unigrams and
    bigrams: ``analyze``, as ``_term_counts`` is to scikit-learn's), for one paper
    without the build's batch machinery."""
    texts = field_texts(
        document["title"], document["keywords"], document["abstract"], document["authors"]
    )
    return {term for text in texts for term in analyze(text)}


def _as_part(tokens: _Tokens) -> tuple:
    """Tokenised papers as bytes and lists (what a helper process sends back); the fields'
    ids and offsets as byte views of ``tokens``' arrays, not copies (a reader's part holds
    most of a large build's tokens: 420 MB at 872k papers), so ``tokens`` grows no more."""
    fields = [(_byte_view(f.ids), _byte_view(f.offsets)) for f in tokens.fields]
    return (
        tokens.rowids.tobytes(),
        tokens.years.tobytes(),
        tokens.venues,
        fields,
        list(tokens.unigram_ids),
    )


def _byte_view(values: array) -> memoryview:
    """An array's bytes, as a view (``bytes``-like: ``np.frombuffer``, ``array.frombytes``)."""
    return memoryview(values).cast("B")


def tokenise_part(db_path: str, rowids: list[int]) -> tuple:
    """A build helper's work (``bot/engine/build_helper.py``): these papers, read from the
    database file, tokenised with their own unigram ids."""
    db = connect(db_path, read_only=True)
    try:
        return _as_part(_tokenise(Corpus(db).documents_of(rowids)))
    finally:
        db.close()


def _append_part(tokens: _Tokens, part: tuple) -> None:
    """Append a helper's papers (the ones after ``tokens``'), their unigram ids renumbered
    as one process reading them in order would have numbered them (only the words they
    use: a part cut short may name words none of its papers kept)."""
    rowids, years, venues, fields, unigrams = part
    used = np.zeros(len(unigrams), dtype=bool)
    for local_ids, _ in fields:
        used[np.frombuffer(local_ids, dtype=np.int32)] = True
    ids = tokens.unigram_ids
    # The first part with every word used (a reader's whole part) keeps its numbering.
    renumber = None
    if ids or not used.all():
        renumber = np.full(len(unigrams), -1, dtype=np.int32)
        used = np.flatnonzero(used).tolist()
        renumber[used] = [ids.setdefault(unigrams[k], len(ids)) for k in used]
    else:
        ids.update(zip(unigrams, range(len(unigrams)), strict=True))
    tokens.rowids.frombytes(rowids)
    tokens.years.frombytes(years)
    tokens.venues.extend(venues)
    for text_field, (local_ids, offsets) in zip(tokens.fields, fields, strict=True):
        base = len(text_field.ids)
        if renumber is not None:
            local_ids = renumber[np.frombuffer(local_ids, dtype=np.int32)].tobytes()
        text_field.ids.frombytes(local_ids)
        offsets = np.frombuffer(offsets, dtype=np.int64)
        text_field.offsets.frombytes((offsets[1:] + base).tobytes())


def _first_papers(part: tuple, k: int) -> tuple:
    """A helper's part cut to its first ``k`` papers."""
    rowids, years, venues, fields, unigrams = part
    cut = []
    for ids, offsets in fields:
        offsets = np.frombuffer(offsets, dtype=np.int64)[: k + 1]
        cut.append((np.frombuffer(ids, dtype=np.int32)[: offsets[-1]].tobytes(), offsets.tobytes()))
    return (rowids[: 8 * k], years[: 4 * k], venues[:k], cut, unigrams)


def _concatenated(pieces: list[_Tokens]) -> _Tokens:
    """Pieces tokenised with one shared ``unigram_ids``, as one (in the order given)."""
    tokens = _Tokens(unigram_ids=pieces[0].unigram_ids if pieces else {})
    for piece in pieces:
        tokens.rowids.extend(piece.rowids)
        tokens.years.extend(piece.years)
        tokens.venues.extend(piece.venues)
        for text_field, more in zip(tokens.fields, piece.fields, strict=True):
            base = len(text_field.ids)
            text_field.ids.extend(more.ids)
            text_field.offsets.frombytes(
                (np.frombuffer(more.offsets, dtype=np.int64)[1:] + base).tobytes()
            )
    return tokens


def _database_file(corpus: Corpus) -> str | None:
    """The corpus's database file (None in memory, or inside an open transaction, whose
    writes another connection would not see)."""
    if corpus.db.conn.in_transaction:
        return None
    for _, name, path in corpus.db.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return path or None
    return None


def _rowids(corpus: Corpus) -> list[int]:
    """The papers' rowids, ascending: read from the smallest index that holds them (SQLite
    picks it when no order is asked) and sorted here, not by a scan of the table in rowid
    order, which reads every row's page (87k papers: 170 MB, 0.1-0.6 s; the index's
    scan and the sort: 0.08 s)."""
    return sorted(r for (r,) in corpus.db.execute("select rowid from papers"))


def _rowids_and_ids(corpus: Corpus) -> tuple[list[int], list[str]]:
    """The papers' rowids, ascending, and their ids in that order: read from the ids' own
    index (SQLite's, of the primary key), not from the table, whose rows hold the texts
    (872k papers: 1.7 GB read back from the WAL right after a first ingest's commit)."""
    rows = corpus.db.execute("select rowid, id from papers").fetchall()
    rowids = np.fromiter((r for r, _ in rows), np.int64, len(rows))
    order = np.argsort(rowids)
    return rowids[order].tolist(), [rows[k][1] for k in order.tolist()]


def _tokenise_corpus(corpus: Corpus) -> _Tokens:
    """Every paper tokenised; a large corpus in ``BUILD_PROCESSES`` processes, each reading
    its share of the papers (in rowid order) from the database itself, or, when a first
    ingest started a reader of its files, from both ends (``_tokenise_beside``)."""
    path = _database_file(corpus)
    if BUILD_PROCESSES < 2 or path is None or not corpus.has_at_least(max(PARALLEL_MIN_DOCS, 2)):
        return _tokenise(corpus.iter_documents())
    started = _STARTED.pop(os.path.realpath(path), [])
    reader = next((h for h in started if isinstance(h, _Reader)), None)
    if reader is not None:
        for helper in started:
            if helper is not reader:
                helper.discard()
        return _tokenise_beside(corpus, reader)
    rowids = _rowids(corpus)
    share = -(-len(rowids) // BUILD_PROCESSES)
    parts = [rowids[i : i + share] for i in range(0, len(rowids), share)]
    helpers = [started.pop() if started else _Helper(path) for _ in parts[1:]]
    for helper in started:
        helper.discard()
    for helper, part in zip(helpers, parts[1:], strict=True):
        helper.send(part)
    tokens = _tokenise(corpus.documents_of(parts[0]))
    for helper, part in zip(helpers, parts[1:], strict=True):
        result = helper.result()
        if result is None:  # the helper failed (logged): its share is tokenised here
            result = _as_part(_tokenise(corpus.documents_of(part)))
        _append_part(tokens, result)
    return tokens


def _tokenise_beside(corpus: Corpus, reader: _Reader) -> _Tokens:
    """Every paper tokenised from both ends: the reader process (``helpers_started``) has
    tokenised the papers the ingest handed it, in file order, since the ingest began; this
    process now tokenises from the last rowid backwards until the two meet (``_Claims``).
    The reader's papers are used while their (id, content hash) match the database's rows
    in rowid order (all of them for a first ingest of files without repeated ids); from the
    first that does not, they are tokenised here. When the rows are the papers fed, one
    each (``_Reader.stored_as_fed``), their ids alone are matched (read first, from the
    ids' index); otherwise the rows' ids and hashes are read after this process's share,
    while the reader finishes its own (its last batch, its pickle). Either way no other
    process writes papers meanwhile: every writer holds the build lock."""
    reader.fed_all()
    try:
        if reader.stored_as_fed:
            rowids, stored_ids = _rowids_and_ids(corpus)
        else:
            rowids, stored_ids = _rowids(corpus), None
        unigram_ids, known = {}, _known_tokens()
        mine, start = [], reader.claims.end_at(len(rowids))
        while span := reader.claims.take_back(TOKENISE_BATCH):
            start = span[0]
            mine.append(_tokenise(corpus.documents_of(rowids[slice(*span)]), unigram_ids, known))
        mine.reverse()  # in rowid order
        rows = _ids_and_hashes(corpus) if stored_ids is None else None
        result = reader.result()
    finally:
        reader.discard()
    tokens, done = _Tokens(), 0
    if result is not None:
        part, read_ids, read_hashes = result
        if stored_ids is not None:  # each row holds the text fed with its id
            done = min(_same_prefix(read_ids, stored_ids), start)
        else:
            read = list(zip(read_ids, read_hashes, strict=True))
            # A row at another place than when this process took its share matches nothing.
            rows = zip(rows, rowids, strict=False)  # (rows added since: not the reader's)
            stored = [(i, h) if r == rowid else None for (r, i, h), rowid in rows]
            done = min(_same_prefix(read, stored), start)
        if done:
            if done < len(read_ids):
                part = _first_papers(part, done)
            _append_part(tokens, (np.asarray(rowids[:done], np.int64).tobytes(), *part[1:]))
    if done < start:  # what the reader did not tokenise, or not as stored
        mine.insert(0, _tokenise(corpus.documents_of(rowids[done:start]), unigram_ids, known))
    if mine:
        _append_part(tokens, _as_part(_concatenated(mine)))
    return tokens


def _ids_and_hashes(corpus: Corpus) -> list[tuple[int, str, str]]:
    """Every row's rowid, id and content hash, in rowid order (the whole table is read)."""
    return corpus.db.execute("select rowid, id, content_hash from papers order by rowid").fetchall()


def _same_prefix(a: list, b: list) -> int:
    """How many items the two lists start with alike."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    return next(k for k in range(n) if a[k] != b[k])


#: Helper processes started ahead of a full build (``helpers_started``), by database file.
_STARTED: dict[str, list[_Helper]] = {}


@contextmanager
def helpers_started(db_path: str | Path, fed: bool = False):
    """Start a full build's helper processes now, for a build of ``db_path`` later in the
    block to take: a new interpreter importing numpy and the index takes about half a
    second, which then overlaps what comes first (a first ingest's SQLite write) instead of
    the build's tokenising. With ``fed`` (a first ingest of files) the helper is a
    ``_Reader``, yielded: the ingest hands it the papers it parses (``_Reader.feed``) and it
    tokenises them meanwhile. Helpers the block did not use are stopped at its end."""
    key = os.path.realpath(db_path)
    if BUILD_PROCESSES < 2 or key in _STARTED:
        yield None
        return
    if fed:
        _STARTED[key] = [_Reader(os.path.dirname(key))]
    else:
        _STARTED[key] = [_Helper(key) for _ in range(BUILD_PROCESSES - 1)]
    try:
        yield _STARTED[key][0] if fed else None
    finally:
        for helper in _STARTED.pop(key, []):
            helper.discard()


class _Helper:
    """A helper process tokenising papers while the building process tokenises its own: a
    new interpreter (``python -m bot.engine.build_helper``), not a fork of this one (which
    may hold threads and locks) nor multiprocessing's spawn (which re-runs the caller's main
    script). Rowids go in on stdin (``send``), the answer comes back on stdout
    (``_write_answer``), read by a thread so the helper never waits on a full pipe."""

    def __init__(self, db_path: str):
        self._start([db_path])

    def _start(self, arguments: list[str], stdin=subprocess.PIPE, **options) -> None:
        self._answer: tuple | None = None
        self._stderr: bytes | None = None
        self._error: str | None = None
        self._thread: threading.Thread | None = None
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "bot.engine.build_helper", *arguments],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                **options,
            )
        except OSError as error:
            self._process, self._error = None, str(error)

    def send(self, rowids: list[int]) -> None:
        """The papers to tokenise (once)."""
        if self._process is None:
            return
        request = np.asarray(rowids, dtype=np.int64).tobytes()
        self._thread = threading.Thread(target=self._talk, args=(request,), daemon=True)
        self._thread.start()

    def _talk(self, request: bytes | None) -> None:
        """Sends the request (the helper reads it whole before it answers), then reads the
        answer as it comes (``_read_answer``)."""
        process = self._process
        try:
            if request is not None:
                with contextlib.suppress(BrokenPipeError):  # it died first: stderr says why
                    process.stdin.write(request)
                    process.stdin.close()
            try:
                self._answer = _read_answer(process.stdout)
            except (EOFError, ValueError, TypeError):  # it died mid-way; its stderr says why
                self._answer = None
                process.stdout.read()
            self._stderr = process.stderr.read()
            process.wait()
        except OSError as error:
            self._error = str(error)

    def result(self) -> tuple | None:
        """The helper's tokenised papers, or None (logged) when it failed."""
        if self._process is not None and self._thread is not None:
            self._thread.join()
            if self._error is None and self._process.returncode == 0 and self._answer is not None:
                return self._answer
            if self._error is None and self._stderr is not None:
                self._error = self._stderr.decode(errors="replace").strip()[-300:]
        log.warning("A build helper process failed (%s); tokenising in one.", self._error)
        return None

    def discard(self) -> None:
        """Stop a helper that was never sent any papers."""
        if self._process is not None and self._thread is None:
            self._process.kill()
            self._process.communicate()


#: Bytes objects of a helper's answer this long or longer travel apart (``_write_answer``).
_RAW_BYTES = 1 << 16


def _write_answer(answer: tuple, out) -> None:
    """A helper's answer (tuples, lists of tuples, bytes or byte views, lists of strings) on
    ``out``, the way ``_read_answer`` reads it: its big bytes (the tokens) written as they
    are, after the rest (marshal: a reader's 872k papers' ids, content hashes and venues
    took 0.9 s to pickle, each string into pickle's memo, and 0.3 s to unpickle)."""
    raw: list = []

    def without_raw(value):
        if isinstance(value, tuple):
            return tuple(map(without_raw, value))
        if isinstance(value, list) and value and isinstance(value[0], tuple):
            return list(map(without_raw, value))
        if isinstance(value, bytes | memoryview) and len(value) >= _RAW_BYTES:
            raw.append(value)
            return ...  # (marshal keeps Ellipsis; no answer holds one)
        return value

    head = marshal.dumps((without_raw(answer), [len(r) for r in raw]))
    out.write(struct.pack("<q", len(head)))
    out.write(head)
    for value in raw:
        out.write(value)
    out.flush()


def _read_answer(stream) -> tuple:
    """``_write_answer``'s answer read from ``stream``; EOFError when it ends short."""

    def read(size: int) -> bytes:
        data = stream.read(size)
        if len(data) != size:
            raise EOFError("the answer ended short")
        return data

    (size,) = struct.unpack("<q", read(8))
    skeleton, sizes = marshal.loads(read(size))
    raw = iter([read(size) for size in sizes])

    def with_raw(value):
        if isinstance(value, tuple):
            return tuple(map(with_raw, value))
        if isinstance(value, list) and value and isinstance(value[0], tuple):
            return list(map(with_raw, value))
        return next(raw) if value is ... else value

    return with_raw(skeleton)


class _Reader(_Helper):
    """A first ingest's helper process (``build_helper --fed``), tokenising in file order the
    papers the ingest parses and writes to SQLite, as far as it can claim them (``_Claims``):
    the ingest hands them over (``feed``) rather than the reader parsing the files again
    (as much CPU as the tokenising saved). ``result`` is its part, with each paper's id and
    content hash (``_tokenise_beside`` matches them).

    The papers go as batches of their values and content hashes (``marshal``) appended to a
    spool file, each announced by a byte on a pipe: the ingest never waits for the reader (a
    backlog stays in the page cache, not in memory), and the pipe's end (``fed_all``, or
    this process gone) tells the reader that no more are coming. The spool (about the
    input's size unpacked: 118 MB at 87k) is made beside the database, on the disk that
    holds the corpus anyway, not in ``/tmp``, which is often memory (tmpfs); where that
    folder cannot take it, in the temporary folder."""

    #: Set by the ingest when the rows, in rowid order, are the papers it fed, one each, in
    #: the order fed: no papers stored before, none fed twice (a later copy replaces the
    #: text of the row the first made), none rolled back. ``_tokenise_beside`` then matches
    #: the reader's papers with the rows by id alone.
    stored_as_fed = False

    def __init__(self, spool_dir: str | None = None):
        #: Papers handed over (``feed``), whether or not the reader got them.
        self.papers_fed = 0
        self.claims = _Claims()
        try:
            self._spool = tempfile.TemporaryFile(buffering=0, dir=spool_dir)  # noqa: SIM115
        except OSError:  # (closed by discard)
            self._spool = tempfile.TemporaryFile(buffering=0)  # noqa: SIM115
        announced, self._announce = os.pipe()
        fds = (self.claims.fileno(), self._spool.fileno(), announced)
        try:
            self._start(["--fed", *map(str, fds)], stdin=subprocess.DEVNULL, pass_fds=fds)
        finally:
            os.close(announced)
        os.set_blocking(self._announce, False)
        if self._process is None:
            self.fed_all()
        else:
            self._thread = threading.Thread(target=self._talk, args=(None,), daemon=True)
            self._thread.start()

    @property
    def batch_size(self) -> int:
        """How many papers the ingest hands over at a time (``feed``)."""
        return TOKENISE_BATCH

    def feed(self, papers: list[Paper], digests: list[str]) -> None:
        """Hand ``papers`` over, with their content hashes (``Corpus.upsert``'s ``hashed``:
        the ingest computes them for the rows, the reader need not again)."""
        self.papers_fed += len(papers)
        if not papers or self._announce < 0:
            return
        # marshal: a third less time than pickle, both ways (the same interpreter reads it)
        blob = marshal.dumps((list(map(paper_values, papers)), digests), 4)
        record = memoryview(struct.pack("<q", len(blob)) + blob)
        try:
            while record:
                record = record[os.write(self._spool.fileno(), record) :]
            os.write(self._announce, b"\0")
        except BlockingIOError:
            pass  # the pipe is full: the reader has announcements to read, it finds this too
        except OSError:  # the reader is gone, or the disk full: the build tokenises the rest
            self.fed_all()

    def fed_all(self) -> None:
        """No more papers (the pipe's end): the reader tokenises what it has claimed."""
        if self._announce >= 0:
            os.close(self._announce)
            self._announce = -1

    def discard(self) -> None:
        """Stop the reader (when it has not finished) and let its claims go."""
        self.fed_all()
        if self._process is not None:
            self._process.kill()
            self._thread.join()
        self.claims.close()
        self._spool.close()


class _Claims:
    """Who tokenises which papers of a first ingest: the reader process claims them from the
    front (in file order), the building process from the back (by rowid), until the two
    meet. Two counters (the front's end, the back's start) in a shared temporary file, each
    read and moved under a POSIX record lock, so no paper is claimed by both."""

    _OPEN = 1 << 62  # the back before this process knows how many papers there are

    def __init__(self, fd: int | None = None):
        if fd is None:
            self._file = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close)
            fd = self._file.fileno()
            os.pwrite(fd, struct.pack("<qq", 0, self._OPEN), 0)
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    @contextmanager
    def _moved(self):
        """The counters, locked; the caller's two new values are written back."""
        fcntl.lockf(self._fd, fcntl.LOCK_EX)
        try:
            counters = list(struct.unpack("<qq", os.pread(self._fd, 16, 0)))
            yield counters
            os.pwrite(self._fd, struct.pack("<qq", *counters), 0)
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def take_front(self, most: int) -> int:
        """How many of the next papers (at most ``most``) the reader may tokenise."""
        with self._moved() as counters:
            take = max(0, min(most, counters[1] - counters[0]))
            counters[0] += take
        return take

    def end_at(self, n: int) -> int:
        """There are ``n`` papers: the back starts there. Returns it."""
        with self._moved() as counters:
            counters[1] = min(counters[1], n)
            return counters[1]

    def take_back(self, most: int) -> tuple[int, int] | None:
        """The last unclaimed papers (at most ``most``) for this process, or None."""
        with self._moved() as counters:
            front, back = counters
            if back <= front:
                return None
            counters[1] = max(front, back - most)
            return counters[1], back

    def close(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()


def _count(documents: Iterable[tuple[int, dict]] | _Tokens, min_bigram_df: int) -> _Counted:
    tokens = documents if isinstance(documents, _Tokens) else _tokenise(documents)
    n = len(tokens.rowids)
    unigrams = list(tokens.unigram_ids)
    counts, (blob, offsets) = _term_counts(tokens.fields, n, unigrams, min_bigram_df)
    return _Counted(
        np.asarray(tokens.rowids, dtype=np.int64),
        np.asarray(tokens.years, dtype=np.int32),
        tokens.venues,
        counts,
        None,
        (blob, offsets),
    )


def _narrowest_counts(counts: np.ndarray) -> np.ndarray:
    """Weighted counts (whole numbers) in the narrowest unsigned integer type that holds them
    (not copied when they are in it already)."""
    return counts.astype(_counts_type(float(counts.max()) if len(counts) else 0.0), copy=False)


def _counts_type(top: float) -> type:
    """The narrowest unsigned integer type that holds weighted counts up to ``top``."""
    return np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32


def sublinear(counts: np.ndarray) -> np.ndarray:
    """``1 + ln(count)`` in float32 (counts of at least 1)."""
    tf = np.log(np.asarray(counts).astype(np.float32))
    tf += 1
    return tf


def term_frequencies(counts: np.ndarray) -> np.ndarray:
    """The float32 ``1 + ln(count)`` of stored weighted counts. Computed, not looked up in a
    256-entry table: numpy's float32 ``log`` gives each value the same bits wherever it sits
    in an array (``tests/test_index_format.py``), and is 3x faster than the table's gather,
    which casts every one-byte index to a 64-bit one."""
    return sublinear(counts)


def _blocks_of(n_docs: int, block: int) -> int:
    """How many ``block``-paper blocks a segment of ``n_docs`` papers has (at least one)."""
    return max(1, -(-n_docs // block))


def _block_sizes(indices: np.ndarray, indptr: np.ndarray, blocks: int, block: int) -> np.ndarray:
    """How many postings each inverted list has in each of its blocks but the last (entry
    ``term * (blocks - 1) + b``: block ``b``, papers ``b * block`` onwards; uint32); the
    last block holds the rest of the list."""
    n_terms = len(indptr) - 1
    out = np.zeros(n_terms * (blocks - 1), dtype=np.uint32)
    if blocks == 1:
        return out
    for term, end, a, b in _posting_chunks(np.asarray(indptr), n_terms, 1 << 22):
        rows = np.repeat(np.arange(end - term, dtype=np.int64), np.diff(indptr[term : end + 1]))
        keys = rows * blocks + np.asarray(indices[a:b]) // block
        sizes = np.bincount(keys, minlength=(end - term) * blocks).reshape(-1, blocks)
        out[term * (blocks - 1) : end * (blocks - 1)] = sizes[:, :-1].ravel()
    return out


#: A block size in ``xt_blocks`` that does not fit its byte: the real one is in
#: ``xt_wide_blocks`` (each as its entry number times 2**32 plus the size, ascending).
_WIDE_BLOCK = 255


def _pack_block_sizes(sizes: np.ndarray) -> dict:
    """``_block_sizes`` in a byte each: most lists have a few postings a block, and the
    long ones (0.5% of the sizes at 87k papers) are kept beside."""
    sizes = np.asarray(sizes)
    wide = sizes >= _WIDE_BLOCK
    entries = np.flatnonzero(wide).astype(np.uint64)
    narrow = sizes.astype(np.uint8)
    narrow[wide] = _WIDE_BLOCK
    return {
        "xt_blocks": narrow,
        "xt_wide_blocks": (entries << np.uint64(32)) | sizes[wide].astype(np.uint64),
    }


#: Inverted lists' blocks are recorded sparsely (``_sparse_block_sizes``) in segments of
#: this many blocks or more (872k papers: 14): a rare term sits in one or two of them.
_SPARSE_FROM = 3
#: Terms per entry of ``xt_block_starts`` (where a group's stored block sizes start).
_MASK_GROUP = 32
#: How many bits are set in each byte value.
_POPCOUNT = np.asarray([bin(v).count("1") for v in range(256)], dtype=np.int64)


def _mask_type(blocks: int) -> type | None:
    """The unsigned integer type of a segment's block masks (one bit a block), or None when
    its block sizes are stored densely (two blocks or fewer, or over 64)."""
    if blocks < _SPARSE_FROM:
        return None
    return next(
        (t for t in (np.uint8, np.uint16, np.uint32, np.uint64) if blocks <= t(0).nbytes * 8), None
    )


def _stored_sizes(masks: np.ndarray) -> np.ndarray:
    """How many block sizes each list stores in the sparse layout: one per non-empty block
    but the last (its size is the rest of the list), int64."""
    masks = np.ascontiguousarray(masks)
    bits = _POPCOUNT[masks.view(np.uint8)].reshape(len(masks), masks.itemsize).sum(axis=1)
    return np.maximum(bits - 1, 0)


def _sparse_block_sizes(indices: np.ndarray, indptr: np.ndarray, blocks: int, block: int) -> dict:
    """Each list's blocks, sparsely: ``xt_block_masks`` which of its blocks hold postings
    (bit b: block b), ``xt_blocks`` (``_pack_block_sizes``) the sizes of those but its last
    non-empty one, list after list, and ``xt_block_starts`` where the sizes of every
    ``_MASK_GROUP``-th list start. Dense sizes (``_block_sizes``) are mostly zeros at many
    blocks: 50 bytes a paper at 872k papers."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n_terms = len(indptr) - 1

    def runs():
        for term, end, a, b in _posting_chunks(indptr, n_terms, 1 << 22):
            rows = np.repeat(np.arange(end - term, dtype=np.int64), np.diff(indptr[term : end + 1]))
            keys = rows * blocks + np.asarray(indices[a:b]) // block
            yield term, end, np.bincount(keys, minlength=(end - term) * blocks).reshape(-1, blocks)

    return _sparse_layout(runs(), n_terms, blocks)


def _sparse_layout(runs: Iterable[tuple[int, int, np.ndarray]], n_terms: int, blocks: int) -> dict:
    """``_sparse_block_sizes``' arrays from runs of lists ``(term, end, sizes)``: the sizes
    of lists ``term..end-1`` in each block (a row a list), runs ascending (lists in none:
    empty)."""
    kind = _mask_type(blocks)
    masks = np.zeros(n_terms, dtype=kind)
    bit = np.left_shift(np.ones(blocks, dtype=kind), np.arange(blocks, dtype=kind))
    pieces = [np.zeros(0, np.int64)]
    for term, end, sizes in runs:
        full = sizes > 0
        masks[term:end] = np.bitwise_or.reduce(np.where(full, bit, kind(0)), axis=1)
        keep = full.copy()
        keep[np.arange(end - term), blocks - 1 - np.argmax(full[:, ::-1], axis=1)] = False
        pieces.append(sizes[keep])
    counts = _stored_sizes(masks)
    group_ends = np.cumsum(counts)[_MASK_GROUP - 1 :: _MASK_GROUP]
    starts = np.zeros(-(-n_terms // _MASK_GROUP), dtype=np.int64)
    starts[1:] = group_ends[: len(starts) - 1]
    total = int(counts.sum())
    return {
        **_pack_block_sizes(np.concatenate(pieces)),
        "xt_block_masks": masks,
        "xt_block_starts": starts.astype(np.uint32 if total < 1 << 32 else np.int64),
    }


def _paper_block_sizes(
    by_paper: sp.csr_matrix, block: int, blocks: int, step: int = 1 << 22
) -> np.ndarray:
    """How many papers of each of the first ``blocks`` blocks hold each term (blocks x
    terms, uint32: a block's row written at once, ``.T`` for a list's sizes), from the
    matrix by paper: each block's papers' columns counted, ``step`` postings at a time
    (bincount's intp copy of them kept small). No pass over the inverted lists: a build
    counts them while it transposes the matrix into the lists."""
    n_docs, n_terms = by_paper.shape
    indptr, indices = by_paper.indptr, by_paper.indices
    out = np.zeros((blocks, n_terms), dtype=np.uint32)
    counts = np.zeros(n_terms, dtype=np.int64)
    for b in range(blocks):
        start = int(indptr[min(b * block, n_docs)])
        end = int(indptr[min((b + 1) * block, n_docs)])
        counts[:] = 0
        for a in range(start, end, step):
            counts += np.bincount(indices[a : min(a + step, end)], minlength=n_terms)
        out[b] = counts
    return out


#: ``_block_layout`` counts the block sizes from the matrix by paper up to this many blocks
#: (``_paper_block_sizes``' blocks x terms array: 187 MB at 872k papers, 14 blocks); beyond
#: (dense sizes again) from the lists, a few at a time.
_PAPER_BLOCKS = 64
#: ``_block_layout``'s lists at a time when it lays out sizes counted by paper.
_LAYOUT_TERMS = 1 << 18


def _by_paper(blocks: int) -> bool:
    """Whether ``_block_layout`` counts a segment of ``blocks`` blocks from the matrix by
    paper (given it): then it reads no inverted list."""
    return blocks <= _PAPER_BLOCKS


def _block_layout(
    indices: np.ndarray | None,
    indptr: np.ndarray | None,
    blocks: int,
    block: int,
    by_paper: sp.csr_matrix | None = None,
) -> dict:
    """The lists' block sizes as a segment of ``blocks`` blocks stores them: dense (one
    size a list and block but the last) at two blocks, where that is smaller, else sparse.
    ``by_paper``: the same postings as a matrix by paper, if at hand: the sizes are then
    counted from it when ``_by_paper(blocks)`` (the lists, ``indices`` and ``indptr``, may
    be None), so a build lays them out while it transposes the matrix into the lists."""
    sparse = _mask_type(blocks) is not None
    if by_paper is not None and _by_paper(blocks):
        sizes = _paper_block_sizes(by_paper, block, blocks if sparse else blocks - 1)
        n_terms = sizes.shape[1]
        if sparse:
            runs = (
                (term, end, np.ascontiguousarray(sizes[:, term:end].T))
                for term, end in (
                    (term, min(term + _LAYOUT_TERMS, n_terms))
                    for term in range(0, n_terms, _LAYOUT_TERMS)
                )
            )
            return _sparse_layout(runs, n_terms, blocks)
        sizes = sizes.T.ravel()
    elif sparse:
        return _sparse_block_sizes(indices, indptr, blocks, block)
    else:
        sizes = _block_sizes(indices, indptr, blocks, block)
    return {
        **_pack_block_sizes(sizes),
        "xt_block_masks": np.zeros(0, np.uint8),
        "xt_block_starts": np.zeros(0, np.uint32),
    }


def _split_keys(keys: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(where, value) of escaped values stored as ``where * 2**32 + value`` (uint64)."""
    keys = np.asarray(keys, dtype=np.uint64)
    return (keys >> np.uint64(32)).astype(np.int64), (keys & np.uint64(0xFFFFFFFF)).astype(dtype)


#: The largest count four bits hold in ``xt_data``; 0 there marks a larger one, kept in
#: ``xt_escaped`` (each as its posting number times 2**32 plus its count, ascending).
_NIBBLE_MAX = 15


def _pack_counts(counts: np.ndarray) -> dict:
    """The inverted lists' counts, two a byte (the even posting's in the low four bits):
    nine postings in ten have a count of 1 or 2, so a whole byte each is mostly zeros."""
    counts = np.asarray(counts)
    nnz = len(counts)
    if nnz >= 1 << 32 or (nnz and int(counts.max()) >= 1 << 32):
        raise IndexBuildError("The index cannot hold over 4 billion postings or counts.")
    wide = np.flatnonzero(counts > _NIBBLE_MAX)
    # The counts cast to a byte (a wide one's low bits, zeroed after) in place: one
    # temporary a byte a posting, not three (0.6 -> 0.4 s at 872k papers).
    codes = np.zeros(nnz + (nnz & 1), dtype=np.uint8)
    np.copyto(codes[:nnz], counts, casting="unsafe")
    codes[wide] = 0
    data = codes[1::2] << 4
    data |= codes[0::2]
    escaped = wide.astype(np.uint64)
    return {
        "xt_data": data,
        "xt_escaped": (escaped << np.uint64(32)) | counts[wide].astype(np.uint64),
    }


#: Both four-bit halves of every byte value: ``_NIBBLES[byte, posting & 1]``.
_NIBBLES = np.stack([np.arange(256) & 0x0F, np.arange(256) >> 4], axis=1).astype(np.uint8)
#: ``sublinear`` of both halves of every byte value (0: an escaped count, computed apart).
_NIBBLE_TF = np.where(_NIBBLES > 0, sublinear(np.maximum(_NIBBLES, 1)), 0).astype(np.float32)
_NIBBLE_TF_FLAT = _NIBBLE_TF.ravel()  # (byte x 2 + half: ``_Counts.tf_at``)
#: How far a posting's byte is shifted to bring its half down, by ``posting & 1``.
_SHIFTS = np.array([0, 4], dtype=np.uint8)


class _Counts:
    """The inverted lists' counts (``_pack_counts``), read like the plain array of counts
    they replace: ``len``, ``dtype``, and indexing by position, slice or array of positions."""

    def __init__(self, packed: np.ndarray, escaped: np.ndarray, dtype: np.dtype):
        self._packed = packed
        self.dtype = np.dtype(dtype)
        # The postings whose counts four bits do not hold, and those counts: split once
        # (a few thousand at 87k papers), since query words are often the ones with them.
        self._wide_at, self._wide = _split_keys(escaped, self.dtype)
        self._any_escaped = len(escaped) > 0
        self._wide_type = self.dtype != np.uint8
        self._n = 0
        self.shape = (0,)

    def sized(self, n: int) -> _Counts:
        self._n, self.shape = n, (n,)
        return self

    def __len__(self) -> int:
        return self._n

    def span(self, start: int, end: int) -> np.ndarray:
        """The counts of postings [start, end), a new array: each byte's two halves from
        a 256 x 2 table, in one ``take``."""
        first = start & 1
        pairs = _NIBBLES.take(self._packed[start >> 1 : (end + 1) >> 1], axis=0)
        counts = pairs.ravel()[first : first + end - start]
        if self._wide_type:
            counts = counts.astype(self.dtype)
        if self._any_escaped and np.count_nonzero(counts) < len(counts):
            at = self._wide_at
            i, j = int(at.searchsorted(start)), int(at.searchsorted(end))
            counts[at[i:j] - start] = self._wide[i:j]
        return counts

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The counts of these postings."""
        positions = np.asarray(positions, dtype=np.int64)
        counts = self._packed.take(positions >> 1)
        counts >>= _SHIFTS.take(positions & 1)
        counts &= 0x0F
        if self._wide_type:
            counts = counts.astype(self.dtype)
        if self._any_escaped and np.count_nonzero(counts) < len(counts):
            zero = counts == 0
            counts[zero] = self._wide[self._wide_at.searchsorted(positions[zero])]
        return counts

    def tf_span(self, start: int, end: int) -> np.ndarray:
        """``sublinear`` of ``span(start, end)``: each byte's two term frequencies from a
        256 x 2 float32 table in one ``take`` (the same bits: ``sublinear`` gives a count
        the same float wherever it sits), the few escaped counts computed."""
        first = start & 1
        pairs = _NIBBLE_TF.take(self._packed[start >> 1 : (end + 1) >> 1], axis=0)
        tf = pairs.ravel()[first : first + end - start]
        if self._any_escaped and np.count_nonzero(tf) < len(tf):
            at = self._wide_at
            i, j = at.searchsorted((start, end)).tolist()
            tf[at[i:j] - start] = self._wide_tf()[i:j]
        return tf

    def _wide_tf(self) -> np.ndarray:
        """``sublinear`` of every escaped count, worked out once (a few thousand at 87k
        papers): the same bits as of a few of them (numpy's float32 ``log`` gives a value
        the same bits wherever it sits: ``term_frequencies``), three numpy calls fewer for
        each lookup of a list that has any."""
        tf = self.__dict__.get("_wide_sublinear")
        if tf is None:
            tf = self._wide_sublinear = sublinear(self._wide)
        return tf

    def tf_at(self, positions: np.ndarray) -> np.ndarray:
        """``sublinear`` of ``at(positions)``, from the same table read flat: one ``take`` at
        byte x 2 + which half (half the time of a divmod and a two-array index)."""
        positions = np.asarray(positions, dtype=np.int64)
        at = self._packed.take(positions >> 1).astype(np.intp)
        at <<= 1
        at |= positions & 1
        tf = _NIBBLE_TF_FLAT.take(at)
        if self._any_escaped and np.count_nonzero(tf) < len(tf):
            zero = tf == 0
            found = self._wide_at.searchsorted(positions[zero])
            tf[zero] = self._wide_tf().take(found)
        return tf

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self._n)
            if step == 1:
                return self.span(start, max(start, stop))
            return self.at(np.arange(start, stop, step))
        if np.ndim(key) == 0:
            position = int(key)
            if not -self._n <= position < self._n:
                raise IndexError(f"posting {position} of {self._n}")
            return self.at(np.asarray([position % self._n]))[0]
        return self.at(np.arange(self._n)[key] if np.asarray(key).dtype == bool else key)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        counts = self.span(0, self._n)
        return counts if dtype is None else counts.astype(dtype)


def _plain_vocabulary(vocabulary: list[str]) -> tuple[bytes, np.ndarray]:
    """The terms as one blob, each followed by a newline, and where each starts (int64)."""
    blob = ("\n".join(vocabulary) + "\n").encode() if vocabulary else b""
    offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    ends = np.flatnonzero(np.frombuffer(blob, dtype=np.uint8) == ord("\n"))
    if len(ends) == len(vocabulary):  # each term's newline, found in C (terms hold none)
        offsets[1:] = ends + 1
        return blob, offsets
    lengths = np.fromiter(
        (len(t.encode()) for t in vocabulary), dtype=np.int64, count=len(vocabulary)
    )
    np.cumsum(lengths + 1, out=offsets[1:])
    return blob, offsets


def _plain_of(counted: _Counted) -> tuple[bytes, np.ndarray]:
    """A counted batch's vocabulary as a plain blob and offsets (as counted, or joined)."""
    return counted.plain if counted.plain is not None else _plain_vocabulary(counted.vocabulary)


def _front_code(
    blob: bytes, offsets: np.ndarray, block: int
) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Front coding of a sorted plain vocabulary: (the suffixes, each followed by a newline;
    each term's shared-prefix length with the previous one, uint8, 0 for a block's first
    term; where each block starts in the suffixes, then their end)."""
    data = np.frombuffer(blob, dtype=np.uint8) if len(blob) else np.zeros(0, np.uint8)
    n = len(offsets) - 1
    starts = np.asarray(offsets[:-1], dtype=np.int64)
    lengths = np.asarray(offsets[1:], dtype=np.int64) - starts - 1
    shared = np.zeros(n, dtype=np.int64)
    # Bytes shared with the previous term, compared position by position (vectorised).
    live = np.arange(1, n)
    live = live[live % block != 0]
    position = 0
    while len(live):
        live = live[
            (lengths[live] > position) & (lengths[live - 1] > position) & (shared[live] < 255)
        ]
        if not len(live):
            break
        same = data[starts[live] + position] == data[starts[live - 1] + position]
        live = live[same]
        shared[live] += 1
        position += 1
    # Drop each term's shared bytes: +1 where they start, -1 where they end, summed (int8
    # arrays the size of the blob, not positions in int64).
    marks = np.zeros(len(data) + 1, dtype=np.int8)
    cut = shared > 0
    marks[starts[cut]] = 1
    marks[starts[cut] + shared[cut]] = -1
    keep = np.cumsum(marks[:-1], dtype=np.int8) == 0
    suffixes = data[keep].tobytes()
    sizes = lengths - shared + 1
    entry_starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=entry_starts[1:])
    heads = entry_starts[np.r_[np.arange(0, n, block), n]] if n else np.zeros(1, np.int64)
    heads = heads.astype(np.uint32) if len(suffixes) < 1 << 32 else heads
    return suffixes, shared.astype(np.uint8), heads


def _segment_arrays(counted: _Counted, min_bigram_df: int) -> tuple[dict, bytes, dict]:
    """The files of a segment: weighted counts both ways, vocabulary."""
    # The vocabulary's front coding (its own arrays) beside the matrix's transpose, and the
    # lists' blocks beside their counts' packing: numpy lets the GIL go, both cores work.
    coded = _beside(lambda: _front_code(*_plain_of(counted), VOCAB_BLOCK))
    x = counted.counts
    x.sort_indices()
    # Counts in their narrowest type before the transpose (``_term_counts`` gives them so):
    # at 872k papers each float copy of the matrix is over a gigabyte.
    x = counted.counts = sp.csr_matrix(
        (_narrowest_counts(x.data), x.indices, x.indptr), shape=x.shape
    )
    block = BLOCK  # read once: recorded in meta.json, which readers go by
    blocks = _blocks_of(x.shape[0], block)
    # The lists' block sizes counted by paper while the matrix is transposed (at 872k
    # papers the transpose is 7 s of one core, the layout 1-3 s of the other).
    layout = _beside(_block_layout, None, None, blocks, block, x) if _by_paper(blocks) else None
    xt = x.T.tocsr()
    xt.sort_indices()
    venue_names = sorted(set(counted.venues))
    venue_code = {v: i for i, v in enumerate(venue_names)}
    nnz = int(xt.indptr[-1])
    if layout is None:
        layout = _beside(_block_layout, xt.indices, xt.indptr, blocks, block, x)
    packed = _pack_counts(xt.data)
    indices = _within_blocks(xt.indices, block)
    blob, vocab_shared, vocab_heads = coded.result()
    arrays = {
        **packed,
        "xt_indices": indices,
        "xt_indptr": np.asarray(xt.indptr).astype(np.uint32 if nnz < 1 << 32 else np.int64),
        **layout.result(),
        "doc_sizes": _doc_sizes(x.indptr),
        "rowids": counted.rowids,
        "years": _narrowest_years(counted.years),
        "venue_codes": np.asarray(
            [venue_code[v] for v in counted.venues],
            dtype=np.uint8 if len(venue_names) <= 1 << 8 else np.int32,
        ),
        "vocab_shared": vocab_shared,
        "vocab_heads": vocab_heads,
    }
    meta = {
        "format": FORMAT_VERSION,
        "documents": len(counted.rowids),
        "terms": x.shape[1],
        "blocks": blocks,
        "block": block,
        "counts": str(xt.data.dtype),
        "vocab_block": VOCAB_BLOCK,
        "venues": venue_names,
        "title_weight": TITLE_WEIGHT,
        "min_bigram_df": min_bigram_df,
        "built_at": time.time(),
    }
    return arrays, blob, meta


def _within_blocks(indices: np.ndarray, block: int) -> np.ndarray:
    """Each posting's paper within its block (uint16): a cast, which keeps the low 16 bits,
    when a block is 2**16 papers (no temporary of the postings' size: 1 s at 872k
    papers), else the remainder."""
    indices = np.asarray(indices)
    if block == 1 << 16 and indices.dtype.kind in "iu":
        return indices.astype(np.uint16)
    return (indices % block).astype(np.uint16)


def _doc_sizes(indptr: np.ndarray) -> np.ndarray:
    """How many distinct terms each paper has, in the narrowest unsigned type: what a
    paper's vector read from its text is checked against (``Index._doc_terms``)."""
    sizes = np.diff(np.asarray(indptr, dtype=np.int64))
    top = int(sizes.max()) if len(sizes) else 0
    return sizes.astype(np.uint8 if top < 1 << 8 else np.uint16 if top < 1 << 16 else np.uint32)


def _narrowest_years(years: np.ndarray) -> np.ndarray:
    """Years (0: unknown) in int16 when they fit (they always do), else as they came."""
    years = np.asarray(years)
    fits = not len(years) or (int(years.min()) >= -(1 << 15) and int(years.max()) < 1 << 15)
    return years.astype(np.int16) if fits else years


def _write_segment(
    directory: Path, counted: _Counted, min_bigram_df: int = 1, main: str | None = None
) -> str:
    """Write a new segment folder beside the serving ones; its name.

    Written under ``<name>.tmp-<pid>`` and renamed when complete, so a folder with a
    segment's name is always whole. Any failure removes the temporary folder; an
    ``OSError`` comes back as one ``IndexBuildError`` sentence. A delta names its ``main``
    segment: where each of its terms is in that segment's vocabulary is stored with it
    (matched here, by the writer: ``Vocabulary.ids_of``).
    """
    arrays, blob, meta = _segment_arrays(counted, min_bigram_df)
    if main is not None:
        main_vocab = Segment(directory / main, verify=False).vocab
        arrays["main_terms"] = main_vocab.ids_of(*_plain_of(counted))
        arrays["main_terms"] = arrays["main_terms"].astype(np.int32)
        meta["main"] = main
    name = _next_segment_name(directory)
    tmp = directory / f"{name}.tmp-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        files = {}
        for key, values in arrays.items():
            files[f"{key}.npy"] = _write_file(tmp / f"{key}.npy", np.ascontiguousarray(values))
        files["vocab.bin"] = _write_file(tmp / "vocab.bin", blob)
        _write_file(tmp / "meta.json", json.dumps({**meta, "files": files}).encode())
        tmp.rename(directory / name)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError):
            raise IndexBuildError(_build_error(directory, error)) from None
        raise
    return name


def _next_segment_name(directory: Path) -> str:
    numbers = [0]
    for path in directory.iterdir():
        found = _SEGMENT.match(path.name.split(".")[0])
        if found:
            numbers.append(int(found.group(1)))
    return f"seg-{max(numbers) + 1:06d}"


def read_current(directory: Path) -> dict | None:
    """The published generation at ``directory`` (its CURRENT), or None (none, or an old format)."""
    try:
        current = json.loads((Path(directory) / CURRENT).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(current, dict) or current.get("format") != FORMAT_VERSION:
        return None
    return current


def _publish(directory: Path, corpus_version: int, segments: list[dict], previous: dict | None):
    """Switch readers to a new generation: CURRENT replaced in one ``os.replace``."""
    generation = int(previous["generation"]) + 1 if previous else 1
    current = {
        "format": FORMAT_VERSION,
        "generation": generation,
        "corpus_version": corpus_version,
        "segments": segments,
        "published_at": time.time(),
    }
    # The statistics summed over the segments, computed once here by the writer: a reader
    # opening this generation then maps them instead of a pass over every posting.
    names = {key: f"gen-{generation:06d}.{key}.npy" for key in GENERATION_FILES}
    tmp = directory / f"{CURRENT}.tmp-{os.getpid()}"
    try:
        pending = Index(directory, verify=False, current=current)
        arrays = {
            "norms": lambda: pending.inverse_pivot,
            "impacts": lambda: rounded_up(pending.best_impacts()),
            "heads": pending.best_heads,
            "deleted_df": lambda: pending.deleted_df,
            "delta_terms": pending.delta_terms,
            "extra_terms": lambda: np.frombuffer(
                "\n".join(pending.vocab.extra_terms).encode(), dtype=np.uint8
            ),
        }
        for key in GENERATION_FILES:
            current[key] = {
                "file": names[key],
                **_write_file(directory / names[key], arrays[key]()),
            }
        _write_file(tmp, json.dumps(current).encode())
        os.replace(tmp, directory / CURRENT)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        for path in (tmp, *(directory / name for name in names.values())):
            with contextlib.suppress(OSError):
                path.unlink()
        raise IndexBuildError(_build_error(directory, error)) from None
    _collect_garbage(directory, current)
    return current


#: What a generation's writer stores beside its segments (``gen-<n>.<key>.npy``, named in
#: CURRENT): the documents' pivoted norms, each term's best impact, the long lists' heads,
#: the deleted papers' terms' document frequencies (``Index._deleted_df``: a reader would
#: otherwise pass over every list of a segment with deletions to find them), and the deltas'
#: terms' global ids with the terms only deltas have (``Index.delta_terms``: a reader would
#: otherwise decode a delta's whole vocabulary to find its new unigrams, 0.2 s for a day's
#: feed at 87k papers, paid by the first lookup after the ingest).
GENERATION_FILES = ("norms", "impacts", "heads", "deleted_df", "delta_terms", "extra_terms")


def rounded_up(values: np.ndarray) -> np.ndarray:
    """float16 values at least as large as ``values`` (non-negative float32): MaxScore's
    bounds stay bounds, in half the bytes (and half the private memory of every reader)."""
    half = np.asarray(values, dtype=np.float32).astype(np.float16)
    low = half.astype(np.float32) < values
    half[low] = np.nextafter(half[low], np.float16(np.inf))
    return half


def _write_deletions(directory: Path, name: str, generation: int, docs: np.ndarray) -> dict:
    file_name = f"{name}.del-{generation:06d}.npy"
    try:
        entry = _write_file(directory / file_name, np.asarray(docs, dtype=np.int32))
    except OSError as error:
        with contextlib.suppress(OSError):
            (directory / file_name).unlink()
        raise IndexBuildError(_build_error(directory, error)) from None
    return {"file": file_name, **entry}


def _collect_garbage(directory: Path, current: dict) -> None:
    """Remove what no generation names: old segments, old deletion files, dead builders' temps.

    A process still reading an old segment keeps its mmapped pages (POSIX) and moves to the
    new generation on its next lookup.
    """
    keep = {CURRENT, *(current[key]["file"] for key in GENERATION_FILES if key in current)}
    for entry in current["segments"]:
        keep.add(entry["name"])
        if entry.get("deleted"):
            keep.add(entry["deleted"]["file"])
    for path in directory.iterdir():
        if path.name in keep:
            continue
        _, _, pid = path.name.rpartition(".tmp-")
        if pid.isdigit() and (int(pid) == os.getpid() or _alive(int(pid))):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    _remove_leftovers(directory)


def _remove_leftovers(directory: Path) -> None:
    """Remove ``<index>.tmp-<pid>``/``.old-<pid>`` folders of format-3 builders that died."""
    parent = directory.parent
    if not parent.is_dir():
        return
    for path in parent.glob(f"{directory.name}.*-*"):
        kind, _, pid = path.name[len(directory.name) + 1 :].partition("-")
        if kind not in ("tmp", "old") or not pid.isdigit() or int(pid) == os.getpid():
            continue
        if not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def _prepare_directory(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise IndexBuildError(_build_error(directory, error)) from None
    _remove_leftovers(directory)


def build_index(corpus: Corpus, directory: Path, progress=None) -> BuildStats:
    """Count the whole corpus into one new main segment and publish it as the next generation.

    Runs beside the serving generation (readers keep using it until CURRENT is replaced);
    the caller holds ``build_lock``.
    """
    started = time.perf_counter()
    directory = Path(directory)
    _prepare_directory(directory)
    previous = read_current(directory)
    version = corpus.version  # read first: a paper changed meanwhile is re-added by a delta
    counted = _count(_tokenise_corpus(corpus), MIN_BIGRAM_DF)
    n, terms = counted.counts.shape
    name = _write_segment(directory, counted, MIN_BIGRAM_DF)
    del counted
    _publish(directory, version, [{"name": name, "documents": n, "deleted": None}], previous)
    return BuildStats(documents=n, terms=terms, seconds=time.perf_counter() - started)


def add_to_index(corpus: Corpus, directory: Path) -> BuildStats:
    """Index the papers added or changed since the published generation as a delta segment.

    Costs the parse and count of those papers only. Each changed paper's older copy is
    deleted (a tombstone) in the segment that held it, in the same generation, so it is
    never found by its old text. Then merges if the deltas grew (``maintain``). The caller
    holds ``build_lock``; with no published generation this is a full build.
    """
    started = time.perf_counter()
    directory = Path(directory)
    previous = read_current(directory)
    if previous is None:
        return build_index(corpus, directory)
    version = corpus.version
    main_docs = max(int(previous["segments"][0]["documents"]), 1)
    if corpus.changed_since(int(previous["corpus_version"])) > MERGE_SHARE * main_docs:
        return build_index(corpus, directory)
    counted = _count(corpus.iter_documents(since=int(previous["corpus_version"])), 1)
    n, terms = len(counted.rowids), len(counted.vocabulary)
    segments = _tombstoned(directory, previous, counted.rowids)
    if n:
        name = _write_segment(directory, counted, main=segments[0]["name"])
        segments.append({"name": name, "documents": n, "deleted": None})
    del counted
    _publish(directory, version, segments, previous)
    maintain(corpus, directory)
    return BuildStats(documents=n, terms=terms, seconds=time.perf_counter() - started)


def _tombstoned(directory: Path, current: dict, rowids: np.ndarray) -> list[dict]:
    """The generation's segments with ``rowids`` deleted wherever they already are."""
    generation = int(current["generation"]) + 1
    out = []
    for entry in current["segments"]:
        entry = dict(entry)
        seg_rowids = np.load(directory / entry["name"] / "rowids.npy", mmap_mode="r")
        hit = np.flatnonzero(np.isin(seg_rowids, rowids))
        if len(hit):
            old = _deleted_docs(directory, entry)
            docs = unique(np.concatenate([old, hit])).astype(np.int32)
            entry["deleted"] = _write_deletions(directory, entry["name"], generation, docs)
            entry["deleted"]["count"] = len(docs)
        out.append(entry)
    return out


def _deleted_docs(directory: Path, entry: dict) -> np.ndarray:
    if not entry.get("deleted"):
        return np.zeros(0, np.int32)
    return np.load(directory / entry["deleted"]["file"])


def maintain(corpus: Corpus, directory: Path) -> str | None:
    """Merge when the deltas grew: the whole index rebuilt when the deltas and deleted papers
    reach ``MERGE_SHARE`` of the main segment, the deltas merged into one when there are more
    than ``MAX_DELTAS``. What was done ("rebuilt", "merged"), or None. Readers keep serving
    the previous generation meanwhile; the caller holds ``build_lock``."""
    current = read_current(directory)
    if current is None or len(current["segments"]) < 2:
        return None
    main, deltas = current["segments"][0], current["segments"][1:]
    live = [e["documents"] - (e["deleted"] or {}).get("count", 0) for e in current["segments"]]
    stale = sum(live[1:]) + (main["deleted"] or {}).get("count", 0)
    if stale > MERGE_SHARE * max(live[0], 1):
        build_index(corpus, directory)
        return "rebuilt"
    if len(deltas) > MAX_DELTAS:
        rowids = []
        for entry in deltas:
            seg_rowids = np.load(directory / entry["name"] / "rowids.npy")
            keep = np.ones(len(seg_rowids), bool)
            keep[_deleted_docs(directory, entry)] = False
            rowids.append(seg_rowids[keep])
        counted = _count(corpus.documents_of(np.concatenate(rowids).tolist()), 1)
        n = len(counted.rowids)
        name = _write_segment(directory, counted, main=main["name"])
        merged = {"name": name, "documents": n, "deleted": None}
        _publish(directory, int(current["corpus_version"]), [main, merged], current)
        return "merged"
    return None


def _write_file(path: Path, data) -> dict:
    """Write ``data`` (an array or bytes) and flush it to disk; its manifest entry.

    The flush is where a full disk shows on filesystems that allocate lazily; without it a
    short file could be swapped in (the checksum on opening would catch it, too late).
    """
    with open(path, "wb") as handle:
        writer = _ChecksumWriter(handle)
        if isinstance(data, np.ndarray):
            np.lib.format.write_array(writer, data, allow_pickle=False)
        else:
            writer.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return {"size": writer.size, "crc32": writer.crc}


#: Bytes written to an index file at a time. The page cache keeps a file in folios as large
#: as the writes that made it (ext4 on Linux 6.x: up to 2 MB), and a process that maps the
#: file maps a whole folio when it touches one byte of it: a lookup reading a few postings of
#: a list then maps megabytes of its neighbours (at 872k papers the serving process had
#: 582 MB resident, 470 of it index files; 349 MB with 64 KB writes). 64 KB is what the
#: kernel maps around a fault anyway.
WRITE_CHUNK = 1 << 16


class _ChecksumWriter:
    """A file that keeps the CRC-32 and size of what goes through it (no second read),
    written ``WRITE_CHUNK`` bytes at a time."""

    def __init__(self, handle) -> None:
        self.handle, self.crc, self.size = handle, 0, 0

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        self.crc = zlib.crc32(view, self.crc)
        self.size += len(view)
        for start in range(0, len(view), WRITE_CHUNK):
            self.handle.write(view[start : start + WRITE_CHUNK])
        return len(view)


def _build_error(directory: Path, error: OSError) -> str:
    where = directory.parent.absolute()
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"The search index could not be written because the disk holding {where} is full; "
            "lookups use the previous index, if there is one, until there is space again."
        )
    reason = (error.strerror or str(error)).lower()
    return f"The search index could not be written in {where} ({reason})."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def build_lock(directory: Path, wait: bool = True):
    """One writer at a time across processes (the web app, the scheduler, the CLI).

    Yields whether the lock is held: with ``wait=False`` it is not when another process
    holds it (a reader then serves the index there is instead of waiting).
    """
    lock_path = Path(f"{directory}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def writer_busy(directory: Path) -> bool:
    """Whether another process holds the build lock (it will publish what it writes).

    False when the lock file cannot even be opened (a read-only folder): no writer there.
    """
    try:
        with build_lock(directory, wait=False) as held:
            return not held
    except OSError:
        return False


class Vocabulary:
    """Sorted terms, front-coded in one mmapped blob (``VOCAB_BLOCK`` terms a block);
    ``id_of`` bisects the blocks' first terms, then reads one block (no dict to load)."""

    def __init__(self, blob: mmap.mmap | bytes, shared: np.ndarray, heads: np.ndarray, block: int):
        self._blob = blob
        #: Bytes each term shares with the previous one (0 for a block's first term).
        self._shared = shared
        #: Where each block starts in the blob, then the blob's end. Mapped arrays, not
        #: lists: a list of Python ints would cost private memory in every process.
        self._heads = heads
        self._block = block
        self.size = len(shared)
        self._n_blocks = len(heads) - 1
        self._cache: dict[str, int] = {}
        self._plain: tuple[bytes, np.ndarray] | None = None
        self._prefixes: np.ndarray | None = None

    def _head(self, block: int) -> bytes:
        start = int(self._heads[block])
        return self._blob[start : self._blob.find(b"\n", start)]

    def _terms_of(self, block: int, upto: int | None = None) -> list[bytes]:
        """The whole terms of a block (its first ``upto``)."""
        first = block * self._block
        count = min(self._block, self.size - first) if upto is None else upto
        shared = self._shared[first : first + count].tolist()
        blob, start, out, previous = self._blob, int(self._heads[block]), [], b""
        for keep in shared:
            end = blob.find(b"\n", start)
            previous = previous[:keep] + blob[start:end]
            out.append(previous)
            start = end + 1
        return out

    def term(self, term_id: int) -> str:
        block, at = divmod(int(term_id), self._block)
        return self._terms_of(block, at + 1)[at].decode()

    def _blocks_to(self, key: bytes, lo: int, hi: int) -> int:
        """How many blocks' first terms are <= key, knowing that it is between ``lo`` and
        ``hi`` (bisection): the key can only be in the block before."""
        while lo < hi:
            mid = (lo + hi) // 2
            if self._head(mid) <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _lower_bound(self, key: bytes) -> int:
        """The first term id whose term is >= key."""
        lo = self._blocks_to(key, 0, self._n_blocks)
        if lo == 0:
            return 0
        block = lo - 1
        terms = self._terms_of(block)
        return block * self._block + bisect.bisect_left(terms, key)

    def id_of(self, term: str) -> int:
        """The term's id, or -1 when no paper contains it."""
        cached = self._cache.get(term)
        if cached is not None:
            return cached
        key = term.encode()
        lo = self._lower_bound(key)
        found = lo if lo < self.size and self._key(lo) == key else -1
        if len(self._cache) < 100_000:
            self._cache[term] = found
        return found

    def ids_of_terms(self, terms: Sequence[str], remember: bool = False) -> np.ndarray:
        """``id_of`` of several terms at once (int64, -1 where absent): each key's block
        found among the blocks' 8-byte prefixes by one ``searchsorted`` (a bisection over
        the whole heads only among blocks sharing its prefix), and each block decoded up to
        the key; the terms ``id_of`` has cached are answered from its cache first. With
        ``remember``, the others are cached too: a query's terms (``Index.vectorize``: 10
        us a new term, where ``id_of`` bisects the heads one term at a time in 30-40). Not
        so for papers read from their text, whose few hundred terms would crowd the cache;
        a delta's writer, with hundreds of thousands, uses ``ids_of`` (vectorised, but a
        pass over the whole blob)."""
        out = np.full(len(terms), -1, dtype=np.int64)
        if not self.size or not len(terms):
            return out
        # The terms lookups have asked for (``id_of``'s cache), then the others.
        known = list(map(self._cache.get, terms))
        if None not in known:
            out[:] = known
            return out
        asked = [k for k, tid in enumerate(known) if tid is None]
        out[[k for k, tid in enumerate(known) if tid is not None]] = [
            tid for tid in known if tid is not None
        ]
        new = [terms[k] for k in asked]
        found = self._ids_of_new_terms(new)
        out[asked] = found
        if remember and len(self._cache) < 100_000:
            self._cache.update(zip(new, found.tolist(), strict=True))
        return out

    def ids_of_query(self, terms: Sequence[str]) -> list[int]:
        """``id_of`` of a query's terms: from the cache when it has them all (no numpy
        call), else ``ids_of_terms`` remembering the new ones."""
        ids = list(map(self._cache.get, terms))
        if None in ids:
            ids = self.ids_of_terms(terms, remember=True).tolist()
        return ids

    def _ids_of_new_terms(self, terms: Sequence[str]) -> np.ndarray:
        """``ids_of_terms`` of terms not looked up before."""
        out = np.full(len(terms), -1, dtype=np.int64)
        keys = [term.encode() for term in terms]
        prefixes = np.asarray(
            [int.from_bytes(key[:8].ljust(8, b"\0"), "big") for key in keys], dtype=np.uint64
        )
        heads = self._head_prefixes()
        firsts = np.searchsorted(heads, prefixes, side="left").tolist()
        lasts = np.searchsorted(heads, prefixes, side="right").tolist()
        for k, (key, lo, hi) in enumerate(zip(keys, firsts, lasts, strict=True)):
            blocks = self._blocks_to(key, lo, hi)  # among the heads with its first 8 bytes
            if blocks:
                out[k] = self._in_block(blocks - 1, key)
        return out

    def _in_block(self, block: int, key: bytes) -> int:
        """The id of ``key`` in this block (-1: not there), decoding its terms only up to
        the first one that is not smaller."""
        first = block * self._block
        shared = self._shared[first : first + min(self._block, self.size - first)].tolist()
        blob, start, previous = self._blob, int(self._heads[block]), b""
        for at, keep in enumerate(shared):
            end = blob.find(b"\n", start)
            previous = previous[:keep] + blob[start:end]
            if previous >= key:
                return first + at if previous == key else -1
            start = end + 1
        return -1

    def _head_prefixes(self) -> np.ndarray:
        """Each block's first term's first 8 bytes as a big-endian integer (zero-padded):
        sorted as the terms are, 8 bytes per block, computed once per process."""
        if self._prefixes is None:
            data = np.frombuffer(self._blob, dtype=np.uint8)
            at = np.asarray(self._heads[: self._n_blocks], dtype=np.int64)[:, None] + np.arange(8)
            raw = data[np.minimum(at, len(data) - 1)]
            # Bytes from a head's newline on (or past the blob's end) are not its term's.
            past = np.cumsum((raw == 10) | (at >= len(data)), axis=1) > 0
            raw[past] = 0
            self._prefixes = np.ascontiguousarray(raw).view(">u8").ravel().astype(np.uint64)
        return self._prefixes

    def _key(self, term_id: int) -> bytes:
        block, at = divmod(int(term_id), self._block)
        return self._terms_of(block, at + 1)[at]

    def with_prefix(self, prefix: str, limit: int = 5000) -> list[str]:
        """Terms starting with ``prefix`` (for "did you mean" suggestions)."""
        key = prefix.encode()
        position = self._lower_bound(key)
        out: list[str] = []
        block, at = divmod(position, self._block)
        while block < self._n_blocks and len(out) < limit:
            for term in self._terms_of(block)[at:]:
                if not term.startswith(key) or len(out) >= limit:
                    return out
                out.append(term.decode())
            block, at = block + 1, 0
        return out

    def plain(self) -> tuple[bytes, np.ndarray]:
        """Every term whole, each followed by a newline, and where each starts (int64):
        decoded in ``VOCAB_BLOCK`` vectorised steps (a delta's, for its bigrams and a match
        against another main segment: decoded once)."""
        if self._plain is None:
            self._plain = self._decode_all()
        return self._plain

    def _decode_all(self) -> tuple[bytes, np.ndarray]:
        blob = self._blob
        data = np.frombuffer(blob, dtype=np.uint8) if len(blob) else np.zeros(0, np.uint8)
        return self._decode(data, np.asarray(self._shared, dtype=np.int64))

    def _decode(self, data: np.ndarray, shared: np.ndarray) -> tuple[bytes, np.ndarray]:
        """``plain`` of whole blocks' front-coded bytes (``data``) and their terms' shared
        byte counts (``shared``): every block, or a few (``ids_of``)."""
        n = len(shared)
        ends = np.flatnonzero(data == 10)
        starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)[:n]
        suffix = ends - starts
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(shared + suffix + 1, out=offsets[1:])
        # Each term's own bytes (and newline) sit after its shared ones, in order.
        marks = np.zeros(int(offsets[-1]) + 1, dtype=np.int8)
        cut = np.flatnonzero(shared > 0)
        marks[offsets[cut]] = 1
        marks[offsets[cut] + shared[cut]] = -1
        own = np.cumsum(marks[:-1], dtype=np.int8) == 0
        out = np.empty(int(offsets[-1]), dtype=np.uint8)
        out[own] = data
        # The shared bytes, copied from the previous term: the second term of every block,
        # then the third...
        for step in range(1, self._block):
            terms = np.arange(step, n, self._block)
            terms = terms[shared[terms] > 0]
            count = shared[terms]
            within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
            out[np.repeat(offsets[terms], count) + within] = out[
                np.repeat(offsets[terms - 1], count) + within
            ]
        return out.tobytes(), offsets

    def ids_of(self, blob: bytes, offsets: np.ndarray) -> np.ndarray:
        """Each term of a plain blob (``plain``'s form)'s id here (int64, -1: not there),
        as ``id_of`` finds it, vectorised: one search of the blocks' first terms, the
        blocks found decoded, then a bisection in each term's block. A delta's writer
        matches its terms so (hashing the whole 872k main vocabulary took 3 s)."""
        out = np.full(len(offsets) - 1, -1, dtype=np.int64)
        if not self.size or not len(out):
            return out
        vocab = np.frombuffer(self._blob, dtype=np.uint8)
        heads = np.asarray(self._heads, dtype=np.int64)
        newlines = np.flatnonzero(vocab == 10)  # the n-th ends term n
        head_lengths = newlines[np.arange(0, self.size, self._block)] - heads[:-1]
        terms = np.frombuffer(blob, dtype=np.uint8)
        lengths = np.diff(np.asarray(offsets, dtype=np.int64)) - 1
        width = int(max(lengths.max(), head_lengths.max(), 1))
        wanted = _fixed_width(terms[terms != 10], lengths, width)
        firsts = _fixed_width(vocab[_ranges(heads[:-1], head_lengths)], head_lengths, width)
        # The last block whose first term is <= the term (-1: before them all).
        block = np.searchsorted(firsts, wanted, "right") - 1
        asked = np.flatnonzero(block >= 0)
        blocks = unique(block[asked])
        keep = np.zeros(self._n_blocks, dtype=bool)
        keep[blocks] = True
        ids = (blocks[:, None] * self._block + np.arange(self._block)).ravel()
        ids = ids[ids < self.size]
        # Those blocks decoded as ``_decode_all`` decodes them all (each starts whole).
        data = vocab[np.repeat(keep, np.diff(heads))]
        plain, found = self._decode(data, np.asarray(self._shared, dtype=np.int64)[ids])
        plain = np.frombuffer(plain, dtype=np.uint8)
        found_lengths = np.diff(found) - 1
        width = max(width, int(found_lengths.max()))  # a longer term inside a block
        wanted = wanted[asked].astype(f"S{width}")

        def terms_at(at: np.ndarray) -> np.ndarray:
            return _fixed_width(
                plain[_ranges(found[at], found_lengths[at])], found_lengths[at], width
            )

        # Each term's first position in its block's decoded terms whose term is >= it.
        lo = np.searchsorted(blocks, block[asked]) * self._block
        end = np.minimum(lo + self._block, len(ids))
        hi = end.copy()
        for _ in range(self._block.bit_length()):
            go = np.flatnonzero(lo < hi)
            if not len(go):
                break
            mid = (lo[go] + hi[go]) // 2
            less = terms_at(mid) < wanted[go]
            lo[go[less]] = mid[less] + 1
            hi[go[~less]] = mid[~less]
        hit = np.flatnonzero(lo < end)
        hit = hit[terms_at(lo[hit]) == wanted[hit]]
        out[asked[hit]] = ids[lo[hit]]
        return out


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``start .. start + length - 1`` of every range, one after the other."""
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + within


def _fixed_width(data: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """Byte strings (``data``: their bytes one after the other, ``lengths``) as one numpy
    ``S<width>`` array, NUL-padded: numpy compares them as ``bytes`` does (no term holds a
    NUL), so a sorted vocabulary stays sorted and ``np.searchsorted`` finds terms in it."""
    out = np.zeros((len(lengths), width), dtype=np.uint8)
    out[np.arange(width) < lengths[:, None]] = data
    return out.view(f"S{width}").ravel()


class Segment:
    """One immutable segment, opened with mmap; shared by every generation that names it."""

    def __init__(self, directory: Path, verify: bool = True):
        """Open the segment at ``directory``; raises ``IndexDamaged`` when it fails its manifest.

        Sizes are always checked; ``verify`` also compares every file's CRC-32 (reading the
        whole segment once, which also warms the page cache the mmaps will use).
        """
        self.directory = Path(directory)
        self.name = self.directory.name
        try:
            self.meta = json.loads((self.directory / "meta.json").read_text())
        except FileNotFoundError:
            raise IndexDamaged(f"{self.name}/meta.json is missing") from None
        if self.meta.get("format") != FORMAT_VERSION:
            raise ValueError("index format changed")
        #: A delta's writer stores each of its terms' id in the main segment it was written
        #: against (``main_terms.npy``, -1: not there), so readers need not match vocabularies.
        self.main_name: str | None = self.meta.get("main")
        self._files = (*_FILES, "main_terms.npy") if self.main_name else _FILES
        stats = self._check(verify)
        # Files read whole (not mapped) need no check per lookup: a change under them
        # cannot reach this process.
        mapped = [i for i, name in enumerate(self._files) if name not in _READ_WHOLE]
        self._stats = [stats[i][1:] for i in mapped]
        self._paths = [os.path.join(self.directory, self._files[i]) for i in mapped]
        #: The mapped files, held open: ``intact`` asks each for its size and mtime by
        #: ``fstat`` (no path to resolve, a third of a ``stat``'s cost). Opened now, right
        #: after ``_check``: a file replaced since then is not the inode checked.
        self._fds = _open_all(self._paths, [stats[i][0] for i in mapped])
        weakref.finalize(self, _close_all, self._fds)
        # Plain ndarray views of the mmaps: numpy.memmap's Python-level __getitem__ costs more
        # than a lookup's own work.
        arrays = {
            name: np.load(
                self.directory / f"{name}.npy",
                mmap_mode=None if f"{name}.npy" in _READ_WHOLE else "r",
            )
            for name in _ARRAYS
        }
        arrays = {name: np.asarray(values) for name, values in arrays.items()}
        self.n_docs = int(self.meta["documents"])
        self.n_terms = int(self.meta["terms"])
        self.xt_indices = arrays["xt_indices"]
        #: Where each term's inverted list starts (and, one further, ends) in ``xt_*``.
        self.xt_indptr = self.list_ptr = arrays["xt_indptr"]
        #: The postings of each list in each of its blocks but the last (``_block_sizes``),
        #: a byte each, the larger ones beside (``_pack_block_sizes``).
        self.xt_blocks = arrays["xt_blocks"]
        self._wide_block_at, self._wide_blocks = _split_keys(arrays["xt_wide_blocks"], np.int64)
        self.blocks, self.block = int(self.meta["blocks"]), int(self.meta["block"])
        if not 0 < self.block <= 1 << 16 or self.blocks != _blocks_of(self.n_docs, self.block):
            raise IndexDamaged(f"{self.name}/meta.json: its blocks do not match its papers")
        if len(self.xt_indptr) != self.n_terms + 1:
            raise IndexDamaged(f"{self.name}/xt_indptr.npy does not match its vocabulary")
        #: The first paper of each block but the first; whether blocks are 65,536 papers.
        self._firsts = np.arange(1, self.blocks, dtype=np.int64) * self.block
        self._wraps = self.block == 1 << 16
        #: Sparse block sizes (``_sparse_block_sizes``) at three blocks or more: which blocks
        #: each list has (a bit each) and where every ``_MASK_GROUP``-th list's sizes start.
        self.xt_block_masks = arrays["xt_block_masks"]
        self.xt_block_starts = arrays["xt_block_starts"]
        kind = _mask_type(self.blocks)
        self._sparse = kind is not None
        if self._sparse:
            stored = self.xt_block_masks.dtype == kind and len(self.xt_block_masks) == self.n_terms
            if not stored or len(self.xt_block_starts) != -(-self.n_terms // _MASK_GROUP):
                raise IndexDamaged(f"{self.name}/xt_block_*.npy do not match its vocabulary")
        elif len(self.xt_blocks) != self.n_terms * (self.blocks - 1):
            raise IndexDamaged(f"{self.name}/xt_blocks.npy does not match its vocabulary")
        nnz = int(self.xt_indptr[-1])
        if len(self.xt_indices) != nnz or len(arrays["xt_data"]) != -(-nnz // 2):
            raise IndexDamaged(f"{self.name}/xt_*.npy do not match its postings")
        #: Each posting's count (``_Counts``: four bits each, the larger ones beside).
        counts = np.dtype(self.meta["counts"])
        self.xt_data = _Counts(arrays["xt_data"], arrays["xt_escaped"], counts).sized(nnz)
        #: How many distinct terms each paper has (``_doc_sizes``).
        self.doc_sizes = arrays["doc_sizes"]
        if len(self.doc_sizes) != self.n_docs:
            raise IndexDamaged(f"{self.name}/doc_sizes.npy does not match its papers")
        self.rowids = arrays["rowids"]
        self.years = arrays["years"]
        self.venue_codes = arrays["venue_codes"]
        self.venues: list[str] = self.meta["venues"]
        with open(self.directory / "vocab.bin", "rb") as handle:
            blob = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if self.n_terms else b""
        vocab_block = int(self.meta["vocab_block"])
        shared, heads = arrays["vocab_shared"], arrays["vocab_heads"]
        if len(shared) != self.n_terms or len(heads) != -(-self.n_terms // vocab_block) + 1:
            raise IndexDamaged(f"{self.name}/vocab_*.npy do not match its vocabulary")
        self.vocab = Vocabulary(blob, shared, heads, vocab_block)
        self._main_terms = (
            np.load(self.directory / "main_terms.npy", mmap_mode="r") if self.main_name else None
        )
        if self._main_terms is not None and len(self._main_terms) != self.n_terms:
            raise IndexDamaged(f"{self.name}/main_terms.npy does not match its vocabulary")
        self.df = np.diff(self.list_ptr).astype(np.int32)
        self._bigram = None

    def tf(self, start: int, end: int) -> np.ndarray:
        """The term frequencies (float32) of postings [start, end) of ``xt``."""
        return self.xt_data.tf_span(start, end)

    def tf_at(self, positions: np.ndarray) -> np.ndarray:
        """The term frequencies (float32) of these postings of ``xt``."""
        return self.xt_data.tf_at(positions)

    def _sizes(self, terms: np.ndarray) -> np.ndarray:
        """How many postings the lists of these terms have in each block: len(terms) x
        blocks (int64)."""
        if self._sparse:
            return self._sparse_sizes(np.asarray(terms, dtype=np.int64))
        blocks, ptr = self.blocks, self.xt_indptr
        sizes = np.empty((len(terms), blocks), dtype=np.int64)
        entries = terms[:, None] * (blocks - 1) + np.arange(blocks - 1)
        sizes[:, :-1] = self.xt_blocks[entries]
        wide = sizes[:, :-1] == _WIDE_BLOCK
        if wide.any():
            found = self._wide_block_at.searchsorted(entries[wide])
            sizes[:, :-1][wide] = self._wide_blocks[found]
        sizes[:, -1] = np.asarray(ptr[terms + 1], dtype=np.int64) - ptr[terms]
        sizes[:, -1] -= sizes[:, :-1].sum(axis=1)
        return sizes

    def _wide_size(self, entry: int) -> int:
        """A block size over a byte, kept beside (``_pack_block_sizes``)."""
        return int(self._wide_blocks[self._wide_block_at.searchsorted(entry)])

    def _size_offsets(self, terms: np.ndarray) -> np.ndarray:
        """Where each of these lists' stored sizes start in ``xt_blocks`` (sparse layout):
        its group's start plus the sizes of the lists before it in its group; terms close
        together are summed in one pass over their span."""
        if not len(terms):
            return np.zeros(0, np.int64)
        group = _MASK_GROUP
        lo, hi = int(terms.min()) // group * group, int(terms.max()) + 1
        starts = np.asarray(self.xt_block_starts[terms // group], dtype=np.int64)
        if hi - lo <= group * len(terms):
            counts = _stored_sizes(self.xt_block_masks[lo:hi])
            before = np.cumsum(counts) - counts
            first = before[terms // group * group - lo]
            return starts + before[terms - lo] - first
        firsts = terms // group * group
        window = np.minimum(firsts[:, None] + np.arange(group), self.n_terms - 1)
        counts = _stored_sizes(self.xt_block_masks[window.ravel()]).reshape(window.shape)
        counts[np.arange(group)[None, :] >= (terms - firsts)[:, None]] = 0
        return starts + counts.sum(axis=1)

    def _sparse_sizes(self, terms: np.ndarray) -> np.ndarray:
        """``_sizes`` from the sparse layout, vectorised."""
        blocks, ptr = self.blocks, self.xt_indptr
        masks = self.xt_block_masks[terms].astype(np.uint64)
        full = ((masks[:, None] >> np.arange(blocks, dtype=np.uint64)) & np.uint64(1)).astype(bool)
        rank = np.cumsum(full, axis=1) - 1
        stored = full & (rank < full.sum(axis=1)[:, None] - 1)
        entries = (self._size_offsets(terms)[:, None] + rank)[stored]
        values = np.asarray(self.xt_blocks[entries], dtype=np.int64)
        wide = np.flatnonzero(values == _WIDE_BLOCK)
        if len(wide):
            values[wide] = self._wide_blocks[self._wide_block_at.searchsorted(entries[wide])]
        sizes = np.zeros((len(terms), blocks), dtype=np.int64)
        sizes[stored] = values
        last = full & ~stored
        total = np.asarray(ptr[terms + 1], dtype=np.int64) - ptr[terms]
        sizes[last] = (total - sizes.sum(axis=1))[last.any(axis=1)]
        return sizes

    def _sparse_bounds(self, term: int, a: int, b: int) -> list[int]:
        """``_list_bounds`` from the sparse layout: a list in one block needs no sizes."""
        blocks = self.blocks
        mask = int(self.xt_block_masks[term])
        if not mask & (mask - 1):  # one block (or none: an empty list)
            last = mask.bit_length() - 1 if mask else blocks - 1
            return [a] * (last + 1) + [b] * (blocks - last)
        first = term // _MASK_GROUP * _MASK_GROUP
        offset = int(self.xt_block_starts[term // _MASK_GROUP])
        for before in self.xt_block_masks[first:term].tolist():
            if before & (before - 1):
                offset += before.bit_count() - 1
        n_stored = mask.bit_count() - 1
        sizes = self.xt_blocks[offset : offset + n_stored].tolist()
        bounds, at, k = [a], a, 0
        for block in range(blocks - 1):
            if mask >> block & 1:
                if k < n_stored:
                    size = sizes[k]
                    at += self._wide_size(offset + k) if size == _WIDE_BLOCK else size
                    k += 1
                else:  # the list's last block: the rest of it
                    at = b
            bounds.append(at)
        bounds.append(b)
        return bounds

    #: Lists whose ``_list_bounds`` a segment keeps (a lookup asks for the same few lists
    #: again and again: about 20 calls for a MaxScore one); past it the kept ones are dropped.
    BOUNDS_KEPT = 4096

    def _list_bounds(self, term: int) -> list[int]:
        """Where one list's blocks start, then its end, as Python ints (summed in Python:
        a numpy call per lookup step costs more than the few additions); kept per term,
        since a segment never changes (callers only read it)."""
        kept = self.__dict__.get("_bounds_kept")
        if kept is None:
            kept = self._bounds_kept = {}
        bounds = kept.get(term)
        if bounds is None:
            if len(kept) >= self.BOUNDS_KEPT:
                kept.clear()
            bounds = kept[term] = self._read_bounds(term)
        return bounds

    def _read_bounds(self, term: int) -> list[int]:
        """``_list_bounds`` read from the segment's arrays."""
        a, b = self.xt_indptr[term : term + 2].tolist()
        if self.blocks == 1:
            return [a, b]
        if self._sparse:
            return self._sparse_bounds(term, a, b)
        if self.blocks == 2:  # 65,537 to 131,072 papers: one size
            size = int(self.xt_blocks[term])
            if size == _WIDE_BLOCK:
                size = int(self._wide_blocks[self._wide_block_at.searchsorted(term)])
            return [a, a + size, b]
        bounds = [a]
        first = term * (self.blocks - 1)
        for k, size in enumerate(self.xt_blocks[first : first + self.blocks - 1].tolist()):
            if size == _WIDE_BLOCK:
                size = int(self._wide_blocks[self._wide_block_at.searchsorted(first + k)])
            a += size
            bounds.append(a)
        bounds.append(b)
        return bounds

    def docs(self, term: int, end: int) -> np.ndarray:
        """The document numbers (int32) of the inverted lists of terms [term, end), in order:
        each posting's low 16 bits plus its block's start, known from ``xt_blocks``."""
        blocks, ptr = self.blocks, self.xt_indptr
        if blocks > 1 and end - term == 1:  # one list: add each block's start to its slice
            bounds = self._list_bounds(term)
            a = bounds[0]
            docs = self.xt_indices[a : bounds[-1]].astype(np.int32)
            for block in range(1, blocks):
                if bounds[block + 1] > bounds[block]:
                    docs[bounds[block] - a : bounds[block + 1] - a] += block * self.block
            return docs
        a, b = int(ptr[term]), int(ptr[end])
        docs = self.xt_indices[a:b].astype(np.int32)
        if blocks > 1 and b > a:
            sizes = self._sizes(np.arange(term, end, dtype=np.int64)).ravel()
            first = np.tile(np.arange(blocks, dtype=np.int32) * self.block, end - term)
            docs += np.repeat(first, sizes)
        return docs

    def run_docs(self, term: int, end: int) -> np.ndarray:
        """``docs(term, end)`` for a pass over every list (``_posting_chunks``), from the
        sparse layout: the lists' stored block sizes are one run of ``xt_blocks`` (read in
        one slice) and the lists' non-empty blocks the set bits of their masks in order, so
        each posting gets its block's start by one ``repeat`` (``_sizes`` makes a row of
        every block for every list: 20% slower at 872k, measured)."""
        if not self._sparse or end - term < 2:
            return self.docs(term, end)
        ptr = np.asarray(self.xt_indptr[term : end + 1], dtype=np.int64)
        docs = self.xt_indices[ptr[0] : ptr[-1]].astype(np.int32)
        masks = np.ascontiguousarray(self.xt_block_masks[term:end])
        width = masks.itemsize * 8
        bits = np.flatnonzero(np.unpackbits(masks.view(np.uint8), bitorder="little"))
        if not len(bits):
            return docs
        lists, blocks = bits // width, bits % width  # each list's non-empty blocks
        # A list's last non-empty block stores no size: the rest of the list.
        last = np.ones(len(lists), dtype=bool)
        last[:-1] = lists[1:] != lists[:-1]
        first = int(self._size_offsets(np.asarray([term], dtype=np.int64))[0])
        stored = np.asarray(self.xt_blocks[first : first + len(lists) - int(last.sum())])
        stored = stored.astype(np.int64)
        wide = np.flatnonzero(stored == _WIDE_BLOCK)
        if len(wide):
            stored[wide] = self._wide_blocks[self._wide_block_at.searchsorted(wide + first)]
        sizes = np.zeros(len(lists), dtype=np.int64)
        sizes[~last] = stored
        within = np.cumsum(sizes)  # minus the sizes of earlier lists: the last block's start
        ends = within[last]
        sizes[last] = np.diff(ptr)[lists[last]] - (ends - np.r_[0, ends[:-1]])
        docs += np.repeat((blocks * self.block).astype(np.int32), sizes)
        return docs

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        """One term's list: (document numbers as intp, ready to index with; term frequencies,
        float32), its bounds read once."""
        bounds = self._list_bounds(term)
        a, b = bounds[0], bounds[-1]
        docs = self.xt_indices[a:b].astype(np.intp)
        for block in range(1, self.blocks):
            if bounds[block + 1] > bounds[block]:
                docs[bounds[block] - a : bounds[block + 1] - a] += block * self.block
        return docs, self.xt_data.tf_span(a, b)

    def gathered_docs(self, terms: np.ndarray) -> np.ndarray:
        """``docs`` of these terms' lists (in this order), concatenated."""
        terms = np.asarray(terms, dtype=np.int64)
        if len(terms) == 1:
            return self.docs(int(terms[0]), int(terms[0]) + 1)
        blocks, ptr = self.blocks, self.xt_indptr
        pairs = zip(ptr[terms].tolist(), ptr[terms + 1].tolist(), strict=True)
        spans = [self.xt_indices[a:b] for a, b in pairs]
        docs = np.concatenate(spans or [self.xt_indices[:0]]).astype(np.int32)
        if blocks > 1 and len(terms):
            first = np.tile(np.arange(blocks, dtype=np.int32) * self.block, len(terms))
            docs += np.repeat(first, self._sizes(terms).ravel())
        return docs

    def find(self, term: int, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which of ``docs`` (ascending) the term's list has, their posting positions): a
        bisection in the block each document falls in, comparing 16-bit halves, so a long
        list is never decoded (only a few of its pages are touched). Over more than
        ``FIND_BLOCKS`` blocks, ``find_all``'s one pass over the papers' blocks costs less
        than a step per block here (16 papers at 872k: 30 against 70 us)."""
        docs = np.asarray(docs, dtype=np.int64)
        if self.blocks > FIND_BLOCKS:
            hits, places = self.find_all([term], docs)
            return hits[0], places[0]
        n = len(docs)
        bounds = self._list_bounds(term)
        cuts = [0, n] if self.blocks == 1 else [0, *docs.searchsorted(self._firsts).tolist(), n]
        hit = positions = None
        for block in range(self.blocks):
            lo, hi = cuts[block], cuts[block + 1]
            a, b = bounds[block], bounds[block + 1]
            if hi <= lo or b <= a:
                continue
            lows = self.xt_indices[a:b]
            wanted = docs[lo:hi]
            # A paper's low half is its number cast to 16 bits when blocks are 65,536 papers.
            if block and not self._wraps:
                wanted = wanted - block * self.block
            needles = wanted.astype(np.uint16)
            at = lows.searchsorted(needles)
            np.minimum(at, b - a - 1, out=at)
            found = lows[at] == needles
            at += a
            if lo == 0 and hi == n:  # every paper in this one block
                return found, at
            if hit is None:
                hit, positions = np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
            hit[lo:hi] = found
            positions[lo:hi] = at
        if hit is None:
            return np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
        return hit, positions

    def find_terms(self, terms: np.ndarray, doc: int) -> tuple[np.ndarray, np.ndarray]:
        """``find`` of one document in many terms' lists (a paper's own ~200 terms): which
        of the lists have it, and where (its posting positions). The lists' slices in the
        document's block are bisected together, a step for all of them at a time (about
        17 numpy steps, where a ``find`` per term is a few numpy calls per term)."""
        terms = np.asarray(terms, dtype=np.int64)
        block = int(np.searchsorted(self._firsts, doc, side="right")) if self.blocks > 1 else 0
        needle = doc if self._wraps or not block else doc - block * self.block
        needle = np.uint16(needle & 0xFFFF)
        starts = np.asarray(self.xt_indptr[terms], dtype=np.int64)
        if self.blocks > 1:
            sizes = self._sizes(terms)
            starts += sizes[:, :block].sum(axis=1)
            ends = starts + sizes[:, block]
        else:
            ends = np.asarray(self.xt_indptr[terms + 1], dtype=np.int64)
        indices = self.xt_indices
        lo, hi = starts, ends.copy()
        while True:
            going = lo < hi
            if not going.any():
                break
            mid = (lo + hi) >> 1
            less = going & (indices[np.minimum(mid, len(indices) - 1)] < needle)
            lo = np.where(less, mid + 1, lo)
            hi = np.where(going & ~less, mid, hi)
        hits = lo < ends
        hits[hits] = indices[lo[hits]] == needle
        return hits, lo

    def find_all(self, terms: list[int], docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``find`` for several terms (-1: none) and the same ``docs`` (ascending): (which
        of them each term's list has, their posting positions), rows in ``terms``' order.
        The docs' blocks and 16-bit halves are found once for all the terms; each term and
        block costs one bisection (``searchsorted``), its places within the block's slice
        of the list, all of them joined row by row (the layout of the answer) and moved to
        the list's start, clamped into it and compared with the halves in a few calls for
        all (every place is a candidate, a hit when its half matches, unless its list has
        no postings in that block): a numpy call per term and block, not three (those cost
        1.5-3 us each, the bisection of a few hundred papers about as much)."""
        docs = np.asarray(docs, dtype=np.int64)
        n = len(docs)
        if not n or not len(terms):
            return np.ones((len(terms), n), dtype=bool), np.zeros((len(terms), n), np.int64)
        if self.blocks == 1:
            spans = [(0, 0, n)]
        else:
            cuts = [0, *docs.searchsorted(self._firsts).tolist(), n]
            spans = [(k, cuts[k], cuts[k + 1]) for k in range(self.blocks) if cuts[k + 1] > cuts[k]]
        if self._wraps or self.blocks == 1:  # a paper's low half: its number cast to 16 bits
            needles = docs.astype(np.uint16)
        else:
            needles = np.empty(n, dtype=np.uint16)
            for k, lo, hi in spans:
                needles[lo:hi] = docs[lo:hi] - k * self.block
        indices = self.xt_indices
        if n > FIND_ALL_WIDE:
            return self._find_wide(terms, docs, spans, needles)
        parts = []  # each term's places in each block's slice, row by row
        starts, lasts = [], []  # each slice's first and last posting (last < first: empty)
        if len(spans) == 1:
            pieces = [(spans[0][0], 0, n, needles)]
        else:
            pieces = [(k, lo, hi, needles[lo:hi]) for k, lo, hi in spans]
        empty = False
        for term in terms:
            if term < 0:
                empty = True
                for _, lo, hi, _ in pieces:
                    parts.append(np.zeros(hi - lo, dtype=np.intp))
                    starts.append(0)
                    lasts.append(-1)
                continue
            bounds = self._list_bounds(term)
            for k, lo, hi, wanted in pieces:
                a, b = bounds[k], bounds[k + 1]
                starts.append(a)
                lasts.append(b - 1)
                if b > a:
                    parts.append(indices[a:b].searchsorted(wanted))
                else:
                    empty = True
                    parts.append(np.zeros(hi - lo, dtype=np.intp))
        places = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
        places = places.reshape(len(terms), n)
        # Each place moved by its slice's start and clamped to its end: a row per term,
        # its blocks' values repeated over their columns.
        if len(spans) == 1:
            firsts, ends = np.array(starts)[:, None], np.array(lasts)[:, None]
        else:
            sized = [hi - lo for _, lo, hi in spans]
            firsts = np.array(starts).reshape(len(terms), len(spans)).repeat(sized, axis=1)
            ends = np.array(lasts).reshape(len(terms), len(spans)).repeat(sized, axis=1)
        places += firsts
        np.minimum(places, ends, out=places)
        if empty:  # (a place -1 reads the last posting: a false hit, cleared below)
            np.maximum(places, 0, out=places)
        hits = indices.take(places) == needles
        if empty:
            hits &= ends >= firsts
        return hits, places

    def _find_wide(self, terms, docs, spans, needles) -> tuple[np.ndarray, np.ndarray]:
        """``find_all`` for many papers (``FIND_ALL_WIDE``): each term and block's
        bisection moved and clamped straight into place (three numpy calls, no array of
        all the places joined, repeated or copied again: those passes cost more than the
        calls they save when the places are many)."""
        n = len(docs)
        hits = np.ones((len(terms), n), dtype=bool)
        places = np.zeros((len(terms), n), dtype=np.int64)
        indices = self.xt_indices
        for row, term in enumerate(terms):
            if term < 0:
                hits[row] = False
                continue
            bounds = self._list_bounds(term)
            for k, lo, hi in spans:
                a, b = bounds[k], bounds[k + 1]
                if b > a:
                    at = indices[a:b].searchsorted(needles[lo:hi])
                    at += a
                    np.minimum(at, b - 1, out=places[row, lo:hi])
                else:
                    hits[row, lo:hi] = False  # (no postings in the block)
        hits &= indices.take(places) == needles  # (the rest: candidates, compared)
        return hits, places

    def main_terms(self, main: Segment) -> np.ndarray:
        """Each of this (delta) segment's terms' id in ``main`` (int64, -1: not there): as its
        writer stored it, or matched here when it was written against another main."""
        if self._main_terms is not None and self.main_name == main.name:
            return np.asarray(self._main_terms, dtype=np.int64)
        return main.vocab.ids_of(*self.vocab.plain())

    def rows(self, terms: np.ndarray) -> sp.csr_matrix:
        """The posting lists of these terms (in this order) with their term frequencies, as a
        len(terms) x documents matrix: what a lookup multiplies, gathered in one copy."""
        terms = np.asarray(terms, dtype=np.int64)
        if not len(terms):  # (no term of the queries in this segment: a delta of new words)
            return sp.csr_matrix((0, self.n_docs), dtype=np.float32)
        starts = np.asarray(self.list_ptr[terms], dtype=np.int64)
        ends = np.asarray(self.list_ptr[terms + 1], dtype=np.int64)
        lengths = ends - starts
        # int32 offsets when they fit: scipy then skips a scan of the arrays for their range.
        wide = int(lengths.sum()) >= 1 << 31
        indptr = np.zeros(len(terms) + 1, dtype=np.int64 if wide else np.int32)
        np.cumsum(lengths, out=indptr[1:])
        indices = self.gathered_docs(terms)
        if len(terms) == 1:
            counts = self.xt_data.span(int(starts[0]), int(ends[0]))
        else:
            pairs = zip(starts.tolist(), ends.tolist(), strict=True)
            counts = np.concatenate([self.xt_data.span(a, b) for a, b in pairs])
        data = sublinear(counts)
        return sp.csr_matrix((data, indices, indptr), shape=(len(terms), self.n_docs), copy=False)

    def doc_terms(
        self, docs: np.ndarray, chunk: int = 1 << 20
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(how many terms each, their term ids, their weighted counts) of these documents,
        concatenated in the given order, each document's ids ascending.

        There is no forward index (it took as many bytes as the inverted one): one pass
        over every inverted list, about ``chunk`` postings at a time, keeps these papers'
        postings. Costs the same for one paper as for thousands (``Index._doc_terms``
        reads a few papers from their text instead).
        """
        docs = np.asarray(docs, dtype=np.int64)
        distinct = unique(docs)
        # Each wanted paper's rank among them (-1: not wanted), in the narrowest type: the
        # postings found are sorted by it (a radix sort for 16 bits).
        kind = np.int16 if len(distinct) < 1 << 15 else np.int32
        rank = np.full(self.n_docs, -1, dtype=kind)
        rank[distinct] = np.arange(len(distinct), dtype=kind)
        # A posting holds its paper's low bits: a table of those flags the postings worth
        # decoding (a small table, read in cache); their blocks then tell the papers apart.
        flagged = np.zeros(self.block, dtype=bool)
        flagged[distinct % self.block] = True
        indptr = np.asarray(self.list_ptr, dtype=np.int64)
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for term, end, a, b in _posting_chunks(indptr, self.n_terms, chunk):
            lows = self.xt_indices[a:b]
            hit = np.flatnonzero(flagged[lows])
            if not len(hit):
                continue
            # Each posting's (list, block) run in the chunk: its term, and its block's start.
            if self.blocks > 1:
                sizes = self._sizes(np.arange(term, end, dtype=np.int64)).ravel()
            else:
                sizes = np.diff(indptr[term : end + 1])
            run = np.searchsorted(np.cumsum(sizes), hit, side="right")
            listed = lows[hit].astype(np.int64)
            if self.blocks > 1:
                listed += run % self.blocks * self.block
            owner = rank[listed]
            keep = owner >= 0
            found.append((owner[keep], term + run[keep] // self.blocks, hit[keep] + a))
        owner, terms, position = (
            np.concatenate([f[k] for f in found]) if found else np.zeros(0, np.int64)
            for k in range(3)
        )
        # Postings come by term; a stable sort by paper keeps each paper's terms ascending.
        order = np.argsort(owner, kind="stable")
        terms, position = terms[order], position[order]
        ends = np.cumsum(np.bincount(owner, minlength=len(distinct)))
        at = np.searchsorted(distinct, docs)
        lengths = (ends - np.concatenate([[0], ends[:-1]]))[at] if len(distinct) else ends[at]
        starts = ends[at] - lengths
        before = np.cumsum(lengths) - lengths
        picked = np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()))
        return lengths, terms[picked], self.xt_data.at(position[picked])

    def _check(self, verify: bool) -> list[tuple[int, int, int]]:
        """Each file's (inode, size, mtime), after checking it against the manifest."""
        manifest = self.meta.get("files")
        if not isinstance(manifest, dict) or set(manifest) != set(self._files):
            raise IndexDamaged(f"{self.name}: its manifest is missing or incomplete")
        stats = []
        for name in self._files:
            path = self.directory / name
            try:
                st = path.stat()
            except FileNotFoundError:
                raise IndexDamaged(f"{self.name}/{name} is missing") from None
            expected = manifest[name]
            if st.st_size != expected["size"]:
                raise IndexDamaged(
                    f"{self.name}/{name} is {st.st_size:,} bytes, "
                    f"its manifest says {expected['size']:,}"
                )
            if verify and file_checksum(path) != expected["crc32"]:
                raise IndexDamaged(f"{self.name}/{name} does not match its checksum")
            stats.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return stats

    def intact(self) -> bool:
        """Whether the files opened are unchanged: same size and mtime each (``fstat`` of
        the open files; a file replaced or removed under its name is noticed through
        CURRENT, see ``Index.intact``, and leaves the mapped one as it was).

        A file truncated under the mmap would otherwise kill the process (SIGBUS) when a
        lookup reads past its new end.
        """
        fstat = os.fstat
        try:
            for fd, (size, mtime) in zip(self._fds, self._stats, strict=True):
                st = fstat(fd)
                if st.st_size != size or st.st_mtime_ns != mtime:
                    return False
        except OSError:
            return False
        return True

    def bigram_terms(self) -> np.ndarray:
        """Which of the segment's terms are bigrams (contain a space), vectorized."""
        if self._bigram is None:
            blob, offsets = self.vocab.plain()
            data = np.frombuffer(blob, dtype=np.uint8) if len(blob) else np.zeros(0, np.uint8)
            spaces = np.flatnonzero(data == 32)
            owner = np.searchsorted(offsets, spaces, side="right") - 1
            flags = np.zeros(self.n_terms, dtype=bool)
            flags[owner] = True
            self._bigram = flags
        return self._bigram


class _GenerationVocabulary:
    """The generation's terms: the main segment's, then terms only deltas have (unigrams)."""

    def __init__(self, main: Segment, extra_terms: list[str], live: np.ndarray | None):
        self._main = main.vocab
        self._n_main = main.n_terms
        self._extra = extra_terms
        self._extra_ids = {t: self._n_main + i for i, t in enumerate(extra_terms)}
        self._live = live
        self.size = self._n_main + len(extra_terms)

    def id_of(self, term: str) -> int:
        """The term's id, or -1 when no (live) paper contains it."""
        tid = self._main.id_of(term)
        if tid < 0:
            tid = self._extra_ids.get(term, -1)
        return tid if tid >= 0 and (self._live is None or self._live[tid]) else -1

    def ids_of_query(self, terms: Sequence[str]) -> list[int]:
        """``id_of`` of a query's terms, looked up together and remembered
        (``Vocabulary.ids_of_query``)."""
        ids = self._main.ids_of_query(terms)
        extra, live = self._extra_ids, self._live
        for k, tid in enumerate(ids):
            if tid < 0 and extra:
                tid = ids[k] = extra.get(terms[k], -1)
            if tid >= 0 and live is not None and not live[tid]:
                ids[k] = -1
        return ids

    @property
    def extra_terms(self) -> list[str]:
        """The terms only deltas have, in id order (after the main segment's)."""
        return self._extra

    def term(self, term_id: int) -> str:
        if term_id < self._n_main:
            return self._main.term(term_id)
        return self._extra[term_id - self._n_main]

    def with_prefix(self, prefix: str, limit: int = 5000) -> list[str]:
        """Terms starting with ``prefix`` (for "did you mean" suggestions)."""
        found = self._main.with_prefix(prefix, limit)
        found += [t for t in self._extra if t.startswith(prefix)]
        return [t for t in found if self.id_of(t) >= 0][:limit]


class Index:
    """The serving generation: every segment searched at once with one consistent ranking.

    Read-only and thread-safe: every query allocates its own buffers. Documents are numbered
    in rowid order over all segments (``rowids`` is sorted); a deleted document keeps a
    number but is never returned (``live``). Term ids are the main segment's, then the
    deltas' new unigrams.
    """

    def __init__(
        self,
        directory: Path,
        verify: bool = True,
        version: int | None = None,
        segments: dict[str, Segment] | None = None,
        current: dict | None = None,
    ):
        """Open the generation CURRENT names; raises ``IndexDamaged`` when a file fails its
        manifest. With ``version``, a generation of another corpus version is refused.
        ``segments`` (name -> Segment) are reused when intact: a new generation then costs
        only its new segments. ``current``: a generation about to be published (the writer
        computes its norms), instead of the one CURRENT names.
        """
        self.directory = Path(directory)
        self._current_path = os.path.join(self.directory, CURRENT)
        if current is None:
            st = os.stat(self._current_path)
            self._current_stat = (st.st_ino, st.st_size, st.st_mtime_ns)
            self.meta = read_current(self.directory)
        else:
            self._current_stat, self.meta = None, current
        if self.meta is None:
            raise ValueError("no index of this format")
        if version is not None and self.meta.get("corpus_version") != version:
            raise ValueError("index of another corpus version")
        cache = segments if segments is not None else {}
        self.segments: list[Segment] = []
        deleted: list[np.ndarray] = []
        self._deletion_stats = []
        for entry in self.meta["segments"]:
            segment = cache.get(entry["name"])
            if segment is None or not segment.intact():
                segment = Segment(self.directory / entry["name"], verify=verify)
            self.segments.append(segment)
            deleted.append(self._deletions(entry, verify))
        #: The corpus database beside the index (``index_dir_for``), if any: a few papers'
        #: vectors are read from their text (``_doc_terms``).
        name, self._database = self.directory.name, None
        if name.endswith(".index") and len(name) > len(".index"):
            database = self.directory.with_name(name[: -len(".index")])
            self._database = str(database) if database.is_file() else None
        self._readers = threading.local()
        self._assemble(
            deleted,
            self._stored("norms", verify),
            self._stored("deleted_df", verify),
            self._stored("delta_terms", verify),
            self._stored("extra_terms", verify),
        )
        #: Each term's highest ``tf / pivoted norm`` over the live papers (for MaxScore);
        #: None while the writer computes it (``best_impacts``).
        self.impacts = self._stored("impacts", verify)
        if self.impacts is not None and len(self.impacts) != self.n_terms:
            raise IndexDamaged(f"{self.meta['impacts']['file']} does not match its segments")
        #: The long lists' impact-ordered heads (``best_heads``; None: a generation written
        #: before them, or while the writer computes them).
        self.heads = self._stored("heads", verify, mapped=True)  # a lookup reads a few rows
        self._head_terms = None
        if self.heads is not None:
            if not _is_heads(self.heads):
                raise IndexDamaged(f"{self.meta['heads']['file']} is not a record of heads")
            self._head_terms = np.asarray(self.heads["term"][0], dtype=np.int64)
            # (plain arrays over the mapped file: a memmap's slice costs 2-5 us more, x 3 per
            # long list of a lookup)
            self._head_tails = np.asarray(self.heads["tail"][0])
            self._head_docs = np.asarray(self.heads["docs"][0])
            self._head_counts = np.asarray(self.heads["counts"][0])
            if len(self._head_terms) and self._head_terms[-1] >= self.n_terms:
                raise IndexDamaged(f"{self.meta['heads']['file']} does not match its segments")

    def _stored(self, key: str, verify: bool, mapped: bool = False) -> np.ndarray | None:
        """An array the generation's writer stored with it (None: not yet); ``mapped``:
        mapped read-only rather than read (shared pages, only those touched resident)."""
        info = self.meta.get(key)
        if not info:
            return None
        path = self.directory / info["file"]
        try:
            st = path.stat()
        except FileNotFoundError:
            raise IndexDamaged(f"{info['file']} is missing") from None
        if st.st_size != info["size"] or (verify and file_checksum(path) != info["crc32"]):
            raise IndexDamaged(f"{info['file']} does not match its manifest")
        return np.load(path, mmap_mode="r" if mapped else None)

    def _deletions(self, entry: dict, verify: bool) -> np.ndarray:
        info = entry.get("deleted")
        if not info:
            return np.zeros(0, np.int64)
        path = self.directory / info["file"]
        try:
            st = path.stat()
        except FileNotFoundError:
            raise IndexDamaged(f"{info['file']} is missing") from None
        if st.st_size != info["size"] or (verify and file_checksum(path) != info["crc32"]):
            raise IndexDamaged(f"{info['file']} does not match its manifest")
        self._deletion_stats.append((str(path), (st.st_ino, st.st_size, st.st_mtime_ns)))
        return np.load(path).astype(np.int64)

    def _match_terms(self) -> list[str]:
        """Each delta's terms' global ids (``_to_global``), and the terms only deltas have
        (unigrams: they get ids after the main segment's), matched here."""
        main = self.segments[0]
        n_main = main.n_terms
        extra_terms: list[str] = []
        extra_of_term: dict[str, int] = {}
        self._to_global: list[np.ndarray | None] = [None]
        keep_new_bigrams = int(main.meta.get("min_bigram_df", MIN_BIGRAM_DF)) <= 1
        for segment in self.segments[1:]:
            # A delta's writer stored where its terms are in the main segment; one written
            # against another main segment (none is served so) is matched by hashes here.
            to_global = segment.main_terms(main)
            found = to_global >= 0
            # Terms the main segment lacks: a new unigram gets an id; a new bigram waits for
            # the next full build, as the main segment only holds the bigrams it saw in
            # ``min_bigram_df`` papers (so a paper's score never depends on its segment).
            new = ~found if keep_new_bigrams else ~found & ~segment.bigram_terms()
            new = np.flatnonzero(new)
            for local in new.tolist():
                term = segment.vocab.term(local)
                gid = extra_of_term.get(term)
                if gid is None:
                    gid = extra_of_term[term] = n_main + len(extra_terms)
                    extra_terms.append(term)
                to_global[local] = gid
            self._to_global.append(to_global)
        return extra_terms

    def _stored_terms(self, delta_terms: np.ndarray, extra_blob: np.ndarray) -> list[str]:
        """``_match_terms`` as the generation's writer stored it (``delta_terms``)."""
        extra_terms = bytes(extra_blob).decode().split("\n") if len(extra_blob) else []
        sizes = [segment.n_terms for segment in self.segments[1:]]
        top = self.segments[0].n_terms + len(extra_terms)
        if (
            len(delta_terms) != sum(sizes)
            or int(delta_terms.max(initial=-1)) >= top
            or int(delta_terms.min(initial=-1)) < -1
        ):
            raise IndexDamaged(f"{self.meta['delta_terms']['file']} does not match its segments")
        self._to_global = [None]
        at = 0
        for size in sizes:
            self._to_global.append(np.asarray(delta_terms[at : at + size], dtype=np.int64))
            at += size
        return extra_terms

    def delta_terms(self) -> np.ndarray:
        """Every delta's terms' global ids (-1: a bigram the main segment lacks), one delta
        after another (int32), for the writer to store (``GENERATION_FILES``)."""
        ids = [np.asarray(to_global, dtype=np.int32) for to_global in self._to_global[1:]]
        return np.concatenate(ids) if ids else np.zeros(0, np.int32)

    def _assemble(
        self,
        deleted: list[np.ndarray],
        inverse_pivot: np.ndarray | None,
        deleted_df: np.ndarray | None = None,
        delta_terms: np.ndarray | None = None,
        extra_blob: np.ndarray | None = None,
    ) -> None:
        """Global term ids, document numbers, idf and pivoted norms over all segments (the
        norms, the deleted papers' document frequencies and the deltas' term ids are
        computed only when the generation has none stored: by its writer)."""
        main = self.segments[0]
        n_main = main.n_terms
        if delta_terms is not None and extra_blob is not None:
            extra_terms = self._stored_terms(delta_terms, extra_blob)
        else:
            extra_terms = self._match_terms()
        self.n_terms = n_main + len(extra_terms)
        # Documents: numbered in rowid order over all segments (a deleted copy of a paper
        # right after its live one), so ``rowids`` is sorted as with a single segment.
        sizes = [s.n_docs for s in self.segments]
        bases = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=bases[1:])
        self.n_docs = int(bases[-1])
        live = np.ones(self.n_docs, dtype=bool)
        self._live_local: list[np.ndarray | None] = []
        for segment, base, gone in zip(self.segments, bases, deleted, strict=False):
            live[base + gone] = False
            self._live_local.append(
                live[base : base + segment.n_docs].copy() if len(gone) else None
            )
        self.venues: list[str] = sorted({v for s in self.segments for v in s.venues})
        if len(self.segments) == 1:
            # One segment: its own mapped arrays (shared pages), not private copies.
            rowids, years = self.segments[0].rowids, self.segments[0].years
            venue_codes = self.segments[0].venue_codes
        else:
            rowids = np.concatenate([np.asarray(s.rowids) for s in self.segments])
            years = np.concatenate([np.asarray(s.years) for s in self.segments])
            code = {v: i for i, v in enumerate(self.venues)}
            venue_codes = np.concatenate(
                [
                    np.asarray([code[v] for v in s.venues], dtype=np.int32)[
                        np.asarray(s.venue_codes)
                    ]
                    if s.n_docs
                    else np.zeros(0, np.int32)
                    for s in self.segments
                ]
            )
        if len(self.segments) == 1:
            order = None
            self._global: list[np.ndarray] | None = None
            self._segment_of_doc = self._local_of_doc = None
        else:
            order = np.lexsort((~live, rowids))  # concatenated position of each document
            position = np.empty(self.n_docs, dtype=np.int64)
            position[order] = np.arange(self.n_docs)
            self._global = [position[bases[i] : bases[i + 1]] for i in range(len(sizes))]
            owner = np.repeat(np.arange(len(sizes), dtype=np.int16), sizes)
            self._segment_of_doc = owner[order]
            self._local_of_doc = (np.arange(self.n_docs) - bases[owner])[order]
        self._order = order
        self._bases = bases

        def arrange(values: np.ndarray) -> np.ndarray:
            return values if order is None else values[order]

        self.live = arrange(live)
        self.n_live = int(self.live.sum())
        self.rowids, self.years = arrange(rowids), arrange(years)
        self.venue_codes = arrange(venue_codes)
        self._live_docs: np.ndarray | None = None
        if self.n_live == self.n_docs:
            # Nothing deleted: ``rowids`` (sorted) finds the documents themselves.
            self._rowid_sorted, self._rowid_docs = self.rowids, None
        else:
            live_docs = self.live_docs()
            by_rowid = np.argsort(self.rowids[live_docs], kind="stable")
            self._rowid_sorted = self.rowids[live_docs][by_rowid]
            self._rowid_docs = live_docs[by_rowid]
        # Document frequencies summed over the segments, minus deleted documents (the main
        # segment's own array when there is nothing to add or take away).
        alone = len(self.segments) == 1 and not any(len(gone) for gone in deleted)
        df = main.df if alone else np.zeros(self.n_terms, dtype=np.int32)
        if not alone:
            df[:n_main] = main.df
        for segment, to_global in zip(self.segments[1:], self._to_global[1:], strict=True):
            ok = to_global >= 0  # (added where the delta's terms are: no pass over every term)
            np.add.at(df, to_global[ok], np.asarray(segment.df[ok], dtype=np.int32))
        if deleted_df is None:
            deleted_df = self._deleted_df(deleted)
        elif (
            deleted_df.ndim != 2 or len(deleted_df) != 2 or deleted_df[0].max(initial=-1) >= len(df)
        ):
            raise IndexDamaged(f"{self.meta['deleted_df']['file']} does not match its segments")
        #: (term ids, how many deleted papers have each): taken from the document frequencies.
        self.deleted_df = deleted_df
        df[deleted_df[0]] -= deleted_df[1]
        self.df = df
        # scikit-learn's smooth idf: ln((1 + n) / (1 + df)) + 1.
        # (in place: one temporary array, not four)
        idf = df.astype(np.float64)
        idf += 1.0
        np.divide(1.0 + self.n_live, idf, out=idf)
        np.log(idf, out=idf)
        idf += 1.0
        idf[df <= 0] = 0.0  # a term only deleted papers had is no term at all
        self.idf = idf.astype(np.float32)
        del idf
        #: Which terms some live paper has (None: all of them, as in a main segment alone).
        self.term_live = None if alone else df > 0
        self.vocab = _GenerationVocabulary(main, extra_terms, self.term_live)
        # Pivoted length normalization from these idfs: each document's norm, then the mean
        # over the live documents.
        self._idf_local: list[np.ndarray] = []
        norms = []
        for segment, to_global in zip(self.segments, self._to_global, strict=True):
            if to_global is None:
                local_idf = self.idf[:n_main]
            else:
                local_idf = np.where(to_global >= 0, self.idf[np.maximum(to_global, 0)], 0)
                local_idf = local_idf.astype(np.float32)
            self._idf_local.append(local_idf)
            if inverse_pivot is None:
                norms.append(_row_norms(segment, local_idf))
        if inverse_pivot is None:
            all_norms = arrange(np.concatenate(norms) if norms else np.zeros(0))
            mean = float(all_norms[self.live].mean()) if self.n_live else 1.0
            pivot = (1 - PIVOT_SLOPE) * mean + PIVOT_SLOPE * all_norms
            inverse_pivot = (1 / np.maximum(pivot, 1e-9)).astype(np.float32)
            inverse_pivot[~self.live] = 0
        elif len(inverse_pivot) != self.n_docs:
            raise IndexDamaged(f"{self.meta['norms']['file']} does not match its segments")
        #: 1 / pivoted norm of each document (0 for deleted ones).
        self.inverse_pivot = np.asarray(inverse_pivot, dtype=np.float32)
        self._best: tuple | None = None  # ``_impacts_and_heads``, once computed
        self._matrix_xt: sp.csr_matrix | None = None

    def _deleted_df(self, deleted: list[np.ndarray]) -> np.ndarray:
        """(term ids, how many of the deleted papers have each) as two int32 rows, the ids
        ascending: read from the segments' lists (``Segment.doc_terms``), once, by the
        generation's writer, which stores it (``deleted_df``)."""
        df = np.zeros(self.n_terms, dtype=np.int64)
        for i, (segment, gone) in enumerate(zip(self.segments, deleted, strict=True)):
            if len(gone):
                terms = segment.doc_terms(gone)[1]
                if self._to_global[i] is not None:
                    terms = self._to_global[i][terms]
                    terms = terms[terms >= 0]
                df += np.bincount(terms, minlength=self.n_terms)
        terms = np.flatnonzero(df)
        return np.stack([terms, df[terms]]).astype(np.int32)

    # -- freshness ---------------------------------------------------------------------------

    def intact(self) -> bool:
        """Whether this is still the published generation and its files the ones opened.

        Made before every lookup: False when another process published a new generation
        (reopen then) or a file was changed under the mmaps. CURRENT (and any deletions
        file) is ``stat``-ed by name; the segments' open files are ``fstat``-ed only when
        their inotify watch (``FileWatch``) saw an event since they were last found intact.
        """
        try:
            st = os.stat(self._current_path)
        except OSError:
            return False
        if (st.st_ino, st.st_size, st.st_mtime_ns) != self._current_stat:
            return False
        for path, expected in self._deletion_stats:
            try:
                st = os.stat(path)
            except OSError:
                return False
            if (st.st_ino, st.st_size, st.st_mtime_ns) != expected:
                return False
        watch = self._segment_watch()
        if watch is None:
            return self._segments_intact()
        return watch.settled() or watch.check(self._segments_intact)

    def _segments_intact(self) -> bool:
        return all(segment.intact() for segment in self.segments)

    def _segment_watch(self) -> FileWatch | None:
        """An inotify watch on the segments' open files, made on first use (None where there
        can be none): while it reports nothing, their 14 ``fstat``s per segment are skipped."""
        watch = self.__dict__.get("_watch", _UNMADE)
        if watch is _UNMADE:
            with _WATCH_LOCK:
                watch = self.__dict__.get("_watch", _UNMADE)
                if watch is _UNMADE:
                    fds = [fd for segment in self.segments for fd in segment._fds]
                    watch = self._watch = FileWatch.over(fds, str(self.directory))
        return watch

    @classmethod
    def load(
        cls,
        directory: Path,
        verify: bool = True,
        version: int | None = None,
        quiet: bool = False,
        segments: dict[str, Segment] | None = None,
    ) -> Index | None:
        """The published generation at ``directory``, or None if there is none, it is
        unreadable, damaged or (with ``version``) of another corpus version.

        A damaged index (see ``Segment._check``) is logged, one line, for the caller rebuilds
        it. A generation replaced while it was being opened (its old segments removed) is
        simply opened again as the new one.
        """
        for _attempt in range(5):
            before = _stat_key(Path(directory) / CURRENT)
            try:
                return cls(directory, verify=verify, version=version, segments=segments)
            except IndexDamaged as damage:
                if _stat_key(Path(directory) / CURRENT) != before:
                    continue
                if not quiet:
                    log.warning(
                        "The search index at %s is damaged (%s); rebuilding it.", directory, damage
                    )
                return None
            except (OSError, ValueError, KeyError, TypeError):
                if _stat_key(Path(directory) / CURRENT) != before:
                    continue
                return None
        return None

    @property
    def corpus_version(self) -> int:
        return int(self.meta["corpus_version"])

    def live_docs(self) -> np.ndarray:
        """Every document that is not deleted, in order (made on first use)."""
        if self._live_docs is None:
            self._live_docs = np.flatnonzero(self.live)
        return self._live_docs

    # -- queries -----------------------------------------------------------------------------

    def vectorize(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The query's TF-IDF vector (term ids, weights), transformed exactly like the papers."""
        counts: dict[int, int] = {}
        for tid in self.vocab.ids_of_query(terms) if terms else ():
            if tid >= 0:
                counts[tid] = counts.get(tid, 0) + 1
        if not counts:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        ids = np.fromiter(counts, dtype=np.int64, count=len(counts))
        if sum(counts.values()) == len(counts):  # every term once (most queries): 1 + ln 1 = 1
            weights = self.idf[ids]
        else:
            tf = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
            weights = (1.0 + np.log(tf)) * self.idf[ids]
        # ``np.linalg.norm``'s own steps for a vector (the same bits), without its checks.
        weights /= np.sqrt(weights.dot(weights))
        return ids, weights

    def _local(self, i: int, term_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in term_ids, the segment's own term ids) of the terms segment i has."""
        to_global = self._to_global[i]
        if to_global is None:
            at = np.flatnonzero(term_ids < self.segments[0].n_terms)
            return at, term_ids[at]
        inverse = self._inverse_maps()[i]
        keys, values = inverse
        pos = np.minimum(np.searchsorted(keys, term_ids), max(len(keys) - 1, 0))
        at = np.flatnonzero(keys[pos] == term_ids) if len(keys) else np.zeros(0, np.int64)
        return at, values[pos[at]]

    def _inverse_maps(self) -> list[tuple[np.ndarray, np.ndarray] | None]:
        maps = getattr(self, "_inverse", None)
        if maps is None:
            maps = [None]
            for to_global in self._to_global[1:]:
                ok = np.flatnonzero(to_global >= 0)
                order = np.argsort(to_global[ok], kind="stable")
                maps.append((to_global[ok][order], ok[order]))
            self._inverse = maps
        return maps

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(live documents, final weights) of one term, documents ascending."""
        docs, values = [], []
        term = np.asarray([term_id], dtype=np.int64)
        for i, segment in enumerate(self.segments):
            at, local = self._local(i, term)
            if not len(at):
                continue
            own = int(local[0])
            start, end = int(segment.list_ptr[own]), int(segment.list_ptr[own + 1])
            seg_docs = segment.docs(own, own + 1).astype(np.int64)
            tf = segment.tf(start, end)
            if self._live_local[i] is not None:
                live = self._live_local[i][seg_docs]
                seg_docs, tf = seg_docs[live], tf[live]
            glob = self._to_docs(i, seg_docs)
            docs.append(glob)
            values.append(tf * self._idf_local[i][local[0]] * self.inverse_pivot[glob])
        if not docs:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if len(docs) == 1:
            return docs[0], values[0].astype(np.float32)
        docs, values = np.concatenate(docs), np.concatenate(values).astype(np.float32)
        order = np.argsort(docs, kind="stable")
        return docs[order], values[order]

    def best_impacts(self, chunk: int = 1 << 20) -> np.ndarray:
        """Each term's highest ``tf x 1 / pivoted norm`` over the live papers: a term's best
        possible contribution to a score is its query weight x idf x this (MaxScore's bound).
        A pass over every posting, a few terms' postings at a time; done by the writer,
        in the same pass as ``best_heads``."""
        return self._impacts_and_heads(chunk)[0]

    def best_heads(self) -> np.ndarray:
        """The head of every long list (more than ``HEAD_MIN`` postings over the segments):
        its ``HEAD`` live documents of highest impact (``tf x 1 / pivoted norm``), whose
        contributions a lookup adds exactly, and the highest impact of the rest (the
        tail's bound): champion lists (Brown, 1995; Persin et al., 1996).

        One record (``heads_type``) of columns, a row per long term, term ids ascending:
        the term, the tail's bound, the head's documents ascending and their counts
        (padded with count 0 when the term has fewer live documents); columns, so that a
        reader finds a term touching the terms' pages only. Done by the writer, once a
        generation, in ``best_impacts``' pass.
        """
        return self._impacts_and_heads()[1]

    def _impacts_and_heads(self, chunk: int = 1 << 20) -> tuple[np.ndarray, np.ndarray]:
        """``best_impacts`` and ``best_heads`` from one pass over the postings (kept): each
        long list's best ``HEAD`` + 1 live postings are taken in each segment while its
        impacts are at hand, and the head chosen among those (a second pass read the long
        lists again: 2.2 s of a 872k delta). The same bounds and tails as choosing over the
        whole lists; among papers of equal impact the head may take another one."""
        if self._best is not None and self._best[0] == chunk:
            return self._best[1]
        lengths = np.zeros(self.n_terms, dtype=np.int64)
        for segment, to_global in zip(self.segments, self._to_global, strict=True):
            sizes = np.diff(np.asarray(segment.list_ptr, dtype=np.int64))
            if to_global is None:
                lengths[: len(sizes)] += sizes
            else:
                ok = to_global >= 0
                np.add.at(lengths, to_global[ok], sizes[ok])
        long = np.flatnonzero(lengths > HEAD_MIN)
        heads = np.zeros(1, dtype=heads_type(len(long), HEAD))
        heads["term"][0] = long
        # Per long term, its best postings in each segment read so far: the deltas first,
        # so that a term's head is chosen as soon as the main segment's list is read and
        # only the deltas' (short) pieces wait.
        found: list[list | None] = [[] for _ in long]
        out = np.zeros(self.n_terms, dtype=np.float32)
        for i in reversed(range(len(self.segments))):
            segment, to_global = self.segments[i], self._to_global[i]
            indptr = np.asarray(segment.list_ptr, dtype=np.int64)
            offset = self._doc_offset(i)
            all_live = self._live_local[i] is None
            own = np.full(segment.n_terms, -1, dtype=np.int64)  # local term -> long row
            if to_global is None:
                own[long[long < segment.n_terms]] = np.flatnonzero(long < segment.n_terms)
            else:
                at = np.flatnonzero(to_global >= 0)
                rows = np.searchsorted(long, to_global[at])
                hit = rows < len(long)
                hit[hit] = long[rows[hit]] == to_global[at[hit]]
                own[at[hit]] = rows[hit]

            def impacts(
                run, i=i, segment=segment, indptr=indptr, own=own, offset=offset, live=all_live
            ):
                """A chunk's lists' best impacts, and its long lists' best postings (this
                segment's, bound: ``_in_order``'s threads compute them)."""
                term, end, a, b = run
                docs = segment.run_docs(term, end)
                if offset is None:
                    docs = self._global[i][docs]
                elif offset:
                    docs += offset
                values = segment.tf(a, b) * self.inverse_pivot[docs]
                rows = np.flatnonzero(np.diff(indptr[term : end + 1]) > 0)
                best = np.maximum.reduceat(values, indptr[term + rows] - a)
                pieces = []
                for local in (np.flatnonzero(own[term:end] >= 0) + term).tolist():
                    start, stop = int(indptr[local]) - a, int(indptr[local + 1]) - a
                    piece = _best_postings(segment, docs, values, start, stop, a, live)
                    pieces.append((int(own[local]), piece))
                return term, rows, best, pieces

            runs = _posting_chunks(indptr, segment.n_terms, chunk)
            for term, rows, best, pieces in _in_order(impacts, runs):
                for row, piece in pieces:
                    found[row].append(piece)
                    if i == 0:
                        _choose_head(heads, row, found[row])
                        found[row] = None
                rows = rows + term
                if to_global is not None:
                    rows = to_global[rows]
                    best, rows = best[rows >= 0], rows[rows >= 0]
                np.maximum.at(out, rows, best)
        for row, pieces in enumerate(found):
            if pieces is not None:  # a term the main segment lacks
                _choose_head(heads, row, pieces)
        self._best = chunk, (out, heads)
        return out, heads

    def _doc_offset(self, i: int) -> int | None:
        """What segment i's document numbers add to become the generation's, when they are
        one run there (new papers after the main segment's), else None (``_global``)."""
        if self._global is None:
            return 0
        numbers = self._global[i]
        if not len(numbers) or int(numbers[-1]) - int(numbers[0]) == len(numbers) - 1:
            return int(numbers[0]) if len(numbers) else 0  # ascending: one run
        return None

    def _head(self, term_id: int) -> tuple[np.ndarray, np.ndarray, float] | None:
        """(documents ascending, their tf, the tail's bound) of a long list's head, or None
        (a list short enough to read whole, or a generation without heads)."""
        terms = self._head_terms
        if terms is None or not len(terms):
            return None
        row = int(np.searchsorted(terms, term_id))
        if row == len(terms) or terms[row] != term_id:
            return None
        counts = self._head_counts[row]
        n = int(np.count_nonzero(counts))  # padding (count 0) only at the end
        docs = self._head_docs[row, :n].astype(np.intp)
        return docs, sublinear(counts[:n]), float(self._head_tails[row])

    def _from_heads(
        self, term_ids, own, weights, lengths, want: int, passes, coordinate: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents, final scores) among which are the ``want`` best, from the heads of
        the query's long lists and its short lists read whole; None when they do not settle
        it (the exhaustive product then runs).

        A document in none of them has, for each long list, at most that list's tail bound
        (x the term's weight): ``unseen``. The pool (every document read) gets bounds from
        what was read: its contributions so far, plus the tail bounds of the long lists
        whose head it is not in. Those whose upper bound reaches both the want-th best
        lower bound and ``unseen`` are scored exactly (``_scores_of_pool``); the answer
        stands when the want-th exact score is above ``unseen``.
        """
        if self._head_terms is None:
            return None
        n_query = len(weights)
        doc_parts, tf_parts, at_parts = [], [], []
        tails = np.zeros(n_query)  # each long list's weight x tail bound
        headed = np.zeros(n_query, dtype=bool)
        for position, term_id in enumerate(term_ids.tolist()):
            head = self._head(term_id)
            if head is not None:
                docs, tf, tail = head
                tails[position] = float(weights[position]) * tail
                headed[position] = True
                doc_parts.append(docs)
                tf_parts.append(tf)
            elif lengths[position] <= HEAD_MIN:
                for i, segment in enumerate(self.segments):
                    term = own[i][position]
                    if term < 0:
                        continue
                    docs, tf = segment.postings(term)
                    doc_parts.append(docs if self._global is None else self._global[i][docs])
                    tf_parts.append(tf)
                    at_parts.append(np.full(len(docs), position, dtype=np.intp))
                continue
            else:
                return None  # a long list without a head
            at_parts.append(np.full(len(docs), position, dtype=np.intp))
        if not doc_parts:
            return None
        docs = np.concatenate(doc_parts)
        order = np.argsort(docs, kind="stable")  # sorted runs: timsort merges them
        docs, at = docs[order], np.concatenate(at_parts)[order]
        contribution = weights[at] * np.concatenate(tf_parts)[order]  # as ``score`` adds them
        first = np.empty(len(docs), dtype=bool)
        first[0] = True
        np.not_equal(docs[1:], docs[:-1], out=first[1:])
        group = np.cumsum(first) - 1
        pool = docs[first]
        n_pool = len(pool)
        # Bounds of each pool document's final score (float64, margins for float32 rounding).
        partial = np.bincount(group, weights=contribution, minlength=n_pool)
        partial *= self.inverse_pivot[pool]
        matched = np.bincount(group, minlength=n_pool)
        missing = np.maximum(tails.sum() - np.bincount(group, tails[at], n_pool), 0.0)
        lower = partial * (1 - 1e-4)
        upper = (partial + missing) * (1 + 1e-4) + 1e-12
        unseen = tails.sum() * (1 + 1e-4) + 1e-12
        if coordinate:
            n_missing = int(headed.sum()) - np.bincount(group, headed[at], n_pool)
            lower *= np.square(matched / n_query)
            upper *= np.square(np.minimum((matched + n_missing) / n_query, 1.0))
            unseen *= (headed.sum() / n_query) ** 2  # it can have the long lists' terms only
        keep = None if getattr(passes, "keeps_all", False) else passes(pool)
        if self.n_live != self.n_docs:
            keep = self.live[pool] if keep is None else keep & self.live[pool]
        if keep is not None:
            lower[~keep] = -1.0
            upper[~keep] = -1.0
        if int(np.count_nonzero(lower >= 0)) < want:
            return None
        if float(np.partition(upper, n_pool - want)[n_pool - want]) <= unseen:
            return None  # the want-th exact score could not beat a document not read
        bar = max(float(np.partition(lower, n_pool - want)[n_pool - want]), unseen)
        found = ([], [])

        def score_exactly(chosen: np.ndarray) -> float:
            """Score ``pool[chosen]`` exactly (``_scores_of_pool``, which may leave out those
            that fall below the bar): the want-th best exact score so far."""
            docs, scores = self._scores_of_pool(
                pool, chosen, group, at, contribution, own, weights, tails, coordinate, bar
            )
            found[0].append(docs)
            found[1].append(scores)
            scores = np.concatenate(found[1])
            return (
                float(np.partition(scores, len(scores) - want)[-want])
                if len(scores) >= want
                else -1.0
            )

        chosen = upper >= bar
        if int(np.count_nonzero(chosen)) > EXACT_AT:
            # The likeliest first: their want-th exact score raises the bar for the rest.
            pick = min(int(np.count_nonzero(chosen)), want + want // 2 + 1)
            first = np.zeros(n_pool, dtype=bool)
            first[np.argpartition(-upper, pick - 1)[:pick]] = True
            bar = max(bar, score_exactly(first))
            chosen = (upper >= bar) & ~first
        kth = score_exactly(chosen)
        if kth <= unseen:
            return None
        return np.concatenate(found[0]), np.concatenate(found[1])

    def _scores_of_pool(
        self, pool, chosen, group, at, contribution, own, weights, tails, coordinate, bar
    ) -> tuple[np.ndarray, np.ndarray]:
        """The final scores of ``pool[chosen]``, bit for bit those of ``score``: each query
        term's weight x tf, from the postings read (``group``: their pool document, ``at``:
        their query position) or looked up in the long lists (bisection: all at once, or
        one at a time, largest ``tails`` first), added in the query's order, as the sparse
        product adds them; without the documents that score 0, and, when the lists are looked up one at a time (more
        than ``POOL_PAIRS`` pairs), without those whose upper bound falls below ``bar`` as
        they are (they cannot reach the top; scored, they stay below ``want`` others).
        """
        n_query = len(weights)
        rows = np.full(len(pool), -1, dtype=np.intp)
        docs = pool[chosen]
        rows[chosen] = np.arange(len(docs))
        terms = np.zeros((len(docs), n_query), dtype=np.float32)
        hit = np.zeros((len(docs), n_query), dtype=bool)
        row = rows[group]
        read = row >= 0
        terms[row[read], at[read]] = contribution[read]
        hit[row[read], at[read]] = True
        unread = tails > 0  # the long lists not looked up yet
        order = np.argsort(-tails, kind="stable")[: int(unread.sum())].tolist()
        if len(order) > 1 and 0 < len(docs) * len(order) <= POOL_PAIRS:
            self._look_up_all(own, order, weights, docs, terms, hit)
            order = []  # (no bound left to tighten: every list is looked up)
        for position in order:
            lacking = np.flatnonzero(~hit[:, position])
            for found, tf in self._found(own, position, docs[lacking]):
                row_of = np.searchsorted(docs, found)
                terms[row_of, position] = weights[position] * tf
                hit[row_of, position] = True
            unread[position] = False
            # Drop the documents that cannot reach the bar any more (bounds as in
            # ``_from_heads``: float64 with margins).
            absent = ~hit[:, unread]
            upper = terms.sum(axis=1, dtype=np.float64) * self.inverse_pivot[docs]
            upper = (upper + absent @ tails[unread]) * (1 + 1e-4) + 1e-12
            if coordinate:
                most = hit.sum(axis=1) + absent.sum(axis=1)
                upper *= np.square(np.minimum(most / n_query, 1.0))
            keep = upper >= bar
            if not keep.all():
                docs, terms, hit = docs[keep], terms[keep], hit[keep]
        total = np.zeros(len(docs), dtype=np.float32)
        for position in range(n_query):
            total += terms[:, position]
        out_docs, out_scores = [], []
        matched = hit.sum(axis=1, dtype=np.float32)
        self._finish(total, matched, docs, coordinate, n_query, out_docs, out_scores)
        return out_docs[0], out_scores[0]

    def top_candidates(
        self,
        term_ids: np.ndarray,
        weights: np.ndarray,
        want: int,
        passes: Callable[[np.ndarray], np.ndarray],
        coordinate: bool,
        budget: int = 1000,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents, final scores) among which are the ``want`` best, without walking every
        posting list: MaxScore (Turtle and Flood, 1995), term at a time.

        The terms are taken by their best possible contribution (``impacts``), highest
        first, and their lists added into per-thread accumulators (``_accumulators``): a
        touched document's partial sum x its share of the query's terms so far is a lower
        bound of its final score (every contribution is positive; coordination, x the
        squared share of the query's terms a document has, only lowers it), partial sum +
        the remaining terms' bounds an upper bound. Before a long list (``SHORT_LIST``) the
        bar (the want-th best lower bound) is raised by looking every document so far up in
        the remaining lists when there are few (``FULL_POOL``; undone, the bar kept, when
        that does not settle it and the next list is not long), else with the exact scores
        of the likeliest ones (more of them before a long list: ``MAX_PICK``). Once the bar is above what the remaining terms could give a
        document not seen yet, no new document can enter the top: the remaining lists are
        only looked up (bisection) for the documents that still could, which shrink as
        their bounds tighten. The few left are scored exactly (every query term, added in
        ``score``'s order, so the score is the same to the bit) and returned.

        A coordinated query of up to ``SHORTEST_TERMS`` terms is first tried from its
        shortest lists' papers alone (``_from_shortest``; when they do not settle it, they
        are MaxScore's first exact scores and bar). When even the likeliest term's lists
        are long (``LONG_LIST``), or a long list could still lift any document into the
        top, the long lists' heads are tried (``_from_heads``; first, for a query with many
        postings: ``HEADS_FIRST``). None
        (the exhaustive product is cheaper) when they do not settle it either, or for a
        query of more than ``MAX_PRUNED_TERMS`` terms. ``budget`` is unused (kept for
        callers).
        """
        term_ids = np.asarray(term_ids, dtype=np.int64)
        n_query = len(term_ids)
        if not n_query or n_query > MAX_PRUNED_TERMS:
            return None
        weights = np.asarray(weights, dtype=np.float32) * self.idf[term_ids]
        own = self._own_terms(term_ids)
        if len(self.segments) == 1 and -1 not in own[0]:  # one gather, no call per term
            lengths = self.segments[0].df[term_ids].tolist()
        else:
            lengths = [self._total_length(own, position) for position in range(n_query)]
        scored = None  # papers scored exactly already, and their scores
        if (
            coordinate
            and 1 < n_query <= SHORTEST_TERMS
            and self.impacts is not None
            and (n_query <= SHORTEST_FEW or sum(lengths) > ALL_LISTS)
        ):
            scored = self._from_shortest(term_ids, own, weights, lengths, want, passes)
            if scored is not None and scored[2]:
                return scored[0], scored[1]
        if sum(lengths) <= ALL_LISTS:
            return self._all_lists(own, weights, passes, coordinate)
        if self.impacts is None:
            return None
        bound = (weights.astype(np.float64) * self.impacts[term_ids]).tolist()
        order = sorted(range(n_query), key=lambda j: -bound[j])  # (stable, as ``argsort``)
        # What the terms from the j-th on could add at most (a margin for float rounding).
        rest = _rest_bounds([bound[j] for j in order])
        if lengths[order[0]] > LONG_LIST:  # even the likeliest term is common
            return self._from_heads(term_ids, own, weights, lengths, want, passes, coordinate)
        tried = sum(lengths) > HEADS_FIRST
        if tried:
            found = self._from_heads(term_ids, own, weights, lengths, want, passes, coordinate)
            if found is not None:
                return found
        seeds = np.zeros(0, np.float32)  # the shortest lists' papers' exact scores
        excluded = None  # and those papers, ascending: left out of MaxScore's pool
        if scored is not None:
            # Every paper with a rare term is scored exactly: the rare lists add nothing to
            # any other, so MaxScore walks the other terms only (coordination's n stays).
            seeds, excluded = scored[1], np.sort(scored[0], kind="stable")
            order = [position for position in order if position not in scored[3]]
            rest = _rest_bounds([bound[j] for j in order])
        n_steps = len(order)
        inverse_pivot = self.inverse_pivot
        whole = self.n_live == self.n_docs
        heads = self._head_terms is not None and not tried
        # No filter, no deletion, no paper left out: every fresh document is kept as it is.
        every_fresh = getattr(passes, "keeps_all", False) and whole and excluded is None
        acc, cnt = _accumulators(self.n_docs)
        touched: list[np.ndarray] = []  # every document added to, to zero them afterwards
        fresh_ok: list[np.ndarray] = []  # those that are live and pass the filters

        def add_list(position: int) -> None:
            """Add a term's whole lists (every segment) into the accumulators."""
            weight = weights[position]
            for i, segment in enumerate(self.segments):
                term = own[i][position]
                if term < 0:
                    continue
                # intp indices: numpy's gathers and scatters convert any other type first.
                docs, values = segment.postings(term)
                values *= weight
                if self._global is not None:
                    docs = self._global[i][docs]
                counts = cnt[docs]
                fresh = docs[counts == 0]
                counts += 1
                cnt[docs] = counts
                np.add.at(acc, docs, values)  # (numpy 2.4: 1.6x a fancy ``+=`` at 3,000)
                if len(fresh):
                    touched.append(fresh)
                    if every_fresh:
                        fresh_ok.append(fresh)
                        continue
                    keep = passes(fresh)
                    if not whole:
                        keep &= self.live[fresh]
                    if excluded is not None:
                        keep &= ~members(fresh, excluded)
                    fresh_ok.append(fresh[keep])

        def bounds(docs: np.ndarray, remaining: int, rest_bound: float):
            """(lower, upper) bounds of these documents' final scores (gathered with
            ``take``, worked out in place: the same float32 steps in the same order)."""
            partial = acc.take(docs)
            partial *= inverse_pivot.take(docs)
            if not coordinate:
                return partial * np.float32(1 - 1e-4), partial * (1 + 1e-4) + rest_bound
            matched = cnt.take(docs).astype(np.float32)
            share = matched / np.float32(n_query)
            lower = partial * share
            lower *= share
            lower *= np.float32(1 - 1e-4)
            most = matched
            most += remaining
            most /= n_query
            np.minimum(most, 1.0, out=most)
            upper = partial * (1 + 1e-4)
            upper += rest_bound
            upper *= most
            upper *= most
            return lower, upper

        # Scored exactly (the shortest lists' papers first, when tried: their bar too).
        known: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        if scored is not None:
            known[0].append(scored[0])
            known[1].append(scored[1])

        def score_exactly(docs: np.ndarray) -> np.ndarray:
            """Score these documents exactly (once each): every exact score so far."""
            if known[0]:
                scored = np.sort(np.concatenate(known[0]), kind="stable")
                docs = docs[~members(docs, scored)]
            found_docs, found_scores = self._exact_scores(docs, own, weights, coordinate)
            known[0].append(found_docs)
            known[1].append(found_scores)
            return np.concatenate(known[1])

        def kth(values: np.ndarray) -> float:
            if len(values) < want:
                return -1.0
            return float(np.partition(values, len(values) - want)[len(values) - want])

        def kth_lower(lower: np.ndarray) -> float:
            """The want-th best of the pool's lower bounds and the seeds' exact scores
            (different papers)."""
            return kth(np.concatenate((seeds, lower)) if len(seeds) else lower)

        try:
            # Whole lists, highest bound first, until no unseen document can reach the top.
            step, bar, candidates = 0, -1.0 if scored is None else kth(scored[1]), None
            while step < n_steps:
                add_list(order[step])
                step += 1
                if len(fresh_ok) > 1:
                    fresh_ok[:] = [np.concatenate(fresh_ok)]
                if not fresh_ok or len(fresh_ok[0]) + len(seeds) < want:
                    if step < n_steps and lengths[order[step]] > LONG_LIST and heads:
                        raise _Exhaustive  # a long list would fill the top: its head may
                    continue
                ok = fresh_ok[0]
                if step < n_steps and lengths[order[step]] <= SHORT_LIST:
                    continue  # the next list is cheaper to add than the bar to raise
                remaining = n_steps - step
                lower, upper = bounds(ok, remaining, rest[step])
                bar = max(bar, kth_lower(lower))
                unseen = rest[step] * (remaining / n_query) ** 2 if coordinate else rest[step]
                if step < n_steps and unseen >= bar and len(ok) > FULL_POOL:
                    # Raise the bar with the exact scores of the likeliest documents; more
                    # of them (rounds PICK_ROUNDS-fold larger, up to MAX_PICK) before a
                    # long list would leave the query to the heads or the product.
                    pick = want + want // 2 + 1
                    while True:
                        pick = min(len(ok), pick)
                        best = ok[np.argpartition(-upper, pick - 1)[:pick]]
                        bar = max(bar, kth(score_exactly(best)))
                        if unseen < bar or pick >= min(len(ok), MAX_PICK):
                            break
                        if lengths[order[step]] <= LONG_LIST:
                            break
                        pick *= PICK_ROUNDS
                if step < n_steps and unseen >= bar and len(ok) <= FULL_POOL:
                    # Few documents so far: look the remaining lists up for all of them.
                    # If that does not settle it and the next list is not long, their
                    # sums so far are put back and the list added whole (the raised bar
                    # kept: the product's way, not the heads', is then left for later).
                    saved = (acc[ok], cnt[ok]) if lengths[order[step]] <= LONG_LIST else None
                    self._add_found_all(own, order[step:], weights, ok, acc, cnt)
                    lower, upper = bounds(ok, 0, rest[n_steps])
                    bar = max(bar, kth_lower(lower))
                    if unseen < bar or saved is None:
                        step = n_steps
                    else:
                        acc[ok], cnt[ok] = saved
                        continue
                if unseen >= bar and (step == n_steps or lengths[order[step]] > LONG_LIST):
                    raise _Exhaustive  # common terms could still lift anyone
                if unseen < bar or step == n_steps:
                    candidates = ok[upper >= bar]
                    break
            if candidates is None:  # fewer than ``want`` documents pass at all
                candidates = fresh_ok[0] if fresh_ok else np.zeros(0, np.int64)
            # The remaining (long) lists: looked up for the candidates left, a term at a
            # time, dropping those whose upper bound falls below the bar.
            while step < n_steps and len(candidates) > EXACT_AT:
                position = order[step]
                if lengths[position] <= 2 * len(candidates):
                    add_list(position)
                else:
                    self._add_found(own, position, weights[position], candidates, acc, cnt)
                step += 1
                lower, upper = bounds(candidates, n_steps - step, rest[step])
                bar = max(bar, kth_lower(lower))
                candidates = candidates[upper >= bar]
            score_exactly(candidates)
            found = np.concatenate(known[0]), np.concatenate(known[1])
        except _Exhaustive:
            found = None
        except BaseException:
            _drop_accumulators()  # perhaps half-added: never reused
            raise
        if touched:
            everything = np.concatenate(touched)
            acc[everything] = 0
            cnt[everything] = 0
        if found is None and not tried:  # long lists could lift anyone: heads may settle it
            return self._from_heads(term_ids, own, weights, lengths, want, passes, coordinate)
        return found

    def _own_terms(self, term_ids: np.ndarray) -> list[list[int]]:
        """Per segment, each query position's own term id there (-1: the segment lacks it)."""
        n_query = len(term_ids)
        if len(self.segments) == 1:  # the main segment's own ids
            n_main = self.segments[0].n_terms
            return [[t if t < n_main else -1 for t in term_ids.tolist()]]
        own = []
        for at, local in (self._local(i, term_ids) for i in range(len(self.segments))):
            ids = [-1] * n_query
            for position, term in zip(at.tolist(), local.tolist(), strict=True):
                ids[position] = term
            own.append(ids)
        return own

    def _from_shortest(
        self, term_ids, own, weights, lengths: list[int], want: int, passes
    ) -> tuple[np.ndarray, np.ndarray, bool, list[int]] | None:
        """(documents, final coordinated scores) of the documents of the query's shortest
        lists (the rarer half of its terms, fewer if they are long), whether their
        ``want``-th best is above what any other document could score (then they hold the
        top; else MaxScore starts from them and their bar, over the other terms' lists only,
        or every list is read), and those terms' query positions; None when not worth
        trying.

        The rarer half is trimmed to ``SHORTEST_MAX`` postings, but not below the ``want``
        papers it must hold (then it is kept whole, up to ``SHORTEST_MOST``), nor below one
        list (up to ``SHORTEST_ONE``); trimmed and not settled, it is tried again whole (up to
        ``SHORTEST_AGAIN``). A query of more terms than ``SHORTEST_FEW`` declines when its
        rare lists are too few papers or too much work (``SHORTEST_PAPERS``, ``SHORTEST_WORK``).
        When every list would be read anyway (``ALL_LISTS``), it declines when the rarer
        half's postings x the query's terms (the bisections that scoring its papers, a retry
        included, may take) are more than the lists' postings: reading those is cheaper
        ('Zero-shot UAV Navigation' at 87k, 2,043 x 6 against 10,481: 1.14 -> 0.69 ms).

        A document in none of those lists has at most ``m`` of the other terms (``m`` <= the
        others' number), so at most their ``m`` highest bounds (weight x ``impacts``) x the
        squared share ``m / n``: when a query's rare terms (often its bigrams) are in
        enough good papers, those are scored exactly (``_exact_scores``, the same bits)
        without the common terms' lists being read whole.
        """
        n_query = len(lengths)
        half = sorted(range(n_query), key=lengths.__getitem__)[: n_query // 2]
        rare = list(half)
        postings = sum(lengths[j] for j in rare)
        if sum(lengths) <= ALL_LISTS and postings * n_query > sum(lengths):
            return None  # (scoring the rarer half's papers, a bisection per term, is more work)
        most = SHORTEST_MAX
        while len(rare) > SHORTEST_FEWEST and postings > SHORTEST_MAX:
            if postings - lengths[rare[-1]] < want:  # too few papers left to hold the top
                most = SHORTEST_MOST
                break
            postings -= lengths[rare.pop()]  # (fewer rare terms: a looser bound, fewer papers)
        if len(rare) <= SHORTEST_FEWEST:
            most = max(most, SHORTEST_ONE)
        if postings > most or postings * SHORTEST_SHARE > sum(lengths):
            return None
        if n_query > SHORTEST_FEW and (
            postings <= SHORTEST_PAPERS * want or postings * n_query > SHORTEST_WORK
        ):
            return None
        bounds = (weights.astype(np.float64) * self.impacts[term_ids]).tolist()
        docs = self._rare_papers(rare, own, passes)
        if len(docs) < want:
            return None
        docs, scores = self._exact_scores(docs, own, weights, True)
        settled = _above(scores, want, bounds, rare)
        if (
            not settled
            and len(rare) < len(half)
            and sum(lengths[j] for j in half) <= SHORTEST_AGAIN
        ):
            # The trimmed terms' papers too: a bound from fewer other terms, often enough.
            more = self._rare_papers(half[len(rare) :], own, passes)
            more = more[~members(more, np.sort(docs, kind="stable"))]
            more, more_scores = self._exact_scores(more, own, weights, True)
            docs, scores = np.concatenate((docs, more)), np.concatenate((scores, more_scores))
            rare = half
            settled = _above(scores, want, bounds, rare)
        return docs, scores, settled, rare

    def _rare_papers(self, rare: list[int], own, passes) -> np.ndarray:
        """The live papers that pass the filters in the lists of these query positions
        (generation numbers, ascending)."""
        parts = []
        for j in rare:
            for i, segment in enumerate(self.segments):
                term = own[i][j]
                if term >= 0:
                    docs = segment.docs(term, term + 1)
                    parts.append(
                        docs.astype(np.intp) if self._global is None else self._global[i][docs]
                    )
        if not parts:
            return np.zeros(0, np.intp)
        docs = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(parts) > 1:  # (sorted runs: one merge; ``np.unique`` costs 2.5x)
            docs = np.sort(docs, kind="stable")
            first = np.empty(len(docs), dtype=bool)
            first[0] = True
            np.not_equal(docs[1:], docs[:-1], out=first[1:])
            docs = docs[first]
        if not getattr(passes, "keeps_all", False):
            docs = docs[passes(docs)]
        if self.n_live != self.n_docs:
            docs = docs[self.live[docs]]
        return docs

    def _all_lists(
        self, own: list[list[int]], weights: np.ndarray, passes, coordinate: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """(documents, final scores) of every live document that has a query term and
        passes the filters, from the query's whole lists. For queries whose lists are
        short together (``ALL_LISTS``), where no bound or bar is worth its numpy calls.

        The lists are concatenated in the query's order and grouped by document with a
        sort, and each document's contributions summed one after the other from 0
        (``np.add.at``): in the query's order, as ``score``'s product adds them, so the
        scores are the same to the bit. A fixed number of numpy calls, whatever the
        number of terms, and no corpus-sized array touched.
        """
        n_query = len(weights)
        doc_parts, value_parts = [], []
        for position in range(n_query):
            for i, segment in enumerate(self.segments):
                term = own[i][position]
                if term < 0:
                    continue
                docs, values = segment.postings(term)
                if self._global is not None:
                    docs = self._global[i][docs]
                values *= weights[position]
                doc_parts.append(docs)
                value_parts.append(values)
        if not doc_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if len(doc_parts) == 1:  # one list: each document once
            docs, total = doc_parts[0], value_parts[0]
            # (One query term: no counts, its share is 1 for all; see below.)
            matched = np.ones(len(docs), dtype=np.intp) if coordinate and n_query > 1 else None
        else:
            # One sort of (document, posting) keys: the postings in document order, each
            # document's in the query's order (sorted runs: timsort merges them), without
            # an argsort's indirection and its gather of the documents.
            keys = np.concatenate(doc_parts)
            shift = len(keys).bit_length()
            keys <<= shift
            keys |= np.arange(len(keys))
            keys.sort(kind="stable")
            docs = keys >> shift
            order = keys
            order &= (1 << shift) - 1
            first = np.empty(len(docs), dtype=bool)
            first[0] = True
            np.not_equal(docs[1:], docs[:-1], out=first[1:])
            starts = np.flatnonzero(first)
            first[0] = False  # each posting's document's number among them: a cumsum
            total = np.zeros(len(starts), dtype=np.float32)
            np.add.at(total, np.cumsum(first), np.concatenate(value_parts).take(order))
            if coordinate:  # each document's run length (``np.diff`` costs 5 µs more)
                matched = np.empty_like(starts)
                matched[:-1] = starts[1:]
                matched[-1] = len(docs)
                matched -= starts
            else:
                matched = None
            docs = docs.take(starts)  # (``take``: a third cheaper than indexing)
        keep = None if getattr(passes, "keeps_all", False) else passes(docs)
        if self.n_live != self.n_docs:
            keep = self.live[docs] if keep is None else keep & self.live[docs]
        if not total.all():  # the product drops scores of 0: so does this
            keep = total != 0 if keep is None else keep & (total != 0)
        if keep is not None and not keep.all():
            docs, total = docs[keep], total[keep]
            matched = matched[keep] if matched is not None else None
        scores = total * self.inverse_pivot.take(docs)
        if coordinate and n_query > 1:  # x share x share, the share of each count looked up
            # (one query term: every share is 1, x 1 changes no bit)
            share = (np.arange(n_query + 1, dtype=np.float32) / np.float32(n_query)).take(matched)
            scores *= share
            scores *= share
        return docs, scores

    def _total_length(self, own: list[list[int]], position: int) -> int:
        """How many postings a query term has over the segments."""
        total = 0
        for i, segment in enumerate(self.segments):
            term = own[i][position]
            if term >= 0:
                total += int(segment.list_ptr[term + 1]) - int(segment.list_ptr[term])
        return total

    def _by_segment(self, docs: np.ndarray):
        """(segment number, its own document numbers ascending, the generation's) of docs."""
        if self._global is None:
            docs = np.sort(np.asarray(docs, dtype=np.int64), kind="stable")
            return [(0, docs, docs)] if len(docs) else []
        owner = self._segment_of_doc[docs]
        out = []
        for i in np.unique(owner).tolist():
            local = np.sort(self._local_of_doc[docs[owner == i]], kind="stable")
            out.append((i, local, self._global[i][local]))
        return out

    def _add_found(self, own, position: int, weight, docs: np.ndarray, acc, cnt) -> None:
        """Add one query term's contributions to these documents (bisection in its lists)."""
        for found, tf in self._found(own, position, docs):
            acc[found] += tf * weight
            cnt[found] += 1

    def _add_found_all(self, own, positions: list[int], weights, docs: np.ndarray, acc, cnt):
        """``_add_found`` of several query terms in turn, their bisections made at once per
        segment (``Segment.find_all``) and their contributions gathered in one call: each
        document's still added in the terms' order (a document is in one segment), its sum
        read and written back once."""
        for i, local, glob in self._by_segment(docs):
            segment = self.segments[i]
            hits, places = segment.find_all([own[i][p] for p in positions], local)
            # Each hit's weight: its row's, repeated over the row's hits (a mask takes them in
            # row-major order; a 2-D ``np.nonzero`` costs 7x a ``flatnonzero``).
            per_row = weights[np.asarray(positions)].repeat(hits.sum(axis=1))
            added = np.zeros(hits.shape, dtype=np.float32)
            added[hits] = segment.tf_at(places[hits]) * per_row
            sums = acc[glob]  # (distinct documents: one gather, one scatter)
            for row in range(len(positions)):
                sums += added[row]  # (+ 0 where a list lacks the document: the same bits)
            acc[glob] = sums
            cnt[glob] += hits.sum(axis=0, dtype=cnt.dtype)

    def _look_up_all(self, own, positions: list[int], weights, docs, terms, hit) -> None:
        """Fill in ``terms`` (weight x tf) and ``hit`` of these documents (``docs``, ascending:
        their rows) for the lists of the query terms at ``positions``, where not read
        already: one ``Segment.find_all`` per segment for every list, where a ``find`` per
        list costs its calls again (at 872k, 16 papers in 14 lists: 0.36 against 1.7 ms)."""
        columns = np.asarray(positions, dtype=np.intp)
        for i, local, glob in self._by_segment(docs):
            segment = self.segments[i]
            hits, places = segment.find_all([own[i][p] for p in positions], local)
            cells = np.ix_(np.searchsorted(docs, glob), columns)
            new = hits & ~hit[cells].T  # (a row per list, as ``find_all`` gives them)
            if not new.any():
                continue
            values = terms[cells].T
            # A mask takes them row by row: each list's weight repeated over its hits.
            values[new] = segment.tf_at(places[new]) * weights[columns].repeat(new.sum(axis=1))
            terms[cells] = values.T
            hit[cells] |= new.T

    def _found(self, own, position: int, docs: np.ndarray):
        """(the generation's numbers of those of ``docs`` whose list of query term
        ``position`` holds them, their tf), one pair per segment with any: bisection in the
        term's list of each segment (``Segment.find``)."""
        for i, local, glob in self._by_segment(docs):
            term = own[i][position]
            if term < 0:
                continue
            segment = self.segments[i]
            hit, at = segment.find(term, local)
            if hit.any():
                yield glob[hit], segment.tf_at(at[hit])

    def _exact_scores(
        self, docs: np.ndarray, own: list[list[int]], weights: np.ndarray, coordinate: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """These documents' final scores, bit for bit those of ``score`` (each query term's
        weight x tf added in the query's order, as the sparse product adds them), without
        the documents that score 0, found in each query term's lists by bisection (nearly
        flat in the number of documents: 30-500 us for 16-2,048 at 87k)."""
        out_docs, out_scores = [], []
        n_query = len(weights)
        for i, local, glob in self._by_segment(docs):
            segment = self.segments[i]
            # Each term's hits found first, their tf read in one call, x their row's weight
            # (0 where a list lacks the document), then added row by row.
            hits, places = segment.find_all(own[i], local)
            terms = np.zeros((n_query, len(local)), dtype=np.float32)
            terms[hits] = segment.tf_at(places[hits])
            terms *= weights[:, None]
            total = _rows_summed(terms)
            matched = hits.sum(axis=0, dtype=np.float32)
            self._finish(total, matched, glob, coordinate, n_query, out_docs, out_scores)
        if len(out_docs) == 1:
            return out_docs[0], out_scores[0]
        return _joined(out_docs, out_scores)

    def _finish(self, total, matched, glob, coordinate: bool, n_query: int, out_docs, out_scores):
        """Append the documents that scored (their summed ``total`` not 0) and their final
        scores: pivoted length normalisation, then the coordination factor if asked."""
        scores = total * self.inverse_pivot.take(glob)  # (float32 x float32: no cast)
        if not total.all():
            keep = total != 0
            scores, glob, matched = scores[keep], glob[keep], matched[keep]
        if coordinate:
            share = matched / np.float32(n_query)
            scores *= share
            scores *= share
        out_docs.append(glob)
        out_scores.append(scores)

    def score(self, term_ids: np.ndarray, weights: np.ndarray, matched: bool = False) -> tuple:
        """(documents, scores) of every live document sharing a term with the query, unordered;
        with ``matched``, also how many of the query's terms each has (float32, what
        ``matched_terms`` gives them), counted from the lists the product gathered.

        Per segment, a 1 x terms query vector (weights times idf) times the matrix of the
        query's own posting lists (gathered from the segment with their term frequencies):
        scipy's sparse product, in C; then each document's pivoted norm.
        """
        if not len(term_ids):
            empty = np.zeros(0, np.int32), np.zeros(0, np.float32)
            return (*empty, np.zeros(0, np.float32)) if matched else empty
        term_ids = np.asarray(term_ids, dtype=np.int64)
        weights = np.asarray(weights, dtype=np.float32) * self.idf[term_ids]
        all_docs, all_scores, all_counts = [], [], []
        for i, segment in enumerate(self.segments):
            at, local = self._local(i, term_ids)
            if not len(at):
                continue
            if len(at) == 1:  # one posting list: its scores are its weighted frequencies
                term = int(local[0])
                start, end = int(segment.list_ptr[term]), int(segment.list_ptr[term + 1])
                docs = segment.docs(term, term + 1)
                scores = segment.tf(start, end)
                scores *= weights[at[0]]
                nonzero = scores != 0
                if not nonzero.all():
                    docs, scores = docs[nonzero], scores[nonzero]
                counts = np.ones(len(docs), dtype=np.float32) if matched else None
            else:
                # The query's own posting lists, gathered: the same products, in the same
                # order, as over the whole matrix.
                query = sp.csr_matrix(
                    (weights[at], np.arange(len(at), dtype=np.int32), np.array([0, len(at)])),
                    shape=(1, len(at)),
                )
                rows = segment.rows(local)
                product = (query @ rows).tocsr()
                docs, scores = product.indices, product.data
                counts = None
                if matched:  # a list names a document once: its lists are its postings
                    counts = np.bincount(rows.indices, minlength=segment.n_docs)[docs]
                    counts = counts.astype(np.float32)
            if self._live_local[i] is not None:
                keep = self._live_local[i][docs]
                docs, scores = docs[keep], scores[keep]
                counts = counts[keep] if matched else None
            docs = self._to_docs(i, docs)
            all_docs.append(docs)
            all_scores.append((scores * self.inverse_pivot[docs]).astype(np.float32))
            all_counts.append(counts)
        if not all_docs:
            empty = np.zeros(0, np.int32), np.zeros(0, np.float32)
            return (*empty, np.zeros(0, np.float32)) if matched else empty
        joined = [
            parts[0] if len(parts) == 1 else np.concatenate(parts)
            for parts in (all_docs, all_scores, all_counts)[: 3 if matched else 2]
        ]
        return tuple(joined)

    def count_matching(
        self, term_ids: np.ndarray, passes: Callable[[np.ndarray], np.ndarray]
    ) -> int:
        """How many live documents have at least one of the terms and pass ``passes``: the
        ``total`` of ``score``'s candidates, without their scores. A pruned lookup that must
        say how many papers match (``Engine.search``) counts them so: the lists' documents
        marked in one array, where the exhaustive product would score every one of them."""
        term_ids = np.asarray(term_ids, dtype=np.int64)
        marked = np.zeros(self.n_docs, dtype=bool)
        for i, segment in enumerate(self.segments):
            local = self._local(i, term_ids)[1]
            if not len(local):
                continue
            docs = segment.gathered_docs(local)
            if self._live_local[i] is not None:
                docs = docs[self._live_local[i][docs]]
            marked[self._to_docs(i, docs)] = True
        if getattr(passes, "keeps_all", False):
            return int(np.count_nonzero(marked))
        return int(np.count_nonzero(passes(np.flatnonzero(marked))))

    def matched_terms(self, term_ids: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """How many of the terms each of ``docs`` contains.

        A few documents: bisection in each term's posting lists. Many: one bincount over them.
        """
        if not len(term_ids) or not len(docs):
            return np.zeros(len(docs), dtype=np.float32)
        if len(docs) <= 2_000:
            # Bisection in each list's pages (``Segment.find``): no list is decoded.
            docs = np.asarray(docs, dtype=np.int64)
            distinct = _distinct(docs)
            counts = np.zeros(len(distinct), dtype=np.float32)
            term_ids = np.asarray(term_ids, dtype=np.int64)
            for i, local, glob in self._by_segment(distinct):
                segment = self.segments[i]
                where = np.searchsorted(distinct, glob)
                for term in self._local(i, term_ids)[1].tolist():
                    counts[where] += segment.find(term, local)[0]
            if self.n_live != self.n_docs:
                counts[~self.live[distinct]] = 0  # a deleted paper matches nothing
            return counts[np.searchsorted(distinct, docs)]
        hits = np.concatenate([self.postings(t)[0] for t in term_ids.tolist()])
        return np.bincount(hits, minlength=self.n_docs)[docs].astype(np.float32)

    def docs_with_all(self, term_ids: Iterable[int]) -> np.ndarray:
        """Sorted document numbers containing every one of the terms (-1: none can)."""
        result: np.ndarray | None = None
        for tid in term_ids:
            if tid < 0:
                return np.zeros(0, np.int64)
            docs = np.asarray(self.postings(tid)[0])
            # Both ascending: ``intersect1d`` would sort them together again.
            result = docs if result is None else result[members(result, docs)]
            if not len(result):
                break
        return np.zeros(0, np.int64) if result is None else result

    def _to_docs(self, i: int, local: np.ndarray) -> np.ndarray:
        """Segment i's own document numbers as the generation's."""
        if self._global is None:
            return local.astype(np.int64)
        return self._global[i][local]

    def _segment_of(self, doc: int) -> tuple[int, int]:
        if self._segment_of_doc is None:
            return 0, doc
        return int(self._segment_of_doc[doc]), int(self._local_of_doc[doc])

    def _doc_terms(self, i: int, local: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Segment.doc_terms`` of segment i's papers: a few read from their text (each a
        few milliseconds), the rest (and any whose text no longer gives what the index
        holds) by a pass over the segment's lists (``Segment.doc_terms``)."""
        segment = self.segments[i]
        local = np.asarray(local, dtype=np.int64)
        found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        postings = int(segment.list_ptr[-1])
        if self._database is not None and 0 < len(local) * TEXT_POSTINGS < postings:
            found = self._terms_from_text(segment, local)
        rest = np.asarray(sorted(set(local.tolist()) - set(found)), dtype=np.int64)
        if len(rest):
            lengths, terms, counts = segment.doc_terms(rest)
            ends = np.cumsum(lengths).tolist()
            for doc, a, b in zip(rest.tolist(), [0, *ends[:-1]], ends, strict=True):
                found[doc] = terms[a:b], counts[a:b]
        pieces = [found[doc] for doc in local.tolist()]
        lengths = np.asarray([len(t) for t, _ in pieces], dtype=np.int64)
        if not pieces:
            return lengths, np.zeros(0, np.int64), segment.xt_data.at(np.zeros(0, np.int64))
        return (
            lengths,
            np.concatenate([t for t, _ in pieces]),
            np.concatenate([c for _, c in pieces]),
        )

    def _terms_from_text(
        self, segment: Segment, local: np.ndarray
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """(term ids ascending, weighted counts) of these papers of a segment, read from
        their text in the corpus: each field's distinct terms as the build finds them
        (``_paper_terms``: every bigram kept), those the segment's vocabulary holds looked
        up in their lists (the counts are the index's own, read there), and kept only when as many were found as the paper
        has (``doc_sizes``): a paper whose text changed since it was indexed, or is gone,
        is left out (the caller reads it from the lists)."""
        rowids = np.asarray(segment.rowids)[local]
        db = self._corpus_reader()
        if db is None:
            return {}
        try:
            documents = dict(Corpus(db).documents_of(rowids.tolist()))
        except Exception:  # noqa: BLE001
            log.debug("index: cannot read papers from %s", self._database, exc_info=True)
            self._readers.db = None
            db.close()
            return {}
        # Each paper's distinct terms, each looked up once in the vocabulary.
        terms_of = {rowid: _paper_terms(document) for rowid, document in documents.items()}
        vocabulary = sorted(set().union(*terms_of.values()))
        ids = dict(zip(vocabulary, segment.vocab.ids_of_terms(vocabulary).tolist(), strict=True))
        out = {}
        for doc, rowid in zip(local.tolist(), rowids.tolist(), strict=True):
            if rowid not in terms_of or doc in out:
                continue
            candidates = np.fromiter(map(ids.__getitem__, terms_of[rowid]), dtype=np.int64)
            candidates = np.sort(candidates[candidates >= 0])
            hits, positions = segment.find_terms(candidates, doc)
            if np.count_nonzero(hits) == int(segment.doc_sizes[doc]):
                out[doc] = candidates[hits], segment.xt_data.at(positions[hits])
        return out

    def _corpus_reader(self) -> Database | None:
        """This thread's read-only connection to the corpus beside the index (kept: opening
        one costs more than reading a paper), or None when it cannot be opened. One per
        thread and process, as sqlite3 connections are not shared across either."""
        db = getattr(self._readers, "db", None)
        if db is not None and self._readers.pid == os.getpid():
            return db
        try:
            db = connect(self._database, read_only=True)
        except Exception:  # noqa: BLE001  (no database to read: the lists answer)
            log.debug("index: cannot open %s; papers read from the lists", self._database)
            return None
        self._readers.db, self._readers.pid = db, os.getpid()
        return db

    def doc_vector(self, doc: int) -> tuple[np.ndarray, np.ndarray]:
        """A document's (term ids ascending, final weights)."""
        i, local = self._segment_of(doc)
        _, terms, counts = self._doc_terms(i, np.asarray([local]))
        values = term_frequencies(counts) * self._idf_local[i][terms]
        values *= self.inverse_pivot[doc]
        if self._to_global[i] is None:  # the main segment's ids: already ascending
            keep = values > 0
            return (terms, values) if keep.all() else (terms[keep], values[keep])
        terms = self._to_global[i][terms]
        keep = (terms >= 0) & (values > 0)
        terms, values = terms[keep], values[keep].astype(np.float32)
        order = np.argsort(terms, kind="stable")
        return terms[order], values[order]

    def doc_vectors(self, docs: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """``doc_vector`` of each of many documents (the same numbers), each segment's papers
        read together (``_doc_terms``: one pass over its lists): digests read thousands at
        once."""
        docs = np.asarray(docs, dtype=np.int64)
        out: list = [None] * len(docs)
        if self._segment_of_doc is None:
            owner, local = np.zeros(len(docs), np.int64), docs
        else:
            owner, local = self._segment_of_doc[docs], self._local_of_doc[docs]
        for i in range(len(self.segments)):
            at = np.flatnonzero(owner == i)
            if not len(at):
                continue
            lengths, terms, counts = self._doc_terms(i, local[at])
            values = term_frequencies(counts) * self._idf_local[i][terms]
            values *= np.repeat(self.inverse_pivot[docs[at]], lengths)
            to_global = self._to_global[i]
            positive = to_global is None and bool((values > 0).all())
            start = 0
            for position, end in zip(at.tolist(), np.cumsum(lengths).tolist(), strict=True):
                own, weights = terms[start:end], values[start:end]
                start = end
                if positive:  # the main segment's ids: already ascending
                    out[position] = own, weights
                    continue
                if to_global is None:
                    keep = weights > 0
                    out[position] = (own, weights) if keep.all() else (own[keep], weights[keep])
                    continue
                own = to_global[own]
                keep = (own >= 0) & (weights > 0)
                own, weights = own[keep], weights[keep].astype(np.float32)
                order = np.argsort(own, kind="stable")
                out[position] = own[order], weights[order]
        return out

    def contributions(
        self, docs: Sequence[int], term_ids: np.ndarray, weights: np.ndarray
    ) -> list[list[tuple[str, float]]]:
        """Which query terms gave each of these documents its score, largest first.

        Each query term's count in the documents is found by bisection in the term's own
        posting list (which the lookup has just read), once for all the documents of a
        segment, not from the papers' vectors: a lookup's "why" then never reads the
        papers' text nor passes over the lists. The weights are ``doc_vector``'s, to the
        bit; each term's name is decoded once.
        """
        term_ids = np.asarray(term_ids, dtype=np.int64)
        weights = np.asarray(weights).tolist()
        where = [self._segment_of(int(doc)) for doc in docs]
        out: list[list[tuple[str, float]]] = [[] for _ in where]
        names: dict[int, str] = {}
        for i in sorted({i for i, _ in where}):
            segment = self.segments[i]
            at, own = self._local(i, term_ids)
            needles = unique(np.asarray([local for j, local in where if j == i], np.int64))
            # (term, needle) -> weighted value, 0 where the paper lacks the term.
            values = np.zeros((len(at), len(needles)), dtype=np.float32)
            hits, positions = segment.find_all(own.tolist(), needles)
            if hits.any():
                idf = np.broadcast_to(self._idf_local[i][own][:, None], hits.shape)
                values[hits] = term_frequencies(segment.xt_data.at(positions[hits])) * idf[hits]
            for n, (j, local) in enumerate(where):
                if j != i:
                    continue
                column = values[:, int(np.searchsorted(needles, local))]
                column = column * self.inverse_pivot[int(docs[n])]
                found = out[n]
                for k, q in enumerate(at.tolist()):
                    if column[k] > 0:
                        tid = int(term_ids[q])
                        name = names.get(tid)
                        if name is None:
                            name = names[tid] = self.vocab.term(tid)
                        found.append((name, float(weights[q] * column[k])))
                found.sort(key=lambda item: -item[1])
        return out

    def doc_of_rowid(self, rowid: int) -> int | None:
        """The live document of a paper, or None."""
        pos = int(np.searchsorted(self._rowid_sorted, rowid))
        if pos < len(self._rowid_sorted) and int(self._rowid_sorted[pos]) == rowid:
            return pos if self._rowid_docs is None else int(self._rowid_docs[pos])
        return None

    def docs_of_rowids(self, rowids: Iterable[int]) -> np.ndarray:
        wanted = np.fromiter(rowids, dtype=np.int64)
        pos = np.searchsorted(self._rowid_sorted, wanted)
        pos = pos[pos < len(self._rowid_sorted)]
        pos = pos[np.isin(self._rowid_sorted[pos], wanted)]
        return np.sort(pos if self._rowid_docs is None else self._rowid_docs[pos])

    def score_matrix(self, queries: sp.csr_matrix) -> sp.csr_matrix:
        """Many queries at once (rows x terms, weights from ``vectorize``): rows x documents
        of scores, as ``score`` gives them one query at a time (digests score every topic so)."""
        parts = []
        queries = sp.csr_matrix(queries)
        scaled = queries.multiply(self.idf[None, :]).tocsr() if queries.nnz else queries
        for i, segment in enumerate(self.segments):
            if self._to_global[i] is None:
                local = scaled[:, : segment.n_terms]
            else:
                keys, values = self._inverse_maps()[i]
                select = sp.csr_matrix(
                    (np.ones(len(keys), np.float32), (keys, values)),
                    shape=(self.n_terms, segment.n_terms),
                )
                local = scaled @ select
            # Only the posting lists the queries use, their columns renumbered in order (each
            # row's terms stay in the order they were: the same sums to the bit).
            local = sp.csr_matrix(local)
            used = unique(local.indices)
            local = sp.csr_matrix(
                (
                    local.data.astype(np.float32),
                    np.searchsorted(used, local.indices).astype(np.int32),
                    local.indptr,
                ),
                shape=(local.shape[0], len(used)),
            )
            product = (local @ segment.rows(used)).tocsr()
            scale = self.inverse_pivot[self._to_docs(i, np.arange(segment.n_docs))]
            parts.append(product @ sp.diags(scale, format="csr"))
        out = sp.hstack(parts, format="csr") if parts else sp.csr_matrix((queries.shape[0], 0))
        if self._order is not None:
            out = out[:, self._order]
        out.eliminate_zeros()
        return out

    def matrix_xt(self) -> sp.csr_matrix:
        """The inverted index with final weights, terms x documents, as one scipy matrix
        (batch scoring). Assembled on first use for this generation: ``score_matrix`` does
        the same products without materializing it."""
        if self._matrix_xt is None:
            parts = []
            for i, segment in enumerate(self.segments):
                rows = np.repeat(np.arange(segment.n_terms, dtype=np.int64), segment.df)
                docs = self._to_docs(i, segment.docs(0, segment.n_terms))
                values = segment.tf(0, len(segment.xt_data)) * self._idf_local[i][rows]
                values = values * self.inverse_pivot[docs]
                if self._to_global[i] is not None:
                    rows = self._to_global[i][rows]
                keep = (rows >= 0) & (values > 0)
                parts.append((rows[keep], docs[keep], values[keep].astype(np.float32)))
            rows = np.concatenate([p[0] for p in parts])
            docs = np.concatenate([p[1] for p in parts])
            values = np.concatenate([p[2] for p in parts])
            matrix = sp.csr_matrix((values, (rows, docs)), shape=(self.n_terms, self.n_docs))
            matrix.sort_indices()
            self._matrix_xt = matrix
        return self._matrix_xt


#: Reading a paper's vector from its text (``Index._terms_from_text``, 4-6 ms) costs about
#: as much as this many postings of a pass over a segment's lists (5-10 ns each): fewer
#: papers than the segment's postings over this are read from their text (87k: 15; 872k: 157).
TEXT_POSTINGS = 1_000_000
#: Longer queries are scored exhaustively: ``top_candidates``' float margins assume fewer.
MAX_PRUNED_TERMS = 512
#: ``top_candidates`` adds every list whole, in the query's order, when they hold this few
#: postings together (``_all_lists``).
ALL_LISTS = 16384
#: ``top_candidates`` adds a list this short whole rather than first raising its bar.
SHORT_LIST = 2048
#: ... and leaves the query to the exhaustive product when a list this long could still
#: lift any document into the top (each posting costs more here than in that product).
LONG_LIST = 8192
#: ... unless this few documents are in the lists added so far: the others are then
#: looked up for them (bisection), and the query left only if that does not settle it.
FULL_POOL = 1024
#: ... and scores this few candidates exactly instead of looking up the next list for them.
EXACT_AT = 64
#: ``Index._scores_of_pool`` looks every long list up at once (``_look_up_all``) for at
#: most this many (paper, list) pairs, rather than a list at a time, dropping the papers
#: whose bound falls below the bar in between.
POOL_PAIRS = 4096
#: ``Segment.find`` of one list over more blocks than this is ``find_all``'s (at 2 blocks,
#: 87k, its own steps cost 0.55-0.9x; at 14, 872k, 1.3-2.3x).
FIND_BLOCKS = 2
#: ``Segment.find_all`` joins its places (fewer numpy calls) for up to this many papers
#: (past it, its three more passes over them cost more: 0.86x at 3,909, 1.25x at 521).
FIND_ALL_WIDE = 1024
#: Before a long list, the bar is raised with the exact scores of up to this many of the
#: likeliest documents (1.5 x want, then rounds this many times larger).
MAX_PICK = 1024
PICK_ROUNDS = 4
#: A list longer than this (over the segments) has a head (``best_heads``) ...
HEAD_MIN = 4096
#: ... of this many documents.
HEAD = 512
#: A query whose lists hold more postings than this together tries the heads before
#: MaxScore (whose cost grows with the lists' lengths, the heads' does not).
HEADS_FIRST = 200_000
#: ``_from_shortest`` is tried when the rarer half of the query's terms have at most 1 / this
#: of its postings, and at most ``SHORTEST_MAX`` (their papers are scored exactly: bisections
#: in every query term's lists; 2,000 papers take 1-3 ms) ...
SHORTEST_SHARE = 8
SHORTEST_MAX = 1024
#: ... or this many, when leaving a term out would leave fewer papers than the top asks for
#: (2 words and a bigram in 5 papers: without it MaxScore, 1.0-1.5 ms; with it 0.45-0.55)
SHORTEST_MOST = 4096
#: ... or this many, when one list is left (one rare word of 1,100-2,000 papers: MaxScore
#: 0.6-1.35 ms, scored 0.5-0.85; on the speed queries 8 of 9 such settle)
SHORTEST_ONE = 2048
#: A trimmed rarer half that does not settle the top is tried again whole when it has at
#: most this many postings: its papers not scored yet scored, and the bound of a paper in
#: none of its lists, tighter (fewer other terms). On the speed queries 3 of 3 then settle
#: ('zero-shot language learning' 1.69 -> 1.03 ms at load 7).
SHORTEST_AGAIN = 2048
#: (when the rarer half has more, its commonest terms are left out, down to this many)
SHORTEST_FEWEST = 1
#: ... for queries of at most this many terms (on the speed queries: 2-3 terms settle 90% of
#: the time, 5 (3 words, 2 bigrams) 85%, 7-8 most; on declining, every list or MaxScore) ...
SHORTEST_TERMS = 20
#: ... and for those of more terms than this (9-20: their exact scores bisect many lists)
#: only when it pays: not when every list is read anyway (``ALL_LISTS``), nor when the rare
#: lists hold at most ``SHORTEST_PAPERS`` papers per top place (their want-th best rarely
#: settles it), nor when scoring them takes over ``SHORTEST_WORK`` postings x terms. On the
#: 32 speed queries of 9-20 terms, 8 -> 20 this way: 'NLP: Speech' 1.11 -> 0.57 ms,
#: 'Computer Vision: Structural ...' (17 terms, 577 x 17) 1.39 -> 0.99; those over the work
#: cap ('Agent Theories and Models', 791 x 13) were 0.15-0.2 ms slower with it.
SHORTEST_FEW = 8
SHORTEST_PAPERS = 4
SHORTEST_WORK = 10_000


def heads_type(n: int, head: int) -> np.dtype:
    """``best_heads``' record: n terms, their tails' bounds, their heads' documents and
    counts (``head`` each), column after column."""
    return np.dtype(
        [
            ("term", "<i4", (n,)),
            ("tail", "<f4", (n,)),
            ("docs", "<i4", (n, head)),
            ("counts", "<u2", (n, head)),
        ]
    )


def _is_heads(stored: np.ndarray) -> bool:
    """Whether an array read from disk is one ``heads_type`` record."""
    names = stored.dtype.names
    if stored.shape != (1,) or names != ("term", "tail", "docs", "counts"):
        return False
    n, docs = stored.dtype["term"].shape, stored.dtype["docs"].shape
    return len(n) == 1 and len(docs) == 2 and stored.dtype == heads_type(n[0], docs[1])


_scratch = threading.local()
_UNMADE = object()  # ``Index._segment_watch`` not made yet
_WATCH_LOCK = threading.Lock()


def _accumulators(n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """This thread's (float32 partial sums, uint16 counts) over at least ``n_docs`` documents,
    all zero: ``top_candidates`` adds into them and zeroes what it touched, so a lookup pays
    for the documents it touches, not for a fresh array the size of the corpus."""
    sums = getattr(_scratch, "sums", None)
    if sums is None or len(sums) < n_docs:
        sums = _scratch.sums = np.zeros(n_docs, dtype=np.float32)
        _scratch.counts = np.zeros(n_docs, dtype=np.uint16)
    return sums, _scratch.counts


def _drop_accumulators() -> None:
    _scratch.sums = _scratch.counts = None


class _Exhaustive(Exception):
    """``top_candidates`` gives up: the exhaustive product is cheaper for this query."""


def members(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``ascending`` (sorted): ``np.isin`` by bisection, for
    lookups (``np.isin`` sorts both arrays every call: 25 µs for 16 numbers in 16, against
    2 here)."""
    if not len(ascending):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return ascending[at] == values


def _distinct(values: np.ndarray) -> np.ndarray:
    """``unique`` for a lookup's document numbers, which come in sorted runs (posting lists,
    pools built from them): numpy's stable sort (timsort for int64) merges runs in a few
    microseconds where its default sort takes 10-20x longer (49 against 3.9 µs for two
    lists of 1,800 numbers)."""
    return unique(values, kind="stable")


def _above(scores: np.ndarray, want: int, bounds: list[float], rare: list[int]) -> bool:
    """Whether the ``want``-th best of these scores is above what a paper in none of the
    ``rare`` query positions' lists could score: at most ``m`` of the other terms, so their
    ``m`` highest ``bounds`` x the squared share ``m / n``, maximised over ``m``."""
    if len(scores) < want:
        return False
    n_query = len(bounds)
    others = sorted((bounds[j] for j in range(n_query) if j not in rare), reverse=True)
    best, outside = 0.0, 0.0
    for m, bound in enumerate(others, start=1):
        best += bound
        outside = max(outside, best * (m / n_query) ** 2)
    outside = outside * (1 + 1e-4) + 1e-12  # (a margin for float rounding, as ``rest``)
    return bool(np.partition(scores, len(scores) - want)[-want] > outside)


def _rest_bounds(bounds: list[float]) -> list[float]:
    """What the terms from the j-th on could add at most, for every j and one past the
    last (0), with a margin for float rounding: summed from the last term back, in
    Python floats (the same float64 steps as ``np.cumsum``, without its five numpy calls)."""
    out = [0.0] * (len(bounds) + 1)
    total = 0.0
    for j in range(len(bounds) - 1, -1, -1):
        total += bounds[j]
        out[j] = total * (1 + 1e-4) + 1e-12
    out[-1] = 0.0 * (1 + 1e-4) + 1e-12
    return out


def _rows_summed(terms: np.ndarray) -> np.ndarray:
    """The rows of a C-ordered float32 matrix added one after the other from 0, as
    ``total += row`` in a loop adds them: numpy's reduction over the outer axis of two
    columns or more is that loop (each column summed in row order; pairwise summation
    is only along the inner axis), in one call rather than one per row (1-3 us each).
    One column (the axis dropped, the rows contiguous) is summed by the loop."""
    if terms.shape[1] >= 2 and terms.flags.c_contiguous:
        return np.add.reduce(terms, axis=0)
    total = np.zeros(terms.shape[1], dtype=terms.dtype)
    for row in terms:
        total += row
    return total


def _joined(docs: list[np.ndarray], scores: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-segment (documents, scores) pieces as one pair (empty when there are none)."""
    if not docs:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    return np.concatenate(docs), np.concatenate(scores)


def _row_norms(segment: Segment, idf: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
    """Each document's L2 norm of tf * idf: a pass over the inverted lists, a few terms'
    lists (about ``chunk`` postings) at a time, so the temporaries stay small at any corpus
    size; each document's squares are summed in term order."""
    indptr = np.asarray(segment.list_ptr, dtype=np.int64)
    out = np.zeros(segment.n_docs, dtype=np.float64)

    def squares(run: tuple[int, int, int, int]) -> np.ndarray:
        term, end, a, b = run
        weight = segment.tf(a, b)
        weight *= np.repeat(idf[term:end], np.diff(indptr[term : end + 1]))
        docs = segment.run_docs(term, end)
        return np.bincount(
            docs, weights=np.square(weight, dtype=np.float64), minlength=segment.n_docs
        )

    for summed in _in_order(squares, _posting_chunks(indptr, segment.n_terms, chunk)):
        out += summed
    return np.sqrt(np.maximum(out, 0))


def _in_order(function: Callable, items: Iterable, ahead: int = 4):
    """``map(function, items)`` computed by ``BUILD_PROCESSES`` threads, at most ``ahead``
    results waiting, given in order: a pass over the postings a chunk at a time on both
    cores (numpy lets the GIL go) whose results the caller combines in order (the same sums
    to the bit as one thread's). One item, or one core: in this thread."""
    items = iter(items)
    first = list(itertools.islice(items, 2))
    if BUILD_PROCESSES < 2 or len(first) < 2:
        yield from map(function, itertools.chain(first, items))
        return
    with ThreadPoolExecutor(BUILD_PROCESSES, thread_name_prefix="chunks") as pool:
        pending: list[Future] = []
        for item in itertools.chain(first, items):
            pending.append(pool.submit(function, item))
            if len(pending) >= ahead:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()


def _best_postings(
    segment: Segment, docs, values, start: int, stop: int, a: int, all_live: bool
) -> tuple:
    """(documents, counts, impacts, [cut]) of one list's live postings (``values[start:stop]``,
    its impacts, a chunk from posting ``a`` on) of which a head is chosen: the ``HEAD`` + 1
    best when there are more (the best ``HEAD`` over all segments, and the highest impact
    outside them, are among the segments' best ``HEAD`` + 1); ``cut``: partitioned so.
    ``all_live``: the segment has no deleted paper (none to leave out)."""
    impact = values[start:stop]
    if all_live:
        cut = len(impact) > HEAD + 1
        at = np.argpartition(-impact, HEAD)[: HEAD + 1] if cut else np.arange(len(impact))
    else:
        at = np.flatnonzero(impact > 0)  # a deleted document's inverse pivot is 0
        cut = len(at) > HEAD + 1
        if cut:  # the best HEAD first, then the best of the rest
            at = at[np.argpartition(-impact[at], HEAD)[: HEAD + 1]]
    return docs[start:stop][at], segment.xt_data.at(a + start + at), impact[at], [cut]


def _choose_head(heads: np.ndarray, row: int, pieces: list[tuple]) -> None:
    """Row ``row`` of ``best_heads``' record from a long term's ``_best_postings`` in each
    segment: its ``HEAD`` best live postings over all, and the best impact of the rest."""
    docs, counts, impact, cut = (np.concatenate(c) for c in zip(*pieces, strict=True))
    tail = 0.0
    if len(pieces) == 1 and cut[0]:
        # Already partitioned as a whole list was (one segment): the same head.
        tail, docs, counts = impact[HEAD], docs[:HEAD], counts[:HEAD]
    elif len(docs) > HEAD:
        part = np.argpartition(-impact, HEAD)
        tail = impact[part[HEAD]]  # the highest impact outside the head
        docs, counts = docs[part[:HEAD]], counts[part[:HEAD]]
    by_doc = np.argsort(docs, kind="stable")  # segments' runs, or a selection
    heads["tail"][0, row] = tail
    heads["docs"][0, row, : len(docs)] = docs[by_doc]
    heads["counts"][0, row, : len(docs)] = counts[by_doc]


def _posting_chunks(indptr: np.ndarray, n_terms: int, chunk: int):
    """``(term, end, a, b)``: runs of whole inverted lists (terms ``term..end-1``, postings
    ``a..b``) of about ``chunk`` postings, none empty, so a pass over every posting keeps its
    temporaries small at any corpus size."""
    term = 0
    while term < n_terms:
        end = int(np.searchsorted(indptr, int(indptr[term]) + chunk, side="right")) - 1
        end = min(max(end, term + 1), n_terms)
        a, b = int(indptr[term]), int(indptr[end])
        if b > a:
            yield term, end, a, b
        term = end


def _open_all(paths: list[str], inodes: list[int]) -> list[int]:
    """Open these files read-only; IndexDamaged when one is no longer the inode checked."""
    fds: list[int] = []
    try:
        for path, inode in zip(paths, inodes, strict=True):
            fds.append(os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)))
            if os.fstat(fds[-1]).st_ino != inode:
                raise IndexDamaged(f"{path} was replaced while it was opened")
    except FileNotFoundError:
        _close_all(fds)
        raise IndexDamaged(f"{path} is missing") from None
    except BaseException:
        _close_all(fds)
        raise
    return fds


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _stat_key(path: Path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)
