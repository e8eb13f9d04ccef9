"""arXiv API Atom feeds, as saved from ``export.arxiv.org/api/query``: one paper per entry, the
newest version of each."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from xml.etree import ElementTree

from bot.engine.paper import Paper, Rejected

from .common import CorpusFileError, check_sizes, collapse

ATOM = "{http://www.w3.org/2005/Atom}"


_DOCTYPE = re.compile(r"<!(?:DOCTYPE|ENTITY)")


_ARXIV_ID = re.compile(
    r"^(?:https?://(?:export\.)?arxiv\.org/abs/)?"
    r"(?P<base>\d{4}\.\d{4,5}|[a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7})(?:v(?P<version>\d+))?$"
)


def parse_arxiv_id(raw: str) -> tuple[str, int] | None:
    """``("2501.01234", 2)`` from "http://arxiv.org/abs/2501.01234v2" (version 0 if none)."""
    match = _ARXIV_ID.match(raw.strip())
    if not match:
        return None
    return match["base"], int(match["version"] or 0)


@dataclass(eq=False)
class ArxivPaper(Paper):
    """A paper read from an arXiv entry, with what ``Paper`` does not keep: which version the
    entry is (2 for ``2501.01234v2``, 0 when its id names none) and its ``<updated>`` (UTC,
    ISO 8601; "" when missing or unreadable). Neither is part of the paper's content hash;
    they are stored beside it (``papers.arxiv_version``, ``corpus_papers.arxiv_version``) and
    ``Corpus.upsert`` compares them with the stored paper's, so that an older version read
    later (a saved dump beside a live feed) never overwrites a newer one."""

    version: int = 0
    updated: str = ""


def stored_paper(fields: dict, version: int | None, updated: str | None) -> Paper:
    """A paper read back from a row (``Paper``'s fields), an ``ArxivPaper`` when the row
    knows its arXiv version, so that it travels on with it (publish, replication)."""
    if version is None:
        return Paper(**fields)
    return ArxivPaper(**fields, version=int(version), updated=updated or "")


def utc_timestamp(text: str) -> str:
    """An Atom timestamp as UTC ISO 8601 (comparable as text); "" when it is not one."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return ""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


def is_older(version: int, updated: str, than_version: int, than_updated: str) -> bool:
    """Whether arXiv version ``(version, updated)`` is older than ``(than_version,
    than_updated)``: by version number when both are known (v2 < v3), else by ``<updated>``
    when both are known; when neither tells, it is not (the caller goes on as for any paper).
    """
    if version and than_version:
        return version < than_version
    if updated and than_updated:
        return updated < than_updated
    return False


def feed_root(text: str | bytes, name: str) -> ElementTree.Element:
    """The root of an Atom feed, or CorpusFileError saying in one sentence why it is not one.

    Shared by the file reader and the arXiv API client (digest/arxiv.py)."""
    head = text[:5000]
    if isinstance(head, bytes):
        head = head.decode("utf-8", "replace")
    # arXiv feeds never declare entities; refusing them keeps entity-expansion tricks out.
    if _DOCTYPE.search(head):
        raise CorpusFileError(
            f"{name} declares a DOCTYPE or entities, which arXiv Atom feeds never do."
        )
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        line, column = exc.position
        reason = str(exc).split(":")[0]
        raise CorpusFileError(
            f"{name} is not well-formed XML: {reason} at line {line}, column {column + 1}."
        ) from exc
    if root.tag != f"{ATOM}feed":
        local = root.tag.rsplit("}", 1)[-1]
        raise CorpusFileError(f"{name} is XML but not an Atom feed (its root is <{local}>).")
    return root


def atom_items(text: str, shown: str, name: str) -> list[Paper | Rejected]:
    """A feed's entries in order; an id seen again keeps its first place, highest version."""
    root = feed_root(text, name)

    items: list[Paper | Rejected] = []
    best: dict[str, tuple[ArxivPaper, int]] = {}  # base id -> newest version, its index
    for number, entry in enumerate(root.iter(f"{ATOM}entry"), start=1):
        location = f"entry {number}"
        raw_id = collapse(entry.findtext(f"{ATOM}id") or "")
        title = collapse(entry.findtext(f"{ATOM}title") or "")
        summary = collapse(entry.findtext(f"{ATOM}summary") or "")
        if "/api/errors" in raw_id:
            items.append(Rejected(shown, location, f"arXiv API error: {summary}"))
            continue
        if not raw_id:
            items.append(Rejected(shown, location, "no <id>"))
            continue
        parsed = parse_arxiv_id(raw_id)
        if not parsed:
            items.append(Rejected(shown, location, f"id {raw_id!r} is not an arXiv abstract URL"))
            continue
        if not title:
            items.append(Rejected(shown, location, "no <title>"))
            continue
        base, version = parsed
        authors = [
            collapse(author.findtext(f"{ATOM}name") or "")
            for author in entry.findall(f"{ATOM}author")
        ]
        keywords: list[str] = []
        for category in entry.findall(f"{ATOM}category"):
            term = collapse(category.get("term") or "")
            if term and term not in keywords:
                keywords.append(term)
        updated = (entry.findtext(f"{ATOM}updated") or "").strip()
        published = (entry.findtext(f"{ATOM}published") or updated).strip()
        paper = ArxivPaper(
            id=f"arxiv:{base}",
            title=title,
            abstract=summary,
            venue="arXiv",
            year=int(published[:4]) if published[:4].isdigit() else None,
            authors=[a for a in authors if a],
            keywords=keywords,
            url=f"https://arxiv.org/abs/{base}",
            version=version,
            updated=utc_timestamp(updated),
        )
        too_big = check_sizes(paper)
        if too_big:
            items.append(Rejected(shown, location, too_big))
            continue
        if base in best:
            kept, index = best[base]
            if is_older(kept.version, kept.updated, version, paper.updated):
                items[index] = paper  # a newer version replaces the older in place
                best[base] = (paper, index)
            continue
        best[base] = (paper, len(items))
        items.append(paper)
    return items
