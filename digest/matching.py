"""Which papers match a topic: for all distinct topics at once, and for one at subscribe time.

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
engine's own phrase and filter code). The tests and the benchmark compare the batch
against a straightforward per-topic loop through ``Engine.rank`` (``tests/matching_reference.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from bot.engine.index import Index
from bot.engine.query import Query, QueryError, parse_topic
from bot.engine.search import Engine, Hit
from bot.engine.text import analyze
from bot.english import count

MATCH_THRESHOLD = 0.14
#: Topics multiplied against the index at once: bounds the intermediate product's memory.
CHUNK_TOPICS = 256
#: A topic matching more than this share of the corpus is reported as too broad.
BROAD_FRACTION = 0.02
#: Best matches shown when a member subscribes.
CHECK_TOP = 3

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
        query = parse_topic(text)
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
        used = np.unique(np.concatenate([prepared[i].term_ids for i in ranked]))
        xt = _posting_rows(index, used)
        for start in range(0, len(ranked), chunk):
            rows = ranked[start : start + chunk]
            indptr = np.zeros(len(rows) + 1, np.int64)
            np.cumsum([len(prepared[i].term_ids) for i in rows], out=indptr[1:])
            # The topics' terms numbered as ``xt``'s rows (in the same order: the same sums).
            q = sp.csr_matrix(
                (
                    np.concatenate([prepared[i].weights for i in rows]),
                    np.searchsorted(used, np.concatenate([prepared[i].term_ids for i in rows])),
                    indptr,
                ),
                shape=(len(rows), len(used)),
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


def _posting_rows(index: Index, terms: np.ndarray) -> sp.csr_matrix:
    """``index.matrix_xt()[terms]``: the rows of these terms (ascending) with final weights.
    An index of one segment gives them from those terms' posting lists alone, the same
    numbers (tf x idf x inverse pivot, in float32, zeros left out): a restarted process's
    first digest need not assemble the whole matrix (1.5 s at 87k, for the 0.5% of terms
    topics use; bench/README.md, stop 20)."""
    if len(index.segments) != 1:
        return index.matrix_xt()[terms]
    postings = index.segments[0].rows(terms)
    lengths = np.diff(postings.indptr)
    docs = postings.indices.astype(np.int64)
    values = postings.data * index.idf[np.repeat(terms, lengths)]
    values = values * index.inverse_pivot[docs]
    keep = values > 0  # deleted papers (inverse pivot 0) and terms only they had (idf 0)
    indptr = np.zeros(len(terms) + 1, np.int64)
    np.cumsum(
        np.bincount(np.repeat(np.arange(len(terms)), lengths)[keep], minlength=len(terms)),
        out=indptr[1:],
    )
    return sp.csr_matrix(
        (values[keep].astype(np.float32), docs[keep], indptr), shape=(len(terms), index.n_docs)
    )


def _rowids_of_ids(engine: Engine, ids: list[str]) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for start in range(0, len(ids), 5000):
        batch = ids[start : start + 5000]
        out += engine.db.execute(
            f"select id, rowid from papers where id in ({','.join('?' * len(batch))})", batch
        ).fetchall()
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
    unmentioned: list[str] = field(default_factory=list)  # its words that no paper has

    @property
    def broad_limit(self) -> int:
        """More matches than this is "too broad": 2% of the corpus (at least 50, or a quarter
        of a very small corpus)."""
        return int(max(BROAD_FRACTION * self.corpus_size, min(0.25 * self.corpus_size, 50)))

    @property
    def verdict(self) -> str:
        """``error``, ``broad``, ``general`` (common words, no paper mainly about them),
        ``none``, ``partly`` (it matches, on its other words: some are in no paper) or
        ``ok``."""
        if self.error:
            return "error"
        if self.matches > self.broad_limit:
            return "broad"
        if not self.matches:
            return "general" if self.mentions > self.broad_limit else "none"
        return "partly" if self.unmentioned else "ok"

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
            "partly": (
                f"No paper mentions {_quoted(self.unmentioned)}, so for now it matches on its "
                "other words alone. Check the spelling; papers that do mention "
                f"{'it' if len(self.unmentioned) == 1 else 'them'} will come in your digest."
            ),
        }.get(self.verdict)


def _quoted(words: list[str]) -> str:
    return ", ".join(f"“{w}”" for w in words)


def check_topic(engine: Engine, text: str) -> TopicCheck:
    """How many papers a topic matches now, and its best ``CHECK_TOP`` matches (lookup hits)."""
    match = match_topics(engine, [text])[0]
    check = TopicCheck(text, corpus_size=engine.index.n_live, error=match.error)
    if match.error:
        return check
    check.matches = match.count
    try:
        check.mentions = engine.count(text)
        check.unmentioned = engine.unmentioned(text)
    except QueryError:
        check.mentions = 0
    if match.count:
        # A lookup's best hits are the topic's best matches (same scores), with snippets.
        hits = engine.search(text, limit=CHECK_TOP).hits
        check.top = [h for h in hits if match.why or h.score >= MATCH_THRESHOLD]
    return check
