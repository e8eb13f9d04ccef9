# ruff: noqa: F811 - the fixtures are test_taste's, imported by name
"""The digest batch with feedback (issue 11's speed work in digest/selection.py and
digest/taste.py): what a batch shares between members (the topics' vectors from matching,
the models scored a chunk at a time, BLAS on one thread) changes nothing a member gets: each
plan chosen in the batch is the plan chosen for that member alone, in a fresh process (every
cache of ``digest.taste`` emptied). State on SQLite and PostgreSQL."""

from __future__ import annotations

import numpy as np
import pytest

from digest import taste
from digest.selection import select_digests
from tests.test_taste import click, engine, subscribe  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("state_backend")

MEMBERS = {
    "U1": ["graph neural networks"],
    "U2": ["graph neural networks", "diffusion models"],
    "U3": ["message passing", "protein"],
    "U4": ["diffusion models"],
    "U5": ["graph neural networks", "protein", "language model"],
}


def _members_with_clicks(engine) -> None:
    """Five members sharing topics; four clicked 👍/👎 on papers in and outside their topics
    (U4 never did: their digest is the keyword one)."""
    for user, topics in MEMBERS.items():
        subscribe(engine, user, *topics)
    papers = [row[0] for row in engine.db.execute("select id from papers order by id")]
    rng = np.random.default_rng(11)
    for n, user in enumerate(["U1", "U2", "U3", "U5"]):
        for minute, paper in enumerate(rng.choice(papers, size=6 + 2 * n, replace=False)):
            kind = "like" if minute % 3 != 1 else "dislike"
            click(engine, user, str(paper), kind, minute)


def test_each_members_plan_in_a_batch_with_clicks_is_the_plan_chosen_for_them_alone(
    engine,
) -> None:
    _members_with_clicks(engine)
    taste.forget()
    together = select_digests(engine)
    recommended = 0
    for user in MEMBERS:
        taste.forget()  # alone, as in a process just started: nothing shared with the batch
        alone = select_digests(engine, [user])[user]
        assert together[user].to_json() == alone.to_json(), user
        recommended += sum(len(s.items) for s in alone.sections if s.recommended)
    assert recommended > 0  # recommendations were chosen, and compared too
    assert sum(together[u].size for u in MEMBERS) > 10


def test_topic_vectors_from_matching_are_the_ones_a_model_makes_itself(engine) -> None:
    """The batch hands the topics' query vectors its matching made to the models
    (``remember_topic_vectors``): they must be the very numbers ``topic_vectors`` computes."""
    _members_with_clicks(engine)
    texts = sorted({t for topics in MEMBERS.values() for t in topics})
    taste.forget()
    computed = taste.topic_vectors(engine.index, texts)
    taste.forget()
    select_digests(engine)
    remembered = taste.topic_vectors(engine.index, texts)
    assert len(remembered) == len(computed) == len(texts)
    for (terms, weights), (terms_0, weights_0) in zip(remembered, computed, strict=True):
        assert terms.dtype == terms_0.dtype and weights.dtype == weights_0.dtype
        assert terms.tobytes() == terms_0.tobytes() and weights.tobytes() == weights_0.tobytes()


def test_models_scored_together_score_every_paper_as_one_query_each(engine) -> None:
    """``score_all`` multiplies many profiles with the index at once: each model's scores are
    the index's own scores of its profile query, those of at least ``SCORE_KEEP`` kept,
    documents ascending."""
    _members_with_clicks(engine)
    topics = {("T1", u): t for u, t in MEMBERS.items()}
    models = list(taste.tastes(engine, topics).values())
    assert len(models) == 4
    index = engine.index
    together = taste.score_all(index, models)
    for model, (docs, scores) in zip(models, together, strict=True):
        ref_docs, ref_scores = index.score(model.term_ids, model.weights)
        keep = ref_scores >= taste.SCORE_KEEP
        order = np.argsort(ref_docs[keep])
        assert len(docs) > 0
        assert np.array_equal(docs, ref_docs[keep][order])
        assert np.array_equal(scores, ref_scores[keep][order].astype(np.float32))
        [(alone_docs, alone_scores)] = taste.score_all(index, [model])
        assert docs.tobytes() == alone_docs.tobytes()
        assert scores.tobytes() == alone_scores.tobytes()


def _dense_cosines(index, docs, vectors) -> np.ndarray:
    """The reference: every document's unit vector against every vector, as plain arrays."""
    rows = taste.unit_vectors(index, docs)
    width = index.n_terms
    left, right = np.zeros((len(rows), width)), np.zeros((len(vectors), width))
    for matrix, group in ((left, rows), (right, vectors)):
        for i, (terms, values) in enumerate(group):
            matrix[i, terms] = values
    return left @ right.T


def test_a_batchs_answers_are_each_members_alone_and_the_plain_arithmetic(engine) -> None:
    """``taste.Batch`` answers every member's questions in a few products over the batch:
    each member's answers are byte for byte the ones asked alone (a batch of one: what
    ``Taste.judge`` and the others do), whatever else is in the batch, and they are the
    plain definitions (cosines of unit vectors, the nearest 👎 and 👍, the semantic vote)."""
    _members_with_clicks(engine)
    index = engine.index
    topics = {("T1", u): t for u, t in MEMBERS.items()}
    models = list(taste.tastes(engine, topics).values())
    rng = np.random.default_rng(5)
    docs = [rng.choice(index.live_docs(), size=12 + 3 * k, replace=False) for k in range(4)]
    batch = taste.Batch(index, models)
    members = [2, 0, 3, 1]  # any order, any subset
    asked = [docs[k] for k in members]
    together = {
        "judge": batch.judge(members, asked),
        "topic": batch.topic_closeness(members, asked),
        "expected": batch.expected_like(members, asked),
        "semantic": batch.semantic_closeness(members, asked),
        "near": batch.near_disliked(members, asked),
    }
    bounds = np.cumsum([0] + [len(d) for d in asked])
    for j, k in enumerate(members):
        mine = slice(bounds[j], bounds[j + 1])
        model, alone = models[k], docs[k]
        verdicts = model.judge(index, alone)
        for field in ("unwanted", "liked_count", "example"):
            assert getattr(together["judge"], field)[mine].tobytes() == (
                getattr(verdicts, field).tobytes()
            )
        for name, mine_alone in (
            ("topic", model.topic_closeness(index, alone)),
            ("expected", model.expected_like(index, alone)),
            ("semantic", model.semantic_closeness(index, alone)),
            ("near", model.near_disliked(index, alone)),
        ):
            assert together[name][mine].tobytes() == mine_alone.tobytes(), name
        # The plain arithmetic.
        liked = _dense_cosines(index, alone, model.liked_vectors)
        disliked = _dense_cosines(index, alone, model.disliked_vectors)
        best = liked.max(axis=1) if len(model.liked_vectors) else np.zeros(len(alone))
        worst = disliked.max(axis=1) if len(model.disliked_vectors) else np.zeros(len(alone))
        certain = np.abs(worst - np.maximum(taste.NEAR_DISLIKED, best + 0.1)) > 1e-5
        expected = np.isin(alone, model.disliked) | (worst >= taste.NEAR_DISLIKED)
        expected |= worst > best + taste.DISLIKE_MARGIN
        assert np.array_equal(verdicts.unwanted[certain], expected[certain])
        assert np.array_equal(verdicts.liked_count, (liked >= taste.REASON_COSINE).sum(axis=1))
        if len(model.liked_vectors):  # the most alike 👍 paper
            picked = liked[np.arange(len(alone)), verdicts.example]
            assert np.allclose(picked, best, atol=1e-6)
        topic = _dense_cosines(index, alone, model.topic_vectors).max(axis=1)
        assert np.allclose(model.topic_closeness(index, alone), topic, atol=1e-6)
        z = taste.semantic_vectors(index, alone)
        z_liked = taste.semantic_vectors(index, model.liked)
        z_disliked = taste.semantic_vectors(index, model.disliked)
        kernel = taste.KERNEL_BANDWIDTH
        votes_liked = np.exp((z @ z_liked.T - 1) / kernel).sum(axis=1)
        votes_disliked = np.exp((z @ z_disliked.T - 1) / kernel).sum(axis=1)
        prior = taste.KERNEL_PRIOR * np.exp(-1 / kernel)
        vote = (votes_liked + prior * model.like_rate) / (votes_liked + votes_disliked + prior)
        assert np.allclose(model.expected_like(index, alone), vote, atol=1e-5)
        nearest = -np.sort(-(z @ z_liked.T), axis=1)[:, : taste.SEMANTIC_NEAREST].mean(axis=1)
        assert np.allclose(model.semantic_closeness(index, alone), nearest, atol=1e-5)


def test_the_recommendation_pool_is_the_best_papers_ties_by_document(engine) -> None:
    """``recommend_pool`` keeps the ``RECOMMEND_POOL`` best scores (a tie: the lower document
    first), however many papers tie at its last place, without rated or excluded papers."""
    _members_with_clicks(engine)
    [model] = list(taste.tastes(engine, {("T1", "U1"): MEMBERS["U1"]}).values())
    rng = np.random.default_rng(9)
    docs = np.arange(1000, 1400, dtype=np.int64)
    values = rng.choice(np.float32([0.2, 0.3, 0.4, 0.5]), size=len(docs))  # many ties
    exclude = docs[::7]
    docs_kept, values_kept = taste.recommend_pool(model, (docs, values), exclude=exclude)
    allowed = ~np.isin(docs, exclude)
    expected = sorted(zip(-values[allowed], docs[allowed], strict=True))[: taste.RECOMMEND_POOL]
    assert docs_kept.tolist() == [int(d) for _, d in expected]
    assert values_kept.tolist() == [float(-v) for v, _ in expected]
