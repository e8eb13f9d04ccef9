"""Which papers go in each member's next digest: for every member at once, no Slack.

Matching
========
A paper matches a topic when its score for the topic is at least ``MATCH_THRESHOLD = 0.14``.
Scores are the engine's: sublinear TF-IDF over unigrams and bigrams, a unit-length query and a
paper vector divided by its pivoted length (``bot/engine/index.py``: the cosine for a paper of
average length), so they compare across topics and papers like cosines do.

Measured with ``python -m bench.digest_speed --threshold``: 200 author keywords per topic length
(1, 2, 3+ words), sampled with a fixed seed, run as topics against the 7,877-paper evaluation
corpus (its keywords are emptied, so a paper's own tags cannot make it match); a paper is
on-topic when its authors tagged it with that keyword. The F1 optimum is flat and lands on 0.14
for one word (F1 0.183) and for three or more (0.086), 0.16 for two (0.308; 0.305 at 0.14), so
one threshold serves every topic. On the 87k corpus 0.14 gives a keyword topic a median of 90
matching papers (90th percentile 336), none matches more than 2% of the corpus, and 5% match
nothing. Re-run the measurement when the engine's scoring changes.

Why an absolute score and not "the top k": a digest must be able to say "nothing new on your
topic today", and a topic that matches little must not be padded with noise. The cost: a very
general single word ("learning", "optimization") matches nothing, because no paper is mostly
about it; ``check_topic`` says so at subscribe time rather than "nothing found".

Batch
=====
Identical topics (see ``subscriptions.normalize_topic``) are matched once for all members. All
distinct topics become the rows of one sparse query matrix, multiplied by the inverted index
(terms x papers) a chunk of rows at a time; only entries at or above the threshold are kept.
Phrases, exclusions and filters then narrow each topic's matches exactly as in lookups (the
engine's own phrase and filter code). ``match_topics_one_by_one`` is the straightforward
per-topic loop with identical results, kept as the reference for tests and the benchmark.

Ordering
========
Papers already sent to the member never come again. Papers added to the corpus since the
member's last digest come first, then the best remaining older matches, at most
``DIGEST_SIZE``; each paper appears once, under the topic it matches best, with the terms that
made it match.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import scipy.sparse as sp

from bot.engine.index import Index
from bot.engine.query import Query, QueryError, parse_query
from bot.engine.search import Engine, Hit
from bot.engine.text import analyze
from bot.english import count

from .subscriptions import Subscriptions, Topic, from_iso

MATCH_THRESHOLD = 0.14
DIGEST_SIZE = 10
WHY_TERMS = 3
#: Topics multiplied against the index at once: bounds the intermediate product's memory.
CHUNK_TOPICS = 256
#: A topic matching more than this share of the corpus is reported as too broad.
BROAD_FRACTION = 0.02

_COMMON_ONLY = (
    "That topic has nothing to look for: only very common words (like “the” or “of”) or "
    'symbols. Try a specific term, like `"graph neural networks"`.'
)


@dataclass
class TopicMatch:
    """The papers matching one topic: document numbers (ascending) and their scores."""

    query: str
    docs: np.ndarray
    scores: np.ndarray
    term_ids: np.ndarray
    weights: np.ndarray
    why: list[str] = field(default_factory=list)  # for filter-only topics: the filters
    error: str | None = None

    @property
    def count(self) -> int:
        return len(self.docs)


Matcher = Callable[..., list[TopicMatch]]


@dataclass
class _Prepared:
    text: str
    query: Query | None
    term_ids: np.ndarray
    weights: np.ndarray
    error: str | None = None

    @property
    def constrained(self) -> bool:
        """Phrases, exclusions or filters: the lookup's own code decides those."""
        q = self.query
        return q is not None and bool(q.phrases or q.excluded or q.has_filters)

    @property
    def filters_only(self) -> bool:
        q = self.query
        return q is not None and q.has_filters and not (q.words or q.phrases)


def _empty() -> np.ndarray:
    return np.zeros(0, np.int64)


def _no_scores() -> np.ndarray:
    return np.zeros(0, np.float32)


def _engine_error(engine: Engine, text: str) -> str | None:
    """The lookup's own message for a query it cannot run (unknown venue, only stop words)."""
    try:
        engine.count(text)
    except QueryError as error:
        return str(error)
    return None


def _prepare(engine: Engine, index: Index, text: str) -> _Prepared:
    try:
        query = parse_query(text)
    except QueryError as error:
        return _Prepared(text, None, _empty(), _no_scores(), str(error))
    terms = analyze(query.ranked_text)
    term_ids, weights = index.vectorize(terms)
    prepared = _Prepared(text, query, term_ids.astype(np.int64), weights.astype(np.float32))
    if not terms and not query.has_filters:
        prepared.error = _engine_error(engine, text) or _COMMON_ONLY
    return prepared


def _docs_of_ids(engine: Engine, index: Index, ids: Sequence[str]) -> np.ndarray:
    rowids = [r for _, r in _rowids_of_ids(engine, list(ids))]
    return np.sort(index.docs_of_rowids(rowids)).astype(np.int64)


def _finish(
    engine: Engine,
    index: Index,
    prepared: _Prepared,
    docs: np.ndarray,
    scores: np.ndarray,
    threshold: float,
) -> TopicMatch:
    """The topic's match, with phrases, exclusions and filters applied as lookups apply them.

    Those are rare in topics, so they go through the engine's public ``rank``: its top
    ``len(docs)`` (plus a margin) with the constraints applied hold every constrained paper
    at or above the threshold.
    """
    match = TopicMatch(prepared.text, docs, scores, prepared.term_ids, prepared.weights)
    match.error = prepared.error
    if match.error or not prepared.constrained:
        if match.error:
            match.docs, match.scores = _empty(), _no_scores()
        return match
    if prepared.filters_only:
        ranked = engine.rank(prepared.text, k=index.n_docs, coordinate=False)
        match.docs = _docs_of_ids(engine, index, [i for i, _ in ranked])
        match.scores = np.ones(len(match.docs), np.float32)
        match.why = [prepared.text]
    elif len(docs):
        ranked = engine.rank(prepared.text, k=len(docs) + 16, coordinate=False)
        allowed = _docs_of_ids(engine, index, [i for i, s in ranked if s >= threshold * 0.999])
        keep = np.isin(docs, allowed)
        match.docs, match.scores = docs[keep], scores[keep]
    else:
        ranked = []
    if not ranked:
        match.error = _engine_error(engine, prepared.text)
        if match.error:
            match.docs, match.scores = _empty(), _no_scores()
    return match


def match_topics(
    engine: Engine,
    queries: Sequence[str],
    *,
    threshold: float = MATCH_THRESHOLD,
    chunk: int = CHUNK_TOPICS,
) -> list[TopicMatch]:
    """Every topic's matches, in the order given, with one sparse product per chunk."""
    index = engine.index
    prepared = [_prepare(engine, index, q) for q in queries]
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    ranked = [i for i, p in enumerate(prepared) if p.error is None and len(p.term_ids)]
    if ranked:
        xt = index.matrix_xt()
        for start in range(0, len(ranked), chunk):
            rows = ranked[start : start + chunk]
            indptr = np.zeros(len(rows) + 1, np.int64)
            np.cumsum([len(prepared[i].term_ids) for i in rows], out=indptr[1:])
            q = sp.csr_matrix(
                (
                    np.concatenate([prepared[i].weights for i in rows]),
                    np.concatenate([prepared[i].term_ids for i in rows]),
                    indptr,
                ),
                shape=(len(rows), index.n_terms),
            )
            product = (q @ xt).tocsr()
            indptr, indices, data = product.indptr, product.indices, product.data
            for r, i in enumerate(rows):
                scores = data[indptr[r] : indptr[r + 1]]
                keep = np.flatnonzero(scores >= threshold)
                docs = indices[indptr[r] : indptr[r + 1]][keep].astype(np.int64)
                order = np.argsort(docs, kind="stable")
                found[i] = (docs[order], scores[keep][order])
    return [
        _finish(engine, index, p, *found.get(i, (_empty(), _no_scores())), threshold)
        for i, p in enumerate(prepared)
    ]


def match_topics_one_by_one(
    engine: Engine, queries: Sequence[str], *, threshold: float = MATCH_THRESHOLD, **_: Any
) -> list[TopicMatch]:
    """The reference: each topic through the engine's public lookup (``Engine.rank``), asking
    for more results until the scores drop below the threshold. Same results, one query per
    topic; the tests and the benchmark compare the batch against it."""
    index = engine.index
    out = []
    for text in queries:
        prepared = _prepare(engine, index, text)
        docs, scores = _empty(), _no_scores()
        if prepared.error is None and len(prepared.term_ids) and not prepared.filters_only:
            k = 64
            while True:
                ranked = engine.rank(text, k=k, coordinate=False)
                if len(ranked) < k or ranked[-1][1] < threshold:
                    break
                k *= 4
            score_of = {i: s for i, s in ranked if s >= threshold}
            rows = _rowids_of_ids(engine, list(score_of))
            pairs = sorted(
                (int(d), score_of[i]) for i, r in rows if (d := index.doc_of_rowid(r)) is not None
            )
            docs = np.asarray([d for d, _ in pairs], np.int64)
            scores = np.asarray([s for _, s in pairs], np.float32)
        out.append(_finish(engine, index, prepared, docs, scores, threshold))
    return out


def _rowids_of_ids(engine: Engine, ids: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for start in range(0, len(ids), 5000):
        batch = ids[start : start + 5000]
        out += engine.db.execute(
            f"select id, rowid from papers where id in ({','.join('?' * len(batch))})", batch
        ).fetchall()
    return out


# --- what one member's digest holds ------------------------------------------------------------


@dataclass
class DigestItem:
    paper_id: str
    score: float
    why: list[str]
    new: bool  # added to the corpus since the member's last digest


@dataclass
class DigestSection:
    topic_id: int
    query: str
    items: list[DigestItem]


@dataclass
class DigestPlan:
    """One member's digest, as chosen; stored as JSON with the claim so a retry sends the same."""

    user_id: str
    sections: list[DigestSection] = field(default_factory=list)
    since: str | None = None  # papers added after this count as new

    @property
    def paper_ids(self) -> list[str]:
        return [item.paper_id for s in self.sections for item in s.items]

    @property
    def size(self) -> int:
        return sum(len(s.items) for s in self.sections)

    @property
    def new_count(self) -> int:
        return sum(item.new for s in self.sections for item in s.items)

    def keeping(self, paper_ids: Iterable[str]) -> DigestPlan:
        """The same digest with only these papers (empty sections dropped)."""
        wanted = set(paper_ids)
        sections = [
            DigestSection(s.topic_id, s.query, [i for i in s.items if i.paper_id in wanted])
            for s in self.sections
        ]
        return DigestPlan(self.user_id, [s for s in sections if s.items], self.since)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DigestPlan:
        data = json.loads(text)
        sections = [
            DigestSection(s["topic_id"], s["query"], [DigestItem(**i) for i in s["items"]])
            for s in data.get("sections", [])
        ]
        return cls(data["user_id"], sections, data.get("since"))


class _AddedAt:
    """When each indexed paper entered the corpus (epoch seconds), cached per corpus version."""

    _lock = threading.Lock()
    _cache: dict[str, tuple[int, np.ndarray]] = {}

    @classmethod
    def get(cls, engine: Engine, index: Index) -> np.ndarray:
        key = str(engine.db_path)
        with cls._lock:
            hit = cls._cache.get(key)
        if hit and hit[0] == index.corpus_version:
            return hit[1]
        added = np.zeros(index.n_docs, np.float64)
        rows = engine.db.execute("select rowid, added_at from papers").fetchall()
        if rows:
            rowids = np.fromiter((r for r, _ in rows), np.int64, len(rows))
            stamps = np.fromiter(
                (datetime.fromisoformat(a).timestamp() if a else 0.0 for _, a in rows),
                np.float64,
                len(rows),
            )
            pos = np.searchsorted(index.rowids, rowids)
            ok = pos < index.n_docs
            ok[ok] = np.asarray(index.rowids)[pos[ok]] == rowids[ok]
            added[pos[ok]] = stamps[ok]
        with cls._lock:
            cls._cache = {key: (index.corpus_version, added)}
        return added


def _where_users(column: str, user_ids: list[str] | None) -> tuple[str, list[str]]:
    if user_ids is None:
        return "", []
    return f" and {column} in ({','.join('?' * len(user_ids))})", list(user_ids)


def _sent_docs(engine: Engine, index: Index, user_ids: list[str] | None) -> dict[str, np.ndarray]:
    where, params = _where_users("s.user_id", user_ids)
    rows = engine.db.execute(
        "select s.user_id, p.rowid from sent_papers s join papers p on p.id = s.paper_id "
        "where 1" + where,
        params,
    ).fetchall()
    by_user: dict[str, list[int]] = {}
    for user, rowid in rows:
        by_user.setdefault(user, []).append(rowid)
    return {u: index.docs_of_rowids(r) for u, r in by_user.items()}


def _last_digests(engine: Engine, user_ids: list[str] | None) -> dict[str, str]:
    """When each member's last digest was claimed: later papers are new to them."""
    where, params = _where_users("user_id", user_ids)
    return dict(
        engine.db.execute(
            "select user_id, max(claimed_at) from digests where status = 'sent'"
            + where
            + " group by user_id",
            params,
        ).fetchall()
    )


def select_digests(
    engine: Engine,
    user_ids: Iterable[str] | None = None,
    *,
    limit: int = DIGEST_SIZE,
    threshold: float = MATCH_THRESHOLD,
    matcher: Matcher = match_topics,
) -> dict[str, DigestPlan]:
    """The next digest of each member asked for (default: everyone with topics).

    Members with nothing to send get an empty plan. Nothing here reads the clock: what is
    new is decided by each member's last sent digest.
    """
    ids = None if user_ids is None else list(dict.fromkeys(user_ids))
    subscriptions = Subscriptions(engine.db)
    topics_by_member = subscriptions.topics_by_member(ids)
    members = {m.user_id: m for m in subscriptions.members(topics_by_member, enabled_only=False)}
    distinct: dict[str, str] = {}
    for topics in topics_by_member.values():
        for topic in topics:
            distinct.setdefault(topic.normalized, topic.query)
    matches = dict(
        zip(distinct, matcher(engine, list(distinct.values()), threshold=threshold), strict=True)
    )
    index = engine.index
    added = _AddedAt.get(engine, index)
    sent = _sent_docs(engine, index, ids)
    last = _last_digests(engine, ids)
    picks: dict[str, list[_Pick]] = {}
    for user in ids if ids is not None else list(topics_by_member):
        member = members.get(user)
        since = last.get(user) or (member.created_at if member else None)
        picks[user] = _pick(
            topics_by_member.get(user, []), matches, added, sent.get(user, _empty()), since, limit
        )
    paper_ids = _paper_ids(engine, index, {p.doc for chosen in picks.values() for p in chosen})
    plans = {}
    for user, chosen in picks.items():
        member = members.get(user)
        plan = DigestPlan(user, since=last.get(user) or (member.created_at if member else None))
        for topic in topics_by_member.get(user, []):
            match = matches[topic.normalized]
            items = []
            for p in (p for p in chosen if p.topic_id == topic.id):
                if p.doc not in paper_ids:
                    continue
                why = match.why or _why(index, p.doc, match)
                items.append(DigestItem(paper_ids[p.doc], round(p.score, 4), why, p.new))
            if items:
                plan.sections.append(DigestSection(topic.id, topic.query, items))
        plans[user] = plan
    return plans


def _why(index: Index, doc: int, match: TopicMatch) -> list[str]:
    """The topic's terms that gave the paper most of its score (as ``Index.contributions``
    ranks them, vectorized: this runs for every paper of every digest)."""
    terms, values = index.doc_vector(doc)
    if not len(terms) or not len(match.term_ids):
        return []
    pos = np.minimum(np.searchsorted(terms, match.term_ids), len(terms) - 1)
    present = terms[pos] == match.term_ids
    contribution = match.weights[present] * values[pos[present]]
    best = np.argsort(-contribution, kind="stable")[:WHY_TERMS]
    return [index.vocab.term(int(t)) for t in match.term_ids[present][best]]


@dataclass(frozen=True)
class _Pick:
    doc: int
    score: float
    topic_id: int
    new: bool


def _pick(
    topics: list[Topic],
    matches: dict[str, TopicMatch],
    added: np.ndarray,
    sent: np.ndarray,
    since: str | None,
    limit: int,
) -> list[_Pick]:
    """One member's papers: new ones first, then the best older ones; within a topic the same."""
    used = [(t, matches[t.normalized]) for t in topics if matches[t.normalized].count]
    if not used or limit <= 0:
        return []
    docs = np.concatenate([m.docs for _, m in used])
    scores = np.concatenate([m.scores for _, m in used])
    topic_of = np.repeat(np.arange(len(used)), [m.count for _, m in used])
    # Each paper once, under its best-scoring topic (the earlier topic on a tie).
    order = np.lexsort((topic_of, -scores))
    docs, scores, topic_of = docs[order], scores[order], topic_of[order]
    _, first = np.unique(docs, return_index=True)
    docs, scores, topic_of = docs[first], scores[first], topic_of[first]
    if len(sent):
        fresh = ~np.isin(docs, sent)
        docs, scores, topic_of = docs[fresh], scores[fresh], topic_of[fresh]
    if not len(docs):
        return []
    since_ts = from_iso(since).timestamp() if since else 0.0
    new = added[docs] > since_ts
    chosen = np.lexsort((docs, -scores, ~new))[:limit]
    return [
        _Pick(int(docs[c]), float(scores[c]), used[topic_of[c]][0].id, bool(new[c])) for c in chosen
    ]


def _paper_ids(engine: Engine, index: Index, docs: set[int]) -> dict[int, str]:
    """Paper ids of documents, in batches (one query per 5,000, not one per paper)."""
    by_rowid = {int(index.rowids[d]): d for d in docs}
    rowids = sorted(by_rowid)
    out: dict[int, str] = {}
    for start in range(0, len(rowids), 5000):
        batch = rowids[start : start + 5000]
        rows = engine.db.execute(
            f"select rowid, id from papers where rowid in ({','.join('?' * len(batch))})", batch
        )
        out.update((by_rowid[r], paper_id) for r, paper_id in rows)
    return out


# --- what a member sees when subscribing -------------------------------------------------------


@dataclass
class TopicCheck:
    """How a topic fares on the corpus as it is now, shown before confirming a subscription."""

    query: str
    matches: int = 0  # papers at or above the match threshold
    mentions: int = 0  # papers with any of its words at all (what a lookup would count)
    corpus_size: int = 0
    top: list[Hit] = field(default_factory=list)
    error: str | None = None

    @property
    def broad_limit(self) -> int:
        """More matches than this is "too broad": 2% of the corpus (at least 50, or a quarter
        of a very small corpus)."""
        return int(max(BROAD_FRACTION * self.corpus_size, min(0.25 * self.corpus_size, 50)))

    @property
    def verdict(self) -> str:
        """``error``, ``broad``, ``general`` (common words, no paper mainly about them),
        ``none`` or ``ok``."""
        if self.error:
            return "error"
        if self.matches > self.broad_limit:
            return "broad"
        if not self.matches:
            return "general" if self.mentions > self.broad_limit else "none"
        return "ok"

    @property
    def advice(self) -> str | None:
        """One sentence for the member when the topic is too broad or too narrow."""
        return {
            "broad": (
                f"That is {self.matches / max(self.corpus_size, 1):.0%} of the corpus: your "
                "digests will be a small sample of it. Narrow it with a more specific phrase, "
                "`-word` to leave papers out, or `venue:`/`year:`."
            ),
            "general": (
                f"Its words appear in {count(self.mentions, 'paper')} but none is mainly about them, "
                "so it would match nothing. Add a more specific term or a phrase."
            ),
            "none": (
                "No paper in the corpus matches it yet; new papers that do will come in your "
                "digest. Check the spelling, or try fewer or more general words."
            ),
        }.get(self.verdict)


def check_topic(
    engine: Engine, text: str, *, threshold: float = MATCH_THRESHOLD, top: int = 3
) -> TopicCheck:
    """How many papers a topic matches now, and its best ``top`` matches (as lookup hits)."""
    match = match_topics(engine, [text], threshold=threshold)[0]
    check = TopicCheck(text, corpus_size=engine.index.n_docs, error=match.error)
    if match.error:
        return check
    check.matches = match.count
    try:
        check.mentions = engine.count(text)
    except QueryError:
        check.mentions = 0
    if match.count:
        # A lookup's best hits are the topic's best matches (same scores), with snippets.
        hits = engine.search(text, limit=top).hits
        check.top = [h for h in hits if match.why or h.score >= threshold]
    return check
