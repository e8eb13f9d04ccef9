"""The TF-IDF index: built with scikit-learn, stored beside the database, opened with mmap.

Documents are the papers in ``rowid`` order. Two sparse matrices are kept:

* ``xt`` (terms x documents): an inverted index, so a query only touches the posting
  lists of its own terms instead of multiplying the whole matrix (``X @ q``);
* ``x`` (documents x terms): a paper's own vector, for "why it matched" and "similar papers".

Both are plain ``.npy`` arrays opened with ``mmap_mode="r"``: opening the index costs a few
milliseconds whatever the corpus size, and processes share the pages. The vocabulary is
sorted (scikit-learn sorts features), stored as one UTF-8 blob with offsets and looked up
by binary search, so no multi-million-entry dict has to be rebuilt at start-up.

The index records the ``corpus_version`` it was built from; ``Engine`` refuses to serve an
index whose version differs from the database's and rebuilds it instead.

Its ``meta.json`` is also a manifest: every file's size and CRC-32. A file that is shorter
than its manifest says would kill the process with SIGBUS when a lookup touches the missing
pages (it is mmapped), and one overwritten in place would be served as garbage, so an index
is checked when it is opened (sizes, and the checksums the first time a process opens it)
and before every lookup (sizes, inodes and modification times: a few ``stat`` calls), and
rebuilt instead of being served when it fails.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import mmap
import os
import shutil
import time
import zlib
from array import array
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .corpus import Corpus, StorageError
from .text import words

#: A title word counts this many times as much as the same word in the abstract.
TITLE_WEIGHT = 2
#: Author-given keywords summarise the paper: weighted like the title.
KEYWORD_WEIGHT = 3
# Bump whenever analysis, weighting or the files change: an index built the old way is then
# rebuilt. 3: meta.json lists every file's size and CRC-32.
FORMAT_VERSION = 3
#: Pivoted length normalization (Singhal et al., 1996): a document's vector is divided by
#: ``(1 - slope) * mean_norm + slope * norm`` instead of its own L2 norm, so long abstracts are
#: penalised a little less than by plain cosine. 0.6 measured best on the dev queries
#: (nDCG@10 0.333 against 0.323 for plain cosine; bench/README.md).
PIVOT_SLOPE = 0.6
_ARRAYS = ("xt_data", "xt_indices", "xt_indptr", "x_data", "x_indices", "x_indptr")
_ALL_ARRAYS = (*_ARRAYS, "idf", "rowids", "years", "venue_codes", "vocab_offsets")
_FILES = (*(f"{name}.npy" for name in _ALL_ARRAYS), "vocab.bin")

log = logging.getLogger(__name__)


class IndexBuildError(StorageError):
    """The index could not be written (disk full, folder not writable); one sentence."""


class IndexDamaged(ValueError):
    """An index on disk that does not match its manifest; the message says how."""


def stored_version(directory: Path) -> int | None:
    """The corpus version of the index at ``directory`` (its meta.json only), or None."""
    try:
        return int(json.loads((Path(directory) / "meta.json").read_text())["corpus_version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def file_checksum(path: Path, chunk: int = 1 << 24) -> int:
    """CRC-32 of a file: 3 GB/s here, so ~0.1 s for the 87k-paper index (see bench/hardening.py)."""
    crc = 0
    with open(path, "rb", buffering=0) as handle:
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
#: Documents counted at a time while building: bounds the temporary arrays at any corpus size.
CHUNK_DOCS = 20_000


@dataclass
class _Field:
    """One text field of every document, as a flat array of unigram ids plus offsets."""

    weight: float
    ids: array = field(default_factory=lambda: array("i"))
    offsets: array = field(default_factory=lambda: array("q", [0]))

    def add(self, text: str, vocabulary: dict[str, int]) -> None:
        get, ids = vocabulary.get, self.ids
        for word in words(text):
            term = get(word)
            if term is None:
                term = vocabulary[word] = len(vocabulary)
            ids.append(term)
        self.offsets.append(len(ids))


def _pieces(fields: list[_Field], start: int, end: int, n_uni: int):
    """For documents [start, end): (docs, unigram ids, weights) and (docs, bigram keys, weights).

    Document numbers are local to the chunk; a bigram key is ``first * n_uni + second``, and
    bigrams never span two fields or two documents.
    """
    uni_docs, uni_ids, uni_vals, bi_docs, bi_keys, bi_vals = [], [], [], [], [], []
    for text_field in fields:
        offsets = np.frombuffer(text_field.offsets, dtype=np.int64)
        ids = np.frombuffer(text_field.ids, dtype=np.int32)[offsets[start] : offsets[end]]
        doc_of = np.repeat(
            np.arange(end - start, dtype=np.int32), np.diff(offsets[start : end + 1])
        )
        uni_docs.append(doc_of)
        uni_ids.append(ids)
        uni_vals.append(np.full(len(ids), text_field.weight, dtype=np.float32))
        same_doc = doc_of[1:] == doc_of[:-1]
        bi_docs.append(doc_of[1:][same_doc])
        bi_keys.append(ids[:-1].astype(np.int64)[same_doc] * n_uni + ids[1:][same_doc])
        bi_vals.append(np.full(int(same_doc.sum()), text_field.weight, dtype=np.float32))
    cat = np.concatenate
    return (cat(uni_docs), cat(uni_ids), cat(uni_vals)), (cat(bi_docs), cat(bi_keys), cat(bi_vals))


def count_terms(fields: list[_Field], n_docs: int, unigrams: list[str]):
    """Weighted unigram and bigram counts (documents x terms) and the sorted vocabulary.

    Equivalent to scikit-learn's ``CountVectorizer(analyzer=analyze)`` applied per field and
    summed with the field weights, plus a ``min_df`` for bigrams only; done with numpy on
    integer ids, a chunk of documents at a time, because the vectorizer's per-token Python
    loop and its dict of every bigram took 66 s and 2 GB for the 87k-paper corpus.
    """
    n_uni = len(unigrams)
    chunks = [(a, min(a + CHUNK_DOCS, n_docs)) for a in range(0, n_docs, CHUNK_DOCS)]
    # Pass 1: each bigram's document frequency, merged over the chunks.
    seen_keys, seen_counts = [], []
    for a, b in chunks:
        _, (docs, keys, _) = _pieces(fields, a, b, n_uni)
        per_doc = np.unique(docs.astype(np.int64) * (n_uni * n_uni) + keys) % (n_uni * n_uni)
        chunk_keys, chunk_df = np.unique(per_doc, return_counts=True)
        seen_keys.append(chunk_keys)
        seen_counts.append(chunk_df)
    all_keys = np.concatenate(seen_keys) if seen_keys else np.zeros(0, np.int64)
    distinct, where = np.unique(all_keys, return_inverse=True)
    df = np.bincount(where, weights=np.concatenate(seen_counts) if seen_counts else None)
    kept = distinct[df >= MIN_BIGRAM_DF] if len(distinct) else distinct
    del seen_keys, seen_counts, all_keys, distinct, where, df
    # Pass 2: the counts, chunk by chunk, bigram columns after the unigram ones.
    width = n_uni + len(kept)
    parts = []
    for a, b in chunks:
        (u_docs, u_ids, u_vals), (b_docs, b_keys, b_vals) = _pieces(fields, a, b, n_uni)
        pos = np.searchsorted(kept, b_keys)
        known = pos < len(kept)
        known[known] = kept[pos[known]] == b_keys[known]
        rows = np.concatenate([u_docs, b_docs[known]])
        cols = np.concatenate([u_ids, (n_uni + pos[known]).astype(np.int32)])
        vals = np.concatenate([u_vals, b_vals[known]])
        part = sp.csr_matrix((vals, (rows, cols)), shape=(b - a, width), dtype=np.float32)
        part.sum_duplicates()
        parts.append(part)
    if parts:
        counts = sp.vstack(parts, format="csr", dtype=np.float32)
    else:
        counts = sp.csr_matrix((n_docs, width), dtype=np.float32)
    del parts
    terms = unigrams + [f"{unigrams[k // n_uni]} {unigrams[k % n_uni]}" for k in kept.tolist()]
    # Column ids in sorted-term order, so the vocabulary can be searched by bisection.
    order = sorted(range(len(terms)), key=terms.__getitem__)
    rank = np.empty(len(terms), dtype=np.int32)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(terms), dtype=np.int32)
    counts.indices = rank[counts.indices]
    counts.has_sorted_indices = False
    counts.sort_indices()
    return counts, [terms[i] for i in order]


def build_index(corpus: Corpus, directory: Path, progress=None) -> BuildStats:
    """Fit TF-IDF on the whole corpus and write the index atomically to ``directory``."""
    from sklearn.feature_extraction.text import TfidfTransformer

    started = time.perf_counter()
    version = corpus.version
    rowids, years, venues = array("q"), array("i"), []
    unigram_ids: dict[str, int] = {}
    title, keywords, body = _Field(TITLE_WEIGHT), _Field(KEYWORD_WEIGHT), _Field(1.0)
    fields = [title, keywords, body]
    # One pass over the papers, keeping only integer arrays: the texts are never all in memory.
    for rowid, doc in corpus.iter_documents():
        rowids.append(rowid)
        years.append(doc["year"] or 0)
        venues.append(doc["venue"] or "")
        title.add(doc["title"], unigram_ids)
        keywords.add(" ; ".join(doc["keywords"]), unigram_ids)
        # Authors join the text so that a name typed as plain words still finds the paper.
        body.add(f"{doc['abstract']}\n{' ; '.join(doc['authors'])}", unigram_ids)
    n = len(rowids)
    counts, vocabulary = count_terms(fields, n, list(unigram_ids))
    del fields, unigram_ids
    if n and counts.nnz:
        # Weighted in place (copy=False), then scaled in place: at 872k papers each copy of
        # the matrix is over a gigabyte.
        tfidf = TfidfTransformer(sublinear_tf=True, smooth_idf=True, norm=None).fit(counts)
        x = tfidf.transform(counts, copy=False)
        del counts
        norms = np.sqrt(
            np.bincount(
                np.repeat(np.arange(n), np.diff(x.indptr)),
                weights=np.square(x.data, dtype=np.float64),
                minlength=n,
            )
        )
        pivot = (1 - PIVOT_SLOPE) * norms.mean() + PIVOT_SLOPE * norms
        x.data *= np.repeat((1 / np.maximum(pivot, 1e-9)).astype(np.float32), np.diff(x.indptr))
        idf = tfidf.idf_.astype(np.float32)
    else:
        x = sp.csr_matrix((n, len(vocabulary)), dtype=np.float32)
        idf = np.ones(len(vocabulary), np.float32)
        del counts
    x.sort_indices()
    xt = x.T.tocsr()
    xt.sort_indices()

    venue_names = sorted(set(venues))
    venue_code = {v: i for i, v in enumerate(venue_names)}
    arrays = {
        "xt_data": xt.data,
        "xt_indices": xt.indices.astype(np.int32),
        "xt_indptr": xt.indptr.astype(np.int64),
        "x_data": x.data,
        "x_indices": x.indices.astype(np.int32),
        "x_indptr": x.indptr.astype(np.int64),
        "idf": idf,
        "rowids": np.asarray(rowids, dtype=np.int64),
        "years": np.asarray(years, dtype=np.int32),
        "venue_codes": np.asarray([venue_code[v] for v in venues], dtype=np.int32),
    }
    blob = "\n".join(vocabulary).encode()
    lengths = np.fromiter(
        (len(t.encode()) for t in vocabulary), dtype=np.int64, count=len(vocabulary)
    )
    offsets = np.zeros(len(vocabulary) + 1, dtype=np.int64)
    np.cumsum(lengths + 1, out=offsets[1:])
    arrays["vocab_offsets"] = offsets

    meta = {
        "format": FORMAT_VERSION,
        "corpus_version": version,
        "documents": n,
        "terms": len(vocabulary),
        "venues": venue_names,
        "title_weight": TITLE_WEIGHT,
        "built_at": time.time(),
    }
    _write_index(Path(directory), arrays, blob + b"\n", meta)
    return BuildStats(documents=n, terms=len(vocabulary), seconds=time.perf_counter() - started)


def _write_index(directory: Path, arrays: dict, vocab: bytes, meta: dict) -> None:
    """Write the files to a temporary folder beside ``directory``, then swap it in.

    Any failure (a full disk, most likely) removes the temporary folder and leaves the index
    that was there untouched; an ``OSError`` comes back as one ``IndexBuildError`` sentence.
    Leftovers of builders that died (``*.tmp-<pid>`` whose process is gone) are removed first.
    """
    _remove_leftovers(directory)
    tmp = directory.with_name(f"{directory.name}.tmp-{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        files = {}
        for name, values in arrays.items():
            files[f"{name}.npy"] = _write_file(tmp / f"{name}.npy", np.ascontiguousarray(values))
        files["vocab.bin"] = _write_file(tmp / "vocab.bin", vocab)
        meta = {**meta, "files": files}
        _write_file(tmp / "meta.json", json.dumps(meta).encode())
        # Swap in the new index; readers holding the old files keep their mmaps until they
        # reload.
        old = directory.with_name(f"{directory.name}.old-{os.getpid()}")
        if directory.exists():
            directory.rename(old)
        tmp.rename(directory)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(error, OSError):
            raise IndexBuildError(_build_error(directory, error)) from None
        raise


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


class _ChecksumWriter:
    """A file that keeps the CRC-32 and size of what goes through it (no second read)."""

    def __init__(self, handle) -> None:
        self.handle, self.crc, self.size = handle, 0, 0

    def write(self, data) -> int:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(memoryview(data).cast("B"))
        return self.handle.write(data)


def _build_error(directory: Path, error: OSError) -> str:
    where = directory.parent.absolute()
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"The search index could not be written because the disk holding {where} is full; "
            "lookups use the previous index, if there is one, until there is space again."
        )
    reason = (error.strerror or str(error)).lower()
    return f"The search index could not be written in {where} ({reason})."


def _remove_leftovers(directory: Path) -> None:
    """Remove ``<index>.tmp-<pid>`` and ``<index>.old-<pid>`` folders whose process is gone."""
    parent = directory.parent
    if not parent.is_dir():
        return
    for path in parent.glob(f"{directory.name}.*-*"):
        kind, _, pid = path.name[len(directory.name) + 1 :].partition("-")
        if kind not in ("tmp", "old") or not pid.isdigit() or int(pid) == os.getpid():
            continue
        if _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def build_lock(directory: Path):
    """One builder at a time across processes (the web app, the scheduler, the CLI)."""
    lock_path = Path(f"{directory}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Vocabulary:
    """Sorted terms in one mmapped blob; ``id_of`` is a binary search (no dict to load)."""

    def __init__(self, blob: mmap.mmap | bytes, offsets: np.ndarray):
        self._blob = blob
        self._offsets = offsets.tolist() if len(offsets) < 5_000_000 else offsets
        self.size = len(offsets) - 1
        self._cache: dict[str, int] = {}

    def term(self, term_id: int) -> str:
        start, end = self._offsets[term_id], self._offsets[term_id + 1] - 1
        return self._blob[start:end].decode()

    def _key(self, term_id: int) -> bytes:
        return self._blob[self._offsets[term_id] : self._offsets[term_id + 1] - 1]

    def _lower_bound(self, key: bytes) -> int:
        """The first term id whose term is >= key (bisection over the sorted blob)."""
        lo, hi = 0, self.size
        while lo < hi:
            mid = (lo + hi) // 2
            if self._key(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

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

    def with_prefix(self, prefix: str, limit: int = 5000) -> list[str]:
        """Terms starting with ``prefix`` (for "did you mean" suggestions)."""
        key = prefix.encode()
        lo = self._lower_bound(key)
        out = []
        while lo < self.size and len(out) < limit:
            term = self._key(lo)
            if not term.startswith(key):
                break
            out.append(term.decode())
            lo += 1
        return out


class Index:
    """An opened index. Read-only and thread-safe: every query allocates its own buffers."""

    def __init__(self, directory: Path, verify: bool = True, version: int | None = None):
        """Open the index at ``directory``; raises ``IndexDamaged`` when it fails its manifest.

        Sizes are always checked; ``verify`` also compares every file's CRC-32 (reading the
        whole index once, which also warms the page cache the mmaps will use). With
        ``version``, an index of another corpus version is refused before any of that.
        """
        self.directory = Path(directory)
        self.meta = json.loads((self.directory / "meta.json").read_text())
        if self.meta.get("format") != FORMAT_VERSION:
            raise ValueError("index format changed")
        if version is not None and self.meta.get("corpus_version") != version:
            raise ValueError("index of another corpus version")
        self._stats = self._check(verify)
        self._paths = [os.path.join(self.directory, name) for name in _FILES]
        # Plain ndarray views of the mmaps: numpy.memmap's Python-level __getitem__ costs more
        # than a lookup's own work.
        arrays = {
            name: np.asarray(np.load(self.directory / f"{name}.npy", mmap_mode="r"))
            for name in _ALL_ARRAYS
        }
        self.n_docs = int(self.meta["documents"])
        self.n_terms = int(self.meta["terms"])
        self.xt_data, self.xt_indices = arrays["xt_data"], arrays["xt_indices"]
        self.xt_indptr = arrays["xt_indptr"]
        self.x_data, self.x_indices = arrays["x_data"], arrays["x_indices"]
        self.x_indptr = arrays["x_indptr"]
        self.idf = arrays["idf"]
        self.rowids = arrays["rowids"]
        self.years = arrays["years"]
        self.venue_codes = arrays["venue_codes"]
        self.venues: list[str] = self.meta["venues"]
        with open(self.directory / "vocab.bin", "rb") as handle:
            blob = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if self.n_terms else b""
        self.vocab = Vocabulary(blob, arrays["vocab_offsets"])
        self._xt = self.matrix_xt()

    def _check(self, verify: bool) -> list[tuple[int, int, int]]:
        """Each file's (inode, size, mtime), after checking it against the manifest."""
        manifest = self.meta.get("files")
        if not isinstance(manifest, dict) or set(manifest) != set(_FILES):
            raise IndexDamaged("its manifest is missing or incomplete")
        stats = []
        for name in _FILES:
            path = self.directory / name
            try:
                st = path.stat()
            except FileNotFoundError:
                raise IndexDamaged(f"{name} is missing") from None
            expected = manifest[name]
            if st.st_size != expected["size"]:
                raise IndexDamaged(
                    f"{name} is {st.st_size:,} bytes, its manifest says {expected['size']:,}"
                )
            if verify and file_checksum(path) != expected["crc32"]:
                raise IndexDamaged(f"{name} does not match its checksum")
            stats.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return stats

    def intact(self) -> bool:
        """Whether the files are still the ones opened: same inode, size and mtime each.

        A few ``stat`` calls, made before every lookup: a file truncated under the mmap
        would otherwise kill the process (SIGBUS) when the lookup reads past its new end.
        False also when another process swapped in a new index (reopen it then).
        """
        stat = os.stat
        try:
            for path, (inode, size, mtime) in zip(self._paths, self._stats, strict=True):
                st = stat(path)
                if st.st_ino != inode or st.st_size != size or st.st_mtime_ns != mtime:
                    return False
        except OSError:
            return False
        return True

    @classmethod
    def load(
        cls, directory: Path, verify: bool = True, version: int | None = None, quiet: bool = False
    ) -> Index | None:
        """The index at ``directory``, or None if there is none, it is unreadable, damaged or
        (with ``version``) of another corpus version.

        A damaged index (see ``_check``) is logged, one line, for the caller rebuilds it.
        """
        try:
            return cls(directory, verify=verify, version=version)
        except IndexDamaged as damage:
            if not quiet:
                log.warning(
                    "The search index at %s is damaged (%s); rebuilding it.", directory, damage
                )
            return None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @property
    def corpus_version(self) -> int:
        return int(self.meta["corpus_version"])

    # -- queries ---------------------------------------------------------------------------

    def vectorize(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The query's TF-IDF vector (term ids, weights), transformed exactly like the papers."""
        counts: dict[int, int] = {}
        for term in terms:
            tid = self.vocab.id_of(term)
            if tid >= 0:
                counts[tid] = counts.get(tid, 0) + 1
        if not counts:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        ids = np.fromiter(counts, dtype=np.int64, count=len(counts))
        tf = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
        weights = (1.0 + np.log(tf)) * self.idf[ids]
        weights /= np.linalg.norm(weights)
        return ids, weights.astype(np.float32)

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = self.xt_indptr[term_id], self.xt_indptr[term_id + 1]
        return self.xt_indices[start:end], self.xt_data[start:end]

    def score(self, term_ids: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(documents, scores) of every document sharing a term with the query, unordered.

        A 1 x terms query vector times the terms x documents matrix: scipy's sparse product
        walks only the posting lists of the query's own terms, in C.
        """
        if not len(term_ids):
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        query = sp.csr_matrix(
            (weights.astype(np.float32), term_ids.astype(np.int32), np.array([0, len(term_ids)])),
            shape=(1, self.n_terms),
        )
        product = (query @ self._xt).tocsr()
        return product.indices, product.data

    def matched_terms(self, term_ids: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """How many of the terms each of ``docs`` contains.

        A few documents: binary-search each term's posting list. Many: one bincount over them.
        """
        if not len(term_ids) or not len(docs):
            return np.zeros(len(docs), dtype=np.float32)
        if len(docs) <= 2_000:
            counts = np.zeros(len(docs), dtype=np.float32)
            for term in term_ids.tolist():
                posting = self.postings(term)[0]  # sorted document numbers
                if not len(posting):
                    continue
                at = np.minimum(np.searchsorted(posting, docs), len(posting) - 1)
                counts += posting[at] == docs
            return counts
        hits = np.concatenate([self.postings(t)[0] for t in term_ids.tolist()])
        return np.bincount(hits, minlength=self.n_docs)[docs].astype(np.float32)

    def docs_with_all(self, term_ids: Iterable[int]) -> np.ndarray:
        """Sorted document numbers containing every one of the terms (-1: none can)."""
        result: np.ndarray | None = None
        for tid in term_ids:
            if tid < 0:
                return np.zeros(0, np.int32)
            docs = np.asarray(self.postings(tid)[0])
            result = docs if result is None else np.intersect1d(result, docs, assume_unique=True)
            if not len(result):
                break
        return np.zeros(0, np.int32) if result is None else result

    def doc_vector(self, doc: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = self.x_indptr[doc], self.x_indptr[doc + 1]
        return np.asarray(self.x_indices[start:end]), np.asarray(self.x_data[start:end])

    def contributions(
        self, doc: int, term_ids: np.ndarray, weights: np.ndarray
    ) -> list[tuple[str, float]]:
        """Which query terms gave this document its score, largest first."""
        terms, values = self.doc_vector(doc)
        out = []
        for tid, weight in zip(term_ids.tolist(), weights.tolist(), strict=True):
            pos = int(np.searchsorted(terms, tid))
            if pos < len(terms) and terms[pos] == tid:
                out.append((self.vocab.term(tid), float(weight * values[pos])))
        out.sort(key=lambda item: -item[1])
        return out

    def doc_of_rowid(self, rowid: int) -> int | None:
        pos = int(np.searchsorted(self.rowids, rowid))
        return pos if pos < self.n_docs and int(self.rowids[pos]) == rowid else None

    def docs_of_rowids(self, rowids: Iterable[int]) -> np.ndarray:
        wanted = np.fromiter(rowids, dtype=np.int64)
        pos = np.searchsorted(self.rowids, wanted)
        pos = pos[pos < self.n_docs]
        return pos[np.isin(np.asarray(self.rowids)[pos], wanted)]

    def matrix_xt(self) -> sp.csr_matrix:
        """The inverted index as a scipy matrix (batch scoring, e.g. all digest topics at once)."""
        return sp.csr_matrix(
            (self.xt_data, self.xt_indices, self.xt_indptr), shape=(self.n_terms, self.n_docs)
        )

    def matrix_x(self) -> sp.csr_matrix:
        return sp.csr_matrix(
            (self.x_data, self.x_indices, self.x_indptr), shape=(self.n_docs, self.n_terms)
        )
