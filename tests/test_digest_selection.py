"""Choosing what goes in each digest: batch matching (digest/matching.py) and ordering
(digest/selection.py)."""

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from bot.engine.search import Engine
from digest.ledger import Ledger
from digest.matching import MATCH_THRESHOLD, TopicCheck, check_topic, match_topics
from digest.plan import DigestPlan
from digest.selection import select_digests
from digest.subscriptions import Subscriptions
from tests.digest_support import synthetic_papers, write_corpus
from tests.matching_reference import match_topics_one_by_one

NOW = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
OLD = "2024-01-01T00:00:00+00:00"

TOPICS = [
    "graph neural networks",
    "Graph Neural Network",  # the same topic, spelled differently
    "diffusion models -survey",
    '"score matching"',
    "reinforcement learning venue:ICML",
    "protein design year:2020-2022",
    "venue:ICLR",  # filters only
    'author:"Survey Writer"',
    "privacy",
    "quantum chemistry",  # matches nothing
    "venue:Nowhere graph",  # an unknown venue: the lookup's error
    "the of",  # nothing to look for
]


# Every test here runs with the shared state in SQLite and in PostgreSQL (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("state_backend")


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = Engine.open(tmp_path / "d.db")
    engine.ingest([write_corpus(tmp_path / "papers.jsonl")])
    # Everything is old news, except what a test ingests later.
    engine.db.execute("update papers set added_at = ?", [OLD])
    return engine


def subscribe(engine: Engine, user: str, *topics: str, at: datetime = NOW) -> None:
    subs = Subscriptions(engine.db)
    for topic in topics:
        subs.add_topic(user, topic, at)


def ids_of(engine: Engine, docs: np.ndarray) -> set[str]:
    return set(engine.corpus.ids_for_rowids([int(engine.index.rowids[d]) for d in docs]))


def send(engine: Engine, plan: DigestPlan, local_date: str, at: datetime) -> None:
    """Record a digest as sent, the way delivery does."""
    ledger = Ledger(engine.db, "test")
    claim = ledger.claim(f"{plan.user_id}:{local_date}", plan.user_id, local_date, plan, at)
    assert claim is not None
    ledger.record_sent(claim, "D1", "1.0", at)


# --- matching ----------------------------------------------------------------------------------


def test_batch_matching_equals_one_query_per_topic(engine: Engine) -> None:
    batch = match_topics(engine, TOPICS, chunk=3)  # several chunks
    reference = match_topics_one_by_one(engine, TOPICS)
    for topic, got, want in zip(TOPICS, batch, reference, strict=True):
        assert got.error == want.error, topic
        assert got.docs.tolist() == want.docs.tolist(), topic
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, err_msg=topic)
    counts = {t: m.count for t, m in zip(TOPICS, batch, strict=True)}
    assert counts["graph neural networks"] == counts["Graph Neural Network"] > 0
    assert counts["quantum chemistry"] == 0


def test_every_match_passes_the_threshold(engine: Engine) -> None:
    strict = match_topics(engine, ["privacy"])[0]
    loose = match_topics(engine, ["privacy"], threshold=0.01)[0]
    assert strict.count and (strict.scores >= MATCH_THRESHOLD).all()
    assert loose.count > strict.count  # papers that only mention it do not match
    assert set(strict.docs) < set(loose.docs)


def test_phrases_exclusions_and_filters_work_as_in_lookups(engine: Engine) -> None:
    diffusion, survey_free, phrase, icml, years, author = match_topics(
        engine,
        [
            "diffusion models",
            "diffusion models -survey",
            '"score matching"',
            "reinforcement learning venue:ICML",
            "protein design year:2020-2022",
            'author:"Survey Writer"',
        ],
    )
    assert ids_of(engine, diffusion.docs) - ids_of(engine, survey_free.docs) == {"diffusion-survey"}
    assert ids_of(engine, phrase.docs) == {"diffusion-0", "diffusion-4", "diffusion-survey"}
    papers = {p["id"]: p for p in synthetic_papers()}
    assert {papers[i]["venue"] for i in ids_of(engine, icml.docs)} == {"ICML"}
    assert all(2020 <= papers[i]["year"] <= 2022 for i in ids_of(engine, years.docs))
    assert ids_of(engine, author.docs) == {p for p in papers if p.endswith("-survey")}
    assert author.why == ['author:"Survey Writer"']


def test_unusable_topics_carry_the_lookup_error(engine: Engine) -> None:
    unknown, common, waiting = match_topics(
        engine, ["colour:blue graph", "the of", "venue:Nowhere graph"]
    )
    assert "I don't know the filter `colour:`" in unknown.error
    assert common.error and not common.count
    assert not waiting.error and not waiting.count  # its venue's papers are not here yet


# --- one member's digest -------------------------------------------------------------------------


def test_identical_topics_are_matched_once_for_everybody(engine: Engine) -> None:
    subscribe(engine, "U1", "graph neural networks", "privacy")
    subscribe(engine, "U2", "Graph Neural Network")
    subscribe(engine, "U3", "graph neural networks", "diffusion models")
    asked: list[list[str]] = []

    def spy(engine: Engine, queries: list[str], **options) -> list:
        asked.append(list(queries))
        return match_topics(engine, queries, **options)

    plans = select_digests(engine, matcher=spy)
    assert len(asked) == 1 and sorted(asked[0]) == [
        "diffusion models",
        "graph neural networks",
        "privacy",
    ]
    gnn = ids_of(engine, match_topics(engine, ["graph neural networks"])[0].docs)
    assert plans["U2"].paper_ids and set(plans["U2"].paper_ids) <= gnn


def test_at_most_n_papers_grouped_by_topic_each_with_why(engine: Engine) -> None:
    subscribe(engine, "U1", "diffusion models", "graph neural networks", "quantum chemistry")
    plan = select_digests(engine, ["U1"], limit=12)["U1"]
    assert plan.size == 12
    assert [s.query for s in plan.sections] == ["diffusion models", "graph neural networks"]
    assert len(plan.paper_ids) == len(set(plan.paper_ids))
    for section in plan.sections:
        assert all(item.paper_id.split("-")[0] in ("diffusion", "graph") for item in section.items)
        assert all(item.why for item in section.items)
        scores = [item.score for item in section.items]
        assert scores == sorted(scores, reverse=True)
    assert set(plan.sections[0].items[0].why) & {"diffusion", "diffusion model", "model"}


def test_each_paper_appears_once_under_its_best_topic(engine: Engine) -> None:
    subscribe(engine, "U1", "privacy", "federated learning privacy")
    plan = select_digests(engine, ["U1"], limit=50)["U1"]
    assert len(plan.paper_ids) == len(set(plan.paper_ids))
    by_topic = {s.query: {i.paper_id for i in s.items} for s in plan.sections}
    # Papers about both are closer to the two-word topic.
    assert "federated-2" in by_topic["federated learning privacy"]


def test_sent_papers_never_come_again(engine: Engine) -> None:
    subscribe(engine, "U1", "graph neural networks")
    first = select_digests(engine, ["U1"], limit=4)["U1"]
    send(engine, first, "2024-03-04", NOW)
    second = select_digests(engine, ["U1"], limit=4)["U1"]
    assert first.size == second.size == 4
    assert not set(first.paper_ids) & set(second.paper_ids)
    send(engine, second, "2024-03-05", NOW)
    rest = select_digests(engine, ["U1"], limit=50)["U1"]
    assert rest.size == 9 - 8  # the 9 graph papers match (not the overview); 8 were sent
    send(engine, rest, "2024-03-06", NOW)
    assert select_digests(engine, ["U1"])["U1"].size == 0  # nothing to send: an empty plan


def test_new_papers_come_first_then_the_best_older_ones(engine: Engine, tmp_path: Path) -> None:
    subscribe(engine, "U1", "graph neural networks")
    send(engine, select_digests(engine, ["U1"], limit=2)["U1"], "2024-03-04", NOW)
    late = {
        "id": "graph-late",
        "title": "Graph Neural Networks, Briefly",
        "abstract": "A short note on graph neural networks in passing, among many other things "
        "such as optimisation, vision, speech, robotics, language and evaluation.",
        "authors": ["Late Comer"],
        "venue": "ICLR",
        "year": 2025,
    }
    engine.ingest([write_corpus(tmp_path / "late.jsonl", [late])])  # added now, after NOW
    plan = select_digests(engine, ["U1"], limit=3)["U1"]
    items = plan.sections[0].items
    assert [i.paper_id for i in items][0] == "graph-late" and items[0].new
    assert not any(i.new for i in items[1:])
    older = match_topics(engine, ["graph neural networks"])[0]
    assert items[0].score < float(np.sort(older.scores)[-3])  # new beats better-scoring old


def test_selection_for_nobody_or_unknown_members(engine: Engine) -> None:
    assert select_digests(engine) == {}
    plans = select_digests(engine, ["U404"])
    assert plans["U404"].size == 0


def test_plan_round_trips_through_json_and_can_be_cut(engine: Engine) -> None:
    subscribe(engine, "U1", "diffusion models", "graph neural networks")
    plan = select_digests(engine, ["U1"], limit=20)["U1"]
    assert DigestPlan.from_json(plan.to_json()) == plan
    # A plan a newer version wrote (an item field this one does not know) still reads.
    newer = json.loads(plan.to_json())
    newer["sections"][0]["items"][0]["shown_as"] = "a field from a later version"
    assert DigestPlan.from_json(json.dumps(newer)) == plan
    cut = plan.keeping(plan.sections[1].items[0].paper_id for _ in range(1))
    assert cut.size == 1 and [s.query for s in cut.sections] == ["graph neural networks"]


# --- subscribe-time check ----------------------------------------------------------------------


def test_check_topic_counts_matches_and_shows_the_best_three(engine: Engine) -> None:
    check = check_topic(engine, "graph neural networks")
    assert (check.verdict, check.matches, check.advice) == ("ok", 9, None)
    assert len(check.top) == 3
    assert [h.score for h in check.top] == sorted((h.score for h in check.top), reverse=True)
    assert all(h.id.startswith("graph") for h in check.top)


def test_check_topic_reports_too_broad_and_too_narrow(engine: Engine) -> None:
    broad = check_topic(engine, "venue:ICLR")  # 18 of 46 papers
    assert broad.verdict == "broad" and "of the corpus" in broad.advice
    narrow = check_topic(engine, "quantum chemistry")
    assert narrow.verdict == "none" and narrow.top == [] and "No paper" in narrow.advice
    partly = check_topic(engine, "graph neural networks chromodynamics")
    assert (
        partly.verdict == "partly" and partly.matches and partly.unmentioned == ["chromodynamics"]
    )
    assert "No paper mentions “chromodynamics”" in partly.advice
    bad = check_topic(engine, "venu:ICML graph")  # a typo: a topic does not make it words
    assert bad.verdict == "error" and "I don't know the filter `venu:`" in bad.error
    # A venue with no paper yet is a topic that waits for its papers (a lookup says so).
    waiting = check_topic(engine, "venue:NeurIPS graph")
    assert not waiting.error and waiting.matches == 0


def test_common_words_that_match_nothing_are_called_too_general() -> None:
    check = TopicCheck("learning", matches=0, mentions=29_767, corpus_size=87_256)
    assert check.verdict == "general" and "none is mainly about them" in check.advice
    assert TopicCheck("x", matches=2_000, corpus_size=87_256).verdict == "broad"
    assert TopicCheck("x", matches=1_000, corpus_size=87_256).verdict == "ok"
