"""The digest batch's renderer (``bot.slack.render.digest.DigestRenderer``): every message
byte for byte what ``digest_message`` makes of the same plan, while what belongs to one member
(a paper's number in their digest, a recommendation's why, teammates' saves, a channel
digest's share button) stays theirs, and a changed corpus is rendered afresh."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.engine.search import Engine
from bot.slack.render.digest import VERSION_CHECKED_EVERY, DigestRenderer, digest_message
from digest.plan import RECOMMENDED, RECOMMENDED_TITLE, DigestItem, DigestPlan, DigestSection
from tests.digest_support import synthetic_papers, write_corpus

THEMES = ("graph", "diffusion", "rl", "federated", "protein")


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = Engine.open(tmp_path / "d.db")
    engine.ingest([write_corpus(tmp_path / "papers.jsonl", corpus())])
    return engine


def corpus() -> list[dict]:
    """The synthetic papers, and one whose abstract is one 5,000-letter word: its snippet is
    cut to the letter by the room its section has left, which its number's digits take from."""
    long = {"id": "long-0", "title": "Long Graph Words", "abstract": "graph" + "x" * 4995}
    return [*synthetic_papers(), long]


def item(paper: str, why: list[str], score: float = 0.5, **extra) -> DigestItem:
    return DigestItem(paper, score, why, new=extra.pop("new", False), **extra)


def section(topic_id: int, query: str, *items: DigestItem) -> DigestSection:
    return DigestSection(topic_id, query, list(items))


def plans() -> dict[str, DigestPlan]:
    """Members whose digests share papers at other places, under other terms and notes."""
    graph = [item(f"graph-{n}", ["graph", "neural"], 0.61 - n / 100) for n in range(6)]
    more = [item("graph-6", ["graph"]), item("graph-7", ["graph"])]
    long = item("long-0", ["graph"])
    return {
        # graph-0 is the 1st paper here ...
        "first": DigestPlan("U1", [section(1, "graph neural networks", *graph)]),
        # ... the 4th here, and the 11th (two digits) in "many".
        "fourth": DigestPlan(
            "U2",
            [
                section(
                    1,
                    "diffusion models",
                    *(item(f"diffusion-{n}", ["diffusion"]) for n in range(3)),
                ),
                section(2, "graph neural networks", *graph[:3]),
            ],
        ),
        "many": DigestPlan(
            "U3",
            [
                section(
                    1, "protein design", *(item(f"protein-{n}", ["protein"]) for n in range(6))
                ),
                section(2, "rl", *(item(f"rl-{n}", ["reinforcement"], new=True) for n in range(4))),
                section(3, "graph neural networks", *graph[:2]),
            ],
            since="2024-01-01T00:00:00+00:00",
        ),
        # The same paper matched by other terms (another snippet), and with another score.
        "other terms": DigestPlan(
            "U4", [section(1, "message passing", item("graph-0", ["message", "passing"], 0.61))]
        ),
        "other score": DigestPlan(
            "U4", [section(1, "graphs", item("graph-0", ["graph", "neural"], 0.33))]
        ),
        # The long paper 9th, then 10th: one more digit, one letter less of its snippet.
        "ninth": DigestPlan("U8", [section(1, "graph neural networks", *graph, *more, long)]),
        "tenth": DigestPlan(
            "U9", [section(1, "graph", *graph, *more, item("rl-0", ["graph"]), long)]
        ),
        # Teammates' saves on one paper, a recommendation with its why.
        "notes": DigestPlan(
            "U5",
            [
                section(
                    1,
                    "graph neural networks",
                    graph[0],
                    item("graph-1", ["graph", "neural"], 0.6, team_saves=3),
                ),
                section(
                    RECOMMENDED,
                    RECOMMENDED_TITLE,
                    item("federated-0", [], 0.42, liked_count=3, liked_example="graph-2"),
                    item(
                        "federated-1", [], 0.4, liked_count=1, liked_example="graph-3", team_saves=2
                    ),
                ),
            ],
        ),
        "gone": DigestPlan(
            "U6", [section(1, "graph neural networks", item("no-such-paper", ["graph"]), graph[2])]
        ),
    }


def same(engine: Engine, renderer: DigestRenderer, plan: DigestPlan, **options) -> dict:
    """The renderer's message, checked against ``digest_message``'s, byte for byte."""
    expected, expected_kept = digest_message(engine, plan, "2024-03-04", **options)
    message, kept = renderer.message(plan, "2024-03-04", **options)
    assert json.dumps(message, ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)
    assert kept == expected_kept
    return message


def paper_blocks(message: dict, paper_id: str) -> list[dict]:
    """The section, context line and buttons of one paper in a digest message."""
    blocks = message["blocks"]
    for n, block in enumerate(blocks):
        if block["type"] == "actions" and block["elements"][0].get("value") == paper_id:
            return blocks[n - 2 : n + 1]
    raise AssertionError(f"{paper_id} is not in the message")


OPTIONS = [
    {},
    {"digest_id": "U1:2024-03-04"},
    {"owner": "U1", "digest_id": "U1:2024-03-04"},
    {"preview": True},
]


@pytest.mark.parametrize("options", OPTIONS, ids=["dm", "metadata", "channel", "preview"])
def test_every_digest_of_a_batch_is_byte_for_byte_digest_message(engine, options) -> None:
    renderer = DigestRenderer(engine)
    for _ in range(2):  # made, then from what was kept
        for plan in plans().values():
            same(engine, renderer, plan, **options)
    for plan in reversed(list(plans().values())):  # kept blocks met at other places
        same(engine, renderer, plan, **options)


def test_a_cut_digest_is_cut_and_counted_as_digest_message_cuts_it(engine) -> None:
    """A plan longer than 50 blocks: the same papers kept, the same tallies."""
    renderer = DigestRenderer(engine)
    long = DigestPlan(
        "U7",
        [
            section(n + 1, theme, *(item(f"{theme}-{k}", [theme], 0.5 - k / 100) for k in range(8)))
            for n, theme in enumerate(THEMES)
        ],
    )
    message = same(engine, renderer, long, digest_id="U7:x")
    assert len(message["blocks"]) <= 50
    assert renderer.message(long, "2024-03-04")[1].size < long.size


def test_what_belongs_to_one_member_stays_in_their_digest(engine) -> None:
    renderer = DigestRenderer(engine)
    messages = {name: same(engine, renderer, plan) for name, plan in plans().items()}
    first = paper_blocks(messages["first"], "graph-0")
    fourth = paper_blocks(messages["fourth"], "graph-0")
    many = paper_blocks(messages["many"], "graph-0")
    # Its number, in the title and in every button's action id.
    assert first[0]["text"]["text"].startswith("1. ")
    assert fourth[0]["text"]["text"].startswith("4. ")
    assert many[0]["text"]["text"].startswith("11. ")
    assert [e["action_id"] for e in fourth[2]["elements"]] == [
        f"{a}:4" for a in ("similar", "share", "like", "dislike", "save")
    ]
    assert first[0]["text"]["text"][3:] == fourth[0]["text"]["text"][3:]
    # Other terms, another snippet; no score (a digest's order is not the scores').
    other = paper_blocks(messages["other terms"], "graph-0")
    assert "*message*" in other[0]["text"]["text"] and "*message*" not in first[0]["text"]["text"]
    facts = paper_blocks(messages["other score"], "graph-0")[1]["elements"][0]["text"]
    assert "matched *graph*, *neural*" in facts and "score" not in facts
    # The long paper's snippet, one letter shorter as its 10th paper than as its 9th.
    ninth = paper_blocks(messages["ninth"], "long-0")[0]["text"]["text"]
    tenth = paper_blocks(messages["tenth"], "long-0")[0]["text"]["text"]
    assert ninth.startswith("9. ") and tenth.startswith("10. ")
    assert len(ninth) == len(tenth) and ninth[3:] != tenth[4:]
    # Notes only where that member's plan has them.
    notes = messages["notes"]
    saved = paper_blocks(notes, "graph-1")[1]["elements"]
    assert [e["text"] for e in saved[1:]] == [":busts_in_silhouette: 3 teammates also saved this"]
    assert len(paper_blocks(messages["first"], "graph-1")[1]["elements"]) == 1
    liked = [e["text"] for e in paper_blocks(notes, "federated-0")[1]["elements"][1:]]
    assert len(liked) == 1 and "the 3 papers you 👍" in liked[0]
    assert len(paper_blocks(notes, "federated-1")[1]["elements"]) == 3
    assert len(paper_blocks(notes, "graph-0")[1]["elements"]) == 1
    # A digest posted in a channel shares elsewhere; the DM's own digest does not.
    channel = same(engine, renderer, plans()["first"], owner="U1")
    assert paper_blocks(channel, "graph-0")[2]["elements"][1]["action_id"] == "share_elsewhere:1"
    assert paper_blocks(messages["first"], "graph-0")[2]["elements"][1]["action_id"] == "share:1"


def test_a_paper_changed_in_the_corpus_is_rendered_afresh(engine, tmp_path) -> None:
    """Within ``VERSION_CHECKED_EVERY`` of the last look at the corpus, as it was then."""
    now = [0.0]
    renderer = DigestRenderer(engine, clock=lambda: now[0])
    plan = plans()["first"]
    before = same(engine, renderer, plan)
    assert "Graph Neural Networks with Message Passing (0)" in json.dumps(before)
    papers = corpus()
    papers[0] = {**papers[0], "title": "Renamed: a new title", "abstract": "Graph graph graph."}
    engine.ingest([write_corpus(tmp_path / "changed.jsonl", papers)])
    now[0] += VERSION_CHECKED_EVERY / 2
    assert renderer.message(plan, "2024-03-04")[0] == before
    now[0] += VERSION_CHECKED_EVERY / 2
    after = same(engine, renderer, plan)
    text = paper_blocks(after, "graph-0")[0]["text"]["text"]
    assert "Renamed: a new title" in text and "*Graph*" in text


def test_papers_read_ahead_for_a_batch_render_as_digest_message_and_afresh_once_changed(
    engine, tmp_path
) -> None:
    """``prepare`` reads a batch's papers at once; they are dropped with everything else when
    the corpus changes."""
    now = [0.0]
    renderer = DigestRenderer(engine, clock=lambda: now[0])
    batch = list(plans().values())
    renderer.prepare(batch)
    for plan in batch:
        same(engine, renderer, plan, digest_id="x")
    papers = corpus()
    papers[0] = {**papers[0], "title": "Renamed: a new title", "abstract": "Graph graph graph."}
    engine.ingest([write_corpus(tmp_path / "changed.jsonl", papers)])
    now[0] += VERSION_CHECKED_EVERY
    renderer.prepare(batch)
    for plan in batch:
        same(engine, renderer, plan, digest_id="x")
    text = paper_blocks(renderer.message(plans()["first"], "x")[0], "graph-0")[0]["text"]["text"]
    assert "Renamed: a new title" in text and "*Graph*" in text


def test_new_papers_say_so_and_no_paper_shows_a_score(engine) -> None:
    """A section lists new papers first, then older ones: a score per paper would read out of
    order, so each new paper says "new" instead."""
    plan = DigestPlan(
        "U1",
        [
            section(
                1,
                "graphs",
                item("graph-1", ["graph"], 0.2, new=True),
                item("graph-0", ["graph"], 0.6),
            )
        ],
    )
    message = same(engine, DigestRenderer(engine), plan)
    new = paper_blocks(message, "graph-1")[1]["elements"]
    old = paper_blocks(message, "graph-0")[1]["elements"]
    assert any(":new: new" in e["text"] for e in new)
    assert not any(":new:" in e["text"] for e in old)
    assert "score" not in json.dumps(message)
