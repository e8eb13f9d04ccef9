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

A member who gave 👍/👎 may get a last section, "Recommended for you": each paper says why
("like the 3 papers you 👍, e.g. “…”"). A paper at least two teammates saved says so ("2
teammates also saved this": a count, never names). Both notes go in the paper's context line,
so they cost no block.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from slack_sdk.models.blocks import Block, DividerBlock, HeaderBlock
from slack_sdk.models.blocks.basic_components import PlainTextObject

from bot.engine.search import Engine, Hit, make_snippet
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


def _hits(engine: Engine, plan: DigestPlan) -> tuple[dict[str, Hit], dict[str, list[str]]]:
    """Each paper as a hit, and its notes (``_notes``)."""
    papers = {p["id"]: p for p in engine.corpus.get_many(plan.paper_ids)}
    examples = [i.liked_example for s in plan.sections for i in s.items if i.liked_example]
    titles = {p["id"]: p.get("title") or p["id"] for p in engine.corpus.get_many(examples)}
    hits, notes = {}, {}
    for section in plan.sections:
        for item in section.items:
            paper = papers.get(item.paper_id)
            if paper is None:  # removed from the corpus since the digest was chosen
                continue
            terms = {w for term in item.why for w in words(term)}
            snippet = make_snippet(paper.get("abstract") or paper.get("title") or "", terms)
            hits[item.paper_id] = Hit(paper=paper, score=item.score, snippet=snippet, why=item.why)
            notes[item.paper_id] = _notes(item, titles)
    return hits, notes


def _notes(item: DigestItem, titles: dict[str, str]) -> list[str]:
    """Why a recommendation came, and how many teammates saved the paper (mrkdwn, escaped)."""
    notes = []
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
    posted in a channel rather than their DM (see the module doc)."""
    hits, notes = _hits(engine, plan)
    when = f" · {_when(local_date)}" if _when(local_date) else ""
    if preview:
        title = "Preview of your next digest"
    elif owner:
        title = f"Paper digest for {render.mention(owner, 'a member')}{when}"
    else:
        title = f"Your paper digest{when}"
    head: list[Block] = [
        # A header is plain text, where a mention would show as "<@U1>": a bold section instead.
        render.section(f"*{title}*")
        if owner and not preview
        else HeaderBlock(
            text=PlainTextObject(text=render.clip(title, render.MAX_HEADER), emoji=True)
        )
    ]
    tail: list[Block] = [DividerBlock()]
    tail += [render.context(PREVIEW_NOTE)] if preview else []
    tail.append(render.context(CHANNEL_FOOTER if owner else FOOTER))
    room = render.MAX_BLOCKS - len(head) - len(tail) - 1  # one for the summary line
    body: list[Block] = []
    kept: list[str] = []
    number = 0
    for section in plan.sections:
        section_hits = [hits[i.paper_id] for i in section.items if i.paper_id in hits]
        fitted: list[Block] = []
        shown: set[str] = set()
        for hit in section_hits:
            one = render.paper_blocks(
                hit, index=number + 1, share=True, similar=True, share_elsewhere=bool(owner)
            )
            one = render.with_notes(one, notes.get(hit.id) or [])
            if len(body) + TOPIC_BLOCKS + len(fitted) + len(one) > room:
                break
            number += 1
            fitted.extend(one)
            kept.append(hit.id)
            shown.add(hit.id)
        if fitted:
            # Counts what is shown, so the plan cut to what fits renders the same message.
            new = sum(1 for i in section.items if i.paper_id in shown and i.new)
            label = f"*{render.clip_escaped(section.query, TOPIC_CHARS)}*"
            tally = count(len(shown), "paper") + (f", {new} new" if new else "")
            icon = ":sparkles:" if section.recommended else ":label:"
            body += [DividerBlock(), render.section(f"{icon} {label} · {tally}"), *fitted]
    trimmed = plan.keeping(kept)
    topics = sum(not s.recommended for s in trimmed.sections)
    recommended = sum(len(s.items) for s in trimmed.sections if s.recommended)
    whose = "their" if owner else "your"
    summary = f"{count(trimmed.size - recommended, 'paper')} on {topics} of {whose} topics" + (
        f", {trimmed.new_count} new since {whose} last digest" if trimmed.new_count else ""
    )
    summary += f", {recommended} recommended" if recommended else ""
    blocks = head + [render.context(summary)] + body + tail
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
