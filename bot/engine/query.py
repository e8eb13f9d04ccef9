"""The query language, parsed into a plain object the index can run.

    diffusion models "score matching" -survey venue:ICLR year:2023-2025 author:"Jane Doe"

Plain words are ranked by TF-IDF; a quoted phrase must occur; ``-word`` or ``-"a phrase"``
must not; filters narrow the candidates. Anything the parser cannot use is reported back
as a ``QueryError`` whose message tells the user what to type instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .text import name_tokens

MAX_QUERY_CHARS = 500
FILTERS = ("venue", "year", "author")

# One token: an optional "-", an optional "field:", then a "quoted phrase" or a bare word.
_TOKEN = re.compile(r'(?P<neg>-)?(?:(?P<field>[A-Za-z]+):)?(?:"(?P<quoted>[^"]*)"?|(?P<bare>\S+))?')
_YEAR = re.compile(r"^(\d{4})?(?:(-|\.\.)(\d{4})?)?$")
MIN_YEAR = 1000  # "year:0000" is a typo, not a filter to drop


class QueryError(ValueError):
    """The query cannot be run; the message is shown to the user as is."""


@dataclass
class Query:
    text: str
    words: list[str] = field(default_factory=list)  # free text, ranked
    phrases: list[str] = field(default_factory=list)  # must occur
    excluded: list[str] = field(default_factory=list)  # must not occur (words or phrases)
    venues: list[str] = field(default_factory=list)  # any of these (case-insensitive)
    year_from: int | None = None
    year_to: int | None = None
    authors: list[str] = field(default_factory=list)  # all of these
    # "arXiv:2501.01234", "re:diffusion": not filters, so looked up as words (a notice says so)
    not_filters: list[str] = field(default_factory=list)

    @property
    def ranked_text(self) -> str:
        """What is scored: the free words and the phrases (a phrase also counts for rank)."""
        return " ".join(self.words + self.phrases)

    @property
    def has_filters(self) -> bool:
        return bool(self.venues or self.authors) or (self.year_from, self.year_to) != (None, None)

    def without_filters(self) -> str:
        parts = list(self.words) + [f'"{p}"' for p in self.phrases]
        parts += [f'-"{e}"' if " " in e else f"-{e}" for e in self.excluded]
        return " ".join(parts)


#: Terminal colour codes (ESC [ ... m, as a copied coloured line carries them), then any other
#: control character: not part of any word, so never searched for (nor shown).
_CONTROLS = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def parse_query(text: str) -> Query:
    text = _CONTROLS.sub(" ", text or "").strip()
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"That query is {len(text):,} characters long; please keep it to "
            f"{MAX_QUERY_CHARS} or fewer (a few keywords work best)."
        )
    if '"' not in text and ":" not in text:
        # No phrase, no filter: the tokens are the words unless one is an exclusion.
        tokens = text.split()
        if not any(token.startswith("-") for token in tokens):
            return Query(text=text, words=tokens)
    query = Query(text=text)
    _read_tokens(query, text)
    return query


def _read_tokens(query: Query, text: str) -> None:
    """Add the text's words, phrases, exclusions and filters to ``query``."""
    for match in _TOKEN.finditer(text):
        if not match.group():
            continue
        neg, name, quoted, bare = match.group("neg", "field", "quoted", "bare")
        value = (quoted if quoted is not None else bare or "").strip()
        if name:
            key = name.lower()
            if key not in FILTERS and not value and quoted is None:
                query.words.append(name)  # "QLASS: Q-guided ..." - a pasted title, not a filter
                continue
            if key not in FILTERS:
                # A URL, an id ("arXiv:2501.01234"), "re:" or "cf.": text pasted from
                # somewhere (the message shortcut), so looked up as words. A topic, which
                # is kept, refuses it instead (``parse_topic``).
                if not (bare and bare.startswith("//")):
                    query.not_filters.append(name)
                if neg:
                    query.excluded.append(f"{name}:{value}")
                elif quoted is not None:
                    query.words.append(name)
                    if value:
                        query.phrases.append(value)
                else:
                    query.words.append(f"{name}:{bare}")
                continue
            if neg:
                raise QueryError(f"`-{name}:` is not supported; use `{name}:` to narrow instead.")
            if not value:
                raise QueryError(f"`{name}:` needs a value, like `{_EXAMPLE[key]}`.")
            _apply_filter(query, key, value)
        elif neg and value:
            query.excluded.append(value)
        elif quoted is not None:
            if value:
                query.phrases.append(value)
        elif value and value != "-":
            query.words.append(value)


_EXAMPLE = {"venue": "venue:ICLR", "year": "year:2023-2025", "author": 'author:"Jane Doe"'}


def parse_topic(text: str) -> Query:
    """``parse_query`` for a topic, which is kept for months: a ``name:`` that is no filter
    (a typo, ``venu:ICLR``) raises QueryError rather than becoming words, as in a lookup."""
    query = parse_query(text)
    if query.not_filters:
        raise QueryError(
            f"I don't know the filter `{query.not_filters[0]}:`. Filters are `venue:ICLR`, "
            f'`year:2025` or `year:2023-2025`, and `author:"Jane Doe"`.'
        )
    return query


def _apply_filter(query: Query, key: str, value: str) -> None:
    if key == "venue":
        venues = [v.strip() for v in re.split(r"[,|]", value) if v.strip()]
        if not venues:
            raise QueryError(
                f"`venue:{value}` names no venue; use `venue:ICLR` or `venue:ICLR,ICML`."
            )
        query.venues.extend(venues)
    elif key == "author":
        if not name_tokens(value):
            raise QueryError(
                f"`author:{value}` names nobody (it has no letters or digits); "
                'use a name, like `author:"Jane Doe"`.'
            )
        query.authors.append(value)
    else:
        match = _YEAR.match(value)
        years = [int(y) for y in (match.group(1), match.group(3)) if y] if match else []
        if not years or min(years) < MIN_YEAR:
            raise QueryError(
                f"`year:{value}` is not a year I understand; use `year:2025`, "
                f"`year:2023-2025`, `year:2023-` or `year:-2020`."
            )
        if query.year_from is not None or query.year_to is not None:
            raise QueryError(
                "Give one `year:` filter (a range is one: `year:2023-2025`); with two, "
                "I cannot tell which you mean."
            )
        start, dash, end = match.group(1), match.group(2), match.group(3)
        query.year_from = int(start) if start else None
        query.year_to = int(end) if end else (None if dash else query.year_from)
        if (
            query.year_from is not None
            and query.year_to is not None
            and query.year_from > query.year_to
        ):
            query.year_from, query.year_to = query.year_to, query.year_from
