"""Text made safe for Slack's mrkdwn, and cut to fit: the one place that knows its markup.

Everything a paper or a query brings in is escaped (``&``, ``<``, ``>``), so no paper or query
can ping ``@channel``, mention someone or disguise a link, and its formatting characters are
made inert (:func:`escape_plain`), so only Paperboy's own ``*bold*`` formats. Long titles,
author lists and abstracts are cut at a word boundary with "…".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote

from bot.engine.latex import readable

SHOWN_AUTHORS = 3
MAX_URL_CHARS = 1000

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


def escape(text: str) -> str:
    """Make text inert in mrkdwn: ``<!channel>``, ``<@U1>`` and ``<url|label>`` become plain
    text, and a bare ``@channel``/``@here``/``@everyone`` gets an invisible word joiner after
    the ``@`` so no client or setting can turn it into a broadcast."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # Each pattern only where its first character is (a scan in C): most text has none.
    return _BROADCAST.sub("@\u2060\\1", text) if "@" in text else text


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
    if "_" in text:
        text = _STRAY_UNDERSCORE.sub(_LOW_MACRON, text)
    if ":" in text:
        text = _EMOJI_CODE.sub(":\u2060\\1:", text)
    if "&gt;" in text or "\uff1e" in text:
        text = _LEADING_QUOTE.sub("\u00ad", text)
    return text


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


def mention(user_id: str, fallback: str = "Someone") -> str:
    """``<@U123>`` (Slack shows the member's name), or ``fallback`` for anything that is not
    a user id (so a forged id cannot inject markup)."""
    return f"<@{user_id}>" if re.fullmatch(r"[UW][A-Z0-9]{1,20}", user_id or "") else fallback


def plain_title(paper: dict[str, Any] | None, limit: int = 200, default: str = "") -> str:
    """The title as plain escaped text (a notification's ``text``, a sentence), its LaTeX
    made readable; the id, else ``default``, when it has none."""
    paper = paper or {}
    return clip_escaped(readable(paper.get("title") or paper.get("id") or default), limit)
