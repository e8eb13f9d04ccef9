"""What each member likes, learnt from their 👍 and 👎: a model over the engine's TF-IDF vectors.

No Slack here: the digest (``selection``), ``/papers recommend`` and the App Home ask this
module for a member's ``Taste`` and it reads their clicks from the shared state.

The model
=========
Rocchio's relevance feedback (Rocchio, 1971): the member's profile is a term vector,

    profile = LIKE * mean(👍 papers) - DISLIKE * mean(👎 papers) + TOPIC * mean(topics)

of unit-length paper vectors (the index's own TF-IDF weights) and topic queries (weak evidence:
what the member said they want before clicking anything). Its ``PROFILE_TERMS`` strongest
positive terms, as a unit vector, are then a query like any other: the index scores every paper
with it in one sparse product, so a score is the same kind of number as a topic's (a cosine for
a paper of average length). It works from the first 👍, needs no negatives, and training is a
few hundred vector additions. arxiv-sanity-lite's linear SVM (``method="svm"``: LinearSVC,
C=0.01, balanced classes, 👎 and a random background sample as negatives) is kept for the
benchmark, which chose between them (``bench/feedback_digests.py``; numbers in bench/README.md).

Once a member has given both 👍 and 👎, a second, discriminative model tells them apart: a
logistic regression of their 👍 papers and topics against their 👎 papers (``Taste.classifier``,
scikit-learn's optimum, found in the span of the clicks: ``logistic_regression``). In the
digest it leaves out topic matches it expects a 👎 for (and can order the candidates for
recommendation: ``RECOMMEND_RANK = "classifier"``; those near the member's topics come first:
``RECOMMEND_NEAR_TOPIC``).

Meaning, not only words
=======================
TF-IDF vectors of papers that say one thing in other words ("score-based generative
modelling", "diffusion models") share no terms. The semantic space (latent semantic analysis:
scikit-learn's ``TruncatedSVD`` of the papers' unit TF-IDF vectors, ``SEMANTIC_COMPONENTS``
dimensions, fitted once per main segment of the index and stored in its folder) puts them near. In it, a member's expected 👍 of a
paper (``Taste.expected_like``) is a kernel-weighted vote of the papers they rated, with their
own 👍 rate as the prior: the digest leaves out topic matches expected to be 👍 less often than
``TOPIC_MIN_EXPECTED``, and recommendation candidates are ordered by their closeness to the 👍
papers (``RECOMMEND_RANK = "semantic"``). Both raised the share of relevant papers the benchmark's
members receive above their keyword-only twins' (bench/README.md, fourth pass).

The 👎
=====
Besides pulling the profile away from their terms, 👎-ed papers rule papers out (``judge``):
a paper very close to one (``NEAR_DISLIKED``), or nearer a 👎-ed paper than to every 👍 one by
more than ``DISLIKE_MARGIN``, is one the member would 👎 too, and stops coming.

Speed
=====
A model learns from the member's ``MAX_CLICKS`` newest clicks only, and is cached per member,
keyed by those clicks, their topics and the corpus version: a click changes the key, so the
next use trains again (lazily: nothing runs at click time), and every other use is a lookup.
Papers' unit vectors and topics' query vectors are cached per index generation too: members of
one batch share topics, and so candidates. ``forget()`` empties every cache (a restart).
"""

from __future__ import annotations

import contextlib
import os
import threading
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.preprocessing import normalize
from sklearn.svm import LinearSVC
from threadpoolctl import threadpool_limits

from bot.engine.index import Index, Segment, term_frequencies
from bot.engine.query import QueryError, parse_query
from bot.engine.search import Engine
from bot.engine.text import analyze
from bot.state import state_for
from bot.state.store import MemberKey

#: The newest clicks a model learns from (caps the work of an update).
MAX_CLICKS = 200
#: The strongest terms of a profile that are run through the index as its query.
PROFILE_TERMS = 40
#: Terms in more than this share of the papers are left out of the profile query: they say
#: little about a member, and their long posting lists are most of the cost of scoring (5%:
#: the batch with clicks about twice as fast, 1.25x kept; bench/README.md).
PROFILE_MAX_DF = 0.05
#: ...and in more than this many papers (a small corpus has no term that common: every term
#: of it stays).
PROFILE_COMMON_PAPERS = 300
#: Rocchio's weights: 👍 papers, 👎 papers, topics (weak evidence).
LIKE_WEIGHT = 1.0
DISLIKE_WEIGHT = 0.5
TOPIC_WEIGHT = 0.35
#: A paper whose cosine with a 👎-ed one is at least this is "very close" to it and never comes
#: (bench/feedback_digests.py --near: 71% of same-title listings are that close, and only 3%
#: of papers have any other paper that close; bench/README.md).
NEAR_DISLIKED = 0.5
#: A paper nearer a 👎-ed one than to every 👍 one by more than this (cosines) is one the member
#: would 👎 too, and is left out (negative: off).
DISLIKE_MARGIN = 0.1
#: A 👍 paper counts as a reason for a recommendation when their cosine is at least this.
REASON_COSINE = 0.1
#: Recommendations need this many 👍 papers alike (cosine ``REASON_COSINE``): evidence.
RECOMMEND_MIN_LIKED = 0
#: Candidates a recommendation is looked for among (the model's best, then checked).
RECOMMEND_POOL = 60
#: Recommendations need at least this model score (the topic match threshold's scale; 0.07
#: since profiles leave out common terms, which lowers every score a little).
RECOMMEND_FLOOR = 0.07
#: Recommendations must be this near one of the member's topics (best cosine of the paper with a
#: topic's query vector, above this; negative: any paper): "matched none of their topics" means
#: scored below the match threshold, not unrelated to them (recommendations 19% relevant
#: instead of 16%; bench/README.md).
RECOMMEND_NEAR_TOPIC = 0.05
#: How recommendation candidates (the profile's best ``RECOMMEND_POOL``) are ordered: "score"
#: (the profile's), "classifier" (``Taste.like_probability``) or "semantic" (their mean
#: semantic cosine with the ``SEMANTIC_NEAREST`` most alike 👍 papers: relevant 21% of the time
#: instead of 20%, 12 more relevant papers in the benchmark; bench/README.md, fourth pass).
RECOMMEND_RANK = "semantic"
#: The classifier's regularisation (scikit-learn's C: 1, its default, on unit-length rows).
CLASSIFIER_C = 1.0
#: The SVM's background: random papers taken as negatives besides the 👎 ones.
SVM_BACKGROUND = 300
#: Members whose models stay cached in one process (a model is a few kilobytes).
CACHE_MEMBERS = 20_000
#: Papers whose unit vectors stay cached in one process (about 1 kB each).
CACHE_VECTORS = 50_000
#: Papers scoring below this for a model count as 0 (keeps each member's scores small).
SCORE_KEEP = 0.03
#: Models scored against the index at once (bounds the product's memory).
CHUNK_MODELS = 64

#: The semantic space (latent semantic analysis: a truncated SVD of the papers' unit TF-IDF
#: vectors), where papers on one subject are near even when they say it in other words
#: ("score-based generative modelling", "diffusion models"): ``SEMANTIC_COMPONENTS``
#: dimensions, fitted over the ``SEMANTIC_TERMS`` terms in most papers (in at least
#: ``SEMANTIC_MIN_DF``) on a fixed random sample of ``SEMANTIC_SAMPLE`` papers, with
#: ``SEMANTIC_ITERATIONS`` power iterations; lazily, once per main segment (stored with it:
#: a restart or a daily delta reads it) (87k papers: about 0.5 s and 5 MB; bench/README.md).
SEMANTIC_COMPONENTS = 64
SEMANTIC_TERMS = 20_000
SEMANTIC_MIN_DF = 2
SEMANTIC_SAMPLE = 5_000
SEMANTIC_ITERATIONS = 3
#: A member's expected 👍 of a paper (``Taste.expected_like``) is a vote of the papers they
#: rated, each weighted ``exp((cosine - 1) / KERNEL_BANDWIDTH)`` by its semantic cosine with the
#: paper, plus ``KERNEL_PRIOR`` votes at cosine 0 for their own 👍 rate (with a prior of
#: ``PRIOR_LIKES`` 👍 and ``PRIOR_DISLIKES`` 👎): a paper unlike everything they rated is
#: expected to fare as their clicks do overall.
KERNEL_BANDWIDTH = 0.2
KERNEL_PRIOR = 1.0
PRIOR_LIKES = 1.0
PRIOR_DISLIKES = 3.0
#: Topic matches a member is expected to 👍 less often than this are left out (0: off): they
#: would lower the share of what they are sent that they want (bench/README.md, fourth pass).
TOPIC_MIN_EXPECTED = 0.15
#: Semantic cosines of a recommendation candidate with the member's most alike 👍 papers that
#: ``RECOMMEND_RANK = "semantic"`` averages.
SEMANTIC_NEAREST = 3

METHODS = ("rocchio", "svm")


class Click(NamedTuple):
    """A 👍 or 👎 (a tuple: 20,000 of them are made and hashed for a batch's models)."""

    paper_id: str
    kind: str  # like | dislike


#: A sparse term vector: (term ids ascending, weights).
Vector = tuple[np.ndarray, np.ndarray]


@dataclass
class Taste:
    """One member's model: their rated papers (index documents) and the profile query."""

    user_id: str
    liked: np.ndarray
    disliked: np.ndarray
    term_ids: np.ndarray
    weights: np.ndarray
    liked_vectors: list[Vector]  # unit length, for "like the 3 papers you 👍"
    disliked_vectors: list[Vector]  # unit length, for "very close to a 👎-ed paper"
    liked_ids: list[str] = field(default_factory=list)
    topic_vectors: list[Vector] = field(default_factory=list)

    @cached_property
    def rated(self) -> np.ndarray:
        return union(self.liked, self.disliked)

    @cached_property
    def rated_keyed(self) -> _Keyed:
        """The 👍 then the 👎 papers' vectors, arranged by term (``Batch.judge``)."""
        return _Keyed.of(self.liked_vectors + self.disliked_vectors)

    @cached_property
    def topic_keyed(self) -> _Keyed:
        """The topics' query vectors, arranged by term (``Batch.topic_closeness``)."""
        return _Keyed.of(self.topic_vectors)

    def topic_closeness(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """Each document's best cosine with one of the member's topics' query vectors."""
        return Batch(index, [self]).topic_closeness([0], [docs])

    def judge(self, index: Index, docs: np.ndarray) -> Verdicts:
        """What the member's clicks say about each of ``docs``: unwanted (👎-ed, very close to
        a 👎-ed paper, or nearer a 👎-ed paper than to every 👍 one by ``DISLIKE_MARGIN``),
        and how many 👍 papers it is like (cosine ``REASON_COSINE``), the most alike first."""
        return Batch(index, [self]).judge([0], [docs])

    @cached_property
    def classifier(self) -> tuple[_Side, float] | None:
        """A logistic regression of the member's 👍 papers (and topics: what they said they
        want) against their 👎 ones, over the terms those use, classes balanced; None until
        they have given both. Trained on first use: only digests need it."""
        if not self.liked_vectors or not self.disliked_vectors:
            return None
        terms, (x_liked, x_disliked) = _compact(
            self.liked_vectors + self.topic_vectors, self.disliked_vectors
        )
        x = np.vstack([x_liked, x_disliked])
        y = np.r_[np.ones(len(x_liked)), np.zeros(len(x_disliked))]
        coef, intercept = logistic_regression(x, y, CLASSIFIER_C)
        return _Side(terms, coef[np.newaxis, :]), intercept

    def like_probability(self, index: Index, docs: np.ndarray) -> np.ndarray | None:
        """The classifier's probability that the member would 👍 each of ``docs`` (None: no
        classifier yet)."""
        found = self.classifier
        if found is None:
            return None
        side, intercept = found
        margin = side.dot_first(unit_vectors(index, docs)) + intercept
        return 1.0 / (1.0 + np.exp(-margin))

    def near_disliked(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """Which of ``docs`` the member's clicks rule out: ``judge``'s ``unwanted``, and those
        they are expected to 👍 less often than ``TOPIC_MIN_EXPECTED`` (``expected_like``)."""
        return Batch(index, [self]).near_disliked([0], [docs])

    @property
    def like_rate(self) -> float:
        """The share of the member's clicks that are 👍, with the prior."""
        likes, dislikes = len(self.liked), len(self.disliked)
        return (likes + PRIOR_LIKES) / (likes + dislikes + PRIOR_LIKES + PRIOR_DISLIKES)

    def expected_like(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """How likely the member is to 👍 each of ``docs``: a kernel-weighted vote of the papers
        they rated, by semantic cosine (Nadaraya-Watson), with their 👍 rate as a prior vote."""
        return Batch(index, [self]).expected_like([0], [docs])

    def semantic_closeness(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """Each document's mean semantic cosine with its ``SEMANTIC_NEAREST`` most alike 👍
        papers (0 without any)."""
        return Batch(index, [self]).semantic_closeness([0], [docs])

    def reasons(self, index: Index, docs: np.ndarray) -> list[tuple[int, str | None]]:
        """Per document: how many 👍 papers it is like (cosine ``REASON_COSINE``, at least
        one), and the most alike one's paper id."""
        found = self.judge(index, docs)
        return [
            (max(int(n), 1), self.liked_ids[int(e)] if e >= 0 else None)
            for n, e in zip(found.liked_count, found.example, strict=True)
        ]


@dataclass(frozen=True)
class Verdicts:
    """``Taste.judge``'s answer, one entry per document."""

    unwanted: np.ndarray  # bool
    liked_count: np.ndarray  # 👍 papers at least REASON_COSINE alike
    example: np.ndarray  # position in liked_ids of the most alike 👍 paper (-1: none)


def unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (numpy's ``unique`` costs ten times this on small arrays)."""
    ordered = np.sort(np.asarray(values))
    if len(ordered) < 2:
        return ordered
    return ordered[_starts(ordered)]


def _starts(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values of a sorted array begins (``np.r_`` costs more than
    this, per call, on the small arrays of a member)."""
    first = np.empty(len(ordered), bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return first


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted distinct values of both."""
    return unique(np.concatenate([np.asarray(a), np.asarray(b)]))


def isin(values: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``among`` (a binary search each, not ``np.isin``'s hashing)."""
    values = np.asarray(values)
    among = np.sort(np.asarray(among))
    if not len(among) or not len(values):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(among, values), len(among) - 1)
    return among[at] == values


class _PerGeneration:
    """Values computed from one index generation, kept until the next one: a batch asks for
    the same papers and topics many times (members share topics, and so candidates), and
    reading one from the index costs more than the arithmetic done with it."""

    def __init__(
        self,
        compute: Callable[[Index, Any], Any],
        compute_many: Callable[[Index, list], list] | None = None,
    ) -> None:
        self._compute = compute
        self._compute_many = compute_many
        self._lock = threading.Lock()
        self._index: Index | None = None
        self._values: dict = {}

    def get(self, index: Index, keys: Iterable) -> list:
        with self._lock:
            if self._index is not index:
                self._index, self._values = index, {}
            values = self._values
        keys = list(keys)
        try:  # the usual case in a batch: every value known already
            return [values[key] for key in keys]
        except KeyError:
            pass
        if self._compute_many is not None:
            missing = list(dict.fromkeys(key for key in keys if key not in values))
            if len(missing) > 1 and len(values) + len(missing) <= CACHE_VECTORS:
                values.update(zip(missing, self._compute_many(index, missing), strict=True))
        out = []
        for key in keys:
            if key not in values:
                if len(values) >= CACHE_VECTORS:
                    values.clear()  # rare (a cap on memory), and cheap to refill
                values[key] = self._compute(index, key)
            out.append(values[key])
        return out

    def put(self, index: Index, values: dict) -> None:
        """Values already known (computed elsewhere from the same generation)."""
        with self._lock:
            if self._index is not index:
                self._index, self._values = index, {}
            if len(self._values) + len(values) < CACHE_VECTORS:
                self._values.update(values)

    def forget(self) -> None:
        with self._lock:
            self._index, self._values = None, {}


def _unit_vector(index: Index, doc: int) -> Vector:
    terms, values = index.doc_vector(doc)
    norm = float(np.linalg.norm(values)) or 1.0
    return terms, values / np.float32(norm)


def _unit_vectors(index: Index, docs: list[int]) -> list[Vector]:
    """``_unit_vector`` of many documents, read from the index at once (the same numbers)."""
    out = []
    for terms, values in index.doc_vectors(np.asarray(docs, np.int64)):
        norm = float(np.linalg.norm(values)) or 1.0
        out.append((terms, values / np.float32(norm)))
    return out


def unit_vectors(index: Index, docs: Iterable[int]) -> list[Vector]:
    """Documents' TF-IDF vectors, unit length (shared, never to be changed in place)."""
    if isinstance(docs, np.ndarray):
        return _UNIT_VECTORS.get(index, docs.astype(np.int64, copy=False).tolist())
    return _UNIT_VECTORS.get(index, (int(doc) for doc in docs))


class _SemanticSpace:
    """The semantic space of the index generation last asked about: (each term's column, or
    -1 for terms left out; components, columns x dimensions), or None when the corpus is too
    small for one. Loaded (``_stored_space``) or fitted on first use, once per generation (a
    process serves one)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._index: Index | None = None
        self._space: tuple[np.ndarray, np.ndarray] | None = None
        #: Papers' unit semantic vectors in this generation's space, by document.
        self.projected = _Projected(0, 0)

    def get(self, index: Index) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            if self._index is not index:
                space = _stored_space(index)
                if space is not None:
                    kept, components = space
                    column = np.full(index.n_terms, -1, np.int64)
                    column[kept] = np.arange(len(kept))
                    space = column, components
                self._index, self._space = index, space
                dimensions = space[1].shape[1] if space is not None else 0
                self.projected = _Projected(index.n_docs, dimensions)
            return self._space

    def forget(self) -> None:
        with self._lock:
            self._index, self._space, self.projected = None, None, _Projected(0, 0)


class _Projected:
    """Papers' unit semantic vectors as the rows of one matrix, with each document's row (-1:
    not projected yet): a batch gathers tens of thousands at once."""

    def __init__(self, n_docs: int, dimensions: int) -> None:
        self.row = np.full(n_docs, -1, np.int64)
        self.matrix = np.zeros((0, dimensions), np.float32)
        self.size = 0

    def add(self, docs: np.ndarray, vectors: np.ndarray) -> None:
        """Documents not projected yet, and their vectors. The rows are written before any
        document points at them (a thread reading meanwhile finds them missing, or complete)."""
        if self.size + len(docs) > len(self.matrix):
            size = max(2 * len(self.matrix), self.size + len(docs))
            grown = np.zeros((size, vectors.shape[1]), np.float32)
            grown[: self.size] = self.matrix[: self.size]
            self.matrix = grown
        self.matrix[self.size : self.size + len(docs)] = vectors
        self.row[docs] = np.arange(self.size, self.size + len(docs))
        self.size += len(docs)


def _space_path(index: Index) -> Path | None:
    """Where the space of this generation's main segment is stored: in that segment's folder
    (removed with it), named by the settings it was fitted with."""
    directory = getattr(index.segments[0], "directory", None) if index.segments else None
    if directory is None:
        return None
    settings = (
        SEMANTIC_COMPONENTS,
        SEMANTIC_TERMS,
        SEMANTIC_MIN_DF,
        SEMANTIC_SAMPLE,
        SEMANTIC_ITERATIONS,
    )
    return Path(directory) / f"taste-space-{'-'.join(map(str, settings))}.npz"


def _space_check(n_terms: int, kept: np.ndarray, components: np.ndarray) -> int:
    """A CRC-32 of a stored space, with the main segment's vocabulary size it belongs to."""
    crc = zlib.crc32(np.int64(n_terms).tobytes())
    crc = zlib.crc32(np.ascontiguousarray(kept).tobytes(), crc)
    return zlib.crc32(np.ascontiguousarray(components).tobytes(), crc)


def _stored_space(index: Index) -> tuple[np.ndarray, np.ndarray] | None:
    """The main segment's semantic space (kept term ids, components): read from its folder
    when a process stored it there, fitted (and stored, atomically) otherwise. A restarted
    process, and every generation the daily ingest adds a delta segment to, reuses it: the
    space is a function of the main segment alone (``_fit_semantic_space``)."""
    main = index.segments[0]
    path = _space_path(index)
    if path is not None:
        try:
            with np.load(path, allow_pickle=False) as stored:
                kept, components = stored["kept"], stored["components"]
                check = int(stored["check"])
            if (
                kept.dtype == np.int64
                and components.dtype == np.float32
                and kept.ndim == 1
                and components.ndim == 2
                and len(kept) == len(components)
                and check == _space_check(main.n_terms, kept, components)
            ):
                return kept, components
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            pass  # none yet, or damaged: fitted again (and stored again)
    space = _fit_semantic_space(main)
    if space is not None and path is not None:
        kept, components = space
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            with open(tmp, "wb") as handle:
                check = np.int64(_space_check(main.n_terms, kept, components))
                np.savez(handle, kept=kept, components=components, check=check)
            os.replace(tmp, path)
        except OSError:  # a read-only index: this process keeps its own
            with contextlib.suppress(OSError):
                tmp.unlink()
    return space


def _fit_semantic_space(main: Segment) -> tuple[np.ndarray, np.ndarray] | None:
    """scikit-learn's ``TruncatedSVD`` of a fixed sample of the main segment's papers' unit
    vectors (its own idf): the same space for every generation that keeps that segment, so
    the daily deltas need no new fit (bench/README.md: digests as good). BLAS on one thread:
    every process fits the very same numbers."""
    docs = np.arange(main.n_docs)
    if len(docs) > SEMANTIC_SAMPLE:
        rng = np.random.default_rng(0)
        docs = np.sort(rng.choice(docs, SEMANTIC_SAMPLE, replace=False))
    df = np.asarray(main.df)
    kept = np.flatnonzero(df >= SEMANTIC_MIN_DF)
    if len(kept) > SEMANTIC_TERMS:
        kept = np.sort(kept[np.argsort(-df[kept], kind="stable")[:SEMANTIC_TERMS]])
    dimensions = min(SEMANTIC_COMPONENTS, len(docs) - 1, len(kept) - 1)
    if dimensions < 1:
        return None
    # scikit-learn's smooth idf, as the index computes it (``Index._assemble``).
    idf = (np.log((1.0 + main.n_docs) / (1.0 + df.astype(np.float64))) + 1.0).astype(np.float32)
    lengths, terms, counts = main.doc_terms(docs)
    rows = np.repeat(np.arange(len(docs)), lengths)
    values = term_frequencies(counts) * idf[terms]
    x = sp.csr_matrix((values, (rows, terms)), shape=(len(docs), main.n_terms))
    x = normalize(x)[:, kept]
    with threadpool_limits(1, user_api="blas"):
        svd = TruncatedSVD(dimensions, n_iter=SEMANTIC_ITERATIONS, random_state=0)
        svd.fit(x)
    return kept.astype(np.int64), svd.components_.T.astype(np.float32)


def _term_matrix(vectors: list[Vector], column: np.ndarray, width: int) -> sp.csr_matrix:
    """Vectors as the rows of a sparse matrix over the semantic space's terms."""
    rows, terms, values = _stacked(vectors)
    columns = column[terms] if len(terms) else terms
    kept = columns >= 0
    return sp.csr_matrix((values[kept], (rows[kept], columns[kept])), shape=(len(vectors), width))


def semantic_vectors(index: Index, docs: np.ndarray) -> np.ndarray:
    """Documents in the semantic space, unit length (rows; zero for a paper with none of its
    terms). A corpus too small for a semantic space keeps the TF-IDF vectors' cosines: each
    document is then its own unit vector over the terms of ``docs``."""
    docs = np.asarray(docs, np.int64)
    space = _SEMANTIC.get(index)
    if space is None:
        column = np.arange(index.n_terms, dtype=np.int64)
        return _term_matrix(unit_vectors(index, docs), column, index.n_terms).toarray()
    column, components = space
    projected = _SEMANTIC.projected
    rows = projected.row[docs]
    if len(docs) and rows.min() < 0:
        missing = unique(docs[rows < 0])
        if projected.size + len(missing) > CACHE_VECTORS:
            # A cap on memory: a new cache (a thread still reading the old one keeps it).
            _SEMANTIC.projected = projected = _Projected(index.n_docs, components.shape[1])
            missing = unique(docs)
        # Members of one batch share candidates: each paper projected once per generation.
        z = np.asarray(
            _term_matrix(unit_vectors(index, missing), column, len(components)) @ components,
            np.float32,
        )
        norms = np.linalg.norm(z, axis=1, keepdims=True)
        z /= np.where(norms > 0, norms, 1.0).astype(np.float32)
        projected.add(missing, z)
        rows = projected.row[docs]
    return projected.matrix[rows]


_SEMANTIC = _SemanticSpace()


def prefetch(index: Index, docs: np.ndarray) -> None:
    """Read (unit vectors) and project (semantic vectors) the papers a batch's members will
    ask about, all at once: each paper's numbers are its own, whoever asks, so computing them
    in one product instead of one per member changes nothing but the time."""
    docs = unique(np.asarray(docs, np.int64))
    if len(docs):
        unit_vectors(index, docs)
        semantic_vectors(index, docs)


def _stacked(vectors: list[Vector]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The vectors' entries end to end: (row of each entry, term ids, weights)."""
    if not vectors:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    rows = np.repeat(np.arange(len(vectors)), [len(t) for t, _ in vectors])
    terms = np.concatenate([t for t, _ in vectors])
    values = np.concatenate([v for _, v in vectors]).astype(np.float32, copy=False)
    return rows, terms, values


class _Lookup(threading.local):
    """Where each of some sorted term ids is, by a table as long as the vocabulary (one per
    thread, reset after each use): a gather per entry instead of a binary search."""

    table = np.zeros(0, np.int32)

    def positions(
        self, sorted_terms: np.ndarray, terms: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(position of each of ``terms`` in ``sorted_terms``, whether it is there at all)."""
        if not len(sorted_terms) or not len(terms):
            return np.zeros(len(terms), np.int64), np.zeros(len(terms), bool)
        size = int(max(sorted_terms[-1], terms.max())) + 1
        if len(self.table) < size:
            self.table = np.full(max(size, 2 * len(self.table)), -1, np.int32)
        table = self.table
        table[sorted_terms] = np.arange(len(sorted_terms), dtype=np.int32)
        at = table[terms]
        table[sorted_terms] = -1
        shared = at >= 0
        return at, shared


_LOOKUP = _Lookup()


def _compact(*groups: list[Vector]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The groups' vectors as rows of dense matrices over only the terms they use (a few
    thousand columns: cheaper than any sparse structure as wide as the vocabulary)."""
    stacked = [_stacked(group) for group in groups]
    every = [terms for _, terms, _ in stacked if len(terms)]
    terms = unique(np.concatenate(every)) if every else np.zeros(0, np.int64)
    matrices = []
    for group, (rows, group_terms, values) in zip(groups, stacked, strict=True):
        dense = np.zeros((len(group), len(terms)), np.float32)
        dense[rows, _LOOKUP.positions(terms, group_terms)[0]] = values
        matrices.append(dense)
    return terms, matrices


@dataclass
class _Side:
    """Vectors as one dense matrix over the terms they use (the classifier's weights)."""

    terms: np.ndarray
    matrix: np.ndarray  # vectors x terms

    @classmethod
    def of(cls, vectors: list[Vector]) -> _Side:
        terms, (matrix,) = _compact(vectors)
        return cls(terms, matrix)

    def dot_first(self, others: list[Vector]) -> np.ndarray:
        """The others' dot products with this side's first vector (a weight vector)."""
        return _first_row_dot(self, others)


def _first_row_dot(side: _Side, others: list[Vector]) -> np.ndarray:
    """The others' dot products with the side's first row: a gather and a sum per entry."""
    if not len(side.terms) or not others:
        return np.zeros(len(others), np.float32)
    rows, terms, values = _stacked(others)
    at, shared = _LOOKUP.positions(side.terms, terms)
    products = values[shared] * side.matrix[0, at[shared]]
    return np.bincount(rows[shared], weights=products, minlength=len(others)).astype(np.float32)


def cosines(a: list[Vector], b: list[Vector]) -> np.ndarray:
    """Dense ``len(a) x len(b)`` dot products (cosines of unit vectors)."""
    if not a or not b:
        return np.zeros((len(a), len(b)), np.float32)
    _, (left, right) = _compact(a, b)
    return left @ right.T


# --- many members' candidates at once ---------------------------------------------------------
#
# A batch asks every member's model about a few dozen papers each. Each question is answered for
# all of them in a few array operations over the whole batch (not ~100 small ones a member), and
# each number a member gets is computed from that member's data alone, in an order fixed by it,
# whoever else is in the batch: a member's digest is the same chosen in any batch or alone
# (tests/test_taste_batch.py).


class _Rows(NamedTuple):
    """Documents of some of a batch's members end to end, each member's in their order."""

    member: np.ndarray  # the position of each row's member in the batch
    docs: np.ndarray
    start: np.ndarray  # where each member's rows begin; last: how many rows in all

    @classmethod
    def of(cls, members: Sequence[int], docs: Sequence[np.ndarray]) -> _Rows:
        counts = np.fromiter((len(d) for d in docs), np.int64, len(docs))
        start = np.zeros(len(docs) + 1, np.int64)
        np.cumsum(counts, out=start[1:])
        every = [np.asarray(d, np.int64) for d in docs]
        flat = np.concatenate(every) if every else np.zeros(0, np.int64)
        return cls(np.repeat(np.asarray(members, np.int64), counts), flat, start)

    def split(self, values: np.ndarray) -> list[np.ndarray]:
        """Per-row values, member by member."""
        return np.split(values, self.start[1:-1])


class _Keyed(NamedTuple):
    """Vectors arranged by term: each term they use once, ascending, with the (vector, weight)
    of each of its entries."""

    terms: np.ndarray
    start: np.ndarray  # terms[i]'s entries: start[i]:start[i + 1]
    vector: np.ndarray
    values: np.ndarray
    count: int  # vectors

    @classmethod
    def of(cls, vectors: list[Vector]) -> _Keyed:
        vector, terms, values = _stacked(vectors)
        order = np.argsort(terms, kind="stable")
        terms, vector, values = terms[order], vector[order], values[order]
        new = np.flatnonzero(_starts(terms))
        return cls(terms[new], np.append(new, len(terms)), vector, values, len(vectors))


class _Groups:
    """Every member's group of vectors (their 👍 and 👎 papers, or their topics) as one sparse
    matrix, (member, term) x vectors, member after member: built once for a batch."""

    def __init__(self, width: int, groups: Sequence[_Keyed]) -> None:
        counts = np.fromiter((g.count for g in groups), np.int64, len(groups))
        self.first = np.zeros(len(groups) + 1, np.int64)  # each member's first vector
        np.cumsum(counts, out=self.first[1:])
        sizes = np.fromiter((len(g.terms) for g in groups), np.int64, len(groups))
        entries = np.fromiter((len(g.vector) for g in groups), np.int64, len(groups))
        terms = np.concatenate([g.terms for g in groups]) if groups else np.zeros(0, np.int64)
        # Where each (member, term) is among the matrix's rows, plus 1 (0: the member's group
        # has no such term): a binary search in the member's own terms (scipy's sampling).
        self.lookup = sp.csr_array(
            (np.arange(1, len(terms) + 1), terms, np.r_[0, np.cumsum(sizes)]),
            shape=(len(groups), width),
        )
        self.wanted = np.zeros(width, bool)
        self.wanted[terms] = True
        indptr = np.concatenate([g.start[:-1] for g in groups] + [np.zeros(1, np.int64)])
        indptr += np.repeat(np.r_[0, np.cumsum(entries)], np.r_[sizes, 1])
        self.matrix = sp.csr_matrix(
            (
                np.concatenate([g.values for g in groups] + [np.zeros(0, np.float32)]),
                np.concatenate([g.vector for g in groups] + [np.zeros(0, np.int64)])
                + np.repeat(self.first[:-1], entries),
                indptr,
            ),
            shape=(len(terms), int(self.first[-1])),
        )

    def cosines(self, index: Index, rows: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Cosines of each row's document (its unit TF-IDF vector) with each vector of its
        member's group: (row, position in the group, cosine), those not 0. One sparse product:
        scipy adds a cosine's products in the order of the row's entries (the terms the
        document shares with the member's group, ascending) whoever else is in it, so a
        member's cosines are the same in any batch."""
        n = len(rows.docs)
        if not n or not self.lookup.nnz:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
        # Each distinct document's entries on terms some group has, read once, then each
        # row's (its document's), ascending.
        docs, which = np.unique(rows.docs, return_inverse=True)
        d_rows, d_terms, d_values = _stacked(unit_vectors(index, docs))
        keep = self.wanted[d_terms]
        d_rows, d_terms, d_values = d_rows[keep], d_terms[keep], d_values[keep]
        d_start = np.searchsorted(d_rows, np.arange(len(docs) + 1))
        lengths = np.diff(d_start)[which]
        r_rows = np.repeat(np.arange(n), lengths)
        entry = np.arange(len(r_rows)) + np.repeat(
            d_start[:-1][which] - (np.cumsum(lengths) - lengths), lengths
        )
        if not len(r_rows):
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
        # (scipy searches a row by bisection only for many samples: a few members' rows.)
        lookup, member = self.lookup, rows.member[r_rows]
        asked = np.unique(rows.member)
        if len(asked) < lookup.shape[0]:
            lookup, member = lookup[asked], np.searchsorted(asked, member)
        at = np.asarray(lookup[member, d_terms[entry]]) - 1
        hit = at >= 0
        indptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(r_rows[hit], minlength=n), out=indptr[1:])
        shape = (n, self.matrix.shape[0])
        product = sp.csr_matrix((d_values[entry[hit]], at[hit], indptr), shape=shape) @ self.matrix
        row = np.repeat(np.arange(n), np.diff(product.indptr))
        col = product.indices.astype(np.int64) - self.first[rows.member[row]]
        return row, col, product.data.astype(np.float32, copy=False)


class Batch:
    """Members whose models are asked about papers together (``*_many``): what that needs
    from their models (their clicks and topics arranged by term, their rated papers in the
    semantic space) is gathered once for all of them."""

    def __init__(self, index: Index, tastes: Sequence[Taste]) -> None:
        self.index = index
        self.tastes = list(tastes)

    @cached_property
    def rated(self) -> _Groups:
        """The 👍 then the 👎 papers of each member."""
        return _Groups(self.index.n_terms, [t.rated_keyed for t in self.tastes])

    @cached_property
    def topics(self) -> _Groups:
        return _Groups(self.index.n_terms, [t.topic_keyed for t in self.tastes])

    def _semantic(self, which: str) -> tuple[np.ndarray, np.ndarray]:
        groups = [getattr(t, which) for t in self.tastes]
        first = np.zeros(len(groups) + 1, np.int64)
        np.cumsum([len(g) for g in groups], out=first[1:])
        every = np.concatenate(groups) if groups else np.zeros(0, np.int64)
        return first, semantic_vectors(self.index, every)

    @cached_property
    def semantic_liked(self) -> tuple[np.ndarray, np.ndarray]:
        """Each member's 👍 papers in the semantic space: (first row of each member, rows)."""
        return self._semantic("liked")

    @cached_property
    def semantic_disliked(self) -> tuple[np.ndarray, np.ndarray]:
        return self._semantic("disliked")

    def semantic_cosines(
        self, rows: _Rows, z: np.ndarray, rated: tuple[np.ndarray, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Semantic cosines of each row's document (``z``: the rows' semantic vectors) with
        each of its member's ``rated`` papers: (row of each cosine, cosine), row by row. A
        product per member, of the member's rows and papers: the same numbers in any batch."""
        first, columns = rated
        per_row = (first[1:] - first[:-1])[rows.member]
        out = np.zeros(int(per_row.sum()), np.float32)
        at = 0
        starts = rows.start.tolist()
        for r0, r1 in zip(starts[:-1], starts[1:], strict=True):
            if r0 == r1:
                continue
            member = int(rows.member[r0])
            c0, c1 = int(first[member]), int(first[member + 1])
            size = (r1 - r0) * (c1 - c0)
            if size:
                out[at : at + size] = (z[r0:r1] @ columns[c0:c1].T).ravel()
            at += size
        return np.repeat(np.arange(len(rows.docs)), per_row), out

    # -- the questions ----------------------------------------------------------------------

    def judge(self, members: Sequence[int], docs: Sequence[np.ndarray]) -> Verdicts:
        """``Taste.judge`` of these members (positions in the batch), each about their
        ``docs``: end to end."""
        rows = _Rows.of(members, docs)
        n = len(rows.docs)
        liked_n = np.fromiter((len(t.liked_vectors) for t in self.tastes), np.int64)
        disliked_n = np.fromiter((len(t.disliked_vectors) for t in self.tastes), np.int64)
        stride = np.int64(self.index.n_docs)
        disliked = [np.int64(k) * stride + self.tastes[k].disliked for k in members]
        unwanted = isin(
            rows.member * stride + rows.docs,
            np.concatenate(disliked) if disliked else np.zeros(0, np.int64),
        )
        row, col, cosine = self.rated.cosines(self.index, rows)
        liked = col < liked_n[rows.member[row]]
        best_liked = _row_max(n, row[liked], cosine[liked])
        worst = _row_max(n, row[~liked], cosine[~liked])
        has_disliked = disliked_n[rows.member] > 0
        unwanted |= has_disliked & (worst >= NEAR_DISLIKED)
        if DISLIKE_MARGIN >= 0:
            unwanted |= has_disliked & (worst > best_liked + DISLIKE_MARGIN)
        count = np.bincount(row[liked & (cosine >= REASON_COSINE)], minlength=n).astype(np.int64)
        # The most alike 👍 paper, the first of equals (numpy's argmax: the first 👍 paper
        # when none shares a term).
        none = np.iinfo(np.int64).max
        first = np.full(n, none, np.int64)
        top = liked & (cosine == best_liked[row])
        np.minimum.at(first, row[top], col[top])
        example = np.where(liked_n[rows.member] > 0, 0, -1).astype(np.int64)
        return Verdicts(unwanted, count, np.where(first < none, first, example))

    def topic_closeness(self, members: Sequence[int], docs: Sequence[np.ndarray]) -> np.ndarray:
        """``Taste.topic_closeness``, end to end."""
        rows = _Rows.of(members, docs)
        row, _, cosine = self.topics.cosines(self.index, rows)
        return _row_max(len(rows.docs), row, cosine)

    def expected_like(self, members: Sequence[int], docs: Sequence[np.ndarray]) -> np.ndarray:
        """``Taste.expected_like``, end to end (each member's votes summed in the order of
        their rated papers)."""
        rows = _Rows.of(members, docs)
        n = len(rows.docs)
        z = semantic_vectors(self.index, rows.docs)
        votes = []
        for rated in (self.semantic_liked, self.semantic_disliked):
            row, cosine = self.semantic_cosines(rows, z, rated)
            kernel = np.exp((cosine - 1.0) / KERNEL_BANDWIDTH)
            votes.append(np.bincount(row, weights=kernel, minlength=n))
        votes_liked, votes_disliked = votes
        prior = KERNEL_PRIOR * np.exp(-1.0 / KERNEL_BANDWIDTH)
        rate = np.fromiter((t.like_rate for t in self.tastes), np.float64)[rows.member]
        return (votes_liked + prior * rate) / (votes_liked + votes_disliked + prior)

    def semantic_closeness(self, members: Sequence[int], docs: Sequence[np.ndarray]) -> np.ndarray:
        """``Taste.semantic_closeness``, end to end."""
        rows = _Rows.of(members, docs)
        n = len(rows.docs)
        z = semantic_vectors(self.index, rows.docs)
        row, cosine = self.semantic_cosines(rows, z, self.semantic_liked)
        per_row = np.bincount(row, minlength=n)
        first = np.cumsum(per_row) - per_row
        out = np.zeros(n, np.float32)
        # Rows with as many 👍 papers together: each row's cosines a line of one matrix.
        for count in np.unique(per_row[per_row > 0]).tolist():
            at = np.flatnonzero(per_row == count)
            cosines = cosine[first[at, np.newaxis] + np.arange(count)]
            nearest = -np.sort(-cosines, axis=1)[:, :SEMANTIC_NEAREST]
            out[at] = nearest.mean(axis=1)
        return out

    def near_disliked(self, members: Sequence[int], docs: Sequence[np.ndarray]) -> np.ndarray:
        """``Taste.near_disliked``, end to end."""
        unwanted = self.judge(members, docs).unwanted
        if TOPIC_MIN_EXPECTED > 0 and len(unwanted):
            unwanted |= self.expected_like(members, docs) < TOPIC_MIN_EXPECTED
        return unwanted


def _row_max(n: int, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each row's largest value, 0 for a row with none (or none above 0)."""
    out = np.zeros(n, np.float32)
    np.maximum.at(out, rows, values)
    return out


def first_passing(
    candidates: Sequence[np.ndarray],
    wanted: Sequence[int],
    check: Callable[[list[int], list[np.ndarray]], list[np.ndarray]],
) -> list[list[int]]:
    """For each member, the positions of the first ``wanted`` of their ``candidates`` that
    pass ``check`` (asked about the blocks of many members at once: ``(members, blocks) ->
    whether each passes``). A member's blocks start at ``wanted + 2`` candidates and double:
    most need one. A verdict depends on its paper alone, so the blocks change only the time."""
    found: list[list[int]] = [[] for _ in candidates]
    start = [0] * len(candidates)
    step = [w + 2 for w in wanted]
    while True:
        active = [
            k
            for k, docs in enumerate(candidates)
            if start[k] < len(docs) and len(found[k]) < wanted[k]
        ]
        if not active:
            return [f[: max(w, 0)] for f, w in zip(found, wanted, strict=True)]
        blocks = [candidates[k][start[k] : start[k] + step[k]] for k in active]
        for k, block, passed in zip(active, blocks, check(active, blocks), strict=True):
            found[k] += (np.flatnonzero(passed) + start[k]).tolist()
            start[k], step[k] = start[k] + len(block), step[k] * 2


def topic_vectors(index: Index, topics: Sequence[str]) -> list[Vector]:
    """The topics' query vectors (unit length), as the digest matches them (each text read
    once per index generation: members share topics)."""
    return [v for v in _TOPIC_VECTORS.get(index, topics) if v is not None]


def _topic_vector(index: Index, text: str) -> Vector | None:
    try:
        ranked = parse_query(text).ranked_text
    except QueryError:
        return None
    term_ids, weights = index.vectorize(analyze(ranked))
    if not len(term_ids):
        return None
    order = np.argsort(term_ids)
    return term_ids[order].astype(np.int64), weights[order]


#: Papers' unit TF-IDF vectors and topics' query vectors (None: not a usable query).
_UNIT_VECTORS = _PerGeneration(_unit_vector, _unit_vectors)
_TOPIC_VECTORS = _PerGeneration(_topic_vector)


def remember_topic_vectors(index: Index, vectors: dict[str, Vector]) -> None:
    """Topics' query vectors the digest's matching already made (``matching.match_topics``
    vectorizes each topic as ``_topic_vector`` does: the same numbers), so that training a
    batch's models does not parse and vectorize every topic a second time."""
    known = {}
    for text, (term_ids, weights) in vectors.items():
        if len(term_ids):
            order = np.argsort(term_ids)
            known[text] = (term_ids[order].astype(np.int64), weights[order])
    _TOPIC_VECTORS.put(index, known)


def _weighted_sum(parts: list[tuple[float, list[Vector]]]) -> Vector:
    """Sum over groups of ``weight * mean(group)``, as a sparse vector."""
    terms, values = [], []
    for weight, group in parts:
        if group:
            _, group_terms, group_values = _stacked(group)
            terms.append(group_terms)
            values.append(group_values * np.float32(weight / len(group)))
    if not terms:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    every, weights = np.concatenate(terms), np.concatenate(values)
    order = np.argsort(every, kind="stable")
    every, weights = every[order], weights[order]
    first = _starts(every)
    sums = np.bincount(np.cumsum(first) - 1, weights=weights)
    return every[first], sums.astype(np.float32)


def _as_query(terms: np.ndarray, values: np.ndarray, keep: int) -> Vector:
    """The strongest ``keep`` positive entries of a term vector, unit length."""
    positive = np.flatnonzero(values > 0)
    if not len(positive):
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    top = np.sort(positive[np.argsort(-values[positive], kind="stable")[:keep]])
    weights = values[top].astype(np.float32)
    return terms[top].astype(np.int64), weights / np.float32(np.linalg.norm(weights))


def train(
    index: Index,
    user_id: str,
    liked: Sequence[tuple[int, str]],
    disliked: Sequence[int],
    topics: Sequence[str],
    *,
    method: str = "rocchio",
) -> Taste:
    """The member's model from their rated documents (``liked``: (document, paper id))."""
    liked_docs = np.asarray([d for d, _ in liked], np.int64)
    disliked_docs = np.asarray(disliked, np.int64)
    liked_rows = unit_vectors(index, liked_docs)
    disliked_rows = unit_vectors(index, disliked_docs)
    topic_rows = topic_vectors(index, topics)
    if method == "svm" and len(liked_docs):
        terms, values = _svm_vector(index, liked_rows, disliked_rows, topic_rows, user_id)
    else:
        terms, values = _weighted_sum(
            [
                (LIKE_WEIGHT, liked_rows),
                (TOPIC_WEIGHT, topic_rows),
                (-DISLIKE_WEIGHT, disliked_rows),
            ]
        )
    if PROFILE_MAX_DF < 1.0 and len(terms):
        common = max(PROFILE_MAX_DF * index.n_live, PROFILE_COMMON_PAPERS)
        specific = index.df[terms] <= common
        terms, values = terms[specific], values[specific]
    term_ids, weights = _as_query(terms, values, PROFILE_TERMS)
    return Taste(
        user_id,
        unique(liked_docs),
        unique(disliked_docs),
        term_ids,
        weights,
        liked_rows,
        disliked_rows,
        [paper for _, paper in liked],
        topic_rows,
    )


def logistic_regression(x: np.ndarray, y: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    """Weights and intercept of scikit-learn's ``LogisticRegression(C=c,
    class_weight="balanced")`` on rows ``x`` with labels ``y`` (1 or 0; both present), the
    same optimum (tests/test_taste.py compares them) found without its per-fit cost (a few ms
    of checks and L-BFGS over thousands of terms: seconds for a batch of 1,000 members).

    A member has far fewer clicks than terms, so the weights lie in the span of the rows
    (representer theorem: ``w = x.T @ a``): Newton's method, with step halving, runs over
    ``a`` and the unpenalised intercept, a linear system as small as the number of clicks
    (no eigendecomposition: LAPACK's, threaded, cost 30 ms a member on a loaded machine).
    """
    n = len(y)
    sign = np.where(y > 0, 1.0, -1.0)
    liked = int((y > 0).sum())
    weight = np.where(y > 0, n / (2 * liked), n / (2 * (n - liked)))  # balanced classes
    gram = (x @ x.T).astype(np.float64)
    a, b = np.zeros(n), 0.0

    def loss(a: np.ndarray, b: float) -> float:
        margins = sign * (gram @ a + b)
        return 0.5 * float(a @ gram @ a) + c * float((weight * np.logaddexp(0.0, -margins)).sum())

    current = loss(a, b)
    system = np.zeros((n + 1, n + 1))
    for _ in range(50):
        wrong = 1.0 / (1.0 + np.exp(sign * (gram @ a + b)))  # probability of the other class
        slope = -weight * sign * wrong  # the loss's derivative in each row's score
        curve = weight * wrong * (1.0 - wrong)
        # Newton's system divided through by the Gram matrix (which may be singular):
        # (I + C D K) da + C D 1 db = a + C g;  1' D K da + 1' D 1 db = 1' g.
        system[:n, :n] = np.eye(n) + c * curve[:, None] * gram
        system[:n, n] = c * curve
        system[n, :n] = curve @ gram
        system[n, n] = curve.sum()
        rhs = np.r_[a + c * slope, slope.sum()]
        step = np.linalg.solve(system, rhs)
        size = 1.0
        trial_a, trial_b = a - step[:n], b - step[n]
        value = loss(trial_a, trial_b)
        while value > current and size > 1e-4:
            size /= 2
            trial_a, trial_b = a - size * step[:n], b - size * step[n]
            value = loss(trial_a, trial_b)
        if value > current:
            break
        a, b, gain, current = trial_a, trial_b, current - value, value
        if gain <= 1e-12 * max(1.0, current):
            break
    return (x.T @ a.astype(np.float32)).astype(np.float32), float(b)


def _svm_vector(
    index: Index,
    liked: list[Vector],
    disliked: list[Vector],
    topics: list[Vector],
    user_id: str,
) -> Vector:
    """arxiv-sanity-lite's recipe: a linear SVM's weights (positive: 👍 and topics; negative:
    👎 and a random background of papers, the same for a member every time)."""
    rng = np.random.default_rng(zlib.crc32(user_id.encode()))
    live = index.live_docs()
    background = rng.choice(live, size=min(SVM_BACKGROUND, len(live)), replace=False)
    positives = [*liked, *topics]
    negatives = [*disliked, *unit_vectors(index, background)]
    terms, (x_pos, x_neg) = _compact(positives, negatives)
    x = sp.csr_matrix(np.vstack([x_pos, x_neg]))
    y = np.r_[np.ones(len(positives)), np.zeros(len(negatives))]
    model = LinearSVC(C=0.01, class_weight="balanced", max_iter=2000, tol=1e-4)
    model.fit(x, y)
    return terms, model.coef_.ravel().astype(np.float32)


# --- members' models, read from the shared state and cached ------------------------------------


class _Cache:
    """Trained models per (database, member), keyed by what they were trained from."""

    _lock = threading.Lock()
    _models: OrderedDict[tuple[str, str], tuple[tuple, Taste]] = OrderedDict()

    @classmethod
    def get(cls, where: str, user_id: str, key: tuple) -> Taste | None:
        with cls._lock:
            hit = cls._models.get((where, user_id))
            if hit is None or hit[0] != key:
                return None
            cls._models.move_to_end((where, user_id))
            return hit[1]

    @classmethod
    def put(cls, where: str, user_id: str, key: tuple, taste: Taste) -> None:
        with cls._lock:
            cls._models[(where, user_id)] = (key, taste)
            cls._models.move_to_end((where, user_id))
            while len(cls._models) > CACHE_MEMBERS:
                cls._models.popitem(last=False)


def _docs_of_papers(engine: Engine, index: Index, paper_ids: Iterable[str]) -> dict[str, int]:
    """Index documents of papers (those still in the corpus)."""
    wanted = list(dict.fromkeys(paper_ids))
    out: dict[str, int] = {}
    for start in range(0, len(wanted), 5000):
        batch = wanted[start : start + 5000]
        rows = engine.db.execute(
            f"select id, rowid from papers where id in ({','.join('?' * len(batch))})", batch
        ).fetchall()
        for paper, rowid in rows:
            doc = index.doc_of_rowid(rowid)
            if doc is not None:
                out[paper] = doc
    return out


def tastes(
    engine: Engine,
    topics_by_member: dict[MemberKey, Sequence[str]],
    clicks_by_member: dict[MemberKey, Sequence[Click]] | None = None,
    *,
    method: str = "rocchio",
) -> dict[MemberKey, Taste]:
    """The models of these members (``(team_id, user_id)``: one per workspace) who have given
    any feedback (others are left out: their digest stays exactly as it was).
    ``clicks_by_member``: their clicks newest first, when the caller has them; read from the
    shared state otherwise, in one query."""
    if clicks_by_member is None:
        stored = state_for(engine.db_path).feedback_by_member(list(topics_by_member))
        clicks_by_member = {
            user: [Click(paper, kind) for paper, kind, _ in rows] for user, rows in stored.items()
        }
    index = engine.index
    where = str(engine.db_path)
    out: dict[MemberKey, Taste] = {}
    missing: dict[MemberKey, tuple[tuple, list[Click]]] = {}
    for user, clicks in clicks_by_member.items():
        if user not in topics_by_member or not clicks:
            continue
        recent = list(clicks)[:MAX_CLICKS]
        key = (index.corpus_version, method, tuple(recent), tuple(topics_by_member[user]))
        cached = _Cache.get(where, user, key)
        if cached is not None:
            out[user] = cached
        else:
            missing[user] = (key, recent)
    if missing:
        docs = _docs_of_papers(
            engine, index, (c.paper_id for _, recent in missing.values() for c in recent)
        )
        unit_vectors(index, sorted(set(docs.values())))  # read at once, not member by member
        for user, (key, recent) in missing.items():
            liked = [(docs[c.paper_id], c.paper_id) for c in recent if c.kind == "like"]
            liked = [(d, p) for d, p in liked if p in docs]
            disliked = [
                docs[c.paper_id] for c in recent if c.kind == "dislike" and c.paper_id in docs
            ]
            name = f"{user[0]}:{user[1]}" if user[0] else user[1]
            taste = train(index, name, liked, disliked, topics_by_member[user], method=method)
            _Cache.put(where, user, key, taste)
            out[user] = taste
    return out


def taste_of(
    engine: Engine, user_id: str, topics: Sequence[str], team_id: str | None = None
) -> Taste | None:
    """One member's model (None: they have given no feedback yet)."""
    key = (state_for(engine.db_path).team_for(user_id, team_id), user_id)
    return tastes(engine, {key: list(topics)}).get(key)


# --- scoring every paper -----------------------------------------------------------------------


def score_all(index: Index, models: Sequence[Taste]) -> list[Vector]:
    """Each model's scores of the papers, as sparse (documents ascending, scores) keeping those
    of at least ``SCORE_KEEP``: the profiles are stacked and multiplied with the index a chunk
    at a time (``Index.score_matrix``, as the digest's topics are), not one by one."""
    out: list[Vector] = []
    for start in range(0, len(models), CHUNK_MODELS):
        chunk = models[start : start + CHUNK_MODELS]
        indptr = np.zeros(len(chunk) + 1, np.int64)
        np.cumsum([len(m.term_ids) for m in chunk], out=indptr[1:])
        queries = sp.csr_matrix(
            (
                np.concatenate([m.weights for m in chunk]).astype(np.float32),
                np.concatenate([m.term_ids for m in chunk]).astype(np.int64),
                indptr,
            ),
            shape=(len(chunk), index.n_terms),
        )
        product = index.score_matrix(queries).tocsr()
        keep = product.data >= SCORE_KEEP
        rows = np.repeat(np.arange(len(chunk)), np.diff(product.indptr))
        bounds = np.r_[0, np.cumsum(np.bincount(rows[keep], minlength=len(chunk)))]
        # Only the scores kept are sorted (each row's documents ascending, in one pass for
        # the chunk): a tenth of the product.
        kept = sp.csr_matrix(
            (product.data[keep], product.indices[keep], bounds), shape=product.shape
        )
        kept.sort_indices()
        docs = kept.indices.astype(np.int64)
        values = kept.data.astype(np.float32)
        bounds = bounds.tolist()
        for row in range(len(chunk)):
            out.append((docs[bounds[row] : bounds[row + 1]], values[bounds[row] : bounds[row + 1]]))
    return out


def scores_of(scores: Vector, docs: np.ndarray) -> np.ndarray:
    """The model's scores of these documents (0 below ``SCORE_KEEP``)."""
    known, values = scores
    if not len(known) or not len(docs):
        return np.zeros(len(docs), np.float32)
    at = np.minimum(np.searchsorted(known, docs), len(known) - 1)
    return np.where(known[at] == docs, values[at], np.float32(0))


# --- recommendations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """A paper the model likes, and why: like ``liked_count`` papers the member 👍, e.g. one."""

    doc: int
    score: float
    liked_count: int
    example: str | None  # paper id of the most alike 👍 paper


def recommend_pool(
    taste: Taste,
    scores: Vector,
    *,
    exclude: np.ndarray | None = None,
    floor: float | None = None,
) -> Vector:
    """The candidates ``recommend`` looks among: the model's best ``RECOMMEND_POOL`` papers
    (``scores``: ``score_all``'s for it) scoring at least ``floor``, neither rated nor in
    ``exclude``, as (documents, scores), the best first (a tie: the lower document)."""
    docs, values = scores
    good = values >= (RECOMMEND_FLOOR if floor is None else floor)
    docs, values = docs[good], values[good]
    banned = taste.rated if exclude is None else union(taste.rated, exclude)
    allowed = ~isin(docs, banned)
    docs, values = docs[allowed], values[allowed]
    if len(docs) > RECOMMEND_POOL:  # only those scoring at least the pool's last (ties too)
        last = np.partition(values, len(values) - RECOMMEND_POOL)[len(values) - RECOMMEND_POOL]
        top = values >= last
        docs, values = docs[top], values[top]
    best = np.lexsort((docs, -values))[:RECOMMEND_POOL]
    return docs[best], values[best]


def recommend(
    index: Index,
    taste: Taste,
    scores: Vector,
    *,
    limit: int,
    exclude: np.ndarray | None = None,
    floor: float | None = None,
    pool: Vector | None = None,
) -> list[Recommendation]:
    """The model's best papers (``scores``: ``score_all``'s for it), without ``exclude``
    (documents), the rated ones and those the 👎 rule out (``Taste.judge``); only those scoring
    at least ``floor`` and like ``RECOMMEND_MIN_LIKED`` 👍 papers, among the best
    ``RECOMMEND_POOL`` (``pool``: ``recommend_pool``'s answer, when the caller has it)."""
    if limit <= 0 or not len(taste.liked):
        return []
    if pool is None:
        pool = recommend_pool(taste, scores, exclude=exclude, floor=floor)
    return recommend_many(Batch(index, [taste]), [pool], [limit])[0]


def recommend_many(
    batch: Batch, pools: Sequence[Vector], limits: Sequence[int]
) -> list[list[Recommendation]]:
    """``recommend`` for every member of ``batch`` at once (each with their
    ``recommend_pool`` and limit)."""
    tastes = batch.tastes
    out: list[list[Recommendation]] = [[] for _ in tastes]
    active = [
        k for k, t in enumerate(tastes) if limits[k] > 0 and len(t.liked) and len(pools[k][0])
    ]
    if not active:
        return out
    docs = [pools[k][0] for k in active]
    rows = _Rows.of(active, docs)
    scores = np.concatenate([pools[k][1] for k in active])
    # Papers near the member's topics first, the others only when those run out (a member
    # whose 👍 lie outside their topics still gets recommendations); within each, by the
    # classifier (``RECOMMEND_RANK``) or the profile's score.
    far = np.zeros(len(rows.docs), bool)
    if RECOMMEND_NEAR_TOPIC >= 0:
        has_topics = np.fromiter((bool(t.topic_vectors) for t in tastes), bool, len(tastes))
        closeness = batch.topic_closeness(active, docs)
        far = has_topics[rows.member] & (closeness <= RECOMMEND_NEAR_TOPIC)
    rank = np.arange(len(rows.docs), dtype=np.float64)
    if RECOMMEND_RANK == "semantic":
        rank = -batch.semantic_closeness(active, docs)
    elif RECOMMEND_RANK == "classifier":
        for j, k in enumerate(active):
            probability = tastes[k].like_probability(batch.index, docs[j])
            if probability is not None:
                rank[rows.start[j] : rows.start[j + 1]] = -probability
    order = np.lexsort((rank, far, rows.member))
    ordered, ordered_scores = rows.split(rows.docs[order]), rows.split(scores[order])
    reasons: list[list[tuple[int, int]]] = [[] for _ in active]  # the passing ones' (n, example)

    def check(which: list[int], blocks: list[np.ndarray]) -> list[np.ndarray]:
        verdicts = batch.judge([active[j] for j in which], blocks)
        passed = ~verdicts.unwanted & (verdicts.liked_count >= RECOMMEND_MIN_LIKED)
        split = _Rows.of(which, blocks).split
        for j, ok, counts, examples in zip(
            which, split(passed), split(verdicts.liked_count), split(verdicts.example), strict=True
        ):
            reasons[j] += zip(counts[ok].tolist(), examples[ok].tolist(), strict=True)
        return split(passed)

    chosen = first_passing(ordered, [limits[k] for k in active], check)
    for j, k in enumerate(active):
        liked_ids = tastes[k].liked_ids
        out[k] = [
            Recommendation(doc, float(score), max(n, 1), liked_ids[e] if e >= 0 else None)
            for doc, score, (n, e) in zip(
                ordered[j][chosen[j]].tolist(),
                ordered_scores[j][chosen[j]].tolist(),
                reasons[j],
                strict=False,  # reasons may hold more: the block's passing ones past the limit
            )
        ]
    return out


@dataclass
class MemberRecommendations:
    """What ``/papers recommend`` and the App Home show: the papers (corpus dicts) with why,
    and the member's click counts (to say why there are none)."""

    papers: list[tuple[dict, Recommendation]]
    likes: int
    dislikes: int
    liked_titles: dict[str, str]  # paper id -> title, for the "e.g." of each paper


def recommendations_for(
    engine: Engine, user_id: str, limit: int = 5, *, team_id: str | None = None
) -> MemberRecommendations:
    """The member's current top recommendations: not rated, never sent to them, not on their
    reading list already, nor very close to a paper they 👎-ed."""
    store = state_for(engine.db_path)
    member = (store.team_for(user_id, team_id), user_id)
    clicks = store.feedback_by_member([member]).get(member, [])
    likes = sum(kind == "like" for _, kind, _ in clicks)
    empty = MemberRecommendations([], likes, len(clicks) - likes, {})
    if not likes:
        return empty
    topics = [row["query"] for row in store.topics([member])]
    model = tastes(engine, {member: topics}, {member: [Click(p, k) for p, k, _ in clicks]}).get(
        member
    )
    if model is None:
        return empty
    index = engine.index
    saved = [row["paper_id"] for row in store.saved_papers(user_id, team_id=member[0])[0]]
    had = store.sent_papers([member]).get(member, []) + saved
    sent = list(_docs_of_papers(engine, index, had).values())
    [scores] = score_all(index, [model])
    found = recommend(index, model, scores, limit=limit, exclude=np.asarray(sent, np.int64))
    rowids = [int(index.rowids[r.doc]) for r in found]
    papers = engine.corpus.by_rowids(rowids)
    examples = {r.example for r in found if r.example}
    titles = {p["id"]: p.get("title") or p["id"] for p in engine.corpus.get_many(sorted(examples))}
    return MemberRecommendations(
        list(zip(papers, found, strict=True)), likes, len(clicks) - likes, titles
    )


def forget() -> None:
    """Empty this process's caches (models, paper and topic vectors), as a restart would."""
    with _Cache._lock:
        _Cache._models.clear()
    _UNIT_VECTORS.forget()
    _TOPIC_VECTORS.forget()
    _SEMANTIC.forget()
