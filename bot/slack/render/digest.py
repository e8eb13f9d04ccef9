"""A digest as a Slack message: the lookups' paper rendering, a header per topic, <= 50 blocks.

``bot.slack.poster.SlackPoster`` posts it for the digest package, which hands over only the
plan (``digest.selection.DigestPlan``). Each paper is ``bot.slack.render.paper_blocks`` (title, venue, authors, snippet, why it
matched, and the "Similar papers" / "Share to channel" buttons the actions listener handles),
numbered across the whole message so every action id is unique. In a direct message, "Share
to channel" opens a channel picker (there is no channel to share into). Every other block is
``render.section`` / ``render.context`` too: escaped, ``verbatim`` mrkdwn, cut at Slack's limits.
Papers that do not fit in Slack's 50 blocks are left out of the message *and* of the claim, so
they come next time.

A digest the member had posted in a channel (``owner``) is read by the whole channel, so it
says whose it is ("Paper digest for @Ada", a mention: it notifies Ada as the DM would have)
and speaks of "their" topics; its footer tells readers how to get a digest of their own
rather than listing commands only Ada can use. Its share button is "Share elsewhere" (the
picker): everyone there already sees the paper, and re-posting it into the same channel would
only repeat it, while passing it on to another channel is the useful thing left to do.
Both forms have the same number of blocks, so a plan is cut the same way in either.

A member who gave 👍/👎 may get a last section, "Recommended for you" (in a DM only: selection
leaves it out of a digest posted in a channel): each paper says why
("like the 3 papers you 👍, e.g. “…”"). A paper at least two teammates saved says so ("2
teammates also saved this": a count, never names). Both notes go in the paper's context line,
so they cost no block.

``digest_message`` makes one digest, every block a slack_sdk object. The batch (``SlackPoster``)
uses a ``DigestRenderer``: the same messages, byte for byte, with each paper's blocks made once
and reused across members (see its doc).
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import date
from typing import Any

from slack_sdk.models.blocks import DividerBlock, HeaderBlock
from slack_sdk.models.blocks.basic_components import MarkdownTextObject, PlainTextObject

from bot.engine.search import Engine, Hit, make_snippet, snippet_words
from bot.engine.text import words
from bot.english import count
from bot.slack import render
from digest.plan import DigestItem, DigestPlan

DIGEST_EVENT = "paperboy_digest"  # the message metadata's event_type
TOPIC_CHARS = 120
TOPIC_BLOCKS = 2  # a divider and the topic's line
# No "only you get this": a member may have their digest posted in a channel.
FOOTER = (
    "`/papers topics` lists the topics · `/papers digest time 08:30` changes the time · "
    "`/papers digest off` stops the digest"
)
CHANNEL_FOOTER = (
    "Want your own digest? `/papers subscribe &lt;topic&gt;` · `/papers help` shows the rest"
)
PREVIEW_NOTE = (
    "This is what a digest sent now would hold; nothing is marked as sent. "
    "`/papers digest now` sends it."
)


def _when(local_date: str) -> str:
    try:
        day = date.fromisoformat(local_date[:10])
    except ValueError:
        return ""
    return f"{day:%a} {day.day} {day:%b}"


class _Blocks:
    """How one digest's blocks are made: each a slack_sdk Block Kit object, serialised (and
    validated) as it is made. ``digest_message`` uses this; ``DigestRenderer`` reuses what
    many digests share."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def papers(self, paper_ids: list[str]) -> dict[str, dict[str, Any]]:
        return {p["id"]: p for p in self.engine.corpus.get_many(paper_ids)}

    def snippet(self, paper: dict[str, Any], why: list[str]) -> list[tuple[str, bool]]:
        terms = {w for term in why for w in words(term)}
        return make_snippet(paper.get("abstract") or paper.get("title") or "", terms)

    def paper(
        self, paper: dict[str, Any], item: DigestItem, index: int, elsewhere: bool, notes: list[str]
    ) -> list[dict[str, Any]]:
        """One paper's blocks (``render.paper_blocks``), numbered ``index``, ``notes`` in its
        context line."""
        # No score: a section lists new papers first, then older ones (each by the member's
        # taste once they have one), so scores would read out of order; "new" says why.
        hit = Hit(paper=paper, score=0.0, snippet=self.snippet(paper, item.why), why=item.why)
        one = render.paper_blocks(
            hit, index=index, share=True, similar=True, share_elsewhere=elsewhere
        )
        return [b.to_dict() for b in render.with_notes(one, notes)]

    def section(self, text: str) -> dict[str, Any]:
        return render.section(text).to_dict()

    def context(self, text: str) -> dict[str, Any]:
        return render.context(text).to_dict()

    def header(self, title: str) -> dict[str, Any]:
        text = PlainTextObject(text=render.clip(title, render.MAX_HEADER), emoji=True)
        return HeaderBlock(text=text).to_dict()

    def divider(self) -> dict[str, Any]:
        return DividerBlock().to_dict()


def _notes(item: DigestItem, titles: dict[str, str]) -> list[str]:
    """Whether the paper is new since the member's last digest, why a recommendation came,
    and how many teammates saved the paper (mrkdwn, escaped)."""
    notes = [":new: new"] if item.new else []
    if item.liked_count:
        notes.append(render.liked_note(item.liked_count, titles.get(item.liked_example or "")))
    if item.team_saves:  # selection notes it from TEAM_SAVES_SHOWN on
        notes.append(f":busts_in_silhouette: {item.team_saves} teammates also saved this")
    return notes


def digest_message(
    engine: Engine,
    plan: DigestPlan,
    local_date: str,
    *,
    digest_id: str | None = None,
    preview: bool = False,
    owner: str | None = None,
) -> tuple[dict[str, Any], DigestPlan]:
    """The message (``text``, ``blocks``, and ``metadata`` when ``digest_id`` is given) and the
    plan cut to the papers that fit. ``owner``: the member whose digest it is, when it is
    posted in a channel rather than their DM (see the module doc). For many digests at once,
    ``DigestRenderer`` makes the same messages for less."""
    return _compose(_Blocks(engine), plan, local_date, digest_id, preview, owner)


def _compose(
    make: _Blocks,
    plan: DigestPlan,
    local_date: str,
    digest_id: str | None,
    preview: bool,
    owner: str | None,
) -> tuple[dict[str, Any], DigestPlan]:
    items = {i.paper_id: i for s in plan.sections for i in s.items}
    papers = make.papers(plan.paper_ids)
    examples = [i.liked_example for s in plan.sections for i in s.items if i.liked_example]
    titles = {p["id"]: p.get("title") or p["id"] for p in make.papers(examples).values()}
    when = f" · {_when(local_date)}" if _when(local_date) else ""
    if preview:
        title = "Preview of your next digest"
    elif owner:
        title = f"Paper digest for {render.mention(owner, 'a member')}{when}"
    else:
        title = f"Your paper digest{when}"
    # A header is plain text, where a mention would show as "<@U1>": a bold section instead.
    head = [make.section(f"*{title}*") if owner and not preview else make.header(title)]
    tail = [make.divider()]
    tail += [make.context(PREVIEW_NOTE)] if preview else []
    tail.append(make.context(CHANNEL_FOOTER if owner else FOOTER))
    room = render.MAX_BLOCKS - len(head) - len(tail) - 1  # one for the summary line
    body: list[dict[str, Any]] = []
    kept: list[str] = []
    number = 0
    for section in plan.sections:
        if section.recommended and owner:
            # What the member likes is theirs alone. Selection leaves the section out of a
            # channel digest; a plan claimed for the DM and sent to a channel chosen since
            # (a retry) drops it here.
            continue
        fitted: list[dict[str, Any]] = []
        shown: set[str] = set()
        for paper_id in (i.paper_id for i in section.items if i.paper_id in papers):
            item = items[paper_id]  # as the id's last item (a plan holds each paper once)
            notes = _notes(item, titles)
            one = make.paper(papers[paper_id], item, number + 1, bool(owner), notes)
            if item.saved and not owner:  # a copy: the batch shares the blocks it made
                one = render.with_choice(one, paper_id, {"kind": None, "saved": True})
            if len(body) + TOPIC_BLOCKS + len(fitted) + len(one) > room:
                break
            number += 1
            fitted.extend(one)
            kept.append(paper_id)
            shown.add(paper_id)
        if fitted:
            # Counts what is shown, so the plan cut to what fits renders the same message.
            new = sum(1 for i in section.items if i.paper_id in shown and i.new)
            label = f"*{render.clip_escaped(section.query, TOPIC_CHARS)}*"
            tally = count(len(shown), "paper") + (f", {new} new" if new else "")
            icon = ":sparkles:" if section.recommended else ":label:"
            body += [make.divider(), make.section(f"{icon} {label} · {tally}"), *fitted]
    trimmed = plan.keeping(kept)
    topics = sum(not s.recommended for s in trimmed.sections)
    recommended = sum(len(s.items) for s in trimmed.sections if s.recommended)
    whose = "their" if owner else "your"
    summary = f"{count(trimmed.size - recommended, 'paper')} on {topics} of {whose} topics" + (
        f", {trimmed.new_count} new since {whose} last digest" if trimmed.new_count else ""
    )
    summary += f", {recommended} recommended" if recommended else ""
    blocks = head + [make.context(summary)] + body + tail
    text = f"{title}: {summary}"
    names = ", ".join(s.query for s in trimmed.sections)
    if names:
        text += f" ({render.clip_escaped(names, render.MAX_FALLBACK_TEXT - len(text) - 3)})"
    message = render.as_message(text, blocks)
    if digest_id:
        message["metadata"] = {
            "event_type": DIGEST_EVENT,
            "event_payload": {"digest_id": digest_id, "papers": trimmed.size},
        }
    return message, trimmed


#: How often (seconds) a ``DigestRenderer`` asks whether the corpus changed: a paper changed
#: in the last second may still be shown as it was, as if the digest had gone a second earlier.
VERSION_CHECKED_EVERY = 1.0
#: What a ``DigestRenderer`` keeps (papers' blocks, snippets, other blocks, each) before it
#: starts afresh: a batch of 1,000 digests of 10 papers needs at most 10,000 papers' blocks.
KEPT_BLOCKS = 20_000
#: Papers ``DigestRenderer.prepare`` reads in one query.
PAPERS_PER_QUERY = 5_000


class DigestRenderer(_Blocks):
    """Many digests (the digest batch), each message exactly ``digest_message``'s, at a
    fraction of its cost.

    A paper's blocks are the same in every digest that shows it but for its number (the
    "3. " before its title, and its buttons' action ids) and its notes (a recommendation's
    why, teammates' saves). So they are made as ``digest_message`` makes them (slack_sdk
    objects, validated as they are serialised) the first time, and every later digest gets
    a copy with its own number and notes put in. They are keyed by everything else they
    show: the paper, the terms it matched (its snippet), the share button's kind,
    and how many digits its number has (the snippet's room in Slack's 3000 characters counts
    them). Snippets, papers and the other blocks (dividers, topic lines, footers) are kept
    too. All of it is dropped when the corpus changes (its version, read at most every
    ``VERSION_CHECKED_EVERY`` seconds of ``clock``) or grows past ``KEPT_BLOCKS``. Messages
    share the kept dicts: never change a message's blocks in place (``render.with_choice``
    copies). Safe to share between threads.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        kept: int = KEPT_BLOCKS,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__(engine)
        self.kept = kept
        self.clock = clock
        self._lock = threading.Lock()
        self._version: int | None = None
        self._checked = -math.inf  # when the corpus version was last read
        self._start_afresh(None)

    def message(
        self,
        plan: DigestPlan,
        local_date: str,
        *,
        digest_id: str | None = None,
        preview: bool = False,
        owner: str | None = None,
    ) -> tuple[dict[str, Any], DigestPlan]:
        """``digest_message(engine, plan, local_date, ...)``, from what is kept."""
        self._current()
        return _compose(self, plan, local_date, digest_id, preview, owner)

    def prepare(self, plans: Iterable[DigestPlan]) -> None:
        """Read the papers of many digests (a batch) in a few queries, not one per digest.
        Optional: ``message`` reads what is missing."""
        self._current()
        plans = list(plans)
        wanted = {
            paper_id
            for plan in plans
            for section in plan.sections
            for item in section.items
            for paper_id in (item.paper_id, item.liked_example)
            if paper_id and paper_id not in self._papers
        }
        snippets = {
            (item.paper_id, tuple(item.why))
            for plan in plans
            for section in plan.sections
            for item in section.items
        }
        shown = Counter(
            paper_id for paper_id, why in snippets if (paper_id, why) not in self._snippets
        )
        with self._lock:
            self._scans_left = {p: n for p, n in shown.items() if n > 1}
            self._scanned = {}
        if len(self._papers) + len(wanted) > self.kept:
            return  # more than is kept: read digest by digest
        missing = sorted(wanted)
        for start in range(0, len(missing), PAPERS_PER_QUERY):
            batch = missing[start : start + PAPERS_PER_QUERY]
            self._papers.update((p["id"], p) for p in self.engine.corpus.get_many(batch))

    def _current(self) -> None:
        """Start afresh when the corpus changed (or too much is kept)."""
        now = self.clock()
        if now - self._checked >= VERSION_CHECKED_EVERY:
            # One query a second, not one a digest: under a batch's posting threads each
            # query in this thread waits for the GIL again.
            version = self.engine.corpus.version
            with self._lock:
                self._checked = now
                if version != self._version:
                    self._start_afresh(version)
        with self._lock:
            kept = (self._papers, self._snippets, self._paper_blocks, self._blocks, self._texts)
            if max(map(len, kept)) > self.kept:
                self._start_afresh(self._version)

    def _start_afresh(self, version: int | None) -> None:
        self._version = version
        self._papers: dict[str, dict[str, Any]] = {}
        self._snippets: dict[tuple[str, tuple[str, ...]], list[tuple[str, bool]]] = {}
        self._paper_blocks: dict[tuple[Any, ...], tuple[int, list[dict[str, Any]]]] = {}
        self._blocks: dict[tuple[str, str], dict[str, Any]] = {}
        self._shapes: dict[bool, tuple[str, list[dict[str, Any]]]] = {}
        self._text_shapes: dict[str, dict[str, Any]] = {}
        self._scanned: dict[str, tuple[str, tuple[list[tuple[int, int, str]], bool]]] = {}
        self._scans_left: dict[str, int] = {}  # snippets of the paper the batch will make
        self._texts: dict[Any, Any] = {}  # render.paper_texts' memo

    def papers(self, paper_ids: list[str]) -> dict[str, dict[str, Any]]:
        known = self._papers
        missing = [i for i in dict.fromkeys(paper_ids) if i not in known]
        if missing:
            known.update((p["id"], p) for p in self.engine.corpus.get_many(missing))
        return {i: known[i] for i in paper_ids if i in known}

    def snippet(self, paper: dict[str, Any], why: list[str]) -> list[tuple[str, bool]]:
        key = (paper["id"], tuple(why))
        pieces = self._snippets.get(key)
        if pieces is None:
            text = paper.get("abstract") or paper.get("title") or ""
            terms = {w for term in why for w in words(term)}
            scanned = self._scan(paper["id"], text)
            pieces = self._snippets[key] = make_snippet(text, terms, scanned=scanned)
        return pieces

    def _scan(self, paper_id: str, text: str) -> tuple[list[tuple[int, int, str]], bool]:
        """The abstract's words (``snippet_words``, most of a snippet's cost), read once for
        all the terms the batch shows the paper with (``prepare`` counts them), and kept only
        until its last snippet: about 25 kB a paper. Kept with the text it was read from, so
        a thread that rendered the paper as it was before the corpus changed cannot leave
        its words for the new text."""
        left = self._scans_left.get(paper_id, 0)
        if left <= 1:
            self._scans_left.pop(paper_id, None)
            read, scanned = self._scanned.pop(paper_id, (None, None))
            return scanned if read == text and scanned is not None else snippet_words(text)
        self._scans_left[paper_id] = left - 1
        read, scanned = self._scanned.get(paper_id, (None, None))
        if read != text or scanned is None:
            scanned = snippet_words(text)
            self._scanned[paper_id] = (text, scanned)
        return scanned

    def paper(
        self, paper: dict[str, Any], item: DigestItem, index: int, elsewhere: bool, notes: list[str]
    ) -> list[dict[str, Any]]:
        key = (paper["id"], tuple(item.why), elsewhere, len(str(index)))
        made = self._paper_blocks.get(key)
        if made is None:
            made = self._paper_blocks[key] = (index, self._made(paper, item, index, elsewhere))
        return _renumbered(*made, index, [self._kept("note", n) for n in notes])

    def _made(
        self, paper: dict[str, Any], item: DigestItem, index: int, elsewhere: bool
    ) -> list[dict[str, Any]]:
        """The paper's blocks: the first paper's as ``digest_message`` makes them, which
        then serve as the shape every other paper's texts, id and number are put in."""
        paper_id = str(paper["id"])
        shape = self._shapes.get(elsewhere)
        if shape is None or not 0 < len(paper_id) <= render.MAX_BUTTON_VALUE:
            blocks = super().paper(paper, item, index, elsewhere, [])
            if shape is None and _is_shape(blocks, paper_id):
                self._shapes[elsewhere] = (paper_id, blocks)
            return blocks
        hit = Hit(paper=paper, score=0.0, snippet=self.snippet(paper, item.why), why=item.why)
        text, facts = render.paper_texts(hit, index=index, memo=self._texts)
        # Cut as render.section and render.context cut them.
        cut = render.mrkdwn
        return _retargeted(*shape, cut(text).text, cut(facts).text, paper_id, index)

    def section(self, text: str) -> dict[str, Any]:
        return self._kept("section", text)

    def context(self, text: str) -> dict[str, Any]:
        return self._kept("context", text)

    def header(self, title: str) -> dict[str, Any]:
        return self._kept("header", title)

    def divider(self) -> dict[str, Any]:
        return self._kept("divider", "")

    def _kept(self, kind: str, text: str) -> dict[str, Any]:
        block = self._blocks.get((kind, text))
        if block is None:
            block = self._blocks[(kind, text)] = self._block(kind, text)
        return block

    def _block(self, kind: str, text: str) -> dict[str, Any]:
        """A block (or a note's text object) as ``_Blocks`` makes it; a section or context
        line of one text in the shape slack_sdk gave the first one."""
        if kind == "note":  # as render.with_notes adds it to a context line
            return MarkdownTextObject(text=text, verbatim=True).to_dict()
        if kind not in ("section", "context"):
            return getattr(super(), kind)(*([text] if kind != "divider" else []))
        shape = self._text_shapes.get(kind)
        if shape is None or not text:
            block = getattr(super(), kind)(text)
            if text:
                self._text_shapes[kind] = block
            return block
        cut = render.mrkdwn(text).text  # as render.section and render.context cut it
        if kind == "section":
            return {**shape, "text": {**shape["text"], "text": cut}}
        return {**shape, "elements": [{**shape["elements"][0], "text": cut}]}


def _is_shape(blocks: list[dict[str, Any]], paper_id: str) -> bool:
    """Whether a paper's blocks are as ``_retargeted`` expects them: a section, a context line
    of one text, buttons that each carry the paper's id."""
    return (
        [b["type"] for b in blocks] == ["section", "context", "actions"]
        and len(blocks[1]["elements"]) == 1
        and all(e.get("value") == paper_id for e in blocks[2]["elements"])
    )


def _retargeted(
    shape_id: str,
    shape: list[dict[str, Any]],
    text: str,
    facts: str,
    paper_id: str,
    index: int,
) -> list[dict[str, Any]]:
    """Another paper's blocks in ``shape`` (the blocks slack_sdk made for paper
    ``shape_id``): its section's text, its context line's, its id in the buttons, its
    number in their action ids."""
    section, context, actions = shape
    elements = [
        {**e, "action_id": f"{e['action_id'].rsplit(':', 1)[0]}:{index}", "value": paper_id}
        for e in actions["elements"]
    ]
    return [
        {**section, "text": {**section["text"], "text": text}},
        {**context, "elements": [{**context["elements"][0], "text": facts}]},
        {**actions, "elements": elements},
    ]


def _renumbered(
    made_as: int, blocks: list[dict[str, Any]], index: int, notes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A paper's blocks made for number ``made_as`` (same digits), numbered ``index`` (its
    section's "N. " and its buttons' ``action:N``), ``notes`` added to its context line as
    ``render.with_notes`` adds them; only the changed dicts are new."""
    out = []
    for block in blocks:
        kind = block["type"]
        if kind == "section" and index != made_as:
            text = block["text"]["text"]
            before, now = f"{made_as}. ", f"{index}. "
            if not text.startswith(before):
                raise ValueError(f"a digest paper's section must start with {before!r}")
            block = {**block, "text": {**block["text"], "text": now + text[len(before) :]}}
        elif kind == "actions" and index != made_as:
            elements = [
                {**e, "action_id": f"{e['action_id'].rsplit(':', 1)[0]}:{index}"}
                for e in block["elements"]
            ]
            block = {**block, "elements": elements}
        elif kind == "context" and notes:
            room = render.MAX_CONTEXT_ELEMENTS - len(block["elements"])
            block = {**block, "elements": block["elements"] + notes[:room]}
            notes = []  # the first context line only
        out.append(block)
    return out
