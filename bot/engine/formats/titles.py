"""Titles made up from abstracts, for papers known only by their abstract (seed files, records
without a title), and markdown emphasis taken out of text shown in Slack."""

from __future__ import annotations

import re

from .common import collapse

MAX_TITLE_CHARS = 100  # of a title derived from the abstract


_INTRO = re.compile(
    r"\b(?:[Ww]e|[Tt]his\s+(?:paper|work|study|article))\s+"
    r"(?:(?:also|further|then|first|here|now|therefore|thus)\s+)?"
    r"(?:propose|introduce|present|develop|design|devise|build|create|release)[sd]?\b\s*"
)
_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_WRAPPED_NAME = re.compile(
    r'\*\*(?P<b>[^*\n]{1,60}?)\*\*|\*(?P<i>[^*\s][^*\n]{0,58}?)\*|"(?P<q>[^"\n]{1,60}?)"'
    r"|“(?P<q2>[^”\n]{1,60}?)”"
)
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][\w+'.-]*[\w+](?:\s+[A-Z][\w+'-]*[\w+]){0,3}|[A-Z]")
_ABSTRACT_LABEL = re.compile(r"^abstract\s*[:.\-–—]\s*", re.IGNORECASE)
_EXPANSION = re.compile(r"\s*\(([^()]{2,120})\)")
_SEPARATOR = re.compile(r"\s*(?:,|:|—|–|\s-\s|---|--)\s*")
_WHICH_IS = re.compile(r"^(?:which|that)\s+(?:is|are)\s+")
_PAREN_ACRONYM = re.compile(r"\(([^()\s]{2,24})\)")
_APPOSITIVE = re.compile(
    r"(?P<desc>(?:a|an|the)\s[^,()]{3,80}?)\s*,\s*(?:(?:called|named|dubbed|termed|coined)\s+)?"
)
_APPOSITIVE_END = re.compile(r"\s*[,.;:(]")
_LEADING_THE = re.compile(r"^the\s+", re.IGNORECASE)
_NAME_WORD = re.compile(r"[A-Za-z][\w+.'-]*")
_NOT_EXPANSION = re.compile(r"(?:see|e\.g\.|i\.e\.|cf\.|resp\.)", re.IGNORECASE)
_CITATION_YEAR = re.compile(r"[\d\s,;.a-z-]*\d{4}[a-z]?")
_SENTENCE_END = re.compile(r"[.!?][\"')\]”’]*(?=\s+\S)")
_INITIALS = re.compile(r"(?:[a-z]\.)+")
_LATEX_EMPHASIS = re.compile(r"\\(?:emph|textit|textbf|textsc|texttt)\{([^{}]*)\}")
# Markdown emphasis, only where it clearly is emphasis: markers at word boundaries around
# text that starts and ends with a non-space, all on one line, and never across LaTeX math
# (no "$" inside; not after "^", "\\" or "{"), so "$x^*$ and $y^*$" and "$(L_0,L_1)$" stay.
_BOLD = re.compile(r"(?<![\w*^\\{])\*\*(?=[^\s*])([^*$\n]{1,200}?)(?<=\S)\*\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w*^\\{])\*(?=[^\s*])([^*$\n]{1,200}?)(?<=\S)\*(?![\w*])")
_UNDERLINE = re.compile(  # not a dunder: "__init__" is code
    r"(?<![\w^\\{])__(?=[^\s_])(?![a-z0-9]+__)([^_$\n]{1,200}?)(?<=\S)__(?![\w{])"
)
# A single "_" pair only around words ("_not_", "_in situ_"): underscores are common in
# identifiers and math (snake_case, x_i), so the text must start and end with a letter.
_UNDERSCORE_ITALIC = re.compile(r"(?<![\w^\\{$])_(?=[^\W\d_])([^_$\n{}]{0,200}?[^\W\d_])_(?![\w{])")
_NOT_NAMES = {"a", "an", "the", "this", "that", "these", "our", "it", "its", "we", "in", "to"}
_PREPOSITIONS = {
    "for", "of", "in", "on", "with", "to", "by", "from", "using", "via", "over", "across",
    "between", "under", "into", "that", "which", "and", "or",
}  # fmt: skip
_CONNECTIVES = {"of", "for", "and", "in", "with", "to", "on", "via", "the", "&"}
_ABBREVIATIONS = {
    "e.g.", "i.e.", "al.", "etc.", "vs.", "cf.", "fig.", "figs.", "eq.", "eqs.", "sec.",
    "resp.", "approx.", "no.", "dr.", "prof.", "st.", "inc.", "ltd.", "viz.", "ca.",
}  # fmt: skip


def derive_title(abstract: str) -> str:
    """A short stand-in title for a paper known only by its abstract (at most 100 characters).

    Prefers the named method the abstract introduces ("we propose QLASS (Q-guided Language
    Agent Stepwise Search)" gives "QLASS: Q-guided Language Agent Stepwise Search"), else the
    first sentence, cut at a word boundary with "…" when long.
    """
    text = collapse(abstract)
    text = _ABSTRACT_LABEL.sub("", text)
    if not text:
        return "Untitled"
    sentences = _sentences(text)
    for sentence in sentences:
        for intro in _INTRO.finditer(sentence):
            title = _named_title(sentence[intro.end() :])
            if title:
                return _shorten(_clean_title(title))
    title = _shorten(_clean_title(sentences[0]))
    return title or "Untitled"


def _named_title(rest: str) -> str | None:
    """A "NAME: description" title from the words after "we propose", or None if unnamed."""
    rest = rest.rstrip(" .!?")
    # "QLASS (Q-guided Language Agent Stepwise Search)" / "the Joint ... Transformer (JEPT)"
    body = _strip_the(rest)
    named = _name_at(body)
    if named:
        name, end = named
        after = body[end:]
        paren = _EXPANSION.match(after)
        if paren and _looks_like_expansion(paren[1]):
            expansion = paren[1].strip()
            if " " in name and " " not in expansion and _is_name_word(expansion):
                return f"{expansion}: {name}"
            return f"{name}: {expansion}"
        sep = _SEPARATOR.match(after)
        if sep:
            desc = after[sep.end() :]
            desc = _WHICH_IS.sub("", desc)
            if desc:
                return f"{name}: {desc}"
    # "a novel framework, Discriminator-Guided Action Optimization (DGAP), for ..."
    paren = _PAREN_ACRONYM.search(rest)
    if paren and _is_name_word(paren[1]) and len(rest[: paren.start()].split()) <= 14:
        title = _acronym_title(paren[1], rest[: paren.start()].rstrip(), rest[paren.end() :])
        if title:
            return title
    # "a new graph unlearning method, **Cognac**, which ..."
    appositive = _APPOSITIVE.match(rest)
    if appositive:
        named = _name_at(rest[appositive.end() :])
        if named:
            name, end = named
            tail = rest[appositive.end() + end :]
            if not tail or _APPOSITIVE_END.match(tail):
                return f"{name}: {appositive['desc']}"
    return None


def _acronym_title(acronym: str, before: str, after: str) -> str | None:
    words = before.split()
    phrase: list[str] = []
    index = len(words) - 1
    while index >= 0:
        word = words[index].strip("*\"'“”")
        if word and (word[0].isupper() or (word.lower() in _CONNECTIVES and phrase)):
            phrase.insert(0, word)
            index -= 1
        else:
            break
    while phrase and phrase[0].lower() in _CONNECTIVES:
        phrase.pop(0)
        index += 1  # the dropped connective now precedes the phrase
    capitalised = [w for w in phrase if w[0].isupper()]
    preceding = words[index].strip(",").lower() if index >= 0 else ""
    if len(capitalised) >= 2:
        if preceding in _PREPOSITIONS:
            return None
        return f"{acronym}: {' '.join(phrase)}"
    lowered = {w.strip(",").lower() for w in words}
    if _ARTICLE.match(before) and not lowered & _PREPOSITIONS:
        if after.lstrip().startswith(","):  # "the ... autoencoder (VSAE), a framework for ..."
            return f"{acronym}: {_strip_the(before)}"
        return f"{acronym}: {before} {after.strip()}".strip()
    return None


def _name_at(text: str) -> tuple[str, int] | None:
    """A method name at the start of ``text`` (emphasised, quoted or name-like) and its end."""
    wrapped = _WRAPPED_NAME.match(text)
    if wrapped:
        name = next(g for g in wrapped.groups() if g is not None).strip()
        if any(c.isupper() for c in name):
            return name, wrapped.end()
        return None
    plain = _PLAIN_NAME.match(text)
    if not plain:
        return None
    name = plain[0]
    words = name.split()
    if words[0].lower() in _NOT_NAMES or not any(c.isupper() for c in words[0]):
        return None
    return name, plain.end()


def _strip_the(text: str) -> str:
    return _LEADING_THE.sub("", text)


def _is_name_word(word: str) -> bool:
    """True for "QLASS", "TreeLoRA", "ReQFlow", "GPT-4": a token carrying capitals or digits."""
    if not _NAME_WORD.fullmatch(word):
        return False
    return any(c.isupper() for c in word[1:]) or (word[0].isupper() and len(word) <= 3)


def _looks_like_expansion(text: str) -> bool:
    text = text.strip()
    if _NOT_EXPANSION.match(text):
        return False
    if _CITATION_YEAR.fullmatch(text):  # a citation year
        return False
    return any(c.isalpha() for c in text)


def _sentences(text: str) -> list[str]:
    """Split at sentence ends, not at "e.g.", "et al.", initials like "A." or "i.i.d."."""
    sentences, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        word = text[start : match.start() + 1].split()[-1].lstrip("(\"'“").lower()
        if word in _ABBREVIATIONS or _INITIALS.fullmatch(word):
            continue
        following = text[match.end() :].lstrip()[:1]
        if following.islower():
            continue
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences or [text]


def strip_emphasis(text: str) -> str:
    """``text`` without markdown emphasis markers (``**x**``, ``*x*``, ``__x__``, ``_x_``).

    Seed abstracts carry some (``*EngageNet*``, ``**cross capabilities**``); shown in Slack,
    where ``*`` means bold, they would look like matched terms. Only markers that clearly
    mean emphasis go: math, identifiers and lone stars stay as written.
    """
    text = _BOLD.sub(r"\1", text)
    text = _ITALIC.sub(r"\1", text)
    text = _UNDERLINE.sub(r"\1", text)
    return _UNDERSCORE_ITALIC.sub(r"\1", text)


def _clean_title(text: str) -> str:
    text = _LATEX_EMPHASIS.sub(r"\1", text)
    text = strip_emphasis(text)
    text = collapse(text)
    return text.rstrip(" .,;:").strip()


def _shorten(text: str) -> str:
    limit = MAX_TITLE_CHARS
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if not text[limit - 1].isspace() and " " in cut:
        space = cut.rfind(" ")
        if space > limit // 2:
            cut = cut[:space]
    if cut.count("$") % 2 and cut.rfind("$") > limit // 2:  # never leave LaTeX math half open
        cut = cut[: cut.rfind("$")]
    return cut.rstrip(" ,;:-–—(/") + "…"
