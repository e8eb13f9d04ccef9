"""What each member likes (digest/taste.py) and what it changes: digests ranked by the model,
"Recommended for you", 👎-ed papers (and near-duplicates) never again, teammates' saves
counted (never named), ``/papers recommend`` and the App Home. State on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from bot.engine.search import Engine
from bot.playground.fake_slack import TEAM_ID
from bot.slack import render
from bot.slack.listeners import feedback
from bot.slack.render.digest import digest_message
from bot.state import state_for
from digest import selection, taste
from digest.ledger import Ledger
from digest.selection import select_digests
from digest.subscriptions import Subscriptions
from tests.digest_support import synthetic_papers, write_corpus
from tests.slack_harness import SlackHarness, assert_valid, blocks_text, buttons
from tests.surfaces import element
from tests.test_app_home import open_home, publishes, republished, use

NOW = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
OLD = "2024-01-01T00:00:00+00:00"

pytestmark = pytest.mark.usefixtures("state_backend")


def _with_duplicate() -> list[dict]:
    """The synthetic corpus plus a second listing of ``graph-1`` (same text, another id)."""
    papers = synthetic_papers()
    copy = dict(next(p for p in papers if p["id"] == "graph-1"))
    copy["id"] = "graph-1-workshop"
    copy["venue"] = "ICML"
    return [*papers, copy]


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = Engine.open(tmp_path / "d.db")
    engine.ingest([write_corpus(tmp_path / "papers.jsonl", _with_duplicate())])
    engine.db.execute("update papers set added_at = ?", [OLD])
    return engine


def subscribe(engine: Engine, user: str, *topics: str, team: str | None = "T1") -> None:
    subs = Subscriptions(engine.db)
    for topic in topics:
        subs.add_topic(user, topic, NOW - timedelta(days=1), team)


def click(engine: Engine, user: str, paper: str, kind: str, minute: int = 0) -> None:
    state_for(engine.db_path).set_feedback(
        user_id=user, paper_id=paper, kind=kind, now=(NOW + timedelta(minutes=minute)).isoformat()
    )


def send(engine: Engine, user: str, when: datetime) -> list[str]:
    """``digest now`` without Slack: select, cut to the message, claim and record as sent."""
    plan = select_digests(engine, [user])[user]
    _, plan = digest_message(engine, plan, when.date().isoformat())
    ledger = Ledger(state_for(engine.db_path), worker="test")
    claim, _ = ledger.claim_now(user, when.strftime("%Y-%m-%dT%H:%M"), plan, when)
    if claim is None:
        return []
    ledger.record_sent(claim, f"D{user}", f"{when.timestamp():.6f}", when)
    return claim.plan.paper_ids


def recommended_ids(plan) -> list[str]:
    return [i.paper_id for s in plan.sections if s.recommended for i in s.items]


def test_a_members_likes_survive_an_ingest_of_words_no_paper_had(engine, tmp_path) -> None:
    """A 👍 then a feed's paper sharing no word with anything the member likes or follows:
    its delta segment holds none of their terms, and their digest (and everyone's) is still
    chosen (batch scoring gathered no posting lists there and failed: found in a trial)."""
    subscribe(engine, "U1", "protein folding")
    subscribe(engine, "U2", "graph neural networks")
    click(engine, "U1", "protein-0", "like")
    odd = {"id": "odd-1", "title": "Quokka", "abstract": "Quokka xylophone zebra marmalade."}
    engine.ingest([write_corpus(tmp_path / "odd.jsonl", [odd])])
    assert len(engine.index.segments) == 2
    plans = select_digests(engine, [("T1", "U1"), ("T1", "U2")])
    assert plans[("T1", "U1")].size and plans[("T1", "U2")].size


def test_a_member_whose_digest_cannot_be_chosen_leaves_the_others_theirs(
    engine, monkeypatch, caplog
) -> None:
    """The scheduler chooses digests apart when choosing them at once fails: the member whose
    choice fails is logged and left out (the next tick tries again), the others get theirs;
    an outage is raised as it is."""
    from bot.state import StateUnavailable

    subscribe(engine, "U1", "protein folding")
    subscribe(engine, "U2", "graph neural networks")
    real = selection._select

    def poisoned(engine, members, limit, matcher):
        if ("T1", "U1") in list(members):
            raise ValueError("a bug U1's data trips")
        return real(engine, members, limit, matcher)

    monkeypatch.setattr(selection, "_select", poisoned)
    plans = selection.select_digests_apart(engine, [("T1", "U1"), ("T1", "U2")])
    assert list(plans) == [("T1", "U2")] and plans[("T1", "U2")].size
    assert "choosing the digest of ('T1', 'U1') failed" in caplog.text

    def down(*args):
        raise StateUnavailable("The database is not answering.")

    monkeypatch.setattr(selection, "_select", down)
    with pytest.raises(StateUnavailable):
        selection.select_digests_apart(engine, [("T1", "U2")])
    # The corpus file locked by an ingest is no one member's failure either: raised once,
    # not retried (and logged) for every member due.
    calls: list[object] = []

    def locked(*args):
        calls.append(args)
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(selection, "_select", locked)
    with pytest.raises(sqlite3.OperationalError):
        selection.select_digests_apart(engine, [("T1", "U1"), ("T1", "U2")])
    assert len(calls) == 1


# --- the model -------------------------------------------------------------------------------


def test_the_model_ranks_a_paper_like_the_liked_ones_above_an_unrelated_one(engine) -> None:
    subscribe(engine, "U1", "diffusion models")
    for n, paper in enumerate(("protein-0", "protein-1", "protein-2")):
        click(engine, "U1", paper, "like", n)
    model = taste.taste_of(engine, "U1", ["diffusion models"])
    assert model is not None
    [scores] = taste.score_all(engine.index, [model])
    doc = taste._docs_of_papers(engine, engine.index, ["protein-5", "rl-5"])
    protein, rl = taste.scores_of(scores, np.asarray([doc["protein-5"], doc["rl-5"]]))
    assert protein > rl
    # From the first 👍: a member with one like has a model too.
    subscribe(engine, "U2", "diffusion models")
    click(engine, "U2", "graph-0", "like")
    one = taste.taste_of(engine, "U2", ["diffusion models"])
    assert one is not None and len(one.liked) == 1


def test_a_click_changes_the_model_at_once(engine) -> None:
    subscribe(engine, "U1", "diffusion models")
    click(engine, "U1", "protein-0", "like")
    first = taste.taste_of(engine, "U1", ["diffusion models"])
    assert taste.taste_of(engine, "U1", ["diffusion models"]) is first  # cached
    click(engine, "U1", "rl-0", "like", 1)
    second = taste.taste_of(engine, "U1", ["diffusion models"])
    assert second is not first and len(second.liked) == 2


# --- digests -----------------------------------------------------------------------------------


def test_a_member_without_feedback_gets_exactly_todays_digest(engine) -> None:
    subscribe(engine, "U1", "graph neural networks", "reinforcement learning")
    subscribe(engine, "U2", "graph neural networks", "reinforcement learning")
    before = select_digests(engine, ["U1"])["U1"]
    message_before, _ = digest_message(engine, before, "2024-03-04")
    # Another member's clicks (on the very same papers) change nothing for U1.
    for n, paper in enumerate(before.paper_ids[:3]):
        click(engine, "U2", paper, "dislike", n)
    click(engine, "U2", "protein-0", "like", 5)
    after = select_digests(engine)["U1"]
    assert after.to_json() == before.to_json()
    assert digest_message(engine, after, "2024-03-04")[0] == message_before
    assert not recommended_ids(after)
    # Today's digest: the topics' best matches by score, nothing about taste or teammates.
    items = [i for s in after.sections for i in s.items]
    assert all(i.liked_count == 0 and i.team_saves == 0 and not i.liked_example for i in items)
    # ...while U2's digest did change.
    assert select_digests(engine, ["U2"])["U2"].to_json() != before.to_json().replace("U1", "U2")


def test_topic_matches_are_ranked_by_the_model(engine) -> None:
    subscribe(engine, "U1", "graph neural networks")
    plain = select_digests(engine, ["U1"], limit=3)["U1"].paper_ids
    # Liking the "molecular graphs" papers brings the other one of them to the top.
    click(engine, "U1", "graph-2", "like")
    ranked = select_digests(engine, ["U1"], limit=3)["U1"]
    topic_papers = [i.paper_id for s in ranked.sections if not s.recommended for i in s.items]
    assert topic_papers[0] == "graph-6" != plain[0]


def test_a_disliked_paper_and_its_near_duplicate_never_come(engine) -> None:
    subscribe(engine, "U1", "graph neural networks")
    everything = select_digests(engine, ["U1"], limit=50)["U1"].paper_ids
    assert {"graph-1", "graph-1-workshop"} <= set(everything)
    click(engine, "U1", "graph-1", "dislike")
    for day in range(4):
        sent = send(engine, "U1", NOW + timedelta(days=day))
        assert "graph-1" not in sent and "graph-1-workshop" not in sent
    plan = select_digests(engine, ["U1"], limit=50)["U1"]
    assert "graph-1-workshop" not in plan.paper_ids


def test_recommendations_match_no_topic_say_why_and_exclude_sent_papers(engine) -> None:
    subscribe(engine, "U1", "diffusion models")
    for n, paper in enumerate(("protein-0", "protein-1", "protein-4")):
        click(engine, "U1", paper, "like", n)
    plan = select_digests(engine, ["U1"])["U1"]
    recommended = recommended_ids(plan)
    assert recommended and all(p.startswith("protein-") for p in recommended)
    assert not {"protein-0", "protein-1", "protein-4"} & set(recommended)
    message, _ = digest_message(engine, plan, "2024-03-04")
    assert_valid(message)
    text = blocks_text(message)
    assert "Recommended for you" in text and "you 👍, e.g. “Protein Design" in text
    assert "1 recommended" not in text or len(recommended) == 1
    # What was sent never comes again, as a recommendation either.
    sent = send(engine, "U1", NOW)
    again = select_digests(engine, ["U1"])["U1"]
    assert not set(recommended_ids(again)) & set(sent)
    assert set(recommended) <= set(sent)


def test_the_cli_preview_says_why_a_paper_is_recommended(engine) -> None:
    """``paperboy digest preview`` printed an empty ``why:`` under recommendations."""
    from click.testing import CliRunner

    from bot.cli import main
    from tests.postgres import state_env

    subscribe(engine, "U1", "diffusion models")
    for n, paper in enumerate(("protein-0", "protein-1", "protein-4")):
        click(engine, "U1", paper, "like", n)
    recommended = recommended_ids(select_digests(engine, ["U1"])["U1"])
    args = ["--db", str(engine.db_path), "digest", "preview", "--user", "U1", "--team", "T1"]
    result = CliRunner(env=state_env()).invoke(main, args)
    assert result.exit_code == 0, result.output
    whys = [
        line for line in result.output.splitlines() if any(f"id {p} " in line for p in recommended)
    ]
    assert len(whys) == len(recommended)
    assert all(line.endswith("why: like the 3 papers you 👍") for line in whys)
    assert "why: \n" not in result.output + "\n"


def test_a_digest_posted_in_a_channel_recommends_nothing(engine) -> None:
    """What a member 👍 is theirs alone: the channel reads neither the picks nor their why."""
    subscribe(engine, "U1", "diffusion models")
    for n, paper in enumerate(("protein-0", "protein-1", "protein-4")):
        click(engine, "U1", paper, "like", n)
    assert recommended_ids(select_digests(engine, ["U1"])["U1"])
    dm_plan = select_digests(engine, ["U1"])["U1"]
    Subscriptions(engine.db).set_channel("U1", "C1", NOW, team_id="T1")
    plan = select_digests(engine, ["U1"])["U1"]
    assert plan.size and not recommended_ids(plan)
    # A plan chosen for the DM, then sent to the channel (a retry after the member moved
    # their digest): the renderer leaves its recommendations out too, and does not claim them.
    message, kept = digest_message(engine, dm_plan, "2024-03-04", owner="U1")
    assert "Recommended" not in blocks_text(message) and "you 👍" not in blocks_text(message)
    assert not recommended_ids(kept) and kept.size == dm_plan.size - len(recommended_ids(dm_plan))
    Subscriptions(engine.db).set_channel("U1", None, NOW, team_id="T1")  # back in the DM
    assert recommended_ids(select_digests(engine, ["U1"])["U1"])


def test_a_digest_with_recommendations_stays_within_50_blocks(engine) -> None:
    subscribe(engine, "U1", "graph neural networks", "diffusion models", "protein design")
    for n, paper in enumerate(("rl-0", "rl-1", "federated-0")):
        click(engine, "U1", paper, "like", n)
    plan = select_digests(engine, ["U1"], limit=40)["U1"]
    message, kept = digest_message(engine, plan, "2024-03-04")
    assert_valid(message)
    assert len(message["blocks"]) <= 50 and kept.size < plan.size


# --- teammates' saves ----------------------------------------------------------------------------


def save(engine: Engine, user: str, paper: str, team: str | None = "T1") -> None:
    state_for(engine.db_path).toggle_save(user, paper, NOW.isoformat(), team)


def team_line(engine: Engine, user: str = "U1") -> str:
    plan = select_digests(engine, [user])[user]
    return blocks_text(digest_message(engine, plan, "2024-03-04")[0])


def test_a_paper_the_member_saved_shows_saved_in_their_dm_digest_only(engine) -> None:
    subscribe(engine, "U1", "graph neural networks")
    first, second = select_digests(engine, ["U1"])["U1"].paper_ids[:2]
    save(engine, "U1", first)
    save(engine, "U2", second)  # a teammate's save is not the member's
    plan = select_digests(engine, ["U1"])["U1"]
    found = buttons(digest_message(engine, plan, "2024-03-04")[0])
    marks = {b["value"]: b["text"]["text"] for a, b in found.items() if a.startswith("save:")}
    assert marks[first] == "✓ Saved" and marks[second] == "Save"
    # Posted in a channel, nobody learns what the member saved.
    channel = buttons(digest_message(engine, plan, "2024-03-04", owner="U1")[0])
    assert all(b["text"]["text"] == "Save" for a, b in channel.items() if a.startswith("save:"))


def test_teammates_saves_are_counted_from_two_never_named(engine) -> None:
    subscribe(engine, "U1", "graph neural networks")
    first = select_digests(engine, ["U1"])["U1"].paper_ids[0]
    save(engine, "U2", first)
    save(engine, "U9", first, team="T2")  # another workspace: not a teammate
    assert "teammates also saved" not in team_line(engine)
    save(engine, "U3", first)
    text = team_line(engine)
    assert "2 teammates also saved this" in text
    assert "U2" not in text and "U3" not in text
    [item] = [
        i
        for s in select_digests(engine, ["U1"])["U1"].sections
        for i in s.items
        if i.paper_id == first
    ]
    assert item.team_saves == 2


def test_teammates_line_goes_away_when_the_member_turns_it_off(slack: SlackHarness) -> None:
    engine = slack.engine
    # The member in the workspace the slash commands come from (the same id elsewhere is
    # another member, with choices of their own).
    subscribe(engine, "U1", "diffusion models", team=TEAM_ID)
    first = select_digests(engine, ["U1"])["U1"].paper_ids[0]
    save(engine, "U2", first, team=TEAM_ID)
    save(engine, "U3", first, team=TEAM_ID)
    assert "2 teammates also saved this" in team_line(engine)
    _, url = slack.slash("teammates off")
    assert "no longer" in slack.reply(url)["text"]
    assert "teammates also saved" not in team_line(engine)
    _, url = slack.slash("teammates on")
    slack.reply(url)
    assert "2 teammates also saved this" in team_line(engine)
    _, url = slack.slash("teammates")
    assert "/papers teammates off" in slack.reply(url)["text"]


# --- /papers recommend and the App Home ---------------------------------------------------------


def with_synthetic_papers(slack: SlackHarness, tmp_path: Path) -> None:
    """The seed corpus plus the synthetic one (eight papers per theme: alike enough to
    recommend one another)."""
    slack.engine.ingest([write_corpus(tmp_path / "more.jsonl")])


def test_papers_recommend_end_to_end(slack: SlackHarness, tmp_path: Path) -> None:
    with_synthetic_papers(slack, tmp_path)
    _, url = slack.slash("recommend")
    reply = slack.reply(url)
    assert reply["response_type"] == "ephemeral" and "nothing to recommend yet" in reply["text"]
    _, url = slack.slash("protein design")
    shown = buttons(slack.reply(url))
    liked = [shown[f"like:{n}"]["value"] for n in (1, 2, 3)]
    for n, paper in enumerate(liked, 1):
        _, click_url = slack.click(f"like:{n}", paper)
        slack.reply(click_url)
    _, url = slack.slash("recommend")
    reply = slack.reply(url)
    assert reply["response_type"] == "ephemeral"
    text = blocks_text(reply)
    assert "Recommended for you" in text and "from your 3 👍" in text and "you 👍" in text
    found = buttons(reply)
    papers = [b["value"] for a, b in found.items() if a.startswith("like:")]
    assert papers and not set(papers) & set(liked)
    for n, paper in enumerate(papers, 1):
        assert found[f"dislike:{n}"]["value"] == found[f"save:{n}"]["value"] == paper
    assert ("each 👍 finds more" in text) == (len(papers) < feedback.RECOMMEND_SHOWN)
    assert "recommend" in blocks_text(render.help_message())
    # A paper saved is on the reading list already: no longer recommended.
    _, click_url = slack.click("save:1", papers[0])
    slack.reply(click_url)
    _, url = slack.slash("recommend")
    again = [b["value"] for a, b in buttons(slack.reply(url)).items() if a.startswith("like:")]
    assert again and papers[0] not in again and set(again) >= set(papers[1:])


def test_the_home_tab_shows_saved_papers_and_recommendations(
    slack: SlackHarness, tmp_path: Path
) -> None:
    with_synthetic_papers(slack, tmp_path)
    view = open_home(slack)
    assert "*Your reading list* is empty" in blocks_text(view)
    assert "nothing to recommend yet" in blocks_text(view)
    _, url = slack.slash("federated learning")
    shown = buttons(slack.reply(url))
    for n in (1, 2):
        _, click_url = slack.click(f"save:{n}", shown[f"save:{n}"]["value"])
        slack.reply(click_url)
    _, click_url = slack.click("like:1", shown["like:1"]["value"])
    slack.reply(click_url)
    view = open_home(slack)
    saved = next(b for b in view["blocks"] if b.get("block_id") == render.HOME_SAVED_BLOCK)
    saved_text = blocks_text({"blocks": [saved]})
    assert "2 saved papers" in saved_text
    titles = [p["title"] for p in slack.engine.corpus.get_many([shown["save:1"]["value"]])]
    assert titles[0].split()[0] in saved_text
    recommended = next(
        b for b in view["blocks"] if b.get("block_id") == render.HOME_RECOMMENDED_BLOCK
    )
    assert "like the paper you 👍" in blocks_text({"blocks": [recommended]})
    assert len(view["blocks"]) <= 100
    assert json.dumps(view).count("teammates") >= 1


def test_the_home_tabs_teammates_button_turns_the_line_off_and_on(slack: SlackHarness) -> None:
    engine = slack.engine
    subscribe(engine, "U1", "diffusion models", team=TEAM_ID)
    first = select_digests(engine, ["U1"])["U1"].paper_ids[0]
    save(engine, "U2", first, team=TEAM_ID)
    save(engine, "U3", first, team=TEAM_ID)
    view = open_home(slack)
    assert "*Teammates' saves in your digests:* shown" in blocks_text(view)
    for shown_after, line_after in (("hidden", False), ("shown", True)):
        toggle = element(view, render.HOME_TEAM_SAVES)
        before = publishes(slack, "U1")
        assert use(slack, view, {"type": "button", **toggle}) == 200
        view = republished(slack, "U1", before)
        assert f"*Teammates' saves in your digests:* {shown_after}" in blocks_text(view)
        # The next digest follows the choice (the line is a count, never names).
        assert ("2 teammates also saved this" in team_line(engine)) is line_after
    # The button says what a click does next: after "Show" comes "Hide" again.
    assert element(view, render.HOME_TEAM_SAVES)["value"] == "off"


# --- papers like the 👎-ed ones ------------------------------------------------------------------

CHEMISTRY = ["molecules", "drug discovery", "protein binding", "toxicity", "reaction yields"]
SOCIAL = ["friendship links", "user communities", "viral posts", "follower counts", "spam"]


def _two_kinds_of_graph_papers() -> list[dict]:
    """Graph neural network papers on chemistry and on social networks: the topic matches
    both kinds alike; only the member's clicks tell them apart."""
    out = []
    for kind, field, subjects in (
        ("chem", "chemistry", CHEMISTRY),
        ("social", "sociology", SOCIAL),
    ):
        for n, subject in enumerate(subjects):
            out.append(
                {
                    "id": f"{kind}-{n}",
                    "title": f"Graph Neural Networks for {subject.title()}",
                    "abstract": f"We apply graph neural networks to {subject} in {field}.",
                    "authors": [f"Author {kind} {n}"],
                    "venue": "X",
                    "year": 2023,
                }
            )
    return out


def _graph_member(tmp_path: Path) -> Engine:
    """An engine over the two kinds of graph papers and member U1 subscribed to "graph neural
    networks" (the topic both kinds match)."""
    engine = Engine.open(tmp_path / "g.db")
    engine.ingest([write_corpus(tmp_path / "graphs.jsonl", _two_kinds_of_graph_papers())])
    subscribe(engine, "U1", "graph neural networks")
    return engine


def test_topic_matches_more_like_the_disliked_papers_than_the_liked_ones_stop_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _graph_member(tmp_path)
    everything = set(select_digests(engine, ["U1"], limit=50)["U1"].paper_ids)
    assert {"chem-0", "chem-3", "social-2", "social-3", "social-4"} <= everything
    click(engine, "U1", "chem-4", "dislike")
    click(engine, "U1", "social-1", "like", 1)
    # The other chemistry papers are nearer the 👎-ed one than the 👍-ed one (none is a
    # near-duplicate of it): they stop coming; the social ones still come.
    chem_docs = taste._docs_of_papers(engine, engine.index, ["chem-0", "chem-4"])
    [[closeness]] = taste.cosines(
        taste.unit_vectors(engine.index, [chem_docs["chem-0"]]),
        taste.unit_vectors(engine.index, [chem_docs["chem-4"]]),
    )
    assert closeness < taste.NEAR_DISLIKED
    plan = set(select_digests(engine, ["U1"], limit=50)["U1"].paper_ids)
    assert not {"chem-0", "chem-3"} & plan
    assert {"social-2", "social-3", "social-4"} <= plan
    # That is the margin's doing: without it they come.
    monkeypatch.setattr(taste, "DISLIKE_MARGIN", -1.0)
    taste.forget()
    assert {"chem-0", "chem-3"} <= set(select_digests(engine, ["U1"], limit=50)["U1"].paper_ids)


# --- the classifier and the room for recommendations (issue 11, third pass) ---------------------


def test_the_classifier_finds_the_optimum_scikit_learn_finds() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(3)
    for clicks, terms in ((4, 30), (25, 400), (60, 900)):
        x = (rng.random((clicks, terms)) < 0.05) * rng.random((clicks, terms))
        x = (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)).astype(np.float32)
        y = (rng.random(clicks) < 0.3).astype(float)
        y[:2] = (1, 0)
        reference = LogisticRegression(C=1.0, class_weight="balanced", tol=1e-10, max_iter=5000)
        reference.fit(x, y)
        coef, intercept = taste.logistic_regression(x, y, 1.0)
        assert np.allclose(coef, reference.coef_.ravel(), atol=1e-4)
        assert intercept == pytest.approx(float(reference.intercept_[0]), abs=1e-4)


def test_the_classifier_ranks_papers_like_the_liked_ones_above_those_like_the_disliked(
    tmp_path: Path,
) -> None:
    engine = _graph_member(tmp_path)
    click(engine, "U1", "chem-4", "dislike")
    click(engine, "U1", "social-1", "like", 1)
    model = taste.taste_of(engine, "U1", ["graph neural networks"])
    assert model is not None
    docs = taste._docs_of_papers(engine, engine.index, ["chem-0", "chem-3", "social-2", "social-4"])
    chem0, chem3, social2, social4 = model.like_probability(
        engine.index, np.asarray([docs[p] for p in ("chem-0", "chem-3", "social-2", "social-4")])
    )
    assert min(social2, social4) > max(chem0, chem3)
    # Only 👍 so far: no classifier (nothing to tell apart), and digests do without it.
    subscribe(engine, "U2", "graph neural networks")
    click(engine, "U2", "social-1", "like")
    only_likes = taste.taste_of(engine, "U2", ["graph neural networks"])
    assert only_likes is not None
    assert only_likes.like_probability(engine.index, np.asarray([docs["chem-0"]])) is None


def test_topic_matches_the_classifier_expects_a_dislike_for_stop_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _graph_member(tmp_path)
    for n, paper in enumerate(("chem-4", "chem-1", "chem-2")):
        click(engine, "U1", paper, "dislike", n)
    for n, paper in enumerate(("social-1", "social-0", "social-3")):
        click(engine, "U1", paper, "like", 5 + n)
    monkeypatch.setattr(taste, "DISLIKE_MARGIN", -1.0)  # the classifier alone
    # Six clicks on ten one-sentence papers: a classifier as sure as a member's dozens of
    # clicks on real abstracts make it (with C=1 its probabilities here stay near 0.5), and
    # "less likely than not" as the bar.
    monkeypatch.setattr(taste, "CLASSIFIER_C", 30.0)
    monkeypatch.setattr(selection, "TOPIC_MIN_PROBABILITY", 0.5)
    plan = set(select_digests(engine, ["U1"], limit=50)["U1"].paper_ids)
    assert not {"chem-0", "chem-3"} & plan
    assert {"social-2", "social-4"} <= plan
    monkeypatch.setattr(selection, "TOPIC_MIN_PROBABILITY", 0.0)
    assert {"chem-0", "chem-3"} <= set(select_digests(engine, ["U1"], limit=50)["U1"].paper_ids)


def test_room_for_recommendations_grows_after_liked_ones_and_shrinks_after_disliked_ones(
    engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three 👍 outside the topics (2 of 3 is enough): recommendations fill the room the
    # topics leave (a narrow topic: two papers).
    subscribe(engine, "U1", '"sampling steps"')
    for n, paper in enumerate(("protein-0", "protein-1", "protein-4")):
        click(engine, "U1", paper, "like", n)
    grown = select_digests(engine, ["U1"])["U1"]
    assert len(recommended_ids(grown)) > selection.RECOMMEND_FILL
    assert grown.size <= 10
    with monkeypatch.context() as patch:
        patch.setattr(selection, "RECOMMEND_MORE_HIT", 2.0)
        usual = recommended_ids(select_digests(engine, ["U1"])["U1"])
        assert len(usual) == selection.RECOMMEND_FILL
    # One 👍 outside the topics and many 👎: no more guesses.
    subscribe(engine, "U2", "diffusion models")
    click(engine, "U2", "protein-0", "like")
    assert len(recommended_ids(select_digests(engine, ["U2"])["U2"])) == selection.RECOMMEND_FILL
    others = [f"{theme}-{n}" for theme in ("rl", "federated") for n in range(7)]
    for n, paper in enumerate(others[:12]):
        click(engine, "U2", paper, "dislike", n + 1)
    assert recommended_ids(select_digests(engine, ["U2"])["U2"]) == []
    # That is the rule's doing: without it the same member gets the usual few.
    monkeypatch.setattr(selection, "RECOMMEND_MIN_HIT", 0.0)
    assert len(recommended_ids(select_digests(engine, ["U2"])["U2"])) == selection.RECOMMEND_FILL
