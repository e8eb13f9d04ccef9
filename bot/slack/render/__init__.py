"""Engine results as Slack Block Kit messages: the one place that knows Slack's markup and limits.

Everything a paper or a query brings in is escaped (``&``, ``<``, ``>``), so no paper or query
can ping ``@channel``, mention someone or disguise a link, and its formatting characters are
made inert (``escape_plain``), so only Paperboy's own ``*bold*`` formats. Every message stays
inside Slack's limits (blocks per message, characters per section, button label and value, ...),
cutting long titles, author lists and abstracts at a word boundary with "…".

Messages are plain dicts ``{"text": ..., "blocks": [...]}`` that ``respond()``,
``chat.postMessage`` and ``chat.postEphemeral`` all accept; ``text`` is always set (it is what
notifications and screen readers show). The one modal, the "Share to channel" picker
(``share_view``), is a plain dict for ``views.open`` too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    ConversationFilter,
    ConversationSelectElement,
    DividerBlock,
    HeaderBlock,
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.engine.search import Hit, SearchResult
from bot.english import empty_corpus

# Slack's limits (https://docs.slack.dev/reference/block-kit/blocks).
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_BUTTON_LABEL = 75
MAX_HEADER = 150
MAX_BUTTON_VALUE = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_FALLBACK_TEXT = 3000  # Slack truncates far later (40k); a notification needs far less

PAGE_SIZE = 5
SHOWN_AUTHORS = 3
# Budgets inside one result's section (escaped characters); the snippet gets the rest.
TITLE_CHARS = 300
META_CHARS = 300
QUERY_SHOWN_CHARS = 200
MAX_URL_CHARS = 1000

# Action ids: one per button in a message, so a listener can tell which result was clicked.
ACTION_MORE = "more"
ACTION_PREVIOUS = "previous"
ACTION_SIMILAR = "similar"  # similar:<n>
ACTION_SHARE = "share"  # share:<n>
ACTION_SHARE_ELSEWHERE = "share_elsewhere"  # share_elsewhere:<n>: always the channel picker
ACTION_SUGGEST = "suggest"  # suggest:<n>

# The "Share to channel" picker (a modal), for clicks where there is no channel to share into.
SHARE_VIEW = "share_paper"  # the modal's callback_id
SHARE_CHANNEL_BLOCK, SHARE_CHANNEL_ACTION = "share_channel", "channel"
SHARE_COMMENT_BLOCK, SHARE_COMMENT_ACTION = "share_comment", "comment"
COMMENT_CHARS = 1000  # the comment box's max_length
COMMENT_QUOTED = 1400  # escaped characters of it shown (all of it, unless full of & < >)

_SPACES = re.compile(r"\s+")
_BROADCAST = re.compile(r"@(channel|here|everyone)\b", re.IGNORECASE)
_PARTIAL_ENTITY = re.compile(r"&[a-z]{0,3}$")
# Slack's mrkdwn has no escape for its formatting characters, so in text Paperboy did not
# write they become lookalikes Slack does not read as markup (the ones jsx-slack's <Escape>
# uses; Slack also reads the fullwidth forms as markup). An "_" between two letters or digits
# (snake_case, x_i) stays: Slack formats only at word boundaries, so it cannot open or close
# italics there.
_LOOKALIKES = str.maketrans(
    {
        "*": "\u2217",  # ∗ asterisk operator
        "\uff0a": "\ufe61",  # ＊ -> ﹡ small asterisk
        "~": "\u223c",  # ∼ tilde operator
        "`": "\u02cb",  # ˋ modifier letter grave accent
        "\uff40": "\u02cb",  # ｀
        "\uff3f": "\u2e0f",  # ＿ -> ⸏ paragraphos
    }
)
_STRAY_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_LOW_MACRON = "\u02cd"  # ˍ, for a stray "_"
_EMOJI_CODE = re.compile(r":(?=[a-z0-9_+-]*[a-z+])([a-z0-9_+-]+):")  # not "10:30:45"
_LEADING_QUOTE = re.compile(r"^(?=&gt;|\uff1e)", re.MULTILINE)


# --- text -------------------------------------------------------------------------------------


def escape(text: str) -> str:
    """Make text inert in mrkdwn: ``<!channel>``, ``<@U1>`` and ``<url|label>`` become plain
    text, and a bare ``@channel``/``@here``/``@everyone`` gets an invisible word joiner after
    the ``@`` so no client or setting can turn it into a broadcast."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCAST.sub("@\u2060\\1", text)


def escape_plain(text: str) -> str:
    """:func:`escape`, and Slack's formatting made inert: for text Paperboy did not write
    (titles, abstracts, authors, queries, topics, comments), so an abstract's ``*EngageNet*``
    is not bold like a matched word and cannot break the bold around one.

    ``*``, ``~`` and backticks become lookalikes (``∗``, ``∼``, ``ˋ``), an ``_`` that could
    open or close italics becomes ``ˍ``, ``:name:`` gets an invisible word joiner so it stays
    text instead of an emoji, and a line starting with ``>`` an invisible soft hyphen so it is
    not a quote.
    """
    text = escape(text).translate(_LOOKALIKES)
    text = _STRAY_UNDERSCORE.sub(_LOW_MACRON, text)
    text = _EMOJI_CODE.sub(":\u2060\\1:", text)
    return _LEADING_QUOTE.sub("\u00ad", text)


def unescape(text: str) -> str:
    """Undo Slack's escaping of ``&``, ``<``, ``>`` in text it sends (slash command text)."""
    return str(text).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def clip(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` cut to at most ``limit`` characters, at a word boundary when there is one."""
    text = str(text)
    if len(text) <= limit:
        return text
    if limit <= len(ellipsis):
        return text[:limit]
    cut = text[: limit - len(ellipsis)]
    space = cut.rfind(" ")
    if space >= len(cut) // 2:  # a boundary that keeps at least half of what fits
        cut = cut[:space]
    return cut.rstrip(" ,;:.-–—(") + ellipsis


def clip_escaped(text: str, limit: int, *, lines: bool = False, markup: bool = False) -> str:
    """Escape ``text`` (:func:`escape_plain`) and cut it so the *escaped* form fits in
    ``limit`` characters.

    Cutting after escaping could split ``&amp;`` in half, so the raw text is cut (shorter
    each round in proportion to how much the escaped form overflowed, since ``<`` grows
    fourfold) and escaped again. Whitespace is folded to single spaces unless ``lines``
    (then line breaks are kept). ``markup``: the text is Paperboy's own sentence, whose
    ``code`` and *bold* must still format (only :func:`escape`).
    """
    raw = str(text or "").strip() if lines else one_line(text)
    escape_text = escape if markup else escape_plain
    budget = limit
    escaped = escape_text(clip(raw, budget))
    while len(escaped) > limit and budget > 0:
        budget = min(budget - 1, budget * limit // len(escaped))
        escaped = escape_text(clip(raw, max(budget, 0)))
    return escaped


def one_line(text: str) -> str:
    return _SPACES.sub(" ", str(text or "")).strip()


def link(url: str, label: str) -> str:
    """``<url|label>`` for http(s) URLs (anything else is not linked), label escaped.

    ``|`` and ``>`` would end the URL part early, so they (and spaces, ``<``) are
    percent-encoded; ``&`` is escaped as Slack itself stores it.
    """
    url = (url or "").strip()
    if not re.match(r"^https?://[^\s]+$", url, re.IGNORECASE) or len(url) > MAX_URL_CHARS:
        return label
    safe = quote(url, safe="/:?#[]@!$&'()*+,;=%~.-_")
    return f"<{safe.replace('&', '&amp;')}|{label}>"


def short_authors(authors: Sequence[str], limit: int = SHOWN_AUTHORS) -> str:
    """``"A, B, C et al."`` (names cut at 60 characters each)."""
    names = [clip(one_line(a), 60) for a in authors if a and str(a).strip()]
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + " et al."


def snippet_mrkdwn(pieces: Iterable[tuple[str, bool]], limit: int) -> str:
    """The snippet with matched terms in *bold*, every piece escaped (:func:`escape_plain`:
    the abstract's own ``*`` cannot bold or unbalance anything), at most ``limit`` chars."""
    out: list[str] = []
    used = 0
    for text, matched in pieces:
        text = _SPACES.sub(" ", text)
        if not text:
            continue
        stripped = text.strip()
        piece = f"*{escape_plain(stripped)}*" if matched and stripped else escape_plain(text)
        if used + len(piece) > limit - 1:
            room = limit - used - 1
            if not matched and room > 20:
                out.append(clip_escaped(text, room))
            elif out and not out[-1].endswith("…"):
                out.append("…")
            break
        out.append(piece)
        used += len(piece)
    return "".join(out).strip()


# --- button values: the state a click carries back ----------------------------------------------


def encode_value(data: dict[str, Any]) -> str:
    """Compact JSON for a button ``value``; a query that would not fit is cut to fit."""
    value = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if len(value) <= MAX_BUTTON_VALUE or not isinstance(data.get("q"), str):
        return value[:MAX_BUTTON_VALUE]
    query = data["q"]
    while len(value) > MAX_BUTTON_VALUE and query:
        query = query[: len(query) - (len(value) - MAX_BUTTON_VALUE) - 1]
        value = json.dumps({**data, "q": query}, ensure_ascii=False, separators=(",", ":"))
    return value


def decode_value(value: str | None) -> dict[str, Any]:
    """The dict a button carried; ``{}`` for anything unreadable (old or forged payloads)."""
    try:
        data = json.loads(value or "")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _button(label: str, action_id: str, value: str, style: str | None = None) -> ButtonElement:
    return ButtonElement(
        text=PlainTextObject(text=clip(label, MAX_BUTTON_LABEL), emoji=True),
        action_id=action_id,
        value=value[:MAX_BUTTON_VALUE],
        style=style,
    )


def mrkdwn(text: str) -> MarkdownTextObject:
    """A mrkdwn text object; ``text`` must already be escaped (see :func:`escape`)."""
    # verbatim: Slack must not auto-link URLs or parse mentions in what papers and queries
    # contain; the links and mentions written here explicitly (<url|title>, <@U1>) still work.
    return MarkdownTextObject(text=text[:MAX_SECTION_TEXT], verbatim=True)


def section(text: str) -> SectionBlock:
    """A section of escaped mrkdwn (cut at Slack's 3000 characters)."""
    return SectionBlock(text=mrkdwn(text))


def context(*texts: str) -> ContextBlock:
    """A context line of escaped mrkdwn pieces (at most Slack's 10 elements)."""
    elements = [mrkdwn(t) for t in texts if t]
    return ContextBlock(elements=elements[:MAX_CONTEXT_ELEMENTS])


def sections(lines: Iterable[str], limit: int = MAX_SECTION_TEXT) -> list[SectionBlock]:
    """Escaped mrkdwn lines packed into as few sections as fit, each within ``limit``
    characters, never splitting a line (a line longer than ``limit`` is cut on its own)."""
    out: list[SectionBlock] = []
    chunk: list[str] = []
    used = 0
    for line in lines:
        if chunk and used + 1 + len(line) > limit:
            out.append(section("\n".join(chunk)))
            chunk, used = [], 0
        used += len(line) + (1 if chunk else 0)
        chunk.append(line)
    if chunk:
        out.append(section("\n".join(chunk)))
    return out


def clip_mrkdwn(text: str, limit: int) -> str:
    """Escaped mrkdwn cut to ``limit`` characters without leaving half an entity (``&am``)
    or an unclosed ``<link|label`` behind the cut."""
    cut = clip(text, limit)
    if cut == text:
        return text
    body = cut.removesuffix("…")
    body = _PARTIAL_ENTITY.sub("", body)
    if body.rfind("<") > body.rfind(">"):
        body = body[: body.rfind("<")]
    return body.rstrip() + "…"


def as_message(text: str, blocks: Sequence[Block]) -> dict[str, Any]:
    """``{"text", "blocks"}`` for respond()/chat.postMessage: fallback text set and cut,
    at most 50 blocks, each block validated by slack_sdk as it is serialised."""
    return {
        "text": clip_mrkdwn(text, MAX_FALLBACK_TEXT),
        "blocks": [b.to_dict() for b in list(blocks)[:MAX_BLOCKS]],
    }


# --- papers -----------------------------------------------------------------------------------


def paper_title(paper: dict[str, Any]) -> str:
    """The title in bold, linked to the paper when it has a URL, derived titles marked."""
    title = clip_escaped(paper.get("title") or paper.get("id") or "Untitled", TITLE_CHARS)
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
) -> list[Block]:
    """One result: a section (title, venue/year/authors, snippet), a context line (why it
    matched, score, id) and the buttons. ``index`` numbers the result (unless not
    ``numbered``) and makes its action ids (``similar:<index>``, ``share:<index>``) unique in
    the message: give each result of one message a different index.

    ``share_elsewhere`` (with ``share``): for a message that is already visible in a channel
    (a digest posted there), where sharing into the same channel would only repeat it, the
    button is "Share elsewhere", which always opens the channel picker."""
    paper = hit.paper
    head = f"{index}. {paper_title(paper)}" if numbered else paper_title(paper)
    meta = paper_meta(paper)
    lines = [head] + ([meta] if meta else [])
    used = sum(len(line) + 1 for line in lines)
    pieces = hit.snippet or ([(paper.get("abstract") or "", False)])
    snippet = snippet_mrkdwn(pieces, MAX_SECTION_TEXT - used)
    if snippet:
        lines.append(snippet)
    blocks: list[Block] = [section("\n".join(lines))]

    facts = []
    if hit.why:
        matched = ", ".join(f"*{clip_escaped(t, 60)}*" for t in hit.why[:5])
        facts.append(f"matched {matched}")
    if hit.score:
        facts.append(f"score {hit.score:.3f}")
    facts.append(f"id `{clip_escaped(paper.get('id') or '?', 120)}`")
    blocks.append(context(" · ".join(facts)))

    buttons = []
    if similar:
        buttons.append(_button("Similar papers", f"{ACTION_SIMILAR}:{index}", str(paper["id"])))
    if share and share_elsewhere:
        action = f"{ACTION_SHARE_ELSEWHERE}:{index}"
        buttons.append(_button("Share elsewhere", action, str(paper["id"])))
    elif share:
        buttons.append(_button("Share to channel", f"{ACTION_SHARE}:{index}", str(paper["id"])))
    if buttons:
        blocks.append(ActionsBlock(elements=buttons))
    return blocks


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


# --- messages ---------------------------------------------------------------------------------


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
    noun = "paper matches" if result.total == 1 else "papers match"
    summary = f"*{result.total:,}* {noun} “{shown_query}”"
    if result.total > len(result.hits):
        summary += f" · showing {first}–{last}"
    blocks: list[Block] = [section(f":mag: {summary}")]
    if result.notices:
        blocks.append(context(*(escape_plain(n) for n in result.notices)))

    nav = []
    if result.offset > 0:
        back = max(result.offset - PAGE_SIZE, 0)
        nav.append(_button("Previous", ACTION_PREVIOUS, encode_value({"q": query, "o": back})))
    if result.has_more:
        nav.append(
            _button("More results", ACTION_MORE, encode_value({"q": query, "o": last}), "primary")
        )
    room = MAX_BLOCKS - len(blocks) - (1 if nav else 0)
    blocks += _hits_blocks(result.hits, first, room)
    if nav:
        blocks.append(ActionsBlock(elements=nav))
    return as_message(f"{result.total:,} {noun} “{shown_query}”", blocks)


def _no_results(result: SearchResult, shown_query: str) -> dict[str, Any]:
    blocks: list[Block] = [section(f":shrug: No papers match “{shown_query}”.")]
    if result.suggestions:
        blocks.append(section("Did you mean one of these?"))
        buttons = [
            _button(f"Try: {s}", f"{ACTION_SUGGEST}:{n}", encode_value({"q": s, "o": 0}))
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
    if result.suggestions:
        text += " Try: " + "; ".join(escape_plain(s) for s in result.suggestions[:5])
    return as_message(text, blocks)


def empty_corpus_message() -> dict[str, Any]:
    """A lookup over a corpus with no papers: what to run (the CLI's sentence too)."""
    sentence = empty_corpus()
    return as_message(sentence, [section(f":inbox_tray: {escape(sentence)}")])


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
    plain = clip_escaped(paper.get("title") or "", 200) if paper else "this paper"
    return as_message(f"Papers similar to {plain}", blocks)


def mention(user_id: str, fallback: str = "Someone") -> str:
    """``<@U123>`` (Slack shows the member's name), or ``fallback`` for anything that is not
    a user id (so a forged id cannot inject markup)."""
    return f"<@{user_id}>" if re.fullmatch(r"[UW][A-Z0-9]{1,20}", user_id or "") else fallback


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
    title = clip_escaped(paper.get("title") or paper.get("id") or "", 200)
    text = f"{who} shared a paper: {title}"
    if note:
        text += f" · “{clip_escaped(comment, 300)}”"
    return as_message(text, blocks)


def share_view(paper: dict[str, Any]) -> dict[str, Any]:
    """The "Share to channel" modal: the paper, a channel picker and an optional comment.

    The picker offers public and private channels only (never DMs) and does not preselect
    the conversation the button sat in (a DM, or a channel that already shows the paper).
    The paper's id travels in ``private_metadata``, so the submission needs nothing stored.
    """
    meta = paper_meta(paper)
    picker = ConversationSelectElement(
        action_id=SHARE_CHANNEL_ACTION,
        placeholder=PlainTextObject(text="Pick a channel"),
        default_to_current_conversation=False,
        filter=ConversationFilter(include=["public", "private"], exclude_bot_users=True),
    )
    comment = PlainTextInputElement(
        action_id=SHARE_COMMENT_ACTION,
        multiline=True,
        max_length=COMMENT_CHARS,
        placeholder=PlainTextObject(text="Why is it worth reading? (optional)"),
    )
    blocks: list[Block] = [
        section(paper_title(paper) + (f"\n{meta}" if meta else "")),
        InputBlock(
            block_id=SHARE_CHANNEL_BLOCK, label=PlainTextObject(text="Share in"), element=picker
        ),
        InputBlock(
            block_id=SHARE_COMMENT_BLOCK,
            label=PlainTextObject(text="Comment"),
            element=comment,
            optional=True,
        ),
        context(
            "Everyone in the channel sees the paper and that you shared it. "
            "For a private channel, invite @Paperboy there first (`/invite @Paperboy`)."
        ),
    ]
    view = View(
        type="modal",
        callback_id=SHARE_VIEW,
        title=PlainTextObject(text="Share a paper"),
        submit=PlainTextObject(text="Share"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=json.dumps({"paper": str(paper.get("id") or "")[:2000]}),
        blocks=blocks,
    )
    return view.to_dict()


def shared_view(channel_id: str) -> dict[str, Any]:
    """What the modal turns into once the paper is posted: where it went, and a Done button."""
    where = f"<#{channel_id}>" if re.fullmatch(r"[CG][A-Z0-9]{1,20}", channel_id) else "the channel"
    view = View(
        type="modal",
        callback_id=SHARE_VIEW + "_done",
        title=PlainTextObject(text="Share a paper"),
        close=PlainTextObject(text="Done"),
        blocks=[section(f":white_check_mark: Shared in {where}.")],
    )
    return view.to_dict()


def error_message(error: str, *, hint: bool = False) -> dict[str, Any]:
    """A problem told kindly (the engine's messages say what to type instead)."""
    text = clip_escaped(error, MAX_SECTION_TEXT - 20, markup=True)
    blocks: list[Block] = [section(f":warning: {text}")]
    if hint:
        blocks.append(context("Type `/papers help` to see everything Paperboy understands."))
    return as_message(text, blocks)


def apology_message() -> dict[str, Any]:
    text = (
        "Sorry, something went wrong on Paperboy's side while answering that. "
        "Please try again in a moment; if it keeps happening, tell whoever runs Paperboy."
    )
    return as_message(text, [section(f":face_with_head_bandage: {text}")])


#: A write (subscribe, digest settings, digest now) refused by a read-only database.
READ_ONLY = (
    "Paperboy cannot save changes right now because its database is read-only; please ask "
    "whoever runs Paperboy to fix that. Lookups still work."
)


def read_only_message() -> dict[str, Any]:
    return as_message(READ_ONLY, [section(f":warning: {escape(READ_ONLY)}")])


HELP_SECTIONS = (
    (
        "*Look papers up* (only you see the results until you share one)\n"
        "`/papers diffusion models` · keywords, best matches first\n"
        '`/papers "graph neural networks"` · an exact phrase must occur\n'
        "`/papers transformers -survey` · leave out papers with a word\n"
        "`/papers venue:ICLR year:2024-2025 reinforcement learning` · filter by venue and year\n"
        '`/papers author:"Jane Doe" optimization` · filter by author'
    ),
    (
        "*Subscribe to topics* (new papers come in your daily digest)\n"
        '`/papers subscribe &lt;topic&gt;` · e.g. `/papers subscribe "diffusion models" venue:ICLR`\n'
        "`/papers unsubscribe &lt;topic or number&gt;` · stop following a topic\n"
        "`/papers topics` · list your topics, numbered"
    ),
    (
        "*Daily digest* (a direct message with new papers on your topics)\n"
        "`/papers digest on` or `/papers digest off`\n"
        "`/papers digest time 08:30` · when, in your Slack time zone\n"
        "`/papers digest days mon-fri` · which days\n"
        "`/papers digest preview` · see what the next digest would hold\n"
        "`/papers digest now` · send a digest right away\n"
        "`/papers digest channel #papers` · post your digest in a channel (`channel dm` undoes it)"
    ),
)


def help_message() -> dict[str, Any]:
    """``/papers help``: every subcommand with an example."""
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text="Paperboy: research papers in Slack", emoji=True))
    ]
    for n, text in enumerate(HELP_SECTIONS):
        if n:
            blocks.append(DividerBlock())
        blocks.append(section(text))
    blocks.append(
        context(
            "Each result has *Similar papers* and *Share to channel* buttons. To look up one "
            'of the words above, put it in quotes: `/papers "digest"`.'
        )
    )
    text = (
        "Paperboy help: /papers &lt;keywords&gt; to look papers up; /papers subscribe &lt;topic&gt;, "
        "/papers unsubscribe &lt;topic or number&gt;, /papers topics; "
        "/papers digest on|off|time 08:30|days mon-fri|preview|now."
    )
    return as_message(text, blocks)


def home_view() -> dict[str, Any]:
    """The App Home tab: the help, so people find their way without typing anything."""
    message = help_message()
    return {"type": "home", "blocks": message["blocks"]}
