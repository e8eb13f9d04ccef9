"""Block Kit rendering: Slack's limits hold for any paper or query, and nothing can ping."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from bot.engine.search import Hit, SearchResult
from bot.playground.fake_slack import validate_blocks
from bot.slack import render
from tests.slack_harness import assert_valid, blocks_text, buttons

REPO = Path(__file__).resolve().parents[1]


def paper(**fields: Any) -> dict[str, Any]:
    base = {
        "id": "iclr2025-abc",
        "title": "Score-based generative models",
        "title_derived": False,
        "abstract": "We study diffusion models for images.",
        "venue": "ICLR",
        "year": 2025,
        "authors": ["Ada Lovelace", "Alan Turing"],
        "keywords": [],
        "url": "https://openreview.net/forum?id=abc",
        "added_at": "2025-01-01T00:00:00+00:00",
    }
    return {**base, **fields}


def hit(**fields: Any) -> Hit:
    snippet = fields.pop(
        "snippet", [("We study ", False), ("diffusion", True), (" models.", False)]
    )
    why = fields.pop("why", ["diffusion"])
    return Hit(paper=paper(**fields), score=0.4321, snippet=snippet, why=why)


def result(
    hits: list[Hit], total: int | None = None, offset: int = 0, **fields: Any
) -> SearchResult:
    return SearchResult(
        query="q", hits=hits, total=len(hits) if total is None else total, offset=offset, **fields
    )


def section_texts(blocks: list[dict[str, Any]]) -> list[str]:
    return [b["text"]["text"] for b in blocks if b["type"] == "section"]


# --- escaping ---------------------------------------------------------------------------------


def test_escape_makes_mentions_and_links_inert() -> None:
    text = render.escape("<!channel> <@U123> <https://evil.example|click> a & b")
    assert "<" not in text and ">" not in text
    assert text == ("&lt;!channel&gt; &lt;@U123&gt; &lt;https://evil.example|click&gt; a &amp; b")


def test_bare_broadcast_words_cannot_ping() -> None:
    text = render.escape("ping @channel, @Here and @everyone; not @channels or a@b")
    assert "@channel," not in text and "@Here" not in text and "@everyone" not in text
    assert text.replace("\u2060", "") == "ping @channel, @Here and @everyone; not @channels or a@b"
    message = render.shared_message(paper(title="Hello @here"), user_id="U1")
    # Slack must not auto-parse mentions or links in paper text: every mrkdwn is verbatim.
    texts = [b["text"] for b in message["blocks"] if "text" in b]
    texts += [e for b in message["blocks"] for e in b.get("elements", []) if e["type"] == "mrkdwn"]
    assert texts and all(t.get("verbatim") is True for t in texts if t["type"] == "mrkdwn")
    assert "@here" not in json.dumps(message, ensure_ascii=False)


def test_title_link_is_escaped_and_url_cannot_end_early() -> None:
    blocks = [
        b.to_dict()
        for b in render.paper_blocks(
            hit(title="A <b> & <!here> title", url="https://x.org/p?a=1&b=2|x>y"), index=1
        )
    ]
    first = blocks[0]["text"]["text"]
    assert first.startswith(
        "1. *<https://x.org/p?a=1&amp;b=2%7Cx%3Ey|A &lt;b&gt; &amp; &lt;!here&gt; title>*"
    )
    assert "<!here>" not in json.dumps(blocks)


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "<!channel>", "ftp://x.org/a", "", "https://"]
)
def test_only_http_urls_become_links(url: str) -> None:
    text = render.paper_blocks(hit(url=url), index=1)[0].to_dict()["text"]["text"]
    assert text.startswith("1. *Score-based generative models*")
    assert "<" not in text


def test_snippet_bolds_matched_terms_and_escapes_every_piece() -> None:
    snippet = [("a <x> ", False), ("<!channel>", True), (" & ", False), ("diffusion", True)]
    text = render.paper_blocks(hit(snippet=snippet), index=1)[0].to_dict()["text"]["text"]
    assert text.endswith("a &lt;x&gt; *&lt;!channel&gt;* &amp; *diffusion*")


# --- markup in corpus and user text ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*EngageNet* and **cross**", "\u2217EngageNet\u2217 and \u2217\u2217cross\u2217\u2217"),
        ("~10% `code`", "\u223c10% \u02cbcode\u02cb"),
        ("_italic_ and __init__", "\u02cditalic\u02cd and \u02cd\u02cdinit\u02cd\u02cd"),
        ("x_i, snake_case, L_0", "x_i, snake_case, L_0"),  # inside a word: never italics
        ("\uff0abold\uff0a \uff3fit\uff3f", "\ufe61bold\ufe61 \u2e0fit\u2e0f"),
        (":fire: at 10:30:45 :+1:", ":\u2060fire: at 10:30:45 :\u2060+1:"),
        ("> not a quote", "\u00ad&gt; not a quote"),
        ("<!channel> & @here", "&lt;!channel&gt; &amp; @\u2060here"),
    ],
)
def test_escape_plain_leaves_no_markup_slack_would_read(text: str, expected: str) -> None:
    assert render.escape_plain(text) == expected


def test_corpus_markdown_cannot_bold_or_nest_in_a_snippet() -> None:
    from bot.engine.search import make_snippet

    abstract = "*Large language models* (LLMs) and **cross capabilities**, *i.i.d.* data."
    pieces = make_snippet(abstract, {"model"})
    text = render.paper_blocks(hit(snippet=pieces), index=1)[0].to_dict()["text"]["text"]
    snippet = text.split("\n")[-1]
    # The one bold run is the matched word; the abstract's own stars are lookalikes.
    assert re.findall(r"\*[^*]*\*", snippet) == ["*models*"]
    assert snippet.count("*") == 2
    assert "Large language *models*\u2217 (LLMs) and \u2217\u2217cross" in snippet


def test_titles_authors_queries_and_topics_cannot_format() -> None:
    blocks = [
        b.to_dict()
        for b in render.paper_blocks(
            hit(title="The *Best* ~model~", authors=["_Ann_ Lee"], id="p`1"), index=1
        )
    ]
    first, facts = blocks[0]["text"]["text"], blocks[1]["elements"][0]["text"]
    assert "The \u2217Best\u2217 \u223cmodel\u223c" in first and "\u02cdAnn\u02cd Lee" in first
    assert "id `p\u02cb1`" in facts
    message = render.search_message(result([hit()]), query="*diffusion* ~x~")
    assert "“\u2217diffusion\u2217 \u223cx\u223c”" in message["blocks"][0]["text"]["text"]
    shared = render.shared_message(paper(), user_id="U1", comment="*really* good")
    assert "> \u2217really\u2217 good" in blocks_text(shared)


def test_paperboys_own_sentences_keep_their_markup() -> None:
    text = render.error_message("Try `year:2025` instead.")["blocks"][0]["text"]["text"]
    assert text == ":warning: Try `year:2025` instead."


def test_derived_title_is_marked_and_meta_line_is_short() -> None:
    authors = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra"]
    text = render.paper_blocks(hit(title_derived=True, authors=authors), index=3)[0].to_dict()
    lines = text["text"]["text"].split("\n")
    assert "_(title derived from abstract)_" in lines[0]
    assert lines[1] == "ICLR 2025 · Ada Lovelace, Alan Turing, Grace Hopper et al."


def test_short_authors() -> None:
    assert render.short_authors(["A", "B", "C"]) == "A, B, C"
    assert render.short_authors(["A", "B", "C", "D"]) == "A, B, C et al."
    assert render.short_authors([]) == ""


def test_context_says_why_and_score_and_buttons_carry_the_id() -> None:
    blocks = [b.to_dict() for b in render.paper_blocks(hit(why=["diffusion", "image"]), index=2)]
    assert blocks[1]["type"] == "context"
    assert blocks[1]["elements"][0]["text"] == (
        "matched *diffusion*, *image* · score 0.432 · id `iclr2025-abc`"
    )
    found = buttons({"blocks": blocks})
    assert set(found) == {"similar:2", "share:2", "like:2", "dislike:2", "save:2"}
    assert {b["value"] for b in found.values()} == {"iclr2025-abc"}
    no_share = render.paper_blocks(hit(), index=1, share=False, similar=False, feedback=False)
    assert [b.type for b in no_share] == ["section", "context"]


# --- limits -----------------------------------------------------------------------------------


def test_huge_paper_stays_within_slack_limits() -> None:
    word = "transformers & <attention> "
    huge = hit(
        title=word * 400,
        abstract=word * 5000,
        snippet=[(word * 100, False), ("attention", True)] * 100,
        authors=[f"Author Number{i} With A Long Name" * 3 for i in range(500)],
        venue="V" * 500,
        why=["w" * 500] * 20,
        id="x" * 300,
        url="https://example.org/" + "a" * 5000,
    )
    blocks = [b.to_dict() for b in render.paper_blocks(huge, index=1)]
    assert not validate_blocks(blocks)
    text = blocks[0]["text"]["text"]
    assert len(text) <= render.MAX_SECTION_TEXT
    assert text.endswith("…")
    assert "&lt;attention&gt;" in text and "<attention>" not in text
    assert "&am…" not in text  # never cut inside an entity
    for value in (b["value"] for b in buttons({"blocks": blocks}).values()):
        assert len(value) <= render.MAX_BUTTON_VALUE


def test_abstract_without_snippet_is_cut_at_a_word_boundary() -> None:
    long = hit(snippet=[], abstract="lorem ipsum " * 1000)
    text = render.paper_blocks(long, index=1)[0].to_dict()["text"]["text"]
    assert len(text) <= render.MAX_SECTION_TEXT
    assert text.endswith("ipsum…") or text.endswith("lorem…")


def test_clip() -> None:
    assert render.clip("short", 10) == "short"
    assert render.clip("alpha beta gamma delta", 15) == "alpha beta…"
    assert render.clip("x" * 50, 10) == "x" * 9 + "…"
    assert len(render.clip("word " * 100, 75)) <= 75


def test_search_message_never_exceeds_fifty_blocks_and_ids_are_unique() -> None:
    hits = [hit(id=f"p{i}") for i in range(30)]
    message = render.search_message(result(hits, total=100), query="diffusion")
    assert_valid(message)
    assert len(message["blocks"]) <= render.MAX_BLOCKS
    assert "more" in buttons(message)


def test_paging_buttons_carry_query_and_offset() -> None:
    message = render.search_message(
        result([hit(id=f"p{i}") for i in range(5)], total=20, offset=5), query="diffusion models"
    )
    found = buttons(message)
    assert render.decode_value(found["more"]["value"]) == {"q": "diffusion models", "o": 10}
    assert render.decode_value(found["previous"]["value"]) == {"q": "diffusion models", "o": 0}
    assert "showing 6–10" in blocks_text(message)
    assert set(found) >= {f"similar:{n}" for n in range(6, 11)}


def test_button_value_fits_for_any_query() -> None:
    value = render.encode_value({"q": 'é"\\' * 3000, "o": 5})
    assert len(value) <= render.MAX_BUTTON_VALUE
    data = render.decode_value(value)
    assert data["o"] == 5 and ('é"\\' * 3000).startswith(data["q"])
    assert render.decode_value("not json") == {} and render.decode_value("[1]") == {}


def test_query_is_escaped_and_cut_in_the_summary() -> None:
    message = render.search_message(result([hit()]), query="<!channel> " + "x" * 3000)
    assert_valid(message)
    assert "<!channel>" not in json.dumps(message)
    assert "&lt;!channel&gt;" in message["text"]


def test_no_results_shows_suggestions_as_buttons() -> None:
    long = "a very long suggestion " * 20
    message = render.search_message(result([], suggestions=["diffusion", long]), query="difusion")
    assert_valid(message)
    found = buttons(message)
    assert render.decode_value(found["suggest:1"]["value"]) == {"q": "diffusion", "o": 0}
    assert found["suggest:1"]["text"]["text"] == "Try: diffusion"
    assert len(found["suggest:2"]["text"]["text"]) <= render.MAX_BUTTON_LABEL
    assert "No papers match “difusion”" in message["text"]


def test_errors_are_shown_kindly_and_escaped() -> None:
    message = render.search_message(result([], error="No venue `<!channel>` here."), query="x")
    assert_valid(message)
    assert ":warning: No venue `&lt;!channel&gt;` here." in blocks_text(message)


def test_many_notices_fit_a_context_block() -> None:
    message = render.search_message(
        result([hit()], notices=[f"n{i}" for i in range(30)]), query="q"
    )
    assert_valid(message)


def test_help_lists_every_subcommand() -> None:
    message = render.help_message()
    assert_valid(message)
    text = blocks_text(message)
    for expected in (
        "/papers diffusion models",
        "venue:ICLR",
        "year:2024-2025",
        "author:",
        "/papers subscribe <topic>",
        "/papers unsubscribe <topic or number>",
        "/papers topics",
        "/papers digest on",
        "/papers digest off",
        "/papers digest time 08:30",
        "/papers digest days mon-fri",
        "/papers digest preview",
        "/papers digest now",
    ):
        assert expected.replace("<", "&lt;").replace(">", "&gt;") in text or expected in text, (
            expected
        )


def test_shared_and_similar_messages_are_valid() -> None:
    shared = render.shared_message(paper(), user_id="U123")
    assert_valid(shared)
    assert shared["text"].startswith("<@U123> shared a paper")
    assert "share:1" not in buttons(shared) and "similar:1" in buttons(shared)
    assert render.shared_message(paper(), user_id="<!channel>")["text"].startswith("Someone")
    similar = render.similar_message(result([hit(id="p1"), hit(id="p2")]), paper=paper())
    assert_valid(similar)
    assert "Papers similar to" in similar["text"]
    assert_valid(render.similar_message(result([]), paper=None))
    assert_valid(render.apology_message())


# --- sharing: the picker and the shared message --------------------------------------------


def test_share_view_is_a_valid_modal_with_a_channel_picker() -> None:
    view = render.share_view(paper(title="<!here> " + "long title " * 100, id="p" * 300))
    assert view["type"] == "modal" and view["callback_id"] == render.SHARE_VIEW
    assert len(view["title"]["text"]) <= 24 and len(view["submit"]["text"]) <= 24
    assert not validate_blocks(view["blocks"], max_blocks=100)
    assert "<!here>" not in json.dumps(view)
    picker = view["blocks"][1]["element"]
    assert picker["type"] == "conversations_select"
    assert picker["default_to_current_conversation"] is False
    assert picker["filter"]["include"] == ["public", "private"]
    assert picker["filter"]["exclude_bot_users"] is True
    comment = view["blocks"][2]
    assert comment["optional"] is True
    assert comment["element"]["max_length"] == render.COMMENT_CHARS
    assert json.loads(view["private_metadata"]) == {"paper": "p" * 300}
    done = render.shared_view("C42")
    assert "Shared in <#C42>" in blocks_text(done) and "submit" not in done
    assert "<#" not in blocks_text(render.shared_view("<!channel>"))


@pytest.mark.parametrize(
    "comment",
    [
        "<" * 1000,
        "&\n" * 500,
        "\n\n\n".join(["a line"] * 250),
        "@channel <@U1> <!everyone> *bold* `code` ```pre```\n> quote",
    ],
    ids=["all-brackets", "short-lines", "many-lines", "markup"],
)
def test_shared_message_with_any_comment_stays_valid_and_inert(comment: str) -> None:
    message = render.shared_message(paper(), user_id="U7", comment=comment)
    assert_valid(message)
    quote = message["blocks"][1]["text"]
    assert len(quote["text"]) <= render.MAX_SECTION_TEXT and quote["verbatim"] is True
    assert all(line.startswith("> ") for line in quote["text"].split("\n"))
    assert "&am…" not in quote["text"]
    shown = json.dumps(message, ensure_ascii=False)
    for dangerous in ("<@U1>", "<!everyone>", "@channel"):
        assert dangerous not in shown
    assert len(message["text"]) <= render.MAX_FALLBACK_TEXT


def test_shared_message_shows_the_paper_unnumbered() -> None:
    message = render.shared_message(paper(), user_id="U7", comment="  \n ")
    assert [b["type"] for b in message["blocks"]] == ["context", "section", "context", "actions"]
    assert message["blocks"][1]["text"]["text"].startswith("*<https://openreview.net")


def test_sections_pack_lines_without_splitting_them() -> None:
    lines = [f"{n}. " + "&amp;" * 100 for n in range(40)]
    blocks = [b.to_dict() for b in render.sections(lines)]
    texts = [b["text"]["text"] for b in blocks]
    assert len(blocks) > 1 and all(len(t) <= render.MAX_SECTION_TEXT for t in texts)
    assert "\n".join(texts).split("\n") == lines
    assert render.sections([]) == []


def test_no_literal_angle_brackets_in_help() -> None:
    """Slack reads <...> in mrkdwn as a link or mention, so placeholders are escaped."""
    message = render.help_message()
    for text in [message["text"], blocks_text(message)]:
        assert "<topic>" not in text and "<keywords>" not in text
    assert "`/papers subscribe &lt;topic&gt;`" in blocks_text(message)


@pytest.mark.parametrize("text", ["<" * 1000, "a & b " * 300, "x" * 5000, "<&>" * 10])
@pytest.mark.parametrize("limit", [5, 100, 1400])
def test_clip_escaped_fits_and_keeps_as_much_as_it_can(text: str, limit: int) -> None:
    clipped = render.clip_escaped(text, limit)
    assert 0 < len(clipped) <= limit
    if limit >= 100:  # not cut to nothing (tiny limits may stop at a word boundary)
        assert len(clipped) >= limit * 0.6 or render.escape(text) == clipped
    assert render.unescape(clipped.rstrip("…")) in text


@pytest.mark.parametrize(
    "text",
    [
        "a &amp; b " * 500,
        "y" * 2980 + "<https://example.org/paper|a long title here>",
        "&lt;" * 900,
    ],
)
def test_fallback_text_is_cut_without_breaking_entities_or_links(text: str) -> None:
    message = render.as_message(text, [render.section("x")])
    cut = message["text"]
    assert len(cut) <= render.MAX_FALLBACK_TEXT and cut.endswith("…")
    assert re.search(r"&[a-z]{0,3}…$", cut) is None
    assert cut.rfind("<") <= cut.rfind(">")


# --- the playground draws every emoji the app uses --------------------------------------------


def _emoji_names_in_strings(root: Path) -> dict[str, str]:
    """``:name:`` codes in the string literals (f-strings included, docstrings not) of every
    module under ``root``, each with where it was first seen."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                for name in re.findall(
                    r"(?<![\w:]):([a-z0-9_+-]*[a-z][a-z0-9_+-]*):(?![\w:])", node.value
                ):
                    found.setdefault(name, f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_every_emoji_the_app_uses_is_in_the_playground_table() -> None:
    page = (REPO / "bot" / "playground" / "page.html").read_text(encoding="utf-8")
    table = re.search(r"const EMOJI = \{(.*?)\};", page, re.DOTALL)
    assert table, "page.html has no EMOJI table"
    drawn = set(re.findall(r"([a-z0-9_]+|\"[^\"]+\"):\s*\"", table[1]))
    drawn = {name.strip('"') for name in drawn}
    used = {**_emoji_names_in_strings(REPO / "bot"), **_emoji_names_in_strings(REPO / "digest")}
    assert {"label", "incoming_envelope", "warning", "mag"} <= set(used)  # the scan works
    missing = {name: where for name, where in used.items() if name not in drawn}
    assert not missing, f"add these to EMOJI in bot/playground/page.html: {missing}"


def test_slack_and_the_command_line_help_come_from_one_list() -> None:
    """``/papers help`` and ``paperboy search --help`` both show every query example, and
    the digest's usage line every digest subcommand (``bot/help_text.py``)."""
    from click.testing import CliRunner

    from bot.cli import main
    from bot.help_text import DIGEST_COMMANDS, QUERY_EXAMPLES, TOPIC_COMMANDS

    cli = CliRunner().invoke(main, ["search", "--help"]).output
    slack = blocks_text(render.help_message())
    for usage in QUERY_EXAMPLES:
        assert usage.args in cli and f"`/papers {usage.args}`" in slack, usage
    for usage in TOPIC_COMMANDS + DIGEST_COMMANDS:
        assert f"`/papers {render.escape(usage.args)}`" in slack, usage
    for usage in DIGEST_COMMANDS:
        assert f"`/papers {usage.args}`" in render.DIGEST_USAGE, usage


def test_a_click_asks_for_what_its_button_showed() -> None:
    """ "👍 Liked" (however Slack spells the emoji back) undoes; "👍" likes; so does a
    button without a label."""

    def shown(action_id: str, label: str | None, style: str | None = None) -> bool:
        action = {"action_id": action_id, "value": "p1"}
        if label is not None:
            action["text"] = {"type": "plain_text", "text": label}
        if style:
            action["style"] = style
        return render.shown_chosen(action)

    assert shown("like:1", "👍 Liked") and shown("like:3", ":+1: Liked")
    assert shown("dislike:1", ":-1: Disliked") and shown("save:2", "✓ Saved")
    assert shown("save:1", "Save", style="primary")
    assert not shown("like:1", "👍") and not shown("like:1", ":+1:")
    assert not shown("dislike:1", "👎") and not shown("save:1", "Save")
    assert not shown("like:1", None) and not shown("like:1", "👍 Disliked")


def test_fewer_recommendations_than_asked_for_say_why() -> None:
    paper = {"id": "p1", "title": "A paper", "abstract": "Words about diffusion."}
    few = render.recommend_message([(paper, 2, "Liked one", 0.5)], likes=2, dislikes=0, wanted=5)
    assert_valid(few)
    assert "Only 1 paper like the ones you 👍" in blocks_text(few)
    full = render.recommend_message([(paper, 2, "Liked one", 0.5)], likes=2, dislikes=0, wanted=1)
    assert "finds more" not in blocks_text(full)


def test_the_reading_list_and_recommendations_show_an_abstracts_start_not_all_of_it() -> None:
    abstract = " ".join(f"word{n}" for n in range(200))  # fits a section whole
    paper = {"id": "p1", "title": "A long paper", "abstract": abstract}
    for message in (
        render.saved_message([paper], total=1, offset=0, choices={}),
        render.recommend_message([(paper, 1, "Liked", 0.4)], likes=1, dislikes=0),
    ):
        assert_valid(message)
        text = blocks_text(message)
        assert "word0 word1" in text and "word199" not in text and "…" in text
