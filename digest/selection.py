"""Which papers go in each member's next digest: for every member at once, no Slack.

Topics are matched by ``matching`` (identical topics once for all members); this module picks
each member's papers from those matches and returns them as ``plan.DigestPlan``.

Ordering
========
Papers already sent to the member never come again. Papers added to the corpus since the
member's last digest come first, then the best remaining older matches, at most
``DIGEST_SIZE``; each paper appears once, under the topic it matches best, with the terms that
made it match.

Taste
=====
Once a member has given 👍/👎 (``taste``), their topic matches are ranked by their model
instead (still new ones first), papers they rated or very close to one they 👎-ed are left
out (and so are those nearer a 👎-ed paper than to every 👍 one: ``taste.DISLIKE_MARGIN``, and
those their 👍/👎 classifier thinks unlikely to be 👍: ``TOPIC_MIN_PROBABILITY``), and up to
``RECOMMEND_MAX`` papers the model likes that matched none of their topics (and were never
sent) go in a "Recommended for you" section (``RECOMMEND_FILL`` at most; never in a digest
posted in a channel, which everyone there reads). How many adapts to
the member's own record with recommendations (``recommend_fill``): none for a member who
👎 what they were shown, the whole room the topics leave for one who 👍 it. A member without
feedback gets exactly the digest described above. Any paper at least two
teammates (same workspace) saved says how many, unless the member turned that off.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from threadpoolctl import threadpool_limits

from bot.engine.corpus import DatabaseError
from bot.engine.index import Index
from bot.engine.search import Engine
from bot.state import state_for

from .matching import Matcher, TopicMatch, _rowids_of_ids, match_topics
from .plan import RECOMMENDED, RECOMMENDED_TITLE, DigestItem, DigestPlan, DigestSection
from .subscriptions import (
    ByMember,
    Member,
    MemberKey,
    Subscriptions,
    Topic,
    from_iso,
)
from .taste import (
    Batch,
    Recommendation,
    Taste,
    Vector,
    first_passing,
    isin,
    prefetch,
    recommend_many,
    recommend_pool,
    remember_topic_vectors,
    score_all,
    scores_of,
    tastes,
    union,
)

log = logging.getLogger(__name__)

DIGEST_SIZE = 10
WHY_TERMS = 3
#: Recommendations a digest keeps room for when its topics have more to send.
RECOMMEND_MAX = 3
#: Recommendations a digest holds at most, even when its topics leave more room (measured:
#: 3 gives 1.28x the relevant papers of keyword-only digests, 10 gives 1.49x at a lower share
#: of relevant papers; bench/README.md).
RECOMMEND_FILL = 3
#: Topic matches a digest checks against the member's 👎 at most (the model's best first).
TOPIC_POOL = 200
#: A digest recommends papers outside the member's topics only once at least this share of their
#: clicks are 👍 (a member who 👎 most of what comes is shown fewer guesses).
RECOMMEND_MIN_LIKE_RATE = 0.0
#: Room for recommendations adapts to each member's own record: their 👍 rate on papers that
#: matched none of their topics (the recommendations they were shown), counting a prior of
#: ``RECOMMEND_PRIOR_LIKES`` 👍 and ``RECOMMEND_PRIOR_DISLIKES`` 👎 (a member with no record gets
#: the usual ``RECOMMEND_FILL``). Below ``RECOMMEND_MIN_HIT`` a digest recommends nothing (with
#: the prior: after 6 shown and none 👍, or 1 of 15); from ``RECOMMEND_MORE_HIT`` on, over at
#: least ``RECOMMEND_FILL`` of them (2 of the first 3 👍), recommendations may fill all the room
#: the topics leave (``RECOMMEND_MORE_FILL``).
RECOMMEND_PRIOR_LIKES = 1.0
RECOMMEND_PRIOR_DISLIKES = 3.0
RECOMMEND_MIN_HIT = 0.12
RECOMMEND_MORE_HIT = 0.4
RECOMMEND_MORE_FILL = DIGEST_SIZE
#: Topic matches the member's classifier (``Taste.like_probability``: 👍 and topics against 👎)
#: gives less than this are left out, as papers they would 👎 (0: off, the default since the
#: expected 👍 of ``taste.TOPIC_MIN_EXPECTED`` does its work: 345 relevant papers of 1,283
#: without it, 344 of 1,284 with 0.4, and no classifier to train in every batch;
#: bench/README.md, stop 20).
TOPIC_MIN_PROBABILITY = 0.0
#: Teammates' saves are mentioned from this many on (counts only, never names).
TEAM_SAVES_SHOWN = 2


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
            # Papers come in batches: each distinct time is parsed once (87k papers, a few).
            parsed = {
                a: datetime.fromisoformat(a).timestamp() if a else 0.0 for a in {a for _, a in rows}
            }
            stamps = np.fromiter((parsed[a] for _, a in rows), np.float64, len(rows))
            pos = np.searchsorted(index.rowids, rowids)
            ok = pos < index.n_docs
            ok[ok] = np.asarray(index.rowids)[pos[ok]] == rowids[ok]
            added[pos[ok]] = stamps[ok]
        with cls._lock:
            cls._cache = {key: (index.corpus_version, added)}
        return added


# --- the shared state selection reads (members' sent papers and last digests) -----------------


def _sent_docs(
    engine: Engine, index: Index, keys: list[MemberKey] | None
) -> dict[MemberKey, np.ndarray]:
    """Each member's sent papers as index documents: the ids from the shared state, their
    rows from this process's corpus (a paper it does not have cannot be chosen anyway)."""
    sent = state_for(engine.db_path).sent_papers(keys)
    wanted = sorted({paper for papers in sent.values() for paper in papers})
    rowid_of = dict(_rowids_of_ids(engine, wanted))
    return {
        user: index.docs_of_rowids([rowid_of[p] for p in papers if p in rowid_of])
        for user, papers in sent.items()
    }


def _last_digests(engine: Engine, keys: list[MemberKey] | None) -> dict[MemberKey, str]:
    """When each member's last digest was claimed: later papers are new to them."""
    return state_for(engine.db_path).last_digests(keys)


# --- choosing -----------------------------------------------------------------------------------


class _OneBlasThread:
    """BLAS on one thread while digests are chosen: their dense products are small (tens of
    rows), and a second thread only waits for the first (on a loaded 2-core machine, a 👎
    check took 3x as long with two). Counted, so that overlapping batches (the clock and a
    ``/papers digest now``) restore the limit once, when the last one ends."""

    _lock = threading.Lock()
    _depth = 0
    _limits: threadpool_limits | None = None

    def __enter__(self) -> None:
        with self._lock:
            if _OneBlasThread._depth == 0:
                _OneBlasThread._limits = threadpool_limits(1, user_api="blas")
            _OneBlasThread._depth += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            _OneBlasThread._depth -= 1
            if _OneBlasThread._depth == 0 and _OneBlasThread._limits is not None:
                _OneBlasThread._limits.restore_original_limits()
                _OneBlasThread._limits = None


def select_digests(
    engine: Engine,
    members: Iterable[MemberKey | str] | None = None,
    *,
    limit: int = DIGEST_SIZE,
    matcher: Matcher = match_topics,
) -> dict[MemberKey, DigestPlan]:
    """The next digest of each member asked for, by ``(team_id, user_id)`` (a bare user id
    is a member of the team ``""``; default: everyone with topics).

    Members with nothing to send get an empty plan. Nothing here reads the clock: what is
    new is decided by each member's last sent digest.
    """
    with _OneBlasThread():
        return _select(engine, members, limit, matcher)


#: Failures of the place the data lives, not of a member's data (``select_digests_apart``).
_OUTAGES = (DatabaseError, sqlite3.Error, MemoryError)


def select_digests_apart(
    engine: Engine, members: list[MemberKey], *, limit: int = DIGEST_SIZE
) -> dict[MemberKey, DigestPlan]:
    """``select_digests`` for the scheduler: when choosing them at once fails (a bug one
    member's topics or 👍 trip), each member is chosen alone, and a member whose choice
    still fails is logged with the traceback and left out (their digest is not claimed: the
    next tick tries again), so that the others' digests go. An outage (the shared state or
    the corpus file not answering, locked, gone; memory) is raised as it is: it is no one
    member's, and choosing them one by one would only repeat it."""
    try:
        return select_digests(engine, members, limit=limit)
    except _OUTAGES:
        raise
    except Exception:
        log.exception("choosing %d digests at once failed; choosing them one by one", len(members))
    plans: dict[MemberKey, DigestPlan] = {}
    for member in members:
        try:
            plans.update(select_digests(engine, [member], limit=limit))
        except _OUTAGES:
            raise
        except Exception:
            log.exception("choosing the digest of %s failed: left out of this tick", member)
    return plans


def _select(
    engine: Engine,
    members: Iterable[MemberKey | str] | None,
    limit: int,
    matcher: Matcher,
) -> dict[MemberKey, DigestPlan]:
    subscriptions = Subscriptions(engine.db)
    ids = None  # a bare user id: the member in their only workspace
    if members is not None:
        ids = list(dict.fromkeys(subscriptions.store.resolve_keys(members)))
    topics_by_member = subscriptions.topics_by_member(ids)
    members = {m.key: m for m in subscriptions.members(topics_by_member, enabled_only=False)}
    distinct: dict[str, str] = {}
    for topics in topics_by_member.values():
        for topic in topics:
            distinct.setdefault(topic.normalized, topic.query)
    matched_on = engine.index
    matches = dict(zip(distinct, matcher(engine, list(distinct.values())), strict=True))
    index = engine.index
    if matcher is match_topics and index is matched_on:  # the topics' vectors: the models' too
        remember_topic_vectors(
            index, {m.query: (m.term_ids, m.weights) for m in matches.values() if m.error is None}
        )
    added = _AddedAt.get(engine, index)
    sent = _sent_docs(engine, index, ids)
    last = _last_digests(engine, ids)
    users = ids if ids is not None else list(topics_by_member)
    models = tastes(
        engine,
        {u: [t.query for t in topics_by_member.get(u, [])] for u in users if u in topics_by_member},
    )
    scored = dict(zip(models, score_all(index, list(models.values())), strict=True))
    picks: dict[MemberKey, list[_Pick]] = {}
    recommended: dict[MemberKey, list[Recommendation]] = {}
    prepared: dict[MemberKey, _Prepared] = {}
    for user in users:
        member = members.get(user)
        since = last.get(user) or (member.created_at if member else None)
        topics = topics_by_member.get(user, [])
        if user in models:
            prepared[user] = _prepare_with_taste(
                topics,
                matches,
                added,
                sent.get(user, _empty()),
                since,
                limit,
                (models[user], scored[user]),
            )
        else:
            picks[user] = _pick(topics, matches, added, sent.get(user, _empty()), since, limit)
    # The papers every member with a model will be asked about, read and projected at once.
    wanted = [p.pool[0] for p in prepared.values()]
    wanted += [p.docs[p.order[: limit + 2]] for p in prepared.values()]
    wanted += [models[user].rated for user in prepared]
    if wanted:
        prefetch(index, np.concatenate(wanted))
    chosen = _pick_with_taste(list(prepared.values()), limit, index)
    for user, (picked, recommendations) in zip(prepared, chosen, strict=True):
        picks[user], recommended[user] = picked, recommendations
    picks = {user: picks[user] for user in users}  # the members' order
    docs = {p.doc for chosen in picks.values() for p in chosen}
    docs |= {r.doc for chosen in recommended.values() for r in chosen}
    paper_ids = _paper_ids(engine, index, docs)
    # Members share topics and papers: each (paper, topic) explained once for everyone, from
    # the papers' vectors read at once.
    whys: dict[tuple[int, str], list[str]] = {}
    explained = np.asarray(sorted({p.doc for chosen in picks.values() for p in chosen}), np.int64)
    vectors = dict(zip(explained.tolist(), index.doc_vectors(explained), strict=True))
    names: dict[int, str] = {}  # term id -> term: the topics' terms come again and again
    plans = ByMember()
    for user, chosen in picks.items():
        member = members.get(user)
        since = last.get(user) or (member.created_at if member else None)
        plan = DigestPlan(user[1], since=since)
        for topic in topics_by_member.get(user, []):
            match = matches[topic.normalized]
            items = []
            for p in (p for p in chosen if p.topic_id == topic.id):
                if p.doc not in paper_ids:
                    continue
                why = match.why
                if not why:
                    why = whys.get((p.doc, topic.normalized))
                    if why is None:
                        why = _why(index, vectors[p.doc], match, names)
                        whys[p.doc, topic.normalized] = why
                items.append(DigestItem(paper_ids[p.doc], round(p.score, 4), why, p.new))
            if items:
                plan.sections.append(DigestSection(topic.id, topic.query, items))
        since_ts = from_iso(plan.since).timestamp() if plan.since else 0.0
        items = [
            DigestItem(
                paper_ids[r.doc],
                round(r.score, 4),
                [],
                bool(added[r.doc] > since_ts),
                r.liked_count,
                r.example,
            )
            for r in recommended.get(user, [])
            if r.doc in paper_ids
        ]
        # What a member likes is theirs alone: a digest the channel reads gets no
        # recommendations (each says which 👍 paper it is like, and the picks betray it too).
        if items and not (member and member.digest_channel):
            plan.sections.append(DigestSection(RECOMMENDED, RECOMMENDED_TITLE, items))
        plans[user] = plan
    _count_team_saves(engine, plans, members)
    return plans


def _count_team_saves(
    engine: Engine, plans: dict[MemberKey, DigestPlan], members: dict[MemberKey, Member]
) -> None:
    """Note on each planned paper how many teammates saved it (from ``TEAM_SAVES_SHOWN`` on),
    for members who did not turn that off, and whether the member saved it: one query for
    every plan."""
    store = state_for(engine.db_path)
    wanted = {paper for plan in plans.values() for paper in plan.paper_ids}
    if not wanted:
        return
    savers = store.savers_of(paper_ids=sorted(wanted))
    if not savers:
        return
    off = store.team_saves_off([u for u, plan in plans.items() if plan.size])
    for user, plan in plans.items():
        team, user_id = user
        for section in plan.sections:
            for item in section.items:
                item.saved = any(
                    saver == user_id and (saver_team or "") == (team or "")
                    for saver, saver_team in savers.get(item.paper_id, ())
                )
                if user in off:
                    continue
                # Teammates are members of the same workspace (the same user id elsewhere
                # is someone else's account, and never a teammate of itself).
                others = sum(
                    1
                    for saver, saver_team in savers.get(item.paper_id, ())
                    if saver_team == team and saver != user_id
                )
                item.team_saves = others if others >= TEAM_SAVES_SHOWN else 0


def _why(
    index: Index, vector: Vector, match: TopicMatch, names: dict[int, str] | None = None
) -> list[str]:
    """The topic's terms that gave the paper (``vector``: its ``Index.doc_vector``) most of
    its score (as ``Index.contributions`` ranks them, vectorized: this runs for every paper
    of every digest)."""
    terms, values = vector
    if not len(terms) or not len(match.term_ids):
        return []
    pos = np.minimum(np.searchsorted(terms, match.term_ids), len(terms) - 1)
    present = terms[pos] == match.term_ids
    contribution = match.weights[present] * values[pos[present]]
    best = np.argsort(-contribution, kind="stable")[:WHY_TERMS]
    names = {} if names is None else names
    out = []
    for term in match.term_ids[present][best].tolist():
        if term not in names:
            names[term] = index.vocab.term(term)
        out.append(names[term])
    return out


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
    docs, scores, topic_of = _matched(used)
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


def _matched(used: list[tuple[Topic, TopicMatch]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The member's matched documents, each once under its best-scoring topic (the earlier
    topic on a tie): (documents ascending, scores, position of the topic in ``used``)."""
    docs = np.concatenate([m.docs for _, m in used])
    scores = np.concatenate([m.scores for _, m in used])
    topic_of = np.repeat(np.arange(len(used)), [m.count for _, m in used])
    order = np.lexsort((topic_of, -scores))
    docs, scores, topic_of = docs[order], scores[order], topic_of[order]
    _, first = np.unique(docs, return_index=True)
    return docs[first], scores[first], topic_of[first]


@dataclass
class _Prepared:
    """A member with feedback, before their papers are checked against their clicks: topic
    matches not sent nor rated (``docs``, ``scores``, ``topic_of``, ``new``) in the model's
    order (``order``), and the candidates for recommendation (``taste.recommend_pool``)."""

    taste: Taste
    used: list[tuple[Topic, TopicMatch]]
    docs: np.ndarray
    scores: np.ndarray
    topic_of: np.ndarray
    new: np.ndarray
    order: np.ndarray
    fill: int
    wanted: int
    pool: Vector


def _prepare_with_taste(
    topics: list[Topic],
    matches: dict[str, TopicMatch],
    added: np.ndarray,
    sent: np.ndarray,
    since: str | None,
    limit: int,
    model: tuple[Taste, Vector],
) -> _Prepared:
    """``_pick_with_taste``'s first half: what needs no paper's vector."""
    taste, liked_scores = model
    used = [(t, matches[t.normalized]) for t in topics if matches[t.normalized].count]
    if used:
        docs, scores, topic_of = _matched(used)
    else:
        docs, scores, topic_of = _empty(), np.zeros(0, np.float32), _empty()
    matched = docs
    fresh = ~isin(docs, union(sent, taste.rated))
    docs, scores, topic_of = docs[fresh], scores[fresh], topic_of[fresh]
    # As many as the topics leave room for (at least RECOMMEND_MAX), each explained.
    fill = recommend_fill(taste, matched)
    wanted = min(fill, limit - min(len(docs), limit - RECOMMEND_MAX))
    clicks = len(taste.liked) + len(taste.disliked)
    if len(taste.liked) < RECOMMEND_MIN_LIKE_RATE * clicks:
        wanted = 0
    pool = (_empty(), np.zeros(0, np.float32))
    if limit > 0 and wanted > 0 and len(taste.liked):
        pool = recommend_pool(taste, liked_scores, exclude=union(matched, sent))
    since_ts = from_iso(since).timestamp() if since else 0.0
    new = added[docs] > since_ts
    # By the model; papers it scores alike (below ``taste.SCORE_KEEP``: 0) by their topic score.
    order = np.lexsort((docs, -scores, -scores_of(liked_scores, docs), ~new))
    return _Prepared(taste, used, docs, scores, topic_of, new, order, fill, wanted, pool)


def _pick_with_taste(
    ready: list[_Prepared], limit: int, index: Index
) -> list[tuple[list[_Pick], list[Recommendation]]]:
    """Members with feedback (all at once: ``taste.Batch``): topic matches ranked by the
    model (new ones first), without rated papers or papers very close to a 👎-ed one; then
    recommendations that matched none of the topics and were never sent: room for
    ``RECOMMEND_MAX`` is kept, and they fill what the topics leave, up to ``RECOMMEND_FILL``."""
    if limit <= 0:
        return [([], []) for _ in ready]
    batch = Batch(index, [r.taste for r in ready])
    recommended = recommend_many(batch, [r.pool for r in ready], [r.wanted for r in ready])
    rooms = [limit - min(RECOMMEND_MAX, len(found)) for found in recommended]

    def check(which: list[int], blocks: list[np.ndarray]) -> list[np.ndarray]:
        docs = [ready[k].docs[block] for k, block in zip(which, blocks, strict=True)]
        unwanted = batch.near_disliked(which, docs)
        split = np.split(unwanted, np.cumsum([len(d) for d in docs])[:-1])
        if TOPIC_MIN_PROBABILITY > 0:
            for k, member_docs, out in zip(which, docs, split, strict=True):
                probability = ready[k].taste.like_probability(index, member_docs)
                if probability is not None:
                    out |= probability < TOPIC_MIN_PROBABILITY
        return [~out for out in split]

    # Checked against the 👎 best first, among the best ``TOPIC_POOL`` only: a member whose
    # clicks rule out that many gets fewer papers.
    chosen = first_passing([r.order[:TOPIC_POOL] for r in ready], rooms, check)
    out = []
    for r, positions, found in zip(ready, chosen, recommended, strict=True):
        picks = [
            _Pick(
                int(r.docs[c]),
                float(r.scores[c]),
                r.used[r.topic_of[c]][0].id,
                bool(r.new[c]),
            )
            for c in r.order[:TOPIC_POOL][positions].tolist()
        ]
        out.append((picks, found[: min(r.fill, limit - len(picks))]))
    return out


def recommendation_record(taste: Taste, matched: np.ndarray) -> tuple[int, int]:
    """The member's 👍 and 👎 on papers that matched none of their topics (``matched``): how
    welcome their recommendations have been."""
    return int((~isin(taste.liked, matched)).sum()), int((~isin(taste.disliked, matched)).sum())


def _rate(likes: int, dislikes: int) -> float:
    """A 👍 rate with the prior (``RECOMMEND_PRIOR_LIKES``, ``RECOMMEND_PRIOR_DISLIKES``)."""
    prior_likes, prior_dislikes = RECOMMEND_PRIOR_LIKES, RECOMMEND_PRIOR_DISLIKES
    return (likes + prior_likes) / (likes + dislikes + prior_likes + prior_dislikes)


def recommend_fill(taste: Taste, matched: np.ndarray) -> int:
    """How many recommendations this member's digest may hold: fewer for a member who 👎 the
    ones they were shown, more for one who 👍 them (their rate, with the prior)."""
    likes, dislikes = recommendation_record(taste, matched)
    rate = _rate(likes, dislikes)
    if rate < RECOMMEND_MIN_HIT:
        return 0
    if rate >= RECOMMEND_MORE_HIT and likes + dislikes >= RECOMMEND_FILL:
        return max(RECOMMEND_MORE_FILL, RECOMMEND_FILL)
    return RECOMMEND_FILL


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
