"""What the digest batch's renderer shares between digests so each costs less, and that the
sharing never changes a message: an abstract's words read once for all the terms a paper is
shown with (and let go after its last snippet), a paper's title, venue, authors and id and
each matched term escaped once (``render.paper_texts``' memo), the escaping's patterns run
only on text that holds their first character."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from bot.engine.search import Hit, make_snippet, snippet_words
from bot.slack import render
from bot.slack.render import digest as digest_render
from bot.slack.render import escaping
from bot.slack.render.digest import DigestRenderer, digest_message
from digest.plan import DigestPlan
from tests.test_digest_render_cache import engine, plans  # noqa: F401 - the fixture

PIECES = ["", "a", "_", "x_i", "_it_", ":", ":fire:", "10:30:45", "@", "@here", "@channel"]
PIECES += [">", "> q", "\n> q", "\uff1e", "*", "~", "`", "&", "<", ">x", "a\n", "\n", "&gt;"]


def escape_plain_every_pattern(text: str) -> str:
    """``escape_plain`` as it was: every pattern run on every text."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = escaping._BROADCAST.sub("@\u2060\\1", text).translate(escaping._LOOKALIKES)
    text = escaping._STRAY_UNDERSCORE.sub(escaping._LOW_MACRON, text)
    text = escaping._EMOJI_CODE.sub(":\u2060\\1:", text)
    return escaping._LEADING_QUOTE.sub("\u00ad", text)


@pytest.mark.parametrize("first", PIECES)
def test_escape_plain_is_the_same_when_patterns_are_skipped(first: str) -> None:
    for rest in itertools.product(PIECES, repeat=2):
        text = first + "".join(rest)
        assert escaping.escape_plain(text) == escape_plain_every_pattern(text), repr(text)


def test_a_snippet_from_words_read_before_is_the_snippet() -> None:
    text = "Graphs. " + " ".join(f"word{n} graph neural" for n in range(40)) + " end_"
    scanned = snippet_words(text)
    before = json.dumps(scanned)
    for terms in ({"graph"}, {"neural", "word7"}, {"end"}, set(), {"nothing"}):
        assert make_snippet(text, terms, scanned=scanned) == make_snippet(text, terms)
    assert json.dumps(scanned) == before  # shared by the calls: never changed


def test_paper_texts_with_a_memo_are_the_paper_texts(engine) -> None:  # noqa: F811
    paper = engine.paper("graph-0")
    memo: dict = {}
    for index, why in [(1, ["graph"]), (12, ["graph", "neural"]), (3, []), (1, ["graph"])]:
        snippet = make_snippet(paper["abstract"], set(why))
        hit = Hit(paper=paper, score=0.5 if why else 0.0, snippet=snippet, why=why)
        got = render.paper_texts(hit, index=index, memo=memo)
        assert got == render.paper_texts(hit, index=index)
    renamed = {**paper, "id": "graph-x", "title": "Another * title"}
    hit = Hit(paper=renamed, score=0.5, snippet=[], why=["graph"])
    assert render.paper_texts(hit, index=2, memo=memo) == render.paper_texts(hit, index=2)


def test_a_batch_reads_each_abstract_once_and_keeps_none_after(engine, monkeypatch) -> None:  # noqa: F811
    """``prepare`` gets the batch as the dispatcher gives it (a generator); a paper shown
    with other terms in other digests has its abstract's words read once, and they are let
    go after its last snippet; every message is still ``digest_message``'s."""
    read: Counter = Counter()

    def counted(text: str):
        read[text] += 1
        return snippet_words(text)

    monkeypatch.setattr(digest_render, "snippet_words", counted)
    batch = list(plans().values())
    shown = {i.paper_id for p in batch for s in p.sections for i in s.items}
    renderer = DigestRenderer(engine)
    renderer.prepare(plan for plan in batch)
    for plan in batch:
        message, kept = renderer.message(plan, "2024-03-04", digest_id="x")
        expected, expected_kept = digest_message(engine, plan, "2024-03-04", digest_id="x")
        assert json.dumps(message) == json.dumps(expected) and kept == expected_kept
    abstracts = {engine.paper(p)["abstract"] for p in shown if engine.paper(p)}
    assert set(read) == abstracts
    assert max(read.values()) == 1  # graph-0 is shown with two sets of terms
    assert not renderer._scanned and not renderer._scans_left


class _Recorder:
    """A Web API client that keeps what was posted."""

    base_url = "http://127.0.0.1:1/api/"

    def __init__(self) -> None:
        self.posted: list[dict] = []

    def chat_postMessage(self, **message):  # noqa: N802 - slack_sdk's name
        self.posted.append(message)
        return {"channel": message["channel"], "ts": f"1.{len(self.posted)}"}


def test_a_fitted_message_is_posted_only_for_the_very_plan_it_was_made_for(engine) -> None:  # noqa: F811
    """``SlackPoster.fit`` keeps each message for ``post_digest``; a plan with the same papers
    but anything else changed (a score, a why) is rendered afresh, not posted as fitted."""
    from bot.slack.poster import SlackPoster

    client = _Recorder()
    poster = SlackPoster(client, engine)  # type: ignore[arg-type]
    plan = plans()["first"]
    fitted = poster.fit(plan, "2024-03-04", owner=None)
    changed = DigestPlan.from_json(fitted.to_json())
    changed.sections[0].items[0].why = ["changed"]
    for sent in (fitted, changed, fitted):
        assert poster.fit(plan, "2024-03-04", owner=None) == fitted  # kept for post_digest
        poster.post_digest("D1", sent, "2024-03-04", digest_id="T:U1:x", owner=None)
        expected, _ = digest_message(engine, sent, "2024-03-04", digest_id="T:U1:x")
        del client.posted[-1]["channel"], client.posted[-1]["unfurl_links"]
        del client.posted[-1]["unfurl_media"]
        assert json.dumps(client.posted[-1]) == json.dumps(expected)
    assert "*changed*" in json.dumps(client.posted[1])


def test_the_fitted_message_is_posted_without_rendering_again(engine, monkeypatch) -> None:  # noqa: F811
    from bot.slack.poster import SlackPoster

    poster = SlackPoster(_Recorder(), engine)  # type: ignore[arg-type]
    rendered = []
    real = poster.renderer.message
    monkeypatch.setattr(
        poster.renderer, "message", lambda *a, **k: rendered.append(1) or real(*a, **k)
    )
    for plan in plans().values():
        fitted = poster.fit(plan, "2024-03-04", owner=None)
        if fitted.size:
            poster.post_digest("D1", fitted, "2024-03-04", digest_id="x", owner=None)
    assert len(rendered) == len(plans())


def test_words_kept_for_a_paper_are_used_only_for_the_text_they_were_read_from(engine) -> None:  # noqa: F811
    """Words left by a thread that rendered the paper as it was before the corpus changed
    are not used for its new text."""
    renderer = DigestRenderer(engine)
    renderer.prepare(plans().values())
    paper = engine.paper("graph-0")
    renderer._scanned["graph-0"] = (paper["abstract"], snippet_words(paper["abstract"]))
    changed = {**paper, "abstract": "Entirely new words about graph things."}
    expected = make_snippet(changed["abstract"], {"graph"})
    assert renderer.snippet(changed, ["graph"]) == expected
    assert renderer.snippet({**changed, "id": "graph-0"}, ["graph", "x"]) == make_snippet(
        changed["abstract"], {"graph", "x"}
    )
