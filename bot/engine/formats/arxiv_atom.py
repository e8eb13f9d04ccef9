"""arXiv API Atom feeds, as saved from ``export.arxiv.org/api/query``: one paper per entry, the
newest version of each."""

from __future__ import annotations

import re
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
    best: dict[str, tuple[int, int]] = {}  # base id -> (version, index in items)
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
        published = entry.findtext(f"{ATOM}published") or entry.findtext(f"{ATOM}updated") or ""
        published = published.strip()
        paper = Paper(
            id=f"arxiv:{base}",
            title=title,
            abstract=summary,
            venue="arXiv",
            year=int(published[:4]) if published[:4].isdigit() else None,
            authors=[a for a in authors if a],
            keywords=keywords,
            url=f"https://arxiv.org/abs/{base}",
        )
        too_big = check_sizes(paper)
        if too_big:
            items.append(Rejected(shown, location, too_big))
            continue
        if base in best:
            kept_version, index = best[base]
            if version > kept_version:  # a newer version replaces the older in place
                items[index] = paper
                best[base] = (version, index)
            continue
        best[base] = (version, len(items))
        items.append(paper)
    return items
