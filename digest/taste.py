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
    #: (index, 👍 papers, 👎 papers) in that index's semantic space, once asked for.
    _semantic_rated: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def rated(self) -> np.ndarray:
        return union(self.liked, self.disliked)

    @cached_property
    def _rated_sides(self) -> _Sides:
        """The 👍 and 👎 papers as two sides, built together (``_Sides.of``)."""
        return _Sides.of([self.liked_vectors, self.disliked_vectors])

    @cached_property
    def _topic_side(self) -> _Side:
        return _Side.of(self.topic_vectors)

    def topic_closeness(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """Each document's best cosine with one of the member's topics' query vectors."""
        if not self.topic_vectors or not len(docs):
            return np.zeros(len(docs), np.float32)
        return self._topic_side.cosines(unit_vectors(index, docs)).max(axis=1)

    def judge(self, index: Index, docs: np.ndarray) -> Verdicts:
        """What the member's clicks say about each of ``docs``: unwanted (👎-ed, very close to
        a 👎-ed paper, or nearer a 👎-ed paper than to every 👍 one by ``DISLIKE_MARGIN``),
        and how many 👍 papers it is like (cosine ``REASON_COSINE``), the most alike first."""
        docs = np.asarray(docs, np.int64)
        n = len(docs)
        unwanted = isin(docs, self.disliked)
        if not n or not (self.liked_vectors or self.disliked_vectors):
            return Verdicts(unwanted, np.zeros(n, np.int64), np.full(n, -1, np.int64))
        liked, disliked = self._rated_sides.cosines(unit_vectors(index, docs))
        best_liked = liked.max(axis=1) if self.liked_vectors else np.zeros(n, np.float32)
        if self.disliked_vectors:
            worst = disliked.max(axis=1)
            unwanted |= worst >= NEAR_DISLIKED
            if DISLIKE_MARGIN >= 0:
                unwanted |= worst > best_liked + DISLIKE_MARGIN
        if self.liked_vectors:
            count = (liked >= REASON_COSINE).sum(axis=1).astype(np.int64)
            example = np.argmax(liked, axis=1).astype(np.int64)
        else:
            count, example = np.zeros(n, np.int64), np.full(n, -1, np.int64)
        return Verdicts(unwanted, count, example)

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
        unwanted = self.judge(index, docs).unwanted
        if TOPIC_MIN_EXPECTED > 0 and len(docs):
            unwanted |= self.expected_like(index, docs) < TOPIC_MIN_EXPECTED
        return unwanted

    @property
    def like_rate(self) -> float:
        """The share of the member's clicks that are 👍, with the prior."""
        likes, dislikes = len(self.liked), len(self.disliked)
        return (likes + PRIOR_LIKES) / (likes + dislikes + PRIOR_LIKES + PRIOR_DISLIKES)

    def semantic_cosines(self, index: Index, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each document's semantic cosines with the member's 👍 and with their 👎 papers."""
        if self._semantic_rated is None or self._semantic_rated[0] is not index:
            rated = semantic_vectors(index, self.liked), semantic_vectors(index, self.disliked)
            self._semantic_rated = (index, *rated)
        _, liked, disliked = self._semantic_rated
        z = semantic_vectors(index, docs)
        return z @ liked.T, z @ disliked.T

    def expected_like(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """How likely the member is to 👍 each of ``docs``: a kernel-weighted vote of the papers
        they rated, by semantic cosine (Nadaraya-Watson), with their 👍 rate as a prior vote."""
        liked, disliked = self.semantic_cosines(index, np.asarray(docs, np.int64))
        votes_liked = np.exp((liked - 1.0) / KERNEL_BANDWIDTH).sum(axis=1)
        votes_disliked = np.exp((disliked - 1.0) / KERNEL_BANDWIDTH).sum(axis=1)
        prior = KERNEL_PRIOR * np.exp(-1.0 / KERNEL_BANDWIDTH)
        return (votes_liked + prior * self.like_rate) / (votes_liked + votes_disliked + prior)

    def semantic_closeness(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """Each document's mean semantic cosine with its ``SEMANTIC_NEAREST`` most alike 👍
        papers (0 without any)."""
        liked, _ = self.semantic_cosines(index, np.asarray(docs, np.int64))
        if not liked.shape[1]:
            return np.zeros(len(liked), np.float32)
        nearest = min(SEMANTIC_NEAREST, liked.shape[1])
        return -np.sort(-liked, axis=1)[:, :nearest].mean(axis=1)

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
    return ordered[np.r_[True, ordered[1:] != ordered[:-1]]]


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
        self.projected: dict[int, np.ndarray] = {}

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
                self.projected = {}
            return self._space

    def forget(self) -> None:
        with self._lock:
            self._index, self._space, self.projected = None, None, {}


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
    wanted = docs.tolist()
    if wanted:
        try:  # the usual case in a batch: every paper projected already (``prefetch``)
            return np.stack([projected[d] for d in wanted])
        except KeyError:
            pass
    missing = unique(docs[[d not in projected for d in wanted]]) if wanted else docs
    if len(projected) + len(missing) > CACHE_VECTORS:
        # A cap on memory: a new cache (a thread still reading the old one keeps it).
        _SEMANTIC.projected = projected = {}
        missing = unique(docs)
    if len(missing):
        # Members of one batch share candidates: each paper projected once per generation.
        z = np.asarray(
            _term_matrix(unit_vectors(index, missing), column, len(components)) @ components,
            np.float32,
        )
        norms = np.linalg.norm(z, axis=1, keepdims=True)
        z /= np.where(norms > 0, norms, 1.0).astype(np.float32)
        projected.update(zip(missing.tolist(), z, strict=True))
    if not len(docs):
        return np.zeros((0, components.shape[1]), np.float32)
    return np.stack([projected[d] for d in wanted])


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
    """Unit vectors as one dense matrix over the terms they use, to take many documents'
    cosines with them without building anything per document but a lookup of its terms."""

    terms: np.ndarray
    matrix: np.ndarray  # vectors x terms

    @classmethod
    def of(cls, vectors: list[Vector]) -> _Side:
        terms, (matrix,) = _compact(vectors)
        return cls(terms, matrix)

    def dot_first(self, others: list[Vector]) -> np.ndarray:
        """The others' dot products with this side's first vector (a weight vector)."""
        return _first_row_dot(self, others)

    def cosines(self, others: list[Vector]) -> np.ndarray:
        """``len(others) x vectors`` cosines: the others' entries on terms this side has, as
        one dense matrix (a few rows), times this side's."""
        if not len(self.terms) or not others:
            return np.zeros((len(others), self.matrix.shape[0]), np.float32)
        rows, terms, values = _stacked(others)
        at, shared = _LOOKUP.positions(self.terms, terms)
        picked = np.zeros((len(others), len(self.terms)), np.float32)
        picked[rows[shared], at[shared]] = values[shared]
        return picked @ self.matrix.T


class _Sides:
    """Several sides whose cosines with the same documents are wanted: the documents' entries
    are looked up once among the terms of all of them, and each side gets exactly the dense
    matrix ``_Side.cosines`` would build for it (its own terms' columns), so the same numbers."""

    def __init__(self, sides: list[_Side]) -> None:
        self.sides = sides
        every = [side.terms for side in sides if len(side.terms)]
        self.terms = unique(np.concatenate(every)) if every else np.zeros(0, np.int64)
        self.columns = [np.searchsorted(self.terms, side.terms) for side in sides]

    @classmethod
    def of(cls, groups: list[list[Vector]]) -> _Sides:
        """``_Sides([_Side.of(group) for group in groups])`` from one ``_compact`` of all the
        groups: each side keeps the columns of the terms its own vectors have (their entries
        are never 0), so its matrix is the one ``_Side.of`` builds."""
        terms, matrices = _compact(*groups)
        sides = cls.__new__(cls)
        sides.terms, sides.sides, sides.columns = terms, [], []
        for matrix in matrices:
            columns = np.flatnonzero(matrix.any(axis=0))
            sides.sides.append(_Side(terms[columns], np.ascontiguousarray(matrix[:, columns])))
            sides.columns.append(columns)
        return sides

    def cosines(self, others: list[Vector]) -> list[np.ndarray]:
        if not len(self.terms) or not others:
            return [side.cosines(others) for side in self.sides]
        rows, terms, values = _stacked(others)
        at, shared = _LOOKUP.positions(self.terms, terms)
        picked = np.zeros((len(others), len(self.terms)), np.float32)
        picked[rows[shared], at[shared]] = values[shared]
        return [
            # Contiguous, as ``_Side.cosines``'s own: BLAS then sums each product alike.
            np.ascontiguousarray(picked[:, columns]) @ side.matrix.T
            if len(side.terms)
            else np.zeros((len(others), side.matrix.shape[0]), np.float32)
            for side, columns in zip(self.sides, self.columns, strict=True)
        ]


def _first_row_dot(side: _Side, others: list[Vector]) -> np.ndarray:
    """``side.cosines(others)[:, 0]`` without the dense matrix: a gather and a sum per entry."""
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
    first = np.r_[True, every[1:] != every[:-1]]
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
    order, values = pool
    if not len(order):
        return []
    score_of = dict(zip(order.tolist(), values.tolist(), strict=True))
    # Papers near the member's topics first, the others only when those run out (a member
    # whose 👍 lie outside their topics still gets recommendations); within each, by the
    # classifier (``RECOMMEND_RANK``) or the profile's score.
    far = np.zeros(len(order), bool)
    if RECOMMEND_NEAR_TOPIC >= 0 and taste.topic_vectors:
        far = taste.topic_closeness(index, order) <= RECOMMEND_NEAR_TOPIC
    rank = np.arange(len(order), dtype=np.float64)
    if RECOMMEND_RANK == "semantic":
        rank = -taste.semantic_closeness(index, order)
    elif RECOMMEND_RANK == "classifier":
        probability = taste.like_probability(index, order)
        rank = rank if probability is None else -probability
    order = order[np.lexsort((rank, far))]
    found: list[Recommendation] = []
    # Candidates are judged a few at a time, best first, until enough pass.
    start, step = 0, limit + 2
    while start < len(order) and len(found) < limit:
        block = order[start : start + step]
        start, step = start + len(block), step * 2
        verdicts = taste.judge(index, block)
        for doc, unwanted, n, example in zip(
            block.tolist(),
            verdicts.unwanted,
            verdicts.liked_count,
            verdicts.example,
            strict=True,
        ):
            if unwanted or n < RECOMMEND_MIN_LIKED:
                continue
            paper = taste.liked_ids[int(example)] if example >= 0 else None
            found.append(Recommendation(doc, float(score_of[doc]), max(int(n), 1), paper))
    return found[:limit]


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
    """The member's current top recommendations: not rated, never sent to them, nor very close
    to a paper they 👎-ed."""
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
    sent = list(
        _docs_of_papers(engine, index, store.sent_papers([member]).get(member, [])).values()
    )
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
