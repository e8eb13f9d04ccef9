"""The answers to lookups: a page of results (``/papers <query>``, "More"), similar papers,
a paper shared in a channel. Each paper is :func:`paper_blocks` (the digest shows the same).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement, DividerBlock

from bot.engine.latex import readable, readable_pieces
from bot.engine.search import Hit, SearchResult, make_snippet
from bot.english import noun_for

from .blocks import MAX_BLOCKS, MAX_SECTION_TEXT, as_message, button, context, encode_value, section
from .escaping import (
    clip_escaped,
    escape_plain,
    link,
    mention,
    one_line,
    plain_title,
    short_authors,
    snippet_mrkdwn,
)
from .feedback import feedback_buttons
from .notices import error_message

PAGE_SIZE = 5
# Budgets inside one result's section (escaped characters); the snippet gets the rest.
TITLE_CHARS = 300
META_CHARS = 300
QUERY_SHOWN_CHARS = 200
COMMENT_QUOTED = 1400  # escaped characters of a share's comment shown (all, unless full of & < >)

# Action ids: one per button in a message, so a listener can tell which result was clicked.
ACTION_MORE = "more"
ACTION_PREVIOUS = "previous"
ACTION_SIMILAR = "similar"  # similar:<n>
ACTION_SHARE = "share"  # share:<n>
ACTION_SHARE_ELSEWHERE = "share_elsewhere"  # share_elsewhere:<n>: always the channel picker
ACTION_SUGGEST = "suggest"  # suggest:<n>


def paper_title(paper: dict[str, Any]) -> str:
    """The title in bold, linked to the paper when it has a URL, derived titles marked."""
    title = clip_escaped(readable(paper.get("title") or paper.get("id") or "Untitled"), TITLE_CHARS)
    text = f"*{link(paper.get('url') or '', title)}*"
    if paper.get("title_derived"):
        text += " _(title derived from abstract)_"
    return text


def paper_meta(paper: dict[str, Any]) -> str:
    """``ICLR 2025 · A, B, C et al.`` (escaped), or ``""`` when nothing is known."""
    venue = one_line(f"{paper.get('venue') or ''} {paper.get('year') or ''}")
    authors = short_authors(paper.get("authors") or [])
    return clip_escaped(" · ".join(x for x in (venue, authors) if x), META_CHARS)


def paper_blocks(
    hit: Hit,
    *,
    index: int,
    share: bool = True,
    similar: bool = True,
    numbered: bool = True,
    share_elsewhere: bool = False,
    feedback: bool = True,
) -> list[Block]:
    """One result: a section (title, venue/year/authors, snippet), a context line (why it
    matched, score, id) and the buttons. ``index`` numbers the result (unless not
    ``numbered``) and makes its action ids (``similar:<index>``, ``share:<index>``) unique in
    the message: give each result of one message a different index.

    ``share_elsewhere`` (with ``share``): for a message that is already visible in a channel
    (a digest posted there), where sharing into the same channel would only repeat it, the
    button is "Share elsewhere", which always opens the channel picker.

    ``feedback``: the 👍, 👎 and Save buttons (``like:<index>`` ...; ``render.feedback``)."""
    text, facts = paper_texts(hit, index=index, numbered=numbered)
    blocks: list[Block] = [section(text), context(facts)]
    buttons = paper_buttons(
        str(hit.paper["id"]),
        index,
        share=share,
        similar=similar,
        share_elsewhere=share_elsewhere,
        feedback=feedback,
    )
    if buttons:
        blocks.append(ActionsBlock(elements=buttons))
    return blocks


def lead(paper: dict[str, Any], score: float = 0.0) -> Hit:
    """A paper shown without a query (the reading list, recommendations): the start of its
    abstract as the snippet, as long as a lookup's, not the whole abstract."""
    return Hit(paper=paper, score=score, snippet=make_snippet(paper.get("abstract") or "", set()))


def paper_texts(
    hit: Hit, *, index: int, numbered: bool = True, memo: dict[Any, Any] | None = None
) -> tuple[str, str]:
    """The two texts of :func:`paper_blocks`: its section (title, venue/year/authors,
    snippet) and its context line (why it matched, score, id), escaped mrkdwn.

    ``memo``: a dict kept across many calls (the digest batch, ``DigestRenderer``), where
    what depends only on the paper (its escaped title, venue, authors and id, by its id) or
    on one matched term (by the term) is kept: escaped once, not once per digest that shows
    it. Forget it when papers change."""
    paper = hit.paper
    if memo is None:
        title, meta, shown_id = _paper_parts(paper)
    else:
        key = ("paper", paper.get("id"))  # a tuple: never a term's key
        known = memo.get(key)
        if known is None:
            known = memo[key] = _paper_parts(paper)
        title, meta, shown_id = known
    head = f"{index}. {title}" if numbered else title
    lines = [head] + ([meta] if meta else [])
    used = sum(len(line) + 1 for line in lines)
    pieces = readable_pieces(hit.snippet or [(paper.get("abstract") or "", False)])
    snippet = snippet_mrkdwn(pieces, MAX_SECTION_TEXT - used)
    if snippet:
        lines.append(snippet)

    facts = []
    if hit.why:
        if memo is None:
            matched = [_matched_term(t) for t in hit.why[:5]]
        else:
            matched = [memo.get(t) or memo.setdefault(t, _matched_term(t)) for t in hit.why[:5]]
        facts.append(f"matched {', '.join(matched)}")
    if hit.score:
        facts.append(f"score {hit.score:.3f}")
    facts.append(shown_id)
    return "\n".join(lines), " · ".join(facts)


def _paper_parts(paper: dict[str, Any]) -> tuple[str, str, str]:
    """A paper's title, venue and authors, and id as ``paper_texts`` shows them."""
    shown_id = f"id `{clip_escaped(paper.get('id') or '?', 120)}`"
    return paper_title(paper), paper_meta(paper), shown_id


def _matched_term(term: str) -> str:
    return f"*{clip_escaped(term, 60)}*"


def paper_buttons(
    paper_id: str,
    index: int,
    *,
    share: bool = True,
    similar: bool = True,
    share_elsewhere: bool = False,
    feedback: bool = True,
) -> list[ButtonElement]:
    """The buttons of :func:`paper_blocks`, each with ``paper_id`` as its value."""
    buttons = []
    if similar:
        buttons.append(button("Similar papers", f"{ACTION_SIMILAR}:{index}", paper_id))
    if share and share_elsewhere:
        action = f"{ACTION_SHARE_ELSEWHERE}:{index}"
        buttons.append(button("Share elsewhere", action, paper_id))
    elif share:
        buttons.append(button("Share to channel", f"{ACTION_SHARE}:{index}", paper_id))
    if feedback:
        buttons += feedback_buttons(paper_id, index)
    return buttons


def _hits_blocks(hits: Sequence[Hit], first_index: int, room: int, **flags: bool) -> list[Block]:
    """Results separated by dividers, as many as fit in ``room`` blocks."""
    blocks: list[Block] = []
    for n, hit in enumerate(hits, start=first_index):
        one = paper_blocks(hit, index=n, **flags)
        if len(blocks) + len(one) + 1 > room:
            break
        blocks.append(DividerBlock())
        blocks.extend(one)
    return blocks


def search_message(result: SearchResult, *, query: str) -> dict[str, Any]:
    """The answer to ``/papers <query>`` (and to "More"): a page of results with paging buttons,
    or a friendly explanation with suggestions when there is nothing to show."""
    shown_query = clip_escaped(query, QUERY_SHOWN_CHARS)
    if result.error:
        return error_message(result.error, hint=True)
    if not result.hits:
        return _no_results(result, shown_query)

    first = result.offset + 1
    last = result.offset + len(result.hits)
    noun = noun_for(result.total, "paper matches", "papers match")
    summary = f"*{result.total:,}* {noun} “{shown_query}”"
    if result.total > len(result.hits):
        summary += f" · showing {first}–{last}"
    blocks: list[Block] = [section(f":mag: {summary}")]
    if result.notices:
        blocks.append(context(*(escape_plain(n) for n in result.notices)))

    nav = []
    if result.offset > 0:
        back = max(result.offset - PAGE_SIZE, 0)
        nav.append(button("Previous", ACTION_PREVIOUS, encode_value({"q": query, "o": back})))
    if result.has_more:
        nav.append(
            button("More results", ACTION_MORE, encode_value({"q": query, "o": last}), "primary")
        )
    room = MAX_BLOCKS - len(blocks) - (1 if nav else 0)
    blocks += _hits_blocks(result.hits, first, room)
    if nav:
        blocks.append(ActionsBlock(elements=nav))
    return as_message(f"{result.total:,} {noun} “{shown_query}”", blocks)


def _no_results(result: SearchResult, shown_query: str) -> dict[str, Any]:
    blocks: list[Block] = [section(f":shrug: No papers match “{shown_query}”.")]
    if result.notices:  # why: a word no paper has, the years there are, no authors at all
        blocks.append(context(*(escape_plain(n) for n in result.notices)))
    if result.suggestions:
        blocks.append(section("Did you mean one of these?"))
        buttons = [
            button(f"Try: {s}", f"{ACTION_SUGGEST}:{n}", encode_value({"q": s, "o": 0}))
            for n, s in enumerate(result.suggestions[:5], start=1)
        ]
        blocks.append(ActionsBlock(elements=buttons))
    blocks.append(
        context(
            "Tips: use fewer or more general words, check the spelling, drop a filter "
            "(`venue:`, `year:`, `author:`). `/papers help` shows the whole query language."
        )
    )
    text = f"No papers match “{shown_query}”."
    if result.notices:
        text += " " + " ".join(escape_plain(n) for n in result.notices)
    if result.suggestions:
        text += " Try: " + "; ".join(escape_plain(s) for s in result.suggestions[:5])
    return as_message(text, blocks)


def similar_message(result: SearchResult, *, paper: dict[str, Any] | None) -> dict[str, Any]:
    """The answer to "Similar papers": the papers most like ``paper``."""
    if result.error:
        return error_message(result.error)
    title = paper_title(paper) if paper else "this paper"
    if not result.hits:
        return as_message(
            "No similar papers found.", [section(f":shrug: No papers are similar to {title}.")]
        )
    blocks: list[Block] = [section(f":books: Papers similar to {title}")]
    blocks += _hits_blocks(result.hits, 1, MAX_BLOCKS - 1)
    plain = plain_title(paper) if paper else "this paper"
    return as_message(f"Papers similar to {plain}", blocks)


def shared_message(paper: dict[str, Any], *, user_id: str, comment: str = "") -> dict[str, Any]:
    """A paper posted to a channel by "Share to channel", naming who shared it, with their
    comment (escaped like everything else: a comment cannot ping or link either)."""
    who = mention(user_id)
    blocks: list[Block] = [context(f":mega: {who} shared a paper")]
    # The comment as a quote, "> " before each non-blank line (escaped, a comment cannot start
    # quotes of its own). At most COMMENT_QUOTED escaped characters, so with the "> "s
    # (a line is at least 2 characters with its newline) it stays under 3000.
    lines = "\n".join(line.strip() for line in comment.splitlines() if line.strip())
    note = clip_escaped(lines, COMMENT_QUOTED, lines=True)
    if note:
        blocks.append(section("\n".join(f"> {line}" for line in note.splitlines())))
    hit = Hit(paper=paper, score=0.0)
    blocks += paper_blocks(hit, index=1, share=False, similar=True, numbered=False)
    title = plain_title(paper)
    text = f"{who} shared a paper: {title}"
    if note:
        text += f" · “{clip_escaped(comment, 300)}”"
    return as_message(text, blocks)
