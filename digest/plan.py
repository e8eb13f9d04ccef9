"""What one member's digest holds, as chosen by ``selection``: plain data, no Slack.

A ``DigestPlan`` is stored as JSON with the digest's claim (``ledger``), so a retry after a
crash sends exactly what was chosen the first time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from functools import cache


@dataclass
class DigestItem:
    paper_id: str
    score: float
    why: list[str]
    new: bool  # added to the corpus since the member's last digest
    #: Recommendations (``RECOMMENDED``): how many 👍 papers it is like, and one of them.
    liked_count: int = 0
    liked_example: str | None = None
    #: How many teammates (same workspace, not the member) saved it: shown from 2 on.
    team_saves: int = 0
    #: On the member's own reading list (its Save button says so, in their DM).
    saved: bool = False


#: The ``topic_id`` of the "Recommended for you" section (papers the member's model likes that
#: matched none of their topics); real topic ids start at 1.
RECOMMENDED = 0
RECOMMENDED_TITLE = "Recommended for you"


@dataclass
class DigestSection:
    topic_id: int
    query: str
    items: list[DigestItem]

    @property
    def recommended(self) -> bool:
        return self.topic_id == RECOMMENDED


@dataclass
class DigestPlan:
    """One member's digest, as chosen; stored as JSON with the claim so a retry sends the same."""

    user_id: str
    sections: list[DigestSection] = field(default_factory=list)
    since: str | None = None  # papers added after this count as new

    @property
    def paper_ids(self) -> list[str]:
        return [item.paper_id for s in self.sections for item in s.items]

    @property
    def size(self) -> int:
        return sum(len(s.items) for s in self.sections)

    @property
    def new_count(self) -> int:
        return sum(item.new for s in self.sections for item in s.items)

    def keeping(self, paper_ids: Iterable[str]) -> DigestPlan:
        """The same digest with only these papers (empty sections dropped)."""
        wanted = set(paper_ids)
        sections = [
            DigestSection(s.topic_id, s.query, [i for i in s.items if i.paper_id in wanted])
            for s in self.sections
        ]
        return DigestPlan(self.user_id, [s for s in sections if s.items], self.since)

    def to_json(self) -> str:
        """What ``dataclasses.asdict`` gives, written out: asdict's deep copy cost more than
        the rest of claiming a digest (three plans a digest in a batch of 1,000)."""
        data = {f: getattr(self, f) for f in _fields(DigestPlan)}
        data["sections"] = [
            {
                **{f: getattr(s, f) for f in _fields(DigestSection)},
                "items": [{f: getattr(i, f) for f in _fields(DigestItem)} for i in s.items],
            }
            for s in self.sections
        ]
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DigestPlan:
        """A stored plan. Fields this version does not know are left out: during a rolling
        deploy an older host may retake a claim a newer one wrote."""
        data = json.loads(text)
        known = set(_fields(DigestItem))
        sections = [
            DigestSection(
                s["topic_id"],
                s["query"],
                [DigestItem(**{k: v for k, v in i.items() if k in known}) for i in s["items"]],
            )
            for s in data.get("sections", [])
        ]
        return cls(data["user_id"], sections, data.get("since"))


@cache
def _fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))
