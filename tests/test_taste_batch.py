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


def test_sides_built_together_are_the_sides_built_alone(engine) -> None:
    """``_Sides.of`` builds the 👍 and 👎 sides from one lookup of their terms: each side's
    terms and matrix are exactly ``_Side.of``'s, and so are the cosines taken with them."""
    index = engine.index
    rng = np.random.default_rng(4)
    docs = rng.permutation(index.live_docs())
    liked, disliked, others = docs[:4], docs[4:7], docs[7:]
    groups = [taste.unit_vectors(index, liked), taste.unit_vectors(index, disliked), []]
    together = taste._Sides.of(groups)
    vectors = taste.unit_vectors(index, others)
    for side, group, cosines in zip(together.sides, groups, together.cosines(vectors), strict=True):
        alone = taste._Side.of(group)
        assert side.terms.tobytes() == alone.terms.tobytes()
        assert side.matrix.shape == alone.matrix.shape
        assert side.matrix.tobytes() == alone.matrix.tobytes()
        assert cosines.tobytes() == alone.cosines(vectors).tobytes()


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
