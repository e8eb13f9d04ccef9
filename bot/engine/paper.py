"""The one record every corpus format is read into, before it reaches SQLite."""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass, field, fields


@dataclass
class Paper:
    """A paper as Paperboy stores it.

    ``title_derived`` is True when the source had no title (the seed format) and the
    title was made up from the abstract; the UI marks such titles so nobody cites them.
    """

    id: str
    title: str
    abstract: str = ""
    venue: str = ""
    year: int | None = None
    authors: list[str] = field(default_factory=list)
    keywords: list[str] = field(default_factory=list)
    url: str = ""
    title_derived: bool = False

    def content_hash(self) -> str:
        """A digest of everything but the id, so re-ingesting can tell changed from unchanged.

        The parts, each followed by a record separator, hashed as one string: the digest of
        feeding them to sha1 one by one, at a third of the calls (twice per paper in a first
        ingest: the SQLite write and the build's reader)."""
        parts = (
            self.title or "",
            self.abstract or "",
            self.venue or "",
            str(self.year),
            "\x1f".join(self.authors),
            "\x1f".join(self.keywords),
            self.url or "",
            "derived" if self.title_derived else "",
            "",
        )
        return hashlib.sha1("\x1e".join(parts).encode()).hexdigest()


#: A paper's fields in order, as a tuple (``Paper(*paper_values(paper))`` is the same paper):
#: how a first ingest hands its parsed papers to its build's reader (``index._Reader``),
#: cheaper to serialise than the objects.
paper_values = operator.attrgetter(*(f.name for f in fields(Paper)))


@dataclass
class Rejected:
    """A record that could not be read, with where it was and why (shown to the user)."""

    path: str
    location: str  # "line 12" or "record 3"
    reason: str

    def __str__(self) -> str:
        return f"{self.path}, {self.location}: {self.reason}"
