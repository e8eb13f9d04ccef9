"""Seed text files: a header line naming the venue and year ("ICML 2025 Papers"), then one
abstract per paragraph, no titles (made up by ``titles.derive_title``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from bot.engine.paper import Paper, Rejected

from .common import LONGEST_ABSTRACT, MIN_ABSTRACT_CHARS, check_sizes, collapse, sha1, slug
from .titles import derive_title, strip_emphasis

_SEED_HEADER = re.compile(
    r"^\s*(?P<venue>[A-Za-z][\w&.+/-]*(?:\s+[A-Za-z][\w&.+/-]*){0,3})"
    r"[\s'’-]*(?P<year>(?:19|20)\d\d)\b(?P<rest>[^\n]{0,50})$"
)
_FOUR_DIGITS = re.compile(r"\d{4}")


def parse_seed_header(line: str) -> tuple[str, int] | None:
    """``("ICML", 2025)`` from a seed header like "ICML 2025 Papers", or None."""
    match = _SEED_HEADER.match(line)
    if not match or _FOUR_DIGITS.search(match["rest"]):
        return None
    return match["venue"], int(match["year"])


def seed_items(
    lines: Iterable[str],
    venue_year: tuple[str, int],
    shown: str,
    bad: dict[int, str],
) -> Iterator[Paper | Rejected]:
    """One paper per paragraph after the header line, yielded as each paragraph ends.

    ``bad`` is ``Source.bad_lines``, filled in as ``lines`` is read: a paragraph holding a line
    that is not UTF-8 is rejected, naming that line.
    """
    venue, year = venue_year
    prefix = f"{slug(venue)}{year}"
    seen: dict[str, int] = {}

    def paragraph(line_no: int, chunk: list[str]) -> Paper | Rejected:
        broken = [n for n in range(line_no, line_no + len(chunk)) if n in bad] if bad else []
        if broken:
            return Rejected(shown, f"line {broken[0]}", bad[broken[0]])
        abstract = collapse(" ".join(chunk))
        if len(abstract) > LONGEST_ABSTRACT:
            return Rejected(shown, f"line {line_no}", check_sizes(Paper("", "", abstract)) or "")
        if len(abstract) < MIN_ABSTRACT_CHARS:
            return Rejected(
                shown,
                f"line {line_no}",
                f"too short to be an abstract ({len(abstract)} characters)",
            )
        paper_id = f"{prefix}-{sha1(abstract)[:12]}"
        if paper_id in seen:
            return Rejected(
                shown, f"line {line_no}", f"same abstract as line {seen[paper_id]} (skipped)"
            )
        seen[paper_id] = line_no
        # The id hashes the abstract as written (ids stay what they were before emphasis
        # was stripped), and the title is derived from it too: "**Cognac**" marks a name.
        return Paper(
            id=paper_id,
            title=derive_title(abstract),
            abstract=strip_emphasis(abstract),
            venue=venue,
            year=year,
            title_derived=True,
        )

    header_seen = False
    start, chunk = 0, []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            if not header_seen:
                header_seen = True
                continue
            if not chunk:
                start = number
            chunk.append(line)
        elif chunk:
            yield paragraph(start, chunk)
            chunk = []
    if chunk:
        yield paragraph(start, chunk)
