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

Speed
=====
A model learns from the member's ``MAX_CLICKS`` newest clicks only, and is cached per member,
keyed by those clicks, their topics and the corpus version: a click changes the key, so the
next use trains again (lazily: nothing runs at click time), and every other use is a lookup.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from sklearn.svm import LinearSVC

from bot.engine.index import Index
from bot.engine.query import QueryError, parse_query
from bot.engine.search import Engine
from bot.engine.text import analyze
from bot.state import state_for

#: The newest clicks a model learns from (caps the work of an update).
MAX_CLICKS = 200
#: The strongest terms of a profile that are run through the index as its query.
PROFILE_TERMS = 100
#: Rocchio's weights: 👍 papers, 👎 papers, topics (weak evidence).
LIKE_WEIGHT = 1.0
DISLIKE_WEIGHT = 0.5
TOPIC_WEIGHT = 0.35
#: A paper whose cosine with a 👎-ed one is at least this is "very close" to it and never comes
#: (measured: bench/feedback_digests.py --near; see bench/README.md).
NEAR_DISLIKED = 0.5
#: A 👍 paper counts as a reason for a recommendation when their cosine is at least this.
REASON_COSINE = 0.1
#: Recommendations need at least this model score (the topic match threshold's scale).
RECOMMEND_FLOOR = 0.1
#: The SVM's background: random papers taken as negatives besides the 👎 ones.
SVM_BACKGROUND = 300
#: Members whose models stay cached in one process.
CACHE_MEMBERS = 20_000

METHODS = ("rocchio", "svm")


@dataclass(frozen=True)
class Click:
    paper_id: str
    kind: str  # like | dislike


@dataclass
class Taste:
    """One member's model: their rated papers (index documents) and the profile query."""

    user_id: str
    liked: np.ndarray
    disliked: np.ndarray
    term_ids: np.ndarray
    weights: np.ndarray
    liked_vectors: sp.csr_matrix  # unit rows, for "like the 3 papers you 👍"
    disliked_vectors: sp.csr_matrix  # unit rows, for "very close to a 👎-ed paper"
    liked_ids: list[str] = field(default_factory=list)
    _scores: np.ndarray | None = None

    @property
    def rated(self) -> np.ndarray:
        return np.union1d(self.liked, self.disliked)

    def scores(self, index: Index) -> np.ndarray:
        """The model's score of every document (dense; 0 for papers sharing no term)."""
        if self._scores is None or len(self._scores) != index.n_docs:
            dense = np.zeros(index.n_docs, np.float32)
            if len(self.term_ids):
                docs, values = index.score(self.term_ids, self.weights)
                dense[docs] = values
            self._scores = dense
        return self._scores

    def near_disliked(self, index: Index, docs: np.ndarray) -> np.ndarray:
        """Which of ``docs`` are 👎-ed or very close to a 👎-ed paper (cosine ``NEAR_DISLIKED``)."""
        out = np.isin(docs, self.disliked)
        if not self.disliked_vectors.shape[0] or not len(docs):
            return out
        cosines = (unit_rows(index, docs) @ self.disliked_vectors.T).toarray()
        return out | (cosines.max(axis=1) >= NEAR_DISLIKED)

    def reasons(self, index: Index, docs: np.ndarray) -> list[tuple[int, str | None]]:
        """Per document: how many 👍 papers it is like (cosine ``REASON_COSINE``, at least
        one), and the most alike one's paper id."""
        if not self.liked_vectors.shape[0] or not len(docs):
            return [(0, None)] * len(docs)
        cosines = (unit_rows(index, docs) @ self.liked_vectors.T).toarray()
        out = []
        for row in cosines:
            alike = int((row >= REASON_COSINE).sum())
            out.append((max(alike, 1), self.liked_ids[int(np.argmax(row))]))
        return out


def unit_rows(index: Index, docs: Iterable[int]) -> sp.csr_matrix:
    """Documents' TF-IDF vectors as unit-length rows (documents x terms)."""
    docs = list(docs)
    indptr = [0]
    indices, data = [], []
    for doc in docs:
        terms, values = index.doc_vector(int(doc))
        norm = float(np.linalg.norm(values)) or 1.0
        indices.append(terms)
        data.append(values / norm)
        indptr.append(indptr[-1] + len(terms))
    if not docs:
        return sp.csr_matrix((0, index.n_terms), dtype=np.float32)
    return sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.asarray(indptr)),
        shape=(len(docs), index.n_terms),
        dtype=np.float32,
    )


def topic_vectors(index: Index, topics: Sequence[str]) -> sp.csr_matrix:
    """The topics' query vectors (unit rows), as the digest matches them."""
    indptr, indices, data = [0], [], []
    for text in topics:
        try:
            ranked = parse_query(text).ranked_text
        except QueryError:
            continue
        term_ids, weights = index.vectorize(analyze(ranked))
        indices.append(term_ids)
        data.append(weights)
        indptr.append(indptr[-1] + len(term_ids))
    if len(indptr) == 1:
        return sp.csr_matrix((0, index.n_terms), dtype=np.float32)
    return sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.asarray(indptr)),
        shape=(len(indptr) - 1, index.n_terms),
        dtype=np.float32,
    )


def _mean(rows: sp.csr_matrix) -> np.ndarray:
    if not rows.shape[0]:
        return np.zeros(rows.shape[1], np.float32)
    return np.asarray(rows.mean(axis=0)).ravel()


def _as_query(vector: np.ndarray, terms: int) -> tuple[np.ndarray, np.ndarray]:
    """The strongest ``terms`` positive entries of a dense term vector, unit length."""
    positive = np.flatnonzero(vector > 0)
    if not len(positive):
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    top = positive[np.argsort(-vector[positive], kind="stable")[:terms]]
    top.sort()
    weights = vector[top].astype(np.float32)
    return top.astype(np.int64), weights / np.float32(np.linalg.norm(weights))


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
    liked_rows = unit_rows(index, liked_docs)
    disliked_rows = unit_rows(index, disliked_docs)
    topic_rows = topic_vectors(index, topics)
    if method == "svm" and len(liked_docs):
        vector = _svm_vector(index, liked_rows, disliked_rows, topic_rows, user_id)
    else:
        vector = LIKE_WEIGHT * _mean(liked_rows) + TOPIC_WEIGHT * _mean(topic_rows)
        vector -= DISLIKE_WEIGHT * _mean(disliked_rows)
    term_ids, weights = _as_query(vector, PROFILE_TERMS)
    return Taste(
        user_id,
        np.unique(liked_docs),
        np.unique(disliked_docs),
        term_ids,
        weights,
        liked_rows,
        disliked_rows,
        [paper for _, paper in liked],
    )


def _svm_vector(
    index: Index,
    liked: sp.csr_matrix,
    disliked: sp.csr_matrix,
    topics: sp.csr_matrix,
    user_id: str,
) -> np.ndarray:
    """arxiv-sanity-lite's recipe: a linear SVM's weights (positive: 👍 and topics; negative:
    👎 and a random background of papers, the same for a member every time)."""
    rng = np.random.default_rng(abs(hash(user_id)) % (2**32))
    live = index.live_docs()
    background = rng.choice(live, size=min(SVM_BACKGROUND, len(live)), replace=False)
    negatives = sp.vstack([disliked, unit_rows(index, background)]).tocsr()
    x = sp.vstack([liked, topics, negatives]).tocsr()
    y = np.r_[np.ones(liked.shape[0] + topics.shape[0]), np.zeros(negatives.shape[0])]
    columns = np.unique(x.indices)
    model = LinearSVC(C=0.01, class_weight="balanced", max_iter=2000, tol=1e-4)
    model.fit(x[:, columns], y)
    vector = np.zeros(index.n_terms, np.float32)
    vector[columns] = model.coef_.ravel()
    return vector


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
    topics_by_member: dict[str, Sequence[str]],
    clicks_by_member: dict[str, Sequence[Click]] | None = None,
    *,
    method: str = "rocchio",
) -> dict[str, Taste]:
    """The models of these members who have given any feedback (others are left out: their
    digest stays exactly as it was). ``clicks_by_member``: their clicks newest first, when
    the caller has them; read from the shared state otherwise, in one query."""
    if clicks_by_member is None:
        stored = state_for(engine.db_path).feedback_by_member(list(topics_by_member))
        clicks_by_member = {
            user: [Click(paper, kind) for paper, kind, _ in rows] for user, rows in stored.items()
        }
    index = engine.index
    where = str(engine.db_path)
    out: dict[str, Taste] = {}
    missing: dict[str, tuple[tuple, list[Click]]] = {}
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
        for user, (key, recent) in missing.items():
            liked = [(docs[c.paper_id], c.paper_id) for c in recent if c.kind == "like"]
            liked = [(d, p) for d, p in liked if p in docs]
            disliked = [
                docs[c.paper_id] for c in recent if c.kind == "dislike" and c.paper_id in docs
            ]
            taste = train(index, user, liked, disliked, topics_by_member[user], method=method)
            _Cache.put(where, user, key, taste)
            out[user] = taste
    return out


def taste_of(engine: Engine, user_id: str, topics: Sequence[str]) -> Taste | None:
    """One member's model (None: they have given no feedback yet)."""
    return tastes(engine, {user_id: list(topics)}).get(user_id)


# --- recommendations -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """A paper the model likes, and why: like ``liked_count`` papers the member 👍, e.g. one."""

    doc: int
    score: float
    liked_count: int
    example: str | None  # paper id of the most alike 👍 paper


def recommend(
    index: Index,
    taste: Taste,
    *,
    limit: int,
    exclude: np.ndarray | None = None,
    floor: float | None = None,
) -> list[Recommendation]:
    """The model's best papers, without ``exclude`` (documents), the rated ones and those very
    close to a 👎-ed one; only those scoring at least ``floor``."""
    if limit <= 0 or not len(taste.liked):
        return []
    scores = taste.scores(index)
    candidates = np.flatnonzero(scores >= (RECOMMEND_FLOOR if floor is None else floor))
    banned = taste.rated if exclude is None else np.union1d(taste.rated, exclude)
    candidates = candidates[~np.isin(candidates, banned)]
    if not len(candidates):
        return []
    order = candidates[np.lexsort((candidates, -scores[candidates]))]
    chosen: list[int] = []
    # Near-duplicates of 👎-ed papers are checked a few at a time, best first.
    for start in range(0, len(order), 4 * limit):
        block = order[start : start + 4 * limit]
        chosen += block[~taste.near_disliked(index, block)].tolist()
        if len(chosen) >= limit:
            break
    chosen = chosen[:limit]
    reasons = taste.reasons(index, np.asarray(chosen, np.int64))
    return [
        Recommendation(doc, float(scores[doc]), n, example)
        for doc, (n, example) in zip(chosen, reasons, strict=True)
    ]


@dataclass
class MemberRecommendations:
    """What ``/papers recommend`` and the App Home show: the papers (corpus dicts) with why,
    and the member's click counts (to say why there are none)."""

    papers: list[tuple[dict, Recommendation]]
    likes: int
    dislikes: int
    liked_titles: dict[str, str]  # paper id -> title, for the "e.g." of each paper


def recommendations_for(engine: Engine, user_id: str, limit: int = 5) -> MemberRecommendations:
    """The member's current top recommendations: not rated, never sent to them, nor very close
    to a paper they 👎-ed."""
    store = state_for(engine.db_path)
    clicks = store.feedback_by_member([user_id]).get(user_id, [])
    likes = sum(kind == "like" for _, kind, _ in clicks)
    empty = MemberRecommendations([], likes, len(clicks) - likes, {})
    if not likes:
        return empty
    topics = [row["query"] for row in store.topics([user_id])]
    model = tastes(engine, {user_id: topics}, {user_id: [Click(p, k) for p, k, _ in clicks]}).get(
        user_id
    )
    if model is None:
        return empty
    index = engine.index
    sent = list(
        _docs_of_papers(engine, index, store.sent_papers([user_id]).get(user_id, [])).values()
    )
    found = recommend(index, model, limit=limit, exclude=np.asarray(sent, np.int64))
    rowids = [int(index.rowids[r.doc]) for r in found]
    papers = engine.corpus.by_rowids(rowids)
    examples = {r.example for r in found if r.example}
    titles = {p["id"]: p.get("title") or p["id"] for p in engine.corpus.get_many(sorted(examples))}
    return MemberRecommendations(
        list(zip(papers, found, strict=True)), likes, len(clicks) - likes, titles
    )
