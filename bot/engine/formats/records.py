"""One JSON object or CSV row (the paperlists schema and friends) as a ``Paper``: field names in
any case, authors and keywords as lists or separated text, ids made up when missing, and
duplicate ids rejected."""

from __future__ import annotations

import re
from typing import Any

from bot.engine.paper import Paper, Rejected

from .common import LONGEST_ABSTRACT, check_sizes, collapse, kind, printable, sha1, slug
from .titles import derive_title


class RecordBuilder:
    """Turns JSON objects or CSV rows into papers, rejecting bad ones and duplicate ids."""

    def __init__(self, path: str, unit: str) -> None:
        self.path = path
        self.unit = unit
        self.seen: dict[str, int] = {}  # id -> the line or record it was first read from
        self._plain_keys: dict[tuple[Any, ...], bool] = {}  # key tuple -> all lower & stripped

    def reject(self, number: int, reason: str) -> Rejected:
        return Rejected(self.path, f"{self.unit} {number}", reason)

    def build(self, number: int, record: Any) -> Paper | Rejected:
        if not isinstance(record, dict):
            return self.reject(number, f"not a JSON object (got {kind(record)})")
        try:
            paper = _paper_from_record(self._fields(record))
        except ValueError as exc:
            return self.reject(number, str(exc))
        first = self.seen.setdefault(paper.id, number)
        if first != number:
            return self.reject(number, f"duplicate id {paper.id!r} (first at {self.unit} {first})")
        return paper

    def _fields(self, record: dict[Any, Any]) -> dict[str, Any]:
        """The record keyed by lower-case, stripped names; itself when they already are."""
        keys = tuple(record)
        plain = self._plain_keys.get(keys)
        if plain is None:
            plain = all(isinstance(k, str) and k == k.strip().lower() for k in keys)
            if len(self._plain_keys) < 64:  # a file has few shapes; don't grow without bound
                self._plain_keys[keys] = plain
        if plain:
            return record
        return {str(k).strip().lower(): v for k, v in record.items()}


def _paper_from_record(fields: dict[str, Any]) -> Paper:
    """Map one JSON object or CSV row (paperlists schema and friends) to a Paper.

    ``fields`` is keyed by lower-case names. Raises ValueError with the reason shown to the user.
    """
    get = fields.get
    title = _text(get("title"), "title")
    abstract = _text(get("abstract"), "abstract")
    if not title and not abstract:
        raise ValueError("no title and no abstract")
    if len(abstract) > LONGEST_ABSTRACT:  # before a title is derived from it
        raise ValueError(check_sizes(Paper("", "", abstract=abstract)))
    venue = _text(get("venue"), "venue")
    year = _year(get("year"))
    authors = _names(get("authors", get("author")), "authors")
    keywords = _names(get("keywords"), "keywords")
    url = ""
    for key in ("url", "site", "pdf"):
        url = _text(get(key), key)
        if url:
            break

    title_derived = not title
    if title_derived:
        title = derive_title(abstract)
    raw_id = get("id")
    paper_id = collapse(str(raw_id)) if isinstance(raw_id, str | int) else ""
    if not paper_id:
        venue_slug = slug(venue)
        prefix = f"{venue_slug}{year or ''}" if venue_slug else "paper"
        basis = title if not title_derived else abstract
        digest = sha1(f"{basis.lower()}|{year if year is not None else ''}")
        paper_id = f"{prefix}-{digest[:12]}"
    paper = Paper(
        id=paper_id,
        title=title,
        abstract=abstract,
        venue=venue,
        year=year,
        authors=authors,
        keywords=keywords,
        url=url,
        title_derived=title_derived,
    )
    too_big = check_sizes(paper)
    if too_big:
        raise ValueError(too_big)
    return paper


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return collapse(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{what} is a {kind(value)}, not text")


#: Years a paper can have: ``year:`` filters start at 1000 too (``query.MIN_YEAR``), and a
#: year far in the future is a typo (``20225``), not a paper.
YEARS = range(1000, 2200)


def _year(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError(f"year is not a number ({value!r})")
    if isinstance(value, int):
        year = value
    elif isinstance(value, float) and value.is_integer():
        year = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        year = int(value.strip())
    else:
        raise ValueError(f"year is not a number ({value!r})")
    if year == 0:  # what some exports write for "unknown"
        return None
    if year not in YEARS:
        raise ValueError(f"year {year} is not a year a paper can have ({YEARS[0]}-{YEARS[-1]})")
    return year


_NAME_SEPARATORS = re.compile(r",\s+|\s+and\s+")


def _names(value: Any, what: str) -> list[str]:
    """Authors or keywords from a list or a separated string ("A; B", "A, B and C")."""
    if value is None:
        return []
    if isinstance(value, list):
        if _plain_names(value):
            return list(value)
        names = []
        for item in value:
            if type(item) is not str:
                if isinstance(item, dict):  # [{"name": "..."}] as in Semantic Scholar dumps
                    item = item.get("name", "")
                if isinstance(item, str | int | float):
                    item = str(item)
                elif item is None:
                    continue
                else:
                    raise ValueError(f"{what} contains a {kind(item)}, not text")
            name = collapse(item)
            if name:
                names.append(name)
        return names
    if isinstance(value, str):
        if ";" in value or what == "keywords":
            parts = value.split(";")
        else:
            parts = _NAME_SEPARATORS.split(value)
        return [name for name in map(collapse, parts) if name]
    raise ValueError(f"{what} is a {kind(value)}, not a list or text")


def _plain_names(names: list[Any]) -> bool:
    """Whether ``names`` are all non-empty strings that ``collapse`` leaves as they are, as
    nearly every author list is: checked on them joined by bars (a few C scans) rather than a
    call per name. A bar next to a space or another bar (a name that starts or ends with one,
    or an empty name) takes the long way, which says what is right."""
    try:
        joined = "|".join(names)
    except TypeError:  # not all strings
        return False
    return (
        printable(joined)
        and "  " not in joined
        and "| " not in joined
        and " |" not in joined
        and "||" not in joined
        and joined[:1] not in ("", " ", "|")
        and joined[-1:] not in (" ", "|")
    )
