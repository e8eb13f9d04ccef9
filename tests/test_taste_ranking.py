"""The member's model ranks with meaning, not only words (issue 11, fourth pass): the semantic
space (LSA over the index's TF-IDF vectors), the expected 👍 of a paper from the papers a member
rated, topic matches left out when that is low, and recommendations ordered by closeness to the
👍 papers in that space. State on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.engine.search import Engine
from digest import selection, taste
from digest.selection import select_digests
from tests.digest_support import write_corpus
from tests.test_taste import OLD, _graph_member, click, subscribe

pytestmark = pytest.mark.usefixtures("state_backend")


def _generative_papers() -> list[dict]:
    """Papers that call one subject by two names (both names together in some, one of them
    alone in others), and papers on robots that share none of their words."""
    both = [
        "denoising diffusion models are score-based generative modelling of images",
        "diffusion models and score-based generative modelling sample images by denoising",
        "score-based generative modelling explains diffusion models for image denoising",
        "diffusion models learn score-based generative modelling of image noise",
    ]
    diffusion = ["diffusion models denoise noisy images step by step"]
    score = ["score-based generative modelling with stochastic equations"]
    robots = [
        "legged robots learn walking gaits with reinforcement learning",
        "robot arms grasp objects using reinforcement learning policies",
        "walking robots balance on rough terrain with learned policies",
        "reinforcement learning policies for robot grasping and walking",
    ]
    texts = [("both", both), ("diffusion", diffusion), ("score", score), ("robot", robots)]
    return [
        {
            "id": f"{kind}-{n}",
            "title": text.title(),
            "abstract": text + ".",
            "authors": [f"{kind}writer{n}"],  # no word shared across papers
            "venue": "X",
            "year": 2023,
        }
        for kind, group in texts
        for n, text in enumerate(group)
    ]


@pytest.fixture
def generative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    # Ten papers on two subjects: two dimensions hold them (64 would keep every direction of
    # so small a corpus, and so no more than its words).
    monkeypatch.setattr(taste, "SEMANTIC_COMPONENTS", 2)
    engine = Engine.open(tmp_path / "g.db")
    engine.ingest([write_corpus(tmp_path / "g.jsonl", _generative_papers())])
    engine.db.execute("update papers set added_at = ?", [OLD])
    taste.forget()
    return engine


def _docs(engine: Engine, *papers: str) -> np.ndarray:
    found = taste._docs_of_papers(engine, engine.index, papers)
    return np.asarray([found[p] for p in papers], np.int64)


def test_papers_on_one_subject_are_near_in_the_semantic_space_in_other_words(
    generative: Engine,
) -> None:
    index = generative.index
    diffusion, score, robot = _docs(generative, "diffusion-0", "score-0", "robot-0")
    # No word in common: their TF-IDF vectors are orthogonal.
    [[by_words]] = taste.cosines(
        taste.unit_vectors(index, [diffusion]), taste.unit_vectors(index, [score])
    )
    assert by_words == pytest.approx(0.0)
    vectors = taste.semantic_vectors(index, np.asarray([diffusion, score, robot]))
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(1.0, abs=1e-5)
    assert vectors[0] @ vectors[1] > 0.8
    assert vectors[0] @ vectors[2] < 0.3


def test_the_semantic_space_is_fitted_once_per_main_segment(
    generative: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fits = []
    fit = taste._fit_semantic_space
    monkeypatch.setattr(taste, "_fit_semantic_space", lambda index: fits.append(1) or fit(index))
    docs = _docs(generative, "diffusion-0", "score-0")
    first = taste.semantic_vectors(generative.index, docs)
    assert np.array_equal(first, taste.semantic_vectors(generative.index, docs))
    assert len(fits) == 1
    # A new paper is a new generation, with a delta segment: the main segment's space (not
    # fitted again), where the new paper has its place.
    new = {
        "id": "score-new",
        "title": "Score-Based Generative Modelling Of Audio",
        "abstract": "score-based generative modelling of audio.",
        "authors": ["Someone"],
        "venue": "X",
        "year": 2024,
    }
    generative.ingest([write_corpus(tmp_path / "new.jsonl", [new])])
    assert len(generative.index.segments) == 2
    [vector] = taste.semantic_vectors(generative.index, _docs(generative, "score-new"))
    assert len(fits) == 1
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    [score] = taste.semantic_vectors(generative.index, _docs(generative, "score-0"))
    assert vector @ score > 0.9
    # A new main segment: fitted again.
    generative.rebuild_index()
    taste.semantic_vectors(generative.index, _docs(generative, "score-new"))
    assert len(fits) == 2


def test_a_member_is_expected_to_like_papers_near_their_likes_in_other_words(
    generative: Engine,
) -> None:
    subscribe(generative, "U1", "generative models")
    click(generative, "U1", "diffusion-0", "like")
    click(generative, "U1", "robot-0", "dislike", 1)
    model = taste.taste_of(generative, "U1", ["generative models"])
    assert model is not None
    assert model.like_rate == pytest.approx((1 + 1) / (2 + 4))  # the prior: 1 👍 and 3 👎
    score, robot = model.expected_like(generative.index, _docs(generative, "score-0", "robot-1"))
    assert score > 0.8 > 0.2 > robot
    # Recommendations are ordered by that closeness: the paper in other words comes first.
    assert model.semantic_closeness(generative.index, _docs(generative, "score-0"))[0] > 0.8


def test_topic_matches_a_member_is_unlikely_to_like_stop_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(taste, "SEMANTIC_COMPONENTS", 2)
    engine = _graph_member(tmp_path)
    taste.forget()
    # The 👎 margin and the classifier off: the expected 👍 alone.
    monkeypatch.setattr(taste, "DISLIKE_MARGIN", -1.0)
    monkeypatch.setattr(selection, "TOPIC_MIN_PROBABILITY", 0.0)
    for n, paper in enumerate(("chem-4", "chem-1", "chem-2")):
        click(engine, "U1", paper, "dislike", n)
    click(engine, "U1", "social-1", "like", 5)
    model = taste.taste_of(engine, "U1", ["graph neural networks"])
    assert model is not None
    chem, social = model.expected_like(engine.index, _docs(engine, "chem-0", "social-2"))
    assert chem < taste.TOPIC_MIN_EXPECTED < social
    plan = set(select_digests(engine, ["U1"], limit=50)["U1"].paper_ids)
    assert not {"chem-0", "chem-3"} & plan
    assert {"social-2", "social-3", "social-4"} <= plan
    monkeypatch.setattr(taste, "TOPIC_MIN_EXPECTED", 0.0)
    assert {"chem-0", "chem-3"} <= set(select_digests(engine, ["U1"], limit=50)["U1"].paper_ids)


def test_recommendations_are_ordered_by_semantic_closeness_to_the_liked_papers(
    generative: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    subscribe(generative, "U1", "legged robots")
    click(generative, "U1", "diffusion-0", "like")
    model = taste.taste_of(generative, "U1", ["legged robots"])
    assert model is not None
    index = generative.index
    [scores] = taste.score_all(index, [model])
    monkeypatch.setattr(taste, "RECOMMEND_NEAR_TOPIC", -1.0)

    def recommended() -> list[int]:
        return [r.doc for r in taste.recommend(index, model, scores, limit=10, floor=0.0)]

    found = recommended()
    closeness = model.semantic_closeness(index, np.asarray(found, np.int64)).tolist()
    assert len(found) >= 5
    assert closeness == sorted(closeness, reverse=True)
    # Not the profile's own order: the setting is what orders them.
    monkeypatch.setattr(taste, "RECOMMEND_RANK", "score")
    by_score = recommended()
    assert sorted(by_score) == sorted(found)
    assert by_score != found
