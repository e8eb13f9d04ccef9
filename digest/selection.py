"""Which papers go in each member's next digest: for every member at once, no Slack.

Topics are matched by ``matching`` (identical topics once for all members); this module picks
each member's papers from those matches and returns them as ``plan.DigestPlan``.

Ordering
========
Papers already sent to the member never come again. Papers added to the corpus since the
member's last digest come first, then the best remaining older matches, at most
``DIGEST_SIZE``; each paper appears once, under the topic it matches best, with the terms that
made it match.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from bot.engine.index import Index
from bot.engine.search import Engine

from .matching import Matcher, TopicMatch, match_topics
from .plan import DigestItem, DigestPlan, DigestSection
from .subscriptions import Subscriptions, Topic, from_iso

DIGEST_SIZE = 10
WHY_TERMS = 3


def _empty() -> np.ndarray:
    return np.zeros(0, np.int64)


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


# --- the shared state selection reads (members' sent papers and last digests) -----------------


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


# --- choosing -----------------------------------------------------------------------------------


def select_digests(
    engine: Engine,
    user_ids: Iterable[str] | None = None,
    *,
    limit: int = DIGEST_SIZE,
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
    matches = dict(zip(distinct, matcher(engine, list(distinct.values())), strict=True))
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
